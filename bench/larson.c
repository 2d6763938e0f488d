/* larson -- server-style workload in the spirit of Larson & Krishnan's test.
 *
 * usage: larson [THREADS=2] [ROUNDS=20] [OPS_PER_ROUND=20000] [BLOCKS=1000]
 *               [SEED=1] [MIN=16] [MAX=512] [STYLE=chain] [MILLIS=0]
 * THREADS chains run at the same time.  Each chain owns an array of BLOCKS
 * blocks (initially allocated by the main thread).  A worker thread performs
 * OPS_PER_ROUND replacements (free a random block of its array, malloc a new
 * one of random size MIN..MAX and write it), then starts a fresh thread that
 * inherits the array and exits.  After ROUNDS generations the chain ends.
 * So many frees hit blocks allocated by a thread that has already exited
 * (remote frees into orphaned heaps) and threads are created constantly.
 * ops = THREADS * ROUNDS * OPS_PER_ROUND replacements (one free + one malloc).
 *
 * STYLE=cpp follows larson.cpp as the Hoard and mimalloc-bench suites run it
 * ("larson 5 8 1000 5000 100 4141 2": 5 s, sizes 8..999, 5,000 blocks per
 * thread, a thread generation of 100 * 5,000 replacements, 2 threads):
 *   - sizes are MIN + r % (MAX - MIN), so MAX itself is never asked for;
 *   - the main thread allocates all THREADS * BLOCKS blocks into one array,
 *     permutes the whole array at random and then makes 4 * THREADS * BLOCKS
 *     random replacements in it before the chain i takes the i-th slice, so
 *     each chain starts with blocks interleaved in memory with the other
 *     chains' blocks (with STYLE=chain each chain's blocks are allocated
 *     together, in order);
 *   - a new block gets larson.cpp's two writes (bytes 0 and 1) and one read
 *     of byte 0; nothing is read before a free.
 * MILLIS > 0 makes the run time-bound as larson.cpp's is: every chain
 * checks a stop flag after each replacement, the main thread raises it after
 * MILLIS ms, a generation that ends before it starts its successor, and
 * ops / seconds is the throughput over the whole window (ROUNDS is ignored).
 * larson.cpp's 5 s become MILLIS (1,000 in make bench) so the row takes as
 * long as the others; a run is then no longer a fixed amount of work.
 * Differences that remain: xorshift64* instead of lran2 (a cheaper random
 * number generator, so the allocator's share of the time is a little larger),
 * and the threads are detached (larson.cpp never joins its threads and keeps
 * their stacks until the process exits).
 */
#include "bench_common.h"
#include <pthread.h>
#include <errno.h>

typedef struct chain_s { /* one cache line each (aligned_alloc below) */
    void **blk;
    size_t *len;
    long nblocks;
    long round;
    bench_rng_t rng;
    uint64_t sum;
    uint64_t done_ops;  /* replacements made (STYLE=cpp counts what it did) */
} __attribute__((aligned(64))) chain_t;

static long g_rounds, g_ops, g_min, g_max;
static int g_cpp;           /* STYLE=cpp */
static int g_timed;         /* MILLIS > 0: run until g_stop */
static int g_stop;          /* set by the main thread after MILLIS ms */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_done_chains;
static int g_failed;
static pthread_attr_t g_attr;

static void *worker(void *arg)
{
    chain_t *c = (chain_t *)arg;
    /* rng and sum in locals: the chains' structs must not be written per
     * operation, or the benchmark measures its own false sharing */
    bench_rng_t rng = c->rng;
    uint64_t sum = 0;
    long i;
    if (g_cpp) {
        long range = g_max - g_min;
        for (i = 0; i < g_ops; i++) {
            size_t k = (size_t)(bench_rng_next(&rng) % (uint64_t)c->nblocks);
            size_t n = (size_t)g_min + (range ? (size_t)(bench_rng_next(&rng) % (uint64_t)range) : 0);
            volatile char *p;
            free(c->blk[k]);
            p = (volatile char *)malloc(n);
            if (!p)
                bench_die("malloc failed");
            p[0] = 'a';    /* larson.cpp's "Write something!" */
            sum += (uint64_t)p[0];
            p[1] = 'b';
            c->blk[k] = (void *)p;
            c->len[k] = n;
            if (g_timed && __atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
                i++;
                break;
            }
        }
        goto generation_done;
    }
    for (i = 0; i < g_ops; i++) {
        uint64_t r = bench_rng_next(&rng);
        size_t k = (size_t)((r >> 32) % (uint64_t)c->nblocks);
        size_t n = (size_t)g_min + (size_t)((r & 0xffffffffu) % (uint64_t)(g_max - g_min + 1));
        void *p;
        sum += bench_read(c->blk[k], c->len[k]);
        free(c->blk[k]);
        p = malloc(n);
        if (!p)
            bench_die("malloc failed");
        bench_touch(p, n, r);
        c->blk[k] = p;
        c->len[k] = n;
    }
generation_done:
    c->rng = rng;
    c->sum += sum;
    c->done_ops += (uint64_t)i;
    c->round++;
    if (g_timed ? !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE) : c->round < g_rounds) {
        pthread_t t;
        if (pthread_create(&t, &g_attr, worker, c) == 0)
            return NULL; /* the successor carries on with our blocks */
        pthread_mutex_lock(&g_mu);
        g_failed = 1;
        pthread_mutex_unlock(&g_mu);
    }
    pthread_mutex_lock(&g_mu);
    g_done_chains++;
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* STYLE=cpp: larson.cpp's warmup, by the main thread over all chains' blocks
 * at once: allocate, permute the whole array, 4 * N random replacements */
