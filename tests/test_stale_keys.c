/* test_stale_keys.c -- misuse checks never accuse a correct program (issue
 * 28, fault 5).  A page slot that held free blocks of one size class is
 * carved again for another class of its page kind; the free blocks' key
 * words are left in the new blocks' uninitialized bytes.  A correct program
 * may move those bytes around inside its block (here: each word in turn to
 * word 1, where a free block keeps its key) and then free, realloc or ask
 * malloc_usable_size about the block: hakmem must not report a double free.
 * Before the fix a page's key was the same for every incarnation of its
 * descriptor, and this aborted with "free(): double free".
 *
 * destroyed_heap_marks does the same with the marks of aligned blocks.
 *
 * Run under LD_PRELOAD=libhakmem.so with HAKMEM_PURGE_DELAY_MS=-1 and
 * HAKMEM_PURGE_BUDGET_KB=-1 (suite_misuse.sh), so that freed slots keep
 * their bytes; every pair checks that its new blocks did land on the old
 * blocks' memory and that the old key words were still there.  Skipped
 * without hakmem.  Arguments: the name prefix of the protocol lines
 * (default stale_keys), then optionally "pages" or "marks" (that test
 * alone), or 0..4: reused_pages alone, every block going back the one way of
 * that number (see run_pair): free, realloc in place, realloc growing,
 * realloc shrinking, hakmem_heap_realloc. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define MAX_CLASSES 128
#define MAX_OLD 16384
#define MAX_NEW 4096
#define OLD_PAGES 6          /* medium classes keep 3 emptied pages formatted */

static size_t classes[MAX_CLASSES];
static int nclasses;
static int only_op = -1;   /* argv[1]: every block goes back this way */
static void *(*heap_new)(void);
static void *(*heap_realloc)(void *, void *, size_t);
static void *pub;            /* a public heap, for hakmem_heap_realloc */

static uintptr_t old_blk[MAX_OLD];
static size_t nold;
static void *new_blk[MAX_NEW], *pad[MAX_NEW];

static int kind_of(size_t size) {
    return size <= 8192 ? 0 : size <= 16384 ? 1 : size <= 32768 ? 2 : 3;
}
static size_t page_bytes(int kind) { return kind == 0 ? (size_t)64 << 10 : (size_t)128 << (10 + kind); }

static int cmp_uptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}
/* the first old block starting at or after a */
static size_t old_from(uintptr_t a) {
    size_t lo = 0, hi = nold;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (old_blk[mid] < a) lo = mid + 1; else hi = mid;
    }
    return lo;
}
/* does [b, b + size) overlap an old block of size osize? */
static int on_old(uintptr_t b, size_t size, size_t osize) {
    size_t i = old_from(b > osize ? b - osize + 1 : 0);
    return i < nold && old_blk[i] < b + size;
}

/* The size classes: the distinct usable sizes up to 64 KiB. */
static void find_classes(void) {
    size_t n = 1;
    while (n <= 65536 && nclasses < MAX_CLASSES) {
        void *p = malloc(n);
        size_t u = malloc_usable_size(p);
        free(p);
        classes[nclasses++] = u;
        n = u + 1;
    }
}

/* One pair: old class osize, new class nsize (same page kind).  Returns the
 * (block, word) moves made on reused memory; *stale counts the old key words
 * found nonzero in new blocks before any move. */
