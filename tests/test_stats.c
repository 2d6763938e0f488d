/* test_stats.c -- the memory account of hakmem_stats_get and the report's
 * callback form (issue 38), run under LD_PRELOAD by tests/suite_stats.sh.
 *
 * usage: test_stats [-p PREFIX] [-t TEST]   (every test without -t)
 *   adds_up        the seven parts of `mapped` add up to bytes_mapped (to
 *                  within a few OS pages) after small, medium, large, huge
 *                  and aligned blocks are allocated, some freed, a thread
 *                  ended with its blocks live, malloc_trim: each time
 *   live_bytes     live_bytes and live_blocks grow by exactly what the
 *                  program holds (blocks whose usable size is their block
 *                  size) and fall back when it frees them
 *   parts_move     freed pages show up as empty pages or cached segments,
 *                  and after malloc_trim(0) as returned; a huge block freed
 *                  goes to the huge cache
 *   resident       resident_known; each resident part <= its mapped part;
 *                  8 MiB written into a huge block are resident live bytes;
 *                  hakmem's resident bytes <= the process's RSS
 *   peak           active_peak_bytes covers 32 MiB once live, active_bytes
 *                  falls after the free
 *   print_cb       hakmem_stats_print_cb hands over whole lines (summary
 *                  first, the account's rows, the counters), writes nothing
 *                  to stderr, and its total row is bytes_mapped
 *   concurrent     hakmem_stats_get, mallinfo2 and malloc_trim in a loop
 *                  while 4 threads allocate and free small, large and huge
 *                  blocks (segments and huge mappings come and go under the
 *                  walk) and threads start and end: no crash, no hang, and
 *                  the parts add up again once they have stopped
 * Each test prints one PASS/FAIL/SKIP line (tests/check.h).
 */
#define _GNU_SOURCE 1
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "hakmem.h"

#pragma weak hakmem_stats_get
#pragma weak hakmem_stats_print_cb
#pragma weak hakmem_build_variant

#define NEED_HAKMEM() do { if (!hakmem_stats_get || !hakmem_stats_print_cb) SKIP_TEST("hakmem not preloaded"); } while (0)
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static hakmem_stats_t st;   /* big: one thread at a time reads it */
static size_t page;

static const hakmem_stats_t *get(void)
{
    CHECK(hakmem_stats_get(&st, sizeof st) == 0);
    return &st;
}

static uint64_t parts(const hakmem_memory_t *m)
{
    return m->live + m->free + m->empty + m->segment_cache + m->huge_cache + m->metadata + m->returned;
}

/* the parts add up to bytes_mapped, to within a few OS pages */
static void check_sum(const char *when)
{
    const hakmem_stats_t *s = get();
    uint64_t sum = parts(&s->mapped);
    uint64_t diff = sum > s->bytes_mapped ? sum - s->bytes_mapped : s->bytes_mapped - sum;
    CHECKF(diff <= 4 * page, "%s: parts add up to %llu, bytes_mapped %llu (live %llu free %llu empty %llu "
           "segcache %llu hugecache %llu meta %llu returned %llu)", when, (unsigned long long)sum,
           (unsigned long long)s->bytes_mapped, (unsigned long long)s->mapped.live,
           (unsigned long long)s->mapped.free, (unsigned long long)s->mapped.empty,
           (unsigned long long)s->mapped.segment_cache, (unsigned long long)s->mapped.huge_cache,
           (unsigned long long)s->mapped.metadata, (unsigned long long)s->mapped.returned);
    CHECKF(s->live_bytes == s->mapped.live, "%s: live_bytes %llu != mapped.live %llu", when,
           (unsigned long long)s->live_bytes, (unsigned long long)s->mapped.live);
}

static void *ended_blocks[64];
static void *thread_keeps(void *arg)
{
    void **b = arg;
    for (int i = 0; i < 64; i++) b[i] = malloc(100 + 37 * i);   /* live after the thread ends */
    return NULL;
}

