/* bench_common.h -- shared helpers for the hakmem benchmark workloads.
 *
 * Every workload is a plain C program that calls malloc/free, so the same
 * binary is run under every allocator (LD_PRELOAD=lib... or none for glibc).
 * This header provides:
 *   - bench_now():        monotonic wall clock in seconds
 *   - bench_rng_*:        xorshift64* pseudo random numbers (deterministic per seed)
 *   - bench_rss_kb():     current resident set size from /proc/self/statm
 *   - bench_peak_rss_kb(): peak RSS (VmHWM from /proc/self/status)
 *   - bench_result():     prints the single machine-readable RESULT line,
 *                         including the allocator proof:
 *       allocator=<file of the shared object that defines malloc>
 *       hakmem_owned=<1|0|-1>  (hakmem_owns() on a fresh malloc'd pointer and
 *                               on blocks sampled from the workload itself,
 *                               see bench_sample_owned(); -1 when no
 *                               hakmem_owns symbol exists)
 * The runner (bench/run.py, bench/stats.py) rejects a run whose proof does
 * not match the allocator it meant to measure.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- xorshift64* ---- */
typedef struct { uint64_t s; } bench_rng_t;

static inline void bench_rng_seed(bench_rng_t *r, uint64_t seed)
{
    /* splitmix64 step so that small seeds (1, 2, 3...) give unrelated streams */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    r->s = z ? z : 0x2545F4914F6CDD1Dull;
}

static inline uint64_t bench_rng_next(bench_rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* uniform integer in [lo, hi] (inclusive); the slight modulo bias is irrelevant here */
static inline uint64_t bench_rng_range(bench_rng_t *r, uint64_t lo, uint64_t hi)
{
    return lo + (bench_rng_next(r) >> 11) % (hi - lo + 1);
}

/* ---- memory usage ---- */
static inline long bench_rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Peak RSS of this process image: VmHWM from /proc/self/status.  (getrusage's
 * ru_maxrss is not used: after fork+exec it can still carry the high-water
 * mark of the parent, e.g. the Python runner, and then hides small peaks.) */
static inline long bench_peak_rss_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* ---- argument helpers ---- */
static inline long bench_arg_long(int argc, char **argv, int idx, long def)
{
    if (idx < argc && argv[idx][0] != '\0')
        return strtol(argv[idx], NULL, 0);
    return def;
}

static inline void bench_die(const char *msg)
{
    fprintf(stderr, "bench: %s\n", msg);
    exit(2);
}

static inline void *bench_xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench: malloc(%zu) failed\n", n);
        exit(3);
    }
    return p;
}

/* ---- allocator proof ---- */
typedef int (*bench_owns_fn)(const void *);

/* Path of the shared object that provides the malloc this process uses. */
static inline const char *bench_allocator_path(void)
{
    static char path[512];
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    if (!sym)
        sym = (void *)&malloc;
    memset(&info, 0, sizeof info);
    if (dladdr(sym, &info) == 0 || !info.dli_fname || !info.dli_fname[0]) {
        snprintf(path, sizeof path, "unknown");
    } else {
        size_t i;
        snprintf(path, sizeof path, "%s", info.dli_fname);
        for (i = 0; path[i]; i++) /* keep the RESULT line space-separated */
            if (path[i] == ' ' || path[i] == '\t' || path[i] == '=')
                path[i] = '_';
    }
    return path;
}

static inline bench_owns_fn bench_owns_symbol(void)
{
    static bench_owns_fn fn;
    static int looked;
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&fn, (bench_owns_fn)dlsym(RTLD_DEFAULT, "hakmem_owns"), __ATOMIC_RELAXED);
        __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&fn, __ATOMIC_RELAXED);
}

/* Blocks the workload itself allocated (various sizes, various threads) are
 * sampled with bench_sample_owned(); a single block that hakmem_owns() does
 * not claim turns the run's proof into hakmem_owned=0.  This catches an
 * allocator that silently forwards some sizes or threads to glibc. */
static uint64_t bench_samples, bench_samples_foreign;

static inline void bench_sample_owned(const void *p)
{
    bench_owns_fn owns = bench_owns_symbol();
    if (!owns || !p)
        return;
    __atomic_fetch_add(&bench_samples, 1, __ATOMIC_RELAXED);
    if (!owns(p))
        __atomic_fetch_add(&bench_samples_foreign, 1, __ATOMIC_RELAXED);
}

/* 1/0 = hakmem_owns() claimed / did not claim a fresh block and every sampled
 * workload block; -1 = no hakmem_owns symbol in the process */
static inline int bench_hakmem_owned(void)
{
    bench_owns_fn owns = bench_owns_symbol();
    void *p;
    int r;
    if (!owns)
        return -1;
    p = bench_xmalloc(48);
    memset(p, 0x5a, 48);
    r = owns(p) ? 1 : 0;
    free(p);
    if (__atomic_load_n(&bench_samples_foreign, __ATOMIC_RELAXED) != 0)
        r = 0;
    return r;
}

/* Print the one RESULT line.  extra_fmt (may be NULL) appends "key=value ..."
 * fields.  Call after the timed section; the proof allocation happens here. */
static inline void bench_result(const char *workload, int threads, uint64_t ops,
                                double seconds, const char *extra_fmt, ...)
{
    char extra[1024] = "";
    int owned = bench_hakmem_owned();
    const char *alloc = bench_allocator_path();
    double ops_per_sec = seconds > 0 ? (double)ops / seconds : 0.0;
    if (extra_fmt) {
        va_list ap;
        va_start(ap, extra_fmt);
        vsnprintf(extra, sizeof extra, extra_fmt, ap);
        va_end(ap);
    }
    printf("RESULT workload=%s threads=%d ops=%llu seconds=%.6f ops_per_sec=%.1f "
           "allocator=%s hakmem_owned=%d owned_samples=%llu foreign_samples=%llu "
           "peak_rss_kb=%ld%s%s\n",
           workload, threads, (unsigned long long)ops, seconds, ops_per_sec, alloc, owned,
           (unsigned long long)bench_samples, (unsigned long long)bench_samples_foreign,
           bench_peak_rss_kb(), extra[0] ? " " : "", extra);
    fflush(stdout);
}

/* Write a byte pattern at the first and last byte of a fresh block (and a
 * word at the start when it fits) so every block is really touched. */
static inline void bench_touch(void *p, size_t n, uint64_t tag)
{
    unsigned char *c = (unsigned char *)p;
    if (n >= sizeof(uint64_t))
        memcpy(c, &tag, sizeof tag);
    else
        c[0] = (unsigned char)(tag | 1);
    c[n - 1] = (unsigned char)(tag >> 8 | 1);
}

static inline uint64_t bench_read(const void *p, size_t n)
{
    const unsigned char *c = (const unsigned char *)p;
    return (uint64_t)c[0] + c[n - 1];
}

/* Parse "prog key ..." style thread counts, bounded to something sane. */
static inline int bench_threads(long t)
{
    if (t < 1)
        t = 1;
    if (t > 256)
        t = 256;
    return (int)t;
}

#endif /* BENCH_COMMON_H */
