/* test_memreturn.c -- memory return: the huge cache, the segment cache, the
 * decay, the background purger and malloc_trim (issue 12).
 *
 * usage: test_memreturn [-p PREFIX] [--expect-hakmem] [--only NAME]
 * Runs under LD_PRELOAD; tests/suite_memreturn.sh runs it under several
 * option settings, and each test looks at the HAKMEM_* variables it needs
 * (a test that only means something under other settings is skipped).
 * Contents are checked everywhere; memory return is checked with RSS from
 * /proc/self/statm against generous bounds after generous waits.  There are
 * no timing asserts.
 */
#define _GNU_SOURCE 1
#include "memreturn_util.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* ---- helpers (none of them allocates) ---- */

typedef int (*stats_get_fn)(hakmem_stats_t *, size_t);
static stats_get_fn stats_get;

static int hakmem_only(void)
{
    return owns != NULL;
}

/* Does a freed huge block stay cached long enough for a test to see it?
 * (A delay of a few ms may unmap it before the next call.) */
static int huge_cached(void)
{
    long delay = purge_delay();
    return env_long("HAKMEM_HUGE_CACHE_MB", 1) != 0 && !profile_is("lean") && (delay < 0 || delay >= 100);
}

/* ---- the huge cache ---- */

/* Huge blocks freed, taken again in other sizes (split, grown, moved),
 * realloc'ed: contents are always what was written. */
static void test_huge_reuse(void)
{
    static const size_t sizes[] = { 3 * MiB, 5 * MiB + 123, 9 * MiB, 17 * MiB - 5, 40 * MiB,
                                    2 * MiB + 1, 24 * MiB, 64 * MiB + 4096 };
    enum { N = sizeof sizes / sizeof sizes[0] };
    char *p[N] = { 0 };
    size_t n[N];
    uint64_t r = 12345;
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < N; i++) {
            if (p[i]) {
                CHECKF(intact(p[i], n[i], (uint64_t)i), "huge block %d (%zu) changed", i, n[i]);
                free(p[i]);
                p[i] = NULL;
            }
            if ((rnd(&r) & 3) == 0)
                continue;
            n[i] = sizes[(i + round + rnd(&r) % 3) % N];
            p[i] = malloc(n[i]);
            CHECK(p[i] != NULL);
            if (!p[i])
                continue;
            CHECK(((uintptr_t)p[i] & 15) == 0);
            CHECK(malloc_usable_size(p[i]) >= n[i]);
            fill(p[i], n[i], (uint64_t)i);
        }
        for (int i = 0; i < N; i += 2) {             /* realloc: grow or shrink */
            if (!p[i])
                continue;
            size_t m = sizes[(i + round * 3) % N], keep = m < n[i] ? m : n[i];
            CHECK(intact(p[i], n[i], (uint64_t)i));
            char *q = realloc(p[i], m);
            CHECK(q != NULL);
            if (!q)
                continue;
            CHECK(pat_check(q, keep, pat_seed(p[i], n[i], (uint64_t)i)) == PAT_OK);
            p[i] = q;
            n[i] = m;
            fill(q, m, (uint64_t)i);
        }
    }
    for (int i = 0; i < N; i++) {
        if (p[i])
            CHECK(intact(p[i], n[i], (uint64_t)i));
        free(p[i]);
    }
}

/* calloc of a huge block taken from the cache is zero, whatever the freed
 * block held: smaller (split), larger (grown), aligned. */
static void test_huge_calloc_zero(void)
{
    static const size_t sizes[] = { 10 * MiB, 3 * MiB, 30 * MiB, 48 * MiB, 2 * MiB + 100, 70 * MiB };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char *d = malloc(40 * MiB);
        CHECK(d != NULL);
        if (!d)
            return;
        memset(d, 0xab, 40 * MiB);
        char *e = malloc(6 * MiB);
        if (e)
            memset(e, 0xcd, 6 * MiB);
        free(d);
        free(e);
        char *z = calloc(1, sizes[k]);
        CHECK(z != NULL);
        if (z) {
            size_t off = pat_check_zero(z, sizes[k]);
            CHECKF(off == PAT_OK, "calloc(%zu) after a freed dirty huge block: byte %zu is not zero",
                   sizes[k], off);
        }
        void *a = NULL;
        CHECK(posix_memalign(&a, 8 * MiB, sizes[k]) == 0);
        if (a) {
            CHECK(((uintptr_t)a & (8 * MiB - 1)) == 0);
            memset(a, 0x5a, sizes[k]);
        }
        free(a);
        free(z);
    }
    char *g = malloc(20 * MiB);                      /* shrunk by realloc, then calloc */
    if (g) {
        memset(g, 0x77, 20 * MiB);
        g = realloc(g, 6 * MiB);
        free(g);
    }
    char *z = calloc(5, 4 * MiB);
    CHECK(z && pat_check_zero(z, 20 * MiB) == PAT_OK);
    free(z);
}

/* run fn in a child; returns its wait status; its stderr goes to err */
static void free_interior_of_freed(void *arg)
{
    (void)arg;
    char *p = malloc(12 * MiB);
    memset(p, 1, 4096);
    free(p);
    free(p + 5 * MiB);
}

