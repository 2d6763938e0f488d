/* test_env_faults.c -- thread heaps and the background purger in hostile
 * environments (issue 36), run under LD_PRELOAD by tests/suite_envfaults.sh.
 *
 * usage: test_env_faults [-p PREFIX] [-t TEST] [-s SCALE]   (every test without -t)
 *   pidns_reclaim       (fault 1) a PID namespace whose /proc is the parent's:
 *                       a thread whose tid in the namespace equals the main
 *                       thread's tid as /proc shows it makes a heap while one
 *                       heap is OWNED by a dead thread (its first allocation
 *                       came in the last round of key destructors); then 16
 *                       more threads make or adopt heaps.  Only the dead
 *                       threads' heaps may be reclaimed, and all of them
 *                       ("reclaimed from ended threads" of hakmem_stats_print
 *                       equals the number of such threads, 3), and the busy
 *                       workers' blocks keep their pattern.  Before the fix
 *                       every OWNED heap was declared dead and adopted while
 *                       its owner used it (7 reclaimed, or a crash).
 *   purger_atexit       (fault 6) with HAKMEM_BACKGROUND_PURGE=1, main registers
 *                       an atexit handler with a 3 MiB local buffer, starts
 *                       workers and calls pthread_exit: the process ends with
 *                       status 0 and the handler completes, in each of 5
 *                       processes (before the fix the purger ended last and
 *                       glibc ran exit() on its 1 MiB stack: SIGSEGV).  Thread
 *                       stacks are the default 8 MiB (RLIMIT_STACK is set so).
 *   noproc_late         (fault 8) no /proc (a mount namespace with /proc
 *                       unmounted): 2,000 threads one after another, each
 *                       with its first allocation in the last round of key
 *                       destructors.  Heaps created stay at most 2 x 2 + 8 = 12
 *                       (2 threads alive at once: main and the current one;
 *                       + 8 for the purger and races) and memory mapped grows
 *                       by at most 64 MiB (before: 2,001 heaps, 8.2 GB).
 *   noproc_purger_exit  no /proc, HAKMEM_BACKGROUND_PURGE=1: main calls
 *                       pthread_exit after starting workers; the process ends
 *                       (exit status 0, atexit handlers run) within 20 s
 *                       instead of being kept alive by the purger.
 *
 * Each test runs its body in a process of its own (this program again, with
 * --inner NAME FD SCALE), made by a child that first enters the namespaces
 * the test needs (unshare(2); a test whose namespaces or mounts are refused
 * is reported SKIP with the reason).  In a PID namespace the chain is: child
 * (unshares) -> pid 1 (waits; its end kills the namespace) -> pid 2 (the
 * body), so that a crash or abort() ends the body as it would anywhere (pid 1
 * of a namespace ignores signals it has no handler for).  Every process of
 * the chain gets PR_SET_PDEATHSIG SIGKILL and stays in the suite's process
 * group, so the suite's SIGKILL time limit kills them all; the test itself
 * kills the chain when the body outlives its own limit (SIGALRM would not do:
 * a process whose last thread is the purger blocks every signal).  The body
 * reports its first failure (or skip reason) through a pipe.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "hakmem.h"
#include "pattern.h"

#pragma weak hakmem_stats_get
#pragma weak hakmem_stats_print

#define NEED_HAKMEM() do { if (!hakmem_stats_get || !hakmem_stats_print) SKIP_TEST("hakmem not preloaded"); } while (0)

static double scale = 1.0;
static long scaled(long n) { long v = (long)(n * scale); return v < 1 ? 1 : v; }
static char self_exe[PATH_MAX];
static int inner_fd = -1;   /* the body's report pipe */

