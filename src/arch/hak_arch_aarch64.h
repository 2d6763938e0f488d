/* hak_arch_aarch64.h -- 64-bit Arm (see hak_arch.h for what each name means). */
#ifndef HAK_ARCH_AARCH64_H
#define HAK_ARCH_AARCH64_H

#define HAK_ARCH_NAME "aarch64"
/* arm64 kernels are built with 39-, 42-, 47-, 48- or 52-bit user spaces
 * (by page size and levels).  A 52-bit kernel hands out addresses above
 * 2^48 only for a hint above it, as x86-64 with 5-level tables does; every
 * smaller space lies inside 2^48.  So the map covers 48 bits (128 MiB of
 * lazily touched BSS), and hak_os.c still checks every mapping. */
#define HAK_ARCH_ADDRESS_BITS 48
/* 4 KiB, 16 KiB or 64 KiB, chosen when the kernel is built */
#define HAK_ARCH_PAGE_MIN 4096
#define HAK_ARCH_PAGE_MAX 65536
/* 64 bytes on most cores; 128 on Apple's and some Neoverse prefetch pairs */
#define HAK_ARCH_CACHE_LINE 128
/* initial-exec: tpidr_el0 plus the offset from the GOT */
#define HAK_ARCH_TLS_MODEL "initial-exec"

static inline void hak_arch_pause(void) { __asm__ __volatile__("yield" ::: "memory"); }
static inline void hak_arch_compiler_barrier(void) { __asm__ __volatile__("" ::: "memory"); }

#define HAK_ARCH_UC_PC(uc)   ((uintptr_t)(uc)->uc_mcontext.pc)
#define HAK_ARCH_UC_SP(uc)   ((uintptr_t)(uc)->uc_mcontext.sp)
#define HAK_ARCH_UC_ARG0(uc) ((uintptr_t)(uc)->uc_mcontext.regs[0])
#define HAK_ARCH_UC_FP(uc)   ((uintptr_t)(uc)->uc_mcontext.regs[29])   /* the frame pointer: a report's stack walk */

#endif
