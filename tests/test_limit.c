/* test_limit.c -- the soft memory limit (HAKMEM_MEMORY_LIMIT,
 * hakmem_memory_limit_*; src/hak_limit.c), run by tests/suite_limit.sh.
 *
 * usage: test_limit [-p PREFIX] [-t TEST]          the unit tests, under LD_PRELOAD
 *                                                  with HAKMEM_PURGE_DELAY_MS=-1
 *        test_limit --print                        "limit N": the limit in effect
 *        test_limit --cgroup-expect BYTES [-p P]   the cgroup's limit was read
 *        test_limit --churn MIB                    the churn program (below)
 *
 * The unit tests run with HAKMEM_PURGE_DELAY_MS=-1: nothing is purged on its
 * own, so whatever goes back goes back because of the limit.
 *   estimate     hakmem's resident estimate follows RSS through small,
 *                medium and large blocks, malloc_trim and huge blocks (a
 *                3 MiB one in use and cached: the hardened build's no-access
 *                end after it does not count)
 *   hysteresis   the pressure starts above 90 % (everything free goes back),
 *                ends below 80 %, and between the two marks stays as it was:
 *                from below, nothing is returned; from above, every free
 *                returns its emptied pages
 *   never_fails  under a 1 MiB limit 48 MiB of small to huge blocks, calloc
 *                and realloc (4 threads, remote frees) are all served, intact
 *
 * The churn program: phases of six block sizes (1000 B, 24 KiB, 400 KiB,
 * 3 MiB, 3000 B, 100 KiB), each allocated up to MIB MiB live, written,
 * freed, three times; the live set never exceeds MIB MiB, but hakmem's
 * caches (the decay learns that each phase reuses its memory) keep the
 * phases' memory: about 110 MiB resident at the end for MIB 40 under the
 * default profile.  It prints its peak RSS and SURVIVED when done. */
#define _GNU_SOURCE 1
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pattern.h"
#include "testutil.h"
#include "../include/hakmem.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

typedef int (*lim_get_fn)(hakmem_memory_limit_t *, size_t);
typedef int (*lim_set_fn)(size_t);
typedef int (*lim_refresh_fn)(void);
typedef const char *(*variant_fn)(void);
static lim_get_fn lim_get;
static lim_set_fn lim_set;
static lim_refresh_fn lim_refresh;
static variant_fn build_variant;

static void lim_find(void)
{
#ifdef HAK_PREFIX_BUILD
    lim_get = hakmem_memory_limit_get;
    lim_set = hakmem_memory_limit_set;
    lim_refresh = hakmem_memory_limit_refresh;
    build_variant = hakmem_build_variant;
#else
    lim_get = (lim_get_fn)dlsym(RTLD_DEFAULT, "hakmem_memory_limit_get");
    lim_set = (lim_set_fn)dlsym(RTLD_DEFAULT, "hakmem_memory_limit_set");
    lim_refresh = (lim_refresh_fn)dlsym(RTLD_DEFAULT, "hakmem_memory_limit_refresh");
    build_variant = (variant_fn)dlsym(RTLD_DEFAULT, "hakmem_build_variant");
#endif
}

static hakmem_memory_limit_t lim(void)
{
    hakmem_memory_limit_t s;
    memset(&s, 0, sizeof s);
    lim_get(&s, sizeof s);
    return s;
}

static long est_kib(void) { return (long)(lim().resident >> 10); }

/* the hardened build: a huge block's mapping has 1 MiB and more of
 * no-access memory after the block, which the estimate does not count */
static int hardened(void) { return build_variant && strcmp(build_variant(), "hardened") == 0; }

/* the blocks a test holds (no allocation for the bookkeeping) */
#define MAXB (1 << 17)
static void *blk[MAXB];
static size_t blk_size[MAXB];
static size_t nblk;

/* one byte a page and the last: every page resident */
static void touch(void *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4096)
        ((volatile char *)p)[i] = 1;
    ((volatile char *)p)[n - 1] = 1;
}

