/* hak_options.c -- the one table of HAKMEM_* options, read once at start-up.
 *
 * Where a value comes from, last wins (docs/options.md, "Setting options"):
 * the table's default; the column of the profile HAKMEM_PROFILE picks
 * (speed, balanced, lean); the program's hakmem_conf string; the
 * environment; hakmem_option_set at run time, for the options marked
 * HAK_RUN.  A bad value is named in a warning and the value before it
 * stays; an unknown HAKMEM_* name in the environment is named in a warning
 * with the nearest known one.  HAKMEM_VERBOSE=1 prints the table with each
 * value's source.
 *
 * Nothing here allocates: the environment is read from environ in place,
 * hakmem_conf in place, and messages go through hak_message. */
#include "hak_hardened.h"   /* HAK_HARDENED_ENABLED */

hak_options_t hak_opt;   /* filled from the table by hak_options_init(), before any heap exists */

/* A program's defaults (include/hakmem.h): "name=value,name=value".  A weak
 * reference: 0 when the program defines none (or, under LD_PRELOAD, does
 * not export it). */
extern const char *hakmem_conf __attribute__((weak));

/* kinds of value (flags) */
#define HAK_BOOL  0x1u   /* 1/0, yes/no, true/false, on/off */
#define HAK_NUM   0x2u   /* a decimal number */
#define HAK_BYTES 0x4u   /* a size: a number, or with k, m or g (KiB, MiB, GiB) */
#define HAK_KIB   0x8u   /* a size counted in KiB: a plain number is KiB, 4m is 4096 */
#define HAK_MIB   0x10u  /* a size counted in MiB */
#define HAK_CGROUP 0x20u /* also the word cgroup, which is -1 (HAKMEM_MEMORY_LIMIT: the cgroup's limit) */
#define HAK_RUN   0x80u  /* hakmem_option_set may change it while the program runs */
#define HAK_SIZES (HAK_BYTES | HAK_KIB | HAK_MIB)

typedef struct hak_option_def_s {
    const char *name;          /* environment variable */
    long *value;
    long defaults[3];          /* speed, balanced, lean */
    long min, max;
    unsigned flags;            /* HAK_BOOL ... HAK_RUN */
    const char *help;
} hak_option_def_t;

/* (HAKMEM_GUARD_SAMPLE's default, 64 MiB in every profile: one guarded block
 * per 64 MiB allocated; docs/security.md, "Guarded sampling", says what it
 * costs and what it catches) */
/* HAK_RUN: read where it is used, every time, so a new value takes effect at
 * once; a torn or stale read is harmless (hak_purge.c reads the delay once
 * per use).  The others are read once at start-up (an atexit handler, a
 * signal handler, the purger thread, the sampling's state and the profile's
 * scale are set up from them) and are refused at run time. */
