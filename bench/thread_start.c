/* thread_start.c -- the cost of starting threads (issue 36, item 6): N
 * threads started one after another, each of which allocates a little.
 * Not one of make bench's workloads: bench/thread_start.sh runs it under
 * glibc and hakmem in several environments (docs/benchmarks.md, "Thread
 * start-up").
 *
 * usage: thread_start [--threads N] [--mode alive|serial] [--dead-heap]
 *                     [--env normal|seccomp|sigblock|nofile]
 *   --mode alive    each thread allocates, then waits until all N have
 *                   started (all alive at once); then all free and end.
 *                   The next thread is started once the last has allocated
 *   --mode serial   each thread allocates, frees and ends before the next
 *                   starts
 *   --dead-heap     first one thread whose first allocation comes in the last
 *                   round of pthread key destructors: its heap (hakmem) has
 *                   no exit handler left to give it up, so a dead thread's
 *                   heap exists when the N start
 *   --env           applied after start-up, before the threads:
 *                   seccomp   a filter that kills the process on open/openat/
 *                             openat2 (raw BPF through prctl)
 *                   sigblock  every signal blocked (the threads inherit it)
 *                   nofile    RLIMIT_NOFILE 3: no descriptor left to open
 *                   (no /proc and a PID namespace come from the script)
 * Prints one line:
 *   RESULT bench=thread_start mode=M dead_heap=0|1 env=E threads=N seconds=S
 *          start_seconds=S0 allocator=hakmem|glibc malloc_from=FILE
 *          hakmem_owned=1|0|-1 foreign_samples=K heaps_created=H
 * seconds: from the first pthread_create to the last join; start_seconds
 * (alive): until every thread has allocated.  allocator= is the proof:
 * "hakmem" when hakmem_owns (looked up with dlsym) claims a block malloc
 * returned, in main and in every thread (foreign_samples counts blocks it
 * did not claim).  Nothing here opens a file after start-up (the seccomp
 * environment would kill it).
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "../include/hakmem.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int (*owns_fn)(const void *);
static int (*stats_fn)(hakmem_stats_t *, size_t);
static atomic_long foreign;

static void sample(const void *p)
{
    if (owns_fn && p && !owns_fn(p)) atomic_fetch_add(&foreign, 1);
}

/* ---- the threads ---- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_started = PTHREAD_COND_INITIALIZER, go = PTHREAD_COND_INITIALIZER;
static long started;
static int released;

static void *alloc_little(void **q)
{
    char *p = malloc(64);
    *q = malloc(1000);
    if (!p || !*q) { fprintf(stderr, "thread_start: malloc failed\n"); exit(3); }
    memset(p, 1, 64);
    memset(*q, 2, 1000);
    sample(p);
    return p;
}

static void *alive_thread(void *arg)
{
    (void)arg;
    void *q, *p = alloc_little(&q);
    pthread_mutex_lock(&lock);
    ++started;
    pthread_cond_signal(&all_started);
    while (!released) pthread_cond_wait(&go, &lock);
    pthread_mutex_unlock(&lock);
    free(p);
    free(q);
    return NULL;
}

static void *serial_thread(void *arg)
{
    (void)arg;
    void *q, *p = alloc_little(&q);
    free(p);
    free(q);
    return NULL;
}

/* the dead heap: the first allocation in the last key-destructor round */
static pthread_key_t late_key;
static __thread int late_round;
static void late_dtor(void *v)
{
    if (++late_round < PTHREAD_DESTRUCTOR_ITERATIONS) { pthread_setspecific(late_key, v); return; }
    void *volatile p = malloc(200);
    free(p);
}
static void *late_thread(void *arg)
{
    pthread_setspecific(late_key, arg);
    return NULL;
}

