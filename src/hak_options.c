/* hak_options.c -- the one table of HAKMEM_* options, read once at start-up.
 *
 * HAKMEM_PROFILE picks a column of defaults (speed, balanced, lean); each
 * option can then be overridden by its own variable.  A bad value is named in
 * a warning and the default stays.  HAKMEM_VERBOSE=1 prints the table.
 * docs/options.md documents every row. */
#include "hak_hardened.h"   /* HAK_HARDENED_ENABLED */
#include <stdlib.h>

hak_options_t hak_opt;   /* filled from the table by hak_options_init(), before any heap exists */

typedef struct hak_option_def_s {
    const char *name;          /* environment variable */
    long *value;
    long defaults[3];          /* speed, balanced, lean */
    long min, max;
    const char *help;
} hak_option_def_t;

static hak_option_def_t hak_option_table[] = {
    { "HAKMEM_VERBOSE", &hak_opt.verbose, {0, 0, 0}, 0, 1,
      "print version, build variant and every option at start-up" },
    { "HAKMEM_STATS", &hak_opt.stats, {0, 0, 0}, 0, 1,
      "print statistics to stderr at exit" },
    { "HAKMEM_STATS_BY_CLASS", &hak_opt.stats_by_class, {0, 0, 0}, 0, 1,
      "the statistics list each size class in use (always in the stats build)" },
    { "HAKMEM_CRASH_HANDLER", &hak_opt.crash_handler, {1, 1, 1}, 0, 1,
      "report SIGSEGV/SIGBUS inside hakmem, then re-raise" },
    { "HAKMEM_PURGE_DELAY_MS", &hak_opt.purge_delay_ms, {1000, 250, 0}, -1, 3600000,
      "ms free memory stays committed unused before it is purged; -1 never" },
    { "HAKMEM_PURGE_BUDGET_KB", &hak_opt.purge_budget_kb, {16384, 4096, 0}, -1, 1 << 30,
      "KiB of free memory each heap and the process caches keep committed beyond the demand; -1 no limit" },
    { "HAKMEM_SEGMENT_CACHE", &hak_opt.segment_cache, {256, 128, 0}, 0, 1024,
      "empty 4 MiB segments kept mapped for reuse" },
    { "HAKMEM_HUGE_CACHE_MB", &hak_opt.huge_cache_mb, {4096, 1024, 0}, 0, 1 << 20,
      "MiB of freed huge blocks kept mapped for reuse" },
    { "HAKMEM_BACKGROUND_PURGE", &hak_opt.background_purge, {0, 0, 0}, 0, 1,
      "a background thread purges memory whose delay has passed, also in idle programs" },
    { "HAKMEM_PURGE_LAZY", &hak_opt.purge_lazy, {0, 0, 0}, 0, 1,
      "purge with MADV_FREE (RSS falls only under memory pressure) instead of MADV_DONTNEED; malloc_trim always uses MADV_DONTNEED" },
    { "HAKMEM_SAMPLE_BYTES", &hak_opt.sample_bytes, {0, 0, 0}, 0, 1L << 40,
      "sample about one allocation per N bytes with its stack for heap profiles; 0 off" },
    { "HAKMEM_LEAK_REPORT", &hak_opt.leak_report, {0, 0, 0}, 0, 1,
      "print the stacks of sampled blocks still live at exit (needs HAKMEM_SAMPLE_BYTES)" },
    { "HAKMEM_GUARD_SAMPLE", &hak_opt.guard_sample, {0, 0, 0}, 0, 1L << 40,
      "put about one allocation per N bytes (up to 16 KiB) alone on guarded pages: an overflow, underflow or use after free of it faults and is reported with its stacks; 1 every allocation; 0 off" },
};
#define HAK_OPTION_COUNT (sizeof hak_option_table / sizeof hak_option_table[0])

/* The table's rows whose value is text (a file name): copied at start-up
 * (the program may change its environment later); "" when unset. */
