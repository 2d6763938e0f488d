/* memreturn_medium.h -- the medium-page tests of test_memreturn.c, included
 * by it (uses its globals and helpers: KiB, hakmem_only, and those of
 * memreturn_util.h and testutil.h): a class of
 * 8..64 KiB blocks keeps up to three emptied pages (hak_page_retire), hands
 * out the block freed last, and gives its kept pages back at malloc_trim(0)
 * from any thread, to the background purger and to the decay's age rule. */
#ifndef HAK_TEST_MEMRETURN_MEDIUM_H
#define HAK_TEST_MEMRETURN_MEDIUM_H

/* ---- medium blocks (8..64 KiB): empty pages kept per class ---- */

/* random_large's pattern: 400 slots, a random one freed or filled with a
 * block of 8..64 KiB, its first and last 64 bytes written and checked when
 * it is freed.  A medium class holds a handful of these, so its pages empty
 * and fill all the time; each class keeps its empty pages (formatted, at the
 * back of its queue) instead of giving the slot back and taking another one
 * whose block boundaries touch other OS pages: RSS stays near what the
 * blocks' touched pages need (about 6 MiB here; 15 MiB when the pages went
 * back to their segments each time they emptied). */
static void test_medium_steady(void)
{
    enum { WS = 400, OPS = 400000, EDGE = 64 };
    static char *slot[WS];
    static size_t len[WS];
    uint64_t rng = 12345, seed = 0;
    malloc_trim(0);
    long base = rss_kib(), peak = base;
    int bad = 0;
    for (long i = 0; i < OPS; i++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        size_t k = (size_t)(rng >> 33) % WS;
        if (slot[k]) {
            bad += pat_check(slot[k], EDGE, pat_seed(slot[k], len[k], 1)) != PAT_OK ||
                   pat_check(slot[k] + len[k] - EDGE, EDGE, pat_seed(slot[k], len[k], 2)) != PAT_OK;
            free(slot[k]);
            slot[k] = NULL;
        } else {
            size_t n = 8 * KiB + (size_t)((rng >> 7) % (56 * KiB + 1));
            char *p = malloc(n);
            CHECK(p != NULL);
            if (!p)
                return;
            pat_fill(p, EDGE, pat_seed(p, n, 1));
            pat_fill(p + n - EDGE, EDGE, pat_seed(p, n, 2));
            slot[k] = p;
            len[k] = n;
            seed++;
        }
        if (i % 20000 == 0) {
            long r = rss_kib();
            if (r > peak)
                peak = r;
        }
    }
    for (int k = 0; k < WS; k++) {
        free(slot[k]);
        slot[k] = NULL;
    }
    CHECKF(bad == 0, "%d blocks lost their contents", bad);
    if (hakmem_only())
        CHECKF(peak - base <= 10 * 1024, "RSS grew by %ld KiB (from %ld KiB) with 400 slots of 8..64 KiB",
               peak - base, base);
}

/* A block freed twice whose page its class keeps empty is still reported. */
static void test_medium_kept_double_free(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    static const size_t sizes[] = { 9 * KiB, 20 * KiB, 40 * KiB, 64 * KiB };
    check_double_free_reported(sizes, 4);
}

/* A kept empty page that is used again and empties once more after the
 * purge delay is kept again (its old keep time must not make the age check
 * give it back under the caller's feet: the slot would then be both free
 * and in the class queue, and the next page of its kind would take it). */
