/* test_hardened.c -- the hardened build (make hardened, docs/security.md,
 * "The hardened build"), run by tests/suite_hardened.sh under
 * LD_PRELOAD=build/hardened/libhakmem.so.
 *   test_hardened CASE    one misuse per run: the suite checks hakmem's
 *                         report and SIGABRT; "SURVIVED" means it ran on
 *   test_hardened [-t TEST] [-p PREFIX]
 *                         the correct programs (check.h): they must run clean
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "check.h"

/* the misuse cases write outside their blocks on purpose */
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"

static void *volatile sink;

/* ---- misuse, one per run ---- */

/* Free blocks of size n until p has left the quarantine: its key word (the
 * free list's second word) is set then; it is 0 while quarantined. */
static int evict(void *p, size_t n) {
    for (int i = 0; i < 100000; i++) {
        if (((volatile uint64_t *)p)[1] != 0) return 1;
        free(malloc(n));
    }
    return 0;
}

/* complete reports (issue 37): each misuse made by a function of its own,
 * never inlined and never a tail call, which the report's stack must name */
#define REPORT_FN __attribute__((noinline, used))
#define NO_TAIL() __asm__ volatile("" ::: "memory")
REPORT_FN void report_free_block(void *p) { free(p); NO_TAIL(); }
REPORT_FN void report_mallocs(size_t n) { for (int i = 0; i < 100000; i++) sink = malloc(n); NO_TAIL(); }
REPORT_FN void report_churn(size_t n) { for (int i = 0; i < 100000; i++) free(malloc(n)); NO_TAIL(); }
REPORT_FN void report_write_far(volatile char *p, size_t i) { p[i] = 1; NO_TAIL(); }

