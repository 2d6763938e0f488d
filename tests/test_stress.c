/* test_stress.c -- multi-threaded allocator stress test that verifies every
 * block's contents before it is freed.
 *
 * usage: test_stress [-p PREFIX] [-s SCALE] [-t SECONDS] [-j THREADS]
 *                    [--expect-hakmem] [--fork-no-threads]
 *
 * Every block is filled with a pattern seeded from its address, size and the
 * id of the thread that wrote it, and checked before free/realloc.  Phases:
 *   cross_thread   producers allocate, consumers on other threads verify+free
 *   thread_churn   many short-lived threads; their blocks outlive them and are
 *                  freed by later threads
 *   realloc_cross  blocks travel round a ring of threads, each resizing them
 *   fork           fork while background threads allocate; the child checks
 *                  inherited blocks, allocates, frees, and reports by exit code
 *   mixed          per-thread random malloc/calloc/aligned/realloc/free mix,
 *                  sizes up to 4 MiB
 *   medium_reuse   8..64 KiB blocks at random, batches freed by another thread
 * SCALE multiplies the operation counts (default 1: a few seconds in total);
 * SECONDS caps each phase's wall time (default 4) so slow builds stay bounded.
 * There are no timing asserts.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"
#include "pattern.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static double scale = 1.0, phase_seconds = 4.0;
static int nthreads = 4, fork_no_threads, expect_hakmem;
static hak_owns_fn_t owns;
static double phase_deadline;

typedef struct item {
    char *p;
    size_t size;
    uint64_t seed;
} item_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int expired(void) { return now() > phase_deadline; }
static long scaled(long n)
{
    long v = (long)(n * scale);
    return v < 1 ? 1 : v;
}

/* mostly small, some medium, rarely up to 4 MiB */
static size_t pick_size(uint64_t *r)
{
    uint64_t v = rnd(r), k = v % 1000;
    v >>= 10;
    if (k < 700) return 1 + v % 256;
    if (k < 900) return 257 + v % 3840;
    if (k < 985) return 4 * KiB + v % (124 * KiB);
    if (k < 997) return 128 * KiB + v % (896 * KiB);
    return 1 * MiB + v % (3 * MiB);
}

static void fill_item(item_t *it, unsigned owner)
{
    it->seed = pat_seed(it->p, it->size, owner);
    pat_fill(it->p, it->size, it->seed);
}

/* allocate through a random entry point, checking what that entry promises */
static int alloc_item(item_t *it, uint64_t *r, unsigned owner)
{
    size_t s = pick_size(r);
    unsigned how = (unsigned)(rnd(r) % 16);
    char *p = NULL;
    size_t align = 16;
    if (how < 10) {
        p = malloc(s);
    } else if (how < 12) {
        p = calloc(1, s);
        if (p) {
            size_t off = pat_check_zero(p, s);
            CHECKF(off == PAT_OK, "calloc(%zu) not zeroed at %zu (owner %u)", s, off, owner);
        }
    } else if (how < 14) {
        align = (size_t)1 << (4 + rnd(r) % 9); /* 16 .. 4096 */
        void *q = NULL;
        int rc = posix_memalign(&q, align, s);
        CHECKF(rc == 0, "posix_memalign(%zu, %zu) = %d", align, s, rc);
        p = rc == 0 ? q : NULL;
    } else if (how < 15) {
        align = (size_t)1 << (4 + rnd(r) % 13); /* 16 .. 64 KiB */
        p = aligned_alloc(align, s);
    } else {
        p = realloc(NULL, s);
    }
    CHECKF(p != NULL, "allocation of %zu bytes failed (owner %u)", s, owner);
    if (!p)
        return 0;
    CHECKF(((uintptr_t)p & (align - 1)) == 0, "%p not aligned to %zu", (void *)p, align);
    it->p = p;
    it->size = s;
    if ((rnd(r) & 15) == 0) {
        CHECKF(malloc_usable_size(p) >= s, "usable %zu < %zu", malloc_usable_size(p), s);
        if (owns)
            CHECKF(owns(p) == 1, "hakmem_owns(%p) != 1 for a %zu-byte block", (void *)p, s);
    }
    fill_item(it, owner);
    return 1;
}

