/* api_realloc.h -- realloc / reallocarray tests of test_api.c, included by it
 * (uses its globals and helpers: owns, quick, v_size_max, OWNED, ALIGNED,
 * lcg, rand_size, path_sizes). */
#ifndef HAK_TEST_API_REALLOC_H
#define HAK_TEST_API_REALLOC_H
static void test_realloc_enomem(void)
{
    static const size_t sizes[] = {100, 40 * KiB, 1 * MiB, 8 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t s = sizes[i];
        char *p = malloc(s);
        CHECK(p != NULL);
        if (!p)
            continue;
        uint64_t seed = pat_seed(p, s, 1);
        pat_fill(p, s, seed);
        size_t bad[] = {v_size_max, v_ptrdiff_max + 1, v_size_max - 4096};
        for (size_t b = 0; b < 3; b++) {
            errno = 0;
            void *q = realloc(p, bad[b]);
            CHECKF(q == NULL && errno == ENOMEM, "realloc(%zu-byte block, %#zx) = %p errno %d", s,
                   bad[b], q, errno);
            if (q) { /* undefined territory: stop using this block */
                p = q;
                s = 0;
                break;
            }
        }
        errno = 0;
        void *q = s ? reallocarray(p, v_size_max / 2, 4) : NULL;
        CHECKF(!s || (q == NULL && errno == ENOMEM), "reallocarray overflow: %p errno %d", q, errno);
        if (s) {
            size_t off = pat_check(p, s, seed);
            CHECKF(off == PAT_OK, "block of %zu changed by failed realloc at offset %zu", s, off);
            OWNED(p);
        }
        free(p);
    }
}

static void test_reallocarray(void)
{
    long *p = reallocarray(NULL, 10, sizeof(long));
    CHECK(p != NULL);
    if (!p)
        return;
    for (long i = 0; i < 10; i++)
        p[i] = i * 7 + 1;
    long *q = reallocarray(p, 100000, sizeof(long));
    CHECK(q != NULL);
    if (q)
        p = q;
    for (long i = 0; i < 10; i++)
        CHECKF(p[i] == i * 7 + 1, "element %ld lost", i);
    if (q)
        p[99999] = 5;
    volatile size_t big = (size_t)1 << 33;
    errno = 0;
    q = reallocarray(p, big, big);
    CHECKF(q == NULL && errno == ENOMEM, "reallocarray(2^33, 2^33) = %p errno %d", (void *)q, errno);
    for (long i = 0; i < 10; i++)
        CHECKF(p[i] == i * 7 + 1, "element %ld lost after failed reallocarray", i);
    OWNED(p);
    free(p);
}

/* realloc through a chain of sizes, checking the preserved prefix each step */
static void realloc_chain(const size_t *sizes, size_t n, uint64_t owner)
{
    size_t s = sizes[0];
    char *p = malloc(s);
    CHECK(p != NULL);
    if (!p)
        return;
    uint64_t seed = pat_seed(p, s, owner);
    pat_fill(p, s, seed);
    for (size_t i = 1; i < n; i++) {
        size_t ns = sizes[i];
        char *q = realloc(p, ns);
        CHECKF(q != NULL, "realloc(%zu -> %zu) failed", s, ns);
        if (!q)
            break;
        size_t keep = s < ns ? s : ns;
        size_t off = pat_check(q, keep, seed);
        CHECKF(off == PAT_OK, "realloc %zu -> %zu lost contents at offset %zu", s, ns, off);
        CHECKF(ALIGNED(q, 16), "realloc(%zu -> %zu) = %p misaligned", s, ns, (void *)q);
        CHECKF(malloc_usable_size(q) >= ns, "realloc %zu -> %zu: usable %zu", s, ns,
               malloc_usable_size(q));
        OWNED(q);
        p = q;
        s = ns;
        seed = pat_seed(p, s, owner + i);
        pat_fill(p, s, seed);
    }
    free(p);
}

static void test_realloc_paths(void)
{
    static const size_t up_down[] = {100, 200, 40 * KiB, 1 * MiB, 64 * MiB,
                                     1 * MiB, 40 * KiB, 200, 100, 10};
    static const size_t jumpy[] = {8, 12 * KiB, 3 * MiB, 16, 64 * MiB, 24, 300 * KiB,
                                   300 * KiB + 1, 70 * MiB, 65 * MiB, 2 * MiB, 1};
    static const size_t creep[] = {1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                                   255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 16383,
                                   16384, 16385, 65535, 65536, 65537, 262143, 262144, 262145,
                                   1048575, 1048576, 1048577, 4194303, 4194304, 4194305};
    realloc_chain(up_down, sizeof up_down / sizeof up_down[0], 1);
    realloc_chain(jumpy, sizeof jumpy / sizeof jumpy[0], 2);
    realloc_chain(creep, sizeof creep / sizeof creep[0], 3);
    size_t rev[sizeof creep / sizeof creep[0]];
    for (size_t i = 0; i < sizeof creep / sizeof creep[0]; i++)
        rev[i] = creep[sizeof creep / sizeof creep[0] - 1 - i];
    realloc_chain(rev, sizeof rev / sizeof rev[0], 4);

    /* four interleaved blocks resized at random */
    enum { B = 4 };
    char *p[B] = {0};
    size_t s[B] = {0};
    uint64_t seed[B] = {0};
    int steps = quick ? 300 : 2000;
    for (int i = 0; i < steps; i++) {
        int b = (int)(lcg() % B);
        size_t ns = rand_size(i % 50 == 0 ? 4 * MiB : 64 * KiB);
        char *q = realloc(p[b], ns);
        CHECKF(q != NULL, "realloc(%zu -> %zu)", s[b], ns);
        if (!q)
            continue;
        size_t keep = s[b] < ns ? s[b] : ns;
        size_t off = pat_check(q, keep, seed[b]);
        CHECKF(off == PAT_OK, "random realloc %zu -> %zu lost contents at %zu", s[b], ns, off);
        p[b] = q;
        s[b] = ns;
        seed[b] = pat_seed(q, ns, (uint64_t)i);
        pat_fill(q, ns, seed[b]);
    }
    for (int b = 0; b < B; b++)
        free(p[b]);
}

static void test_realloc_null_zero(void)
{
    char *p = realloc(NULL, 100);
    CHECK(p != NULL && ALIGNED(p, 16));
    if (p) {
        memset(p, 1, 100);
        OWNED(p);
    }
    free(p);
    p = realloc(NULL, 0);
    free(p);
    for (size_t i = 0; i < NPATH; i++) {
        char *b = malloc(path_sizes[i]);
        CHECK(b != NULL);
        if (!b)
            continue;
        memset(b, 7, path_sizes[i]);
        void *q = realloc(b, 0); /* glibc frees and returns NULL; a live pointer is fine too */
        if (q) {
            CHECK(ALIGNED(q, 16));
            free(q);
        }
    }
    p = malloc(50); /* allocator still healthy */
    CHECK(p != NULL);
    free(p);
}

#endif /* HAK_TEST_API_REALLOC_H */