static long tid_now(void) { return (long)syscall(SYS_gettid); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ====================== running a body in its own process ====================== */

enum { ISO_PLAIN, ISO_PIDNS, ISO_NOPROC };
typedef struct { int code; char msg[600]; } iso_result_t;   /* code: exit status, 128+N signal N */
#define ISO_TIMED_OUT 1000

static int wait_code(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 255;
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
}

/* Runs `--inner name` in a new process, in the namespaces `how` asks for,
 * killed after limit_s seconds (code ISO_TIMED_OUT).  Exit status 77 means
 * SKIP (msg says why). */
static iso_result_t run_isolated(const char *name, int how, unsigned limit_s)
{
    iso_result_t r = { 255, "" };
    int fds[2];
    if (pipe(fds) != 0) { snprintf(r.msg, sizeof r.msg, "pipe: %s", strerror(errno)); return r; }
    pid_t a = chk_fork(0);
    if (a < 0) { close(fds[0]); close(fds[1]); snprintf(r.msg, sizeof r.msg, "fork failed"); return r; }
    if (a == 0) {
        close(fds[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* the default thread stack: glibc takes it from RLIMIT_STACK at start-up */
        struct rlimit rl;
        if (getrlimit(RLIMIT_STACK, &rl) == 0 && (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= (8u << 20))) {
            rl.rlim_cur = 8u << 20;
            setrlimit(RLIMIT_STACK, &rl);
        }
        if (how != ISO_PLAIN) {
            int flags = CLONE_NEWNS | (how == ISO_PIDNS ? CLONE_NEWPID : 0);
            if (unshare(flags) != 0) {
                dprintf(fds[1], "unshare(%s) refused: %s", how == ISO_PIDNS ? "CLONE_NEWPID|CLONE_NEWNS" : "CLONE_NEWNS",
                        strerror(errno));
                _exit(77);
            }
            if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
                dprintf(fds[1], "making mounts private refused: %s", strerror(errno));
                _exit(77);
            }
        }
        if (how == ISO_PIDNS) {
            pid_t init = fork();   /* pid 1 of the namespace */
            if (init < 0) { dprintf(fds[1], "fork into the namespace: %s", strerror(errno)); _exit(1); }
            if (init > 0) _exit(wait_code(init));
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            pid_t body = fork();   /* pid 2: signals reach it as they reach any process */
            if (body < 0) { dprintf(fds[1], "fork in the namespace: %s", strerror(errno)); _exit(1); }
            if (body > 0) _exit(wait_code(body));   /* the namespace dies with pid 1 */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
        }
        if (how == ISO_NOPROC && umount2("/proc", MNT_DETACH) != 0 &&
            mount("none", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k") != 0) {
            dprintf(fds[1], "neither unmounting /proc nor a tmpfs over it was allowed: %s", strerror(errno));
            _exit(77);
        }
        char fdarg[16], scalearg[32];
        snprintf(fdarg, sizeof fdarg, "%d", fds[1]);
        snprintf(scalearg, sizeof scalearg, "%g", scale);
        execl(self_exe, self_exe, "--inner", name, fdarg, scalearg, (char *)NULL);
        dprintf(fds[1], "exec %s: %s", self_exe, strerror(errno));
        _exit(1);
    }
    close(fds[1]);
    /* the report, until every process of the chain has closed the pipe or
     * the limit passes (a signal cannot be relied on to end the body: its
     * last thread may block them all, as the purger does) */
    size_t n = 0;
    double deadline = now_s() + limit_s;
    bool late = false;
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) { late = true; break; }
        struct pollfd pf = { fds[0], POLLIN, 0 };
        int pr = poll(&pf, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        ssize_t k = n + 1 < sizeof r.msg ? read(fds[0], r.msg + n, sizeof r.msg - 1 - n) : read(fds[0], (char[64]){0}, 64);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        if (n + 1 < sizeof r.msg) n += (size_t)k;
    }
    r.msg[n] = 0;
    close(fds[0]);
    if (late) kill(a, SIGKILL);   /* PR_SET_PDEATHSIG ends the rest of the chain */
    r.code = wait_code(a);
    if (late) {
        r.code = ISO_TIMED_OUT;
        size_t m = strlen(r.msg);
        snprintf(r.msg + m, sizeof r.msg - m, "%stimed out after %u s", m ? "; " : "", limit_s);
    }
    return r;
}

/* The verdict of a body that reports through check.h (exit 0, 1 with its
 * first failure, 77 skip): its message becomes this test's first failure. */
static void iso_fail(const char *what, const char *msg)
{
    pthread_mutex_lock(&chk_lock);
    if (chk_fail_count++ == 0) snprintf(chk_first, sizeof chk_first, "%s: %.400s", what, msg);
    pthread_mutex_unlock(&chk_lock);
}

static void iso_verdict(const iso_result_t *r, const char *what)
{
    char m[700];
    if (r->code == 77) {
        chk_skipped = 1;
        snprintf(chk_skip_reason, sizeof chk_skip_reason, "%.200s", r->msg[0] ? r->msg : "skipped");
    } else if (r->code == ISO_TIMED_OUT) {
        iso_fail(what, r->msg);
    } else if (r->code > 128) {
        snprintf(m, sizeof m, "killed by signal %d (%s)%s%.500s", r->code - 128, strsignal(r->code - 128),
                 r->msg[0] ? "; " : "", r->msg);
        iso_fail(what, m);
    } else if (r->code != 0) {
        snprintf(m, sizeof m, "%.500s (exit status %d)", r->msg[0] ? r->msg : "failed", r->code);
        iso_fail(what, m);
    }
}

/* The body's end: its first failure or skip reason to the pipe. */
static int inner_report(void)
{
    if (chk_fail_count) {
        dprintf(inner_fd, "%s%s", chk_first, chk_fail_count > 1 ? " (+more)" : "");
        return 1;
    }
    if (chk_skipped) {
        dprintf(inner_fd, "%s", chk_skip_reason);
        return 77;
    }
    return 0;
}

/* "reclaimed from ended threads N" of hakmem_stats_print's report (stderr
 * caught in a memfd), or -1 */
static long stats_reclaimed(void)
{
    int mfd = memfd_create("hakmem-stats", 0);
    if (mfd < 0) return -1;
    fflush(stderr);
    int saved = dup(2);
    dup2(mfd, 2);
    hakmem_stats_print();
    dup2(saved, 2);
    close(saved);
    static char text[16384];
    ssize_t n = pread(mfd, text, sizeof text - 1, 0);
    close(mfd);
    if (n <= 0) return -1;
    text[n] = 0;
    const char *s = strstr(text, "reclaimed from ended threads ");
    return s ? strtol(s + strlen("reclaimed from ended threads "), NULL, 10) : -1;
}

static hakmem_stats_t stats_buf;   /* big: one thread at a time reads it */
static void stats(uint64_t *heaps, uint64_t *mapped)
{
    CHECK(hakmem_stats_get(&stats_buf, sizeof stats_buf) == 0);
    *heaps = stats_buf.heaps_created;
    *mapped = stats_buf.bytes_mapped;
}

/* ====================== threads whose first allocation comes last ====================== */
/* The key's destructor re-arms the key until the last round, and only then
 * allocates: hakmem's key (made at start-up, a lower index) has had its last
 * call, so nothing abandons the heap this allocation makes. */
#include "late_thread.h"

static int run_late_thread(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, late_thread, NULL) != 0) return -1;
    pthread_join(t, NULL);
    return 0;
}