/* size-byte blocks up to bytes more (or as many as fit) */
static size_t alloc_bytes(size_t size, size_t bytes)
{
    size_t got = 0;
    while (got < bytes && nblk < MAXB) {
        void *p = malloc(size);
        CHECK(p != NULL);
        if (!p)
            break;
        touch(p, size);
        blk[nblk] = p;
        blk_size[nblk++] = size;
        got += size;
    }
    return got;
}

/* free the newest blocks, bytes of them at least (all with SIZE_MAX) */
static size_t free_bytes(size_t bytes)
{
    size_t got = 0;
    while (got < bytes && nblk > 0) {
        nblk--;
        got += blk_size[nblk];
        free(blk[nblk]);
    }
    return got;
}

static int need_hakmem(void)
{
    if (lim_get && lim_set)
        return 1;
    CHECKF(chk_expect_hakmem != 1, "hakmem_memory_limit_get/_set not found");
    return 0;
}

/* a comment line with the figures of a step */
static void note(const char *step)
{
    hakmem_memory_limit_t s = lim();
    printf("# %s.%s %s: resident %zu KiB (RSS %ld KiB), pressing %d, pressures %lu, returns %lu\n", chk_prefix,
           chk_name, step, s.resident >> 10, rss_kib(), s.pressing, (unsigned long)s.pressures,
           (unsigned long)s.returns);
}

static long labs_l(long x) { return x < 0 ? -x : x; }

/* ---- estimate ---- */

/* the estimate's change against RSS's: within a tenth and 3 MiB */
static void close_to(const char *what, long d_est, long d_rss)
{
    long slack = labs_l(d_rss) / 10 + 3 * 1024;
    CHECKF(labs_l(d_est - d_rss) <= slack, "%s: estimate moved %ld KiB, RSS %ld KiB", what, d_est, d_rss);
}

static void test_estimate(void)
{
    if (!need_hakmem())
        SKIP_TEST("not hakmem");
    if (rss_kib() < 0)
        SKIP_TEST("no /proc/self/statm");
    malloc_trim(0);
    long r0 = rss_kib(), e0 = est_kib();
    static const size_t sizes[] = { 1000, 24 * KiB, 400 * KiB };
    for (int k = 0; k < 3; k++) {
        alloc_bytes(sizes[k], 24 * MiB);
        char what[64];
        snprintf(what, sizeof what, "24 MiB of %zu-byte blocks", sizes[k]);
        close_to(what, est_kib() - e0, rss_kib() - r0);
        free_bytes(SIZE_MAX);
        snprintf(what, sizeof what, "%zu-byte blocks freed (kept: delay -1)", sizes[k]);
        close_to(what, est_kib() - e0, rss_kib() - r0);
    }
    long r1 = rss_kib(), e1 = est_kib();
    malloc_trim(0);
    close_to("malloc_trim", est_kib() - e1, rss_kib() - r1);
    const char *d = getenv("HAKMEM_PURGE_DELAY_MS");
    if (d && !strcmp(d, "-1"))   /* (else the decay may have returned it before) */
        CHECKF(r1 - rss_kib() > 16 * 1024, "malloc_trim returned %ld KiB of RSS", r1 - rss_kib());
    /* a huge block: counted whole (its mapping), written whole here */
    e1 = est_kib(), r1 = rss_kib();
    void *h = malloc(12 * MiB);
    CHECK(h != NULL);
    if (h) {
        memset(h, 1, 12 * MiB);
        close_to("a 12 MiB block", est_kib() - e1, rss_kib() - r1);
        free(h);
    }
    malloc_trim(0);
    /* a 3 MiB block, written whole: a 4 MiB mapping (8 MiB in the hardened
     * build, whose no-access end does not count), and cached (delay -1) */
    e1 = est_kib(), r1 = rss_kib();
    h = malloc(3 * MiB);
    CHECK(h != NULL);
    if (h) {
        memset(h, 1, 3 * MiB);
        close_to("a 3 MiB block", est_kib() - e1, rss_kib() - r1);
        free(h);
        if (d && !strcmp(d, "-1"))
            close_to("a 3 MiB block freed (cached: delay -1)", est_kib() - e1, rss_kib() - r1);
    }
    malloc_trim(0);
}

