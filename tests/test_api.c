/* test_api.c -- API conformance of every allocation entry point.
 *
 * usage: test_api [-p PREFIX] [--expect-hakmem | --expect-glibc]
 *                 [--variant release|debug] [--quick]
 *
 * Runs against whatever malloc the process has (glibc, LD_PRELOADed hakmem,
 * statically linked hakmem, or hakmem_* names via tests/hak_prefix.h).
 * --expect-hakmem makes the "served" test fail unless hakmem really serves
 * the allocations; --expect-glibc makes it fail if hakmem is present.
 * --quick shrinks repetition counts (valgrind).
 * Build with -fno-builtin so the compiler cannot fold malloc semantics away.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "pattern.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static const char *expect_variant;  /* "release" / "debug" / NULL */
static int quick;
static hak_owns_fn_t owns;          /* NULL unless hakmem is the allocator */
static size_t page;
static int global_var;

/* sizes that walk every size path: tiny, small, medium, large, huge */
static const size_t path_sizes[] = {1, 8, 16, 24, 100, 1000, 4096, 40 * KiB, 100 * KiB,
                                    300 * KiB, 1 * MiB, 3 * MiB, 8 * MiB, 64 * MiB};
#define NPATH (sizeof path_sizes / sizeof path_sizes[0])

/* volatile so the compiler sees neither constants nor "impossible" sizes */
static volatile size_t v_size_max = SIZE_MAX;
static volatile size_t v_ptrdiff_max = PTRDIFF_MAX;

#define ALIGNED(p, a) (((uintptr_t)(p) & ((a) - 1)) == 0)
#define OWNED(p)                                                              \
    CHECKF(!owns || owns(p) == 1, "hakmem_owns(%p) != 1 (size path)", (void *)(p))

static uint64_t lcg_state = 12345;
static uint64_t lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lcg_state >> 33;
}
/* log-uniform-ish size in [1, max] */
static size_t rand_size(size_t max)
{
    size_t bits = 1 + lcg() % 63;
    size_t s = 1 + (lcg() * 0x9e3779b97f4a7c15ULL) % ((size_t)1 << (bits % 23 + 1));
    return s > max ? 1 + s % max : s;
}

static void test_served(void)
{
    if (chk_expect_hakmem < 0)
        SKIP_TEST("no --expect-hakmem/--expect-glibc given");
    if (chk_expect_hakmem == 0) {
        CHECKF(owns == NULL, "hakmem_owns present although the glibc baseline was expected");
        void *p = malloc(100);
        CHECK(p != NULL);
        free(p);
        return;
    }
    CHECKF(owns != NULL, "hakmem_owns not found: the allocator in use is not hakmem");
    if (!owns)
        return;
    void *a = malloc(64), *b = calloc(3, 100), *c = realloc(NULL, 5000), *d = NULL;
    CHECK(posix_memalign(&d, 256, 1000) == 0);
    CHECKF(a && owns(a) == 1, "malloc block not served by hakmem");
    CHECKF(b && owns(b) == 1, "calloc block not served by hakmem");
    CHECKF(c && owns(c) == 1, "realloc block not served by hakmem");
    CHECKF(d && owns(d) == 1, "posix_memalign block not served by hakmem");
    free(a); free(b); free(c); free(d);
    hak_str_fn_t var = (hak_str_fn_t)hak_find_symbol("hakmem_build_variant");
    CHECK(var != NULL);
    if (var && expect_variant)
        CHECKF(strcmp(var(), expect_variant) == 0, "build variant '%s', expected '%s'", var(),
               expect_variant);
}

static void test_malloc_zero(void)
{
    void *p = malloc(0), *q = malloc(0);
    CHECK(p != NULL);
    CHECK(q != NULL);
    CHECKF(p != q, "two malloc(0) returned the same pointer %p", p);
    OWNED(p);
    free(p);
    free(q);
    void *v[200];
    for (int i = 0; i < 200; i++) {
        v[i] = malloc(0);
        CHECK(v[i] != NULL);
        CHECK(ALIGNED(v[i], 16));
    }
    for (int i = 0; i < 200; i++)
        for (int j = i + 1; j < 200; j++)
            CHECKF(v[i] == NULL || v[i] != v[j], "malloc(0) #%d == #%d", i, j);
    for (int i = 0; i < 200; i++)
        free(v[i]);
}

