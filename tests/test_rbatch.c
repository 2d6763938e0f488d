/* test_rbatch.c -- batched remote frees (src/hak_free.c, hak_rbatch_t;
 * docs/design.md, "Remote frees in batches").
 *
 * usage: test_rbatch [-p PREFIX] [-t TEST]   the tests, PASS/FAIL lines
 *        test_rbatch misuse CASE             one misuse per run (suite_rbatch.sh
 *                                            checks the report and SIGABRT;
 *                                            "SURVIVED": hakmem did not stop it)
 * A thread that frees a small block of another thread's heap puts the
 * pointer into a batch of its own and sends the batch later (at 62 blocks,
 * its next slow path, hakmem_collect, its exit).  The tests: a batch still
 * open when its thread exits, or when another thread forks, or when the
 * public heap whose blocks it would hold is destroyed, is never lost (nor
 * applied to memory that changed hands); a double free of a block waiting in
 * a batch is reported.  The hakmem_* names are weak: without hakmem preloaded
 * every test is skipped. */
#include "check.h"
#include "hakmem.h"
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma weak hakmem_stats_get
#pragma weak hakmem_collect
#pragma weak hakmem_heap_new
#pragma weak hakmem_heap_malloc
#pragma weak hakmem_heap_destroy

#define NEED_HAKMEM() do { if (!hakmem_stats_get) SKIP_TEST("hakmem not preloaded"); } while (0)

enum { NB = 40 };               /* blocks a thread frees: fewer than a batch holds (62) */
static void *volatile sink;

static uint64_t live_blocks(void) {
    hakmem_stats_t s;
    memset(&s, 0, sizeof s);
    hakmem_stats_get(&s, sizeof s);
    return s.live_blocks;
}

/* glibc keeps a little memory per thread it ever ran (its stack cache's
 * bookkeeping): threads started and joined before a baseline is taken */
static void *nothing(void *arg) { free(malloc(32)); return arg; }
static void warm_threads(int n) {
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_create(&t, NULL, nothing, NULL);
        pthread_join(t, NULL);
    }
}

/* ---- a freeing thread that stays until told to go ---- */
typedef struct {
    void **p;
    int n, twice;               /* twice: free p[0] a second time (misuse) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int freed, go;
} freer_t;

static void *freer_main(void *arg) {
    freer_t *f = arg;
    void *volatile own = malloc(16);   /* a heap of its own: a thread without one frees unbatched */
    free(own);
    for (int i = 0; i < f->n; i++) free(f->p[i]);
    if (f->twice) free(f->p[0]);
    pthread_mutex_lock(&f->mu);
    f->freed = 1;
    pthread_cond_broadcast(&f->cv);
    while (!f->go) pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
    return NULL;   /* its exit handler sends what its batches hold */
}
static void freer_start(freer_t *f, pthread_t *t, void **p, int n) {
    memset(f, 0, sizeof *f);
    f->p = p;
    f->n = n;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    pthread_create(t, NULL, freer_main, f);
    pthread_mutex_lock(&f->mu);
    while (!f->freed) pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}
static void freer_finish(freer_t *f, pthread_t t) {
    pthread_mutex_lock(&f->mu);
    f->go = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(t, NULL);
}

/* A thread's open batch goes to the blocks' owner at the thread's exit: one
 * hakmem_collect of the owner then applies it, and the blocks no longer
 * count as live.  While the thread lives (and sends nothing), they do. */
static void test_exit(void) {
    NEED_HAKMEM();
    void *p[NB];
    warm_threads(2);
    hakmem_collect();
    uint64_t base = live_blocks();
    for (int i = 0; i < NB; i++) p[i] = malloc(48);
    freer_t f;
    pthread_t t;
    freer_start(&f, &t, p, NB);
    hakmem_collect();
    uint64_t during = live_blocks();
    freer_finish(&f, t);
    hakmem_collect();   /* this thread's own heap first: the batch it was sent */
    uint64_t after = live_blocks();
    CHECKF(during >= base + NB, "live %llu while the freeing thread lives, want >= %llu (blocks in its batch)",
           (unsigned long long)during, (unsigned long long)(base + NB));
    CHECKF(after == base, "live %llu after its exit, want %llu", (unsigned long long)after,
           (unsigned long long)base);
}

/* fork while a thread holds an open batch of the forking thread's blocks,
 * and the forking thread one of that thread's blocks: in the child neither
 * batch is lost (two collects: the first sends them, the second applies
 * them).  The parent's go on as before. */
static void *alloc_n(void *arg) {
    void **q = arg;
    for (int i = 0; i < NB; i++) q[i] = malloc(80);
    return NULL;
}
static void test_fork(void) {
    NEED_HAKMEM();
    static void *p[NB], *q[NB];
    pthread_t a;
    pthread_create(&a, NULL, alloc_n, q);   /* q: blocks of another heap (an exited thread's) */
    pthread_join(a, NULL);
    hakmem_collect();
    uint64_t base = live_blocks();
    for (int i = 0; i < NB; i++) p[i] = malloc(48);
    freer_t f;
    pthread_t t;
    freer_start(&f, &t, p, NB);
    for (int i = 0; i < NB; i++) free(q[i]);   /* this thread's batch for q's heap */
    pid_t pid = chk_fork(20);
    if (pid == 0) {
        hakmem_collect();
        hakmem_collect();
        uint64_t now = live_blocks(), want = base - NB;
        if (now != want) {
            printf("# child: live %llu, want %llu\n", (unsigned long long)now, (unsigned long long)want);
            _exit(1);
        }
        _exit(0);
    }
    if (pid > 0) chk_wait(pid, "fork child", 0);
    freer_finish(&f, t);
    hakmem_collect();
    hakmem_collect();
    uint64_t now = live_blocks();
    CHECKF(now == base - NB, "parent: live %llu, want %llu", (unsigned long long)now,
           (unsigned long long)(base - NB));
}