static void test_adds_up(void)
{
    NEED_HAKMEM();
    check_sum("at start");
    enum { N = 20000 };
    static void *small[N];
    for (int i = 0; i < N; i++) small[i] = malloc(16 + (i % 200) * 8);
    void *medium[16], *large[8], *aligned[8];
    for (int i = 0; i < 16; i++) medium[i] = malloc(9000 + i * 3000);
    for (int i = 0; i < 8; i++) large[i] = malloc(100 * KiB + i * 200 * KiB);
    for (int i = 0; i < 8; i++) CHECK(posix_memalign(&aligned[i], 4096 << (i % 5), 5000 + i * 1000) == 0);
    void *huge = malloc(9 * MiB), *huge2 = calloc(1, 20 * MiB);
    CHECK(huge && huge2);
    memset(huge, 1, 9 * MiB);
    check_sum("after allocating");
    for (int i = 0; i < N; i += 2) free(small[i]);
    for (int i = 0; i < 16; i += 2) free(medium[i]);
    free(large[3]);
    free(huge2);
    check_sum("after freeing some");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_keeps, ended_blocks) == 0);
    pthread_join(t, NULL);
    check_sum("after a thread ended with live blocks");
    huge = realloc(huge, 30 * MiB);
    CHECK(huge != NULL);
    check_sum("after a huge realloc");
    for (int i = 1; i < N; i += 2) free(small[i]);
    for (int i = 1; i < 16; i += 2) free(medium[i]);
    for (int i = 0; i < 8; i++) if (i != 3) free(large[i]);
    for (int i = 0; i < 8; i++) free(aligned[i]);
    for (int i = 0; i < 64; i++) free(ended_blocks[i]);
    free(huge);
    check_sum("after freeing everything");
    malloc_trim(0);
    check_sum("after malloc_trim");
}

static void test_live_bytes(void)
{
    NEED_HAKMEM();
    enum { N = 5000 };
    static void *b[N];
    uint64_t live0 = get()->live_bytes, blocks0 = st.live_blocks;
    size_t want = 0;
    for (int i = 0; i < N; i++) {
        size_t n = 16 * (1 + i % 64);        /* up to 1 KiB: usable size is the block size */
        b[i] = malloc(n);
        want += malloc_usable_size(b[i]);
    }
    const hakmem_stats_t *s = get();
    /* the hardened build's blocks are larger than they say: a trailer */
    bool hardened = strcmp(hakmem_build_variant(), "hardened") == 0;
    CHECKF(hardened ? s->live_bytes - live0 >= want : s->live_bytes - live0 == want,
           "live_bytes grew by %lld, the blocks' usable sizes add up to %zu", (long long)(s->live_bytes - live0), want);
    CHECKF(s->live_blocks - blocks0 == N, "live_blocks grew by %lld, want %d", (long long)(s->live_blocks - blocks0), N);
    for (int i = 0; i < N; i++) free(b[i]);
    s = get();
    /* (the hardened build's quarantine, up to 256 KiB a thread, holds freed
     * blocks back from their pages: they count as live there) */
    long long dl = (long long)s->live_bytes - (long long)live0;
    CHECKF(hardened ? dl <= 256 * 1024 && dl >= -256 * 1024 : s->live_bytes == live0 && s->live_blocks == blocks0,
           "after the frees: live %llu (%llu blocks), before %llu (%llu)",
           (unsigned long long)s->live_bytes, (unsigned long long)s->live_blocks, (unsigned long long)live0,
           (unsigned long long)blocks0);
    /* a huge block counts its usable size */
    live0 = get()->live_bytes;
    void *h = malloc(5 * MiB);
    s = get();
    CHECKF(hardened ? s->live_bytes - live0 >= malloc_usable_size(h) : s->live_bytes - live0 == malloc_usable_size(h),
           "a huge block: live grew by %lld, usable %zu",
           (long long)(s->live_bytes - live0), malloc_usable_size(h));
    free(h);
}