static void test_medium_kept_aged(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    long delay = purge_delay();
    if (delay <= 0 || delay > 1000)
        SKIP_TEST("needs a purge delay of 1..1000 ms");
    enum { N = 24 };
    static const size_t sizes[] = { 40 * KiB, 36 * KiB, 60 * KiB, 48 * KiB };
    static char *b[4][N];
    int bad = 0;
    for (int round = 0; round < 3; round++) {
        char *p = malloc(40 * KiB);
        CHECK(p != NULL);
        if (!p)
            return;
        free(p);                              /* its page empties: kept */
        sleep_ms(delay + 50);
        p = malloc(40 * KiB);                 /* the kept page again */
        CHECK(p != NULL);
        if (!p)
            return;
        free(p);                              /* empties after the delay */
        for (int c = 0; c < 4; c++)           /* new pages of the same kind */
            for (int i = 0; i < N; i++) {
                b[c][i] = malloc(sizes[c]);
                CHECK(b[c][i] != NULL);
                if (!b[c][i])
                    return;
                fill(b[c][i], sizes[c], (uint64_t)(round * 1000 + c * N + i));
            }
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < N; i++) {
                bad += !intact(b[c][i], sizes[c], (uint64_t)(round * 1000 + c * N + i));
                free(b[c][i]);
            }
    }
    CHECKF(bad == 0, "%d blocks lost their contents", bad);
}

/* A medium class hands back the block freed last, whatever the fill of its
 * pages: with every page of the class full, the next block empties a page
 * when it is freed (kept, hak_page_retire), and the malloc after it takes
 * that page back with the block on its local list -- it must return that
 * block, not the page's older free blocks.  One fill level after another,
 * so that some level fills its pages exactly, whatever a page holds. */
static void test_medium_kept_lifo(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    enum { HOLD = 80 };
    const size_t s = 20000;
    static char *hold[HOLD];
    int same = 0, tries = 0;
    for (int n = 0; n < HOLD; n++) {
        hold[n] = malloc(s);
        CHECK(hold[n] != NULL);
        if (!hold[n])
            return;
        int back = freed_last_comes_back(s);
        CHECK(back >= 0);
        same += back == 1;
        tries++;
    }
    for (int n = 0; n < HOLD; n++)
        free(hold[n]);
    CHECKF(same == tries, "malloc(%zu) right after a free gave the block freed last %d times of %d",
           s, same, tries);
}

/* A page carves blocks of 4 KiB and more one at a time: a class that needs
 * one block more than before commits that block and not the next ones (a
 * carve of four wrote the links of three blocks nobody asked for).  In a
 * child, after malloc_trim(0) purged every free page slot: a new 40 KiB
 * block is written at both ends, and the OS pages where the two blocks after
 * it start stay out of memory (the next block may start in the new block's
 * last OS page). */
static void carve_one_child(void *arg)
{
    (void)arg;
    const size_t s = 40 * KiB;
    malloc_trim(0);
    char *p = malloc(s);
    if (!p)
        _exit(3);
    p[0] = p[s - 1] = 1;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), size = malloc_usable_size(p);
    for (int k = 2; k <= 3; k++) {
        unsigned char in = 0;
        if (mincore((void *)(((uintptr_t)p + k * size) & ~(pg - 1)), pg, &in) != 0)
            _exit(4);
        if (in & 1) {
            fprintf(stderr, "block %d after a new %zu-byte block is in memory", k, s);
            _exit(5);
        }
    }
    free(p);
}

static void test_medium_carve_one(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    if (env_long("HAKMEM_PURGE_LAZY", 0))
        SKIP_TEST("needs MADV_DONTNEED (malloc_trim empties the free slots)");
    char err[256];
    int st = in_child(carve_one_child, NULL, err, sizeof err);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d: %s", st, err);
}

/* Medium pages kept empty go back with malloc_trim(0): a program that
 * filled and freed several pages of a few medium classes is back near where
 * it started. */
static void test_medium_kept_trim(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    enum { PER = 48 };
    static const size_t sizes[] = { 12 * KiB, 30 * KiB, 60 * KiB };
    static char *p[3][PER];
    malloc_trim(0);
    long base = rss_kib();
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < PER; i++) {
            p[c][i] = malloc(sizes[c]);
            CHECK(p[c][i] != NULL);
            if (!p[c][i])
                return;
            fill(p[c][i], sizes[c], (uint64_t)(c * PER + i));
        }
    long full = rss_kib();
    int bad = 0;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < PER; i++) {
            bad += !intact(p[c][i], sizes[c], (uint64_t)(c * PER + i));
            free(p[c][i]);
        }
    CHECKF(bad == 0, "%d blocks lost their contents", bad);
    malloc_trim(0);
    long after = rss_kib();
    CHECKF(after <= base + 1024, "RSS %ld KiB after malloc_trim, %ld before the blocks, %ld with them",
           after, base, full);
}