/* A freed huge block sits in the cache, mapped: freeing it again is still a
 * double free, reported. */
static void test_huge_double_free(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    static const size_t sizes[] = { 3 * MiB, 16 * MiB, 40 * MiB };
    char err[4096];
    for (size_t i = 0; i < 3; i++) {
        size_t s = sizes[i];
        int st = in_child(free_twice, &s, err, sizeof err);
        CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "double free of a %zu-byte block: status %#x", s, st);
        if (huge_cached())
            CHECKF(strstr(err, "double free") != NULL, "no double-free report: %s", err);
        else
            CHECKF(strstr(err, "hakmem: free()") != NULL, "no report: %s", err);
    }
    int st = in_child(free_interior_of_freed, NULL, err, sizeof err);
    CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "free inside a freed huge block: status %#x", st);
    CHECKF(strstr(err, "hakmem: free()") != NULL, "no report: %s", err);
}

/* hakmem_owns: a cached huge mapping is hakmem's (a free block); after
 * malloc_trim(0) it is unmapped and no longer claimed. */
static void test_huge_owns(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    char *p = malloc(9 * MiB);
    CHECK(p && owns(p) && owns(p + 8 * MiB));
    free(p);
    if (huge_cached())
        CHECK(owns(p) == 1);
    malloc_trim(0);
    CHECK(owns(p) == 0);
    CHECK(owns(p + 8 * MiB) == 0);
}

/* ---- large pages (spans) ---- */

/* Blocks of every large class interleaved, freed in random order, taken
 * again, grown in place or moved by realloc: contents kept. */
static void test_large_spans(void)
{
    enum { N = 160 };
    char *p[N] = { 0 };
    size_t n[N];
    uint64_t r = 99;
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < N; i++) {
            if (p[i] && (rnd(&r) & 1)) {
                CHECKF(intact(p[i], n[i], (uint64_t)i + 7), "large block %d (%zu) changed", i, n[i]);
                free(p[i]);
                p[i] = NULL;
            }
            if (!p[i]) {
                n[i] = 64 * KiB + rnd(&r) % (2 * MiB - 64 * KiB);
                p[i] = malloc(n[i]);
                CHECK(p[i] != NULL);
                if (p[i])
                    fill(p[i], n[i], (uint64_t)i + 7);
            }
        }
        for (int i = round & 1; i < N; i += 4) {      /* grow and shrink */
            if (!p[i])
                continue;
            size_t m = n[i] + n[i] / 2 + 1;
            if (m > 2 * MiB)
                m = 65 * KiB + rnd(&r) % (256 * KiB);
            size_t keep = m < n[i] ? m : n[i];
            char *q = realloc(p[i], m);
            CHECK(q != NULL);
            if (!q)
                continue;
            CHECK(pat_check(q, keep, pat_seed(p[i], n[i], (uint64_t)i + 7)) == PAT_OK);
            p[i] = q;
            n[i] = m;
            fill(q, m, (uint64_t)i + 7);
        }
    }
    for (int i = 0; i < N; i++) {
        if (p[i])
            CHECK(intact(p[i], n[i], (uint64_t)i + 7));
        free(p[i]);
    }
}

/* ---- memory return ---- */