static int misuse(const char *c) {
    if (!strcmp(c, "overflow_canary")) {          /* one byte into the canary */
        char *p = malloc(13); sink = p;
        p[13] = 'x';
        free(p);
    } else if (!strcmp(c, "overflow_canary_short")) {   /* a canary of 4 bytes, its last one */
        char *p = malloc(20); sink = p;
        p[23] = 'x';
        free(p);
    } else if (!strcmp(c, "overflow_canary_byte")) {    /* a canary of 1 byte: the 0 */
        char *p = malloc(23); sink = p;
        p[23] = 'x';
        free(p);
    } else if (!strcmp(c, "overflow_canary_long")) {    /* the last byte of a canary of 16 */
        char *p = malloc(520); sink = p;                 /* (a slot of 576: 48 bytes to the trailer) */
        p[535] = 'x';
        free(p);
    } else if (!strcmp(c, "overflow_past_canary")) {    /* past the canary, into the slot's rest: */
        char *p = malloc(520); sink = p;                 /* seen when the block leaves the quarantine */
        p[550] = 'x';
        free(p);
        for (int i = 0; i < 100000; i++) free(malloc(520));
    } else if (!strcmp(c, "overflow_tail_large")) {  /* 32 bytes past a 256 KiB block: past the */
        size_t n = (size_t)256 << 10;                  /* canary, in the slot's 32 KiB tail; seen at free */
        char *p = malloc(n); sink = p;
        p[n + 32] = 'x';
        free(p);
    } else if (!strcmp(c, "overflow_tail_realloc")) {  /* the same in a 5,000-byte block, then realloc */
        char *p = malloc(5000); sink = p;              /* (a slot of 5,120: its tail from 5,016) */
        p[5100] = 'x';
        sink = realloc(p, 4800);
    } else if (!strcmp(c, "overflow_trailer")) {  /* no canary bytes: into the size word */
        char *p = malloc(24); sink = p;
        p[24] = 'x';
        free(p);
    } else if (!strcmp(c, "overflow_realloc")) {
        char *p = malloc(100); sink = p;
        p[100] = 'x';
        sink = realloc(p, 1000);
    } else if (!strcmp(c, "underflow")) {         /* into the previous block's size word */
        enum { N = 256 };                         /* (fresh blocks come in random order) */
        static char *v[N];
        for (int i = 0; i < N; i++) v[i] = malloc(40);
        char *a = NULL, *b = NULL;
        for (int i = 0; i < N && !a; i++)
            for (int j = 0; j < N; j++)
                if (v[j] == v[i] + 48) { a = v[i]; b = v[j]; break; }
        if (!a) { printf("no adjacent blocks\n"); return 3; }
        b[-1] = 'x';
        free(a);
    } else if (!strcmp(c, "underflow_large")) {   /* before a large page's first block */
        char *p = malloc((size_t)256 << 10); sink = p;
        if (((uintptr_t)p & 0xffff) != 0) { printf("block not at a page's start\n"); return 3; }
        p[-1] = 'x';
        free(p);
    } else if (!strcmp(c, "write_after_free_reuse")) {
        /* out of the quarantine, back on the free list, written: reported
         * when malloc would hand it out again */
        char *p = malloc(64); sink = p;
        free(p);
        if (!evict(p, 64)) { printf("never left the quarantine\n"); return 3; }
        p[40] = 'x';
        for (int i = 0; i < 100000; i++) sink = malloc(64);
    } else if (!strcmp(c, "write_after_free_quarantine")) {
        char *p = malloc(64); sink = p;
        free(p);
        p[40] = 'x';
        for (int i = 0; i < 100000; i++) free(malloc(64));
    } else if (!strcmp(c, "write_after_free_far")) {
        /* past the probe's and the reuse check's first bytes: reported when
         * the block leaves the quarantine, which checks all of it */
        char *p = malloc(1000); sink = p;
        free(p);
        p[900] = 'x';
        for (int i = 0; i < 100000; i++) free(malloc(1000));
    } else if (!strcmp(c, "report_overflow")) {  /* found by free */
        char *p = malloc(13); sink = p;
        p[13] = 'x';
        report_free_block(p);
    } else if (!strcmp(c, "report_probe")) {     /* found by malloc's probe of the quarantine */
        char *p = malloc(64); sink = p;
        free(p);
        p[0] = 'x';
        report_mallocs(4096);
    } else if (!strcmp(c, "report_quarantine")) {   /* found as the block leaves the quarantine */
        char *p = malloc(64); sink = p;
        free(p);
        p[40] = 'x';
        report_churn(64);
    } else if (!strcmp(c, "report_reuse")) {     /* found by the malloc that would hand it out */
        char *p = malloc(64); sink = p;
        free(p);
        if (!evict(p, 64)) { printf("never left the quarantine\n"); return 3; }
        p[40] = 'x';
        report_mallocs(64);
    } else if (!strcmp(c, "report_far")) {       /* 1 MiB past a block: past the segment's first MiB */
        volatile char *p = malloc(100); sink = (void *)p;
        report_write_far(p, 100 + ((size_t)1 << 20));
    } else if (!strcmp(c, "huge_use_after_free")) {  /* cached, but out of reach */
        char *p = malloc((size_t)3 << 20); sink = p;
        free(p);
        p[100] = 'x';
    } else if (!strcmp(c, "huge_guard_reused")) {  /* a reused mapping keeps its guards */
        size_t n = (size_t)3 << 20;
        char *p = malloc(n + 100000); sink = p;
        free(p);
        p = malloc(n); sink = p;
        p[n + 16] = 'x';
    } else if (!strcmp(c, "double_free")) {
        char *p = malloc(40); sink = p;
        free(p); free(p);
    } else if (!strcmp(c, "delete_malloc")) {
        void (*del)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdlPv");
        char *p = malloc(40); sink = p;
        del(p);
    } else if (!strcmp(c, "sized_delete")) {      /* exact: 40 allocated, 48 passed */
        void *(*nw)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
        void (*del)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
        void *p = nw(40); sink = p;
        del(p, 48);
    } else if (!strcmp(c, "huge_guard")) {        /* the byte after a huge block's slot */
        size_t n = (size_t)3 << 20;
        char *p = malloc(n); sink = p;
        size_t slot = n + 16;                     /* n + the trailer, 16-aligned */
        p[slot] = 'x';
    } else if (!strcmp(c, "segment_guard")) {     /* the page after a segment's header */
        char *p = malloc(16); sink = p;
        char *seg = (char *)((uintptr_t)p & ~(((uintptr_t)4 << 20) - 1));
        seg[16 << 10] = 'x';
    } else {
        printf("unknown case %s\n", c);
        return 2;
    }
    printf("SURVIVED\n");
    return 0;
}

/* ---- correct programs ---- */