static void check_align_size(size_t s)
{
    void *p = malloc(s);
    CHECKF(p != NULL, "malloc(%zu) failed", s);
    if (!p)
        return;
    CHECKF(ALIGNED(p, 16), "malloc(%zu) = %p not 16-aligned", s, p);
    OWNED(p);
    if (s) {
        ((volatile char *)p)[0] = 1;
        ((volatile char *)p)[s - 1] = 2;
    }
    free(p);
}

static void test_alignment16(void)
{
    void *keep[64] = {0};
    for (size_t s = 0; s <= 4096; s++) {
        void *p = malloc(s);
        CHECKF(p && ALIGNED(p, 16), "malloc(%zu) = %p", s, p);
        free(keep[s % 64]);
        keep[s % 64] = p;
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    for (size_t s = 4096; s <= 8 * MiB; s *= 2) {
        check_align_size(s - 1);
        check_align_size(s);
        check_align_size(s + 1);
        check_align_size(s + s / 2 + 8);
    }
    check_align_size(64 * MiB);
    for (size_t s = 1; s < 100000; s = s * 3 + 1) {
        void *c = calloc(1, s), *r = realloc(NULL, s);
        CHECKF(c && ALIGNED(c, 16), "calloc(1,%zu) = %p", s, c);
        CHECKF(r && ALIGNED(r, 16), "realloc(NULL,%zu) = %p", s, r);
        free(c);
        free(r);
    }
}

static void test_no_overlap(void)
{
    enum { N = 3000 };
    static void *blk[N];
    static size_t sz[N];
    for (int i = 0; i < N; i++) {
        sz[i] = (i % 97 == 0) ? rand_size(1 * MiB) : rand_size(2048);
        blk[i] = malloc(sz[i]);
        CHECKF(blk[i] != NULL, "malloc(%zu)", sz[i]);
        if (!blk[i])
            sz[i] = 0;
        else
            pat_fill(blk[i], sz[i], pat_seed(blk[i], sz[i], (uint64_t)i));
    }
    for (int i = 0; i < N; i++)
        if (blk[i])
            CHECKF(pat_check(blk[i], sz[i], pat_seed(blk[i], sz[i], (uint64_t)i)) == PAT_OK,
                   "block %d (%zu bytes at %p) overwritten by another block", i, sz[i], blk[i]);
    for (int k = 0; k < N; k++) { /* free in a scrambled order */
        int i = (int)(((uint64_t)k * 1699) % N);
        free(blk[i]);
    }
}

static void test_calloc_zero_reuse(void)
{
    static const size_t sizes[] = {1, 7, 16, 24, 32, 48, 64, 100, 128, 256, 500, 1024, 2000,
                                   4096, 8192, 16384, 40000, 65536, 100000, 262144, 1 * MiB,
                                   3 * MiB, 8 * MiB};
    enum { K = 8 };
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t s = sizes[si];
        int rounds = s >= MiB ? (quick ? 1 : 3) : (quick ? 3 : 20);
        for (int r = 0; r < rounds; r++) {
            void *v[K];
            for (int k = 0; k < K; k++) {
                v[k] = malloc(s);
                CHECK(v[k] != NULL);
                if (v[k])
                    memset(v[k], 0xAA, malloc_usable_size(v[k]));
            }
            for (int k = K - 1; k >= 0; k--)
                free(v[k]);
            for (int k = 0; k < K; k++) {
                void *c;
                if (k % 3 == 0)
                    c = calloc(1, s);
                else if (k % 3 == 1)
                    c = calloc(s, 1);
                else
                    c = calloc((s + 7) / 8, 8);
                CHECKF(c != NULL, "calloc for size %zu failed", s);
                if (!c)
                    continue;
                size_t off = pat_check_zero(c, s);
                CHECKF(off == PAT_OK, "calloc(%zu) reused memory not zeroed at offset %zu", s, off);
                OWNED(c);
                v[k] = c;
            }
            for (int k = 0; k < K; k++)
                free(v[k]);
        }
    }
}

