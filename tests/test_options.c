/* test_options.c -- options as a program sets and reads them: hakmem_conf,
 * hakmem_option_set and hakmem_option_get (docs/options.md, "Setting
 * options"); tests/suite_options.sh runs it under many environments.
 *
 * usage: test_options                      nothing (the start-up's messages and listing)
 *        test_options get NAME...          print NAME=VALUE (or NAME: errno E) for each
 *        test_options set NAME VALUE       print "set 0" or "set -1 errno E"
 *        test_options api [-p PREFIX] [--expect-hakmem]
 *                                          the run-time API's tests, PASS/FAIL lines
 *
 * Built plainly like every tests/test_*.c (the hakmem_* names are weak and
 * resolve when hakmem is preloaded), and by tests/options.mk with
 * -DTEST_CONF='"..."': a hakmem_conf of its own, exported for LD_PRELOAD,
 * and linked with libhakmem.so and with libhakmem.a. */
#include "check.h"
#include "hakmem.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#pragma weak hakmem_option_set
#pragma weak hakmem_option_get
#pragma weak hakmem_stats_get

#ifdef TEST_CONF
const char *hakmem_conf = TEST_CONF;
#endif

/* Without the API: skipped (a plain run on glibc), or failed when the run
 * says hakmem is there (--expect-hakmem: the suite's runs) */
#define NEED_API(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            if (chk_expect_hakmem == 1) { CHECKF(0, "hakmem_option_set/get or hakmem_stats_get missing"); return; } \
            SKIP_TEST("hakmem not preloaded");                                 \
        }                                                                      \
    } while (0)

static long get(const char *name) {
    long v = -12345;
    if (hakmem_option_get(name, &v) != 0) return -99999;
    return v;
}