/* mmap'ed bookkeeping: it must not count as the allocator's */
static char **mmap_array(size_t n)
{
    void *p = mmap(NULL, n * sizeof(char *), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : (char **)p;
}

/* a mix of every kind: small, medium, large, huge; all pages written */
typedef struct mix_s {
    char **p;
    size_t *n;
    size_t count;
} mix_t;

static size_t mix_alloc(mix_t *m, size_t total, uint64_t seed)
{
    size_t cap = 1 << 20, sum = 0;
    m->p = mmap_array(cap);
    m->n = (size_t *)mmap_array(cap);
    m->count = 0;
    uint64_t r = seed | 1;
    while (sum < total && m->count < cap) {
        uint64_t v = rnd(&r), k = v % 100;
        size_t s = k < 60 ? 16 + v % 1000 : k < 85 ? 1024 + v % (63 * KiB) : k < 98 ? 64 * KiB + v % (2 * MiB)
                                                                               : 2 * MiB + v % (6 * MiB);
        char *b = malloc(s);
        if (!b)
            break;
        for (size_t o = 0; o < s; o += 4096)
            b[o] = 1;
        b[s - 1] = 2;
        m->p[m->count] = b;
        m->n[m->count++] = s;
        sum += s;
    }
    return sum;
}

static void mix_free(mix_t *m)
{
    for (size_t i = 0; i < m->count; i++)
        free(m->p[i]);
    munmap(m->p, (size_t)1 << 20 << 3);
    munmap(m->n, (size_t)1 << 20 << 3);
    m->count = 0;
}

/* malloc_trim(0) brings a program that freed everything back near where
 * it started. */
static void test_trim_returns(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    malloc_trim(0);
    long base = rss_kib();
    mix_t m;
    mix_alloc(&m, 160 * MiB, 5);
    long peak = rss_kib();
    mix_free(&m);
    malloc_trim(0);
    long after = rss_kib();
    CHECKF(after <= base + 8 * 1024, "RSS %ld KiB after malloc_trim, %ld before the blocks, %ld with them",
           after, base, peak);
}

/* malloc_trim(0) returns free slots of a segment still in use right away,
 * also when the profile purges with MADV_FREE (memreturn.speed_lazy): RSS falls. */
static void test_trim_slots_now(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    long delay = purge_delay();
    if (profile_is("lean") || (delay >= 0 && delay < 250) || env_long("HAKMEM_PURGE_BUDGET_KB", 1) == 0)
        SKIP_TEST("needs free slots that stay committed until malloc_trim");
    enum { N = 12 };
    char *p[N];
    malloc_trim(0);
    for (int i = 0; i < N; i++) {
        p[i] = malloc(200 * 1024);
        CHECK(p[i] != NULL);
        if (!p[i])
            return;
        fill(p[i], 200 * 1024, (uint64_t)i);
    }
    for (int i = 1; i < N; i++)               /* p[0] keeps the segment in the heap */
        free(p[i]);
    long before = rss_kib();
    malloc_trim(0);
    long after = rss_kib();
    CHECKF(before - after >= 1024, "RSS %ld KiB before malloc_trim, %ld after: the free slots stayed", before, after);
    CHECK(intact(p[0], 200 * 1024, 0));
    free(p[0]);
}

/* A purge spans free slots that are clean already: two dirty slots with a
 * purged one between them go back in one madvise, not two (issue 39). */
static void test_purge_spans_clean(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    long delay = purge_delay();
    if (profile_is("lean") || (delay >= 0 && delay < 250) || env_long("HAKMEM_PURGE_BUDGET_KB", 1) == 0)
        SKIP_TEST("needs free slots that stay committed until malloc_trim");
    stats_get = (stats_get_fn)hak_find_symbol("hakmem_stats_get");
    if (!stats_get)
        SKIP_TEST("no hakmem_stats_get");
    /* four 64 KiB pages of 1 KiB blocks, A B C D, in neighbouring slots of
     * one segment (fresh slots are taken in order once malloc_trim left
     * none dirty) */
    enum { PER = 64, PAGES = 4 };
    static char *b[PAGES][PER];
    malloc_trim(0);
    for (int k = 0; k < PAGES; k++)
        for (int i = 0; i < PER; i++) {
            b[k][i] = malloc(1000);
            CHECK(b[k][i] != NULL);
            if (!b[k][i]) return;
            memset(b[k][i], k + 1, 1000);
        }
    int adjacent = 1;
    for (int k = 0; k < PAGES; k++)
        for (int i = 0; i < PER; i++)
            if (((uintptr_t)b[k][i] >> 16) != ((uintptr_t)b[0][0] >> 16) + (uintptr_t)k) adjacent = 0;
    hakmem_stats_t s0, s1;
    if (adjacent) {
        for (int i = 0; i < PER; i++) free(b[1][i]);      /* B: its slot goes back, dirty */
        malloc_trim(0);                                    /* B purged */
        for (int i = 0; i < PER; i++) { free(b[0][i]); free(b[2][i]); }   /* A, C: dirty */
        stats_get(&s0, sizeof s0);
        malloc_trim(0);                                    /* A, B, C in one call */
        stats_get(&s1, sizeof s1);
    }
    for (int i = 0; i < PER; i++) CHECK(b[3][i][0] == 4 && b[3][i][999] == 4);
    for (int i = 0; i < PER; i++) free(b[3][i]);
    if (!adjacent) {
        for (int k = 0; k < 3; k++) for (int i = 0; i < PER; i++) free(b[k][i]);
        SKIP_TEST("the four pages are not in neighbouring slots");
    }
    CHECKF(s1.madvise_calls - s0.madvise_calls == 1, "%lu madvise calls for two dirty slots around a clean one",
           (unsigned long)(s1.madvise_calls - s0.madvise_calls));
}

/* A class takes a page again after one of its pages went back and stayed
 * free for the purge delay: the decay then due runs after the take, so the
 * class gets its slot back still committed (the take prefers it) and
 * writing the page faults nothing in (issue 39; before, the decay purged
 * the slot first and every OS page of it faulted again). */
static void test_due_purge_after_take(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (!profile_is("balanced") || getenv("HAKMEM_PURGE_DELAY_MS") || getenv("HAKMEM_PURGE_LAZY") ||
        env_long("HAKMEM_BACKGROUND_PURGE", 0) != 0)
        SKIP_TEST("checks the balanced profile's own decay (the purger would purge the slot while it waits)");
    enum { PER = 64 };                  /* 1 KiB blocks: a 64 KiB page */
    static char *a[PER], *b[PER], *c[PER];
    malloc_trim(0);
    for (int i = 0; i < PER; i++) { a[i] = malloc(1000); b[i] = malloc(1000); }
    for (int i = 0; i < PER; i++) { CHECK(a[i] && b[i]); if (!a[i] || !b[i]) return; memset(a[i], 1, 1000); memset(b[i], 2, 1000); }
    /* a and b each fill a page (or share two): free the page of b[PER-1] whole */
    uintptr_t slot = (uintptr_t)b[PER - 1] >> 16;
    int n = 0;
    for (int i = 0; i < PER; i++) n += (((uintptr_t)a[i] >> 16) == slot) + (((uintptr_t)b[i] >> 16) == slot);
    if (n != PER) {                     /* another page of the class holds some: not this case */
        for (int i = 0; i < PER; i++) { free(a[i]); free(b[i]); }
        SKIP_TEST("the blocks do not fill a page of their own");
    }
    for (int i = 0; i < PER; i++) {
        if (((uintptr_t)a[i] >> 16) == slot) { free(a[i]); a[i] = NULL; }
        if (((uintptr_t)b[i] >> 16) == slot) { free(b[i]); b[i] = NULL; }
    }
    sleep_ms(purge_delay() + 100);       /* the slot's decay is due */
    struct rusage u0, u1;
    getrusage(RUSAGE_SELF, &u0);
    int back = 0;
    for (int i = 0; i < PER; i++) {
        c[i] = malloc(1000);
        CHECK(c[i] != NULL);
        if (!c[i]) return;
        memset(c[i], 3, 1000);
        back += ((uintptr_t)c[i] >> 16) == slot;
    }
    getrusage(RUSAGE_SELF, &u1);
    long faults = u1.ru_minflt - u0.ru_minflt;
    CHECKF(back == PER, "%d of %d blocks back in the class's freed slot", back, PER);
    CHECKF(faults < 8, "%ld minor faults writing a page taken back from its dirty slot", faults);
    for (int i = 0; i < PER; i++) { free(a[i]); free(b[i]); free(c[i]); }
}

/* Without the purger and without malloc_trim: a program that frees
 * everything it did not reuse keeps at most the decay's floors. */
static void test_free_all_floor(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (!profile_is("balanced") || getenv("HAKMEM_PURGE_BUDGET_KB") || getenv("HAKMEM_PURGE_DELAY_MS"))
        SKIP_TEST("checks the balanced profile's defaults");
    malloc_trim(0);
    long base = rss_kib();
    mix_t m;
    mix_alloc(&m, 160 * MiB, 6);
    long peak = rss_kib();
    mix_free(&m);
    long after = rss_kib();
    /* floors: 4 MiB for the heap, 4 MiB for the caches; pages kept per class */
    CHECKF(after <= base + 24 * 1024, "RSS %ld KiB right after freeing %ld KiB (start %ld)", after, peak - base,
           base);
}

/* The huge cache keeps no more than the program would need to be back at
 * its peak of huge memory in use: when the program's huge blocks grow back
 * to that peak, a cached block is taken (a growing realloc composes with
 * it) or, if it is not, it goes (the peak cap), even though the demand
 * would keep it.  Either way RSS does not grow by the cached block. */
static void test_huge_peak_cap(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (!profile_is("balanced") || getenv("HAKMEM_PURGE_BUDGET_KB") || getenv("HAKMEM_PURGE_DELAY_MS") ||
        getenv("HAKMEM_HUGE_CACHE_MB"))
        SKIP_TEST("checks the balanced profile's defaults");
    malloc_trim(0);                              /* no demand, no peak from earlier tests */
    for (int i = 0; i < 4; i++) {                /* the demand learns a 64 MiB block */
        char *p = malloc(64 * MiB);
        CHECK(p != NULL);
        if (!p)
            return;
        fill(p, 64 * MiB, 1);
        free(p);
    }
    char *a = malloc(64 * MiB);                  /* the cached block, */
    char *c = malloc(8 * MiB);                   /* then a fresh one */
    CHECK(c != NULL && a != NULL);
    if (!c || !a)
        return;
    fill(c, 8 * MiB, 2);
    fill(a, 64 * MiB, 3);
    free(a);                                     /* cached: the program was at 72 MiB */
    long before = rss_kib();
    char *g = realloc(c, 72 * MiB);              /* back at the peak without the cache */
    CHECK(g != NULL);
    if (!g)
        return;
    CHECK(pat_check(g, 8 * MiB, pat_seed(c, 8 * MiB, 2)) == PAT_OK);
    fill(g, 72 * MiB, 4);
    long after = rss_kib();
    /* without the cap: before + 64 MiB; with it the cached 64 MiB goes */
    CHECKF(after <= before + 32 * 1024, "RSS %ld KiB after growing to the peak (was %ld KiB)", after, before);
    CHECK(intact(g, 72 * MiB, 4));
    free(g);
    malloc_trim(0);
}

/* minor page faults so far */
static long minflt(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static int balanced_defaults(void)
{
    return profile_is("balanced") && !getenv("HAKMEM_PURGE_BUDGET_KB") && !getenv("HAKMEM_PURGE_DELAY_MS") &&
           !getenv("HAKMEM_HUGE_CACHE_MB");
}

/* The huge block freed last is spared by the demand limit until the next
 * huge request, while the program has other huge blocks in use: right
 * after malloc_trim(0) (no demand learned), a block freed and asked for
 * again is taken back warm, not faulted in again.  A program that frees
 * its last huge block gets no grace: the block goes at once. */
static void test_huge_grace(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (!balanced_defaults())
        SKIP_TEST("checks the balanced profile's defaults");
    malloc_trim(0);
    char *a = malloc(32 * MiB);
    CHECK(a != NULL);
    if (!a)
        return;
    fill(a, 32 * MiB, 3);
    long before = rss_kib();
    free(a);                                     /* the only huge block */
    long after = rss_kib();
    CHECKF(before - after >= 24 * 1024, "RSS %ld KiB after freeing the only huge block (32 MiB), %ld before",
           after, before);
    malloc_trim(0);
    char *keep = malloc(3 * MiB);                /* a huge block in use */
    char *p = malloc(32 * MiB);
    CHECK(p != NULL && keep != NULL);
    if (!p || !keep)
        return;
    fill(keep, 3 * MiB, 4);
    fill(p, 32 * MiB, 1);
    free(p);
    long f0 = minflt();
    char *q = malloc(32 * MiB);
    CHECK(q != NULL);
    if (!q)
        return;
    fill(q, 32 * MiB, 2);
    long faults = minflt() - f0;
    /* 8,192 pages: all of them again if the free had unmapped the block */
    CHECKF(faults < 1024, "%ld faults writing a 32 MiB block just freed and taken again", faults);
    CHECK(intact(q, 32 * MiB, 2));
    CHECK(intact(keep, 3 * MiB, 4));
    free(q);
    free(keep);
    malloc_trim(0);
}

static void grow_in_child(void *arg)
{
    char *q = arg;
    char *r = realloc(q, 64 * MiB);
    if (!r || pat_check(r, 8 * MiB, pat_seed(q, 8 * MiB, 5)) != PAT_OK)
        _exit(3);
    fill(r, 64 * MiB, 6);
    _exit(intact(r, 64 * MiB, 6) ? 0 : 4);
}

/* realloc of a huge block moves no byte and faults in no page the cache
 * holds: a shrink gives the units it no longer reaches to the cache, and a
 * growth takes them back in place, or takes another cached block's pages
 * (moved behind its own).  Contents kept; malloc_trim(0) returns it all;
 * a forked child grows into the cached memory too. */
static void test_huge_realloc_cached(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (!balanced_defaults())
        SKIP_TEST("checks the balanced profile's defaults");
    malloc_trim(0);
    long base = rss_kib();
    char *p = malloc(64 * MiB);
    CHECK(p != NULL);
    if (!p)
        return;
    fill(p, 64 * MiB, 5);
    char *q = realloc(p, 8 * MiB);                /* shrink: 56 MiB to the cache */
    CHECK(q == p);
    CHECK(pat_check(q, 8 * MiB, pat_seed(p, 64 * MiB, 5)) == PAT_OK);
    fill(q, 8 * MiB, 5);
    long f0 = minflt();
    char *r = realloc(q, 64 * MiB);               /* grow back: the cached units after it */
    CHECK(r != NULL);
    if (!r)
        return;
    CHECK(pat_check(r, 8 * MiB, pat_seed(q, 8 * MiB, 5)) == PAT_OK);
    fill(r, 64 * MiB, 7);
    long faults = minflt() - f0;
    CHECKF(faults < 2048, "%ld faults growing a huge block into its own cached tail (16,384 pages)", faults);
    CHECK(r == q);                                /* in place: nothing moved */

    char *a = malloc(48 * MiB), *c = malloc(8 * MiB);
    CHECK(a != NULL && c != NULL);
    if (!a || !c)
        return;
    fill(a, 48 * MiB, 8);
    fill(c, 8 * MiB, 9);
    free(a);                                      /* cached */
    f0 = minflt();
    char *g = realloc(c, 56 * MiB);               /* a's pages move in behind c's */
    CHECK(g != NULL);
    if (!g)
        return;
    CHECK(pat_check(g, 8 * MiB, pat_seed(c, 8 * MiB, 9)) == PAT_OK);
    fill(g, 56 * MiB, 10);
    faults = minflt() - f0;
    CHECKF(faults < 2048, "%ld faults growing a huge block with a cached one (14,336 pages)", faults);
    CHECK(intact(g, 56 * MiB, 10));
    CHECK(intact(r, 64 * MiB, 7));
    char *t = realloc(r, 8 * MiB);                /* (after the fault counts: a fork makes
                                                     every page copy-on-write) */
    CHECK(t == r && pat_check(t, 8 * MiB, pat_seed(r, 64 * MiB, 7)) == PAT_OK);
    fill(t, 8 * MiB, 5);
    char err[256];
    int st = in_child(grow_in_child, t, err, sizeof err);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child growing into the cache: status %#x %s", st, err);
    CHECK(intact(t, 8 * MiB, 5));
    free(t);
    free(g);
    malloc_trim(0);
    long after = rss_kib();
    CHECKF(after <= base + 8 * 1024, "RSS %ld KiB after free and malloc_trim, %ld before", after, base);
}

/* a thread that frees what it allocated, then stays alive and idle */
typedef struct idler_s {
    size_t bytes;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stage;              /* 1: freed everything; 2: may exit */
} idler_t;

static void *idler(void *arg)
{
    idler_t *t = arg;
    mix_t m;
    mix_alloc(&m, t->bytes, 11);
    mix_free(&m);
    pthread_mutex_lock(&t->lock);
    t->stage = 1;
    pthread_cond_broadcast(&t->cond);
    while (t->stage != 2)
        pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void idler_start(idler_t *t, pthread_t *tid, size_t bytes)
{
    memset(t, 0, sizeof *t);
    t->bytes = bytes;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    pthread_create(tid, NULL, idler, t);
    pthread_mutex_lock(&t->lock);
    while (t->stage != 1)
        pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

static void idler_stop(idler_t *t, pthread_t tid)
{
    pthread_mutex_lock(&t->lock);
    t->stage = 2;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(tid, NULL);
}

/* malloc_trim(0) in one thread purges what another, live thread freed. */
static void test_trim_reaches_threads(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (env_long("HAKMEM_PURGE_DELAY_MS", 0) != -1 || env_long("HAKMEM_PURGE_BUDGET_KB", 0) != -1)
        SKIP_TEST("needs HAKMEM_PURGE_DELAY_MS=-1 HAKMEM_PURGE_BUDGET_KB=-1 (nothing purged on its own)");
    malloc_trim(0);
    long base = rss_kib();
    idler_t t;
    pthread_t tid;
    idler_start(&t, &tid, 96 * MiB);
    long before = rss_kib();
    malloc_trim(0);
    long after = rss_kib();
    CHECKF(before - base > 48 * 1024, "the thread's freed memory was not kept: %ld KiB over %ld", before - base,
           base);
    CHECKF(after <= base + 16 * 1024, "malloc_trim left %ld KiB of another thread's %ld (start %ld)",
           after - base, before - base, base);
    idler_stop(&t, tid);
}

/* The background purger returns an idle thread's free memory, and the
 * caches', while no thread calls the allocator. */
static void test_purger_idle(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    long delay = purge_delay();
    if (!purger_testable(delay))
        SKIP_TEST("needs HAKMEM_BACKGROUND_PURGE=1, a delay of 1..1000 ms, MADV_DONTNEED");
    malloc_trim(0);
    long base = rss_kib();
    idler_t t;
    pthread_t tid;
    idler_start(&t, &tid, 96 * MiB);
    long before = rss_kib();
    long after = before;
    for (int i = 0; i < 40 && after > base + 16 * 1024; i++) {   /* up to 40 delays */
        sleep_ms(delay);
        after = rss_kib();
    }
    CHECKF(after <= base + 16 * 1024, "idle: RSS %ld KiB over the start after %ld ms (%ld before)",
           after - base, 40 * delay, before - base);
    idler_stop(&t, tid);
}

#include "memreturn_medium.h"

/* ---- threads that come and go ---- */

typedef struct churn_s {
    char **give;            /* blocks for the next thread to free */
    size_t ngive;
    uint64_t seed;
} churn_t;

static void *churner(void *arg)
{
    churn_t *c = arg;
    for (size_t i = 0; i < c->ngive; i++)        /* the previous thread's blocks */
        free(c->give[i]);
    c->ngive = 0;
    uint64_t r = c->seed;
    char *mine[600];
    size_t n = 0;
    for (int i = 0; i < 600; i++) {
        uint64_t v = rnd(&r), k = v % 100;
        size_t s = k < 60 ? 16 + v % 240 : k < 85 ? 256 + v % 3840 : k < 96 ? 4 * KiB + v % (60 * KiB)
                                                                         : 64 * KiB + v % (448 * KiB);
        char *b = malloc(s);
        if (!b)
            continue;
        for (size_t o = 0; o < s; o += 4096)
            b[o] = 1;
        mine[n++] = b;
    }
    for (size_t i = 0; i < n; i++) {             /* most freed here, 1 in 8 by the next thread */
        if (i % 8 == 0)
            c->give[c->ngive++] = mine[i];
        else
            free(mine[i]);
    }
    return NULL;
}

/* Threads come and go, each using a few MiB: after the first rounds their
 * memory is reused, not mapped, unmapped and faulted in again each round. */
static void test_thread_churn_reuse(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (!profile_is("balanced") || getenv("HAKMEM_SEGMENT_CACHE") || getenv("HAKMEM_PURGE_DELAY_MS"))
        SKIP_TEST("checks the balanced profile's defaults");
    stats_get = (stats_get_fn)hak_find_symbol("hakmem_stats_get");
    if (!stats_get)
        SKIP_TEST("no hakmem_stats_get");
    static char *give[2][600];
    churn_t c[2] = { { give[0], 0, 1 }, { give[1], 0, 2 } };
    hakmem_stats_t s0, s1;
    struct rusage u0, u1;
    long rounds = 120, warm = 20;
    for (long r = 0; r < rounds; r++) {
        if (r == warm) {
            stats_get(&s0, sizeof s0);
            getrusage(RUSAGE_SELF, &u0);
        }
        pthread_t t[2];
        for (int i = 0; i < 2; i++) {
            c[i].seed = (uint64_t)(r * 2 + i + 1) * 0x9e3779b97f4a7c15ULL;
            pthread_create(&t[i], NULL, churner, &c[i]);
        }
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    }
    stats_get(&s1, sizeof s1);
    getrusage(RUSAGE_SELF, &u1);
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < c[i].ngive; k++)
            free(c[i].give[k]);
    uint64_t maps = s1.mmap_calls - s0.mmap_calls, unmaps = s1.munmap_calls - s0.munmap_calls;
    long faults = u1.ru_minflt - u0.ru_minflt;
    /* each round's threads write ~2 x 3 MiB: ~1,500 pages; thread stacks
     * and the kernel's own bookkeeping fault too (a few dozen a round) */
    CHECKF(maps + unmaps <= 2 * (uint64_t)(rounds - warm) / 10,
           "%lu mmap and %lu munmap calls in %ld rounds of thread churn", (unsigned long)maps,
           (unsigned long)unmaps, rounds - warm);
    CHECKF(faults <= 300 * (rounds - warm), "%ld minor faults in %ld rounds (%ld a round)", faults,
           rounds - warm, faults / (rounds - warm));
}

/* ---- where freed memory is taken again ---- */

/* Is committed free memory still there a moment after it was freed?  (lean,
 * or a delay of 0, purges it at once: nothing to prefer then.) */
static int slots_stay_dirty(void)
{
    long delay = purge_delay();
    return !profile_is("lean") && (delay < 0 || delay >= 100) && env_long("HAKMEM_PURGE_BUDGET_KB", 1) != 0;
}

/* A class that gives its page back and takes one again, while the slot is
 * still committed, gets its old slot back: its blocks lie where they lay and
 * touch no OS page the last tenure did not (a page of another class there
 * would put its links elsewhere).  Two medium classes of one kind (20 and
 * 24 KiB blocks, 512 KiB pages) each fill five pages and free them: a
 * medium class keeps up to three empty pages on its heap's kept list (hak_page_retire)
 * and gives the others' slots back.  Taken back in the other order, every
 * block of each class must land where a block of that class lay (the kept
 * pages, then its own old slots), contents intact.  (Large pages keep best
 * fit: see docs/design.md.) */
static int was_at(char *const *old, int n, const char *p)
{
    for (int i = 0; i < n; i++)
        if (old[i] == p)
            return 1;
    return 0;
}

static void test_slot_same_class(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (!slots_stay_dirty())
        SKIP_TEST("freed slots are purged at once under these settings");
    size_t na = 20 * KiB, nb = 24 * KiB;
    /* a third class of the kind keeps the segment in use (its page is not
     * one of those tested) */
    char *pin = malloc(28 * KiB);
    CHECK(pin != NULL);
    enum { KA = 60, KB = 50 };       /* five pages each: 12 blocks of 20 KiB, 10 of 24 KiB a page */
    char *a[KA], *b[KB], *a1[KA], *b1[KB];
    for (int i = 0; i < KA; i++) { a[i] = malloc(na); CHECK(a[i] != NULL); fill(a[i], na, (uint64_t)i); }
    for (int i = 0; i < KB; i++) { b[i] = malloc(nb); CHECK(b[i] != NULL); fill(b[i], nb, (uint64_t)i + 100); }
    for (int i = 0; i < KA; i++) { CHECK(intact(a[i], na, (uint64_t)i)); free(a[i]); }
    for (int i = 0; i < KB; i++) { CHECK(intact(b[i], nb, (uint64_t)i + 100)); free(b[i]); }
    int b_moved = 0, a_moved = 0;
    for (int i = 0; i < KB; i++) {              /* the other order: b's class asks first */
        b1[i] = malloc(nb);
        CHECK(b1[i] != NULL);
        if (!was_at(b, KB, b1[i]) && b_moved++ == 0)
            CHECKF(0, "class of %zu B: block %d at %p, where none of its blocks lay", nb, i, (void *)b1[i]);
    }
    for (int i = 0; i < KA; i++) {
        a1[i] = malloc(na);
        CHECK(a1[i] != NULL);
        if (!was_at(a, KA, a1[i]) && a_moved++ == 0)
            CHECKF(0, "class of %zu B: block %d at %p, where none of its blocks lay", na, i, (void *)a1[i]);
    }
    for (int i = 0; i < KB; i++) fill(b1[i], nb, (uint64_t)i + 2);
    for (int i = 0; i < KA; i++) fill(a1[i], na, (uint64_t)i + 1);
    for (int i = 0; i < KB; i++) { CHECK(intact(b1[i], nb, (uint64_t)i + 2)); free(b1[i]); }
    for (int i = 0; i < KA; i++) { CHECK(intact(a1[i], na, (uint64_t)i + 1)); free(a1[i]); }
    free(pin);
}

/* A new thread takes the heap given up longest ago, not the one given up a
 * moment ago (whose blocks its partners have not freed yet): t1 and t2 run
 * at once, each keeps a block; t1 exits first, then t2; t3's first block
 * must not come from t2's heap (and, in a process of its own, comes from
 * t1's).  Contents stay intact across the hand-overs. */
typedef struct adopt_s {
    pthread_barrier_t *start;
    sem_t *go;
    char *p;
} adopt_t;

static void *adopt_thread(void *arg)
{
    adopt_t *a = arg;
    a->p = malloc(3000);
    if (a->p)
        fill(a->p, 3000, 5);
    if (a->start)
        pthread_barrier_wait(a->start);
    if (a->go)
        sem_wait(a->go);
    return NULL;
}

static void test_adopt_oldest(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    pthread_barrier_t start;
    sem_t go1, go2;
    pthread_barrier_init(&start, NULL, 3);
    sem_init(&go1, 0, 0);
    sem_init(&go2, 0, 0);
    adopt_t a1 = { &start, &go1, NULL }, a2 = { &start, &go2, NULL }, a3 = { NULL, NULL, NULL };
    pthread_t t1, t2, t3;
    pthread_create(&t1, NULL, adopt_thread, &a1);
    pthread_create(&t2, NULL, adopt_thread, &a2);
    pthread_barrier_wait(&start);           /* both hold a heap and a block */
    sem_post(&go1);
    pthread_join(t1, NULL);                 /* t1's heap is given up first */
    sem_post(&go2);
    pthread_join(t2, NULL);
    pthread_create(&t3, NULL, adopt_thread, &a3);
    pthread_join(t3, NULL);
    CHECK(a1.p && a2.p && a3.p);
    uintptr_t s1 = (uintptr_t)a1.p >> 22, s2 = (uintptr_t)a2.p >> 22, s3 = (uintptr_t)a3.p >> 22;
    CHECK(s1 != s2);                        /* two heaps, two segments */
    CHECKF(s3 != s2, "the new thread took the heap given up last (block %p next to %p)", (void *)a3.p,
           (void *)a2.p);
    if (only && !strcmp(only, "adopt_oldest"))
        CHECKF(s3 == s1, "the new thread did not take the heap given up first (block %p, first heap's %p)",
               (void *)a3.p, (void *)a1.p);
    CHECK(intact(a1.p, 3000, 5) && intact(a2.p, 3000, 5) && intact(a3.p, 3000, 5));
    free(a1.p);
    free(a2.p);
    free(a3.p);
    pthread_barrier_destroy(&start);
    sem_destroy(&go1);
    sem_destroy(&go2);
}

/* ---- fork while the purger runs ---- */

static atomic_int stop_workers;

static void *worker(void *arg)
{
    uint64_t r = (uint64_t)(uintptr_t)arg * 7919 + 1;
    char *slot[64] = { 0 };
    size_t n[64];
    while (!atomic_load(&stop_workers)) {
        int i = (int)(rnd(&r) % 64);
        if (slot[i]) {
            if (!intact(slot[i], n[i], (uint64_t)i))
                chk_failf(__FILE__, __LINE__, "worker block intact", "block changed");
            free(slot[i]);
            slot[i] = NULL;
        } else {
            uint64_t v = rnd(&r);
            n[i] = v % 10 == 0 ? 64 * KiB + v % (3 * MiB) : 16 + v % 16000;
            slot[i] = malloc(n[i]);
            if (slot[i])
                fill(slot[i], n[i], (uint64_t)i);
        }
    }
    for (int i = 0; i < 64; i++)
        free(slot[i]);
    return NULL;
}

static void child_work(void)
{
    mix_t m;
    mix_alloc(&m, 24 * MiB, (uint64_t)getpid());
    for (size_t i = 0; i < m.count; i++)
        if (m.p[i][0] != 1)
            _exit(3);
    mix_free(&m);
    char *h = calloc(1, 12 * MiB);
    if (!h || pat_check_zero(h, 12 * MiB) != PAT_OK)
        _exit(4);
    free(h);
    sleep_ms(30);                     /* time for the child's own purger to start and run */
    malloc_trim(0);
    void *x = malloc(100);
    free(x);
    _exit(0);
}

/* fork while threads allocate and the purger purges: every child allocates,
 * frees, trims and exits cleanly. */
static void test_fork_with_purger(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    pthread_t t[2];
    atomic_store(&stop_workers, 0);
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int k = 0; k < 24; k++) {
        mix_t m;
        mix_alloc(&m, 4 * MiB, (uint64_t)k + 100);    /* and free: work for the purger */
        mix_free(&m);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(60);
            child_work();
        }
        CHECK(pid > 0);
        if (pid <= 0)
            continue;
        int st = 0;
        waitpid(pid, &st, 0);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", k, st);
        sleep_ms(k % 3 * 5);
    }
    atomic_store(&stop_workers, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
    int rc = test_start(argc, argv);
    if (rc)
        return rc;
    RUN(huge_reuse);
    RUN(huge_calloc_zero);
    RUN(huge_double_free);
    RUN(huge_owns);
    RUN(large_spans);
    RUN(trim_returns);
    RUN(trim_slots_now);
    RUN(free_all_floor);
    RUN(purge_spans_clean);
    RUN(due_purge_after_take);
    RUN(huge_peak_cap);
    RUN(huge_grace);
    RUN(huge_realloc_cached);
    RUN(medium_steady);
    RUN(medium_kept_double_free);
    RUN(medium_kept_trim);
    RUN(medium_kept_aged);
    RUN(medium_kept_lifo);
    RUN(medium_carve_one);
    RUN(trim_reaches_threads);
    RUN(purger_idle);
    RUN(medium_kept_trim_thread);
    RUN(medium_kept_purger);
    RUN(thread_churn_reuse);
    RUN(slot_same_class);
    RUN(adopt_oldest);
    RUN(fork_with_purger);
    return check_exit_code();
}