/* ====================== blocks with a pattern ====================== */
#define CH_SLOTS 64
typedef struct { void *p[CH_SLOTS]; size_t n[CH_SLOTS]; uint64_t rng; long owner; } churn_t;

static atomic_long pattern_errors;

static uint64_t ch_rand(churn_t *c) { c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL; return c->rng >> 33; }

static void ch_check_free(churn_t *c, unsigned s)
{
    if (!c->p[s]) return;
    size_t off = pat_check(c->p[s], c->n[s], pat_seed(c->p[s], c->n[s], (uint64_t)c->owner));
    if (off != PAT_OK) {
        if (atomic_fetch_add(&pattern_errors, 1) == 0)
            CHECKF(0, "thread %ld: its block %p of %zu bytes changed at offset %zu (another thread used its heap)",
                   c->owner, c->p[s], c->n[s], off);
    }
    free(c->p[s]);
    c->p[s] = NULL;
}

/* steps of allocate-fill / check-free in random slots */
static void ch_steps(churn_t *c, int steps)
{
    for (int k = 0; k < steps; k++) {
        unsigned s = (unsigned)(ch_rand(c) % CH_SLOTS);
        if (c->p[s]) {
            ch_check_free(c, s);
        } else {
            size_t n = 16 + ch_rand(c) % 3000;
            void *p = malloc(n);
            if (!p) { CHECKF(0, "thread %ld: malloc(%zu) failed", c->owner, n); continue; }
            pat_fill(p, n, pat_seed(p, n, (uint64_t)c->owner));
            c->p[s] = p;
            c->n[s] = n;
        }
    }
}

static void ch_end(churn_t *c)
{
    for (unsigned s = 0; s < CH_SLOTS; s++) ch_check_free(c, s);
}

static void ch_init(churn_t *c, long owner)
{
    memset(c, 0, sizeof *c);
    c->owner = owner;
    c->rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(owner + 1);
}

