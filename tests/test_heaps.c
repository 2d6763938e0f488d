/* test_heaps.c -- first-class heaps (hakmem_heap_*, hakmem_visit; docs/heaps.md).
 *
 * usage: test_heaps [-p PREFIX]            every test, PASS/FAIL lines
 *        test_heaps misuse CASE            one misuse per run (tests/suite_heaps.sh
 *                                          checks the report and SIGABRT; "SURVIVED"
 *                                          means hakmem did not stop the program)
 * Built plainly like every tests/test_*.c: the hakmem_* names are weak and
 * resolve when hakmem is preloaded; without it every test is skipped. */
#include "check.h"
#include "testutil.h"
#include "hakmem.h"
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#pragma weak hakmem_heap_new
#pragma weak hakmem_heap_malloc
#pragma weak hakmem_heap_calloc
#pragma weak hakmem_heap_realloc
#pragma weak hakmem_heap_aligned_alloc
#pragma weak hakmem_heap_destroy
#pragma weak hakmem_heap_delete
#pragma weak hakmem_heap_visit
#pragma weak hakmem_heap_stats
#pragma weak hakmem_visit
#pragma weak hakmem_owns
#pragma weak hakmem_stats_get

#define NEED_HAKMEM() do { if (!hakmem_heap_new) SKIP_TEST("hakmem not preloaded"); } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
#define R() rnd(&rng_state)

static size_t rnd_size(void) {
    unsigned r = (unsigned)(R() % 100);
    if (r < 70) return 1 + R() % 256;
    if (r < 95) return 1 + R() % 4096;
    if (r < 99) return 1 + R() % 65536;
    return 1 + R() % (1 << 20);
}
static void fill(void *p, size_t n, unsigned seed) { for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)(seed + i * 7); }
static int same(const void *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) if (((const unsigned char *)p)[i] != (unsigned char)(seed + i * 7)) return 0;
    return 1;
}

/* ---- the visit's record: every block once, with its usable size ---- */
#define MAXB 20000
typedef struct { void *p[MAXB]; size_t n; int dup_or_bad; size_t bytes; } seen_t;
static int record(void *block, size_t usable, void *arg) {
    seen_t *s = arg;
    if (s->n >= MAXB) { s->dup_or_bad++; return 0; }
    if (usable != malloc_usable_size(block)) s->dup_or_bad++;
    s->p[s->n++] = block;
    s->bytes += usable;
    return 0;
}
static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}
/* same set of pointers? (sorts both) */
static int same_set(void **a, size_t na, void **b, size_t nb) {
    if (na != nb) return 0;
    qsort(a, na, sizeof *a, cmp_ptr);
    qsort(b, nb, sizeof *b, cmp_ptr);
    for (size_t i = 0; i < na; i++) if (a[i] != b[i]) return 0;
    return 1;
}
static seen_t seen;
static void *live[MAXB];

