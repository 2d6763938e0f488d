/* false_sharing -- passive false sharing: one thread allocates small objects
 * and hands them to worker threads that write them heavily.
 *
 * usage: false_sharing [THREADS=2] [OBJECTS=64] [WRITES=20000] [SEED=1]
 * The main thread mallocs THREADS*OBJECTS objects of random size 16..64 B in
 * round-robin order (object i goes to worker i % THREADS), then the workers
 * start together and each performs WRITES passes over its objects, writing one
 * byte of every object per pass, and finally frees its objects (remote frees).
 * ops = THREADS * OBJECTS * WRITES byte stores; time covers the write passes
 * and the frees.
 * Allocator-quality metric, independent of timing:
 *   cache_line_shares = number of (64-byte cache line, object pair) combinations
 *       where both objects of the pair overlap that line and belong to
 *       different workers (0 means no passive false sharing is possible);
 *   shared_objects    = number of objects that share at least one cache line
 *       with an object of another worker.
 *   thread_line_shares = the same count for objects that the workers
 *       allocate themselves, interleaved in time (batches of 8 between
 *       barriers): 0 means the allocator never puts small blocks of two
 *       threads on one cache line (active false sharing).
 *   pinned            = workers pinned to a CPU of their own while there
 *       are CPUs (pin_worker); 0 on a single-CPU machine.
 */
#include "bench_common.h"
#include <pthread.h>
#include <sched.h>

typedef struct obj_s {
    unsigned char *p;
    size_t n;
    int owner;
} obj_t;

typedef struct line_ref_s {
    uintptr_t line;
    int owner;
    long obj;
} line_ref_t;

typedef struct worker_s {
    obj_t *objs; /* this worker's objects */
    long nobj;
    uint64_t sum;
    int id;
    int pinned;
    obj_t *own;  /* objects this worker allocates itself (active phase) */
} worker_t;

static long g_writes;
static pthread_barrier_t g_start, g_step;
static cpu_set_t g_cpus;   /* the CPUs the process may run on */
static int g_ncpus;        /* how many; worker i runs on the (i % g_ncpus)-th */

/* Pin the calling worker to one CPU of the process's set, a different one
 * for each worker while there are CPUs: the workers then always run at
 * once, and every write to a line that two workers share costs the line's
 * transfer -- what the benchmark measures.  Unpinned, the scheduler
 * sometimes ran both workers on one CPU of the 2-core machine, which hides
 * the sharing: false_sharing_t2's runs fell into two groups, about 0.065 s
 * and about 0.38 s, under every allocator (results/latest_runs.csv of
 * 2026-11-25), and the verdict had a CV of 33-47 %.  Returns 1 if pinned. */
static int pin_worker(int id)
{
    if (g_ncpus < 2)
        return 0;
    int want = id % g_ncpus, seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &g_cpus))
            continue;
        if (seen++ == want) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
        }
    }
    return 0;
}

static void *worker(void *arg)
{
    worker_t *w = (worker_t *)arg;
    long pass, i;
    w->pinned = pin_worker(w->id);
    pthread_barrier_wait(&g_start);
    for (pass = 0; pass < g_writes; pass++) {
        for (i = 0; i < w->nobj; i++) {
            volatile unsigned char *c = w->objs[i].p;
            c[(size_t)pass % w->objs[i].n] += 1;
        }
    }
    uint64_t sum = 0; /* a local: the workers' structs share lines */
    for (i = 0; i < w->nobj; i++) {
        sum += bench_read(w->objs[i].p, w->objs[i].n);
        free(w->objs[i].p);
    }
    w->sum = sum;
    /* active phase: allocate own objects in lock-step batches with the others */
    bench_rng_t rng;
    bench_rng_seed(&rng, 1000u + (uint64_t)w->id);
    for (i = 0; i < w->nobj; i++) {
        if (i % 8 == 0)
            pthread_barrier_wait(&g_step);
        size_t n = (size_t)bench_rng_range(&rng, 16, 64);
        w->own[i].p = bench_xmalloc(n);
        w->own[i].n = n;
        w->own[i].owner = w->id;
        memset(w->own[i].p, 0x22, n);
    }
    return NULL;
}

static int cmp_line(const void *a, const void *b)
{
    const line_ref_t *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->owner - y->owner;
}