static const size_t sizes[] = { 0, 1, 7, 8, 9, 15, 16, 17, 24, 100, 1000, 4096, 5000, 70000,
                                300000, (size_t)2 << 20, (size_t)3 << 20 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* malloc_usable_size is the size asked; a zero byte follows the block */
static void test_usable_zero_byte(void) {
    for (size_t i = 0; i < NSIZES; i++) {
        size_t n = sizes[i];
        char *p = malloc(n);
        CHECKF(p != NULL, "malloc(%zu)", n);
        if (!p) continue;
        CHECKF(malloc_usable_size(p) == n, "usable %zu for %zu", malloc_usable_size(p), n);
        memset(p, 'a', n);
        /* (a block of size 0 has no byte to read: it faults, hak_zero.c) */
        if (n) CHECKF(strlen(p) == n, "strlen %zu for a block of %zu", strlen(p), n);
        free(p);
    }
}

/* A reused huge block whose last owner wrote only some of its pages: the
 * zeroing skips the pages that were never touched (they read as zero
 * anyway, hak_os_zero_touched), and must still clear every page written.
 * Each round writes a different third of the pages, then checks the next
 * block of the size (the same mapping, from the cache) at every line. */
static void test_huge_reuse_sparse(void) {
    const size_t n = (size_t)6 << 20, ps = 4096;
    void *keep = malloc((size_t)3 << 20);       /* a huge block in use: the cache keeps what is freed */
    for (int round = 0; round < 6; round++) {
        unsigned char *p = malloc(n);
        CHECKF(p != NULL, "malloc(%zu)", n);
        if (!p) continue;
        size_t bad = 0;
        for (size_t j = 0; j < n; j += 64) bad += p[j] != 0 || p[j + 63] != 0;
        CHECKF(bad == 0, "a reused huge block (round %d) shows %zu non-zero lines", round, bad);
        for (size_t pg = (size_t)round % 3; pg * ps < n; pg += 3) memset(p + pg * ps, 0xcd, ps);
        free(p);
    }
    free(keep);
}

/* Small blocks at alignments of 1 to 16 MiB: those of 4 MiB and more are
 * huge blocks (a mapping of their own) of a few bytes, which free must
 * know by their segment, not their size (SIGSEGV before 2026-11-26). */
static void test_aligned_huge(void) {
    static const size_t sz[] = { 1, 100, 5000, 300000 };
    for (size_t a = (size_t)1 << 20; a <= (size_t)16 << 20; a *= 2) {
        void *v[4];
        for (int i = 0; i < 4; i++) {
            v[i] = NULL;
            CHECKF(posix_memalign(&v[i], a, sz[i]) == 0, "posix_memalign(%zu, %zu)", a, sz[i]);
            if (!v[i]) continue;
            CHECKF(((uintptr_t)v[i] & (a - 1)) == 0, "%p not aligned to %zu", v[i], a);
            CHECKF(malloc_usable_size(v[i]) == sz[i], "usable %zu for %zu", malloc_usable_size(v[i]), sz[i]);
            memset(v[i], 0x33, sz[i]);
        }
        for (int i = 0; i < 4; i++) free(v[i]);
    }
}

/* Free blocks until every block freed before has left the quarantine (and
 * been checked whole there). */
static void flush_quarantine(void) {
    for (int i = 0; i < 1000; i++) free(malloc(4000));
}

/* every size up to 600 bytes (canaries of every length): all of the block
 * written, its usable size, the 0 after it, realloc in place and freed with
 * no report; the bytes around a block are the neighbours' own */
static void test_canary_every_length(void) {
    static unsigned char *v[601];
    for (size_t n = 1; n <= 600; n++) {
        v[n] = malloc(n);
        CHECKF(v[n] != NULL, "malloc(%zu)", n);
        memset(v[n], (int)(n & 0x7f) | 1, n);
        CHECKF(malloc_usable_size(v[n]) == n, "usable %zu for %zu", malloc_usable_size(v[n]), n);
        CHECKF(strnlen((char *)v[n], n + 1) == n, "no 0 after a block of %zu", n);
    }
    for (size_t n = 1; n <= 600; n++) {
        size_t bad = 0;
        for (size_t j = 0; j < n; j++) bad += v[n][j] != ((n & 0x7f) | 1);
        CHECKF(bad == 0, "a block of %zu bytes changed in %zu bytes", n, bad);
        if (n % 3 == 0) v[n] = realloc(v[n], n - n / 4);   /* kept in place, sealed again */
        free(v[n]);
    }
    flush_quarantine();                         /* each checked whole as it leaves */
}

/* Blocks in slots above 2 KiB have their whole tail past the canary
 * checked at free (and at realloc): every length from 2,041 to 5,000 bytes
 * and around 256 KiB, written whole, realloc'd in place and freed, with no
 * report. */
static void test_tail_every_length(void) {
    for (size_t n = 2041; n <= 5000; n++) {
        char *p = malloc(n);
        CHECKF(p != NULL, "malloc(%zu)", n);
        if (!p) continue;
        memset(p, 0x77, n);
        if (n % 5 == 0) p = realloc(p, n - n / 8);
        free(p);
    }
    for (size_t n = ((size_t)256 << 10) - 70; n <= ((size_t)256 << 10) + 70; n += 7) {
        char *p = malloc(n);
        CHECKF(p != NULL, "malloc(%zu)", n);
        if (!p) continue;
        memset(p, 0x77, n);
        free(p);
    }
}

/* Fill pages with blocks of 24 bytes (slots of 32), free them all and let
 * them leave the quarantine: their pages are empty, with the blocks'
 * free-list words left in them, for larger classes to be carved on. */
static void leave_small_free_words(void) {
    enum { N = 20000 };
    static char *v[N];
    for (int i = 0; i < N; i++) v[i] = malloc(24);
    for (int i = 0; i < N; i++) free(v[i]);
    flush_quarantine();
}

/* Pages that held small blocks, emptied and carved again for larger ones:
 * the small blocks' free-list words lie in the larger blocks' slots past
 * their canaries, where free does not zero; the quarantine accepts them
 * (and clears them) -- no report.  Then every such block shrunk in place
 * by realloc and freed: also no report. */
static void test_pages_carved_again(void) {
    enum { M = 3000 };
    static char *v[M];
    for (int round = 0; round < 3; round++) {
        leave_small_free_words();
        for (int i = 0; i < M; i++) {
            size_t n = 100 + (size_t)(i % 7) * 30 + (size_t)round * 200;
            v[i] = malloc(n);
            CHECKF(v[i] != NULL, "malloc(%zu)", n);
            memset(v[i], 0x5a, n);
        }
        for (int i = 0; i < M; i++) {
            if (i % 2) v[i] = realloc(v[i], 90 + (size_t)round * 200);
            free(v[i]);
        }
        flush_quarantine();
    }
}

/* The same, then blocks of 2,527 bytes (slots of 2,560, on the small
 * blocks' old pages) shrunk in place to 1,287 and freed: the shrink zeroes
 * the old size's bytes and canary, which end at byte 2,543, across a
 * 24-byte block's free-list key word left at 2,536 (both classes' slots
 * are multiples of 32).  Cut in two, that word was taken for a write after
 * free when the block left the quarantine (a fuzzer input, 2026-11-26). */
static void test_shrink_over_old_words(void) {
    enum { M = 400 };
    static char *v[M];
    for (int round = 0; round < 3; round++) {
        leave_small_free_words();
        for (int i = 0; i < M; i++) {
            v[i] = malloc(2527);
            CHECKF(v[i] != NULL, "malloc(2527)");
            if (!v[i]) continue;
            memset(v[i], 0x5a, 2527);
            char *q = realloc(v[i], 1287);
            CHECKF(q == v[i], "realloc(2527 -> 1287) moved the block");
            v[i] = q;
        }
        for (int i = 0; i < M; i++) free(v[i]);
        flush_quarantine();
    }
}

/* ---- new blocks are zero (issue 37) ---- */

/* The first non-zero byte of [p, p + n), or -1. */
static long first_nonzero(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return (long)i;
    return -1;
}

/* The new blocks of size n among v[0..k): non-zero ones counted, and the
 * first one's first bad word kept for the report. */
static size_t count_nonzero(unsigned char **v, size_t k, size_t n, long *off, uint64_t *word) {
    size_t bad = 0;
    for (size_t i = 0; i < k; i++) {
        if (!v[i]) continue;
        long o = first_nonzero(v[i], n);
        if (o < 0) continue;
        if (bad++ == 0) {
            *off = o;
            *word = 0;
            memcpy(word, v[i] + (o & ~7L), n - (size_t)(o & ~7L) < 8 ? n - (size_t)(o & ~7L) : 8);
        }
    }
    return bad;
}

static unsigned char *zv[4096];
static size_t zv_k;
static void *free_all_zv(void *arg) {
    (void)arg;
    for (size_t i = 0; i < zv_k; i++) free(zv[i]);
    return NULL;
}

/* The program: 4,096 blocks filled, all freed, 64 allocated again.
 * Before: 64 of 64 non-zero for 16 and 48 bytes, the first word a heap
 * address (the free list's link); 57-58 of 64 for 4,096 bytes. */
static void test_zero_after_reuse(void) {
    static const size_t sz[] = { 16, 48, 4096 };
    for (size_t s = 0; s < 3; s++) {
        size_t n = sz[s];
        for (int i = 0; i < 4096; i++) { zv[i] = malloc(n); memset(zv[i], 0xab, n); }
        for (int i = 0; i < 4096; i++) free(zv[i]);
        for (int i = 0; i < 64; i++) zv[i] = malloc(n);
        long off = -1; uint64_t w = 0;
        size_t bad = count_nonzero(zv, 64, n, &off, &w);
        CHECKF(bad == 0, "%zu of 64 new blocks of %zu bytes not zero (first at offset %ld: word %#llx)",
               bad, n, off, (unsigned long long)w);
        for (int i = 0; i < 64; i++) free(zv[i]);
    }
}

/* Every size class, with the largest and the smallest request it serves:
 * blocks filled and freed (by this thread, then by another one), pushed out
 * of the quarantine, the same number allocated again -- most of them the
 * freed ones, or carved where another class's page was -- and each must
 * be zero from its first byte to its last: no link, no key, no canary byte
 * and none of the last owner's data.  Then realloc in place, growing over
 * the old canary, and shrinking and growing again: the bytes the block
 * gains are zero too. */
static void test_zero_every_class(void) {
    size_t cls[128], ncls = chk_class_sizes(cls), reused = 0, total = 0;
    for (size_t c = 0; c < ncls; c++) {
        size_t s = cls[c], prev = c ? cls[c - 1] : 0;
        size_t ns[2] = { s - 8, prev + 1 > 8 ? prev + 1 - 8 : 1 };
        for (int which = 0; which < 2; which++) {
            size_t n = ns[which], k = s <= 4096 ? 256 : s <= 65536 ? 16 : 4;
            for (int by_thread = 0; by_thread < 2; by_thread++) {
                for (size_t i = 0; i < k; i++) {
                    zv[i] = malloc(n);
                    CHECKF(zv[i] != NULL, "malloc(%zu)", n);
                    if (zv[i]) memset(zv[i], 0xa5, n);
                }
                static unsigned char *old[4096];
                memcpy(old, zv, k * sizeof *zv);
                zv_k = k;
                if (by_thread) {                  /* remote frees (the thread's quarantine empties at its exit) */
                    pthread_t t;
                    pthread_create(&t, NULL, free_all_zv, NULL);
                    pthread_join(t, NULL);
                } else {
                    free_all_zv(NULL);
                }
                flush_quarantine();
                for (size_t i = 0; i < k; i++) zv[i] = malloc(n);
                long off = -1; uint64_t w = 0;
                size_t bad = count_nonzero(zv, k, n, &off, &w);
                CHECKF(bad == 0, "class %zu, %zu bytes%s: %zu of %zu new blocks not zero (first at offset %ld: "
                       "word %#llx)", s, n, by_thread ? ", freed by a thread" : "", bad, k, off,
                       (unsigned long long)w);
                for (size_t i = 0; i < k; i++)
                    for (size_t j = 0; j < k; j++) reused += zv[i] == old[j];
                total += k;
                for (size_t i = 0; i < k; i++) free(zv[i]);
            }
        }
        /* realloc in place: up from 16 bytes less (over the old canary),
         * down to half and up again */
        size_t n = s - 8, m = n > 24 ? n - 16 : 1;
        unsigned char *p = malloc(m);
        memset(p, 0x5a, m);
        unsigned char *q = realloc(p, n);
        CHECKF(q != NULL, "realloc(%zu -> %zu)", m, n);
        if (!q) continue;
        long o = first_nonzero(q + m, n - m);
        CHECKF(o < 0, "class %zu: realloc %zu -> %zu%s: byte %ld of the new part not zero (%#x)", s, m, n,
               q == p ? " in place" : "", o + (long)m, o < 0 ? 0 : q[m + (size_t)o]);
        memset(q, 0x5a, n);
        size_t h = n / 2 + 8 < n ? n / 2 + 8 : n;
        p = realloc(q, h);
        q = realloc(p, n);
        CHECKF(q != NULL, "realloc(%zu -> %zu)", h, n);
        if (!q) continue;
        o = first_nonzero(q + h, n - h);
        CHECKF(o < 0, "class %zu: realloc %zu -> %zu -> %zu: byte %ld of the new part not zero", s, n, h, n,
               o + (long)h);
        free(q);
    }
    printf("# %zu of %zu new blocks were freed ones\n", reused, total);
    CHECKF(reused > total / 4, "only %zu of %zu new blocks were reused: the test did not test reuse", reused, total);
}

/* A public heap's blocks are not hardened (docs/security.md): destroyed,
 * its pages go back with its data in them.  The second heap destroyed
 * gives its segments to the cache (the first is kept for the next
 * hakmem_heap_new), and the blocks malloc carves there must be zero. */
static void test_zero_after_heap_destroy(void) {
    void *(*heap_new)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "hakmem_heap_new");
    void *(*heap_malloc)(void *, size_t) = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_heap_malloc");
    void (*heap_destroy)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "hakmem_heap_destroy");
    CHECK(heap_new && heap_malloc && heap_destroy);
    if (!heap_new || !heap_malloc || !heap_destroy) return;
    enum { N = 3000 };
    static const size_t sz[] = { 100, 3000, 20000, 200000 };
    static uintptr_t lo[4], hi[4];
    void *a = heap_new(), *b = heap_new();
    for (int s = 0; s < 4; s++) {
        lo[s] = UINTPTR_MAX; hi[s] = 0;
        for (int i = 0; i < (s < 2 ? N : 60); i++) {
            unsigned char *p = heap_malloc(b, sz[s]);
            CHECK(p != NULL);
            if (!p) break;
            memset(p, 0xee, sz[s]);
            if ((uintptr_t)p < lo[s]) lo[s] = (uintptr_t)p;
            if ((uintptr_t)p + sz[s] > hi[s]) hi[s] = (uintptr_t)p + sz[s];
        }
        sink = heap_malloc(a, sz[s]);
    }
    heap_destroy(a);
    heap_destroy(b);
    size_t bad = 0, inside = 0;
    static unsigned char *v[N];
    for (int s = 0; s < 4; s++) {
        int k = s < 2 ? N : 60;
        for (int i = 0; i < k; i++) {
            v[i] = malloc(sz[s] - 8);
            CHECK(v[i] != NULL);
            if (!v[i]) continue;
            inside += (uintptr_t)v[i] >= lo[s] && (uintptr_t)v[i] < hi[s];
            bad += first_nonzero(v[i], sz[s] - 8) >= 0;
        }
        for (int i = 0; i < k; i++) free(v[i]);
    }
    printf("# %zu new blocks where the destroyed heap's were\n", inside);
    CHECKF(bad == 0, "%zu new blocks not zero", bad);
    if (inside == 0) SKIP_TEST("no block came where the destroyed heap's were");
}

