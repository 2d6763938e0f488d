/* hak_limit.c -- the soft memory limit (HAKMEM_MEMORY_LIMIT,
 * hakmem_memory_limit_*; docs/memory-return.md, "A soft memory limit").
 *
 * The estimate: the memory hakmem holds resident is what it has mapped
 * (hak_os.c counts every mapping) less what it knows is not resident,
 * hak_counters.bytes_clean: page slots never touched since their segment
 * was formatted or purged since (whole slots: hak_purge.h), purged cached
 * segments, no-access reservations, the no-access end of the hardened
 * build's huge blocks (hak_huge.c) and segments, and what a cached huge
 * mapping holds past its dirty start (hak_purge.c).  No /proc, no system
 * call: two counters the slow paths keep anyway.
 *
 * The rule: a slow path that may add to it -- a page taken from a segment
 * (hak_segment_page_alloc), a huge block mapped or grown (hak_huge.c) --
 * compares the estimate with the high mark, 90 % of the limit.  Above it,
 * the pressure starts: every free page slot of every heap (kept pages
 * included), exited threads' heaps and both caches go back at once, as
 * malloc_trim does; and while it lasts, the purge delay is 0 (hak_purge.c)
 * and no emptied page is kept (hak_page_retire), so every page a free
 * empties goes back at once and the caches keep nothing.  It ends when the
 * estimate is below the low mark, 80 % of the limit, looked at whenever
 * memory goes back (a page slot given back, a huge block unmapped) and on
 * the slow paths above.  While it lasts, the estimate growing by 1/16 of
 * the limit beyond what it was after the last return returns everything
 * again (a 16th of what stayed resident, if that is more).  When even
 * that leaves more resident than the limit, a warning says so, once.
 * Nothing fails because of the limit: an allocation above it is
 * served as without it, only memory hakmem holds free goes back.  The fast
 * paths never look at any of this.
 *
 * HAKMEM_MEMORY_LIMIT=cgroup: the limit of the process's cgroup --
 * memory.max (cgroup v2), else memory.limit_in_bytes of the v1 memory
 * controller, the smallest along the path up to the hierarchy's root --
 * read by hak_limit_start (the library constructor) and by
 * hakmem_memory_limit_refresh(), never by an allocation function, with raw
 * system calls (no cancellation point). */
#include "hak_purge.h"
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic uint64_t hak_limit_bytes;        /* 0: no limit */
_Atomic int hak_limit_pressing;                 /* hak_internal.h */
static _Atomic uint64_t hak_limit_after;        /* the estimate after the last return */
static _Atomic int hak_limit_busy;              /* a thread is returning memory */
static _Atomic uint64_t hak_limit_returns, hak_limit_pressures;

static uint64_t hak_limit_resident(void) {
    uint64_t m = atomic_load_explicit(&hak_counters.bytes_mapped, memory_order_relaxed);
    uint64_t c = atomic_load_explicit(&hak_counters.bytes_clean, memory_order_relaxed);
    return m > c ? m - c : 0;
}
static uint64_t hak_limit_high(uint64_t limit) { return limit - limit / 10; }
static uint64_t hak_limit_low(uint64_t limit) { return limit - limit / 5; }

/* Every free page slot, kept page, exited thread's heap and cached mapping
 * goes back (one thread at a time: another that finds it under way goes
 * on, its allocation is not held up). */
static void hak_limit_return_all(uint64_t limit) {
    if (atomic_exchange_explicit(&hak_limit_busy, 1, memory_order_acquire)) return;
    if (hak_segment_hooks.sweep) hak_segment_hooks.sweep(true);
    hak_purge_all_heaps();
    hak_cache_trim();
    uint64_t r = hak_limit_resident();
    atomic_store_explicit(&hak_limit_after, r, memory_order_relaxed);
    atomic_fetch_add_explicit(&hak_limit_returns, 1, memory_order_relaxed);
    static _Atomic bool warned;
    if (r > limit && !atomic_exchange_explicit(&warned, true, memory_order_relaxed))
        hak_message("hakmem: warning: HAKMEM_MEMORY_LIMIT: %lu bytes resident with every free page returned, "
                    "above the limit of %lu: the program's live memory is larger (said once)\n",
                    (unsigned long)r, (unsigned long)limit);
    atomic_store_explicit(&hak_limit_busy, 0, memory_order_release);
}