/* ---- hysteresis ---- */

static void test_hysteresis(void)
{
    if (!need_hakmem())
        SKIP_TEST("not hakmem");
    const char *d = getenv("HAKMEM_PURGE_DELAY_MS");
    if (!d || strcmp(d, "-1") != 0)
        SKIP_TEST("needs HAKMEM_PURGE_DELAY_MS=-1 (nothing purged but by the limit)");
    const size_t L = 64 * MiB;
    malloc_trim(0);
    lim_set(0);
    hakmem_memory_limit_t s0 = lim();
    CHECK(s0.limit == 0 && s0.pressing == 0);
    CHECKF(s0.resident < 8 * MiB, "resident %zu KiB before the test", s0.resident >> 10);
    lim_set(L);
    hakmem_memory_limit_t s = lim();
    CHECK(s.limit == L && s.high == L - L / 10 && s.low == L - L / 5 && s.pressing == 0);
    uint64_t p0 = s.pressures, ret0 = s.returns;

    /* 1. 36 MiB of huge blocks (48 MiB of mappings; 96 MiB in the hardened
     * build, half of it no-access, which the estimate does not count),
     * freed: cached (delay -1), below the marks (huge mappings, which no
     * page of the medium blocks below can reuse) */
    alloc_bytes(3 * MiB, 36 * MiB);
    free_bytes(SIZE_MAX);
    s = lim();
    note("step 1");
    if (hardened())
        CHECKF(s.resident >= 36 * MiB && s.resident < 40 * MiB, "1: resident %zu KiB", s.resident >> 10);
    else
        CHECKF(s.resident >= 48 * MiB, "1: resident %zu KiB", s.resident >> 10);
    CHECKF(s.resident < s.high, "1: resident %zu KiB", s.resident >> 10);
    CHECK(s.pressing == 0 && s.pressures == p0);

    /* 2. medium blocks until the pressure starts: the huge cache goes back,
     * the estimate falls below the low mark, the pressure ends at once */
    long rss_before = rss_kib();
    size_t live = 0;
    while (lim().pressures == p0 && live < 64 * MiB)
        live += alloc_bytes(24 * KiB, 24 * KiB);
    s = lim();
    note("step 2");
    CHECKF(s.pressures == p0 + 1 && s.returns >= ret0 + 1, "2: pressures %lu returns %lu",
           (unsigned long)(s.pressures - p0), (unsigned long)(s.returns - ret0));
    CHECKF(live < 24 * MiB, "2: the pressure started with %zu KiB live", live >> 10);
    CHECKF(s.resident < s.low && s.pressing == 0, "2: resident %zu KiB, pressing %d", s.resident >> 10, s.pressing);
    /* RSS: the 36 MiB of huge blocks went, the medium blocks came */
    CHECKF(rss_kib() < rss_before - 36 * 1024 + (long)(live >> 10) + 4 * 1024, "2: RSS %ld KiB, was %ld, %zu KiB live",
           rss_kib(), rss_before, live >> 10);

    /* 3. from below, between the marks: no pressure, nothing returned */
    while (lim().resident < L - L / 7 && nblk < MAXB)
        alloc_bytes(24 * KiB, 24 * KiB);
    s = lim();
    note("step 3");
    CHECKF(s.resident > s.low && s.resident <= s.high && s.pressing == 0 && s.pressures == p0 + 1,
           "3: resident %zu KiB, pressing %d", s.resident >> 10, s.pressing);

    /* 4. above the high mark: the pressure starts again; the live set holds
     * it up (nothing free to give) */
    while (lim().resident <= L - L / 10 + 2 * MiB && nblk < MAXB)
        alloc_bytes(24 * KiB, 24 * KiB);
    s = lim();
    note("step 4");
    CHECKF(s.pressures == p0 + 2 && s.pressing == 1, "4: pressures %lu, pressing %d",
           (unsigned long)(s.pressures - p0), s.pressing);

    /* 5. from above, between the marks: still pressing, and each free
     * returns its emptied pages (delay -1 would keep them) */
    size_t before = s.resident;
    size_t freed = free_bytes(5 * MiB);
    s = lim();
    note("step 5");
    CHECKF(s.pressing == 1 && s.resident > s.low, "5: resident %zu KiB, pressing %d", s.resident >> 10, s.pressing);
    CHECKF(before - s.resident > freed - freed / 5, "5: freed %zu KiB, resident fell %zu KiB", freed >> 10,
           (before - s.resident) >> 10);

    /* 6. below the low mark: the pressure ends */
    while (lim().resident >= L - L / 5 && nblk > 0)
        free_bytes(24 * KiB);
    s = lim();
    note("step 6");
    CHECKF(s.pressing == 0 && s.resident < s.low, "6: resident %zu KiB, pressing %d", s.resident >> 10, s.pressing);

    /* 7. no pressure: frees keep their pages again (delay -1) */
    before = s.resident;
    freed = free_bytes(8 * MiB);
    s = lim();
    note("step 7");
    CHECKF(s.resident + freed / 4 > before, "7: freed %zu KiB, resident fell %zu KiB", freed >> 10,
           (before - s.resident) >> 10);
    CHECK(s.pressing == 0 && s.pressures == p0 + 2);

    free_bytes(SIZE_MAX);
    lim_set(0);
    malloc_trim(0);
}

