/* test_huge_usable.c -- a huge block's usable size (above 2 MiB: a mapping
 * of its own, hak_huge.c): the size asked, rounded up to the end of the OS
 * page it ends in -- not the rest of its 4 MiB-rounded mapping -- and
 * realloc still growing it in place within that mapping (issue 39, item 5).
 *
 * usage: test_huge_usable [-p PREFIX] [-t TEST] [--expect-hakmem|--expect-glibc]
 *
 * Runs under any malloc (tests/suite_huge.sh: glibc, and LD_PRELOAD of the
 * release, debug and hardened libraries).  Everywhere: n <= usable < n + one
 * OS page, every usable byte writable, contents kept by realloc, calloc's
 * usable bytes zero, alignment kept.  Under hakmem, exactly: the usable size
 * is the bytes to the end of the block's last OS page (release, debug) or
 * the size asked (hardened: its trailer says it), and (release, debug) a
 * realloc the mapping holds keeps the address and records the new size.
 * A sized free above the usable size is reported (debug, hardened).
 */
#define _GNU_SOURCE 1
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "check.h"
#include "pattern.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static size_t ps;
static int hakmem, hardened, debug;

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
/* what hakmem's release and debug builds report for a huge block p of n bytes */
static size_t page_end(const void *p, size_t n) { return round_up((uintptr_t)p + n, ps) - (uintptr_t)p; }

/* the usable size of p, a block of n bytes, checked: at least n, less than
 * a page more, and under hakmem exactly as documented */
static size_t usable_of(const char *what, const void *p, size_t n) {
    size_t u = malloc_usable_size((void *)p);
    CHECKF(u >= n && u < n + ps, "%s: usable %zu for %zu bytes (want [n, n + %zu))", what, u, n, ps);
    if (hakmem && hardened) CHECKF(u == n, "%s: usable %zu for %zu bytes (hardened: exactly n)", what, u, n);
    else if (hakmem) CHECKF(u == page_end(p, n), "%s: usable %zu for %zu bytes at %p (want %zu)", what, u, n, p,
                            page_end(p, n));
    return u;
}

static const size_t sizes[] = { 2 * MiB + 1, 2300000, 3000000, 4 * MiB - 4096, 4 * MiB - 768, 4 * MiB,
                                5000000, 9000000, 17 * MiB + 5 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* malloc's huge blocks, fresh and reused from the cache: page-rounded, and
 * every usable byte writable (hardened: no canary or trailer complaint at
 * the free) */
static void test_usable_sizes(void) {
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < NSIZES; i++) {
            size_t n = sizes[i] + (size_t)round * 12345;
            char *p = malloc(n);
            CHECKF(p != NULL, "malloc(%zu)", n);
            if (!p) continue;
            size_t u = usable_of("malloc", p, n);
            memset(p, 0x5a, u);
            CHECK(malloc_usable_size(p) == u);   /* writing it changed nothing */
            free(p);
        }
    }
    /* two live at once: neither's usable bytes reach the other */
    char *a = malloc(3000000), *b = malloc(3000000);
    CHECK(a && b);
    if (a && b) {
        size_t ua = usable_of("a", a, 3000000), ub = usable_of("b", b, 3000000);
        memset(a, 0x11, ua);
        memset(b, 0x22, ub);
        for (size_t k = 0; k < ua; k += 4093) if (a[k] != 0x11) { CHECKF(0, "a[%zu] overwritten", k); break; }
        CHECK(a[ua - 1] == 0x11 && b[ub - 1] == 0x22);
    }
    free(a);
    free(b);
}

/* realloc within the mapping: the same address (release, debug), the new
 * size recorded, the bytes written up to the old usable size kept; beyond
 * the mapping: the contents kept wherever the block goes */
