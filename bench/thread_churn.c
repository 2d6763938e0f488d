/* thread_churn -- many short-lived threads that allocate a little and free.
 *
 * usage: thread_churn [THREADS=2] [TOTAL=2000] [ALLOCS=100] [SEED=1]
 * TOTAL threads are created in waves of THREADS concurrent threads (each wave
 * is joined before the next starts).  Each thread mallocs ALLOCS blocks of
 * 16..256 B, writes them, frees them in random order, and swaps one block
 * with a per-slot mailbox: it frees the block the previous thread of its slot
 * left behind (allocated by a thread that has exited) and leaves a new one.
 * This stresses per-thread heap creation, teardown and orphan adoption.
 * ops = TOTAL (threads created and finished), so ops_per_sec is threads/s.
 */
#include "bench_common.h"
#include <pthread.h>

typedef struct job_s {
    int slot;
    uint64_t seed;
    uint64_t sum;
} job_t;

static long g_allocs;
static void *g_mailbox[256];

static void *worker(void *arg)
{
    job_t *j = (job_t *)arg;
    bench_rng_t rng;
    void *local[1024];
    size_t lens[1024];
    long n = g_allocs > 1024 ? 1024 : g_allocs;
    long i;
    void *keep;

    bench_rng_seed(&rng, j->seed);
    for (i = 0; i < n; i++) {
        uint64_t r = bench_rng_next(&rng);
        size_t sz = 16 + (size_t)(r % 241);
        local[i] = malloc(sz);
        if (!local[i])
            bench_die("malloc failed");
        lens[i] = sz;
        bench_touch(local[i], sz, r);
    }
    /* random-order free (Fisher-Yates over the remaining blocks) */
    uint64_t sum = 0; /* a local: the jobs' structs share lines */
    for (i = n; i > 0; i--) {
        long k = (long)(bench_rng_next(&rng) % (uint64_t)i);
        sum += bench_read(local[k], lens[k]);
        free(local[k]);
        local[k] = local[i - 1];
        lens[k] = lens[i - 1];
    }
    j->sum = sum;
    keep = malloc(64);
    if (!keep)
        bench_die("malloc failed");
    memset(keep, 0x33, 64);
    free(g_mailbox[j->slot]); /* left by a thread that has already exited */
    g_mailbox[j->slot] = keep;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = bench_threads(bench_arg_long(argc, argv, 1, 2));
    long total = bench_arg_long(argc, argv, 2, 2000);
    long seed = bench_arg_long(argc, argv, 4, 1);
    pthread_t tid[256];
    job_t job[256];
    long started = 0;
    uint64_t sum = 0;
    double t0, t1;
    int i;

    g_allocs = bench_arg_long(argc, argv, 3, 100);
    if (total < 1 || g_allocs < 0)
        bench_die("bad arguments");

    t0 = bench_now();
    while (started < total) {
        int wave = 0;
        for (i = 0; i < threads && started < total; i++, started++) {
            job[i].slot = i;
            job[i].seed = (uint64_t)seed * 104729u + (uint64_t)started;
            job[i].sum = 0;
            if (pthread_create(&tid[i], NULL, worker, &job[i]) != 0)
                bench_die("pthread_create failed");
            wave++;
        }
        for (i = 0; i < wave; i++) {
            pthread_join(tid[i], NULL);
            sum += job[i].sum;
        }
    }
    t1 = bench_now();

    for (i = 0; i < 256; i++) {
        bench_sample_owned(g_mailbox[i]); /* allocated by exited threads */
        free(g_mailbox[i]);
    }
    bench_result("thread_churn", threads, (uint64_t)total, t1 - t0,
                 "allocs_per_thread=%ld checksum=%llu", g_allocs,
                 (unsigned long long)(sum & 0xffff));
    return 0;
}
