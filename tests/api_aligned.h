/* api_aligned.h -- posix_memalign / aligned_alloc / memalign / valloc /
 * pvalloc tests of test_api.c, included by it (uses its globals and helpers:
 * owns, page, global_var, OWNED, ALIGNED). */
#ifndef HAK_TEST_API_ALIGNED_H
#define HAK_TEST_API_ALIGNED_H
static const size_t align_sizes[] = {1, 100, 5000, 300 * KiB, 3 * MiB};
#define NALIGN_SIZES (sizeof align_sizes / sizeof align_sizes[0])

static void check_aligned_block(const char *fn, void *p, size_t a, size_t s)
{
    CHECKF(p != NULL, "%s(%zu, %zu) failed", fn, a, s);
    if (!p)
        return;
    CHECKF(ALIGNED(p, a), "%s(%zu, %zu) = %p misaligned", fn, a, s, p);
    CHECKF(malloc_usable_size(p) >= s, "%s(%zu, %zu): usable %zu", fn, a, s,
           malloc_usable_size(p));
    OWNED(p);
    uint64_t seed = pat_seed(p, s, a);
    pat_fill(p, s, seed);
    CHECK(pat_check(p, s, seed) == PAT_OK);
}

static void test_posix_memalign(void)
{
    for (size_t a = sizeof(void *); a <= 16 * MiB; a *= 2) {
        void *v[NALIGN_SIZES];
        for (size_t i = 0; i < NALIGN_SIZES; i++) {
            v[i] = NULL;
            int rc = posix_memalign(&v[i], a, align_sizes[i]);
            CHECKF(rc == 0, "posix_memalign(%zu, %zu) = %d", a, align_sizes[i], rc);
            if (rc == 0)
                check_aligned_block("posix_memalign", v[i], a, align_sizes[i]);
            else
                v[i] = NULL;
        }
        for (size_t i = 0; i < NALIGN_SIZES; i++)
            free(v[i]);
    }
    static const size_t bad[] = {0, 1, 2, 4, 3, 12, 24, 48, 100, 4097, 3 * 4096, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *sentinel = (void *)&global_var, *p = sentinel;
        int rc = posix_memalign(&p, bad[i], 64);
        CHECKF(rc == EINVAL, "posix_memalign(alignment %zu) = %d, want EINVAL", bad[i], rc);
        CHECKF(p == sentinel || p == NULL, "posix_memalign(bad %zu) wrote %p", bad[i], p);
        if (rc == 0)
            free(p);
    }
    void *p = NULL;
    int rc = posix_memalign(&p, 64, 0); /* legal: NULL or a freeable pointer */
    CHECK(rc == 0);
    if (rc == 0 && p)
        CHECK(ALIGNED(p, 64));
    free(p);
}

/* aligned_alloc and memalign */
static void test_aligned_alloc(void)
{
    for (size_t a = 1; a <= 16 * MiB; a *= 2) {
        void *v[NALIGN_SIZES], *m[NALIGN_SIZES];
        for (size_t i = 0; i < NALIGN_SIZES; i++) {
            errno = 0;
            v[i] = aligned_alloc(a, align_sizes[i]);
            check_aligned_block("aligned_alloc", v[i], a, align_sizes[i]);
            m[i] = memalign(a, align_sizes[i]);
            check_aligned_block("memalign", m[i], a, align_sizes[i]);
        }
        for (size_t i = 0; i < NALIGN_SIZES; i++) {
            free(v[i]);
            free(m[i]);
        }
    }
    /* Non power-of-two alignments.  hakmem does as glibc 2.36: rounds the
     * alignment up (tests/test_os.c has the details).  Other allocators may
     * refuse with EINVAL (glibc 2.38's aligned_alloc does), but a block must
     * honour the rounded alignment. */
    static const size_t bad[] = {3, 24, 48, 100, 4097, 3 * 4096, 5 * MiB};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t pow2 = 1;
        while (pow2 < bad[i])
            pow2 *= 2;
        for (int fn = 0; fn < 2; fn++) {
            errno = 0;
            void *p = fn ? memalign(bad[i], 64) : aligned_alloc(bad[i], 64);
            int e = errno;
            const char *name = fn ? "memalign" : "aligned_alloc";
            if (owns)
                CHECKF(p && ALIGNED(p, pow2), "%s(%zu, 64) = %p errno %d, want %zu-aligned",
                       name, bad[i], p, e, pow2);
            else
                CHECKF((p == NULL && e == EINVAL) || (p && ALIGNED(p, pow2)),
                       "%s(%zu, 64) = %p errno %d", name, bad[i], p, e);
            free(p);
        }
    }
}

