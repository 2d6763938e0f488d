/* hak_arch_x86_64.h -- x86-64 (see hak_arch.h for what each name means). */
#ifndef HAK_ARCH_X86_64_H
#define HAK_ARCH_X86_64_H

#define HAK_ARCH_NAME "x86_64"
/* 4-level page tables: user space is [0, 2^47).  With 5-level tables the
 * kernel hands out addresses above 2^47 only for a hint above it, which
 * hakmem never gives (hak_os.c checks every mapping anyway). */
#define HAK_ARCH_ADDRESS_BITS 47
#define HAK_ARCH_PAGE_MIN 4096
#define HAK_ARCH_PAGE_MAX 4096
#define HAK_ARCH_CACHE_LINE 64
/* initial-exec: the heap pointer is one %fs-relative load after a GOT load
 * of its offset (the library is loaded at start-up or by LD_PRELOAD) */
#define HAK_ARCH_TLS_MODEL "initial-exec"

static inline void hak_arch_pause(void) { __builtin_ia32_pause(); }
static inline void hak_arch_compiler_barrier(void) { __asm__ __volatile__("" ::: "memory"); }

#define HAK_ARCH_UC_PC(uc)   ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RIP])
#define HAK_ARCH_UC_SP(uc)   ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RSP])
#define HAK_ARCH_UC_ARG0(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RDI])
#define HAK_ARCH_UC_FP(uc)   ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RBP])   /* the frame pointer: a report's stack walk */

#endif
