/* test_heap_ends.c -- heaps at the ends of threads and across fork (issue
 * 28's faults 6, 7 and 9), run under LD_PRELOAD by tests/suite_lifecycle.sh.
 *
 * usage: test_heap_ends [-p PREFIX] [-t TEST] [-s SCALE]   (every test without -t)
 *   first_late      threads whose first allocation comes in the last round of
 *                   pthread key destructors (PTHREAD_DESTRUCTOR_ITERATIONS):
 *                   heaps created and memory mapped stay flat (each such
 *                   thread used to keep a heap and a 4 MiB segment forever)
 *   dtor_heaps      public heaps used, destroyed and deleted from the
 *                   program's own key destructors, in every round, after
 *                   hakmem's exit handler: nothing is reported
 *   fork_dead_pub   destroyed and deleted public heaps wait for reuse when
 *                   the program forks: in the child, a new thread's heap and
 *                   a new public heap are never the same structure (the new
 *                   public heap is empty, its destroy leaves the thread's
 *                   blocks alone, and the thread frees them)
 * Each test prints one PASS/FAIL/SKIP line (tests/check.h).  A child that
 * hangs dies by alarm(); the suite runs this under a SIGKILL time limit.
 */
#define _GNU_SOURCE 1
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "hakmem.h"

#pragma weak hakmem_stats_get
#pragma weak hakmem_heap_new
#pragma weak hakmem_heap_malloc
#pragma weak hakmem_heap_destroy
#pragma weak hakmem_heap_delete
#pragma weak hakmem_heap_visit

#define NEED_HAKMEM() do { if (!hakmem_heap_new || !hakmem_stats_get) SKIP_TEST("hakmem not preloaded"); } while (0)

static double scale = 1.0;
static long scaled(long n) { long v = (long)(n * scale); return v < 1 ? 1 : v; }

static hakmem_stats_t stats_buf;   /* big: one thread at a time reads it */
static void stats(uint64_t *heaps, uint64_t *mapped)
{
    CHECK(hakmem_stats_get(&stats_buf, sizeof stats_buf) == 0);
    *heaps = stats_buf.heaps_created;
    *mapped = stats_buf.bytes_mapped;
}

/* ====================== first_late ====================== */
/* The key's destructor re-arms the key until the last round, and only then
 * allocates: the thread's first allocation comes when no round is left to
 * run hakmem's exit handler. */
#include "late_thread.h"

static void test_first_late(void)
{
    NEED_HAKMEM();
    long n = scaled(1000);
    CHECK(pthread_key_create(&late_key, late_dtor) == 0);
    uint64_t h0, m0, h1, m1;
    stats(&h0, &m0);
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, late_thread, NULL) != 0) { CHECK(!"pthread_create"); break; }
        pthread_join(t, NULL);
    }
    stats(&h1, &m1);
    CHECKF(atomic_load(&late_bad) == 0, "%ld failed allocations", atomic_load(&late_bad));
    /* before the fix: a heap and a segment each (n heaps, n * 4 MiB) */
    CHECKF(h1 - h0 <= 4, "%ld threads made %llu heaps", n, (unsigned long long)(h1 - h0));
    CHECKF(m1 <= m0 + ((uint64_t)64 << 20), "mapped %llu -> %llu bytes after %ld threads",
           (unsigned long long)m0, (unsigned long long)m1, n);
    printf("# first_late: %ld threads, heaps created +%llu, mapped %llu -> %llu KiB\n", n,
           (unsigned long long)(h1 - h0), (unsigned long long)(m0 >> 10), (unsigned long long)(m1 >> 10));
}

/* ====================== dtor_heaps ====================== */
/* Every round: the heap made in the thread (or the round before) is
 * destroyed or deleted, plain malloc and free work, a new public heap is
 * made and filled, and kept for the next round -- or deleted in the last
 * one, its blocks then freed. */
static pthread_key_t pub_key;
static __thread int pub_round;
static __thread hakmem_heap_t *pub_heap;
static __thread void *pub_blocks[8];

static int count_block(void *b, size_t n, void *arg) { (void)b; (void)n; ++*(long *)arg; return 0; }

static void pub_fill(void)
{
    pub_heap = hakmem_heap_new();
    if (!pub_heap) { CHECK(!"hakmem_heap_new"); return; }
    for (int i = 0; i < 8; i++) {
        pub_blocks[i] = hakmem_heap_malloc(pub_heap, 16 + (size_t)i * 1000 + (size_t)pub_round * 100000);
        CHECK(pub_blocks[i] != NULL);
        if (pub_blocks[i]) memset(pub_blocks[i], i, 16);
    }
    long live = 0;
    hakmem_heap_visit(pub_heap, count_block, &live);
    CHECKF(live == 8, "a new heap with 8 blocks shows %ld", live);
}