/* ---- far overflows (issue 37) ---- */

/* In a child: a block of n bytes among others of its size (so that pages
 * around it are in use), then one write `how` far from it: 1 MiB past its
 * end, or 1 MiB before its start, by a store or by memcpy.  It must fault
 * (a segment holds pages in its first MiB only; a huge block's mapping
 * keeps a MiB and more no-access after it).  Returns the child's status. */
static int far_write(size_t n, int before, int by_memcpy) {
    pid_t pid = chk_fork(30);
    if (pid < 0) return -1;
    if (pid == 0) {
        close(2);   /* (any crash report; not by opening /dev/null: hostile.seccomp.* kills an open) */
        static char *v[64];
        int k = n <= 4096 ? 64 : n <= 65536 ? 24 : 3;
        for (int i = 0; i < k; i++) v[i] = malloc(n);
        for (int i = 0; i < 300; i++) sink = malloc((size_t)(i * 97 % 9000) + 1);   /* other classes' pages */
        char *p = v[k / 2];
        char *at = before ? p - ((size_t)1 << 20) - 32 : p + n + ((size_t)1 << 20);
        static const char src[32] = "far away";
        if (by_memcpy) memcpy(at, src, 32);   /* (inlined: the checked memcpy would report it first) */
        else *(volatile char *)at = 'x';
        _exit(0);
    }
    return chk_status(pid);
}