/* A fork child: the thread that was returning memory is not there. */
void hak_limit_fork_child(void) { atomic_store_explicit(&hak_limit_busy, 0, memory_order_relaxed); }

/* Below the low mark the pressure ends. */
void hak_limit_relax(void) {
    if (hak_likely(!hak_limit_pressed())) return;
    uint64_t limit = atomic_load_explicit(&hak_limit_bytes, memory_order_relaxed);
    if (limit == 0 || hak_limit_resident() < hak_limit_low(limit))
        atomic_store_explicit(&hak_limit_pressing, 0, memory_order_relaxed);
}

void hak_limit_check(void) {
    uint64_t limit = atomic_load_explicit(&hak_limit_bytes, memory_order_relaxed);
    if (hak_likely(limit == 0)) return;
    uint64_t r = hak_limit_resident(), high = hak_limit_high(limit);
    if (!hak_limit_pressed()) {
        if (r <= high) return;
        if (atomic_exchange_explicit(&hak_limit_pressing, 1, memory_order_relaxed) == 0)
            atomic_fetch_add_explicit(&hak_limit_pressures, 1, memory_order_relaxed);
        hak_limit_return_all(limit);
    } else if (r > high) {
        /* again once it grew by a 16th (of the limit, or of what stayed
         * resident last time if more: a live set above the limit costs a
         * return per 6 % of growth, not one per page) */
        uint64_t after = atomic_load_explicit(&hak_limit_after, memory_order_relaxed);
        if (r > after + (after > limit ? after : limit) / 16) hak_limit_return_all(limit);
    }
    hak_limit_relax();
}

/* ---- the cgroup's limit (start-up and hakmem_memory_limit_refresh only) ---- */

typedef struct hak_lines_s {
    int fd;
    bool eof;
    size_t len, pos;
    char buf[1024];
} hak_lines_t;

static int hak_file_open(const char *path) {
    long fd;
    do fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    return (int)fd;
}
static void hak_file_close(int fd) { syscall(SYS_close, fd); }

/* The next line (without its newline) into line; a line longer than cap - 1
 * is cut and *cut says so.  False at the end of the file. */
static bool hak_line_next(hak_lines_t *r, char *line, size_t cap, bool *cut) {
    size_t n = 0;
    bool any = false;
    *cut = false;
    for (;;) {
        if (r->pos == r->len) {
            long k = -1;
            if (!r->eof) {
                do k = syscall(SYS_read, r->fd, r->buf, sizeof r->buf);
                while (k < 0 && errno == EINTR);
            }
            if (k <= 0) { r->eof = true; break; }
            r->len = (size_t)k;
            r->pos = 0;
        }
        char c = r->buf[r->pos++];
        any = true;
        if (c == '\n') break;
        if (n + 1 < cap) line[n++] = c;
        else *cut = true;
    }
    line[n] = 0;
    return any;
}

#define HAK_PATH_MAX 1024

/* The process's cgroup path in the v2 hierarchy (v2) or in the v1 one of the
 * memory controller, from /proc/self/cgroup. */
static bool hak_cgroup_path(bool v2, char *path) {
    hak_lines_t r = { .fd = hak_file_open("/proc/self/cgroup") };
    if (r.fd < 0) return false;
    char line[HAK_PATH_MAX + 64];
    bool cut, found = false;
    while (!found && hak_line_next(&r, line, sizeof line, &cut)) {
        if (cut) continue;
        char *ctl = strchr(line, ':'), *p = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!p) continue;
        *p++ = 0;
        ctl++;
        if (v2) found = strcmp(line, "0") == 0 && *ctl == 0;
        else for (char *c = ctl; *c && !found; c += strcspn(c, ",") + (c[strcspn(c, ",")] == ',')) {
            size_t k = strcspn(c, ",");
            found = k == 6 && memcmp(c, "memory", 6) == 0;
        }
        if (found && strlen(p) < HAK_PATH_MAX) memcpy(path, p, strlen(p) + 1);
        else found = false;
    }
    hak_file_close(r.fd);
    return found;
}

/* A mountinfo field, with its \ooo escapes undone, in place. */
static void hak_unescape(char *s) {
    char *d = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
            *d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *d++ = *s;
        }
    }
    *d = 0;
}

/* Where the hierarchy is mounted (the first mount of a cgroup2 file system,
 * or of a v1 one with the memory controller) and the cgroup path it shows
 * as its root. */
