/* hak_prefix.h -- force-included (-include tests/hak_prefix.h) into the test
 * sources for the sanitizer and valgrind builds.
 *
 * Those builds compile hakmem with -DHAK_NO_OVERRIDE, so the library exports
 * only hakmem_* names and the sanitizer (or valgrind) keeps its own malloc.
 * This header renames the standard entry points used by the tests to their
 * hakmem_ equivalents so the tests exercise hakmem anyway.
 *
 * Every system header the tests use is included here first, before the
 * macros exist, so the system declarations keep their own names.
 */
#ifndef HAK_PREFIX_H
#define HAK_PREFIX_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#ifdef __cplusplus
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <new>
#endif
#include <stdlib.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <unistd.h>
#include <pthread.h>
#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "hakmem.h"

#define HAK_PREFIX_BUILD 1

#define malloc             hakmem_malloc
#define free               hakmem_free
#define calloc             hakmem_calloc
#define realloc            hakmem_realloc
#define reallocarray       hakmem_reallocarray
#define posix_memalign     hakmem_posix_memalign
#define aligned_alloc      hakmem_aligned_alloc
#define memalign           hakmem_memalign
#define valloc             hakmem_valloc
#define pvalloc            hakmem_pvalloc
#define malloc_usable_size hakmem_usable_size
#define free_sized         hakmem_free_sized
#define free_aligned_sized hakmem_free_aligned_sized

#endif /* HAK_PREFIX_H */