static void test_realloc_in_place(void) {
    static const size_t steps[] = { 2300000, 3000000, 4 * MiB - 8192, 2200000, 2 * MiB - 100, 3500000,
                                    6 * MiB, 5000000, 13 * MiB, 2100000 };
    char *p = malloc(steps[0]);
    CHECK(p != NULL);
    if (!p) return;
    size_t u = usable_of("malloc", p, steps[0]);
    uint64_t seed = pat_seed(p, u, 1);
    pat_fill(p, u, seed);
    size_t kept = u;                 /* bytes whose pattern must survive */
    for (size_t i = 1; i < sizeof steps / sizeof steps[0]; i++) {
        size_t n = steps[i];
        /* hakmem's mapping: 768 bytes of header, then 4 MiB units */
        int fits = hakmem && !hardened && round_up(((uintptr_t)p & (4 * MiB - 1)) + n, 4 * MiB) <=
                                              round_up(((uintptr_t)p & (4 * MiB - 1)) + u, 4 * MiB);
        char *q = realloc(p, n);
        CHECKF(q != NULL, "realloc(%zu)", n);
        if (!q) break;
        if (fits) CHECKF(q == p, "realloc(%zu -> %zu) moved within its mapping", u, n);
        size_t keep = kept < n ? kept : n;
        size_t off = pat_check(q, keep, seed);
        CHECKF(off == PAT_OK, "realloc(-> %zu): byte %zu of %zu lost", n, off, keep);
        p = q;
        u = n > 2 * MiB ? usable_of("realloc", p, n) : malloc_usable_size(p);
        CHECK(u >= n);
        seed = pat_seed(p, u, i + 1);
        pat_fill(p, u, seed);          /* up to the new usable size */
        kept = u;
    }
    free(p);
}

/* aligned huge blocks: by size and by alignment (above 2 MiB: a mapping of
 * its own, the block at an offset of the alignment) */
static void test_aligned(void) {
    static const size_t aligns[] = { 64 * KiB, 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB };
    static const size_t asizes[] = { 100, 1 * MiB + 5, 3000000, 9 * MiB + 1 };
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        for (size_t s = 0; s < sizeof asizes / sizeof asizes[0]; s++) {
            size_t al = aligns[a], n = asizes[s];
            void *v = NULL;
            int rc = posix_memalign(&v, al, n);
            CHECKF(rc == 0 && v, "posix_memalign(%zu, %zu) = %d", al, n, rc);
            if (rc || !v) continue;
            char *p = v;
            CHECKF(((uintptr_t)p & (al - 1)) == 0, "posix_memalign(%zu, %zu) = %p", al, n, v);
            /* (hakmem: huge when size + alignment > 2 MiB; glibc's aligned
             * blocks may hold up to the alignment more) */
            int huge = hakmem && n + al > 2 * MiB;
            size_t u = huge ? usable_of("posix_memalign", p, n) : malloc_usable_size(p);
            CHECK(u >= n);
            memset(p, 0x3c, u);
            /* a growth its mapping holds stays (release, debug), whatever the
             * alignment: the block lies a multiple of 4 MiB past p & (4 MiB - 1)
             * into its mapping, which ends at the 4 MiB boundary after u; a
             * size of 2 MiB or less may move to an ordinary block) */
            size_t n2 = u + 2 * ps;
            uintptr_t off = (uintptr_t)p & (4 * MiB - 1);
            int fits = huge && !hardened && n2 > 2 * MiB && round_up(off + n2, 4 * MiB) == round_up(off + u, 4 * MiB);
            char *q = realloc(p, n2);
            CHECKF(q != NULL, "realloc(aligned %zu, %zu)", al, n2);
            if (!q) { free(p); continue; }
            if (fits) CHECKF(q == p, "aligned %zu: realloc(%zu -> %zu) moved within its mapping", al, u, n2);
            for (size_t k = 0; k < u; k += 4091) if ((unsigned char)q[k] != 0x3c) { CHECKF(0, "byte %zu lost", k); break; }
            CHECK((unsigned char)q[u - 1] == 0x3c);
            if (hakmem && n2 > 2 * MiB) usable_of("realloc aligned", q, n2);
            free(q);
        }
    }
    void *v = aligned_alloc(8 * MiB, 3000000);
    CHECK(v && ((uintptr_t)v & (8 * MiB - 1)) == 0);
    if (v) { memset(v, 1, hakmem ? usable_of("aligned_alloc", v, 3000000) : malloc_usable_size(v)); free(v); }
    v = memalign(4 * MiB, 5000000);
    CHECK(v && ((uintptr_t)v & (4 * MiB - 1)) == 0);
    if (v) { memset(v, 1, hakmem ? usable_of("memalign", v, 5000000) : malloc_usable_size(v)); free(v); }
}