static void test_far_writes(void) {
    size_t cls[128], ncls = chk_class_sizes(cls), n_sizes = 0;
    static size_t sizes[160];
    for (size_t c = 0; c < ncls; c++) sizes[n_sizes++] = cls[c] - 8;
    static const size_t huge[] = { (size_t)1 << 20, (size_t)3 << 19, (size_t)3 << 20, (size_t)5 << 20 };
    for (size_t i = 0; i < 4; i++) sizes[n_sizes++] = huge[i];
    size_t missed = 0;
    for (size_t i = 0; i < n_sizes; i++)
        for (int how = 0; how < 3; how++) {
            int before = how == 2, by_memcpy = how == 1;
            int st = far_write(sizes[i], before, by_memcpy);
            bool faulted = WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
            missed += !faulted;
            CHECKF(faulted, "a write 1 MiB %s a block of %zu bytes (%s) %s", before ? "before" : "past", sizes[i],
                   by_memcpy ? "memcpy" : "store",
                   WIFEXITED(st) ? "landed unseen" : WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "?");
        }
    printf("# far writes: %zu of %zu did not fault\n", missed, n_sizes * 3);
}

/* fresh blocks of a class are not handed out in address order */
static void test_fresh_order_random(void) {
    enum { N = 200 };
    char *v[N];
    int ascending = 0;
    for (int i = 0; i < N; i++) v[i] = malloc(32);
    for (int i = 1; i < N; i++) ascending += v[i] > v[i - 1] && v[i] - v[i - 1] <= 64;
    CHECKF(ascending < N / 4, "%d of %d consecutive blocks are neighbours", ascending, N - 1);
    for (int i = 0; i < N; i++) free(v[i]);
}

