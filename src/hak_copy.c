/* hak_copy.c -- hakmem's own memcpy, memmove and memset in the hardened
 * build.  That build exports checked versions of these names
 * (hak_memcheck.c); every other file of it calls these instead, by the
 * names hak_raw_* (hak_internal.h redirects the declarations, so gcc's own
 * calls for struct copies and loops come here too).  Each is glibc's
 * implementation, reached through its fortified entry (__memcpy_chk and
 * friends, exported by glibc and never by hakmem) with no limit: the same
 * optimized code, without the exported symbol that would lead back to the
 * check.  Empty in the other builds. */
#include "hak_internal.h"

#if defined(HAK_HARDENED) && HAK_HARDENED
#include <stdint.h>

/* (under names of their own: gcc would otherwise know them as builtins and
 * turn a call with no limit back into memcpy) */
extern void *hak_glibc_memcpy_chk(void *d, const void *s, size_t n, size_t room) __asm__("__memcpy_chk");
extern void *hak_glibc_memmove_chk(void *d, const void *s, size_t n, size_t room) __asm__("__memmove_chk");
extern void *hak_glibc_memset_chk(void *d, int c, size_t n, size_t room) __asm__("__memset_chk");

/* (defined under the C names, which hak_internal.h maps to hak_raw_*) */
void *memcpy(void *d, const void *s, size_t n) { return hak_glibc_memcpy_chk(d, s, n, SIZE_MAX); }
void *memmove(void *d, const void *s, size_t n) { return hak_glibc_memmove_chk(d, s, n, SIZE_MAX); }
void *memset(void *d, int c, size_t n) { return hak_glibc_memset_chk(d, c, n, SIZE_MAX); }
#endif