static size_t run_pair(size_t osize, size_t nsize, size_t *stale) {
    int kind = kind_of(nsize);
    malloc_trim(0);                       /* no dirty slot of any class: the old pages go first */
    nold = OLD_PAGES * page_bytes(kind) / osize;
    if (nold > MAX_OLD) nold = MAX_OLD;
    for (size_t i = 0; i < nold; i++) old_blk[i] = (uintptr_t)malloc(osize);
    for (size_t i = 0; i < nold; i++) free((void *)old_blk[i]);   /* free blocks: keys in word 1 */
    qsort(old_blk, nold, sizeof old_blk[0], cmp_uptr);

    /* new blocks until two pages' worth lie on the old blocks' memory (one
     * of 1 MiB: six of those fill two segments, and the emptied one goes to
     * the segment cache) */
    size_t want = (kind == 3 ? 1 : 2) * page_bytes(kind) / nsize, nnew = 0, npad = 0;
    if (want > MAX_NEW) want = MAX_NEW;
    while (nnew < want && npad < MAX_NEW) {
        void *p = malloc(nsize);
        if (!p) break;
        if (on_old((uintptr_t)p, nsize, osize)) new_blk[nnew++] = p; else pad[npad++] = p;
    }
    CHECKF(nnew == want, "old %zu new %zu: %zu of %zu new blocks on reused memory", osize, nsize, nnew, want);

    /* the old key words inside the new blocks (word 2 on), as left */
    size_t words = nsize / 8;
    for (size_t i = 0; i < nnew; i++) {
        uintptr_t b = (uintptr_t)new_blk[i];
        for (size_t j = old_from(b + 8); j < nold && old_blk[j] + 8 < b + nsize; j++)
            if (old_blk[j] + 8 >= b + 16 && *(volatile uint64_t *)(old_blk[j] + 8)) ++*stale;
    }

    /* Round w: every new block gets word w moved to word 1, then goes back
     * through one of the checked ways; the blocks are taken again (malloc,
     * or calloc then realloc) for the next round.  Only words 0 and 1 are
     * written by hakmem, so the old bytes stay for every round. */
    size_t moves = 0;
    for (size_t w = 0; w < words; w++) {
        for (size_t i = 0; i < nnew; i++) {
            char *b = new_blk[i];
            if (!b) continue;
            moves += on_old((uintptr_t)b, nsize, osize);
            memmove(b + 8, b + 8 * w, 8);
            void *q;
            switch (only_op >= 0 ? (size_t)only_op : (i + w) % 5) {
            case 0:
                free(b);
                break;
            case 1:                        /* kept in place */
                CHECKF(malloc_usable_size(b) >= nsize, "usable size of %p", (void *)b);
                q = realloc(b, nsize);
                CHECKF(q == b, "realloc to the same size moved %p", (void *)b);
                free(q);
                break;
            case 2:                        /* grows: moves */
                q = realloc(b, 2 * nsize + 1);
                CHECK(q != NULL);
                free(q);
                break;
            case 3:                        /* shrinks below half: moves */
                q = realloc(b, nsize / 3 + 1);
                CHECK(q != NULL);
                free(q);
                break;
            default:                       /* into a public heap (or realloc grows) */
                q = pub ? heap_realloc(pub, b, nsize) : realloc(b, nsize + 1);
                CHECK(q != NULL);
                free(q);
                break;
            }
            new_blk[i] = NULL;
        }
        for (size_t i = 0; i < nnew; i++) {
            if ((i + w) % 3 == 2) {
                void *c = calloc(1, 8);
                new_blk[i] = c ? realloc(c, nsize) : NULL;
            } else {
                new_blk[i] = malloc(nsize);
            }
            CHECK(new_blk[i] != NULL);
        }
    }
    for (size_t i = 0; i < nnew; i++) free(new_blk[i]);
    for (size_t i = 0; i < npad; i++) free(pad[i]);
    return moves;
}

/* Every small and medium class as the new class, with old classes of the
 * same page kind around it. */