/* ---- contents ---- */
static void test_contents(void) {
    NEED_HAKMEM();
    hakmem_heap_t *h = hakmem_heap_new();
    CHECK(h != NULL);
    enum { N = 3000 };
    static void *p[N]; static size_t sz[N];
    for (int i = 0; i < N; i++) {
        sz[i] = rnd_size();
        p[i] = hakmem_heap_malloc(h, sz[i]);
        CHECK(p[i] != NULL && ((uintptr_t)p[i] & 15) == 0 && hakmem_owns(p[i]));
        CHECK(malloc_usable_size(p[i]) >= sz[i]);
        fill(p[i], sz[i], (unsigned)i);
    }
    for (int i = 0; i < N; i++) CHECKF(same(p[i], sz[i], (unsigned)i), "block %d", i);
    /* calloc: zero, and overflow */
    for (int i = 0; i < 200; i++) {
        size_t n = 1 + R() % 3000;
        unsigned char *c = hakmem_heap_calloc(h, n, 1);
        size_t z = 0; for (size_t k = 0; k < n; k++) z += c[k];
        CHECK(c && z == 0);
        fill(c, n, 1);
    }
    errno = 0;
    CHECK(hakmem_heap_calloc(h, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(hakmem_heap_malloc(h, (size_t)1 << 62) == NULL && errno == ENOMEM);   /* beyond any mapping */
    /* realloc keeps the contents, and p[i] from the default heap moves in */
    for (int i = 0; i < 500; i++) {
        size_t ns = rnd_size();
        void *q = hakmem_heap_realloc(h, p[i], ns);
        CHECK(q != NULL && same(q, ns < sz[i] ? ns : sz[i], (unsigned)i));
        p[i] = q; sz[i] = ns; fill(q, ns, (unsigned)i);
    }
    void *m = malloc(100); fill(m, 100, 9);
    void *mq = hakmem_heap_realloc(h, m, 3000);
    CHECK(mq && same(mq, 100, 9));
    CHECK(hakmem_heap_realloc(h, NULL, 10) != NULL);
    /* aligned */
    for (size_t a = 32; a <= 65536; a *= 2) {
        for (int k = 0; k < 4; k++) {
            size_t s = 1 + R() % 3000;
            void *q = hakmem_heap_aligned_alloc(h, a, s);
            CHECKF(q && ((uintptr_t)q & (a - 1)) == 0 && malloc_usable_size(q) >= s, "align %zu", a);
            fill(q, s, 3);
            if (k & 1) free(q);
        }
    }
    for (int i = 0; i < N; i++) CHECKF(same(p[i], sz[i], (unsigned)i), "block %d after", i);
    hakmem_heap_destroy(h);
}

/* ---- plain free and realloc from the owner; stats exact ---- */
static void test_owner_free_stats(void) {
    NEED_HAKMEM();
    hakmem_heap_t *h = hakmem_heap_new();
    hakmem_heap_stats_t st;
    CHECK(hakmem_heap_stats(h, &st, sizeof st) == 0 && st.blocks_in_use == 0 && st.bytes_in_use == 0);
    size_t n = 0, bytes = 0;
    for (int i = 0; i < 5000; i++) {
        live[n] = hakmem_heap_malloc(h, rnd_size());
        n++;
        if (R() % 3 == 0) { size_t k = R() % n; free(live[k]); live[k] = live[--n]; }
    }
    for (size_t i = 0; i < n; i++) bytes += malloc_usable_size(live[i]);
    CHECK(hakmem_heap_stats(h, &st, sizeof st) == 0);
    CHECKF(st.blocks_in_use == n && st.bytes_in_use == bytes, "stats %llu/%llu want %zu/%zu",
           (unsigned long long)st.blocks_in_use, (unsigned long long)st.bytes_in_use, n, bytes);
    CHECK(st.pages > 0 && st.page_bytes >= bytes);
    /* a prefix of the struct: the rest untouched */
    hakmem_heap_stats_t part; memset(&part, 0xab, sizeof part);
    CHECK(hakmem_heap_stats(h, &part, sizeof(uint64_t)) == 0 && part.blocks_in_use == n);
    CHECK(part.bytes_in_use == 0xababababababababull);
    CHECK(hakmem_heap_stats(h, NULL, sizeof st) == -1);
    for (size_t i = 0; i < n; i++) free(live[i]);
    /* freed blocks come back to the heap */
    CHECK(hakmem_heap_stats(h, &st, sizeof st) == 0 && st.blocks_in_use == 0);
    for (int i = 0; i < 1000; i++) live[i] = hakmem_heap_malloc(h, 64);
    CHECK(hakmem_heap_stats(h, &st, sizeof st) == 0 && st.blocks_in_use == 1000);
    hakmem_heap_destroy(h);
}

/* ---- visit: exact, with local, remote and delayed frees ---- */
typedef struct { void **p; size_t n; } batch_t;
static void *free_batch(void *arg) { batch_t *b = arg; for (size_t i = 0; i < b->n; i++) free(b->p[i]); return NULL; }
static void *remote_gone[MAXB];

static void test_visit_exact(void) {
    NEED_HAKMEM();
    hakmem_heap_t *h = hakmem_heap_new();
    size_t n = 0, ng = 0;
    for (int i = 0; i < 8000; i++) {
        void *q = hakmem_heap_malloc(h, R() % 2 ? 48 : rnd_size());
        if (R() % 4 == 0) free(q);                     /* the owner's plain free */
        else if (R() % 3 == 0) remote_gone[ng++] = q;  /* freed by another thread */
        else live[n++] = q;
    }
    for (int a = 64; a <= 4096; a *= 4) live[n++] = hakmem_heap_aligned_alloc(h, (size_t)a, 100);
    batch_t b = { remote_gone, ng };
    pthread_t t;
    pthread_create(&t, NULL, free_batch, &b);
    pthread_join(t, NULL);
    memset(&seen, 0, sizeof seen);
    CHECK(hakmem_heap_visit(h, record, &seen) == 0);
    CHECK(seen.dup_or_bad == 0);
    static void *want[MAXB];
    memcpy(want, live, n * sizeof *live);
    CHECKF(same_set(seen.p, seen.n, want, n), "visited %zu, live %zu", seen.n, n);
    hakmem_heap_stats_t st;
    hakmem_heap_stats(h, &st, sizeof st);
    CHECK(st.blocks_in_use == n && st.bytes_in_use == seen.bytes);
    /* the walk stops on a nonzero answer */
    int calls = 0;
    int stop(void *p_, size_t u_, void *a_) { (void)p_; (void)u_; return ++*(int *)a_ == 5 ? 42 : 0; }
    CHECK(hakmem_heap_visit(h, stop, &calls) == 42 && calls == 5);
    /* an allocation after the remote frees collects them: still exact */
    for (int i = 0; i < 2000; i++) live[n++] = hakmem_heap_malloc(h, 48);
    memset(&seen, 0, sizeof seen);
    hakmem_heap_visit(h, record, &seen);
    memcpy(want, live, n * sizeof *live);
    CHECKF(same_set(seen.p, seen.n, want, n), "visited %zu, live %zu", seen.n, n);
    hakmem_heap_destroy(h);
}

/* ---- cross-thread free, and blocks a full page gets back from other threads ---- */
static void test_cross_thread(void) {
    NEED_HAKMEM();
    hakmem_heap_t *h = hakmem_heap_new();
    enum { N = 6000 };
    static void *p[N];
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N; i++) { p[i] = hakmem_heap_malloc(h, 16 + (size_t)(i % 50) * 16); fill(p[i], 16, (unsigned)i); }
        batch_t b1 = { p, N / 2 }, b2 = { p + N / 2, N - N / 2 };
        pthread_t t1, t2;
        pthread_create(&t1, NULL, free_batch, &b1);
        pthread_create(&t2, NULL, free_batch, &b2);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        hakmem_heap_stats_t st;
        hakmem_heap_stats(h, &st, sizeof st);
        CHECKF(st.blocks_in_use == 0, "round %d: %llu live", round, (unsigned long long)st.blocks_in_use);
    }
    /* pages are reused, not piled up */
    hakmem_heap_stats_t st;
    hakmem_heap_stats(h, &st, sizeof st);
    CHECKF(st.pages < 200, "%llu pages", (unsigned long long)st.pages);
    hakmem_heap_destroy(h);
}