typedef struct hak_option_text_s {
    const char *name;
    const char **value;
    char *buf;
    size_t cap;
    const char *help;
} hak_option_text_t;
static char hak_stats_file_buf[4096];
static hak_option_text_t hak_option_texts[] = {
    { "HAKMEM_STATS_FILE", &hak_opt.stats_file, hak_stats_file_buf, sizeof hak_stats_file_buf,
      "write the statistics to this file instead of stderr (%p: the pid); setting it asks for them at exit" },
};
#define HAK_OPTION_TEXTS (sizeof hak_option_texts / sizeof hak_option_texts[0])

static const char *const hak_profile_names[3] = { "speed", "balanced", "lean" };

static bool hak_parse_long(const char *s, long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != 0) return false;
    *out = v;
    return true;
}

void hak_options_init(void) {
    int saved = errno;
    const char *prof = getenv("HAKMEM_PROFILE");
    hak_opt.profile = 1;
    if (prof && *prof) {
        int found = -1;
        for (int i = 0; i < 3; i++) if (strcmp(prof, hak_profile_names[i]) == 0) found = i;
        if (found < 0) hak_message("hakmem: warning: HAKMEM_PROFILE='%s' is not speed, balanced or lean; using balanced\n", prof);
        else hak_opt.profile = found;
    }
    for (size_t i = 0; i < HAK_OPTION_TEXTS; i++) {
        hak_option_text_t *o = &hak_option_texts[i];
        const char *s = getenv(o->name);
        size_t n = s ? strlen(s) : 0;
        if (n >= o->cap) {
            hak_message("hakmem: warning: %s is longer than %zu bytes; ignored\n", o->name, o->cap - 1);
            n = 0;
        }
        memcpy(o->buf, s ? s : "", n);
        o->buf[n] = 0;
        *o->value = o->buf;
    }
    for (size_t i = 0; i < HAK_OPTION_COUNT; i++) {
        hak_option_def_t *o = &hak_option_table[i];
        *o->value = o->defaults[hak_opt.profile];
        const char *s = getenv(o->name);
        if (!s) continue;
        long v;
        if (!hak_parse_long(s, &v) || v < o->min || v > o->max)
            hak_message("hakmem: warning: %s='%s' is not a number in [%ld, %ld]; using %ld\n",
                        o->name, s, o->min, o->max, *o->value);
        else *o->value = v;
    }
    /* the hardened build puts a trailer at the end of every block's slot
     * (hak_hardened.c); a guarded block's end is its guard page */
    if (HAK_HARDENED_ENABLED && hak_opt.guard_sample != 0) {
        hak_message("hakmem: warning: HAKMEM_GUARD_SAMPLE=%ld is not for the hardened build, which checks "
                    "every block; using 0\n", hak_opt.guard_sample);
        hak_opt.guard_sample = 0;
    }
    errno = saved;
}

void hak_options_print(void) {
    hak_message("hakmem %s (%s build), profile %s\n", HAKMEM_VERSION_STRING,
                hakmem_build_variant(), hak_profile_names[hak_opt.profile]);
    for (size_t i = 0; i < HAK_OPTION_COUNT; i++) {
        const hak_option_def_t *o = &hak_option_table[i];
        hak_message("hakmem:   %s=%ld  (%s)\n", o->name, *o->value, o->help);
    }
    for (size_t i = 0; i < HAK_OPTION_TEXTS; i++) {
        const hak_option_text_t *o = &hak_option_texts[i];
        hak_message("hakmem:   %s=%s  (%s)\n", o->name, **o->value ? *o->value : "(unset)", o->help);
    }
}

HAK_EXPORT const char *hakmem_build_variant(void) {
    return HAK_DEBUG_ENABLED ? "debug" : HAK_STATS_FULL_ENABLED ? "stats" : HAK_HARDENED_ENABLED ? "hardened" : "release";
}
