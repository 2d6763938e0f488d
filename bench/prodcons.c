/* prodcons -- producers malloc, consumers free: every free is remote.
 *
 * usage: prodcons [THREADS=2] [ITEMS=1000000] [SEED=1] [MIN=16] [MAX=512]
 * THREADS/2 producer/consumer pairs (at least one pair).  Each producer
 * mallocs ITEMS/pairs blocks of random size MIN..MAX, writes them and pushes
 * them through a bounded lock-free single-producer/single-consumer ring
 * (1024 entries) to its consumer, which reads and frees them.  A thread that
 * finds the ring full (empty) waits, spinning briefly and then yielding, until
 * 256 slots (items) are available, so that threads sharing a core hand over
 * batches instead of switching once per item.  ops = blocks passed (each is one
 * malloc in the producer plus one remote free in the consumer).
 */
#include "bench_common.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define RING 1024
#define BATCH 256

typedef struct item_s {
    void *p;
    size_t n;
} item_t;

typedef struct pair_s {
    _Alignas(64) _Atomic size_t head; /* written by consumer */
    _Alignas(64) _Atomic size_t tail; /* written by producer */
    _Alignas(64) item_t ring[RING];
    long items;
    uint64_t seed;
    uint64_t sum;
} pair_t;

static long g_min, g_max;

static void backoff(int *spins)
{
    if (++*spins < 64) {
        __builtin_ia32_pause();
    } else {
        *spins = 0;
        sched_yield();
    }
}

static void *producer(void *arg)
{
    pair_t *q = (pair_t *)arg;
    bench_rng_t rng;
    long i;
    bench_rng_seed(&rng, q->seed);
    for (i = 0; i < q->items; i++) {
        uint64_t r = bench_rng_next(&rng);
        size_t n = (size_t)g_min + (size_t)(r % (uint64_t)(g_max - g_min + 1));
        void *p = malloc(n);
        size_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
        int spins = 0;
        if (!p)
            bench_die("malloc failed");
        bench_touch(p, n, r);
        if (tail - atomic_load_explicit(&q->head, memory_order_acquire) >= RING) {
            /* full: wait until a batch has been drained (hysteresis keeps
             * the threads from switching once per item on a shared core) */
            while (tail - atomic_load_explicit(&q->head, memory_order_acquire) > RING - BATCH)
                backoff(&spins);
        }
        q->ring[tail % RING].p = p;
        q->ring[tail % RING].n = n;
        atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    pair_t *q = (pair_t *)arg;
    long i;
    for (i = 0; i < q->items; i++) {
        size_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
        int spins = 0;
        item_t it;
        if (atomic_load_explicit(&q->tail, memory_order_acquire) == head) {
            /* empty: wait for a batch (or for the last items) */
            size_t want = (size_t)(q->items - i) < BATCH ? (size_t)(q->items - i) : BATCH;
            while (atomic_load_explicit(&q->tail, memory_order_acquire) - head < want)
                backoff(&spins);
        }
        it = q->ring[head % RING];
        atomic_store_explicit(&q->head, head + 1, memory_order_release);
        q->sum += bench_read(it.p, it.n);
        if ((i & 4095) == 0)
            bench_sample_owned(it.p); /* allocated by the producer thread */
        free(it.p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = bench_threads(bench_arg_long(argc, argv, 1, 2));
    long items = bench_arg_long(argc, argv, 2, 1000000);
    long seed = bench_arg_long(argc, argv, 3, 1);
    int pairs = threads / 2 > 0 ? threads / 2 : 1;
    pair_t *q;
    pthread_t *tid;
    double t0, t1;
    uint64_t sum = 0, total = 0;
    int i;

    g_min = bench_arg_long(argc, argv, 4, 16);
    g_max = bench_arg_long(argc, argv, 5, 512);
    if (items < 1 || g_min < 1 || g_max < g_min)
        bench_die("bad arguments");
    if (posix_memalign((void **)&q, 64, sizeof *q * (size_t)pairs) != 0)
        bench_die("out of memory");
    memset(q, 0, sizeof *q * (size_t)pairs);
    tid = bench_xmalloc(sizeof *tid * 2 * (size_t)pairs);
    for (i = 0; i < pairs; i++) {
        q[i].items = items / pairs;
        q[i].seed = (uint64_t)seed * 7919u + (uint64_t)i;
        total += (uint64_t)q[i].items;
    }

    t0 = bench_now();
    for (i = 0; i < pairs; i++) {
        if (pthread_create(&tid[2 * i], NULL, consumer, &q[i]) != 0 ||
            pthread_create(&tid[2 * i + 1], NULL, producer, &q[i]) != 0)
            bench_die("pthread_create failed");
    }
    for (i = 0; i < 2 * pairs; i++)
        pthread_join(tid[i], NULL);
    t1 = bench_now();

    for (i = 0; i < pairs; i++)
        sum += q[i].sum;
    free(tid);
    free(q);
    bench_result("prodcons", pairs * 2, total, t1 - t0, "pairs=%d checksum=%llu", pairs,
                 (unsigned long long)(sum & 0xffff));
    return 0;
}