/* ---- destroy: everything goes; heaps are reused ---- */
static size_t count_all;
static int count_cb(void *p, size_t u, void *a) { (void)p; (void)u; (void)a; count_all++; return 0; }
static size_t visit_count(void) { count_all = 0; hakmem_visit(count_cb, NULL); return count_all; }

static void test_destroy(void) {
    NEED_HAKMEM();
    size_t before = visit_count();
    hakmem_stats_t s0, s1;
    hakmem_stats_get(&s0, sizeof s0);
    for (int r = 0; r < 3000; r++) {
        hakmem_heap_t *h = hakmem_heap_new();
        for (int i = 0; i < 300; i++) {
            void *q = hakmem_heap_malloc(h, 16 + R() % 4096);
            fill(q, 16, 1);
            if (i % 5 == 0) free(q);
        }
        if (r == 0) CHECK(visit_count() == before + 240);
        hakmem_heap_destroy(h);
    }
    CHECK(visit_count() == before);
    hakmem_stats_get(&s1, sizeof s1);
    CHECKF(s1.heaps_created - s0.heaps_created <= 1, "%llu heaps made for 3000 new/destroy",
           (unsigned long long)(s1.heaps_created - s0.heaps_created));
    CHECKF(s1.segments_in_use <= s0.segments_in_use + 1, "segments %llu -> %llu",
           (unsigned long long)s0.segments_in_use, (unsigned long long)s1.segments_in_use);
}

