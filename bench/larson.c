/* larson -- server-style workload in the spirit of Larson & Krishnan's test.
 *
 * usage: larson [THREADS=2] [ROUNDS=20] [OPS_PER_ROUND=20000] [BLOCKS=1000]
 *               [SEED=1] [MIN=16] [MAX=512]
 * THREADS chains run at the same time.  Each chain owns an array of BLOCKS
 * blocks (initially allocated by the main thread).  A worker thread performs
 * OPS_PER_ROUND replacements (free a random block of its array, malloc a new
 * one of random size MIN..MAX and write it), then starts a fresh thread that
 * inherits the array and exits.  After ROUNDS generations the chain ends.
 * So many frees hit blocks allocated by a thread that has already exited
 * (remote frees into orphaned heaps) and threads are created constantly.
 * ops = THREADS * ROUNDS * OPS_PER_ROUND replacements (one free + one malloc).
 */
#include "bench_common.h"
#include <pthread.h>

typedef struct chain_s { /* one cache line each (aligned_alloc below) */
    void **blk;
    size_t *len;
    long nblocks;
    long round;
    bench_rng_t rng;
    uint64_t sum;
} __attribute__((aligned(64))) chain_t;

static long g_rounds, g_ops, g_min, g_max;
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
    c->rng = rng;
    c->sum += sum;
    c->round++;
    if (c->round < g_rounds) {
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

int main(int argc, char **argv)
{
    int threads = bench_threads(bench_arg_long(argc, argv, 1, 2));
    long seed, b, t;
    chain_t *chains;
    double t0, t1;
    uint64_t sum = 0;

    g_rounds = bench_arg_long(argc, argv, 2, 20);
    g_ops = bench_arg_long(argc, argv, 3, 20000);
    long nblocks = bench_arg_long(argc, argv, 4, 1000);
    seed = bench_arg_long(argc, argv, 5, 1);
    g_min = bench_arg_long(argc, argv, 6, 16);
    g_max = bench_arg_long(argc, argv, 7, 512);
    if (g_rounds < 1 || g_ops < 0 || nblocks < 1 || g_min < 1 || g_max < g_min)
        bench_die("bad arguments");

    pthread_attr_init(&g_attr);
    pthread_attr_setdetachstate(&g_attr, PTHREAD_CREATE_DETACHED);

    chains = aligned_alloc(64, (size_t)threads * sizeof *chains);
    if (chains)
        memset(chains, 0, (size_t)threads * sizeof *chains);
    if (!chains)
        bench_die("out of memory");
    for (t = 0; t < threads; t++) {
        chain_t *c = &chains[t];
        c->nblocks = nblocks;
        c->blk = bench_xmalloc((size_t)nblocks * sizeof *c->blk);
        c->len = bench_xmalloc((size_t)nblocks * sizeof *c->len);
        bench_rng_seed(&c->rng, (uint64_t)seed * 1000003u + (uint64_t)t);
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
    while (g_done_chains < threads)
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    t1 = bench_now();
    if (g_failed)
        bench_die("pthread_create failed inside a chain");

    for (t = 0; t < threads; t++) {
        chain_t *c = &chains[t];
        sum += c->sum;
        for (b = 0; b < nblocks; b++) {
            bench_sample_owned(c->blk[b]); /* allocated by exited worker threads */
            free(c->blk[b]);
        }
        free(c->blk);
        free(c->len);
    }
    free(chains);
    bench_result("larson", threads, (uint64_t)threads * (uint64_t)g_rounds * (uint64_t)g_ops,
                 t1 - t0, "rounds=%ld threads_created=%ld checksum=%llu", g_rounds,
                 (long)threads * g_rounds, (unsigned long long)(sum & 0xffff));
    return 0;
}