/* ---- environments ---- */
static int kill_on_open(void)
{
#if defined(__x86_64__)
    const unsigned arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    const unsigned arch = AUDIT_ARCH_AARCH64;
#else
    return -1;
#endif
#ifndef __NR_open
#define __NR_open __NR_openat   /* aarch64 has only openat */
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_open, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat2, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = { (unsigned short)(sizeof f / sizeof f[0]), f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

int main(int argc, char **argv)
{
    long n = 4000;
    const char *mode = "alive", *env = "normal";
    int dead = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) n = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc) mode = argv[++i];
        else if (!strcmp(argv[i], "--env") && i + 1 < argc) env = argv[++i];
        else if (!strcmp(argv[i], "--dead-heap")) dead = 1;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--mode alive|serial] [--dead-heap] "
                            "[--env normal|seccomp|sigblock|nofile]\n", argv[0]);
            return 2;
        }
    }
    int alive = !strcmp(mode, "alive");
    if ((!alive && strcmp(mode, "serial")) || n < 1) { fprintf(stderr, "thread_start: bad --mode or --threads\n"); return 2; }

    /* start-up: everything that may open a file happens here */
    owns_fn = (int (*)(const void *))dlsym(RTLD_DEFAULT, "hakmem_owns");
    stats_fn = (int (*)(hakmem_stats_t *, size_t))dlsym(RTLD_DEFAULT, "hakmem_stats_get");
    char from[256] = "unknown";
    Dl_info info;
    if (dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info) && info.dli_fname) {
        const char *b = strrchr(info.dli_fname, '/');
        snprintf(from, sizeof from, "%s", b ? b + 1 : info.dli_fname);
    }
    /* glibc reads /sys/devices/system/cpu/online the first time it has
     * more than 8 arenas, to set their limit: set that limit now, to the
     * value it would compute (8 per CPU), so that glibc opens nothing later
     * either (hakmem accepts and ignores it) */
    mallopt(M_ARENA_MAX, 8 * get_nprocs());
    void *volatile warm = malloc(100);   /* main's own heap */
    int owned = owns_fn ? owns_fn(warm) != 0 : -1;
    free(warm);
    pthread_t *tid = calloc((size_t)n, sizeof *tid);
    if (!tid || pthread_key_create(&late_key, late_dtor) != 0) { fprintf(stderr, "thread_start: setup failed\n"); return 3; }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)256 << 10);   /* 4,000 threads alive: small stacks, both allocators alike */
    static hakmem_stats_t st;
    uint64_t heaps0 = 0;
    if (stats_fn && stats_fn(&st, sizeof st) == 0) heaps0 = st.heaps_created;

    if (!strcmp(env, "seccomp")) {
        if (kill_on_open() != 0) { fprintf(stderr, "thread_start: seccomp filter refused: %s\n", strerror(errno)); return 77; }
    } else if (!strcmp(env, "sigblock")) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    } else if (!strcmp(env, "nofile")) {
        struct rlimit rl = { 3, 3 };
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) { fprintf(stderr, "thread_start: setrlimit: %s\n", strerror(errno)); return 77; }
    } else if (strcmp(env, "normal")) {
        fprintf(stderr, "thread_start: unknown --env %s\n", env);
        return 2;
    }

    if (dead) {
        pthread_t t;
        static char sentinel;
        if (pthread_create(&t, &attr, late_thread, &sentinel) != 0) { fprintf(stderr, "thread_start: pthread_create failed\n"); return 3; }
        pthread_join(t, NULL);
    }

    double t0 = now_s(), t_started = 0;
    for (long i = 0; i < n; i++) {
        int rc = pthread_create(&tid[i], &attr, alive ? alive_thread : serial_thread, NULL);
        if (rc != 0) { fprintf(stderr, "thread_start: pthread_create %ld: %s\n", i, strerror(rc)); return 3; }
        if (!alive) {
            pthread_join(tid[i], NULL);
        } else {   /* one after another: the next starts once this one has allocated */
            pthread_mutex_lock(&lock);
            while (started <= i) pthread_cond_wait(&all_started, &lock);
            pthread_mutex_unlock(&lock);
        }
    }
    if (alive) {
        pthread_mutex_lock(&lock);
        t_started = now_s();
        released = 1;
        pthread_cond_broadcast(&go);
        pthread_mutex_unlock(&lock);
        for (long i = 0; i < n; i++) pthread_join(tid[i], NULL);
    }
    double t1 = now_s();
    if (!alive) t_started = t1;

    long heaps = -1;
    if (stats_fn && stats_fn(&st, sizeof st) == 0) heaps = (long)(st.heaps_created - heaps0);
    printf("RESULT bench=thread_start mode=%s dead_heap=%d env=%s threads=%ld seconds=%.6f start_seconds=%.6f "
           "allocator=%s malloc_from=%s hakmem_owned=%d foreign_samples=%ld heaps_created=%ld\n",
           mode, dead, env, n, t1 - t0, t_started - t0,
           owned == 1 && atomic_load(&foreign) == 0 ? "hakmem" : owned == -1 ? "glibc" : "mixed", from, owned,
           atomic_load(&foreign), heaps);
    fflush(stdout);
    return 0;
}