static void test_calloc_overflow(void)
{
    static const size_t pairs[][2] = {
        {SIZE_MAX / 2 + 2, 2}, {2, SIZE_MAX / 2 + 2}, {(size_t)1 << 32, (size_t)1 << 32},
        {((size_t)1 << 32) + 1, ((size_t)1 << 32)}, {SIZE_MAX, SIZE_MAX}, {SIZE_MAX, 2},
        {(size_t)1 << 63, 4}, {65537, (SIZE_MAX / 65536)}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        volatile size_t n = pairs[i][0], m = pairs[i][1];
        errno = 0;
        void *p = calloc(n, m);
        CHECKF(p == NULL, "calloc(%zu, %zu) did not detect overflow: %p", (size_t)n, (size_t)m, p);
        CHECKF(errno == ENOMEM, "calloc(%zu, %zu): errno %d, want ENOMEM", (size_t)n, (size_t)m,
               errno);
        if (p)
            free(p);
    }
    /* zero-sized callocs are legal; must be freeable */
    void *a = calloc(0, 16), *b = calloc(16, 0), *c = calloc(0, v_size_max);
    free(a);
    free(b);
    free(c);
}

static void test_enomem(void)
{
    size_t huge[] = {v_size_max, v_size_max - 1, v_size_max - 4096, v_size_max - 64 * MiB,
                     v_ptrdiff_max + 1, v_ptrdiff_max, (size_t)1 << 62, (size_t)1 << 47};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        size_t s = huge[i];
        void *p;
        errno = 0;
        p = malloc(s);
        CHECKF(p == NULL && errno == ENOMEM, "malloc(%#zx) = %p errno %d", s, p, errno);
        free(p);
        errno = 0;
        p = aligned_alloc(4096, s & ~(size_t)4095);
        CHECKF(p == NULL && errno == ENOMEM, "aligned_alloc(4096, %#zx) = %p errno %d", s, p,
               errno);
        free(p);
        errno = 0;
        p = memalign(1 * MiB, s);
        CHECKF(p == NULL && errno == ENOMEM, "memalign(1MiB, %#zx) = %p errno %d", s, p, errno);
        free(p);
        errno = 0;
        p = valloc(s);
        CHECKF(p == NULL && errno == ENOMEM, "valloc(%#zx) = %p errno %d", s, p, errno);
        free(p);
        errno = 0;
        p = pvalloc(s);
        CHECKF(p == NULL && errno == ENOMEM, "pvalloc(%#zx) = %p errno %d", s, p, errno);
        free(p);
        p = (void *)&global_var;
        int rc = posix_memalign(&p, 64, s);
        CHECKF(rc == ENOMEM, "posix_memalign(64, %#zx) = %d", s, rc);
        if (rc == 0)
            free(p);
    }
}

/* realloc and the aligned family live in these two (test_api.c-only) parts */
#include "api_realloc.h"
#include "api_aligned.h"

