/* soak -- a long single-process run that watches RSS and OS calls.
 *
 * usage: soak [SECONDS=180] [THREADS=2] [SEED=1]
 * Each thread keeps 4096 slots, filled at the start, and replaces random
 * ones (free, then malloc again).  Every slot has its own size, drawn once:
 * mostly 16..1040 B, 1 in 64 up to 64 KiB, 1 in 1024 up to 2 MiB.  1 in 8
 * frees goes to the neighbouring thread's hand-off slot instead (a remote
 * free); the slot stays empty, and counts as live, until that block is freed,
 * and its thread refills it at its next round of 1,024 replacements.  So each
 * thread's live blocks per size class never exceed its slots of that class
 * and come back to them every round: the demand is constant, and any growth
 * of RSS after the warm-up is the allocator's (fragmentation, leaks).  Blocks
 * are filled and verified.  The main thread samples RSS once a second.
 * (Until 2026-11-24 a handed-over slot was refilled at once: a block in
 * transit, one more while the neighbour was descheduled before its free,
 * raised the demand at random moments, and the drift it caused was the
 * program's, not the allocator's.)
 * Reported:
 *   rss_drift_pct  growth of the peak sampled RSS in the second half of the
 *                  run over the first half, after a 10% warm-up (0 = stable)
 *   syscalls_per_op (mmap+munmap+madvise+mremap) / operations, from hakmem's
 *                  own counters (hakmem_stats_get), -1 under other allocators
 *   program_grew   how many (thread, size class) pairs reached more live
 *                  blocks in the second half than in the first, a block
 *                  counting as live from the malloc call until its free has
 *                  returned: a check of the constant demand above (0 unless
 *                  the workload is broken).  Classes are hakmem's (8 a
 *                  doubling above 128 B).
 */
#include "bench_common.h"
#include <pthread.h>
#include <stdatomic.h>
#include "../include/hakmem.h"   /* hakmem_stats_t only; looked up with dlsym */

#define SLOTS 4096
/* pending: the slot's block was handed over and is not freed yet; the slot
 * stays empty until it is (the demand stays constant: above) */
typedef struct { void *p; size_t n; uint8_t tag; _Atomic uint8_t pending; } slot_t;
typedef struct { int id; uint64_t seed; _Atomic(void *) handoff; slot_t *slots; uint64_t ops; int bad; } worker_t;

static _Atomic int stop;

/* The program's own live blocks per (thread, size class) and their peak in
 * each half (program_grew, above). */
#define CLASSES 128
static _Atomic int half;                    /* 0 first half (from the warm-up), 1 second */
static _Atomic long (*live)[CLASSES], (*live_peak)[2][CLASSES];
static unsigned size_class(size_t size) {
    if (size <= 128) return size <= 16 ? 0 : (unsigned)((size - 1) >> 4);
    size_t s = size - 1;
    unsigned k = 63u - (unsigned)__builtin_clzl(s);
    return 8u + (k - 7u) * 8u + (unsigned)((s >> (k - 3)) & 7u);
}
static size_t class_max(unsigned c) {          /* the largest size of class c */
    if (c < 8) return 16 * (size_t)(c + 1);
    unsigned k = 7 + (c - 8) / 8;
    return ((size_t)1 << k) + ((size_t)((c - 8) % 8 + 1) << (k - 3));
}
static void live_add(int owner, size_t n, long d) {
    unsigned c = size_class(n);
    long v = atomic_fetch_add_explicit(&live[owner][c], d, memory_order_relaxed) + d;
    _Atomic long *peak = &live_peak[owner][atomic_load_explicit(&half, memory_order_relaxed)][c];
    long m = atomic_load_explicit(peak, memory_order_relaxed);
    while (v > m && !atomic_compare_exchange_weak_explicit(peak, &m, v, memory_order_relaxed,
                                                           memory_order_relaxed)) {}
}
static worker_t *workers;
/* Free a handed-over block (either thread): it carries its owner in byte 2,
 * its size in bytes 4-7 and its slot in bytes 8-11.  It leaves the live
 * count once free() has returned, and its slot is free again after that. */
static void handed_free(unsigned char *p) {
    if (!p) return;
    int owner = p[2];
    uint32_t n = ((uint32_t *)p)[1], i = ((uint32_t *)p)[2];
    free(p);
    live_add(owner, n, -1);
    atomic_store_explicit(&workers[owner].slots[i].pending, 0, memory_order_release);
}
static int nthreads;

static size_t pick_size(bench_rng_t *r) {
    uint64_t x = bench_rng_next(r);
    if ((x & 1023) == 0) return (size_t)bench_rng_range(r, 512 * 1024, 2 * 1024 * 1024);
    if ((x & 63) == 1) return (size_t)bench_rng_range(r, 1040, 64 * 1024);
    return (size_t)bench_rng_range(r, 16, 1040);
}

/* Give slot i a new block of its size, filled. */
static void fill(worker_t *w, size_t i) {
    slot_t *s = &w->slots[i];
    size_t n = s->n;
    live_add(w->id, n, 1);     /* live from the call on: the allocator's view */
    unsigned char *p = malloc(n);
    if (!p) { w->bad++; live_add(w->id, n, -1); return; }
    s->tag = (uint8_t)(i * 31 + 7 + w->ops);
    memset(p, s->tag, n < 64 ? n : 64);
    p[n - 1] = s->tag;
    s->p = p;
    w->ops++;
}