/* ====================== pidns_reclaim (fault 1) ====================== */
#define PN_WORKERS 3
#define PN_LATE 3
#define PN_FOLLOWERS 16
static atomic_int pn_stop;
static atomic_long pn_rounds[PN_WORKERS + PN_FOLLOWERS];
static atomic_long pn_tid;   /* the tid the critical thread had */

static void *pn_worker(void *arg)
{
    long id = (long)(intptr_t)arg;
    churn_t c;
    ch_init(&c, 100 + id);
    while (!atomic_load(&pn_stop)) {
        ch_steps(&c, 256);
        atomic_fetch_add(&pn_rounds[id], 1);
    }
    ch_end(&c);
    return NULL;
}

/* the thread with the critical tid: allocates and checks for a while,
 * alongside the workers */
static void *pn_churner(void *arg)
{
    long id = (long)(intptr_t)arg;
    atomic_store(&pn_tid, tid_now());
    churn_t c;
    ch_init(&c, 200 + id);
    double end = now_s() + 0.1;
    do ch_steps(&c, 256); while (now_s() < end);
    ch_end(&c);
    return NULL;
}

/* the pid of this process as a procfs shows it (its first field of self/stat) */
static long proc_pid(const char *root)
{
    char path[PATH_MAX], buf[256];
    snprintf(path, sizeof path, "%s/self/stat", root);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

static void inner_pidns_reclaim(void)
{
    NEED_HAKMEM();
    long me = tid_now();              /* the namespace's number (2, or 3 when pid 1 has a purger) */
    long outer = proc_pid("/proc");   /* the parent namespace's, as /proc shows it */
    if (outer < 0) SKIP_TEST("/proc/self/stat is unreadable");
    if (outer == me) SKIP_TEST("/proc is this PID namespace's own (the fault needs the parent's)");
    if (outer < 64) SKIP_TEST("this process's pid in /proc is too small to be given to a thread");
    char dir[] = "/tmp/hakmem_envfaults.XXXXXX";
    if (!mkdtemp(dir)) SKIP_TEST("mkdtemp failed");
    char why[200] = "";
    int nslp = -1;
    if (mount("proc", dir, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
        snprintf(why, sizeof why, "mounting the namespace's procfs refused: %s", strerror(errno));
    } else {
        long inside = proc_pid(dir);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/sys/kernel/ns_last_pid", dir);
        if (inside != me)
            snprintf(why, sizeof why, "the private procfs shows pid %ld, not %ld", inside, me);
        else if ((nslp = open(path, O_WRONLY | O_CLOEXEC)) < 0)
            snprintf(why, sizeof why, "opening ns_last_pid refused: %s", strerror(errno));
    }
    if (why[0]) {
        if (nslp >= 0) close(nslp);
        umount2(dir, MNT_DETACH);
        rmdir(dir);
        SKIP_TEST(why);
    }

    /* the main thread's heap, with blocks of its own */
    churn_t mainc;
    ch_init(&mainc, 1);
    ch_steps(&mainc, 200);
    pthread_t w[PN_WORKERS];
    int nw = 0;
    while (nw < PN_WORKERS && pthread_create(&w[nw], NULL, pn_worker, (void *)(intptr_t)nw) == 0) nw++;
    CHECKF(nw == PN_WORKERS, "pthread_create failed after %d workers", nw);
    for (int i = 0; i < nw; i++)   /* each owns a heap */
        while (atomic_load(&pn_rounds[i]) < 20) usleep(1000);
    CHECK(pthread_key_create(&late_key, late_dtor) == 0);
    for (int i = 0; i < PN_LATE; i++) CHECK(run_late_thread() == 0);

    /* the next thread's tid in this namespace is this process's pid in /proc */
    char num[32];
    int len = snprintf(num, sizeof num, "%ld", outer - 1);
    bool wrote = pwrite(nslp, num, (size_t)len, 0) == len;
    int werr = errno;
    pthread_t t;
    bool made = wrote && pthread_create(&t, NULL, pn_churner, (void *)(intptr_t)0) == 0;
    close(nslp);
    umount2(dir, MNT_DETACH);
    rmdir(dir);
    if (!wrote) {
        atomic_store(&pn_stop, 1);
        for (int i = 0; i < nw; i++) pthread_join(w[i], NULL);
        SKIP_TEST(strerror(werr));
    }
    CHECK(made);
    if (made) pthread_join(t, NULL);
    CHECKF(atomic_load(&pn_tid) == outer, "the thread got tid %ld, not %ld (ns_last_pid did not take)",
           atomic_load(&pn_tid), outer);
    /* threads alive at once, each with a heap: they adopt whatever heaps
     * were abandoned and make the rest.  A reclaim that looks for dead
     * owners only now and then (once the heaps taken double, say) has
     * looked by the time these 16 have taken theirs */
    pthread_t f[PN_FOLLOWERS];
    int nf = 0;
    while (nf < PN_FOLLOWERS && pthread_create(&f[nf], NULL, pn_worker, (void *)(intptr_t)(PN_WORKERS + nf)) == 0) nf++;
    CHECKF(nf == PN_FOLLOWERS, "pthread_create failed after %d threads", nf);
    for (int i = 0; i < nf; i++)
        while (atomic_load(&pn_rounds[PN_WORKERS + i]) < 5) usleep(1000);
    ch_steps(&mainc, 2000);
    atomic_store(&pn_stop, 1);
    for (int i = 0; i < nw; i++) pthread_join(w[i], NULL);
    for (int i = 0; i < nf; i++) pthread_join(f[i], NULL);
    ch_end(&mainc);
    long rec = stats_reclaimed();
    printf("# pidns_reclaim: main thread tid %ld here, %ld in /proc; thread tid %ld; %d threads ended without "
           "the exit handler; heaps reclaimed from ended threads %ld; pattern errors %ld\n",
           me, outer, atomic_load(&pn_tid), PN_LATE, rec, atomic_load(&pattern_errors));
    fflush(stdout);
    CHECKF(atomic_load(&late_bad) == 0, "%ld failed allocations in the last destructor round", atomic_load(&late_bad));
    CHECKF(rec >= 0, "hakmem_stats_print's report has no \"reclaimed from ended threads N\"");
    CHECKF(rec <= PN_LATE, "%ld heaps reclaimed from ended threads, but only %d threads ended without hakmem's exit "
           "handler: live threads' heaps were taken", rec, PN_LATE);
    CHECKF(rec < 0 || rec >= PN_LATE, "%ld heaps reclaimed, want %d (one per thread that ended without the exit handler)",
           rec, PN_LATE);
    CHECKF(atomic_load(&pattern_errors) == 0, "%ld blocks changed under their threads", atomic_load(&pattern_errors));
}

static void test_pidns_reclaim(void)
{
    iso_result_t r = run_isolated("pidns_reclaim", ISO_PIDNS, 40);
    iso_verdict(&r, "in the PID namespace");
}

/* ====================== purger_atexit (fault 6) / noproc_purger_exit ====================== */
#define PA_BUF ((size_t)3 << 20)
static void pa_handler(void)
{
    volatile char buf[PA_BUF];   /* 3 MiB of the stack of whichever thread runs exit() */
    for (size_t i = 0; i < PA_BUF; i++) buf[i] = (char)i;
    unsigned sum = 0;
    for (size_t i = 0; i < PA_BUF; i += 4096) sum += (unsigned char)buf[i];
    dprintf(inner_fd, "atexit handler ran (%u)", sum);
}

static void *pa_worker(void *arg)
{
    long id = (long)(intptr_t)arg;
    churn_t c;
    ch_init(&c, id);
    double end = now_s() + 0.02 + 0.01 * (double)id;
    do ch_steps(&c, 64); while (now_s() < end);
    ch_end(&c);
    return NULL;
}

/* main registers the handler, starts workers and leaves: the last thread to
 * end runs exit() */
static void inner_purger_exit(void)
{
    atexit(pa_handler);
    for (long i = 0; i < 4; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, pa_worker, (void *)(intptr_t)i) != 0) { dprintf(inner_fd, "pthread_create failed"); _exit(1); }
        pthread_detach(t);
    }
    void *volatile p = malloc(100);
    free(p);
    pthread_exit(NULL);
}