static void test_usable_size(void)
{
    CHECK(malloc_usable_size(NULL) == 0);
    for (size_t s = 0; s <= 2048; s += (s < 300 ? 1 : 7)) {
        char *a = malloc(s), *b = malloc(s), *c = malloc(s);
        CHECK(a && b && c);
        if (!a || !b || !c) {
            free(a); free(b); free(c);
            continue;
        }
        size_t ua = malloc_usable_size(a), ub = malloc_usable_size(b), uc = malloc_usable_size(c);
        CHECKF(ua >= s && ub >= s && uc >= s, "usable < %zu (%zu %zu %zu)", s, ua, ub, uc);
        memset(a, 0x11, ua);
        memset(b, 0x22, ub);
        memset(c, 0x33, uc);
        for (size_t k = 0; k < ua; k++)
            if (a[k] != 0x11) { CHECKF(0, "size %zu: usable bytes of neighbours overlap", s); break; }
        for (size_t k = 0; k < ub; k++)
            if (b[k] != 0x22) { CHECKF(0, "size %zu: usable bytes of neighbours overlap", s); break; }
        free(a); free(b); free(c);
    }
    for (size_t i = 0; i < NPATH; i++) {
        size_t s = path_sizes[i];
        char *p = malloc(s);
        CHECK(p != NULL);
        if (!p)
            continue;
        size_t u = malloc_usable_size(p);
        CHECKF(u >= s, "malloc_usable_size(malloc(%zu)) = %zu", s, u);
        memset(p, 0x5C, u); /* the whole usable size must be writable */
        free(p);
    }
    void *q = NULL;
    CHECK(posix_memalign(&q, 4096, 10000) == 0);
    if (q) {
        CHECK(malloc_usable_size(q) >= 10000);
        memset(q, 1, malloc_usable_size(q));
        free(q);
    }
}

static void test_free_errno(void)
{
    for (size_t i = 0; i < NPATH; i++) {
        void *p = malloc(path_sizes[i]);
        CHECK(p != NULL);
        errno = EDOM;
        free(p);
        CHECKF(errno == EDOM, "free of %zu-byte block changed errno to %d", path_sizes[i], errno);
    }
    void *a = aligned_alloc(4 * MiB, 5 * MiB);
    errno = ERANGE;
    free(a);
    CHECKF(errno == ERANGE, "free of aligned huge block changed errno to %d", errno);
    errno = EDOM;
    free(NULL);
    CHECKF(errno == EDOM, "free(NULL) changed errno to %d", errno);
}

static void test_free_null(void)
{
    for (int i = 0; i < 1000; i++)
        free(NULL);
    void *p = malloc(16); /* allocator still works */
    CHECK(p != NULL);
    free(p);
}

static void test_free_sized(void)
{
    typedef void (*fs_t)(void *, size_t);
    typedef void (*fas_t)(void *, size_t, size_t);
    fs_t fs = (fs_t)hak_find_symbol("free_sized");
    fas_t fas = (fas_t)hak_find_symbol("free_aligned_sized");
    if (!fs || !fas) {
        CHECKF(!owns, "hakmem is loaded but free_sized/free_aligned_sized are missing");
        SKIP_TEST("free_sized/free_aligned_sized not provided by this libc");
    }
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < NPATH; i++) {
            size_t s = path_sizes[i];
            void *p = malloc(s);
            CHECK(p != NULL);
            if (p)
                memset(p, 0x42, s);
            errno = EDOM;
            fs(p, s);
            CHECK(errno == EDOM);
            void *c = calloc(s < 8 ? 1 : s / 8, 8);
            CHECK(c != NULL);
            if (c)
                CHECK(pat_check_zero(c, s < 8 ? 8 : s / 8 * 8) == PAT_OK);
            fs(c, s < 8 ? 8 : s / 8 * 8);
        }
        static const size_t aligns[] = {16, 64, 4096, 1 * MiB, 4 * MiB};
        for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
            for (size_t i = 0; i < NALIGN_SIZES; i++) {
                void *p = aligned_alloc(aligns[a], align_sizes[i]);
                check_aligned_block("aligned_alloc", p, aligns[a], align_sizes[i]);
                fas(p, aligns[a], align_sizes[i]);
            }
        }
    }
    fs(NULL, 0);
    fas(NULL, 64, 0);
    realloc_chain(path_sizes, NPATH, 9); /* allocator still consistent */
}