static void test_reused_pages(void) {
    static const int offs[] = { -1, 1, 3, -4 };
    size_t pairs = 0, moves_all = 0;
    int classes_stale = 0, classes_with_words = 0;
    for (int n = 0; n < nclasses; n++) {
        size_t nsize = classes[n], stale = 0;
        for (unsigned k = 0; k < sizeof offs / sizeof offs[0]; k++) {
            int o = n + offs[k];
            if (o < 0 || o >= nclasses || kind_of(classes[o]) != kind_of(nsize)) continue;
            size_t moves = run_pair(classes[o], nsize, &stale);
            CHECKF(moves > 0, "old %zu new %zu: no move on reused memory", classes[o], nsize);
            moves_all += moves;
            pairs++;
        }
        if (nsize >= 24) {
            classes_with_words++;
            classes_stale += stale > 0;
        }
    }
    /* the old key words must have been there to be moved: in every class
     * with room for one past word 1 (the 16-byte class has none) */
    CHECKF(classes_stale == classes_with_words, "old key words found in %d of %d classes",
           classes_stale, classes_with_words);
    printf("stale_keys: %d classes, %zu pairs, %zu word moves on reused memory\n", nclasses, pairs, moves_all);
}

/* The same for the mark an aligned block keeps in its block's first word
 * (before the pointer handed out): a public heap destroyed with aligned
 * blocks live leaves their marks in memory, and the next public heap (the
 * same heap structure, its segments and free slots) carves that memory for
 * other classes.  The program moves the words of a new block to word 0 on a
 * page that has aligned blocks too, and frees the block, reallocates it in
 * place or asks its usable size: before the fix, a stale mark naming a
 * pointer inside the block made hakmem report "invalid pointer (inside a
 * block)". */
static void test_destroyed_heap_marks(void) {
    void *(*h_align)(void *, size_t, size_t) =
        (void *(*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "hakmem_heap_aligned_alloc");
    void *(*h_malloc)(void *, size_t) = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_heap_malloc");
    void (*h_destroy)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "hakmem_heap_destroy");
    if (!heap_new || !h_align || !h_malloc || !h_destroy) SKIP_TEST("no public heaps");
    void *h = heap_new();
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < 4000; i++) {
        /* 200 + 512 - 16 bytes: a 704-byte block, mostly at an interior q */
        uintptr_t q = (uintptr_t)h_align(h, 512, 200);
        CHECK(q != 0);
        if (q < lo) lo = q;
        if (q > hi) hi = q;
    }
    h_destroy(h);
    void *h2 = heap_new();
    size_t on_old = 0;
    for (int i = 0; i < 20000 && on_old < 2000; i++) {
        h_align(h2, 256, 170);       /* a 416-byte block at an interior q: the page is marked */
        char *b = h_malloc(h2, 416);
        CHECK(b != NULL);
        if (!b || (uintptr_t)b < lo || (uintptr_t)b > hi) continue;
        on_old++;
        for (size_t w = 1; w < 416 / 8; w++) {
            memmove(b, b + 8 * w, 8);
            CHECKF(malloc_usable_size(b) >= 416, "usable size of %p", (void *)b);
            CHECKF(heap_realloc(h2, b, 416) == b, "in-place realloc moved %p", (void *)b);
        }
        memmove(b, b + 8 * (1 + (size_t)i % 51), 8);
        free(b);
    }
    CHECKF(on_old > 0, "no block of the second heap on the first one's memory");
    h_destroy(h2);
}

int main(int argc, char **argv) {
    chk_prefix = argc > 1 ? argv[1] : "stale_keys";
    const char *only = argc > 2 ? argv[2] : "";
    if (*only >= '0' && *only <= '4') only_op = *only - '0';
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!dlsym(RTLD_DEFAULT, "hakmem_version")) {
        printf("SKIP %s.reused_pages: not running on hakmem\n", chk_prefix);
        return 0;
    }
    heap_new = (void *(*)(void))dlsym(RTLD_DEFAULT, "hakmem_heap_new");
    heap_realloc = (void *(*)(void *, void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_heap_realloc");
    if (heap_new && heap_realloc) pub = heap_new();
    find_classes();
    if (strcmp(only, "marks")) RUN_TEST(reused_pages);
    if (only_op < 0 && strcmp(only, "pages")) RUN_TEST(destroyed_heap_marks);
    return check_exit_code();
}