static bool hak_cgroup_mount(bool v2, char *mnt, char *root) {
    hak_lines_t r = { .fd = hak_file_open("/proc/self/mountinfo") };
    if (r.fd < 0) return false;
    char line[3 * HAK_PATH_MAX];
    bool cut, found = false;
    while (!found && hak_line_next(&r, line, sizeof line, &cut)) {
        if (cut) continue;
        /* id parent dev root mount-point options [optional...] - type source super-options */
        char *f[6], *save = NULL, *tok = strtok_r(line, " ", &save);
        int nf = 0;
        while (tok && nf < 6) {
            f[nf++] = tok;
            if (nf < 6) tok = strtok_r(NULL, " ", &save);
        }
        if (nf < 6) continue;
        while (tok && strcmp(tok, "-") != 0) tok = strtok_r(NULL, " ", &save);   /* the optional fields */
        char *type = tok ? strtok_r(NULL, " ", &save) : NULL;
        char *source = type ? strtok_r(NULL, " ", &save) : NULL;
        char *opts = source ? strtok_r(NULL, " ", &save) : NULL;
        if (!type) continue;
        if (v2) found = strcmp(type, "cgroup2") == 0;
        else if (strcmp(type, "cgroup") == 0 && opts)
            for (char *c = opts; *c && !found; c += strcspn(c, ",") + (c[strcspn(c, ",")] == ',')) {
                size_t k = strcspn(c, ",");
                found = k == 6 && memcmp(c, "memory", 6) == 0;
            }
        if (!found) continue;
        hak_unescape(f[3]);
        hak_unescape(f[4]);
        if (strlen(f[3]) >= HAK_PATH_MAX || strlen(f[4]) >= HAK_PATH_MAX) { found = false; continue; }
        memcpy(root, f[3], strlen(f[3]) + 1);
        memcpy(mnt, f[4], strlen(f[4]) + 1);
    }
    hak_file_close(r.fd);
    return found;
}

/* A limit file: "max" (v2: none), or a number (v1: 2^62 or more is none).
 * *bytes is UINT64_MAX for none.  False if it cannot be read. */
static bool hak_limit_file(const char *path, uint64_t *bytes) {
    int fd = hak_file_open(path);
    if (fd < 0) return false;
    char b[64];
    long n;
    do n = syscall(SYS_read, fd, b, sizeof b - 1);
    while (n < 0 && errno == EINTR);
    hak_file_close(fd);
    if (n <= 0) return false;
    b[n] = 0;
    if (strncmp(b, "max", 3) == 0) { *bytes = UINT64_MAX; return true; }
    if (b[0] < '0' || b[0] > '9') return false;
    uint64_t v = 0;
    for (char *c = b; *c >= '0' && *c <= '9'; c++) {
        if (v > (UINT64_MAX - 9) / 10) { v = UINT64_MAX; break; }
        v = v * 10 + (uint64_t)(*c - '0');
    }
    *bytes = v >= ((uint64_t)1 << 62) ? UINT64_MAX : v;
    return true;
}

/* The smallest limit along the cgroup's path (UINT64_MAX: none), and the
 * file that set it (or the cgroup's own); false if no limit file could be
 * read in that hierarchy. */
static bool hak_cgroup_walk(bool v2, uint64_t *limit, char *from) {
    char cg[HAK_PATH_MAX], mnt[HAK_PATH_MAX], root[HAK_PATH_MAX], dir[2 * HAK_PATH_MAX], file[2 * HAK_PATH_MAX + 32];
    if (!hak_cgroup_path(v2, cg) || !hak_cgroup_mount(v2, mnt, root)) return false;
    size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
    if (rl && (strncmp(cg, root, rl) != 0 || (cg[rl] != 0 && cg[rl] != '/'))) return false;   /* not in this mount */
    size_t ml = strlen(mnt);
    memcpy(dir, mnt, ml);
    memcpy(dir + ml, cg + rl, strlen(cg + rl) + 1);
    const char *name = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    bool any = false;
    *limit = UINT64_MAX;
    for (;;) {
        size_t dl = strlen(dir);
        while (dl > 1 && dir[dl - 1] == '/') dir[--dl] = 0;
        memcpy(file, dir, dl);
        memcpy(file + dl, name, strlen(name) + 1);
        uint64_t v;
        if (hak_limit_file(file, &v)) {
            if (!any || v < *limit) memcpy(from, file, strlen(file) + 1);
            if (v < *limit) *limit = v;
            any = true;
        }
        if (dl <= ml) break;                    /* the mount point: the hierarchy's root */
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < ml) break;
        *slash = 0;
    }
    return any;
}