/* destroy while another thread holds a block: the thread must not free it
 * (that is the misuse case heap_destroyed_block); the memory is gone */
static void test_destroy_live_elsewhere(void) {
    NEED_HAKMEM();
    hakmem_heap_t *h = hakmem_heap_new();
    void *q = hakmem_heap_malloc(h, 100);
    CHECK(hakmem_owns(q));
    hakmem_heap_destroy(h);
    /* the block is no block any more: hakmem_visit does not see it */
    memset(&seen, 0, sizeof seen);
    hakmem_visit(record, &seen);
    int found = 0;
    for (size_t i = 0; i < seen.n; i++) found |= seen.p[i] == q;
    CHECK(!found);
}

/* ---- delete: live blocks move to the default heap ---- */
static void *free_one(void *p) { free(p); return NULL; }
static void test_delete(void) {
    NEED_HAKMEM();
    hakmem_heap_t *h = hakmem_heap_new();
    enum { N = 4000 };
    static void *p[N]; static size_t sz[N];
    for (int i = 0; i < N; i++) { sz[i] = rnd_size(); p[i] = hakmem_heap_malloc(h, sz[i]); fill(p[i], sz[i], (unsigned)i); }
    for (int i = 0; i < N; i += 3) { free(p[i]); p[i] = NULL; }
    size_t before = visit_count();
    hakmem_heap_delete(h);
    CHECK(visit_count() == before);           /* nothing lost, nothing freed */
    for (int i = 0; i < N; i++) if (p[i]) CHECKF(same(p[i], sz[i], (unsigned)i), "block %d", i);
    /* the blocks are the default heap's now: freed locally, remotely, reallocated */
    pthread_t t;
    pthread_create(&t, NULL, free_one, p[1]);
    pthread_join(t, NULL);
    p[1] = NULL;
    for (int i = 0; i < N; i++) {
        if (!p[i]) continue;
        if (i % 2) { free(p[i]); continue; }
        void *q = realloc(p[i], sz[i] + 100);
        CHECK(q && same(q, sz[i], (unsigned)i));
        free(q);
    }
    CHECK(visit_count() == before - (N - (N + 2) / 3));
    /* the default heap keeps serving */
    for (int i = 0; i < 1000; i++) free(malloc(1 + R() % 5000));
}

/* ---- hakmem_visit: every heap of the process, huge blocks, exited threads ---- */
static void *exit_block;
static void *leave_block(void *a) { (void)a; exit_block = malloc(777); return NULL; }
static void test_visit_process(void) {
    NEED_HAKMEM();
    hakmem_heap_t *h = hakmem_heap_new();
    void *a = hakmem_heap_malloc(h, 5000), *b = malloc(24), *huge = malloc(5 << 20);
    pthread_t t;
    pthread_create(&t, NULL, leave_block, NULL);
    pthread_join(t, NULL);
    memset(&seen, 0, sizeof seen);
    CHECK(hakmem_visit(record, &seen) == 0);
    CHECK(seen.dup_or_bad == 0);
    int fa = 0, fb = 0, fh = 0, fe = 0;
    for (size_t i = 0; i < seen.n; i++) {
        fa |= seen.p[i] == a; fb |= seen.p[i] == b; fh |= seen.p[i] == huge; fe |= seen.p[i] == exit_block;
    }
    CHECK(fa && fb && fh && fe);
    size_t n0 = seen.n;
    free(huge); free(b); free(exit_block);
    CHECK(visit_count() == n0 - 3);
    hakmem_heap_destroy(h);
    CHECK(visit_count() == n0 - 4);
}