static void verify_item(const item_t *it, const char *where)
{
    size_t off = pat_check(it->p, it->size, it->seed);
    CHECKF(off == PAT_OK, "%s: block %p (%zu bytes) corrupted at offset %zu", where,
           (void *)it->p, it->size, off);
}

static void free_item(item_t *it, const char *where)
{
    verify_item(it, where);
    free(it->p);
    it->p = NULL;
}

/* resize, checking the preserved prefix, then refill as `owner` */
static void realloc_item(item_t *it, uint64_t *r, unsigned owner)
{
    size_t ns = pick_size(r);
    char *q = realloc(it->p, ns);
    CHECKF(q != NULL, "realloc(%zu -> %zu) failed", it->size, ns);
    if (!q)
        return;
    size_t keep = it->size < ns ? it->size : ns;
    size_t off = pat_check(q, keep, it->seed);
    CHECKF(off == PAT_OK, "realloc %zu -> %zu by thread %u lost contents at %zu", it->size, ns,
           owner, off);
    it->p = q;
    it->size = ns;
    fill_item(it, owner);
}

/* ---- bounded MPMC queue (mutex + condvars) ---- */
#define QCAP 512
typedef struct queue {
    pthread_mutex_t mu;
    pthread_cond_t nonempty;
    item_t items[QCAP];
    int head, count, closed;
} queue_t;

