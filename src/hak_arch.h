/* hak_arch.h -- chooses the one header that holds everything specific to
 * the processor architecture (src/arch/hak_arch_<arch>.h).  Each defines:
 *
 *   HAK_ARCH_NAME             "x86_64", "aarch64"
 *   HAK_ARCH_ADDRESS_BITS     user address space the region map describes:
 *                             what mmap(NULL) hands out without a high hint
 *   HAK_ARCH_PAGE_MIN/MAX     the OS page sizes the kernel may use; the one
 *                             in use is read at run time (hak_os_page_size)
 *   HAK_ARCH_CACHE_LINE       destructive-interference size, for padding
 *   HAK_ARCH_TLS_MODEL        TLS model of the thread's heap pointer
 *   hak_arch_pause()          spin-wait hint
 *   hak_arch_compiler_barrier()
 *   HAK_ARCH_UC_PC(uc), HAK_ARCH_UC_SP(uc), HAK_ARCH_UC_ARG0(uc)
 *                             the crash handler's registers from a ucontext_t
 *                             (expanded only where <ucontext.h> is included)
 *
 * Atomics are C11 <stdatomic.h> everywhere; the orderings are chosen for
 * the weakest model supported (Arm), see docs/design.md, "Memory ordering". */
#ifndef HAK_ARCH_H
#define HAK_ARCH_H

#if defined(__x86_64__)
#include "arch/hak_arch_x86_64.h"
#elif defined(__aarch64__)
#include "arch/hak_arch_aarch64.h"
#else
#error "hakmem: unsupported architecture (supported: x86-64, aarch64); add src/arch/hak_arch_<arch>.h"
#endif

#define HAK_TLS __thread __attribute__((tls_model(HAK_ARCH_TLS_MODEL)))

#endif