static hak_option_def_t hak_option_table[] = {
    { "HAKMEM_VERBOSE", &hak_opt.verbose, {0, 0, 0}, 0, 1, HAK_BOOL | HAK_RUN,
      "print version, build variant and every option at start-up" },
    { "HAKMEM_STATS", &hak_opt.stats, {0, 0, 0}, 0, 1, HAK_BOOL,
      "print statistics to stderr at exit" },
    { "HAKMEM_STATS_BY_CLASS", &hak_opt.stats_by_class, {0, 0, 0}, 0, 1, HAK_BOOL,
      "the statistics list each size class in use (always in the stats build)" },
    { "HAKMEM_CRASH_HANDLER", &hak_opt.crash_handler, {1, 1, 1}, 0, 1, HAK_BOOL,
      "report SIGSEGV/SIGBUS inside hakmem, then re-raise" },
    { "HAKMEM_PURGE_DELAY_MS", &hak_opt.purge_delay_ms, {1000, 250, 0}, -1, 3600000, HAK_NUM | HAK_RUN,
      "ms free memory stays committed unused before it is purged; -1 never" },
    { "HAKMEM_PURGE_BUDGET_KB", &hak_opt.purge_budget_kb, {16384, 4096, 0}, -1, 1 << 30, HAK_KIB | HAK_RUN,
      "KiB of free memory each heap and the process caches keep committed beyond the demand; -1 no limit" },
    { "HAKMEM_SEGMENT_CACHE", &hak_opt.segment_cache, {256, 128, 0}, 0, 1024, HAK_NUM | HAK_RUN,
      "empty 4 MiB segments kept mapped for reuse" },
    { "HAKMEM_HUGE_CACHE_MB", &hak_opt.huge_cache_mb, {4096, 1024, 0}, 0, 1 << 20, HAK_MIB | HAK_RUN,
      "MiB of freed huge blocks kept mapped for reuse" },
    { "HAKMEM_BACKGROUND_PURGE", &hak_opt.background_purge, {0, 0, 0}, 0, 1, HAK_BOOL,
      "a background thread purges memory whose delay has passed, also in idle programs" },
    { "HAKMEM_PURGE_LAZY", &hak_opt.purge_lazy, {0, 0, 0}, 0, 1, HAK_BOOL | HAK_RUN,
      "purge with MADV_FREE (RSS falls only under memory pressure) instead of MADV_DONTNEED; malloc_trim always uses MADV_DONTNEED" },
    { "HAKMEM_SAMPLE_BYTES", &hak_opt.sample_bytes, {0, 0, 0}, 0, 1L << 40, HAK_BYTES,
      "sample about one allocation per N bytes with its stack for heap profiles; 0 off" },
    { "HAKMEM_LEAK_REPORT", &hak_opt.leak_report, {0, 0, 0}, 0, 1, HAK_BOOL,
      "print the stacks of sampled blocks still live at exit (needs HAKMEM_SAMPLE_BYTES)" },
    { "HAKMEM_GUARD_SAMPLE", &hak_opt.guard_sample, {67108864, 67108864, 67108864}, 0, 1L << 40, HAK_BYTES,
      "put about one allocation per N bytes (up to 16 KiB) alone on guarded pages: an overflow, underflow or use after free of it faults and is reported with its stacks; 1 every allocation; 0 off (the hardened build: 0)" },
    { "HAKMEM_MEMORY_LIMIT", &hak_opt.memory_limit, {0, 0, 0}, 0, 1L << 60, HAK_BYTES | HAK_CGROUP,
      "soft limit of resident memory: bytes (k, m, g suffixes), or cgroup (its memory.max, read at start-up; shown as -1); above 90% every cached and empty page goes back at once; 0 off" },
};
#define HAK_OPTION_COUNT (sizeof hak_option_table / sizeof hak_option_table[0])

/* HAKMEM_* names read outside the table, by their own files (strings): an
 * environment name among them is no unknown option.  tests/suite_options.sh
 * checks that every getenv("HAKMEM_...") of src/ is known. */
static const char *const hak_option_extra[] = { "HAKMEM_PROFILE_AT_EXIT", "HAKMEM_STATS_FILE" };
#define HAK_EXTRA_COUNT (sizeof hak_option_extra / sizeof hak_option_extra[0])

/* The options whose value is text (a file name), from the environment only:
 * copied at start-up (the program may change its environment later); ""
 * when unset. */
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

/* where each value came from */
enum { HAK_SRC_DEFAULT, HAK_SRC_PROFILE, HAK_SRC_CONF, HAK_SRC_ENV, HAK_SRC_RUNTIME };
static const char *const hak_source_names[] = { "default", "profile", "hakmem_conf", "environment", "run time" };
static unsigned char hak_option_source[HAK_OPTION_COUNT];
static unsigned char hak_profile_source;

#define HAK_PREFIX "HAKMEM_"
#define HAK_PREFIX_LEN 7
#define HAK_NAME_MAX 64          /* longest name compared for a suggestion */

/* ---- small string helpers (no libc calls that could allocate) ---- */