static void q_init(queue_t *q)
{
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->nonempty, NULL);
}
static int q_trypush(queue_t *q, const item_t *it)
{
    int ok = 0;
    pthread_mutex_lock(&q->mu);
    if (q->count < QCAP) {
        q->items[(q->head + q->count++) % QCAP] = *it;
        ok = 1;
        pthread_cond_signal(&q->nonempty);
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}
/* wait=1: block until an item arrives or the queue is closed and empty */
static int q_pop(queue_t *q, item_t *out, int wait)
{
    int ok = 0;
    pthread_mutex_lock(&q->mu);
    while (wait && q->count == 0 && !q->closed)
        pthread_cond_wait(&q->nonempty, &q->mu);
    if (q->count) {
        *out = q->items[q->head];
        q->head = (q->head + 1) % QCAP;
        q->count--;
        ok = 1;
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}
static void q_close(queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->mu);
}
static void q_drain(queue_t *q, const char *where)
{
    item_t it;
    while (q_pop(q, &it, 0))
        free_item(&it, where);
}

static void run_threads(int n, void *(*fn)(void *))
{
    pthread_t t[64];
    for (int i = 0; i < n; i++)
        CHECK(pthread_create(&t[i], NULL, fn, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

/* ---------------- cross_thread ---------------- */
static queue_t xq;
static atomic_int producers_left;

static void *producer(void *arg)
{
    unsigned id = (unsigned)(intptr_t)arg;
    uint64_t r = 0x1234567ULL + id * 7919;
    item_t local[32] = {{0}};
    long ops = scaled(40000);
    for (long i = 0; i < ops && !(i % 64 == 0 && expired()); i++) {
        item_t it;
        if (!alloc_item(&it, &r, id))
            continue;
        if (rnd(&r) % 4 == 0) { /* keep some local for a while, free them here */
            item_t *slot = &local[rnd(&r) % 32];
            if (slot->p)
                free_item(slot, "producer local");
            *slot = it;
        } else if (!q_trypush(&xq, &it)) {
            free_item(&it, "producer (queue full)");
        }
    }
    for (int i = 0; i < 32; i++)
        if (local[i].p)
            free_item(&local[i], "producer local");
    if (atomic_fetch_sub(&producers_left, 1) == 1)
        q_close(&xq);
    return NULL;
}

static void *consumer(void *arg)
{
    unsigned id = 100 + (unsigned)(intptr_t)arg;
    uint64_t r = 0xabcdefULL + id;
    item_t it;
    while (q_pop(&xq, &it, 1)) {
        if (rnd(&r) % 8 == 0) /* a consumer also rewrites before freeing */
            fill_item(&it, id);
        free_item(&it, "consumer (remote free)");
    }
    return NULL;
}

static void *cross_worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    return (i % 2) ? consumer(arg) : producer(arg);
}

static void test_cross_thread(void)
{
    int n = nthreads < 2 ? 2 : nthreads;
    n += n % 2;
    q_init(&xq);
    atomic_store(&producers_left, n / 2);
    run_threads(n, cross_worker);
    q_drain(&xq, "cross_thread drain");
}

/* ---------------- thread_churn ---------------- */
#define POOL_CAP 4096
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static item_t pool[POOL_CAP];
static int pool_n;

static void *churn_thread(void *arg)
{
    unsigned id = 1000 + (unsigned)(intptr_t)arg;
    uint64_t r = 0x5eed0000ULL + id * 31;
    int n = 64 + (int)(rnd(&r) % 256);
    item_t mine[320];
    int have = 0;
    for (int i = 0; i < n; i++)
        have += alloc_item(&mine[have], &r, id);
    /* adopt a few orphans left by dead threads */
    for (int k = 0; k < 48; k++) {
        item_t it;
        int got = 0;
        pthread_mutex_lock(&pool_mu);
        if (pool_n > 0) {
            it = pool[(rnd(&r) % (uint64_t)pool_n)];
            for (int j = 0; j < pool_n; j++)
                if (pool[j].p == it.p) {
                    pool[j] = pool[--pool_n];
                    break;
                }
            got = 1;
        }
        pthread_mutex_unlock(&pool_mu);
        if (!got)
            break;
        if (k % 4 == 0)
            realloc_item(&it, &r, id);
        free_item(&it, "orphan from an exited thread");
    }
    /* free half now; leave the rest to outlive this thread */
    for (int i = 0; i < have; i++) {
        if (rnd(&r) % 2) {
            free_item(&mine[i], "churn local");
            continue;
        }
        pthread_mutex_lock(&pool_mu);
        int stored = pool_n < POOL_CAP;
        if (stored)
            pool[pool_n++] = mine[i];
        pthread_mutex_unlock(&pool_mu);
        if (!stored)
            free_item(&mine[i], "churn local");
    }
    return NULL;
}

static void test_thread_churn(void)
{
    long total = scaled(400);
    int conc = nthreads < 1 ? 1 : (nthreads > 16 ? 16 : nthreads);
    long started = 0;
    while (started < total && !expired()) {
        pthread_t t[16];
        int k = 0;
        for (; k < conc && started < total; k++, started++)
            if (pthread_create(&t[k], NULL, churn_thread, (void *)(intptr_t)started) != 0) {
                CHECKF(0, "pthread_create failed after %ld threads", started);
                break;
            }
        for (int i = 0; i < k; i++)
            pthread_join(t[i], NULL);
    }
    printf("# thread_churn: %ld threads\n", started);
    for (int i = 0; i < pool_n; i++)
        free_item(&pool[i], "orphan drain on main");
    pool_n = 0;
}

/* ---------------- realloc_cross ---------------- */
#define RING 4
static queue_t ring[RING];
static atomic_long ring_ops;

static void *ring_thread(void *arg)
{
    unsigned id = 2000 + (unsigned)(intptr_t)arg;
    int me = (int)(intptr_t)arg, next = (me + 1) % RING;
    uint64_t r = 0xfeedULL * (id + 1);
    while (atomic_fetch_sub(&ring_ops, 1) > 0 && !expired()) {
        item_t it;
        if (!q_pop(&ring[me], &it, 0)) {
            if (!alloc_item(&it, &r, id))
                continue;
        } else {
            verify_item(&it, "ring hop");
            uint64_t act = rnd(&r) % 8;
            if (act < 4) {
                realloc_item(&it, &r, id); /* resized by a thread that did not allocate it */
            } else if (act < 6) {
                free_item(&it, "ring free");
                continue;
            }
        }
        if (!q_trypush(&ring[next], &it))
            free_item(&it, "ring (queue full)");
    }
    return NULL;
}

static void test_realloc_cross(void)
{
    for (int i = 0; i < RING; i++)
        q_init(&ring[i]);
    atomic_store(&ring_ops, scaled(120000));
    run_threads(RING, ring_thread);
    for (int i = 0; i < RING; i++)
        q_drain(&ring[i], "ring drain");
}

/* ---------------- fork ---------------- */
static atomic_int bg_stop;

static void *bg_thread(void *arg)
{
    unsigned id = 3000 + (unsigned)(intptr_t)arg;
    uint64_t r = 0xb6b6ULL + id;
    item_t slots[64] = {{0}};
    while (!atomic_load(&bg_stop)) {
        item_t *s = &slots[rnd(&r) % 64];
        if (s->p)
            free_item(s, "background");
        else
            alloc_item(s, &r, id);
    }
    for (int i = 0; i < 64; i++)
        if (slots[i].p)
            free_item(&slots[i], "background");
    return NULL;
}

static void *child_thread(void *arg)
{
    uint64_t r = 0xc41dULL;
    for (int i = 0; i < 1500; i++) {
        item_t it;
        if (alloc_item(&it, &r, 4001))
            free_item(&it, "child thread");
    }
    return arg;
}

static void child_main(item_t *inherited, int n, int round)
{
    alarm(60); /* a deadlocked child dies and the parent reports the signal */
    /* start the child's own failure record: the parent's earlier failures (and
     * a lock some parent thread might have held at fork time) stay behind */
    pthread_mutex_init(&chk_lock, NULL);
    chk_fail_count = 0;
    chk_first[0] = '\0';
    uint64_t r = 0xc0ffeeULL + (uint64_t)round;
    for (int i = 0; i < n; i++)
        verify_item(&inherited[i], "inherited block in child");
    for (int i = 0; i < n; i += 2)
        free_item(&inherited[i], "inherited block freed by child");
    for (int i = 1; i < n; i += 4)
        realloc_item(&inherited[i], &r, 4000);
    pthread_t t;
    int have_thread = !fork_no_threads && pthread_create(&t, NULL, child_thread, NULL) == 0;
    item_t mine[128] = {{0}};
    for (int i = 0; i < 3000; i++) {
        item_t *s = &mine[rnd(&r) % 128];
        if (s->p)
            free_item(s, "child");
        else
            alloc_item(s, &r, 4000);
    }
    if (have_thread)
        pthread_join(t, NULL);
    for (int i = 0; i < 128; i++)
        if (mine[i].p)
            free_item(&mine[i], "child");
    for (int i = 1; i < n; i += 2)
        free_item(&inherited[i], "inherited block freed by child");
    if (chk_failures())
        fprintf(stderr, "# fork child %d: %s\n", round, chk_first);
    _exit(chk_failures() ? 1 : 0);
}

static void test_fork(void)
{
    enum { NBG = 2, NINH = 200 };
    pthread_t bg[NBG];
    atomic_store(&bg_stop, 0);
    for (int i = 0; i < NBG; i++)
        CHECK(pthread_create(&bg[i], NULL, bg_thread, (void *)(intptr_t)i) == 0);
    static item_t inh[NINH];
    uint64_t r = 0xf0f0ULL;
    int n = 0;
    while (n < NINH)
        n += alloc_item(&inh[n], &r, 5000);
    long rounds = scaled(12);
    int done = 0;
    for (long k = 0; k < rounds && !expired(); k++, done++) {
        pid_t pid = chk_fork(0);
        if (pid < 0)
            break;
        if (pid == 0)
            child_main(inh, n, (int)k);
        /* parent keeps allocating while the child runs */
        for (int i = 0; i < 500; i++) {
            item_t it;
            if (alloc_item(&it, &r, 5001))
                free_item(&it, "parent during fork");
        }
        chk_wait(pid, "fork child", k);
    }
    atomic_store(&bg_stop, 1);
    for (int i = 0; i < NBG; i++)
        pthread_join(bg[i], NULL);
    for (int i = 0; i < n; i++) /* the child's frees must not affect the parent */
        free_item(&inh[i], "inherited block in parent");
    printf("# fork: %d children\n", done);
}

/* ---------------- mixed ---------------- */
static void *mixed_thread(void *arg)
{
    unsigned id = 6000 + (unsigned)(intptr_t)arg;
    uint64_t r = 0x777ULL * (id + 3);
    enum { SLOTS = 1024 };
    item_t *slots = calloc(SLOTS, sizeof(item_t));
    CHECK(slots != NULL);
    if (!slots)
        return NULL;
    long ops = scaled(60000);
    for (long i = 0; i < ops && !(i % 64 == 0 && expired()); i++) {
        item_t *s = &slots[rnd(&r) % SLOTS];
        if (!s->p) {
            alloc_item(s, &r, id);
            continue;
        }
        uint64_t act = rnd(&r) % 20;
        if (act < 12)
            free_item(s, "mixed free");
        else if (act < 17)
            realloc_item(s, &r, id);
        else
            verify_item(s, "mixed verify");
    }
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p)
            free_item(&slots[i], "mixed final");
    free(slots);
    return NULL;
}

static void test_mixed(void)
{
    run_threads(nthreads, mixed_thread);
}

/* Blocks of 8..64 KiB (classes without malloc's fast path, which take the
 * block freed last into their page first): random malloc/free over a
 * working set, a batch freed by another thread now and then (remote frees
 * wait while local ones are reused), contents checked before every free.
 * With hakmem, the block freed last comes back first. */
#define MEDIUM_SLOTS 96
static item_t *medium_batch[MEDIUM_SLOTS];
static int medium_batch_n;
static void *medium_remote_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < medium_batch_n; i++)
        free_item(medium_batch[i], "medium remote");
    return NULL;
}