/* a freed block is zero, and does not come back at once */
static void test_quarantine_delays_reuse(void) {
    unsigned char *p = malloc(48);
    memset(p, 0xa5, 48);
    free(p);
    int nonzero = 0;
    for (int i = 0; i < 48; i++) nonzero |= ((volatile unsigned char *)p)[i];
    CHECKF(nonzero == 0, "freed block not zeroed");
    void *q[100];
    for (int i = 0; i < 100; i++) {
        q[i] = malloc(48);
        CHECKF(q[i] != p, "the freed block came back at malloc %d", i);
    }
    for (int i = 0; i < 100; i++) free(q[i]);
}

/* A freed huge mapping is cached (all but its header inaccessible) and
 * comes back for a later huge block: zeroed, every byte writable, whatever
 * the new block's size and place in it (one cached mapping split in two). */
static void test_huge_reuse(void) {
    static const size_t sz[] = { (size_t)3 << 20, (size_t)5 << 19, (size_t)3 << 20, (size_t)7 << 20,
                                 (size_t)3 << 20, (size_t)3 << 20, (size_t)9 << 19 };
    void *keep = malloc((size_t)3 << 20);       /* a huge block in use: the cache keeps what is freed */
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
            size_t n = sz[i];
            unsigned char *p = malloc(n);
            CHECKF(p != NULL, "malloc(%zu)", n);
            if (!p) continue;
            size_t bad = 0;
            for (size_t j = 0; j < n; j += 64) bad += p[j] != 0 || p[j + 63 < n ? j + 63 : n - 1] != 0;
            CHECKF(bad == 0, "a huge block of %zu bytes (round %d) shows %zu non-zero lines", n, round, bad);
            memset(p, 0xab, n);
            CHECK(malloc_usable_size(p) == n);
            free(p);
        }
    free(keep);
}