static bool purger_wanted(void)
{
    const char *v = getenv("HAKMEM_BACKGROUND_PURGE");
    return v && !strcmp(v, "1");
}

static void test_purger_atexit(void)
{
    if (!purger_wanted()) SKIP_TEST("needs HAKMEM_BACKGROUND_PURGE=1");
    int runs = (int)scaled(5), bad = 0;
    char first[700] = "";
    for (int i = 0; i < runs; i++) {
        iso_result_t r = run_isolated("purger_atexit", ISO_PLAIN, 10);
        bool ok = r.code == 0 && strstr(r.msg, "atexit handler ran");
        if (!ok && bad++ == 0) {
            if (r.code > 128)
                snprintf(first, sizeof first, "killed by signal %d (%s)", r.code - 128, strsignal(r.code - 128));
            else
                snprintf(first, sizeof first, "exit status %d, %s", r.code, r.msg[0] ? r.msg : "the handler did not complete");
        }
    }
    printf("# purger_atexit: %d of %d processes failed\n", bad, runs);
    CHECKF(bad == 0, "%d of %d processes did not end through a completed 3 MiB atexit handler; first: %s", bad, runs, first);
}

static void test_noproc_purger_exit(void)
{
    if (!purger_wanted()) SKIP_TEST("needs HAKMEM_BACKGROUND_PURGE=1");
    double t0 = now_s();
    iso_result_t r = run_isolated("noproc_purger_exit", ISO_NOPROC, 20);
    printf("# noproc_purger_exit: status %d after %.2f s\n", r.code, now_s() - t0);
    if (r.code == 77) { iso_verdict(&r, "without /proc"); return; }
    CHECKF(r.code != ISO_TIMED_OUT, "the process outlived its threads by 20 s (killed then)");
    CHECKF(r.code == 0 || r.code == ISO_TIMED_OUT, "exit status %d: %s", r.code, r.msg);
    CHECKF(r.code != 0 || strstr(r.msg, "atexit handler ran"), "atexit handlers did not run: %s", r.msg);
}

