/* soak -- a long single-process run that watches RSS and OS calls.
 *
 * usage: soak [SECONDS=180] [THREADS=2] [SEED=1]
 * Each thread keeps 4096 slots, always occupied, and replaces random ones
 * (free, then malloc again).  Every slot has its own size, drawn once: mostly
 * 16..1040 B, 1 in 64 up to 64 KiB, 1 in 1024 up to 2 MiB; so the live bytes
 * are constant and any growth of RSS is the allocator's (fragmentation,
 * leaks).  1 in 8 frees goes to the neighbouring thread's hand-off slot (a
 * remote free).  Blocks are filled and verified.  The main thread samples
 * RSS once a second.
 * Reported:
 *   rss_drift_pct  growth of the peak sampled RSS in the second half of the
 *                  run over the first half, after a 10% warm-up (0 = stable)
 *   syscalls_per_op (mmap+munmap+madvise+mremap) / operations, from hakmem's
 *                  own counters (hakmem_stats_get), -1 under other allocators
 */
#include "bench_common.h"
#include <pthread.h>
#include <stdatomic.h>
#include "../include/hakmem.h"   /* hakmem_stats_t only; looked up with dlsym */

#define SLOTS 4096
typedef struct { void *p; size_t n; uint8_t tag; } slot_t;
typedef struct { int id; uint64_t seed; _Atomic(void *) handoff; uint64_t ops; int bad; } worker_t;

static _Atomic int stop;
static worker_t *workers;
static int nthreads;

static size_t pick_size(bench_rng_t *r) {
    uint64_t x = bench_rng_next(r);
    if ((x & 1023) == 0) return (size_t)bench_rng_range(r, 512 * 1024, 2 * 1024 * 1024);
    if ((x & 63) == 1) return (size_t)bench_rng_range(r, 1040, 64 * 1024);
    return (size_t)bench_rng_range(r, 16, 1040);
}

static void *work(void *arg) {
    worker_t *w = arg;
    bench_rng_t r;
    bench_rng_seed(&r, w->seed);
    slot_t *s = calloc(SLOTS, sizeof *s);
    for (size_t i = 0; i < SLOTS; i++) s[i].n = pick_size(&r);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int k = 0; k < 1024; k++) {
            size_t i = (size_t)(bench_rng_next(&r) % SLOTS);
            if (s[i].p) {
                unsigned char *p = s[i].p;
                if (p[0] != s[i].tag || p[s[i].n - 1] != s[i].tag) w->bad++;
                if ((bench_rng_next(&r) & 7) == 0) {       /* hand over: the neighbour frees it */
                    void *old = atomic_exchange(&workers[(w->id + 1) % nthreads].handoff, p);
                    free(old);
                } else {
                    free(p);
                }
                s[i].p = NULL;
                w->ops++;
            }
            size_t n = s[i].n;
            unsigned char *p = malloc(n);
            if (!p) { w->bad++; continue; }
            s[i].tag = (uint8_t)(i * 31 + 7 + w->ops);
            memset(p, s[i].tag, n < 64 ? n : 64);
            p[n - 1] = s[i].tag;
            s[i].p = p;
            w->ops++;
        }
        free(atomic_exchange(&w->handoff, NULL));
    }
    for (size_t i = 0; i < SLOTS; i++) free(s[i].p);
    free(s);
    return NULL;
}

int main(int argc, char **argv) {
    long seconds = bench_arg_long(argc, argv, 1, 180);
    nthreads = (int)bench_arg_long(argc, argv, 2, 2);
    long seed = bench_arg_long(argc, argv, 3, 1);
    if (seconds < 2 || nthreads < 1) bench_die("SECONDS >= 2 and THREADS >= 1");
    int (*stats_get)(void *, size_t) = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_stats_get");
    static hakmem_stats_t st0, st1;
    workers = calloc((size_t)nthreads, sizeof *workers);
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    long *rss = calloc((size_t)seconds + 1, sizeof *rss);
    double t0 = bench_now();
    for (int i = 0; i < nthreads; i++) {
        workers[i].id = i; workers[i].seed = (uint64_t)seed * 1000 + (uint64_t)i;
        pthread_create(&t[i], NULL, work, &workers[i]);
    }
    long warm = seconds / 10 > 0 ? seconds / 10 : 1;
    uint64_t ops_warm = 0;
    for (long sec = 1; sec <= seconds; sec++) {
        sleep(1);
        rss[sec] = bench_rss_kb();
        if (sec == warm) {
            if (stats_get) stats_get(&st0, sizeof st0);
            for (int i = 0; i < nthreads; i++) ops_warm += workers[i].ops;
        }
        fprintf(stderr, "soak: %lds rss %ld KiB\n", sec, rss[sec]);
    }
    uint64_t ops_end = 0;
    for (int i = 0; i < nthreads; i++) ops_end += workers[i].ops;
    if (stats_get) stats_get(&st1, sizeof st1);
    atomic_store(&stop, 1);
    int bad = 0;
    uint64_t ops = 0;
    for (int i = 0; i < nthreads; i++) { pthread_join(t[i], NULL); bad += workers[i].bad; ops += workers[i].ops; }
    double secs = bench_now() - t0;
    long mid = warm + (seconds - warm) / 2, peak1 = 0, peak2 = 0;
    for (long s = warm + 1; s <= seconds; s++) {
        if (s <= mid) { if (rss[s] > peak1) peak1 = rss[s]; }
        else if (rss[s] > peak2) peak2 = rss[s];
    }
    double drift = peak1 > 0 && peak2 > peak1 ? 100.0 * (double)(peak2 - peak1) / (double)peak1 : 0.0;
    double sys = -1;
    if (stats_get && ops_end > ops_warm) {
        uint64_t calls = (st1.mmap_calls - st0.mmap_calls) + (st1.munmap_calls - st0.munmap_calls) +
                         (st1.madvise_calls - st0.madvise_calls) + (st1.mremap_calls - st0.mremap_calls);
        sys = (double)calls / (double)(ops_end - ops_warm);
    }
    char extra[256];
    snprintf(extra, sizeof extra, "rss_first_half_peak_kb=%ld rss_second_half_peak_kb=%ld rss_drift_pct=%.3f syscalls_per_op=%.3g verify_errors=%d",
             peak1, peak2, drift, sys, bad);
    bench_result("soak", nthreads, ops, secs, "%s", extra);
    return bad ? 1 : 0;
}
