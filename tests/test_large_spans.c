/* test_large_spans.c -- large blocks (64 KiB .. 2 MiB; a page is a span of a
 * large segment's slices): emptied large pages kept per class.
 *
 * usage: test_large_spans [-p PREFIX] [--expect-hakmem] [--only NAME]
 * Runs under LD_PRELOAD (tests/suite_memreturn.sh runs it under several
 * option settings); a test that only means something under other settings
 * is skipped.  Contents are checked everywhere; memory return is checked
 * with RSS from /proc/self/statm against generous bounds.  No timing
 * asserts.
 */
#define _GNU_SOURCE 1
#include "memreturn_util.h"


/* ---- placements repeat ---- */

/* The soak's large slots: a few slots, each with its own size, replaced
 * over and over; one replacement in four frees the old block only after
 * the new one is taken (as a block handed to another thread comes back
 * late).  Each slot's blocks should come back to the same few places: a
 * class keeps its emptied pages (hak_page_retire), so a slot alternates
 * between at most the spans it needs at once and the ones kept.  Best fit
 * over merged free spans instead moved blocks around the segments, so the
 * OS pages the program touches at a block's ends kept spreading (docs/design.md,
 * "What is left", the soak). */
static void test_large_places_repeat(void)
{
    if (!owns)
        SKIP_TEST("hakmem not loaded");
    if (purge_delay() < 100)
        SKIP_TEST("needs a purge delay of 100 ms or more (kept pages would age out during the test)");
    enum { SLOTS = 6, ROUNDS = 6000, WARM = 1000, MAXP = 64, EDGE = 64 };
    static const size_t sizes[SLOTS] = { 300 * KiB, 540 * KiB, 700 * KiB, 1100 * KiB, 1500 * KiB, 1900 * KiB };
    static char *cur[SLOTS];
    static char *seen[SLOTS][MAXP];
    int nseen[SLOTS] = { 0 }, bad = 0, over = 0;
    uint64_t rng = 88172645463325252ull;
    for (int r = 0; r < ROUNDS; r++) {
        int k = (int)(rnd(&rng) % SLOTS);
        size_t n = sizes[k];
        char *old = cur[k];
        int late = (rnd(&rng) & 3) == 0;
        if (old) {
            bad += pat_check(old, EDGE, pat_seed(old, n, (uint64_t)k)) != PAT_OK || old[n - 1] != (char)k;
            if (!late)
                free(old);
        }
        char *p = malloc(n);
        CHECK(p != NULL);
        if (!p)
            return;
        pat_fill(p, EDGE, pat_seed(p, n, (uint64_t)k));
        p[n - 1] = (char)k;
        if (old && late)
            free(old);
        cur[k] = p;
        if (r < WARM)
            continue;
        int i = 0;
        while (i < nseen[k] && seen[k][i] != p)
            i++;
        if (i == nseen[k]) {
            if (nseen[k] < MAXP)
                seen[k][nseen[k]++] = p;
            else
                over++;
        }
    }
    for (int k = 0; k < SLOTS; k++) {
        CHECKF(nseen[k] <= 3, "slot %d (%zu bytes): %d places after the warm-up%s", k, sizes[k], nseen[k],
               over ? " (and more)" : "");
        free(cur[k]);
        cur[k] = NULL;
    }
    CHECKF(bad == 0, "%d blocks lost their contents", bad);
}

/* ---- kept pages go back ---- */

enum { KSIZES = 5, KPER = 2 };
static size_t ksize(int c) { return (size_t)(280 + 350 * c) * KiB; }   /* 280 KiB .. 1.7 MiB */

/* Each size cycles first (a block freed and one of its size asked for right
 * after: the class keeps its emptied pages from then on); then KPER blocks
 * of each size are filled wholly, checked and freed, and one more is taken
 * (the class's request), filled and freed: every class keeps its emptied
 * pages, about 10 MiB resident. */
static int fill_and_free(uint64_t tag)
{
    static __thread char *b[KSIZES][KPER];
    int bad = 0;
    for (int c = 0; c < KSIZES; c++)
        for (int i = 0; i < 2; i++) {
            char *p = malloc(ksize(c));
            bad += p == NULL;
            free(p);
        }
    for (int c = 0; c < KSIZES; c++)
        for (int i = 0; i < KPER; i++) {
            b[c][i] = malloc(ksize(c));
            if (b[c][i])
                fill(b[c][i], ksize(c), tag + (uint64_t)(c * KPER + i));
            else
                bad++;
        }
    for (int c = 0; c < KSIZES; c++) {
        for (int i = 0; i < KPER; i++)
            if (b[c][i]) {
                bad += !intact(b[c][i], ksize(c), tag + (uint64_t)(c * KPER + i));
                free(b[c][i]);
            }
        char *p = malloc(ksize(c));
        if (!p) {
            bad++;
            continue;
        }
        fill(p, ksize(c), tag + 99);
        bad += !intact(p, ksize(c), tag + 99);
        free(p);
    }
    return bad;
}