static char hak_limit_from[2 * HAK_PATH_MAX + 32];   /* where the limit came from (verbose) */

/* Read the cgroup's limit: 0 no limit, else bytes; -1 (errno set) if no
 * limit file could be read. */
static int64_t hak_cgroup_limit(char *from) {
    uint64_t v;
    int saved = errno;
    if (hak_cgroup_walk(true, &v, from) || hak_cgroup_walk(false, &v, from)) {
        errno = saved;
        return v == UINT64_MAX ? 0 : (int64_t)(v < ((uint64_t)1 << 62) ? v : ((uint64_t)1 << 62));
    }
    errno = ENOENT;
    return -1;
}

static void hak_limit_apply(uint64_t bytes) {
    atomic_store_explicit(&hak_limit_bytes, bytes, memory_order_relaxed);
    atomic_store_explicit(&hak_limit_after, 0, memory_order_relaxed);
    if (bytes == 0) atomic_store_explicit(&hak_limit_pressing, 0, memory_order_relaxed);
    else hak_limit_check();
}

void hak_limit_start(void) {
    long opt = hak_opt.memory_limit;
    if (opt == 0) return;
    uint64_t bytes = (uint64_t)opt;
    const char *src = "HAKMEM_MEMORY_LIMIT";
    if (opt < 0) {
        int64_t v = hak_cgroup_limit(hak_limit_from);
        if (v < 0) {
            hak_message("hakmem: warning: HAKMEM_MEMORY_LIMIT=cgroup: no cgroup memory limit file could be read "
                        "(cgroup v2 memory.max, v1 memory.limit_in_bytes); the limit is off\n");
            return;
        }
        if (v == 0) {
            hak_message("hakmem: warning: HAKMEM_MEMORY_LIMIT=cgroup: the process's cgroup sets no memory limit "
                        "(%s); the limit is off\n", hak_limit_from);
            return;
        }
        bytes = (uint64_t)v;
        src = hak_limit_from;
    }
    if (hak_opt.verbose)
        hak_message("hakmem: memory limit %lu bytes (%s): above %lu bytes resident, everything free goes back, "
                    "and each page a free empties, until below %lu\n",
                    (unsigned long)bytes, src, (unsigned long)hak_limit_high(bytes),
                    (unsigned long)hak_limit_low(bytes));
    hak_limit_apply(bytes);
}

HAK_EXPORT int hakmem_memory_limit_set(size_t bytes) {
    hak_limit_apply(bytes);
    return 0;
}

HAK_EXPORT int hakmem_memory_limit_refresh(void) {
    char from[sizeof hak_limit_from];
    int64_t v = hak_cgroup_limit(from);
    if (v < 0) return -1;
    hak_limit_apply((uint64_t)v);
    return 0;
}

HAK_EXPORT int hakmem_memory_limit_get(hakmem_memory_limit_t *out, size_t size) {
    if (!out) return -1;
    hakmem_memory_limit_t s;
    memset(&s, 0, sizeof s);
    s.limit = atomic_load_explicit(&hak_limit_bytes, memory_order_relaxed);
    s.high = hak_limit_high(s.limit);
    s.low = hak_limit_low(s.limit);
    s.resident = hak_limit_resident();
    s.pressing = hak_limit_pressed();
    s.pressures = atomic_load_explicit(&hak_limit_pressures, memory_order_relaxed);
    s.returns = atomic_load_explicit(&hak_limit_returns, memory_order_relaxed);
    memcpy(out, &s, size < sizeof s ? size : sizeof s);
    return 0;
}

/* The statistics' line, when a limit is set or was. */
void hak_limit_stats_lines(void (*line)(void *arg, const char *text), void *arg) {
    hakmem_memory_limit_t s;
    hakmem_memory_limit_get(&s, sizeof s);
    if (s.limit == 0 && s.pressures == 0) return;
    char buf[256];
    hak_format(buf, sizeof buf, "hakmem:   memory limit %lu KiB: resident (estimate) %lu KiB; pressure %lu times (%s now), "
               "everything returned %lu times\n",
               (unsigned long)(s.limit >> 10), (unsigned long)(s.resident >> 10), (unsigned long)s.pressures,
               s.pressing ? "on" : "off", (unsigned long)s.returns);
    line(arg, buf);
}