static void test_medium_reuse(void)
{
    item_t slots[MEDIUM_SLOTS] = {{0}};
    uint64_t r = 0x6d656469756dULL;
    long iters = scaled(200000);
    for (long i = 0; i < iters && !expired(); i++) {
        item_t *it = &slots[rnd(&r) % MEDIUM_SLOTS];
        if (it->p) {
            free_item(it, "medium free");
        } else {
            it->size = 8 * KiB + rnd(&r) % (56 * KiB + 1);
            it->p = malloc(it->size);
            CHECKF(it->p != NULL, "malloc(%zu) failed", it->size);
            if (!it->p) return;
            fill_item(it, 1);
        }
        if (i % 5000 == 4999) {        /* another thread frees every other live block */
            medium_batch_n = 0;
            for (int k = 0; k < MEDIUM_SLOTS; k += 2)
                if (slots[k].p) medium_batch[medium_batch_n++] = &slots[k];
            pthread_t t;
            CHECK(pthread_create(&t, NULL, medium_remote_thread, NULL) == 0);
            pthread_join(t, NULL);
        }
    }
    for (int k = 0; k < MEDIUM_SLOTS; k++)
        if (slots[k].p) free_item(&slots[k], "medium final");
    if (!owns)
        return;
    /* with 64 live blocks of the class (no page of it empties), free one
     * and allocate again: the block comes straight back */
    enum { HOLD = 64, TRIES = 32 };
    size_t s = 20000;
    char *hold[HOLD];
    for (int k = 0; k < HOLD; k++) {
        hold[k] = malloc(s);
        CHECK(hold[k] != NULL);
    }
    int same = 0;
    for (int t = 0; t < TRIES; t++) {
        int back = freed_last_comes_back(s);
        CHECK(back >= 0);
        same += back == 1;
    }
    CHECKF(same >= TRIES * 3 / 4, "malloc(%zu) right after a free gave the block freed last %d times of %d",
           s, same, TRIES);
    for (int k = 0; k < HOLD; k++)
        free(hold[k]);
}

