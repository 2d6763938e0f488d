/* test_guard.c -- guarded sampling (HAKMEM_GUARD_SAMPLE, src/hak_guard.c),
 * run by tests/suite_guard.sh with the environment each case needs.
 *
 *   test_guard correct      correct programs run clean (CHECK lines):
 *                           placement, realloc growth and shrink, calloc,
 *                           the aligned allocations, malloc_usable_size,
 *                           a free from another thread, fork
 *   test_guard zero         malloc(0) first, then realloc: "zero: ... ok"
 *   test_guard count N SIZE N blocks of SIZE bytes: "guarded: K of N"
 *   test_guard maps N       a heavy allocation loop; prints the most lines
 *                           /proc/self/maps had ("maps: before B, max M")
 *   test_guard CASE         a misuse that must end the process:
 *     overflow32            1 byte past malloc(32): SIGSEGV
 *     overflow24            1 byte past malloc(24) (in the rounding), then
 *                           free: found at free (abort)
 *     overflow24_far        9 bytes past malloc(24): SIGSEGV
 *     underflow             1 byte before malloc(24), then free: abort
 *     underflow_far         4 KiB before malloc(24): SIGSEGV
 *     uaf                   a read after free: SIGSEGV
 *     uaf_thread            freed by another thread, then written: SIGSEGV
 *     double_free           abort
 * Each misuse's block comes from site_alloc and is freed in site_free, and
 * each fault comes from site_touch or site_read, whose addresses the suite
 * looks for in the report (nm; and the names in the stacks). */
#include "check.h"
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

/* the allocation's and the free's sites, named in the reports */
__attribute__((noinline)) char *site_alloc(size_t n) {
    char *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}
__attribute__((noinline)) void site_free(void *p) {
    free(p);
    __asm__ volatile("");
}
/* the bad accesses' sites, named in the faults' reports (the stack of the
 * faulting access) */
__attribute__((noinline)) void site_touch(char *p, long off) {
    ((volatile char *)p)[off] = 1;
    __asm__ volatile("");
}
__attribute__((noinline)) int site_read(char *p, long off) {
    int v = ((volatile char *)p)[off];
    __asm__ volatile("");
    return v;
}

static bool at_page_end(const void *p, size_t size) {
    uintptr_t end = ((uintptr_t)p + size + 15) & ~(uintptr_t)15;
    return end % 4096 == 0;
}

/* ---- correct programs ---- */

static void test_placement(void) {
    for (size_t n = 1; n <= 16384; n = n * 3 + 1) {
        char *p = malloc(n);
        CHECKF(p && (uintptr_t)p % 16 == 0, "malloc(%zu) = %p", n, (void *)p);
        CHECKF(at_page_end(p, n), "malloc(%zu) = %p does not end at a page", n, (void *)p);
        CHECKF(malloc_usable_size(p) >= n, "usable %zu < %zu", malloc_usable_size(p), n);
        memset(p, 'x', malloc_usable_size(p));
        free(p);
    }
}

static void test_realloc(void) {
    char *p = NULL;
    size_t n = 0;
    for (size_t size = 8; size <= 40000; size = size * 2 + 5) {
        p = realloc(p, size);
        CHECK(p != NULL);
        for (size_t k = 0; k < n; k++)
            if (p[k] != (char)k) { CHECKF(0, "byte %zu lost growing to %zu", k, size); break; }
        for (size_t k = n; k < size; k++) p[k] = (char)k;
        n = size;
    }
    for (size_t size = n; size > 4; size /= 3) {
        p = realloc(p, size);
        CHECK(p != NULL);
        for (size_t k = 0; k < size; k++)
            if (p[k] != (char)k) { CHECKF(0, "byte %zu lost shrinking to %zu", k, size); break; }
    }
    free(p);
    CHECK(realloc(malloc(100), 0) == NULL);
}

/* The first malloc of the program, malloc(0), meets a countdown the loader's
 * allocations left negative: a guarded block of 0 bytes, which must grow as
 * any (main's first call in "zero" mode). */
static int zero_first(void) {
    char *z = malloc(0);
    size_t usable = malloc_usable_size(z);
    z = realloc(z, 10);
    if (!z) return 1;
    memset(z, 1, 10);
    free(z);
    printf("zero: usable %zu, ok\n", usable);
    return 0;
}

static void test_calloc(void) {
    for (int round = 0; round < 200; round++) {
        char *p = malloc(1000);
        memset(p, 0xff, 1000);
        free(p);
        unsigned char *q = calloc(125, 8);
        CHECK(q != NULL);
        for (size_t k = 0; k < 1000; k++)
            if (q[k]) { CHECKF(0, "calloc byte %zu is %d", k, q[k]); break; }
        free(q);
    }
}

static void test_aligned(void) {
    static const size_t aligns[] = { 16, 32, 64, 256, 4096, 8192 };
    for (unsigned i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        void *p = NULL;
        CHECK(posix_memalign(&p, aligns[i], 100) == 0);
        CHECKF((uintptr_t)p % aligns[i] == 0, "posix_memalign(%zu) = %p", aligns[i], p);
        memset(p, 1, 100);
        free(p);
        p = aligned_alloc(aligns[i], 3 * aligns[i]);
        CHECK(p && (uintptr_t)p % aligns[i] == 0);
        memset(p, 1, 3 * aligns[i]);
        free(p);
        p = memalign(aligns[i], 10);
        CHECK(p && (uintptr_t)p % aligns[i] == 0);
        free(p);
    }
    void *v = valloc(5000);
    CHECK(v && (uintptr_t)v % 4096 == 0);
    memset(v, 2, 5000);
    free(v);
}