static void test_parts_move(void)
{
    NEED_HAKMEM();
    malloc_trim(0);
    enum { N = 40000 };
    static void *b[N];
    for (int i = 0; i < N; i++) { b[i] = malloc(200); memset(b[i], 7, 200); }   /* ~8 MiB over 2+ segments */
    const hakmem_stats_t *s = get();
    uint64_t live1 = s->mapped.live, kept1 = s->mapped.empty + s->mapped.segment_cache,
             ret1 = s->mapped.returned, mapped1 = s->bytes_mapped;
    for (int i = 0; i < N; i++) free(b[i]);
    s = get();
    CHECKF(s->mapped.live + 7 * MiB <= live1, "live %llu -> %llu after freeing 8 MiB", (unsigned long long)live1,
           (unsigned long long)s->mapped.live);
    uint64_t kept2 = s->mapped.empty + s->mapped.segment_cache;
    uint64_t unmapped = mapped1 > s->bytes_mapped ? mapped1 - s->bytes_mapped : 0;   /* (lean: no cache) */
    CHECKF(kept2 + s->mapped.returned + unmapped >= kept1 + ret1 + 7 * MiB,
           "the freed pages are neither kept nor returned: empty+cache %llu -> %llu, returned %llu -> %llu",
           (unsigned long long)kept1, (unsigned long long)kept2, (unsigned long long)ret1,
           (unsigned long long)s->mapped.returned);
    malloc_trim(0);
    s = get();
    if (s->resident_known)
        CHECKF(s->resident.empty + s->resident.segment_cache + s->resident.huge_cache <= 256 * KiB,
               "after malloc_trim(0): %llu resident in empty pages and caches",
               (unsigned long long)(s->resident.empty + s->resident.segment_cache + s->resident.huge_cache));
    /* while another huge block stays live, the one freed last waits in the
     * cache for the next huge request (docs/options.md, the decay) */
    void *h = malloc(12 * MiB), *other = malloc(6 * MiB);
    memset(h, 1, 12 * MiB);
    uint64_t hc = get()->mapped.huge_cache, m1 = st.bytes_mapped;
    free(h);
    s = get();
    CHECKF((s->mapped.huge_cache >= hc + 12 * MiB && s->huge_cached >= 1) ||
           s->bytes_mapped + 12 * MiB <= m1,          /* HAKMEM_HUGE_CACHE_MB=0: unmapped */
           "a freed huge block is not in the huge cache: %llu -> %llu (%llu cached)", (unsigned long long)hc,
           (unsigned long long)s->mapped.huge_cache, (unsigned long long)s->huge_cached);
    free(other);
    malloc_trim(0);
    s = get();
    CHECKF(s->mapped.huge_cache == 0 && s->huge_cached == 0, "after malloc_trim(0): huge cache %llu (%llu)",
           (unsigned long long)s->mapped.huge_cache, (unsigned long long)s->huge_cached);
}

static void test_resident(void)
{
    NEED_HAKMEM();
    const hakmem_stats_t *s = get();
    if (!s->resident_known) SKIP_TEST("mincore refused");
    char *h = malloc(16 * MiB);
    uint64_t rl0 = get()->resident.live;
    memset(h, 3, 8 * MiB);
    s = get();
    CHECKF(s->resident.live + 64 * KiB >= rl0 + 8 * MiB, "resident live %llu -> %llu after writing 8 MiB",
           (unsigned long long)rl0, (unsigned long long)s->resident.live);
    const uint64_t *m = &s->mapped.live, *r = &s->resident.live;
    uint64_t sum = 0;
    for (int i = 0; i < 7; i++) {
        CHECKF(r[i] <= m[i], "part %d: resident %llu > mapped %llu", i, (unsigned long long)r[i],
               (unsigned long long)m[i]);
        sum += r[i];
    }
    CHECK(sum == s->resident_bytes);
    if (s->process_rss_bytes)
        CHECKF(s->resident_bytes <= s->process_rss_bytes + 64 * KiB, "hakmem resident %llu > process RSS %llu",
               (unsigned long long)s->resident_bytes, (unsigned long long)s->process_rss_bytes);
    else
        CHECKF(s->process_rss_errno != 0, "process RSS 0 without a reason");
    free(h);
}

static void test_peak(void)
{
    NEED_HAKMEM();
    enum { N = 32 * 1024 };
    static void *b[N];
    for (int i = 0; i < N; i++) b[i] = malloc(1024);   /* 32 MiB */
    uint64_t active = get()->active_bytes;
    for (int i = 0; i < N; i++) free(b[i]);
    malloc_trim(0);
    const hakmem_stats_t *s = get();
    CHECKF(s->active_peak_bytes >= 32 * MiB && s->active_peak_bytes >= active,
           "active peak %llu with 32 MiB live (active then %llu)", (unsigned long long)s->active_peak_bytes,
           (unsigned long long)active);
    CHECKF(s->active_bytes + 30 * MiB <= active, "active %llu -> %llu after the frees and malloc_trim",
           (unsigned long long)active, (unsigned long long)s->active_bytes);
}