static void test_served(void)
{
    if (!expect_hakmem)
        SKIP_TEST("no --expect-hakmem given");
    CHECKF(owns != NULL, "hakmem_owns not found: the allocator in use is not hakmem");
    void *p = malloc(1000);
    CHECKF(p && owns && owns(p) == 1, "malloc block not owned by hakmem");
    free(p);
}

#define PHASE(fn)                                                             \
    do {                                                                      \
        double t0 = now();                                                    \
        phase_deadline = t0 + phase_seconds;                                  \
        RUN_TEST(fn);                                                         \
        printf("# %s: %.2f s\n", #fn, now() - t0);                            \
    } while (0)

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc)
            chk_prefix = argv[++i];
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            phase_seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "-j") && i + 1 < argc)
            nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--expect-hakmem"))
            expect_hakmem = 1;
        else if (!strcmp(argv[i], "--fork-no-threads"))
            fork_no_threads = 1;
        else {
            fprintf(stderr, "usage: %s [-p prefix] [-s scale] [-t seconds] [-j threads] "
                            "[--expect-hakmem] [--fork-no-threads]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > 64)
        nthreads = 4;
    owns = hak_find_owns();
    printf("# allocator: %s; scale %.2f, %d threads, phase cap %.1f s\n",
           owns ? "hakmem" : "not hakmem", scale, nthreads, phase_seconds);
    PHASE(served);
    PHASE(cross_thread);
    PHASE(thread_churn);
    PHASE(realloc_cross);
    PHASE(fork);
    PHASE(mixed);
    PHASE(medium_reuse);
    return check_exit_code();
}