/* A public heap's blocks freed by another thread are not held back in a
 * batch: destroyed with them freed, the heap's memory serves the next heap,
 * and the freeing thread's later exit must not give any of it back. */
static void test_destroy(void) {
    NEED_HAKMEM();
    enum { N = 100, M = 400 };
    static void *p[N], *a[M], *b[M];
    hakmem_heap_t *h = hakmem_heap_new();
    for (int i = 0; i < N; i++) p[i] = hakmem_heap_malloc(h, 64);
    freer_t f;
    pthread_t t;
    freer_start(&f, &t, p, N);
    hakmem_heap_destroy(h);
    hakmem_heap_t *h2 = hakmem_heap_new();
    for (int i = 0; i < M; i++) {
        a[i] = hakmem_heap_malloc(h2, 64);
        memset(a[i], i & 0xff, 64);
    }
    freer_finish(&f, t);     /* its exit sends whatever it held */
    for (int i = 0; i < M; i++) b[i] = hakmem_heap_malloc(h2, 64);
    int dup = 0, bad = 0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < M; j++) dup += b[i] == a[j];
        for (int k = 0; k < 64; k++) bad += ((unsigned char *)a[i])[k] != (i & 0xff);
    }
    CHECKF(dup == 0, "%d blocks handed out twice", dup);
    CHECKF(bad == 0, "%d bytes of live blocks changed", bad);
    hakmem_heap_destroy(h2);
}

/* Many threads free each other's blocks: every block comes back (the
 * batches fill, go at 62, at slot conflicts and at exit). */
enum { TH = 6, PER = 3000 };
static void *blocks[TH][PER];
static pthread_barrier_t bar;
static void *mixer(void *arg) {
    int me = (int)(intptr_t)arg;
    for (int i = 0; i < PER; i++) blocks[me][i] = malloc(16 + (size_t)(i % 64) * 16);
    pthread_barrier_wait(&bar);
    for (int k = 1; k < TH; k++)
        for (int i = k; i < PER; i += TH) free(blocks[(me + k) % TH][i]);
    pthread_barrier_wait(&bar);
    for (int i = 0; i < PER; i += TH) free(blocks[me][i]);
    return NULL;
}
static void mixed_round(void) {
    pthread_t t[TH];
    pthread_barrier_init(&bar, NULL, TH);
    for (int i = 0; i < TH; i++) pthread_create(&t[i], NULL, mixer, (void *)(intptr_t)i);
    for (int i = 0; i < TH; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
}
static void test_mixed(void) {
    NEED_HAKMEM();
    mixed_round();   /* (glibc's per-thread memory for TH threads at once) */
    hakmem_collect();
    hakmem_collect();
    uint64_t base = live_blocks();
    mixed_round();
    hakmem_collect();
    hakmem_collect();
    uint64_t now = live_blocks();
    CHECKF(now == base, "live %llu, want %llu", (unsigned long long)now, (unsigned long long)base);
}

/* ---- misuse: one case per run ---- */
static int misuse(const char *c) {
    void *p = malloc(48);
    sink = p;
    freer_t f;
    pthread_t t;
    void *one[1] = { p };
    if (!strcmp(c, "twice_by_freer")) {
        /* the freeing thread frees it twice: the second free sees the key */
        memset(&f, 0, sizeof f);
        f.p = one; f.n = 1; f.twice = 1;
        pthread_mutex_init(&f.mu, NULL);
        pthread_cond_init(&f.cv, NULL);
        pthread_create(&t, NULL, freer_main, &f);
        pthread_join(t, NULL);   /* (aborts first) */
    } else if (!strcmp(c, "freer_then_owner")) {
        /* freed into a batch still open, then by its owner */
        freer_start(&f, &t, one, 1);
        free(p);
    } else if (!strcmp(c, "sent_then_owner")) {
        /* freed into a batch sent to the owner (at the freeing thread's
         * exit) but not yet applied, then by its owner */
        freer_start(&f, &t, one, 1);
        freer_finish(&f, t);
        free(p);
    } else if (!strcmp(c, "freer_then_realloc")) {
        freer_start(&f, &t, one, 1);
        sink = realloc(p, 100);
    } else {
        fprintf(stderr, "test_rbatch: unknown case '%s'\n", c);
        return 2;
    }
    printf("SURVIVED\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "misuse")) return misuse(argv[2]);
    int rc = chk_parse_options(argc, argv);
    if (rc) return rc;
    RUN_TEST(exit);
    RUN_TEST(fork);
    RUN_TEST(destroy);
    RUN_TEST(mixed);
    return check_exit_code();
}