static void *work(void *arg) {
    worker_t *w = arg;
    bench_rng_t r;
    bench_rng_seed(&r, w->seed);
    slot_t *s = w->slots;
    /* the slots this thread handed over: refilled at the next round once
     * freed, so that the live blocks stay at the slots (a slot left empty
     * until picked again would make the live count wander) */
    uint32_t *handed = calloc(SLOTS, sizeof *handed);
    size_t nhanded = 0;
    if (!handed) bench_die("out of memory");
    for (size_t i = 0; i < SLOTS; i++) s[i].n = pick_size(&r);
    for (size_t i = 0; i < SLOTS; i++) fill(w, i);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (size_t j = 0; j < nhanded;) {
            uint32_t i = handed[j];
            if (atomic_load_explicit(&s[i].pending, memory_order_acquire)) { j++; continue; }
            fill(w, i);
            handed[j] = handed[--nhanded];
        }
        for (int k = 0; k < 1024; k++) {
            size_t i = (size_t)(bench_rng_next(&r) % SLOTS);
            if (!s[i].p) continue;     /* handed over: refilled above */
            unsigned char *p = s[i].p;
            if (p[0] != s[i].tag || p[s[i].n - 1] != s[i].tag) w->bad++;
            s[i].p = NULL;
            w->ops++;
            if ((bench_rng_next(&r) & 7) == 0) {       /* hand over: the neighbour frees it */
                p[2] = (unsigned char)w->id;
                ((uint32_t *)p)[1] = (uint32_t)s[i].n;
                ((uint32_t *)p)[2] = (uint32_t)i;
                atomic_store_explicit(&s[i].pending, 1, memory_order_relaxed);
                handed[nhanded++] = (uint32_t)i;
                handed_free(atomic_exchange(&workers[(w->id + 1) % nthreads].handoff, p));
                continue;
            }
            free(p);
            live_add(w->id, s[i].n, -1);
            fill(w, i);
        }
        handed_free(atomic_exchange(&w->handoff, NULL));
    }
    for (size_t i = 0; i < SLOTS; i++) free(s[i].p);   /* (the neighbour may still clear pending flags) */
    free(handed);
    return NULL;
}

int main(int argc, char **argv) {
    long seconds = bench_arg_long(argc, argv, 1, 180);
    nthreads = (int)bench_arg_long(argc, argv, 2, 2);
    long seed = bench_arg_long(argc, argv, 3, 1);
    if (seconds < 2 || nthreads < 1) bench_die("SECONDS >= 2 and THREADS >= 1");
    int (*stats_get)(void *, size_t) = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_stats_get");
    static hakmem_stats_t st0, st1;
    if (nthreads > 256) bench_die("THREADS <= 256");
    workers = calloc((size_t)nthreads, sizeof *workers);
    live = calloc((size_t)nthreads, sizeof *live);
    live_peak = calloc((size_t)nthreads, sizeof *live_peak);
    if (!workers || !live || !live_peak) bench_die("out of memory");
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    long *rss = calloc((size_t)seconds + 1, sizeof *rss);
    double t0 = bench_now();
    for (int i = 0; i < nthreads; i++) {
        workers[i].id = i; workers[i].seed = (uint64_t)seed * 1000 + (uint64_t)i;
        workers[i].slots = calloc(SLOTS, sizeof *workers[i].slots);
        if (!workers[i].slots) bench_die("out of memory");
        pthread_create(&t[i], NULL, work, &workers[i]);
    }
    long warm = seconds / 10 > 0 ? seconds / 10 : 1;
    uint64_t ops_warm = 0;
    for (long sec = 1; sec <= seconds; sec++) {
        sleep(1);
        rss[sec] = bench_rss_kb();
        if (sec == warm + (seconds - warm) / 2) atomic_store(&half, 1);
        if (sec == warm) {
            for (int h = 0; h < nthreads; h++)   /* the first half's peaks start from here */
                for (int c = 0; c < CLASSES; c++) atomic_store(&live_peak[h][0][c], atomic_load(&live[h][c]));
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
    for (int i = 0; i < nthreads; i++) handed_free(atomic_exchange(&workers[i].handoff, NULL));
    for (int i = 0; i < nthreads; i++) free(workers[i].slots);
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
    int grew = 0;
    for (int h = 0; h < nthreads; h++)
        for (int c = 0; c < CLASSES; c++)
            if (live_peak[h][1][c] > live_peak[h][0][c]) {
                grew++;
                fprintf(stderr, "soak: thread %d, class %d (up to %zu B): %ld live blocks at most in the first half, %ld in the second\n",
                        h, c, class_max((unsigned)c),
                        live_peak[h][0][c], live_peak[h][1][c]);
            }
    char extra[320];
    snprintf(extra, sizeof extra, "rss_first_half_peak_kb=%ld rss_second_half_peak_kb=%ld rss_drift_pct=%.3f syscalls_per_op=%.3g verify_errors=%d program_grew=%d",
             peak1, peak2, drift, sys, bad, grew);
    bench_result("soak", nthreads, ops, secs, "%s", extra);
    return bad ? 1 : 0;
}
