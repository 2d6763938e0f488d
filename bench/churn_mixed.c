/* churn_mixed -- short-lived threads, mixed sizes, frees across threads.
 *
 * usage: churn_mixed [THREADS=2] [ROUNDS=250] [BLOCKS=1000] [SEED=1]
 * Modelled on the program of issue 12: ROUNDS rounds; each round starts
 * THREADS fresh threads (two at a time by default) and joins them before the
 * next round.  Each thread
 *   1. mallocs BLOCKS blocks of mixed sizes and writes the first and last byte
 *      and one byte in every 4 KiB page of each:
 *         60 %  16 B .. 256 B       25 %  257 B .. 4 KiB
 *         10 %  4 KiB .. 64 KiB      4 %  64 KiB .. 256 KiB
 *          1 %  256 KiB .. 2 MiB   (log-uniform within each band)
 *   2. waits until every thread of the round has done so (barrier);
 *   3. frees, in random order, the blocks of its partner thread (slot i frees
 *      the blocks of slot i^1, or of slot (i+1) % THREADS when THREADS is odd),
 *      reading each one first: every one of these frees is remote;
 *   4. keeps back 1 block in 16 of the partner's; they are left in a mailbox
 *      and freed by a thread of the next round, after their owner has exited.
 * So every round a thread heap is born, fills up with a few MiB of blocks of
 * every size class, loses them all to remote frees and dies.  An allocator
 * that gives memory back to the OS when a thread or a page empties, and takes
 * it again in the next round, pays one page fault per page per round
 * (compare minor faults per op under /usr/bin/time -v, or run.py's column).
 * ops = blocks allocated (ROUNDS * THREADS * BLOCKS); each is freed once.
 */
#include "bench_common.h"
#include <math.h>
#include <pthread.h>

#define MAX_THREADS 64
#define MAX_BLOCKS 65536

typedef struct job_s {
    int slot;
    uint64_t seed;
    unsigned char **blk;
    size_t *len;
    long n;
    uint64_t sum, bytes;
} job_t;

static int g_threads;
static long g_blocks;
static job_t g_job[MAX_THREADS];
static pthread_barrier_t g_barrier;
/* blocks kept back for the next round: per slot, freed by the next thread */
static unsigned char **g_mail[MAX_THREADS];
static size_t *g_mail_len[MAX_THREADS];
static long g_mail_n[MAX_THREADS];