static char hak_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* s[0..n) equals the string w, ignoring case */
static bool hak_ieq(const char *s, size_t n, const char *w) {
    size_t i = 0;
    for (; i < n && w[i]; i++) if (hak_lower(s[i]) != hak_lower(w[i])) return false;
    return i == n && w[i] == 0;
}

/* s[0..n) equals w exactly */
static bool hak_eq(const char *s, size_t n, const char *w) { return strncmp(s, w, n) == 0 && w[n] == 0; }

static void hak_trim(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\t')) { (*s)++; (*n)--; }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

/* the name without "HAKMEM_", lower case, into buf (hakmem_conf's spelling) */
static const char *hak_short_name(const char *name, char *buf, size_t cap) {
    size_t i = 0;
    for (name += HAK_PREFIX_LEN; *name && i + 1 < cap; name++) buf[i++] = hak_lower(*name);
    buf[i] = 0;
    return buf;
}

/* s[0..n) as a NUL-terminated string for a message, cut to the buffer */
static const char *hak_quote(const char *s, size_t n, char *buf, size_t cap) {
    size_t k = n < cap - 4 ? n : cap - 4;
    memcpy(buf, s, k);
    if (k < n) memcpy(buf + k, "...", 3), k += 3;
    buf[k] = 0;
    return buf;
}

/* ---- values ---- */

/* A decimal number with an optional sign; for a size option an optional
 * unit after it (k, kb, kib, m, mb, mib, g, gb, gib, any case: powers of
 * 1024), converted to the option's own unit, which it must fill exactly. */
static bool hak_parse_number(unsigned flags, const char *s, size_t n, long *out) {
    size_t i = 0;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i == n || s[i] < '0' || s[i] > '9') return false;
    unsigned long v = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (1UL << 62) / 10) return false;   /* far beyond every option's range */
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (i < n) {                                 /* a unit */
        if (!(flags & HAK_SIZES) || neg) return false;
        unsigned shift;
        switch (hak_lower(s[i])) {
        case 'k': shift = 10; break;
        case 'm': shift = 20; break;
        case 'g': shift = 30; break;
        default: return false;
        }
        const char *u = s + i + 1;
        size_t un = n - i - 1;
        if (!(un == 0 || hak_ieq(u, un, "b") || hak_ieq(u, un, "ib"))) return false;
        if (v > (1UL << 62) >> shift) return false;
        v <<= shift;
        unsigned unit = flags & HAK_KIB ? 10 : flags & HAK_MIB ? 20 : 0;
        if (v & ((1UL << unit) - 1)) return false;   /* not a whole number of the option's unit */
        v >>= unit;
    }
    *out = neg ? -(long)v : (long)v;
    return true;
}

static bool hak_parse_value(const hak_option_def_t *o, const char *s, size_t n, long *out) {
    hak_trim(&s, &n);
    long v;
    if (o->flags & HAK_BOOL) {
        static const char *const words[] = { "no", "yes", "false", "true", "off", "on" };
        for (unsigned i = 0; i < 6; i++)
            if (hak_ieq(s, n, words[i])) { *out = i & 1; return true; }
    }
    if ((o->flags & HAK_CGROUP) && hak_ieq(s, n, "cgroup")) { *out = -1; return true; }
    if (!hak_parse_number(o->flags, s, n, &v) || v < o->min || v > o->max) return false;
    *out = v;
    return true;
}

/* "HAKMEM_X='v' is not ...; using D" */
static void hak_warn_value(const char *label, const char *value, const hak_option_def_t *o) {
    long now = *o->value;
    if (o->flags & HAK_BOOL)
        hak_message("hakmem: warning: %s='%s' is not 1/0, yes/no, true/false or on/off; using %ld\n",
                    label, value, now);
    else if (o->flags & HAK_SIZES)
        hak_message("hakmem: warning: %s='%s' is not a size in [%ld, %ld]%s (a number, or one with k, m or g%s); "
                    "using %ld\n", label, value, o->min, o->max,
                    o->flags & HAK_KIB ? " KiB" : o->flags & HAK_MIB ? " MiB" : " bytes",
                    o->flags & HAK_CGROUP ? ", or cgroup" : "", now);
    else
        hak_message("hakmem: warning: %s='%s' is not a number in [%ld, %ld]; using %ld\n",
                    label, value, o->min, o->max, now);
}