static void *free_it(void *p) {
    site_free(p);
    return NULL;
}

static void test_cross_thread(void) {
    for (int round = 0; round < 50; round++) {
        char *p = malloc(48);
        CHECK(p != NULL);
        memset(p, 3, 48);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, free_it, p) == 0);
        pthread_join(t, NULL);
    }
}

static void test_fork(void) {
    char *kept = malloc(64);
    memset(kept, 4, 64);
    for (int k = 0; k < 3; k++) {
        pid_t pid = chk_fork(20);
        if (pid == 0) {
            bool ok = kept[63] == 4;
            free(kept);                      /* the parent's block, freed in the child */
            for (int i = 0; i < 100; i++) {
                char *p = malloc((size_t)i * 7 + 1);
                if (!p) _exit(3);
                memset(p, 5, (size_t)i * 7 + 1);
                free(p);
            }
            _exit(ok ? 0 : 2);
        }
        chk_wait(pid, "fork child", k);
    }
    CHECK(kept[0] == 4);
    free(kept);
}

/* ---- mappings under a heavy loop ---- */

static int maps_lines(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static int maps_loop(long rounds) {
    enum { LIVE = 4096 };
    static void *live[LIVE];
    int before = maps_lines(), max = before;
    uint64_t x = 88172645463325252ull;
    for (long r = 0; r < rounds; r++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        unsigned i = (unsigned)(x % LIVE);
        free(live[i]);
        live[i] = malloc((size_t)(x >> 40) % 2048 + 1);
        if (!live[i]) return 1;
        if (r % 50000 == 0) { int m = maps_lines(); if (m > max) max = m; }
    }
    int m = maps_lines();
    if (m > max) max = m;
    for (unsigned i = 0; i < LIVE; i++) free(live[i]);
    printf("maps: before %d, max %d, after %d\n", before, max, maps_lines());
    return 0;
}

/* ---- how many blocks are guarded ---- */

/* n allocations of size bytes, each freed at once: how many were guarded
 * (a guarded block's usable size is its size; an ordinary block of 4000
 * bytes has its class's, 4096) */
static int count_guarded(long n, size_t size) {
    long guarded = 0;
    for (long i = 0; i < n; i++) {
        char *p = malloc(size);
        if (!p) return 1;
        p[0] = 1;
        guarded += malloc_usable_size(p) == size;
        free(p);
    }
    printf("guarded: %ld of %ld\n", guarded, n);
    return 0;
}

/* ---- misuse ---- */

static void *free_in_thread(void *p) { site_free(p); return NULL; }

static int misuse(const char *what) {
    if (!strcmp(what, "overflow32")) {
        char *p = site_alloc(32);
        site_touch(p, 32);
    } else if (!strcmp(what, "overflow24")) {
        char *p = site_alloc(24);
        ((volatile char *)p)[24] = 1;
        site_free(p);
    } else if (!strcmp(what, "overflow24_far")) {
        char *p = site_alloc(24);
        site_touch(p, 32);
    } else if (!strcmp(what, "underflow")) {
        char *p = site_alloc(24);
        ((volatile char *)p)[-1] = 1;
        site_free(p);
    } else if (!strcmp(what, "underflow_far")) {
        char *p = site_alloc(24);
        site_touch(p, -4096);
    } else if (!strcmp(what, "uaf")) {
        char *p = site_alloc(100);
        site_free(p);
        printf("read %d\n", site_read(p, 10));
    } else if (!strcmp(what, "uaf_thread")) {
        char *p = site_alloc(100);
        pthread_t t;
        pthread_create(&t, NULL, free_in_thread, p);
        pthread_join(t, NULL);
        site_touch(p, 0);
    } else if (!strcmp(what, "double_free")) {
        char *p = site_alloc(40);
        site_free(p);
        site_free(p);
    } else {
        fprintf(stderr, "unknown case %s\n", what);
        return 2;
    }
    printf("SURVIVED\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "zero")) return zero_first();
    if (argc >= 2 && !strcmp(argv[1], "maps")) return maps_loop(argc > 2 ? atol(argv[2]) : 1000000);
    if (argc >= 4 && !strcmp(argv[1], "count")) return count_guarded(atol(argv[2]), (size_t)atol(argv[3]));
    if (argc >= 2 && strcmp(argv[1], "correct") != 0 && argv[1][0] != '-') return misuse(argv[1]);
    int first = argc >= 2 && !strcmp(argv[1], "correct") ? 1 : 0;
    chk_prefix = "guard";
    if (chk_parse_options(argc - first, argv + first)) return 2;
    /* placement only when every allocation is guarded */
    const char *n = getenv("HAKMEM_GUARD_SAMPLE");
    if (n && !strcmp(n, "1")) RUN_TEST(placement);
    RUN_TEST(realloc);
    RUN_TEST(calloc);
    RUN_TEST(aligned);
    RUN_TEST(cross_thread);
    RUN_TEST(fork);
    return check_exit_code();
}