static size_t log_uniform(bench_rng_t *rng, double lo, double hi)
{
    double u = (double)(bench_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    return (size_t)exp(log(lo) + u * (log(hi) - log(lo)));
}

static size_t mixed_size(bench_rng_t *rng)
{
    unsigned pct = (unsigned)(bench_rng_next(rng) % 100);
    if (pct < 60)
        return 16 + (size_t)(bench_rng_next(rng) % 241);
    if (pct < 85)
        return 257 + (size_t)(bench_rng_next(rng) % (4096 - 257 + 1));
    if (pct < 95)
        return log_uniform(rng, 4096, 65536);
    if (pct < 99)
        return log_uniform(rng, 65536, 262144);
    return log_uniform(rng, 262144, 2097152);
}

static void *worker(void *arg)
{
    job_t *j = (job_t *)arg, *partner;
    bench_rng_t rng;
    int p = (g_threads % 2 == 0) ? (j->slot ^ 1) : (j->slot + 1) % g_threads;
    uint64_t sum = 0, bytes = 0;
    long i, m, keep = 0;

    bench_rng_seed(&rng, j->seed);
    /* the previous round's leftovers of this slot: owners have exited */
    for (i = 0; i < g_mail_n[j->slot]; i++) {
        sum += bench_read(g_mail[j->slot][i], g_mail_len[j->slot][i]);
        free(g_mail[j->slot][i]);
    }
    g_mail_n[j->slot] = 0;

    for (i = 0; i < j->n; i++) {
        size_t n = mixed_size(&rng), off;
        unsigned char *b = malloc(n);
        if (!b)
            bench_die("malloc failed");
        bench_touch(b, n, bench_rng_next(&rng));
        for (off = 4096; off < n; off += 4096)
            b[off] = (unsigned char)(off >> 12 | 1);
        j->blk[i] = b;
        j->len[i] = n;
        bytes += n;
    }
    j->bytes = bytes;
    pthread_barrier_wait(&g_barrier);

    /* free the partner's blocks in random order (Fisher-Yates), keep 1 in 16 */
    partner = &g_job[p];
    for (m = partner->n; m > 0; m--) {
        long k = (long)(bench_rng_next(&rng) % (uint64_t)m);
        unsigned char *b = partner->blk[k];
        size_t n = partner->len[k];
        sum += bench_read(b, n);
        if ((k & 63) == 0 || n > 262144)
            bench_sample_owned(b); /* allocated by another thread */
        if ((m & 15) == 0 && keep < g_blocks / 16 + 1) {
            g_mail[j->slot][keep] = b;
            g_mail_len[j->slot][keep] = n;
            keep++;
        } else {
            free(b);
        }
        partner->blk[k] = partner->blk[m - 1];
        partner->len[k] = partner->len[m - 1];
    }
    g_mail_n[j->slot] = keep;
    j->sum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = bench_threads(bench_arg_long(argc, argv, 1, 2));
    long rounds = bench_arg_long(argc, argv, 2, 250);
    long seed = bench_arg_long(argc, argv, 4, 1);
    pthread_t tid[MAX_THREADS];
    uint64_t sum = 0, bytes = 0;
    double t0, t1;
    long r;
    int i;

    g_blocks = bench_arg_long(argc, argv, 3, 1000);
    if (threads < 2 || threads > MAX_THREADS || rounds < 1 || g_blocks < 1 || g_blocks > MAX_BLOCKS)
        bench_die("bad arguments (THREADS 2..64, ROUNDS >= 1, BLOCKS 1..65536)");
    g_threads = threads;
    /* bookkeeping arrays come from malloc too, but once, before the timing */
    for (i = 0; i < threads; i++) {
        g_job[i].blk = bench_xmalloc((size_t)g_blocks * sizeof(unsigned char *));
        g_job[i].len = bench_xmalloc((size_t)g_blocks * sizeof(size_t));
        g_mail[i] = bench_xmalloc((size_t)(g_blocks / 16 + 1) * sizeof(unsigned char *));
        g_mail_len[i] = bench_xmalloc((size_t)(g_blocks / 16 + 1) * sizeof(size_t));
    }
    if (pthread_barrier_init(&g_barrier, NULL, (unsigned)threads) != 0)
        bench_die("pthread_barrier_init failed");

    t0 = bench_now();
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < threads; i++) {
            g_job[i].slot = i;
            g_job[i].seed = (uint64_t)seed * 1000003u + (uint64_t)(r * threads + i);
            g_job[i].n = g_blocks;
            g_job[i].sum = 0;
            if (pthread_create(&tid[i], NULL, worker, &g_job[i]) != 0)
                bench_die("pthread_create failed");
        }
        for (i = 0; i < threads; i++) {
            pthread_join(tid[i], NULL);
            sum += g_job[i].sum;
            bytes += g_job[i].bytes;
        }
    }
    t1 = bench_now();

    for (i = 0; i < threads; i++) {
        long k;
        for (k = 0; k < g_mail_n[i]; k++) {
            bench_sample_owned(g_mail[i][k]); /* allocated by exited threads */
            free(g_mail[i][k]);
        }
        free(g_job[i].blk);
        free(g_job[i].len);
        free(g_mail[i]);
        free(g_mail_len[i]);
    }
    pthread_barrier_destroy(&g_barrier);
    bench_result("churn_mixed", threads, (uint64_t)(rounds * threads * g_blocks), t1 - t0,
                 "rounds=%ld blocks_per_thread=%ld mib_per_round=%.1f checksum=%llu", rounds,
                 g_blocks, (double)bytes / (double)rounds / 1048576.0,
                 (unsigned long long)(sum & 0xffff));
    return 0;
}