/* ---- names ---- */

/* The table's row of name (HAKMEM_X exactly when exact; else with or
 * without the prefix, any case); -1 if none. */
static int hak_find(const char *name, size_t n, bool exact) {
    if (!exact && n >= HAK_PREFIX_LEN && hak_ieq(name, HAK_PREFIX_LEN, HAK_PREFIX)) {
        name += HAK_PREFIX_LEN;
        n -= HAK_PREFIX_LEN;
    }
    for (size_t i = 0; i < HAK_OPTION_COUNT; i++) {
        const char *t = hak_option_table[i].name;
        if (exact ? hak_eq(name, n, t) : hak_ieq(name, n, t + HAK_PREFIX_LEN)) return (int)i;
    }
    return -1;
}

static bool hak_is_profile(const char *name, size_t n, bool exact) {
    if (exact) return hak_eq(name, n, "HAKMEM_PROFILE");
    return hak_ieq(name, n, "HAKMEM_PROFILE") || hak_ieq(name, n, "PROFILE");
}

static bool hak_is_extra(const char *name, size_t n, bool exact) {
    for (size_t i = 0; i < HAK_EXTRA_COUNT; i++) {
        const char *t = hak_option_extra[i];
        if (exact ? hak_eq(name, n, t) : hak_ieq(name, n, t) || hak_ieq(name, n, t + HAK_PREFIX_LEN)) return true;
    }
    return false;
}

/* The optimal-string-alignment distance (Levenshtein plus swaps of two
 * neighbours), ignoring case, of a[0..an) and b[0..bn), each cut to
 * HAK_NAME_MAX: three rows on the stack. */
static unsigned hak_distance(const char *a, size_t an, const char *b, size_t bn) {
    if (an > HAK_NAME_MAX) an = HAK_NAME_MAX;
    if (bn > HAK_NAME_MAX) bn = HAK_NAME_MAX;
    unsigned rows[3][HAK_NAME_MAX + 1];
    unsigned *pp = rows[0], *p = rows[1], *c = rows[2];
    for (size_t j = 0; j <= bn; j++) p[j] = (unsigned)j;
    for (size_t i = 1; i <= an; i++) {
        c[0] = (unsigned)i;
        for (size_t j = 1; j <= bn; j++) {
            unsigned cost = hak_lower(a[i - 1]) != hak_lower(b[j - 1]);
            unsigned d = p[j] + 1;
            if (c[j - 1] + 1 < d) d = c[j - 1] + 1;
            if (p[j - 1] + cost < d) d = p[j - 1] + cost;
            if (i > 1 && j > 1 && hak_lower(a[i - 1]) == hak_lower(b[j - 2]) &&
                hak_lower(a[i - 2]) == hak_lower(b[j - 1]) && pp[j - 2] + 1 < d)
                d = pp[j - 2] + 1;
            c[j] = d;
        }
        unsigned *t = pp; pp = p; p = c; c = t;
    }
    return p[bn];
}

/* The known name nearest to name[0..n) (both without "HAKMEM_"), and
 * whether it is near enough to be a misspelling of it. */
static const char *hak_nearest(const char *name, size_t n, bool *close) {
    const char *best = "HAKMEM_PROFILE";
    unsigned bd = hak_distance(name, n, best + HAK_PREFIX_LEN, strlen(best + HAK_PREFIX_LEN));
    for (size_t i = 0; i < HAK_OPTION_COUNT + HAK_EXTRA_COUNT; i++) {
        const char *t = i < HAK_OPTION_COUNT ? hak_option_table[i].name : hak_option_extra[i - HAK_OPTION_COUNT];
        unsigned d = hak_distance(name, n, t + HAK_PREFIX_LEN, strlen(t + HAK_PREFIX_LEN));
        if (d < bd) { bd = d; best = t; }
    }
    size_t len = strlen(best + HAK_PREFIX_LEN);
    *close = bd <= 2 || bd * 3 <= len;
    return best;
}