/* ====================== noproc_late (fault 8) ====================== */
static void inner_noproc_late(void)
{
    NEED_HAKMEM();
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) { close(fd); SKIP_TEST("/proc is still there"); }
    long n = scaled(2000);
    CHECK(pthread_key_create(&late_key, late_dtor) == 0);
    uint64_t h0, m0, h1, m1;
    stats(&h0, &m0);
    for (long i = 0; i < n; i++)
        if (run_late_thread() != 0) { CHECKF(0, "pthread_create failed at thread %ld", i); break; }
    stats(&h1, &m1);
    printf("# noproc_late: %ld threads, heaps created +%llu, mapped %llu -> %llu KiB\n", n,
           (unsigned long long)(h1 - h0), (unsigned long long)(m0 >> 10), (unsigned long long)(m1 >> 10));
    fflush(stdout);
    CHECKF(atomic_load(&late_bad) == 0, "%ld failed allocations", atomic_load(&late_bad));
    /* threads alive at once: 2 (main and the current one) */
    CHECKF(h1 - h0 <= 2 * 2 + 8, "%ld threads one after another made %llu heaps (bound 12)", n,
           (unsigned long long)(h1 - h0));
    CHECKF(m1 <= m0 + ((uint64_t)64 << 20), "mapped %llu -> %llu KiB after %ld threads (bound +64 MiB)",
           (unsigned long long)(m0 >> 10), (unsigned long long)(m1 >> 10), n);
}

static void test_noproc_late(void)
{
    iso_result_t r = run_isolated("noproc_late", ISO_NOPROC, 40);
    iso_verdict(&r, "without /proc");
}

/* ====================== main ====================== */
static int inner_main(const char *name, int fd)
{
    inner_fd = fd;
    chk_name = name;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(name, "pidns_reclaim")) inner_pidns_reclaim();
    else if (!strcmp(name, "noproc_late")) inner_noproc_late();
    else if (!strcmp(name, "purger_atexit") || !strcmp(name, "noproc_purger_exit")) inner_purger_exit();
    else { dprintf(fd, "no such body: %s", name); return 2; }
    return inner_report();
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--inner")) {
        scale = atof(argv[4]);
        return inner_main(argv[2], atoi(argv[3]));
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-s") && i + 1 < argc) scale = atof(argv[++i]);
        else if (!chk_common_option(argc, argv, &i)) {
            fprintf(stderr, "usage: %s [-p PREFIX] [-t TEST] [-s SCALE]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) { printf("FAIL %s.setup: readlink /proc/self/exe failed\n", chk_prefix); return 1; }
    self_exe[n] = 0;
    RUN_TEST(pidns_reclaim);
    RUN_TEST(purger_atexit);
    RUN_TEST(noproc_late);
    RUN_TEST(noproc_purger_exit);
    return check_exit_code();
}