/* A public heap's huge block grown and shrunk by hakmem_heap_realloc: the
 * hardened build moves it by copying (growing its mapping in place ran the
 * block into its own guard pages: SIGSEGV on the first write there) */
static void test_heap_huge_realloc(void) {
    void *(*heap_new)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "hakmem_heap_new");
    void *(*heap_malloc)(void *, size_t) = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_heap_malloc");
    void *(*heap_realloc)(void *, void *, size_t) =
        (void *(*)(void *, void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_heap_realloc");
    CHECK(heap_new && heap_malloc && heap_realloc);
    if (!heap_new || !heap_malloc || !heap_realloc) return;
    void *h = heap_new();
    size_t n = (size_t)3 << 20;
    unsigned char *p = heap_malloc(h, n);
    CHECK(p != NULL);
    if (!p) return;
    memset(p, 1, n);
    static const size_t to[] = { (size_t)4 << 20, (size_t)9 << 20, (size_t)5 << 20, (size_t)13 << 20 };
    for (size_t i = 0; i < sizeof to / sizeof to[0]; i++) {
        unsigned char *q = heap_realloc(h, p, to[i]);
        CHECKF(q != NULL, "hakmem_heap_realloc to %zu", to[i]);
        if (!q) return;
        size_t kept = n < to[i] ? n : to[i], bad = 0;
        for (size_t j = 0; j < kept; j += 4096) bad += q[j] != (unsigned char)(i + 1);
        CHECKF(bad == 0, "%zu pages lost their bytes at %zu", bad, to[i]);
        memset(q, (int)(i + 2), to[i]);
        p = q;
        n = to[i];
    }
}

static void test_realloc_growth(void) {
    size_t n = 1;
    unsigned char *p = malloc(n);
    p[0] = 0;
    while (n < ((size_t)5 << 20)) {
        size_t m = n + n / 3 + 1;
        p = realloc(p, m);
        CHECKF(p != NULL, "realloc to %zu", m);
        if (!p) return;
        for (size_t i = 0; i < n; i += 97) CHECKF(p[i] == (unsigned char)i, "byte %zu lost growing to %zu", i, m);
        for (size_t i = n; i < m; i++) p[i] = (unsigned char)i;
        CHECK(malloc_usable_size(p) == m);
        n = m;
    }
    while (n > 1) {                                /* shrinking, in place or not */
        n /= 3;
        p = realloc(p, n);
        CHECK(malloc_usable_size(p) == n);
        for (size_t i = 0; i < n; i += 97) CHECKF(p[i] == (unsigned char)i, "byte %zu lost shrinking", i);
    }
    free(p);
}

static void test_calloc_zeroed(void) {
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < NSIZES; i++) {
            size_t n = sizes[i];
            unsigned char *p = calloc(1, n);
            CHECKF(p != NULL || n == 0, "calloc(%zu)", n);
            if (!p) continue;
            size_t bad = 0;
            for (size_t k = 0; k < n; k++) bad += p[k] != 0;
            CHECKF(bad == 0, "calloc(%zu): %zu bytes not zero", n, bad);
            memset(p, 0x5a, n);
            free(p);
        }
}