/* ---- never fails ---- */

static const size_t mix[] = { 16, 200, 1000, 3000, 8 * KiB, 24 * KiB, 100 * KiB, 400 * KiB, 3 * MiB, 5 * MiB + 77 };
#define NMIX (sizeof mix / sizeof mix[0])

typedef struct {
    int id;
    void **slots;
    size_t *sizes;
    size_t n;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    uint64_t r = 0x9e3779b9u + (uint64_t)w->id;
    size_t live = 0;
    for (int round = 0; round < 4000; round++) {
        size_t i = rnd(&r) % w->n;
        if (w->slots[i]) {
            CHECKF(pat_check(w->slots[i], w->sizes[i], pat_seed(w->slots[i], w->sizes[i], (uint64_t)i)) == PAT_OK,
                   "thread %d: block %zu (%zu bytes) changed", w->id, i, w->sizes[i]);
            live -= w->sizes[i];
            free(w->slots[i]);
            w->slots[i] = NULL;
        }
        size_t n = mix[rnd(&r) % NMIX];
        if (live + n > 12 * MiB)
            continue;
        void *p;
        int how = (int)(rnd(&r) % 3);
        if (how == 0) {
            p = calloc(1, n);
            CHECKF(p != NULL, "calloc(%zu) failed", n);
            if (p)
                for (size_t k = 0; k < n; k += 4096)
                    CHECKF(((char *)p)[k] == 0, "calloc(%zu) not zero at %zu", n, k);
        } else if (how == 1) {
            p = malloc(n / 2 + 1);
            CHECKF(p != NULL, "malloc(%zu) failed", n / 2 + 1);
            if (p) {
                memset(p, 0x5a, n / 2 + 1);
                void *q = realloc(p, n);
                CHECKF(q != NULL, "realloc to %zu failed", n);
                if (q) {
                    CHECKF(((unsigned char *)q)[n / 2] == 0x5a, "realloc lost contents");
                    p = q;
                }
            }
        } else {
            p = malloc(n);
            CHECKF(p != NULL, "malloc(%zu) failed", n);
        }
        if (!p)
            continue;
        pat_fill(p, n, pat_seed(p, n, (uint64_t)i));
        w->slots[i] = p;
        w->sizes[i] = n;
        live += n;
    }
    return NULL;
}