/* ---- huge blocks (> HAKMEM_HEAP_MAX_SIZE): the heap's too ---- */
#define MiB ((size_t)1 << 20)
static int in_seen(const void *p) {
    int n = 0;
    for (size_t i = 0; i < seen.n; i++) n += seen.p[i] == p;
    return n;
}
static int heap_has(hakmem_heap_t *h, const void *p) {
    memset(&seen, 0, sizeof seen);
    hakmem_heap_visit(h, record, &seen);
    return seen.dup_or_bad == 0 && in_seen(p) == 1;
}
static int process_has(const void *p) {
    memset(&seen, 0, sizeof seen);
    hakmem_visit(record, &seen);
    return seen.dup_or_bad == 0 ? in_seen(p) : -1;
}
static void test_huge(void) {
    NEED_HAKMEM();
    size_t before = visit_count();
    hakmem_stats_t s0, s1;
    hakmem_stats_get(&s0, sizeof s0);
    hakmem_heap_t *h = hakmem_heap_new();
    /* a freed dirty huge mapping first: calloc must zero a reused one */
    void *dirty = hakmem_heap_malloc(h, 5 * MiB);
    CHECK(dirty != NULL);
    if (dirty) memset(dirty, 0xa5, 5 * MiB);
    free(dirty);
    void *a = hakmem_heap_malloc(h, 3 * MiB);
    unsigned char *b = hakmem_heap_calloc(h, 1, 5 * MiB);
    void *c = hakmem_heap_aligned_alloc(h, 4 * MiB, 100);            /* huge by alignment */
    void *d = hakmem_heap_aligned_alloc(h, 1 * MiB, MiB + MiB / 2);  /* size + alignment > 2 MiB */
    void *e = hakmem_heap_malloc(h, 100);
    CHECK(a && b && c && d && e);
    if (!(a && b && c && d && e)) return;
    fill(a, 3 * MiB, 3);
    size_t nz = 0;
    for (size_t i = 0; i < 5 * MiB; i++) nz += b[i] != 0;
    CHECKF(nz == 0, "%zu nonzero bytes from hakmem_heap_calloc", nz);
    CHECK(((uintptr_t)c & (4 * MiB - 1)) == 0 && ((uintptr_t)d & (MiB - 1)) == 0);
    CHECK(hakmem_owns(a) && hakmem_owns(b) && hakmem_owns(c) && hakmem_owns(d));
    /* visit and stats: exactly these five blocks */
    memset(&seen, 0, sizeof seen);
    CHECK(hakmem_heap_visit(h, record, &seen) == 0);
    CHECK(seen.dup_or_bad == 0 && seen.n == 5);
    CHECK(in_seen(a) == 1 && in_seen(b) == 1 && in_seen(c) == 1 && in_seen(d) == 1 && in_seen(e) == 1);
    size_t bytes = malloc_usable_size(a) + malloc_usable_size(b) + malloc_usable_size(c) +
                   malloc_usable_size(d) + malloc_usable_size(e);
    hakmem_heap_stats_t st;
    CHECK(hakmem_heap_stats(h, &st, sizeof st) == 0);
    CHECKF(st.blocks_in_use == 5 && st.bytes_in_use == bytes, "stats %llu blocks %llu bytes, want 5 %zu",
           (unsigned long long)st.blocks_in_use, (unsigned long long)st.bytes_in_use, bytes);
    CHECK(seen.bytes == bytes);
    /* the process-wide visit sees each once */
    CHECK(process_has(a) == 1 && process_has(b) == 1 && process_has(c) == 1 && process_has(d) == 1);
    CHECK(visit_count() == before + 5);
    /* realloc: small -> huge -> bigger huge -> small, staying in the heap */
    void *r = hakmem_heap_malloc(h, 1000);
    fill(r, 1000, 9);
    r = hakmem_heap_realloc(h, r, 3 * MiB);
    CHECK(r && same(r, 1000, 9) && heap_has(h, r));
    fill(r, 3 * MiB, 10);
    r = hakmem_heap_realloc(h, r, 11 * MiB);
    CHECK(r && same(r, 3 * MiB, 10) && heap_has(h, r));
    r = hakmem_heap_realloc(h, r, 7 * MiB);                           /* shrink in place */
    CHECK(r && same(r, 3 * MiB, 10) && heap_has(h, r));
    r = hakmem_heap_realloc(h, r, 500);
    CHECK(r && same(r, 500, 10) && heap_has(h, r) && malloc_usable_size(r) < MiB);
    /* plain realloc of a huge heap block keeps it in the heap (pages move) */
    void *a2 = realloc(a, 40 * MiB);
    CHECK(a2 && same(a2, 3 * MiB, 3) && heap_has(h, a2) && process_has(a2) == 1);
    a = a2;
    /* plain free from another thread */
    pthread_t t;
    pthread_create(&t, NULL, free_one, b);
    pthread_join(t, NULL);
    CHECK(!heap_has(h, b) && seen.n == 5);                             /* a c d e r */
    CHECK(hakmem_heap_stats(h, &st, sizeof st) == 0 && st.blocks_in_use == 5);
    free(c);
    CHECK(hakmem_heap_stats(h, &st, sizeof st) == 0 && st.blocks_in_use == 4);
    /* destroy gives the rest back */
    hakmem_heap_destroy(h);
    CHECK(visit_count() == before);
    CHECK(process_has(a) == 0 && process_has(d) == 0);
    hakmem_stats_get(&s1, sizeof s1);
    CHECKF(s1.huge_in_use == s0.huge_in_use, "huge blocks in use %llu -> %llu",
           (unsigned long long)s0.huge_in_use, (unsigned long long)s1.huge_in_use);
    /* many heaps with huge blocks: the lists stay consistent */
    for (int k = 0; k < 50; k++) {
        hakmem_heap_t *x = hakmem_heap_new(), *y = hakmem_heap_new();
        void *p[6];
        for (int i = 0; i < 6; i++) p[i] = hakmem_heap_malloc(i % 2 ? x : y, (size_t)(3 + i) * MiB);
        free(p[k % 6]);
        p[k % 6] = NULL;
        for (int i = 0; i < 6; i += 3) { free(p[i]); p[i] = NULL; }
        uint64_t want = 0;
        for (int i = 1; i < 6; i += 2) want += p[i] != NULL;
        CHECK(hakmem_heap_stats(x, &st, sizeof st) == 0 && st.blocks_in_use == want);
        hakmem_heap_destroy(x);
        hakmem_heap_destroy(y);
    }
    CHECK(visit_count() == before);
}