/* ---- start-up ---- */

static int hak_profile_parse(const char *s, size_t n) {
    hak_trim(&s, &n);
    for (int i = 0; i < 3; i++) if (hak_ieq(s, n, hak_profile_names[i])) return i;
    return -1;
}

/* One pass over hakmem_conf: the profile only (profile_pass: *profile
 * becomes the one named, if any and valid; the last counts), or every other
 * item -- each set from the conf, a bad one named in a warning. */
static void hak_conf_read(const char *conf, bool profile_pass, int *profile) {
    char qv[160], qn[80], sn[HAK_NAME_MAX];
    for (const char *p = conf; *p;) {
        const char *item = p;
        while (*p && *p != ',') p++;
        size_t n = (size_t)(p - item);
        if (*p == ',') p++;
        hak_trim(&item, &n);
        if (n == 0) continue;
        const char *eq = memchr(item, '=', n);
        if (!eq) {
            if (!profile_pass)
                hak_message("hakmem: warning: hakmem_conf: '%s' is not name=value; ignored\n",
                            hak_quote(item, n, qv, sizeof qv));
            continue;
        }
        const char *name = item, *value = eq + 1;
        size_t nn = (size_t)(eq - item), vn = n - nn - 1;
        hak_trim(&name, &nn);
        if (hak_is_profile(name, nn, false)) {
            if (!profile_pass) continue;
            int pr = hak_profile_parse(value, vn);
            if (pr < 0)
                hak_message("hakmem: warning: hakmem_conf: profile='%s' is not speed, balanced or lean; using %s\n",
                            hak_quote(value, vn, qv, sizeof qv), hak_profile_names[*profile < 0 ? 1 : *profile]);
            else *profile = pr;
            continue;
        }
        if (profile_pass) continue;
        int i = hak_find(name, nn, false);
        if (i < 0) {
            const char *nm = hak_quote(name, nn, qn, sizeof qn);
            if (hak_is_extra(name, nn, false)) {
                hak_message("hakmem: warning: hakmem_conf: '%s' can be set only in the environment; ignored\n", nm);
                continue;
            }
            size_t skip = nn >= HAK_PREFIX_LEN && hak_ieq(name, HAK_PREFIX_LEN, HAK_PREFIX) ? HAK_PREFIX_LEN : 0;
            bool close;
            const char *near = hak_short_name(hak_nearest(name + skip, nn - skip, &close), sn, sizeof sn);
            if (close)
                hak_message("hakmem: warning: hakmem_conf: unknown option '%s' ignored; did you mean %s?\n", nm, near);
            else
                hak_message("hakmem: warning: hakmem_conf: unknown option '%s' ignored (the nearest is %s; "
                            "docs/options.md lists them all)\n", nm, near);
            continue;
        }
        const hak_option_def_t *o = &hak_option_table[i];
        long v;
        if (hak_parse_value(o, value, vn, &v)) {
            *o->value = v;
            hak_option_source[i] = HAK_SRC_CONF;
        } else {
            char label[HAK_NAME_MAX + 16];
            memcpy(label, "hakmem_conf: ", 13);
            hak_short_name(o->name, label + 13, sizeof label - 13);
            hak_warn_value(label, hak_quote(value, vn, qv, sizeof qv), o);
        }
    }
}