static void test_never_fails(void)
{
    if (!need_hakmem())
        SKIP_TEST("not hakmem");
    malloc_trim(0);
    lim_set(1 * MiB);
    enum { T = 4, N = 256 };
    static void *slots[T][N];
    static size_t sizes[T][N];
    worker_t w[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        w[t] = (worker_t){ t, slots[t], sizes[t], N };
        CHECK(pthread_create(&th[t], NULL, worker, &w[t]) == 0);
    }
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    hakmem_memory_limit_t s = lim();
    note("threads joined");
    CHECKF(s.pressing == 1 && s.pressures >= 1 && s.returns >= 1, "pressing %d, pressures %lu, returns %lu",
           s.pressing, (unsigned long)s.pressures, (unsigned long)s.returns);
    CHECKF(s.resident > s.limit, "resident %zu KiB", s.resident >> 10);
    /* another thread's blocks, freed here (remote frees), intact */
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++)
            if (slots[t][i]) {
                CHECKF(pat_check(slots[t][i], sizes[t][i], pat_seed(slots[t][i], sizes[t][i], (uint64_t)i)) == PAT_OK,
                       "block %d/%d changed", t, i);
                free(slots[t][i]);
            }
    /* one more of each size, all at once, above the limit 48 times over */
    size_t total = alloc_bytes(3 * MiB, 24 * MiB) + alloc_bytes(1000, 8 * MiB) + alloc_bytes(400 * KiB, 16 * MiB);
    CHECK(total >= 48 * MiB);
    CHECKF(lim().resident > 48 * MiB, "resident %zu KiB with 48 MiB live", lim().resident >> 10);
    note("48 MiB live");
    free_bytes(SIZE_MAX);
    lim_set(0);
    CHECK(lim().pressing == 0);
    malloc_trim(0);
}

/* ---- modes for the suite ---- */

/* the churn program (see the top) */
static int churn(size_t mib)
{
    static const size_t sizes[] = { 1000, 24 * KiB, 400 * KiB, 3 * MiB, 3000, 100 * KiB };
    size_t live = mib * MiB;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int c = 0; c < 3; c++) {
            size_t n = live / sizes[k];
            if (n > MAXB)
                n = MAXB;
            for (size_t i = 0; i < n; i++) {
                blk[i] = malloc(sizes[k]);
                if (!blk[i]) {
                    printf("malloc(%zu) failed\n", sizes[k]);
                    return 1;
                }
                memset(blk[i], (int)k + 1, sizes[k]);
            }
            for (size_t i = 0; i < n; i++)
                free(blk[i]);
        }
    char line[256];
    long hwm = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            hwm = atol(line + 6);
    if (f)
        fclose(f);
    lim_find();
    hakmem_memory_limit_t s;
    memset(&s, 0, sizeof s);
    if (lim_get)
        lim_get(&s, sizeof s);
    printf("peak_rss_kib %ld limit %zu pressures %lu returns %lu\n", hwm, s.limit, (unsigned long)s.pressures,
           (unsigned long)s.returns);
    printf("SURVIVED\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 3 && !strcmp(argv[1], "--churn"))
        return churn((size_t)atol(argv[2]));
    lim_find();
    if (argc == 2 && !strcmp(argv[1], "--print")) {
        if (!lim_get) {
            printf("no hakmem_memory_limit_get\n");
            return 1;
        }
        printf("limit %zu\n", lim().limit);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "--cgroup-expect")) {
        /* the limit read at start-up, and again by refresh; set(0) and
         * refresh restores it */
        unsigned long long want = strtoull(argv[2], NULL, 10);
        for (int i = 3; i < argc; i++)
            chk_common_option(argc, argv, &i);
        chk_name = "cgroup_read";
        if (!lim_get || !lim_refresh || !lim_set) {
            CHECKF(0, "hakmem_memory_limit_* not found");
        } else {
            CHECKF(lim().limit == want, "limit %zu at start-up, the cgroup's %llu", lim().limit, want);
            lim_set(0);
            CHECK(lim().limit == 0);
            CHECKF(lim_refresh() == 0, "refresh failed: %s", strerror(errno));
            CHECKF(lim().limit == want, "limit %zu after refresh, the cgroup's %llu", lim().limit, want);
        }
        chk_report();
        return check_exit_code();
    }
    if (chk_parse_options(argc, argv))
        return 2;
    RUN_TEST(estimate);
    RUN_TEST(hysteresis);
    RUN_TEST(never_fails);
    return check_exit_code();
}
