/* hostile.c -- hostile environments for tests/suite_hostile.sh (issue 36).
 * Built twice (tests/hostile.mk):
 *
 * build/tests/hostile, the launcher:
 *   hostile [ENV...] [--probe] [--] CMD [ARG...]
 * sets up each ENV, then runs CMD (execvp):
 *   --no-proc        a mount namespace of its own where /proc is unmounted
 *                    (detached; an empty tmpfs over it if that fails)
 *   --pid-ns         a PID namespace of its own, /proc left as it is (the
 *                    parent's: it knows the program's pids and tids by other
 *                    numbers).  The launcher forks the namespace's init (pid
 *                    1), which runs CMD as pid 2, reaps orphans, and exits
 *                    with CMD's status (128 + N if a signal N ended it: an
 *                    init cannot die by its own signal); the outer launcher
 *                    exits with that status.  If the outer launcher dies
 *                    (the time limit's SIGTERM or SIGKILL), the init gets
 *                    SIGKILL (PR_SET_PDEATHSIG) and the kernel kills every
 *                    process of the namespace with it: a limit kept outside
 *                    the namespace ends all of it.
 *   --block-signals  every blockable signal blocked (the mask survives exec)
 *   --nofile N       RLIMIT_NOFILE N, soft and hard (as `ulimit -n N`), with
 *                    every descriptor but 0, 1 and 2 closed first (make's
 *                    jobserver pipe, say: the limit counts descriptor
 *                    numbers, so an inherited one would take the room the
 *                    program has)
 * --probe runs no command but checks that the environment holds: exit 0
 * and one line "hostile: ..." saying what was seen, 1 if it does not hold.
 * Whatever the kernel refuses (unshare, mount, setrlimit) ends the launcher
 * with status 77 and a line "hostile: cannot ...": the suite SKIPs the
 * environment with that reason.
 * Also: `hostile --probe-open` opens /dev/null after start-up and exits 0 if
 * it could (the check that the seccomp helper below is in force: it must
 * die by SIGSYS instead).
 *
 * build/tests/hostile_seccomp.so (-DHOSTILE_SECCOMP_SO), a helper to preload
 * after the allocator (LD_PRELOAD="libhakmem.so hostile_seccomp.so"): a
 * filter that kills the process (SECCOMP_RET_KILL_PROCESS, SIGSYS) on open,
 * openat and openat2 -- or on any system call of another architecture's
 * numbering -- installed once start-up is over: its __libc_start_main calls
 * glibc's with a main that installs the filter and then calls the
 * program's, so the loader has opened every library and every constructor
 * (hakmem's too) has run; the program's own stdout and stderr are already
 * open, and libgcc_s.so.1 is loaded (glibc's pthread_exit would open it).
 * An exec under the filter dies loading its libraries: the programs
 * run under it must neither exec nor open a file (suite_hostile.sh says
 * which run there).  If the filter cannot be installed, the program exits
 * with status 77 at once.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HOSTILE_SECCOMP_SO

#include <dlfcn.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define HOSTILE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HOSTILE_ARCH AUDIT_ARCH_AARCH64
#else
#error "hostile_seccomp.so: no audit architecture for this target"
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000U
#endif

#define LD_W(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

static void hostile_die(const char *what)
{
    char msg[160];
    int n = snprintf(msg, sizeof msg, "hostile_seccomp.so: %s: %s\n", what, strerror(errno));
    if (write(2, msg, n > 0 ? (size_t)n : 0) < 0)
        _exit(77);
    _exit(77);
}

static void hostile_install(void)
{
    struct sock_filter f[] = {
        LD_W(offsetof(struct seccomp_data, arch)),
        JEQ(HOSTILE_ARCH, 1, 0),
        RET(SECCOMP_RET_KILL_PROCESS),                  /* another numbering (i386 via int 0x80) */
        LD_W(offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
        RET(SECCOMP_RET_KILL_PROCESS),                  /* the x32 numbering */
        JEQ(SYS_open, 3, 0),                            /* (no open(2) on aarch64) */
#endif
        JEQ(SYS_openat, 2, 0),
        JEQ(SYS_openat2, 1, 0),
        RET(SECCOMP_RET_ALLOW),
        RET(SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = { (unsigned short)(sizeof f / sizeof f[0]), f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        hostile_die("prctl(PR_SET_NO_NEW_PRIVS)");
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
        hostile_die("prctl(PR_SET_SECCOMP)");
}

typedef int (*hostile_main_fn)(int, char **, char **);
static hostile_main_fn hostile_real_main;

static int hostile_main(int argc, char **argv, char **envp)
{
    /* glibc loads libgcc_s.so.1 at the first pthread_exit or cancellation
     * (to unwind the thread's stack): a sandboxed program loads it before
     * it forbids opens, and so does this helper (test_purger_exit ends its
     * main thread with pthread_exit) */
    if (!dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL))
        fprintf(stderr, "hostile_seccomp.so: warning: dlopen(libgcc_s.so.1): %s\n", dlerror());
    hostile_install();
    return hostile_real_main(argc, argv, envp);
}

/* glibc's entry calls this with the program's main: call glibc's with ours */
__attribute__((visibility("default")))
int __libc_start_main(hostile_main_fn main_fn, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    typedef int (*start_fn)(hostile_main_fn, int, char **, void (*)(void), void (*)(void),
                            void (*)(void), void *);
    start_fn real = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
    if (!real) {
        errno = ENOSYS;
        hostile_die("dlsym(__libc_start_main)");
    }
    hostile_real_main = main_fn;
    return real(hostile_main, argc, argv, init, fini, rtld_fini, stack_end);
}

#else /* the launcher */

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* the kernel refused: the suite skips the environment */
static void refused(const char *what)
{
    fprintf(stderr, "hostile: cannot %s: %s\n", what, strerror(errno));
    exit(77);
}

static void no_proc(void)
{
    if (unshare(CLONE_NEWNS) != 0)
        refused("unshare(CLONE_NEWNS)");
    /* no mount or unmount of ours may reach the parent's namespace */
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        refused("make / private (mount MS_REC|MS_PRIVATE)");
    if (umount2("/proc", MNT_DETACH) != 0 && mount("none", "/proc", "tmpfs", MS_RDONLY, "size=4k") != 0)
        refused("unmount /proc or mount a tmpfs over it");
}

/* the exit status a shell would give for st */
static int shell_status(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

/* wait for pid, reaping every other child that ends meanwhile (as pid 1,
 * the orphans of the namespace are ours); CMD's status as a shell gives it */
static int wait_reaping(pid_t pid)
{
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, 0);
        if (w == pid)
            return shell_status(st);
        if (w < 0 && errno != EINTR)
            return 1;
    }
}