/* delete: huge blocks become the default heap's, once in hakmem_visit */
static void test_huge_delete(void) {
    NEED_HAKMEM();
    size_t before = visit_count();
    hakmem_heap_t *h = hakmem_heap_new();
    void *a = hakmem_heap_malloc(h, 6 * MiB), *b = hakmem_heap_malloc(h, 9 * MiB), *s = hakmem_heap_malloc(h, 64);
    CHECK(a && b && s);
    if (!(a && b && s)) return;
    fill(a, 6 * MiB, 1);
    fill(b, 9 * MiB, 2);
    hakmem_heap_delete(h);
    CHECK(visit_count() == before + 3);
    CHECK(process_has(a) == 1 && process_has(b) == 1);
    CHECK(same(a, 6 * MiB, 1) && same(b, 9 * MiB, 2));
    /* a new heap (perhaps the same structure) does not own them */
    hakmem_heap_t *h2 = hakmem_heap_new();
    memset(&seen, 0, sizeof seen);
    hakmem_heap_visit(h2, record, &seen);
    CHECK(seen.n == 0);
    hakmem_heap_destroy(h2);
    CHECK(same(a, 6 * MiB, 1) && same(b, 9 * MiB, 2));
    void *a2 = realloc(a, 20 * MiB);
    CHECK(a2 && same(a2, 6 * MiB, 1));
    pthread_t t;
    pthread_create(&t, NULL, free_one, b);
    pthread_join(t, NULL);
    free(a2);
    free(s);
    CHECK(visit_count() == before);
}