/* malloc_trim(0) gives back the large pages a class keeps. */
static void test_large_kept_trim(void)
{
    if (!owns)
        SKIP_TEST("hakmem not loaded");
    malloc_trim(0);
    long base = rss_kib();
    int bad = fill_and_free(10);
    long idle = rss_kib();
    malloc_trim(0);
    long after = rss_kib();
    CHECKF(bad == 0, "%d blocks lost their contents", bad);
    CHECKF(after <= base + 1024, "RSS %ld KiB after malloc_trim, %ld before the blocks, %ld after freeing them",
           after, base, idle);
}


static void *keeper(void *arg)
{
    keeper_t *k = arg;
    k->bad += fill_and_free(100);
    sem_post(&k->done);
    sem_wait(&k->go);                   /* idle until the main thread has measured */
    return NULL;
}

/* An idle thread's kept large pages go back with malloc_trim(0) from
 * another thread, or (purger) by age with HAKMEM_BACKGROUND_PURGE=1. */
static void kept_other_thread(int purger)
{
    long delay = purge_delay();
    if (purger && (!purger_testable(delay) || env_long("HAKMEM_PURGE_BUDGET_KB", 0) != -1))
        SKIP_TEST("needs HAKMEM_BACKGROUND_PURGE=1, a delay of 1..1000 ms, MADV_DONTNEED, no floor");
    keeper_t k;
    pthread_t tid;
    long base = keeper_start(&k, keeper, &tid);
    long idle = rss_kib(), after = rss_after_release(purger, delay, base + 2 * 1024);
    CHECKF(k.bad == 0, "%d blocks lost their contents", k.bad);
    CHECKF(after <= base + 2 * 1024, "%s left %ld KiB of an idle thread's emptied large pages "
           "(start %ld KiB, %ld idle)", purger ? "the purger" : "malloc_trim(0)", after - base, base, idle);
    keeper_stop(&k, tid);
}

static void test_large_kept_trim_thread(void)
{
    if (!owns)
        SKIP_TEST("hakmem not loaded");
    kept_other_thread(0);
}

static void test_large_kept_purger(void)
{
    if (!owns)
        SKIP_TEST("hakmem not loaded");
    kept_other_thread(1);
}

/* ---- misuse and fork ---- */

/* A block freed twice whose page its class keeps empty is still reported. */
static void test_large_kept_double_free(void)
{
    if (!owns)
        SKIP_TEST("hakmem not loaded");
    static const size_t sizes[] = { 200 * KiB, 600 * KiB, 2 * MiB };
    check_double_free_reported(sizes, 3);
}

/* A child forked while the parent's classes keep emptied large pages takes
 * them (and new ones) and gives them back; the parent's live blocks keep
 * their contents either side. */
static void test_large_kept_fork(void)
{
    enum { LIVE = 3 };
    static char *live[LIVE];
    for (int i = 0; i < LIVE; i++) {
        live[i] = malloc(ksize(i));
        CHECK(live[i] != NULL);
        if (!live[i])
            return;
        fill(live[i], ksize(i), (uint64_t)(500 + i));
    }
    int bad = fill_and_free(200);        /* kept pages beside the live blocks */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        int cbad = 0;
        for (int round = 0; round < 20; round++)
            cbad += fill_and_free((uint64_t)(1000 + round * 100));
        for (int i = 0; i < LIVE; i++)
            cbad += !intact(live[i], ksize(i), (uint64_t)(500 + i));
        malloc_trim(0);
        cbad += fill_and_free(5000);
        _exit(cbad ? 1 : 0);
    }
    CHECK(pid > 0);
    int st = 0;
    if (pid > 0)
        waitpid(pid, &st, 0);
    CHECKF(pid <= 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 0), "child: status %#x", st);
    bad += fill_and_free(300);
    for (int i = 0; i < LIVE; i++) {
        bad += !intact(live[i], ksize(i), (uint64_t)(500 + i));
        free(live[i]);
    }
    CHECKF(bad == 0, "%d blocks lost their contents", bad);
}

int main(int argc, char **argv)
{
    int rc = test_start(argc, argv);
    if (rc)
        return rc;
    RUN(large_places_repeat);
    RUN(large_kept_trim);
    RUN(large_kept_trim_thread);
    RUN(large_kept_purger);
    RUN(large_kept_double_free);
    RUN(large_kept_fork);
    return check_exit_code();
}