static char cb_text[64 * 1024];
static size_t cb_len;
static int cb_lines, cb_bad;
static void cb(void *arg, const char *text)
{
    (*(int *)arg)++;
    size_t n = strlen(text);
    if (n == 0 || text[n - 1] != '\n') cb_bad++;
    if (cb_len + n < sizeof cb_text) { memcpy(cb_text + cb_len, text, n); cb_len += n; cb_text[cb_len] = 0; }
}

static void test_print_cb(void)
{
    NEED_HAKMEM();
    int mfd = memfd_create("stderr", 0), saved = dup(2);
    CHECK(mfd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(mfd, 2);
    int calls = 0;
    cb_len = 0;
    cb_lines = cb_bad = 0;
    hakmem_stats_print_cb(cb, &calls);
    dup2(saved, 2);
    close(saved);
    off_t err_bytes = lseek(mfd, 0, SEEK_END);
    close(mfd);
    CHECKF(err_bytes == 0, "hakmem_stats_print_cb wrote %lld bytes to stderr", (long long)err_bytes);
    CHECKF(calls >= 15 && cb_bad == 0, "%d calls, %d not a whole line", calls, cb_bad);
    char want[64];
    snprintf(want, sizeof want, "hakmem %s statistics (", HAKMEM_VERSION_STRING);
    CHECKF(strncmp(cb_text, want, strlen(want)) == 0, "first line: %.80s", cb_text);
    CHECKF(strstr(cb_text, ": live ") && strstr(cb_text, " mapped; "), "no summary: %.200s", cb_text);
    static const char *const rows[] = { "live blocks", "free blocks in pages in use", "empty pages kept",
                                        "segment cache (", "huge cache (", "metadata",
                                        "returned to the system", "OS calls: mmap" };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        CHECKF(strstr(cb_text, rows[i]) != NULL, "no row \"%s\"", rows[i]);
    const char *t = strstr(cb_text, "    total ");
    unsigned long long kib = 0;
    CHECKF(t && sscanf(t + 10, "%llu", &kib) == 1, "no total row");
    const hakmem_stats_t *s = get();
    long long d = (long long)kib - (long long)(s->bytes_mapped >> 10);
    CHECKF(d >= -64 && d <= 64, "total row %llu KiB, bytes_mapped %llu KiB", kib,
           (unsigned long long)(s->bytes_mapped >> 10));
}

static atomic_int churn_stop;
static void *churn(void *arg)
{
    unsigned x = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    void *keep[64] = { 0 }, *ended[64];
    while (!atomic_load(&churn_stop)) {
        x = x * 1103515245u + 12345u;
        unsigned i = (x >> 8) % 64, k = (x >> 16) % 100;
        free(keep[i]);
        size_t n = k < 80 ? 16 + (x >> 20) % 2000 : k < 97 ? 70000 + (x >> 12) % 900000 : 3 * MiB + (x >> 10) % (6 * MiB);
        keep[i] = malloc(n);
        if (keep[i]) memset(keep[i], 1, n < 4096 ? n : 4096);
        if (k == 99) {                            /* a short-lived thread now and then */
            pthread_t t;
            if (pthread_create(&t, NULL, thread_keeps, ended) == 0) {
                pthread_join(t, NULL);
                for (int j = 0; j < 64; j++) free(ended[j]);
            }
        }
    }
    for (int j = 0; j < 64; j++) free(keep[j]);
    return NULL;
}

static void test_concurrent(void)
{
    NEED_HAKMEM();
    pthread_t t[4];
    atomic_store(&churn_stop, 0);
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0;; r++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (r >= 100 && (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 > 1500) break;
        get();
        if (r % 3 == 0) (void)mallinfo2();
        if (r % 50 == 0) malloc_trim(0);
        if (r % 100 == 0) { int calls = 0; cb_len = 0; hakmem_stats_print_cb(cb, &calls); }
    }
    atomic_store(&churn_stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    check_sum("after the threads stopped");
}

int main(int argc, char **argv)
{
    if (chk_parse_options(argc, argv)) return 2;
    chk_prefix = chk_prefix ? chk_prefix : "stats";
    setvbuf(stdout, NULL, _IOLBF, 0);
    page = (size_t)sysconf(_SC_PAGESIZE);
    RUN_TEST(adds_up);
    RUN_TEST(live_bytes);
    RUN_TEST(parts_move);
    RUN_TEST(resident);
    RUN_TEST(peak);
    RUN_TEST(print_cb);
    RUN_TEST(concurrent);
    return check_exit_code();
}