/* fork into a new PID namespace; returns in the process that is to run
 * CMD (pid 2 of the namespace); the other two never return */
static void pid_ns(void)
{
    if (unshare(CLONE_NEWPID) != 0)
        refused("unshare(CLONE_NEWPID)");
    int ready[2];
    if (pipe(ready) != 0)
        refused("pipe");
    pid_t init = fork();
    if (init < 0)
        refused("fork the namespace's init");
    if (init > 0) {               /* outside: wait for the namespace to end */
        close(ready[1]);
        char c;
        if (read(ready[0], &c, 1) != 1) {
            int st;
            waitpid(init, &st, 0);
            exit(WIFEXITED(st) && WEXITSTATUS(st) == 77 ? 77 : 1);
        }
        close(ready[0]);
        int st;
        while (waitpid(init, &st, 0) < 0)
            if (errno != EINTR)
                exit(1);
        exit(shell_status(st));
    }
    /* the namespace's init: dies with the launcher outside */
    close(ready[0]);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        refused("prctl(PR_SET_PDEATHSIG)");
    if (getpid() != 1) {
        errno = EINVAL;
        refused("become pid 1 of a new PID namespace");
    }
    /* a launcher that died before the prctl closed the pipe's other end:
     * the write fails (or SIGPIPE ends us) */
    signal(SIGPIPE, SIG_DFL);
    if (write(ready[1], "1", 1) != 1)
        _exit(1);
    close(ready[1]);
    fflush(NULL);
    pid_t cmd = fork();
    if (cmd < 0)
        refused("fork in the PID namespace");
    if (cmd > 0)
        _exit(wait_reaping(cmd));
}