static void test_aligned(void) {
    for (size_t a = 16; a <= ((size_t)1 << 20); a *= 4)
        for (size_t i = 0; i < NSIZES; i++) {
            size_t n = sizes[i];
            void *p = NULL;
            CHECKF(posix_memalign(&p, a, n) == 0, "posix_memalign(%zu, %zu)", a, n);
            CHECKF(((uintptr_t)p & (a - 1)) == 0, "posix_memalign(%zu, %zu): %p", a, n, p);
            CHECK(malloc_usable_size(p) == n);
            memset(p, 1, n);
            free(p);
            char *q = aligned_alloc(a, n);
            CHECK(q != NULL && ((uintptr_t)q & (a - 1)) == 0);
            if (q) memset(q, 2, n);
            free(q);
        }
}

static void *cross_alloc(void *arg) {
    void **v = arg;
    for (int i = 0; i < 1000; i++) {
        v[i] = malloc((size_t)(i * 37 % 3000));
        memset(v[i], 3, (size_t)(i * 37 % 3000));
    }
    return NULL;
}
static void *cross_free(void *arg) {
    void **v = arg;
    for (int i = 0; i < 1000; i++) free(v[i]);
    return NULL;
}
static void test_cross_thread(void) {
    static void *v[1000];
    for (int round = 0; round < 5; round++) {
        pthread_t t;
        pthread_create(&t, NULL, cross_alloc, v);   /* allocated there, freed here */
        pthread_join(t, NULL);
        cross_free(v);
        cross_alloc(v);                              /* and the other way */
        pthread_create(&t, NULL, cross_free, v);
        pthread_join(t, NULL);
    }
}

static void test_fork(void) {
    void *keep[100];
    for (int i = 0; i < 100; i++) keep[i] = malloc(64);
    for (int i = 0; i < 50; i++) free(keep[i]);       /* some in the quarantine */
    pid_t pid = chk_fork(30);
    if (pid == 0) {
        for (int i = 50; i < 100; i++) free(keep[i]);
        for (int i = 0; i < 10000; i++) free(malloc((size_t)(i % 500)));
        _exit(0);
    }
    if (pid > 0) chk_wait(pid, "fork child", 0);
    for (int i = 50; i < 100; i++) free(keep[i]);
}

static long maps_count(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int ch;
    if (!f) return -1;
    while ((ch = fgetc(f)) != EOF) n += ch == '\n';
    fclose(f);
    return n;
}

/* 60,000 live blocks of 16 B .. 64 KiB and 40 huge ones: the guard pages
 * add a few mappings per segment and per huge block, not per block */
static void test_maps_bounded(void) {
    enum { N = 60000, H = 40 };
    static void *v[N], *h[H];
    long before = maps_count();
    uint64_t x = 88172645463325252u;
    for (int i = 0; i < N; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t n = (size_t)16 << (x % 13);
        v[i] = malloc(n % 1000 + n / 2);
        CHECK(v[i] != NULL);
    }
    for (int i = 0; i < H; i++) h[i] = malloc(((size_t)3 << 20) + (size_t)i * 4096);
    long after = maps_count();
    printf("# maps: %ld before, %ld with %d blocks and %d huge ones\n", before, after, N, H);
    CHECKF(after - before < 2000, "%ld mappings more", after - before);
    for (int i = 0; i < N; i++) free(v[i]);
    for (int i = 0; i < H; i++) free(h[i]);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 2 && argv[1][0] != '-') return misuse(argv[1]);
    if (chk_parse_options(argc, argv)) return 2;
    RUN_TEST(usable_zero_byte);
    RUN_TEST(quarantine_delays_reuse);
    RUN_TEST(fresh_order_random);
    RUN_TEST(zero_after_reuse);
    RUN_TEST(zero_every_class);
    RUN_TEST(zero_after_heap_destroy);
    RUN_TEST(far_writes);
    RUN_TEST(canary_every_length);
    RUN_TEST(tail_every_length);
    RUN_TEST(pages_carved_again);
    RUN_TEST(shrink_over_old_words);
    RUN_TEST(huge_reuse);
    RUN_TEST(huge_reuse_sparse);
    RUN_TEST(heap_huge_realloc);
    RUN_TEST(realloc_growth);
    RUN_TEST(calloc_zeroed);
    RUN_TEST(aligned);
    RUN_TEST(aligned_huge);
    RUN_TEST(cross_thread);
    RUN_TEST(fork);
    RUN_TEST(maps_bounded);
    return check_exit_code();
}