/* ---- kept medium pages of an idle thread ----
 * A thread fills and frees 40 blocks of each size 8..64 KiB (4 KiB apart):
 * its medium classes keep emptied pages (hak_page_retire).  It then takes
 * one block of each size again (from a kept page), and the main thread
 * calls malloc_trim(0) while those live: they keep their contents.  The
 * thread frees them and idles: its kept pages must go back with a
 * malloc_trim(0) from the main thread (purger 0), or with the
 * background purger and no call at all (purger 1).  Both fail on
 * c773841, whose kept pages sat in the owner's class queue. */
enum { KEEP_SIZES = 15, KEEP_PER = 40 };

static size_t keep_size(int c) { return 8 * KiB + (size_t)c * 4 * KiB; }

static void *keeper(void *arg)
{
    keeper_t *k = arg;
    static char *b[KEEP_SIZES][KEEP_PER];
    char *again[KEEP_SIZES];
    for (int c = 0; c < KEEP_SIZES; c++)
        for (int i = 0; i < KEEP_PER; i++) {
            b[c][i] = malloc(keep_size(c));
            if (b[c][i])
                fill(b[c][i], keep_size(c), (uint64_t)(c * KEEP_PER + i));
        }
    for (int c = 0; c < KEEP_SIZES; c++)
        for (int i = 0; i < KEEP_PER; i++) {
            if (!b[c][i]) {
                k->bad++;
                continue;
            }
            k->bad += !intact(b[c][i], keep_size(c), (uint64_t)(c * KEEP_PER + i));
            free(b[c][i]);
        }
    for (int c = 0; c < KEEP_SIZES; c++) {
        again[c] = malloc(keep_size(c));
        if (again[c])
            fill(again[c], keep_size(c), (uint64_t)(7000 + c));
        else
            k->bad++;
    }
    sem_post(&k->done);
    sem_wait(&k->go);                   /* the main thread trims */
    for (int c = 0; c < KEEP_SIZES; c++) {
        if (!again[c])
            continue;
        k->bad += !intact(again[c], keep_size(c), (uint64_t)(7000 + c));
        free(again[c]);
    }
    sem_post(&k->done);
    sem_wait(&k->go);                   /* idle until the main thread has measured */
    return NULL;
}

static void kept_other_thread(int purger)
{
    long delay = purge_delay();
    if (purger && !purger_testable(delay))
        SKIP_TEST("needs HAKMEM_BACKGROUND_PURGE=1, a delay of 1..1000 ms, MADV_DONTNEED");
    keeper_t k;
    pthread_t tid;
    long base = keeper_start(&k, keeper, &tid);
    long full = rss_kib();
    malloc_trim(0);                     /* while blocks taken from kept pages live */
    sem_post(&k.go);
    sem_wait(&k.done);                  /* all freed: the thread idles */
    long idle = rss_kib(), after = rss_after_release(purger, delay, base + 4 * 1024);
    CHECKF(k.bad == 0, "%d blocks lost their contents", k.bad);
    CHECKF(after <= base + 4 * 1024, "%s left %ld KiB of an idle thread's emptied medium pages "
           "(start %ld KiB, %ld with the blocks, %ld idle)", purger ? "the purger" : "malloc_trim(0)",
           after - base, base, full, idle);
    keeper_stop(&k, tid);
}

static void test_medium_kept_trim_thread(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    kept_other_thread(0);
}

static void test_medium_kept_purger(void)
{
    if (!hakmem_only())
        SKIP_TEST("hakmem not loaded");
    kept_other_thread(1);
}

#endif /* HAK_TEST_MEMRETURN_MEDIUM_H */