/* Count cross-owner object pairs per cache line; mark objects involved. */
static uint64_t count_shares(const obj_t *all, long total, long *shared_objects)
{
    line_ref_t *refs = bench_xmalloc(sizeof *refs * (size_t)total * 2);
    unsigned char *mark = calloc((size_t)total, 1);
    long nref = 0, i, j, k, marked = 0;
    uint64_t shares = 0;
    if (!mark)
        bench_die("out of memory");
    for (i = 0; i < total; i++) {
        uintptr_t first = (uintptr_t)all[i].p >> 6;
        uintptr_t last = ((uintptr_t)all[i].p + all[i].n - 1) >> 6;
        refs[nref++] = (line_ref_t){first, all[i].owner, i};
        if (last != first)
            refs[nref++] = (line_ref_t){last, all[i].owner, i};
    }
    qsort(refs, (size_t)nref, sizeof *refs, cmp_line);
    for (i = 0; i < nref; i = j) {
        for (j = i; j < nref && refs[j].line == refs[i].line; j++)
            ;
        for (k = i; k < j; k++) {
            long m;
            for (m = k + 1; m < j; m++) {
                if (refs[m].owner != refs[k].owner) {
                    shares++;
                    mark[refs[k].obj] = mark[refs[m].obj] = 1;
                }
            }
        }
    }
    for (i = 0; i < total; i++)
        marked += mark[i];
    *shared_objects = marked;
    free(refs);
    free(mark);
    return shares;
}

int main(int argc, char **argv)
{
    int threads = bench_threads(bench_arg_long(argc, argv, 1, 2));
    long per = bench_arg_long(argc, argv, 2, 64);
    long seed = bench_arg_long(argc, argv, 4, 1);
    long total, i, shared_objects = 0;
    obj_t *all, *mine;
    worker_t *w;
    pthread_t *tid;
    bench_rng_t rng;
    uint64_t shares, sum = 0;
    int pinned = 0;
    double t0, t1;
    int t;

    g_writes = bench_arg_long(argc, argv, 3, 20000);
    if (per < 1 || g_writes < 1)
        bench_die("bad arguments");
    total = per * threads;
    all = bench_xmalloc(sizeof *all * (size_t)total);
    mine = bench_xmalloc(sizeof *mine * (size_t)total);
    w = calloc((size_t)threads, sizeof *w);
    tid = bench_xmalloc(sizeof *tid * (size_t)threads);
    if (!w)
        bench_die("out of memory");
    bench_rng_seed(&rng, (uint64_t)seed);

    for (i = 0; i < total; i++) {
        size_t n = (size_t)bench_rng_range(&rng, 16, 64);
        all[i].p = bench_xmalloc(n);
        all[i].n = n;
        all[i].owner = (int)(i % threads);
        memset(all[i].p, 0x11, n);
    }
    for (i = 0; i < total; i++)
        bench_sample_owned(all[i].p);
    shares = count_shares(all, total, &shared_objects);
    /* group each worker's objects contiguously in `mine` */
    obj_t *own = bench_xmalloc(sizeof *own * (size_t)total);
    for (t = 0; t < threads; t++) {
        w[t].objs = &mine[t * per];
        w[t].nobj = 0;
        w[t].id = t;
        w[t].own = &own[t * per];
    }
    for (i = 0; i < total; i++) {
        worker_t *o = &w[all[i].owner];
        o->objs[o->nobj++] = all[i];
    }

    if (sched_getaffinity(0, sizeof g_cpus, &g_cpus) == 0)
        g_ncpus = CPU_COUNT(&g_cpus);
    pthread_barrier_init(&g_start, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&g_step, NULL, (unsigned)threads);
    for (t = 0; t < threads; t++)
        if (pthread_create(&tid[t], NULL, worker, &w[t]) != 0)
            bench_die("pthread_create failed");
    t0 = bench_now();
    pthread_barrier_wait(&g_start);
    for (t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        sum += w[t].sum;
        pinned += w[t].pinned;
    }
    t1 = bench_now();
    pthread_barrier_destroy(&g_start);
    pthread_barrier_destroy(&g_step);
    long thread_shared_objects = 0;
    uint64_t thread_shares = count_shares(own, total, &thread_shared_objects);
    for (i = 0; i < total; i++)
        free(own[i].p);
    free(own);

    free(all);
    free(mine);
    free(w);
    free(tid);
    bench_result("false_sharing", threads, (uint64_t)total * (uint64_t)g_writes, t1 - t0,
                 "objects=%ld cache_line_shares=%llu shared_objects=%ld thread_line_shares=%llu pinned=%d checksum=%llu",
                 total, (unsigned long long)shares, shared_objects, (unsigned long long)thread_shares,
                 pinned, (unsigned long long)(sum & 0xffff));
    return 0;
}