static void test_owns(void)
{
    if (!owns)
        SKIP_TEST("hakmem not loaded");
    int stack_var = 1;
    CHECK(owns(&stack_var) == 0);
    CHECK(owns(&global_var) == 0);
    CHECK(owns(NULL) == 0);
    CHECK(owns((const void *)(uintptr_t)&test_owns) == 0);
    void *m = mmap(NULL, 1 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
        CHECKF(owns(m) == 0, "foreign mmap region %p claimed by hakmem", m);
        CHECK(owns((char *)m + 512 * KiB) == 0);
        munmap(m, 1 * MiB);
    }
    for (size_t i = 0; i < NPATH; i++) {
        size_t s = path_sizes[i];
        char *p = malloc(s);
        CHECK(p != NULL);
        if (!p)
            continue;
        CHECKF(owns(p) == 1, "hakmem_owns(malloc(%zu)) != 1", s);
        CHECKF(owns(p + s / 2) == 1, "hakmem_owns(interior of malloc(%zu)) != 1", s);
        char *q = realloc(p, s * 2);
        CHECKF(q && owns(q) == 1, "hakmem_owns(realloc to %zu) != 1", s * 2);
        free(q ? q : p);
        void *a = memalign(4 * MiB, s);
        CHECKF(a && owns(a) == 1, "hakmem_owns(memalign(4MiB, %zu)) != 1", s);
        free(a);
    }
}

static void *cross_alloc_thread(void *arg)
{
    void **v = arg;
    for (int i = 0; i < 1000; i++) {
        size_t s = 1 + (size_t)(i * 37) % 3000 + (i % 100 == 0 ? 500 * KiB : 0);
        v[i] = malloc(s);
        if (v[i])
            pat_fill(v[i], s, (uint64_t)i);
    }
    return NULL;
}

static void test_cross_thread_free(void)
{
    static void *v[1000];
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cross_alloc_thread, v) == 0);
    pthread_join(t, NULL);
    for (int i = 0; i < 1000; i++) {
        size_t s = 1 + (size_t)(i * 37) % 3000 + (i % 100 == 0 ? 500 * KiB : 0);
        CHECK(v[i] != NULL);
        if (!v[i])
            continue;
        CHECKF(pat_check(v[i], s, (uint64_t)i) == PAT_OK, "block %d corrupted", i);
        OWNED(v[i]);
        free(v[i]);
    }
    /* memory freed remotely must be reusable */
    cross_alloc_thread(v);
    for (int i = 0; i < 1000; i++)
        free(v[i]);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (chk_common_option(argc, argv, &i))
            continue;
        else if (!strcmp(argv[i], "--variant") && i + 1 < argc)
            expect_variant = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else {
            fprintf(stderr, "usage: %s [-p prefix] [--expect-hakmem|--expect-glibc] "
                            "[--variant v] [--quick]\n", argv[0]);
            return 2;
        }
    }
    page = (size_t)sysconf(_SC_PAGESIZE);
    owns = hak_find_owns();
    if (owns) {
        hak_str_fn_t ver = (hak_str_fn_t)hak_find_symbol("hakmem_version");
        hak_str_fn_t var = (hak_str_fn_t)hak_find_symbol("hakmem_build_variant");
        printf("# allocator: hakmem %s (%s)\n", ver ? ver() : "?", var ? var() : "?");
    } else {
        printf("# allocator: not hakmem (system malloc)\n");
    }
    RUN_TEST(served);
    RUN_TEST(malloc_zero);
    RUN_TEST(alignment16);
    RUN_TEST(no_overlap);
    RUN_TEST(calloc_zero_reuse);
    RUN_TEST(calloc_overflow);
    RUN_TEST(enomem);
    RUN_TEST(realloc_enomem);
    RUN_TEST(reallocarray);
    RUN_TEST(posix_memalign);
    RUN_TEST(aligned_alloc);
    RUN_TEST(aligned_every_block);
    RUN_TEST(valloc_pvalloc);
    RUN_TEST(realloc_paths);
    RUN_TEST(realloc_null_zero);
    RUN_TEST(usable_size);
    RUN_TEST(free_errno);
    RUN_TEST(free_null);
    RUN_TEST(free_sized);
    RUN_TEST(owns);
    RUN_TEST(cross_thread_free);
    return check_exit_code();
}
