/* prodcons -- producers malloc, consumers free: every free is remote.
 *
 * usage: prodcons [THREADS=2] [ITEMS=1000000] [SEED=1] [MIN=16] [MAX=512]
 * THREADS/2 producer/consumer pairs (at least one pair).  Each producer
 * mallocs ITEMS/pairs blocks of random size MIN..MAX, writes them and pushes
 * them through a bounded lock-free single-producer/single-consumer ring
 * (1024 entries) to its consumer, which reads and frees them.  A thread that
 * finds the ring full (empty) waits until 256 slots (items) are available,
 * spinning briefly and then sleeping on a futex, so that threads sharing a
 * core hand over batches instead of switching once per item, and a waiting
 * thread does not burn the CPU its partner needs.  ops = blocks passed (each is one
 * malloc in the producer plus one remote free in the consumer).
 */
#include "bench_common.h"
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#define RING 1024
#define BATCH 256
#ifndef SPINS
#define SPINS 256
#endif

typedef struct item_s {
    void *p;
    size_t n;
} item_t;

/* head/tail are free-running 32-bit counters (differences wrap correctly) and
 * double as futex words for a thread that has to sleep. */
typedef struct pair_s {
    _Alignas(64) _Atomic uint32_t head; /* written by the consumer */
    _Atomic int prod_sleeping;
    _Alignas(64) _Atomic uint32_t tail; /* written by the producer */
    _Atomic int cons_sleeping;
    _Alignas(64) item_t ring[RING];
    long items;
    uint64_t seed;
    uint64_t sum;
} pair_t;

static long g_min, g_max;

static void futex_wait(_Atomic uint32_t *word, uint32_t seen)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *producer(void *arg)
{
    pair_t *q = (pair_t *)arg;
    bench_rng_t rng;
    uint32_t tail = 0;
    long i;
    bench_rng_seed(&rng, q->seed);
    for (i = 0; i < q->items; i++) {
        uint64_t r = bench_rng_next(&rng);
        size_t n = (size_t)g_min + (size_t)(r % (uint64_t)(g_max - g_min + 1));
        void *p = malloc(n);
        int spins = 0;
        if (!p)
            bench_die("malloc failed");
        bench_touch(p, n, r);
        if (tail - atomic_load(&q->head) >= RING) {
            /* full: wait until a batch has been drained (hysteresis keeps
             * threads sharing a core from switching once per item) */
            while (tail - atomic_load(&q->head) > RING - BATCH) {
                if (++spins < SPINS) {
                    __builtin_ia32_pause();
                    continue;
                }
                atomic_store(&q->prod_sleeping, 1);
                uint32_t h = atomic_load(&q->head);
                if (tail - h > RING - BATCH)
                    futex_wait(&q->head, h);
                atomic_store(&q->prod_sleeping, 0);
            }
        }
        q->ring[tail % RING].p = p;
        q->ring[tail % RING].n = n;
        atomic_store(&q->tail, ++tail);
        if (atomic_load(&q->cons_sleeping) &&
            (tail - atomic_load(&q->head) >= BATCH || tail == (uint32_t)q->items))
            futex_wake(&q->tail);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    pair_t *q = (pair_t *)arg;
    uint32_t head = 0;
    uint64_t sum = 0; /* a local: q's line is read by the producer */
    long i;
    for (i = 0; i < q->items; i++) {
        int spins = 0;
        item_t it;
        if (atomic_load(&q->tail) == head) {
            /* empty: wait for a batch (or for the last items) */
            uint32_t want = (q->items - i) < BATCH ? (uint32_t)(q->items - i) : BATCH;
            while (atomic_load(&q->tail) - head < want) {
                if (++spins < SPINS) {
                    __builtin_ia32_pause();
                    continue;
                }
                atomic_store(&q->cons_sleeping, 1);
                uint32_t t = atomic_load(&q->tail);
                if (t - head < want)
                    futex_wait(&q->tail, t);
                atomic_store(&q->cons_sleeping, 0);
            }
        }
        it = q->ring[head % RING];
        atomic_store(&q->head, ++head);
        if (atomic_load(&q->prod_sleeping) && atomic_load(&q->tail) - head <= RING - BATCH)
            futex_wake(&q->head);
        sum += bench_read(it.p, it.n);
        if ((i & 4095) == 0)
            bench_sample_owned(it.p); /* allocated by the producer thread */
        free(it.p);
    }
    q->sum = sum;
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
    if (items < 1 || items > 2000000000L || g_min < 1 || g_max < g_min)
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