void hak_options_init(void) {
    int saved = errno;
    extern char **environ;
    const char *env[HAK_OPTION_COUNT] = { 0 }, *env_profile = NULL, *env_text[HAK_OPTION_TEXTS] = { 0 };
    /* the environment, once, in place: the first of each name counts (as
     * with getenv); an unknown HAKMEM_* name is named now */
    for (char **e = environ; e && *e; e++) {
        const char *s = *e;
        if (strncmp(s, HAK_PREFIX, HAK_PREFIX_LEN) != 0) continue;
        const char *eq = strchr(s, '=');
        if (!eq) continue;
        size_t n = (size_t)(eq - s);
        int i = hak_find(s, n, true);
        if (i >= 0) { if (!env[i]) env[i] = eq + 1; continue; }
        if (hak_is_profile(s, n, true)) { if (!env_profile) env_profile = eq + 1; continue; }
        for (size_t t = 0; t < HAK_OPTION_TEXTS; t++)
            if (hak_eq(s, n, hak_option_texts[t].name) && !env_text[t]) env_text[t] = eq + 1;
        if (hak_is_extra(s, n, true)) continue;
        bool close;
        const char *near = hak_nearest(s + HAK_PREFIX_LEN, n - HAK_PREFIX_LEN, &close);
        char qn[80];
        if (close)
            hak_message("hakmem: warning: unknown option %s ignored; did you mean %s?\n",
                        hak_quote(s, n, qn, sizeof qn), near);
        else
            hak_message("hakmem: warning: unknown option %s ignored (the nearest is %s; "
                        "HAKMEM_VERBOSE=1 lists them all)\n", hak_quote(s, n, qn, sizeof qn), near);
    }
    const char *conf = &hakmem_conf ? hakmem_conf : NULL;
    for (size_t i = 0; i < HAK_OPTION_TEXTS; i++) {
        hak_option_text_t *o = &hak_option_texts[i];
        const char *t = env_text[i];
        size_t n = t ? strlen(t) : 0;
        if (n >= o->cap) {
            hak_message("hakmem: warning: %s is longer than %zu bytes; ignored\n", o->name, o->cap - 1);
            n = 0;
        }
        memcpy(o->buf, t ? t : "", n);
        o->buf[n] = 0;
        *o->value = o->buf;
    }

    /* the profile: the environment's, else the conf's, else balanced */
    int profile = -1;
    hak_profile_source = HAK_SRC_DEFAULT;
    if (conf) {
        hak_conf_read(conf, true, &profile);
        if (profile >= 0) hak_profile_source = HAK_SRC_CONF;
    }
    if (env_profile) {
        int pr = hak_profile_parse(env_profile, strlen(env_profile));
        if (pr < 0)
            hak_message("hakmem: warning: HAKMEM_PROFILE='%s' is not speed, balanced or lean; using %s\n",
                        env_profile, hak_profile_names[profile < 0 ? 1 : profile]);
        else {
            profile = pr;
            hak_profile_source = HAK_SRC_ENV;
        }
    }
    if (profile < 0) profile = 1;
    hak_opt.profile = profile;

    /* the profile's column, then the conf, then the environment */
    for (size_t i = 0; i < HAK_OPTION_COUNT; i++) {
        const hak_option_def_t *o = &hak_option_table[i];
        *o->value = o->defaults[profile];
        bool varies = o->defaults[0] != o->defaults[1] || o->defaults[1] != o->defaults[2];
        hak_option_source[i] = hak_profile_source != HAK_SRC_DEFAULT && varies ? HAK_SRC_PROFILE : HAK_SRC_DEFAULT;
    }
    if (conf) hak_conf_read(conf, false, &profile);
    for (size_t i = 0; i < HAK_OPTION_COUNT; i++) {
        const hak_option_def_t *o = &hak_option_table[i];
        long v;
        if (!env[i]) continue;
        if (hak_parse_value(o, env[i], strlen(env[i]), &v)) {
            *o->value = v;
            hak_option_source[i] = HAK_SRC_ENV;
        } else {
            hak_warn_value(o->name, env[i], o);
        }
    }
    /* the hardened build puts a trailer at the end of every block's slot
     * (hak_hardened.c); a guarded block's end is its guard page.  Its
     * default is 0; a value set (environment or hakmem_conf) is named in a
     * warning. */
    if (HAK_HARDENED_ENABLED && hak_opt.guard_sample != 0) {
        int g = hak_find("HAKMEM_GUARD_SAMPLE", 19, true);
        if (g >= 0 && hak_option_source[g] >= HAK_SRC_CONF)
            hak_message("hakmem: warning: HAKMEM_GUARD_SAMPLE=%ld is not for the hardened build, which checks "
                        "every block; using 0\n", hak_opt.guard_sample);
        hak_opt.guard_sample = 0;
    }
    errno = saved;
}