/* delete while another thread frees the heap's blocks, many of them in full
 * pages: a free that read the old owner may land on the deleted heap's
 * delayed list after delete drained it; the next hakmem_heap_new (which
 * takes that heap structure again) gives it to its page's new owner.  Then
 * no block is left counted as live. */
typedef struct { void **p; size_t n; _Atomic size_t done; } race_t;
static void *race_free(void *arg) {
    race_t *r = arg;
    for (size_t i = 0; i < r->n; i++) { free(r->p[i]); atomic_fetch_add(&r->done, 1); }
    return NULL;
}
static void test_delete_race(void) {
    NEED_HAKMEM();
    enum { N = 6000 };
    static void *p[N];
    size_t before = visit_count();
    for (int round = 0; round < 60; round++) {
        hakmem_heap_t *h = hakmem_heap_new();
        for (int i = 0; i < N; i++) p[i] = hakmem_heap_malloc(h, 16 + (size_t)(i % 4) * 16);
        race_t r = { p, N, 0 };
        pthread_t t;
        pthread_create(&t, NULL, race_free, &r);
        while (atomic_load(&r.done) < (size_t)(round % 10) * N / 12) sched_yield();
        hakmem_heap_delete(h);
        pthread_join(t, NULL);
        hakmem_heap_t *h2 = hakmem_heap_new();
        hakmem_heap_destroy(h2);
        for (int i = 0; i < 200; i++) free(malloc(16 + (size_t)(i % 4) * 16));   /* the default heap collects */
        size_t now = visit_count();
        CHECKF(now == before, "round %d: %zu live blocks, want %zu", round, now, before);
        if (now != before) break;
    }
}

/* delete while another thread reallocates (moves) a huge block of the heap:
 * the block ends plain (the default heap's), never on the dead heap's list
 * (where the next heap to take that structure would own it) */
static void *move_huge(void *arg) {
    void **q = arg;
    for (int i = 0; i < 12; i++) {
        void *r = realloc(*q, (size_t)(3 + (i % 4) * 9) * MiB);
        if (r) *q = r;
    }
    return NULL;
}
static void test_huge_delete_race(void) {
    NEED_HAKMEM();
    size_t before = visit_count();
    for (int round = 0; round < 30; round++) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_malloc(h, 3 * MiB);
        CHECK(q != NULL);
        if (!q) return;
        pthread_t t;
        pthread_create(&t, NULL, move_huge, &q);
        if (round % 3) usleep((useconds_t)(round * 50));
        hakmem_heap_delete(h);
        pthread_join(t, NULL);
        hakmem_heap_t *h2 = hakmem_heap_new();
        hakmem_heap_stats_t st;
        CHECK(hakmem_heap_stats(h2, &st, sizeof st) == 0 && st.blocks_in_use == 0);
        hakmem_heap_destroy(h2);
        CHECK(process_has(q) == 1);
        free(q);
    }
    CHECK(visit_count() == before);
}

/* ---- misuse, one per run ---- */
static hakmem_heap_t *mh;
static void *use_heap(void *a) { (void)a; hakmem_heap_malloc(mh, 8); return NULL; }
static void *free_late(void *p) { usleep(100000); free(p); return NULL; }