static int probe(int want_no_proc, int want_pid_ns, int want_blocked, long want_nofile)
{
    char seen[512] = "";
    size_t n = 0;
    int ok = 1;
#define SEEN(...) (n += (size_t)snprintf(seen + n, n < sizeof seen ? sizeof seen - n : 0, __VA_ARGS__))
    if (want_no_proc) {
        int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        int e = errno;
        SEEN(" /proc/self/stat: %s;", fd >= 0 ? "readable" : strerror(e));
        ok &= fd < 0;
        if (fd >= 0)
            close(fd);
    }
    if (want_pid_ns) {
        /* our pid in the namespace, and the one the parent's /proc shows */
        char buf[64] = "";
        long proc_pid = -1;
        int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t r = read(fd, buf, sizeof buf - 1);
            buf[r > 0 ? r : 0] = '\0';
            proc_pid = strtol(buf, NULL, 10);
            close(fd);
        }
        SEEN(" pid %ld (tid %ld), /proc/self/stat's pid %ld;", (long)getpid(), (long)gettid(), proc_pid);
        ok &= getpid() == 2 && proc_pid > 0 && proc_pid != getpid();
    }
    if (want_blocked) {
        sigset_t cur;
        int blocked = 0, total = 0;
        sigprocmask(SIG_BLOCK, NULL, &cur);
        for (int s = 1; s < NSIG; s++) {
            if (s == SIGKILL || s == SIGSTOP || (s >= 32 && s < SIGRTMIN))
                continue;   /* unblockable, or glibc's own (it never lets them be blocked) */
            total++;
            blocked += sigismember(&cur, s) == 1;
        }
        SEEN(" %d of %d signals blocked;", blocked, total);
        ok &= blocked == total;
    }
    if (want_nofile >= 0) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        SEEN(" RLIMIT_NOFILE %ld/%ld;", (long)rl.rlim_cur, (long)rl.rlim_max);
        ok &= (long)rl.rlim_cur == want_nofile;
    }
#undef SEEN
    printf("hostile:%s %s\n", seen, ok ? "as wanted" : "NOT as wanted");
    return ok ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: hostile [--no-proc] [--pid-ns] [--block-signals] [--nofile N] "
                    "[--probe | [--] CMD [ARG...]]\n       hostile --probe-open\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int no_proc_env = 0, pid_ns_env = 0, block = 0, do_probe = 0, i;
    long nofile = -1;
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else if (!strcmp(argv[i], "--no-proc")) {
            no_proc_env = 1;
        } else if (!strcmp(argv[i], "--pid-ns")) {
            pid_ns_env = 1;
        } else if (!strcmp(argv[i], "--block-signals")) {
            block = 1;
        } else if (!strcmp(argv[i], "--nofile") && i + 1 < argc) {
            char *end;
            nofile = strtol(argv[++i], &end, 10);
            if (*end || nofile < 0)
                usage();
        } else if (!strcmp(argv[i], "--probe")) {
            do_probe = 1;
        } else if (!strcmp(argv[i], "--probe-open")) {
            int fd = open("/dev/null", O_RDONLY);
            printf("hostile: opened /dev/null: fd %d\n", fd);
            return 0;
        } else {
            usage();
        }
    }
    if (!do_probe && i >= argc)
        usage();
    if (no_proc_env)
        no_proc();
    if (pid_ns_env)
        pid_ns();
    if (nofile >= 0) {
#ifdef SYS_close_range
        if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
#endif
        {
            long top = sysconf(_SC_OPEN_MAX);
            for (long fd = 3; fd < (top > 0 && top < 65536 ? top : 65536); fd++)
                close((int)fd);
        }
        struct rlimit rl = { (rlim_t)nofile, (rlim_t)nofile };
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            refused("setrlimit(RLIMIT_NOFILE)");
    }
    if (block) {
        sigset_t all;
        sigfillset(&all);
        if (sigprocmask(SIG_BLOCK, &all, NULL) != 0)
            refused("sigprocmask");
    }
    if (do_probe)
        return probe(no_proc_env, pid_ns_env, block, nofile);
    fflush(NULL);
    execvp(argv[i], argv + i);
    fprintf(stderr, "hostile: cannot run %s: %s\n", argv[i], strerror(errno));
    return 127;
}

#endif