static void test_valloc_pvalloc(void)
{
    static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 5000, 100 * KiB, 1 * MiB + 1,
                                   5 * MiB + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t s = sizes[i], rounded = (s + page - 1) / page * page;
        void *v = valloc(s);
        check_aligned_block("valloc", v, page, s);
        void *p = pvalloc(s);
        check_aligned_block("pvalloc", p, page, s);
        if (p) {
            CHECKF(malloc_usable_size(p) >= rounded, "pvalloc(%zu): usable %zu < %zu", s,
                   malloc_usable_size(p), rounded);
            memset(p, 0x3C, rounded); /* the whole rounded size is the caller's */
        }
        free(v);
        free(p);
    }
    void *z = pvalloc(0), *y = valloc(0);
    CHECK(z == NULL || ALIGNED(z, page));
    CHECK(y == NULL || ALIGNED(y, page));
    free(z);
    free(y);
}

/* Every block of many: for each alignment 16..64 KiB and sizes around it
 * (Ruby's heap pages: 64 KiB - 40 at 64 KiB), enough blocks to fill several
 * pages -- a medium or large page in slot 0 of its segment included -- each
 * aligned, with its usable size, written, grown by realloc and freed; then
 * alloc-free pairs, which reuse one block again and again. */
static void test_aligned_every_block(void)
{
    enum { MAXN = 48 };
    for (size_t a = 16; a <= 64 * KiB; a *= 2) {
        const size_t sizes[] = {1, a / 2, a - 8, a, a + 1, 3 * a / 2, 4096, 65536 - 40, 65536,
                                100 * KiB, 300 * KiB};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t s = sizes[i] ? sizes[i] : 1;
            size_t n = (8 * MiB) / (s + a);
            if (n > MAXN) n = MAXN;
            if (n < 4) n = 4;
            void *v[MAXN];
            for (size_t k = 0; k < n; k++) {
                v[k] = NULL;
                int rc = posix_memalign(&v[k], a, s);
                CHECKF(rc == 0, "posix_memalign(%zu, %zu) = %d", a, s, rc);
                if (rc) { v[k] = NULL; continue; }
                check_aligned_block("posix_memalign", v[k], a, s);
            }
            for (size_t k = 0; k < n; k += 3) {   /* grow some: the contents move along */
                if (!v[k]) continue;
                uint64_t seed = pat_seed(v[k], s, a);
                void *r = realloc(v[k], s + s / 2 + 1);
                CHECKF(r != NULL, "realloc of an aligned block (%zu, %zu) failed", a, s);
                if (!r) continue;
                CHECK(pat_check(r, s, seed) == PAT_OK);
                CHECK(malloc_usable_size(r) >= s + s / 2 + 1);
                v[k] = r;
            }
            for (size_t k = 0; k < n; k++) free(v[k]);
            for (int k = 0; k < 64; k++) {
                void *p = NULL;
                CHECK(posix_memalign(&p, a, s) == 0);
                CHECKF(p && ALIGNED(p, a), "posix_memalign(%zu, %zu) = %p (pair %d)", a, s, p, k);
                if (p) CHECK(malloc_usable_size(p) >= s);
                free(p);
            }
        }
    }
}

#endif /* HAK_TEST_API_ALIGNED_H */