static void warmup_cpp(void **blk, size_t *len, long n, bench_rng_t *rng)
{
    long range = g_max - g_min, b;
    for (b = 0; b < n; b++) {
        len[b] = (size_t)g_min + (range ? (size_t)(bench_rng_next(rng) % (uint64_t)range) : 0);
        blk[b] = bench_xmalloc(len[b]);
    }
    for (b = n; b > 0; b--) {
        long v = (long)(bench_rng_next(rng) % (uint64_t)b);
        void *tp = blk[v];
        size_t tl = len[v];
        blk[v] = blk[b - 1];
        len[v] = len[b - 1];
        blk[b - 1] = tp;
        len[b - 1] = tl;
    }
    for (b = 0; b < 4 * n; b++) {
        long v = (long)(bench_rng_next(rng) % (uint64_t)n);
        free(blk[v]);
        len[v] = (size_t)g_min + (range ? (size_t)(bench_rng_next(rng) % (uint64_t)range) : 0);
        blk[v] = bench_xmalloc(len[v]);
    }
}

int main(int argc, char **argv)
{
    int threads = bench_threads(bench_arg_long(argc, argv, 1, 2));
    long seed, b, t, millis;
    const char *style;
    chain_t *chains;
    void **all_blk = NULL;
    size_t *all_len = NULL;
    double t0, t1;
    uint64_t sum = 0, ops = 0;

    g_rounds = bench_arg_long(argc, argv, 2, 20);
    g_ops = bench_arg_long(argc, argv, 3, 20000);
    long nblocks = bench_arg_long(argc, argv, 4, 1000);
    seed = bench_arg_long(argc, argv, 5, 1);
    g_min = bench_arg_long(argc, argv, 6, 16);
    g_max = bench_arg_long(argc, argv, 7, 512);
    style = argc > 8 && argv[8][0] ? argv[8] : "chain";
    millis = bench_arg_long(argc, argv, 9, 0);
    if (strcmp(style, "cpp") == 0)
        g_cpp = 1;
    else if (strcmp(style, "chain") != 0)
        bench_die("STYLE must be chain or cpp");
    g_timed = millis > 0;
    if (g_rounds < 1 || g_ops < 0 || nblocks < 1 || g_min < 1 || g_max < g_min || millis < 0 ||
        (g_cpp && g_min < 2) || (g_timed && !g_cpp))
        bench_die("bad arguments (STYLE=cpp needs MIN >= 2; MILLIS only with STYLE=cpp)");

    pthread_attr_init(&g_attr);
    pthread_attr_setdetachstate(&g_attr, PTHREAD_CREATE_DETACHED);

    chains = aligned_alloc(64, (size_t)threads * sizeof *chains);
    if (chains)
        memset(chains, 0, (size_t)threads * sizeof *chains);
    if (!chains)
        bench_die("out of memory");
    if (g_cpp) {
        bench_rng_t wrng;
        bench_rng_seed(&wrng, (uint64_t)seed * 1000003u + 999983u);
        all_blk = bench_xmalloc((size_t)threads * (size_t)nblocks * sizeof *all_blk);
        all_len = bench_xmalloc((size_t)threads * (size_t)nblocks * sizeof *all_len);
        warmup_cpp(all_blk, all_len, threads * nblocks, &wrng);
    }
    for (t = 0; t < threads; t++) {
        chain_t *c = &chains[t];
        c->nblocks = nblocks;
        bench_rng_seed(&c->rng, (uint64_t)seed * 1000003u + (uint64_t)t);
        if (g_cpp) {
            c->blk = all_blk + t * nblocks;
            c->len = all_len + t * nblocks;
            continue;
        }
        c->blk = bench_xmalloc((size_t)nblocks * sizeof *c->blk);
        c->len = bench_xmalloc((size_t)nblocks * sizeof *c->len);
        for (b = 0; b < nblocks; b++) {
            size_t n = (size_t)bench_rng_range(&c->rng, (uint64_t)g_min, (uint64_t)g_max);
            c->blk[b] = bench_xmalloc(n);
            c->len[b] = n;
            bench_touch(c->blk[b], n, (uint64_t)b);
        }
    }

    t0 = bench_now();
    for (t = 0; t < threads; t++) {
        pthread_t th;
        if (pthread_create(&th, &g_attr, worker, &chains[t]) != 0)
            bench_die("pthread_create failed");
    }
    pthread_mutex_lock(&g_mu);
    if (g_timed) { /* larson.cpp: sleep, raise the stop flag, wait for every chain */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += millis / 1000;
        until.tv_nsec += (millis % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (g_done_chains < threads &&
               pthread_cond_timedwait(&g_cv, &g_mu, &until) != ETIMEDOUT)
            ;
        __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    }
    while (g_done_chains < threads)
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    t1 = bench_now();
    if (g_failed)
        bench_die("pthread_create failed inside a chain");

    long generations = 0;
    for (t = 0; t < threads; t++) {
        chain_t *c = &chains[t];
        sum += c->sum;
        ops += c->done_ops;
        generations += c->round;
        for (b = 0; b < nblocks; b++) {
            bench_sample_owned(c->blk[b]); /* allocated by exited worker threads */
            free(c->blk[b]);
        }
        if (!g_cpp) {
            free(c->blk);
            free(c->len);
        }
    }
    free(all_blk);
    free(all_len);
    free(chains);
    if (ops == 0)
        bench_die("no operation was made");
    bench_result("larson", threads, ops, t1 - t0,
                 "rounds=%ld threads_created=%ld style=%s millis=%ld checksum=%llu",
                 g_timed ? generations / threads : g_rounds, generations, style, millis,
                 (unsigned long long)(sum & 0xffff));
    return 0;
}