/* calloc of a huge block that reuses a freed, dirty mapping: every usable
 * byte zero -- not only the size asked */
static void test_calloc(void) {
    static const size_t csizes[] = { 3000000, 2 * MiB + 1, 4 * MiB - 768, 5 * MiB + 3, 2500000 };
    for (size_t i = 0; i < sizeof csizes / sizeof csizes[0]; i++) {
        char *d = malloc(9 * MiB);
        CHECK(d != NULL);
        if (d) { memset(d, 0xa5, malloc_usable_size(d)); free(d); }
        size_t n = csizes[i];
        char *p = calloc(1, n);
        CHECKF(p != NULL, "calloc(%zu)", n);
        if (!p) continue;
        size_t u = usable_of("calloc", p, n);
        size_t off = pat_check_zero(p, u);
        CHECKF(off == PAT_OK, "calloc(%zu): byte %zu of %zu usable not zero", n, off, u);
        memset(p, 0x77, u);
        free(p);
    }
}

/* free_sized of a huge block: the size asked and the usable size are fine;
 * more than the usable size is reported (debug and hardened builds check
 * it; hardened wants exactly the size asked) */
typedef void (*free_sized_fn)(void *, size_t);
static void test_free_sized(void) {
    free_sized_fn fs = (free_sized_fn)hak_find_symbol("free_sized");
    if (!fs) { SKIP_TEST("no free_sized"); }
    for (size_t i = 0; i < NSIZES; i++) {
        size_t n = sizes[i];
        char *p = malloc(n);
        CHECK(p != NULL);
        if (p) fs(p, n);
        p = malloc(n);
        CHECK(p != NULL);
        if (p) fs(p, malloc_usable_size(p));
    }
    if (!hakmem || !(debug || hardened)) return;
    /* a size beyond the usable size: reported, in a child; and one page more
     * than the size asked, which the whole mapping used to let through */
    for (int k = 0; k < 2; k++) {
        size_t n = 2300000;
        pid_t pid = chk_fork(20);
        if (pid == 0) {
            char *p = malloc(n);
            size_t bad = k == 0 ? malloc_usable_size(p) + 1 : n + ps;
            close(2);                    /* (the report is expected) */
            fs(p, bad);
            _exit(0);                    /* not reported */
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "free_sized(p, %s) not reported (status %#x)",
               k == 0 ? "usable + 1" : "n + page", st);
    }
}

int main(int argc, char **argv) {
    if (chk_parse_options(argc, argv)) return 2;
    ps = (size_t)sysconf(_SC_PAGESIZE);
    hakmem = hak_find_owns() != NULL;
    hak_str_fn_t var = (hak_str_fn_t)hak_find_symbol("hakmem_build_variant");
    const char *v = hakmem && var ? var() : "none";
    hardened = !strcmp(v, "hardened");
    debug = !strcmp(v, "debug");
    printf("# allocator: %s (%s)\n", hakmem ? "hakmem" : "not hakmem", v);
    if (chk_expect_hakmem >= 0 && chk_expect_hakmem != hakmem) {
        printf("FAIL %s.served: hakmem %s the allocator\n", chk_prefix, hakmem ? "is" : "is not");
        return 1;
    }
    RUN_TEST(usable_sizes);
    RUN_TEST(realloc_in_place);
    RUN_TEST(aligned);
    RUN_TEST(calloc);
    RUN_TEST(free_sized);
    return check_exit_code();
}
