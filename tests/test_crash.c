/* test_crash.c -- hakmem's SIGSEGV/SIGBUS handler (src/hak_crash.c), one
 * case per run, chosen by argv[1]; tests/suite_crash.sh runs each case in a
 * subprocess under hakmem and checks the output and how the process ended.
 *
 * Cases named pre_* install a program handler from .preinit_array, which
 * runs before any library constructor: hakmem's constructor then installs
 * its handler on top of the program's and must pass signals on to it as the
 * kernel would have (mask, SA_RESETHAND, SA_NODEFER, SA_SIGINFO).  Each of
 * them first prints "hakmem on top" if that is what happened.
 *
 * "SURVIVED" means the program ran on where it should have died. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

static void *volatile sink;
static sigjmp_buf jump;
static volatile sig_atomic_t calls;

/* write(2)-only output: usable inside signal handlers */
static void say(const char *s) { ssize_t r = write(1, s, strlen(s)); (void)r; }
static void say_flag(const char *what, int v) { say(what); say(v ? "1\n" : "0\n"); }

static int blocked(int sig) {
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, sig);
}

/* ---- program handlers, installed before hakmem's ---- */

static void h_count(int sig) {
    (void)sig;
    calls++;
    say("handler called\n");
    if (calls >= 3) { say("handler called again and again\n"); _exit(7); }
}

/* for a real fault: report, then leave the faulting code */
static void h_mask_jump(int sig) {
    say_flag("in handler: SIGUSR1 blocked=", blocked(SIGUSR1));
    say_flag("in handler: SIGSEGV blocked=", blocked(SIGSEGV));
    siglongjmp(jump, 1);
}
static void h_mask(int sig) {
    (void)sig;
    say_flag("in handler: SIGUSR1 blocked=", blocked(SIGUSR1));
    say_flag("in handler: SIGSEGV blocked=", blocked(SIGSEGV));
}

static volatile int expect_code;
static void *volatile expect_addr;
static void h_info(int sig, siginfo_t *si, void *ctx) {
    int ok = sig == SIGSEGV && si && ctx && si->si_signo == SIGSEGV && si->si_code == expect_code;
    if (ok && expect_code == SEGV_MAPERR) {
        ok = si->si_addr == expect_addr;
        say(ok ? "siginfo fault ok\n" : "siginfo fault WRONG\n");
        siglongjmp(jump, 1);
    }
    if (ok) ok = si->si_pid == getpid() && si->si_value.sival_int == 4242;
    say(ok ? "siginfo queue ok\n" : "siginfo queue WRONG\n");
}

static void install(void (*h)(int), int flags, int mask_usr1) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (mask_usr1) sigaddset(&sa.sa_mask, SIGUSR1);
    sigaction(SIGSEGV, &sa, NULL);
}

static void *program_handler;   /* what the pre_* case installed */

static void test_preinit(int argc, char **argv, char **envp) {
    (void)envp;
    const char *c = argc > 1 ? argv[1] : "";
    if (strncmp(c, "pre_", 4) != 0) return;
    if (!strcmp(c, "pre_resethand_raise") || !strcmp(c, "pre_resethand_fault")) {
        install(h_count, SA_RESETHAND, 0);
    } else if (!strcmp(c, "pre_mask_raise")) {
        install(h_mask, 0, 1);
    } else if (!strcmp(c, "pre_mask_fault")) {
        install(h_mask_jump, 0, 1);
    } else if (!strcmp(c, "pre_mask_nodefer")) {
        install(h_mask, SA_NODEFER, 1);
    } else if (!strcmp(c, "pre_siginfo")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = h_info;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
    } else if (!strcmp(c, "pre_ignored")) {
        install(SIG_IGN, 0, 0);
    } else {
        return;
    }
    struct sigaction cur;
    sigaction(SIGSEGV, NULL, &cur);
    program_handler = (void *)cur.sa_handler;
}
__attribute__((section(".preinit_array"), used))
static void (*const test_preinit_entry)(int, char **, char **) = test_preinit;

/* ---- a thread that spends its time inside hakmem ---- */

static _Atomic unsigned long progress;
static void *busy(void *arg) {
    (void)arg;
    void *keep[64] = { 0 };
    for (unsigned long i = 0;; i++) {
        unsigned k = (unsigned)(i * 2654435761u) % 64;
        free(keep[k]);
        keep[k] = malloc(16 + (i * 40503u) % 3000);
        atomic_store(&progress, i);
    }
    return NULL;
}
/* Wait until the busy thread has done another million allocations: a signal
 * sent to it before this was delivered long ago (it is delivered before the
 * thread runs user code again, or within an interrupt's latency). */
static void wait_progress(void) {
    unsigned long start = atomic_load(&progress);
    while (atomic_load(&progress) - start < 1000000) sched_yield();
}
static pthread_t start_busy(void) {
    pthread_t t;
    pthread_create(&t, NULL, busy, NULL);
    while (atomic_load(&progress) < 1000) sched_yield();
    return t;
}