static void pub_dtor(void *v)
{
    (void)v;
    pub_round++;
    /* odd rounds destroy, even rounds delete (and free the moved blocks) */
    if (pub_round % 2) {
        hakmem_heap_destroy(pub_heap);
    } else {
        hakmem_heap_delete(pub_heap);
        for (int i = 0; i < 8; i++) free(pub_blocks[i]);
    }
    void *volatile p = malloc(100);
    free(p);
    pub_fill();
    if (pub_round < PTHREAD_DESTRUCTOR_ITERATIONS) {
        pthread_setspecific(pub_key, &pub_round);
    } else {
        hakmem_heap_delete(pub_heap);
        for (int i = 0; i < 8; i++) free(pub_blocks[i]);
    }
}

static void *pub_thread(void *arg)
{
    if (arg) {   /* half the threads allocate before: hakmem's exit handler runs in round 1 */
        void *volatile p = malloc(64);
        free(p);
    }
    pub_fill();
    pthread_setspecific(pub_key, &pub_round);
    return NULL;
}

static void test_dtor_heaps(void)
{
    NEED_HAKMEM();
    CHECK(pthread_key_create(&pub_key, pub_dtor) == 0);
    for (long i = 0; i < scaled(50); i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, pub_thread, (void *)(intptr_t)(i & 1)) != 0) { CHECK(!"pthread_create"); break; }
        pthread_join(t, NULL);
    }
}

/* ====================== fork_dead_pub ====================== */
/* stages by polling: a condition variable with a waiter in the parent is
 * not usable in the child */
static atomic_int fk_stage;
static void *fk_blocks[64];

static void fk_wait(int stage)
{
    while (atomic_load(&fk_stage) < stage) usleep(100);
}
static void fk_set(int stage) { atomic_store(&fk_stage, stage); }

/* a thread of the child: allocates 64 blocks, waits, frees them */
static void *fk_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 64; i++) {
        fk_blocks[i] = malloc(48);
        if (fk_blocks[i]) memset(fk_blocks[i], 0x33, 48);
    }
    fk_set(1);
    fk_wait(2);
    for (int i = 0; i < 64; i++) free(fk_blocks[i]);
    return NULL;
}

/* a thread of the parent that holds blocks across the fork */
static void *holder_thread(void *arg)
{
    void *volatile p = malloc(100);
    fk_set(10);
    fk_wait(11);
    free(p);
    return arg;
}

static int fork_dead_child(void)
{
    alarm(20);
    int bad = 0;
    for (int round = 0; round < 4; round++) {
        pthread_t t;
        fk_set(0);
        if (pthread_create(&t, NULL, fk_thread, NULL) != 0) return 90;
        fk_wait(1);
        hakmem_heap_t *h = hakmem_heap_new();
        if (!h) return 91;
        long live = 0;
        hakmem_heap_visit(h, count_block, &live);
        if (live != 0) {
            fprintf(stderr, "# child round %d: a new public heap shows %ld live blocks\n", round, live);
            bad = 1;
        }
        void *b = hakmem_heap_malloc(h, 48);
        if (!b) return 92;
        hakmem_heap_destroy(h);
        fk_set(2);
        pthread_join(t, NULL);
    }
    return bad;
}

static void test_fork_dead_pub(void)
{
    NEED_HAKMEM();
    /* destroyed and deleted heaps on the free list */
    hakmem_heap_t *hs[6];
    for (int i = 0; i < 6; i++) {
        hs[i] = hakmem_heap_new();
        if (!hs[i]) { CHECK(!"hakmem_heap_new"); return; }
        CHECK(hakmem_heap_malloc(hs[i], 100) != NULL);
    }
    for (int i = 0; i < 6; i++) {
        if (i % 2) hakmem_heap_destroy(hs[i]);
        else hakmem_heap_delete(hs[i]);
    }
    fk_set(0);
    pthread_t holder;
    CHECK(pthread_create(&holder, NULL, holder_thread, NULL) == 0);
    fk_wait(10);
    pid_t pid = fork();
    if (pid == 0) _exit(fork_dead_child());
    fk_set(11);
    pthread_join(holder, NULL);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %s %d",
           WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-s") && i + 1 < argc) scale = atof(argv[++i]);
        else if (!chk_common_option(argc, argv, &i)) {
            fprintf(stderr, "usage: %s [-p PREFIX] [-t TEST] [-s SCALE]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    RUN_TEST(first_late);
    RUN_TEST(dtor_heaps);
    RUN_TEST(fork_dead_pub);
    return check_exit_code();
}
