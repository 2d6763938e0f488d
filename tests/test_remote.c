/* test_remote.c -- remote frees: none is lost, a double free is reported
 * (src/hak_free.c; docs/experiments.md, "Batched remote frees").
 *
 * usage: test_remote [-p PREFIX] [-t TEST]   the tests, PASS/FAIL lines
 *        test_remote misuse CASE             one misuse per run (suite_remote.sh
 *                                            checks the report and SIGABRT;
 *                                            "SURVIVED": hakmem did not stop it)
 * Written for batched remote frees (issue 39: a thread kept the pointers it
 * freed into other heaps in batches and sent each batch later), measured
 * and deleted; the tests stay as what any such design must keep: blocks a
 * thread freed into another heap come back after the thread exits (exit), in
 * a fork child (fork: frees by the forking thread and by another one), never
 * into a public heap destroyed and made again meanwhile (destroy), and when
 * six threads free each other's blocks (mixed); a double free of a block
 * another thread freed is reported at once, by that thread or by the owner
 * (misuse).  Each failed under the batched build with the matching piece
 * left out (no send at exit, public heaps batched, no key written by the
 * freeing thread).  The freeing thread has a heap of its own first: a
 * thread without one takes a path of its own.  The hakmem_* names are
 * weak: without hakmem preloaded every test is skipped. */
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

enum { NB = 40 };               /* blocks a thread frees (fewer than a batch held) */
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
    void *volatile own = malloc(16);   /* a heap of its own (see the top) */
    free(own);
    for (int i = 0; i < f->n; i++) free(f->p[i]);
    if (f->twice) free(f->p[0]);
    pthread_mutex_lock(&f->mu);
    f->freed = 1;
    pthread_cond_broadcast(&f->cv);
    while (!f->go) pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
    return NULL;
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
/* The live blocks now; then NB blocks of 48 bytes into p, freed by a thread
 * that stays (freer_finish ends it). */
static uint64_t freed_by_thread(freer_t *f, pthread_t *t, void **p) {
    uint64_t base = live_blocks();
    for (int i = 0; i < NB; i++) p[i] = malloc(48);
    freer_start(f, t, p, NB);
    return base;
}
static void freer_finish(freer_t *f, pthread_t t) {
    pthread_mutex_lock(&f->mu);
    f->go = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(t, NULL);
}

/* Blocks a thread freed into this thread's heap do not count as live once
 * the thread has exited and this thread collected its heap. */
static void test_exit(void) {
    NEED_HAKMEM();
    void *p[NB];
    warm_threads(2);
    hakmem_collect();
    freer_t f;
    pthread_t t;
    uint64_t base = freed_by_thread(&f, &t, p);
    freer_finish(&f, t);
    hakmem_collect();   /* this thread's own heap first */
    uint64_t after = live_blocks();
    CHECKF(after == base, "live %llu after its exit, want %llu", (unsigned long long)after,
           (unsigned long long)base);
}

/* fork just after a live thread freed the forking thread's blocks, and the
 * forking thread blocks of an exited thread: in the child none of them
 * counts as live after two collects.  The parent's go on as before. */
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
    freer_t f;
    pthread_t t;
    uint64_t base = freed_by_thread(&f, &t, p);
    for (int i = 0; i < NB; i++) free(q[i]);   /* remote frees by the forking thread */
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

/* A public heap's blocks freed by another thread, then the heap destroyed:
 * its memory serves the next heap, and the freeing thread's later exit must
 * not give any of it back (no block handed out twice, none changed). */
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

/* Many threads free each other's blocks: every block comes back. */
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
        /* the freeing thread frees it twice */
        memset(&f, 0, sizeof f);
        f.p = one; f.n = 1; f.twice = 1; f.go = 1;   /* (it does not wait) */
        pthread_mutex_init(&f.mu, NULL);
        pthread_cond_init(&f.cv, NULL);
        pthread_create(&t, NULL, freer_main, &f);
        pthread_join(t, NULL);   /* (aborts first) */
    } else if (!strcmp(c, "freer_then_owner")) {
        /* freed by a thread that lives on, then by its owner */
        freer_start(&f, &t, one, 1);
        free(p);
    } else if (!strcmp(c, "sent_then_owner")) {
        /* freed by a thread that has exited, then by its owner */
        freer_start(&f, &t, one, 1);
        freer_finish(&f, t);
        free(p);
    } else if (!strcmp(c, "freer_then_realloc")) {
        freer_start(&f, &t, one, 1);
        sink = realloc(p, 100);
    } else {
        fprintf(stderr, "test_remote: unknown case '%s'\n", c);
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
