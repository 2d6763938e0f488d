/* hak_crash.c -- a short report when SIGSEGV or SIGBUS hits inside hakmem.
 *
 * Installed at start-up (HAKMEM_CRASH_HANDLER=1, the default).  A fault whose
 * program counter lies in hakmem's own code prints which entry point it was
 * in, the faulting address and the pointer argument, then the previous
 * disposition is restored and the faulting instruction re-executed, so the
 * signal is raised again as if hakmem had never been there (core dump, or
 * the program's own handler).  A fault elsewhere goes straight to the handler
 * the program had installed before us; a handler the program installs later
 * simply replaces ours.  Costs nothing on the fast paths. */
#include "hak_internal.h"
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <ucontext.h>

static struct sigaction hak_old_segv, hak_old_bus;
static uintptr_t hak_text_lo, hak_text_hi;

static int hak_find_text(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size; (void)arg;
    uintptr_t self = (uintptr_t)&hak_find_text;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (self >= lo && self < hi) { hak_text_lo = lo; hak_text_hi = hi; return 1; }
    }
    return 0;
}

static void hak_crash_handler(int sig, siginfo_t *si, void *ctx) {
    struct sigaction *old = sig == SIGSEGV ? &hak_old_segv : &hak_old_bus;
    uintptr_t pc = 0, arg = 0;
#if defined(__x86_64__)
    ucontext_t *uc = (ucontext_t *)ctx;
    pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    arg = (uintptr_t)uc->uc_mcontext.gregs[REG_RDI];
#elif defined(__aarch64__)
    ucontext_t *uc = (ucontext_t *)ctx;
    pc = (uintptr_t)uc->uc_mcontext.pc;
    arg = (uintptr_t)uc->uc_mcontext.regs[0];
#endif
    if (pc >= hak_text_lo && pc < hak_text_hi) {
        Dl_info info;
        const char *op = (dladdr((void *)pc, &info) && info.dli_sname) ? info.dli_sname : "?";
        hak_message("hakmem: %s inside the allocator (in %s, near %s()): fault address %p, pointer argument %p\n",
                    sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", hakmem_build_variant(), op,
                    si ? si->si_addr : NULL, (void *)arg);
        hak_message("hakmem: this usually means heap corruption: a write past a block, or a use after free\n");
    } else if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, ctx);
        return;
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    /* Re-raise: restore the previous disposition (default if it ignored the
     * signal) and return; the faulting instruction runs again. */
    struct sigaction dfl;
    if (old->sa_handler == SIG_IGN && !(old->sa_flags & SA_SIGINFO)) {
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        old = &dfl;
    }
    sigaction(sig, old, NULL);
}

void hak_crash_install(void) {
    if (!hak_opt.crash_handler) return;
    dl_iterate_phdr(hak_find_text, NULL);
    if (!hak_text_lo) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = hak_crash_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &hak_old_segv);
    sigaction(SIGBUS, &sa, &hak_old_bus);
}