/* every spelling of a name reads the same value; unknown names and NULLs are errors */
static void test_get_forms(void) {
    NEED_API(hakmem_option_get);
    long v = get("segment_cache");
    CHECKF(v == 9, "segment_cache %ld (HAKMEM_SEGMENT_CACHE=9 in the environment)", v);
    CHECK(get("SEGMENT_CACHE") == v);
    CHECK(get("HAKMEM_SEGMENT_CACHE") == v);
    CHECK(get("hakmem_Segment_Cache") == v);
    CHECKF(get("profile") == 0, "profile %ld (HAKMEM_PROFILE=speed)", get("profile"));
    CHECK(get("HAKMEM_PROFILE") == 0);
    CHECKF(get("purge_delay_ms") == 1000, "speed's delay: %ld", get("purge_delay_ms"));
    long x = 7;
    errno = 0;
    CHECK(hakmem_option_get("segment_cach", &x) == -1 && errno == ENOENT && x == 7);
    errno = 0;
    CHECK(hakmem_option_get("profile_at_exit", &x) == -1 && errno == ENOENT);
    errno = 0;
    CHECK(hakmem_option_get(NULL, &x) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(hakmem_option_get("stats", NULL) == -1 && errno == EINVAL);
}

/* the options that may change at run time, in every form of value */
static void test_set_runtime(void) {
    NEED_API(hakmem_option_set && hakmem_option_get);
    CHECK(hakmem_option_set("purge_delay_ms", "0") == 0 && get("purge_delay_ms") == 0);
    CHECK(hakmem_option_set("HAKMEM_PURGE_DELAY_MS", "-1") == 0 && get("purge_delay_ms") == -1);
    CHECK(hakmem_option_set("Purge_Delay_Ms", " 250 ") == 0 && get("purge_delay_ms") == 250);
    CHECK(hakmem_option_set("purge_lazy", "on") == 0 && get("purge_lazy") == 1);
    CHECK(hakmem_option_set("purge_lazy", "FALSE") == 0 && get("purge_lazy") == 0);
    CHECK(hakmem_option_set("huge_cache_mb", "2g") == 0 && get("huge_cache_mb") == 2048);
    CHECK(hakmem_option_set("huge_cache_mb", "64") == 0 && get("huge_cache_mb") == 64);
    CHECK(hakmem_option_set("purge_budget_kb", "1m") == 0 && get("purge_budget_kb") == 1024);
    CHECK(hakmem_option_set("purge_budget_kb", "512KiB") == 0 && get("purge_budget_kb") == 512);
    CHECK(hakmem_option_set("segment_cache", "3") == 0 && get("segment_cache") == 3);
    CHECK(hakmem_option_set("verbose", "yes") == 0 && get("verbose") == 1);
    CHECK(hakmem_option_set("verbose", "off") == 0 && get("verbose") == 0);
}

/* a bad value: EINVAL, the option keeps its value */
static void test_set_bad_value(void) {
    NEED_API(hakmem_option_set && hakmem_option_get);
    CHECK(hakmem_option_set("purge_delay_ms", "100") == 0);
    static const char *const bad[][2] = {
        { "purge_delay_ms", "soon" }, { "purge_delay_ms", "3600001" }, { "purge_delay_ms", "1k" },
        { "purge_delay_ms", "" }, { "segment_cache", "5000" }, { "huge_cache_mb", "512k" },
        { "purge_budget_kb", "1.5m" }, { "purge_lazy", "2" }, { "purge_lazy", "maybe" },
        { "huge_cache_mb", "-1m" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long before = get(bad[i][0]);
        errno = 0;
        int rc = hakmem_option_set(bad[i][0], bad[i][1]);
        CHECKF(rc == -1 && errno == EINVAL, "%s='%s': %d errno %d", bad[i][0], bad[i][1], rc, errno);
        CHECKF(get(bad[i][0]) == before, "%s changed to %ld", bad[i][0], get(bad[i][0]));
    }
    errno = 0;
    CHECK(hakmem_option_set(NULL, "1") == -1 && errno == EINVAL);
    errno = 0;
    CHECK(hakmem_option_set("purge_lazy", NULL) == -1 && errno == EINVAL);
}

/* the options read only at start-up are refused (EPERM) and keep their
 * value; an unknown name is ENOENT */
static void test_set_refused(void) {
    NEED_API(hakmem_option_set && hakmem_option_get);
    static const char *const fixed[] = { "stats", "crash_handler", "background_purge", "sample_bytes",
                                         "leak_report", "guard_sample", "profile", "HAKMEM_PROFILE",
                                         "profile_at_exit" };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        long before = get(fixed[i]);
        errno = 0;
        int rc = hakmem_option_set(fixed[i], "1");
        CHECKF(rc == -1 && errno == EPERM, "%s: %d errno %d", fixed[i], rc, errno);
        CHECKF(get(fixed[i]) == before, "%s changed", fixed[i]);
    }
    errno = 0;
    CHECK(hakmem_option_set("purge_delay", "1") == -1 && errno == ENOENT);
    errno = 0;
    CHECK(hakmem_option_set("HAKMEM_NONSENSE", "1") == -1 && errno == ENOENT);
}

/* a value set at run time takes effect: a freed huge block stays cached
 * (no munmap) while the huge cache is 1 GiB, and is unmapped at its free
 * once the cache is set to 0 */
static void test_set_takes_effect(void) {
    NEED_API(hakmem_option_set && hakmem_stats_get);
    CHECK(hakmem_option_set("purge_delay_ms", "-1") == 0);
    CHECK(hakmem_option_set("purge_budget_kb", "-1") == 0);
    CHECK(hakmem_option_set("huge_cache_mb", "1g") == 0);
    hakmem_stats_t s0, s1;
    size_t size = (size_t)8 << 20;
    char *p = malloc(size);
    CHECK(p != NULL);
    if (!p) return;
    memset(p, 1, 4096);
    hakmem_stats_get(&s0, sizeof s0);
    free(p);
    hakmem_stats_get(&s1, sizeof s1);
    CHECKF(s1.munmap_calls == s0.munmap_calls, "huge_cache_mb=1024: the free unmapped (%llu -> %llu)",
           (unsigned long long)s0.munmap_calls, (unsigned long long)s1.munmap_calls);
    CHECK(hakmem_option_set("huge_cache_mb", "0") == 0);
    p = malloc(size);
    CHECK(p != NULL);
    if (!p) return;
    memset(p, 1, 4096);
    hakmem_stats_get(&s0, sizeof s0);
    free(p);
    hakmem_stats_get(&s1, sizeof s1);
    CHECKF(s1.munmap_calls > s0.munmap_calls, "huge_cache_mb=0: the free kept the block mapped (%llu munmaps)",
           (unsigned long long)s1.munmap_calls);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "get") == 0) {
        if (!hakmem_option_get) { printf("hakmem not loaded\n"); return 1; }
        for (int i = 2; i < argc; i++) {
            long v;
            if (hakmem_option_get(argv[i], &v) == 0) printf("%s=%ld\n", argv[i], v);
            else printf("%s: errno %d\n", argv[i], errno);
        }
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "set") == 0) {
        if (!hakmem_option_set) { printf("hakmem not loaded\n"); return 1; }
        errno = 0;
        int rc = hakmem_option_set(argv[2], argv[3]);
        if (rc == 0) printf("set 0\n");
        else printf("set %d errno %d\n", rc, errno);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "api") == 0) {
        chk_prefix = "options.api";
        if (chk_parse_options(argc - 1, argv + 1)) return 2;
        RUN_TEST(get_forms);
        RUN_TEST(set_runtime);
        RUN_TEST(set_bad_value);
        RUN_TEST(set_refused);
        RUN_TEST(set_takes_effect);
        return check_exit_code();
    }
    if (argc == 1) return 0;
    fprintf(stderr, "usage: %s [get NAME... | set NAME VALUE | api [-p PREFIX] [--expect-hakmem]]\n", argv[0]);
    return 2;
}