static int misuse(const char *c) {
    if (!hakmem_heap_new) { printf("no hakmem\n"); return 3; }
    if (!strcmp(c, "heap_null")) {
        hakmem_heap_malloc(NULL, 8);
    } else if (!strcmp(c, "heap_null_destroy")) {
        hakmem_heap_destroy(NULL);
    } else if (!strcmp(c, "heap_destroyed")) {
        hakmem_heap_t *h = hakmem_heap_new();
        hakmem_heap_destroy(h);
        hakmem_heap_malloc(h, 8);
    } else if (!strcmp(c, "heap_destroyed_twice")) {
        hakmem_heap_t *h = hakmem_heap_new();
        hakmem_heap_destroy(h);
        hakmem_heap_destroy(h);
    } else if (!strcmp(c, "heap_deleted_visit")) {
        hakmem_heap_t *h = hakmem_heap_new();
        hakmem_heap_malloc(h, 8);
        hakmem_heap_delete(h);
        hakmem_heap_visit(h, count_cb, NULL);
    } else if (!strcmp(c, "heap_not_a_heap")) {
        static uint64_t fake[4096];
        hakmem_heap_malloc((hakmem_heap_t *)fake, 8);
    } else if (!strcmp(c, "heap_other_thread")) {
        mh = hakmem_heap_new();
        pthread_t t;
        pthread_create(&t, NULL, use_heap, NULL);
        pthread_join(t, NULL);
    } else if (!strcmp(c, "heap_destroyed_block")) {
        /* another thread holds a block of the heap and frees it after the destroy */
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_malloc(h, 100);
        pthread_t t;
        pthread_create(&t, NULL, free_late, q);
        hakmem_heap_destroy(h);
        pthread_join(t, NULL);
    } else if (!strcmp(c, "heap_destroyed_block_owner")) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_malloc(h, 40000);
        hakmem_heap_destroy(h);
        free(q);
    } else if (!strcmp(c, "heap_destroyed_huge")) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_malloc(h, 3 << 20);
        hakmem_heap_destroy(h);
        free(q);
    } else if (!strcmp(c, "heap_destroyed_huge_remote")) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_calloc(h, 1, 9 << 20);
        pthread_t t;
        pthread_create(&t, NULL, free_late, q);
        hakmem_heap_destroy(h);
        pthread_join(t, NULL);
    } else if (!strcmp(c, "heap_destroyed_huge_realloc")) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_aligned_alloc(h, 1 << 20, 3 << 20);
        hakmem_heap_destroy(h);
        q = realloc(q, 5 << 20);
    } else if (!strcmp(c, "heap_huge_double_free")) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_malloc(h, 3 << 20);
        free(q);
        free(q);
    } else if (!strcmp(c, "heap_destroyed_realloc")) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_malloc(h, 100);
        hakmem_heap_destroy(h);
        q = realloc(q, 200);
    } else if (!strcmp(c, "heap_realloc_freed")) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_malloc(h, 100);
        hakmem_heap_malloc(h, 100);
        free(q);
        hakmem_heap_realloc(h, q, 300);
    } else if (!strcmp(c, "heap_double_free")) {
        hakmem_heap_t *h = hakmem_heap_new();
        void *q = hakmem_heap_malloc(h, 100);
        hakmem_heap_malloc(h, 100);
        free(q);
        free(q);
    } else {
        fprintf(stderr, "test_heaps: unknown case '%s'\n", c);
        return 2;
    }
    printf("SURVIVED\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "misuse")) return misuse(argv[2]);
    for (int i = 1; i + 1 < argc; i++) if (!strcmp(argv[i], "-p")) chk_prefix = argv[i + 1];
    RUN_TEST(contents);
    RUN_TEST(owner_free_stats);
    RUN_TEST(visit_exact);
    RUN_TEST(cross_thread);
    RUN_TEST(destroy);
    RUN_TEST(destroy_live_elsewhere);
    RUN_TEST(delete);
    RUN_TEST(visit_process);
    RUN_TEST(huge);
    RUN_TEST(huge_delete);
    RUN_TEST(delete_race);
    RUN_TEST(huge_delete_race);
    return check_exit_code();
}