/* ---- the listing ---- */

static const char hak_spaces[] = "                                        ";   /* 40 */

static const char *hak_pad(size_t used, size_t width) {
    size_t n = used < width ? width - used : 1;
    if (n > sizeof hak_spaces - 1) n = sizeof hak_spaces - 1;
    return hak_spaces + (sizeof hak_spaces - 1 - n);
}

static size_t hak_digits(long v) {
    size_t n = v < 0 ? 2 : 1;
    for (unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v; u >= 10; u /= 10) n++;
    return n;
}

void hak_options_print(void) {
    hak_message("hakmem %s (%s build), profile %s (%s)\n", HAKMEM_VERSION_STRING,
                hakmem_build_variant(), hak_profile_names[hak_opt.profile], hak_source_names[hak_profile_source]);
    hak_message("hakmem:   option=value%ssource%smeaning\n", hak_pad(12, 36), hak_pad(6, 13));
    for (size_t i = 0; i < HAK_OPTION_COUNT; i++) {
        const hak_option_def_t *o = &hak_option_table[i];
        long v = __atomic_load_n(o->value, __ATOMIC_RELAXED);
        const char *src = hak_source_names[hak_option_source[i]];
        hak_message("hakmem:   %s=%ld%s%s%s%s\n", o->name, v, hak_pad(strlen(o->name) + 1 + hak_digits(v), 36),
                    src, hak_pad(strlen(src), 13), o->help);
    }
    for (size_t i = 0; i < HAK_OPTION_TEXTS; i++) {
        const hak_option_text_t *o = &hak_option_texts[i];
        const char *v = **o->value ? *o->value : "(unset)";
        const char *src = **o->value ? "environment" : "default";
        hak_message("hakmem:   %s=%s%s%s%s%s\n", o->name, v, hak_pad(strlen(o->name) + 1 + strlen(v), 36),
                    src, hak_pad(strlen(src), 13), o->help);
    }
}

/* ---- at run time (hak_option_api.c: hakmem_option_set/get, after start-up) ---- */

int hak_option_set(const char *name, const char *value) {
    if (!name || !value) return EINVAL;
    int i = hak_find(name, strlen(name), false);
    if (i < 0) return hak_is_profile(name, strlen(name), false) || hak_is_extra(name, strlen(name), false)
                      ? EPERM : ENOENT;
    const hak_option_def_t *o = &hak_option_table[i];
    if (!(o->flags & HAK_RUN)) return EPERM;
    long v;
    if (!hak_parse_value(o, value, strlen(value), &v)) return EINVAL;
    __atomic_store_n(o->value, v, __ATOMIC_RELAXED);
    hak_option_source[i] = HAK_SRC_RUNTIME;
    if (__atomic_load_n(&hak_opt.verbose, __ATOMIC_RELAXED))
        hak_message("hakmem: %s=%ld (set at run time)\n", o->name, v);
    return 0;
}

int hak_option_get(const char *name, long *value) {
    if (!name || !value) return EINVAL;
    size_t n = strlen(name);
    int i = hak_find(name, n, false);
    if (i >= 0) *value = __atomic_load_n(hak_option_table[i].value, __ATOMIC_RELAXED);
    else if (hak_is_profile(name, n, false)) *value = hak_opt.profile;
    else return ENOENT;
    return 0;
}

HAK_EXPORT const char *hakmem_build_variant(void) {
    return HAK_DEBUG_ENABLED ? "debug" : HAK_STATS_FULL_ENABLED ? "stats" : HAK_HARDENED_ENABLED ? "hardened" : "release";
}