static void *free_in_thread(void *p) { free(p); return NULL; }
static void fault_at(uintptr_t addr) { int *volatile p = (int *)addr; *p = 1; }

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strncmp(c, "pre_", 4)) {
        struct sigaction cur;
        sigaction(SIGSEGV, NULL, &cur);
        if (!program_handler) { printf("preinit did not run\n"); return 3; }
        if ((void *)cur.sa_handler == program_handler) { printf("program handler still on top\n"); return 3; }
        printf("hakmem on top\n");
    }
    if (!strcmp(c, "fault_inside")) {
        /* use after free: smash a free block's link, then allocate */
        char **p = malloc(48);
        free(p);
        *p = (char *)0x10;
        for (int i = 0; i < 1000; i++) sink = malloc(48);
    } else if (!strcmp(c, "fault_internal")) {
        /* a remote free into a full page goes to the owner's delayed list;
         * a use after free smashes its link, and the owner faults while it
         * takes the delayed frees, deep in its slow path.  The first block
         * lies in the class's first page, full (in the full queue) once six
         * pages' worth of its blocks are out. */
        void **p = malloc(48);
        for (int i = 0; i < 6 * 65536 / 48; i++) sink = malloc(48);
        pthread_t t;
        pthread_create(&t, NULL, free_in_thread, p);
        pthread_join(t, NULL);
        *p = (void *)0x10;
        for (int i = 0; i < 100000; i++) sink = malloc(48);
    } else if (!strcmp(c, "fault_outside")) {
        sink = malloc(48);
        fault_at(0x10);
    } else if (!strcmp(c, "kill_main")) {
        sink = malloc(48);
        kill(getpid(), SIGSEGV);
    } else if (!strcmp(c, "raise_main")) {
        raise(SIGSEGV);
    } else if (!strcmp(c, "sigbus_fault")) {
        /* a real SIGBUS outside hakmem: a mapping past the end of its file */
        FILE *f = tmpfile();
        char *m = f ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0) : MAP_FAILED;
        if (m == MAP_FAILED) { printf("cannot map a file\n"); return 3; }
        m[0] = 1;
    } else if (!strcmp(c, "sigbus_kill")) {
        kill(getpid(), SIGBUS);
    } else if (!strcmp(c, "pthread_kill_busy")) {
        /* sent to a thread that is allocating and freeing in a loop */
        pthread_t t = start_busy();
        pthread_kill(t, SIGSEGV);
        wait_progress();
    } else if (!strcmp(c, "kill_busy")) {
        /* process-directed: only the busy thread can take it */
        pthread_t t = start_busy();
        (void)t;
        sigset_t segv;
        sigemptyset(&segv);
        sigaddset(&segv, SIGSEGV);
        pthread_sigmask(SIG_BLOCK, &segv, NULL);
        kill(getpid(), SIGSEGV);
        wait_progress();
    } else if (!strcmp(c, "direct_inside")) {
        /* hakmem's handler called as the kernel would for a kill() that
         * finds the thread inside malloc: its PC in malloc, si_code SI_USER */
        struct sigaction cur;
        sigaction(SIGSEGV, NULL, &cur);
        if (!(cur.sa_flags & SA_SIGINFO) || (void *)cur.sa_sigaction == (void *)SIG_DFL) {
            printf("no SA_SIGINFO handler installed\n");
            return 3;
        }
        uintptr_t pc = (uintptr_t)dlsym(RTLD_DEFAULT, "malloc") + 4;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        si.si_signo = SIGSEGV;
        si.si_code = SI_USER;
        si.si_pid = getpid();
        si.si_uid = getuid();
        ucontext_t uc;
        memset(&uc, 0, sizeof uc);
#if defined(__x86_64__)
        uc.uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
#elif defined(__aarch64__)
        uc.uc_mcontext.pc = pc;
#else
        printf("SKIP: no PC in ucontext on this architecture\n");
        return 0;
#endif
        cur.sa_sigaction(SIGSEGV, &si, &uc);
    } else if (!strcmp(c, "pre_resethand_raise")) {
        raise(SIGSEGV);
        struct sigaction cur;
        sigaction(SIGSEGV, NULL, &cur);
        printf("calls=%d disposition %s\n", (int)calls, cur.sa_handler == SIG_DFL ? "default" : "not default");
        raise(SIGSEGV);   /* default now: dies */
    } else if (!strcmp(c, "pre_resethand_fault")) {
        fault_at(0x10);   /* handler once, then the default action */
    } else if (!strcmp(c, "pre_mask_raise") || !strcmp(c, "pre_mask_nodefer")) {
        raise(SIGSEGV);
        say_flag("after: SIGUSR1 blocked=", blocked(SIGUSR1));
        say_flag("after: SIGSEGV blocked=", blocked(SIGSEGV));
        return 0;
    } else if (!strcmp(c, "pre_mask_fault")) {
        if (sigsetjmp(jump, 1) == 0) fault_at(0x10);
        say_flag("after: SIGUSR1 blocked=", blocked(SIGUSR1));
        return 0;
    } else if (!strcmp(c, "pre_siginfo")) {
        expect_code = SEGV_MAPERR;
        expect_addr = (void *)0x20;
        if (sigsetjmp(jump, 1) == 0) fault_at(0x20);
        expect_code = SI_QUEUE;
        sigqueue(getpid(), SIGSEGV, (union sigval){ .sival_int = 4242 });
        return 0;
    } else if (!strcmp(c, "pre_ignored")) {
        kill(getpid(), SIGSEGV);
        raise(SIGSEGV);
        kill(getpid(), SIGSEGV);
        printf("ignored\n");
        fault_at(0x10);   /* a fault cannot be ignored: dies */
    } else {
        fprintf(stderr, "test_crash: unknown case '%s'\n", c);
        return 2;
    }
    printf("SURVIVED\n");
    return 0;
}
