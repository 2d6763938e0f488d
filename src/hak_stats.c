/* hak_stats.c -- the statistics report, an entry point: hakmem_stats_get()
 * copies the process-wide counters (kept off the fast path: OS calls,
 * segments, page refills, remote frees), sums the heaps' own and takes the
 * memory account (hak_account.c: where every mapped byte is, and how much
 * of it is resident); hakmem_stats_print(), hakmem_stats_print_cb() and
 * HAKMEM_STATS=1 (at exit) print them, malloc_stats() after glibc's summary
 * (hak_glibc.c).  The counters are defined here and counted by every layer
 * (data, no calls).
 *
 * The report never allocates: each line is formatted into a buffer on the
 * stack (hak_format) and written by raw system calls, or handed to the
 * program's callback.  It goes to HAKMEM_STATS_FILE, else to stderr; with
 * stderr closed (coreutils close it before the exit handlers run) to a file
 * of its own, which a line on the terminal names -- never silently nowhere. */
#include "hak_purge.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

hak_counters_t hak_counters;

#define HAK_LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static void hak_stats_fill(hakmem_stats_t *out);

/* Guards the static snapshot below.  A leaf lock (nothing else is taken
 * under it), held across fork by the atfork handlers (hak_heap.c): a child
 * forked while another thread is inside hakmem_stats_get or malloc_stats
 * finds it free. */
static pthread_mutex_t hak_stats_lock = PTHREAD_MUTEX_INITIALIZER;

static void hak_stats_prepare(void) { pthread_mutex_lock(&hak_stats_lock); }
static void hak_stats_parent(void) { pthread_mutex_unlock(&hak_stats_lock); }
static void hak_stats_child(void) { pthread_mutex_init(&hak_stats_lock, NULL); }

/* The lock is held across fork from its first use on (hak_fork_hook_add). */
static pthread_once_t hak_stats_once = PTHREAD_ONCE_INIT;
static void hak_stats_init(void) { hak_fork_hook_add(hak_stats_prepare, hak_stats_parent, hak_stats_child); }

HAK_EXPORT int hakmem_stats_get(hakmem_stats_t *out, size_t size) {
    if (!out) return -1;
    static hakmem_stats_t snapshot;       /* big; callers are rare */
    pthread_once(&hak_stats_once, hak_stats_init);
    pthread_mutex_lock(&hak_stats_lock);
    hak_stats_fill(&snapshot);
    memcpy(out, &snapshot, size < sizeof snapshot ? size : sizeof snapshot);
    pthread_mutex_unlock(&hak_stats_lock);
    return 0;
}

/* The process's RSS from /proc/self/statm (raw system calls: no
 * cancellation point, nothing allocated); 0 with *err set when it cannot be
 * read (no /proc, a sandbox).  Under a seccomp filter it is not tried
 * (*err -1): a filter may kill the process on open, and hakmem's statistics
 * must not. */
static uint64_t hak_process_rss(int32_t *err) {
    int saved = errno;
    *err = 0;
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) > 0) { *err = -1; errno = saved; return 0; }
    long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) { *err = errno; errno = saved; return 0; }
    char buf[128];
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    if (n < 0) *err = errno;
    syscall(SYS_close, fd);
    errno = saved;
    if (n <= 0) { if (!*err) *err = EIO; return 0; }
    buf[n] = 0;
    const char *s = buf;
    while (*s && *s != ' ') s++;             /* size, then resident (pages) */
    uint64_t pages = 0;
    bool digits = false;
    for (s++; *s >= '0' && *s <= '9'; s++) { pages = pages * 10 + (uint64_t)(*s - '0'); digits = true; }
    if (!digits) { *err = EINVAL; return 0; }
    return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void hak_memory_set(hakmem_memory_t *m, const uint64_t *part) {
    m->live = part[HAK_PART_LIVE];
    m->free = part[HAK_PART_FREE];
    m->empty = part[HAK_PART_EMPTY];
    m->segment_cache = part[HAK_PART_SEGCACHE];
    m->huge_cache = part[HAK_PART_HUGECACHE];
    m->metadata = part[HAK_PART_META];
    m->returned = part[HAK_PART_RETURNED];
}

/* The memory account: hakmem's segments, huge blocks and caches, the heaps'
 * arena and other metadata, the reserved regions (malloc(0)'s, guarded
 * sampling's). */
static void hak_stats_account(hakmem_stats_t *out) {
    hak_account_t a;
    memset(&a, 0, sizeof a);
    a.want_resident = a.resident_ok = true;
    hak_account_segments(&a);
    uint64_t arena = hak_meta_account(&a), meta = HAK_LOAD(hak_counters.meta_bytes);
    if (meta > arena) {                      /* hak_os_map's others (the hardened quarantines): */
        a.mapped[HAK_PART_META] += meta - arena;     /* taken to be resident */
        a.resident[HAK_PART_META] += meta - arena;
    }
    uintptr_t base;
    size_t size;
    if (hak_zero_region(&base, &size)) hak_account_range(&a, (void *)base, size, HAK_PART_RETURNED, 0);
    uint64_t glive, gblocks;
    if (hak_guard_region(&base, &size, &glive, &gblocks)) {
        hak_account_range(&a, (void *)base, size, HAK_PART_RETURNED, glive);
        a.live_blocks += gblocks;
    }
    if (!a.resident_ok) memset(a.resident, 0, sizeof a.resident);
    hak_memory_set(&out->mapped, a.mapped);
    hak_memory_set(&out->resident, a.resident);
    out->resident_bytes = 0;
    for (unsigned i = 0; i < HAK_PARTS; i++) out->resident_bytes += a.resident[i];
    out->resident_known = a.resident_ok;
    out->live_bytes = a.mapped[HAK_PART_LIVE];
    out->live_blocks = a.live_blocks;
    out->segments_cached = a.segments_cached;
    out->huge_cached = a.huge_cached;
    out->process_rss_bytes = hak_process_rss(&out->process_rss_errno);
}

static void hak_stats_fill(hakmem_stats_t *out) {
    memset(out, 0, sizeof *out);
    const hak_counters_t *c = &hak_counters;
    out->mmap_calls = HAK_LOAD(c->mmap_calls);
    out->munmap_calls = HAK_LOAD(c->munmap_calls);
    out->madvise_calls = HAK_LOAD(c->madvise_calls);
    out->mremap_calls = HAK_LOAD(c->mremap_calls);
    out->mprotect_calls = HAK_LOAD(c->mprotect_calls);
    out->segments_in_use = HAK_LOAD(c->segments_in_use);
    out->segments_peak = HAK_LOAD(c->segments_peak);
    out->huge_in_use = HAK_LOAD(c->huge_in_use);
    out->huge_peak = HAK_LOAD(c->huge_peak);
    out->heaps_created = HAK_LOAD(c->heaps_created);
    out->heaps_adopted = HAK_LOAD(c->heaps_adopted);
    static hak_heap_sums_t sums;   /* too big for some stacks; callers are rare */
    hak_heap_stats_sum(&sums);
    out->slow_allocs = sums.slow;
    out->remote_free_retries = sums.cas_retries;
    out->full_counters = HAK_STATS_FULL_ENABLED;
    out->huge_allocations = sums.allocs[HAK_CLASS_COUNT];
    out->huge_frees = sums.frees[HAK_CLASS_COUNT];
    out->rss_peak_bytes = hak_os_rss_peak_bytes();
    for (unsigned i = 0; i < HAK_CLASS_COUNT && i < HAKMEM_STATS_CLASSES; i++) {
        hakmem_class_stats_t *k = &out->classes[i];
        k->block_size = hak_class_size(i);
        k->pages_in_use = HAK_LOAD(c->class_pages[i]);
        k->pages_peak = HAK_LOAD(c->class_pages_peak[i]);
        k->refills = sums.refills[i];
        k->remote_frees = sums.remote[i];
        k->allocations = sums.allocs[i];
        k->frees = sums.frees[i];
        out->remote_frees += sums.remote[i];
    }
    hak_stats_account(out);
    /* read after the walk: the account's mappings are all counted in it */
    out->bytes_mapped = HAK_LOAD(c->bytes_mapped);
    out->bytes_mapped_peak = HAK_LOAD(c->bytes_mapped_peak);
    out->active_bytes = HAK_LOAD(c->active_bytes);
    out->active_peak_bytes = HAK_LOAD(c->active_peak);
    out->huge_bytes_peak = HAK_LOAD(c->huge_bytes_peak);
}

/* ---- where the report goes ---- */

typedef struct hak_sink_s {
    void (*cb)(void *arg, const char *text);   /* the program's (hakmem_stats_print_cb), or NULL */
    void *arg;
    int fd;                 /* else lines go here: 2, a file, the terminal; -1 nowhere */
    bool own_fd;            /* opened for the report: closed after it */
    bool from_stderr;       /* fd is 2: should it turn out closed, the fallback file */
    char path[512];         /* the fallback file's name */
} hak_sink_t;

static long hak_open(const char *path, int flags, int mode) {
    int saved = errno;
    long fd = syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, mode);
    if (fd < 0) { long e = -errno; errno = saved; return e; }
    errno = saved;
    return fd;
}

/* A line on the terminal, if the process has one. */
static void hak_tty_line(const char *text) {
    long fd = hak_open("/dev/tty", O_WRONLY | O_NOCTTY, 0);
    if (fd < 0) return;
    hak_os_write_fd((int)fd, text, strlen(text));
    syscall(SYS_close, fd);
}

/* stderr is closed: the report goes to $TMPDIR/hakmem-stats.PID.txt (/tmp
 * without an absolute TMPDIR; a new file, never one that exists or a
 * symbolic link: PID.1, PID.2 ... if taken), and a line on the terminal
 * names it; if no file can be made, the report itself goes to the
 * terminal. */
static void hak_sink_fallback(hak_sink_t *k) {
    k->from_stderr = false;
    const char *dir = getenv("TMPDIR");
    if (!dir || dir[0] != '/' || strlen(dir) > 400) dir = "/tmp";
    int pid = (int)getpid();
    long fd = -1;
    for (int i = 0; i < 10 && fd < 0; i++) {
        if (i == 0) hak_format(k->path, sizeof k->path, "%s/hakmem-stats.%d.txt", dir, pid);
        else hak_format(k->path, sizeof k->path, "%s/hakmem-stats.%d.%d.txt", dir, pid, i);
        fd = hak_open(k->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (fd != -EEXIST) break;
    }
    char note[640];
    if (fd >= 0) {
        k->fd = (int)fd;
        k->own_fd = true;
        hak_format(note, sizeof note, "hakmem: stderr is closed: statistics written to %s\n", k->path);
        hak_tty_line(note);
        return;
    }
    k->fd = (int)hak_open("/dev/tty", O_WRONLY | O_NOCTTY, 0);
    k->own_fd = k->fd >= 0;
    if (k->fd >= 0) {
        hak_format(note, sizeof note, "hakmem: stderr is closed and %s cannot be made (errno %d): "
                   "statistics follow here\n", k->path, (int)-fd);
        hak_os_write_fd(k->fd, note, strlen(note));
    }
}

static void hak_sink_put(hak_sink_t *k, const char *text) {
    if (k->cb) { k->cb(k->arg, text); return; }
    if (k->fd < 0) return;
    size_t n = strlen(text);
    if (hak_os_write_fd(k->fd, text, n) == EBADF && k->from_stderr) {   /* closed meanwhile */
        hak_sink_fallback(k);
        if (k->fd >= 0) hak_os_write_fd(k->fd, text, n);
    }
}

/* The report to stderr, or to a file of its own when stderr is closed. */
static void hak_sink_stderr(hak_sink_t *k) {
    memset(k, 0, sizeof *k);
    k->fd = 2;
    k->from_stderr = true;
    int saved = errno;
    if (syscall(SYS_fcntl, 2, F_GETFD) < 0 && errno == EBADF) hak_sink_fallback(k);
    errno = saved;
}

/* HAKMEM_STATS_FILE (%p: the pid), appended to, else stderr. */
static void hak_sink_default(hak_sink_t *k) {
    const char *path = hak_opt.stats_file;
    if (!path || !*path) { hak_sink_stderr(k); return; }
    char name[sizeof k->path];
    size_t n = 0;
    for (const char *s = path; *s && n + 24 < sizeof name; s++) {
        if (s[0] == '%' && s[1] == 'p') { n += hak_format(name + n, sizeof name - n, "%d", (int)getpid()); s++; }
        else name[n++] = *s;
    }
    name[n] = 0;
    long fd = hak_open(name, O_WRONLY | O_CREAT | O_APPEND, 0644);   /* each report after the last */
    if (fd >= 0) {
        memset(k, 0, sizeof *k);
        k->fd = (int)fd;
        k->own_fd = true;
        return;
    }
    hak_sink_stderr(k);
    char note[640];
    hak_format(note, sizeof note, "hakmem: warning: HAKMEM_STATS_FILE: cannot write '%s' (errno %d); "
               "the statistics follow here\n", name, (int)-fd);
    hak_sink_put(k, note);
}

static void hak_sink_close(hak_sink_t *k) {
    if (k->own_fd && k->fd >= 0) syscall(SYS_close, k->fd);
    k->fd = -1;
}

/* ---- the report ---- */

static void hak_line(hak_sink_t *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* hak_format's formats (hak_error.c), one line at a time */
static void hak_line(hak_sink_t *k, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    hak_vformat_to(buf, sizeof buf, fmt, ap);
    va_end(ap);
    hak_sink_put(k, buf);
}

static void hak_line_cb(void *arg, const char *text) { hak_sink_put(arg, text); }

/* bytes as "812 B", "12.3 KiB", "1.5 MiB", "2.0 GiB" */
static const char *hak_size_text(char *buf, size_t cap, uint64_t bytes) {
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
    if (bytes < 1024) { hak_format(buf, cap, "%lu B", (unsigned long)bytes); return buf; }
    unsigned u = 0;
    uint64_t scale = 1024;
    while (u < 3 && bytes >= scale * 1024) { scale *= 1024; u++; }
    uint64_t tenths = (bytes * 10 + scale / 2) / scale;
    hak_format(buf, cap, "%lu.%lu %s", (unsigned long)(tenths / 10), (unsigned long)(tenths % 10), units[u]);
    return buf;
}

static uint64_t hak_memory_sum(const hakmem_memory_t *m) {
    return m->live + m->free + m->empty + m->segment_cache + m->huge_cache + m->metadata + m->returned;
}

/* one row of the account: label (padded), KiB mapped, KiB resident */
static void hak_row(hak_sink_t *k, const char *label, uint64_t mapped, uint64_t resident, bool known) {
    char pad[48];
    size_t n = hak_format(pad, sizeof pad, "%s", label);
    while (n < 36) pad[n++] = ' ';
    pad[n] = 0;
    if (known) hak_line(k, "hakmem:     %s %12lu %12lu\n", pad, (unsigned long)(mapped >> 10), (unsigned long)(resident >> 10));
    else hak_line(k, "hakmem:     %s %12lu            ?\n", pad, (unsigned long)(mapped >> 10));
}

static void hak_report(hak_sink_t *k) {
    hakmem_stats_t s;                       /* (7 KiB: as before) */
    hakmem_stats_get(&s, sizeof s);
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    /* the summary line */
    char rss[160];
    if (s.process_rss_bytes)
        hak_format(rss, sizeof rss, "process RSS %s (peak %s)", hak_size_text(b5, sizeof b5, s.process_rss_bytes),
                   hak_size_text(b6, sizeof b6, s.rss_peak_bytes));
    else if (s.process_rss_errno < 0)
        hak_format(rss, sizeof rss, "process RSS not read (a seccomp filter is on; peak %s)",
                   hak_size_text(b6, sizeof b6, s.rss_peak_bytes));
    else
        hak_format(rss, sizeof rss, "process RSS unknown (/proc/self/statm: errno %d; peak %s)",
                   (int)s.process_rss_errno, hak_size_text(b6, sizeof b6, s.rss_peak_bytes));
    char res[64];
    if (s.resident_known) hak_format(res, sizeof res, "resident %s", hak_size_text(b3, sizeof b3, s.resident_bytes));
    else hak_format(res, sizeof res, "resident unknown (mincore failed)");
    hak_line(k, "hakmem %s statistics (%s build): live %s in %lu blocks, pages in use %s (peak %s); "
             "hakmem %s of %s mapped; %s\n", HAKMEM_VERSION_STRING, hakmem_build_variant(),
             hak_size_text(b1, sizeof b1, s.live_bytes), (unsigned long)s.live_blocks,
             hak_size_text(b2, sizeof b2, s.active_bytes), hak_size_text(b4, sizeof b4, s.active_peak_bytes),
             res, hak_size_text(b5, sizeof b5, s.bytes_mapped), rss);
    /* where the memory is */
    bool known = s.resident_known;
    hak_line(k, "hakmem:   where hakmem's memory is              KiB mapped KiB resident\n");
    hak_row(k, "live blocks", s.mapped.live, s.resident.live, known);
    hak_row(k, "free blocks in pages in use", s.mapped.free, s.resident.free, known);
    hak_row(k, "empty pages kept", s.mapped.empty, s.resident.empty, known);
    char label[64];
    hak_format(label, sizeof label, "segment cache (%lu segments)", (unsigned long)s.segments_cached);
    hak_row(k, label, s.mapped.segment_cache, s.resident.segment_cache, known);
    hak_format(label, sizeof label, "huge cache (%lu blocks)", (unsigned long)s.huge_cached);
    hak_row(k, label, s.mapped.huge_cache, s.resident.huge_cache, known);
    hak_row(k, "metadata", s.mapped.metadata, s.resident.metadata, known);
    hak_row(k, "returned to the system, or unused", s.mapped.returned, s.resident.returned, known);
    uint64_t total = hak_memory_sum(&s.mapped);
    hak_row(k, "total", total, s.resident_bytes, known);
    uint64_t diff = total > s.bytes_mapped ? total - s.bytes_mapped : s.bytes_mapped - total;
    if (diff > 16 * hak_os_page_size())     /* threads at work meanwhile, or a mapping the walk missed */
        hak_line(k, "hakmem:     (the parts differ from the %lu KiB mapped by %lu KiB: other threads were at work)\n",
                 (unsigned long)(s.bytes_mapped >> 10), (unsigned long)(diff >> 10));
    /* the counters */
    hak_line(k, "hakmem:   segments in use %lu (peak %lu), huge blocks %lu (peak %lu)\n",
             (unsigned long)s.segments_in_use, (unsigned long)s.segments_peak,
             (unsigned long)s.huge_in_use, (unsigned long)s.huge_peak);
    if (s.full_counters)
        hak_line(k, "hakmem:   huge blocks: %lu allocations, %lu frees\n",
                 (unsigned long)s.huge_allocations, (unsigned long)s.huge_frees);
    hak_line(k, "hakmem:   heaps created %lu, adopted %lu (%lu by a thread freeing into them), reclaimed from ended "
             "threads %lu; slow allocations %lu; remote frees %lu (CAS retries %lu)\n",
             (unsigned long)s.heaps_created, (unsigned long)s.heaps_adopted,
             (unsigned long)HAK_LOAD(hak_counters.heaps_followed),
             (unsigned long)HAK_LOAD(hak_counters.heaps_reclaimed),
             (unsigned long)s.slow_allocs, (unsigned long)s.remote_frees,
             (unsigned long)s.remote_free_retries);
    hak_line(k, "hakmem:   OS calls: mmap %lu, munmap %lu, madvise %lu, mremap %lu, mprotect %lu\n",
             (unsigned long)s.mmap_calls, (unsigned long)s.munmap_calls,
             (unsigned long)s.madvise_calls, (unsigned long)s.mremap_calls,
             (unsigned long)s.mprotect_calls);
    hak_line(k, "hakmem:   mapped %lu KiB (peak %lu KiB), peak RSS %lu KiB\n",
             (unsigned long)(s.bytes_mapped >> 10), (unsigned long)(s.bytes_mapped_peak >> 10),
             (unsigned long)(s.rss_peak_bytes >> 10));
    hak_purge_stats_lines(hak_line_cb, k);
    hak_limit_stats_lines(hak_line_cb, k);
    /* the size classes: the stats build, or asked for */
    if (!s.full_counters && !hak_opt.stats_by_class) {
        hak_line(k, "hakmem:   (per size class: HAKMEM_STATS_BY_CLASS=1; allocations and frees per class are "
                 "counted by the stats build: make stats)\n");
        return;
    }
    if (s.full_counters) {
        hak_line(k, "hakmem:   class  block_size  pages  pages_peak  refills  remote_frees  allocations        frees\n");
    } else {
        hak_line(k, "hakmem:   (allocations and frees per class are counted by the stats build: make stats)\n");
        hak_line(k, "hakmem:   class  block_size  pages  pages_peak  refills  remote_frees\n");
    }
    for (unsigned i = 0; i < HAK_CLASS_COUNT; i++) {
        const hakmem_class_stats_t *c = &s.classes[i];
        if (c->pages_peak == 0 && c->refills == 0 && c->remote_frees == 0 && c->allocations == 0) continue;
        if (s.full_counters)
            hak_line(k, "hakmem:   %5u  %10lu  %5lu  %10lu  %7lu  %12lu  %11lu  %11lu\n", i, (unsigned long)c->block_size,
                     (unsigned long)c->pages_in_use, (unsigned long)c->pages_peak, (unsigned long)c->refills,
                     (unsigned long)c->remote_frees, (unsigned long)c->allocations, (unsigned long)c->frees);
        else
            hak_line(k, "hakmem:   %5u  %10lu  %5lu  %10lu  %7lu  %12lu\n", i, (unsigned long)c->block_size,
                     (unsigned long)c->pages_in_use, (unsigned long)c->pages_peak, (unsigned long)c->refills,
                     (unsigned long)c->remote_frees);
    }
}

/* Every report writes (cancellation points, with glibc's write) and takes
 * locks (hak_stats_lock, the cache's, the mapping lock): cancellation is
 * disabled throughout, so that no thread is cancelled holding one; a cancel
 * requested meanwhile acts at the caller's next cancellation point. */
static void hak_report_to(hak_sink_t *k, const char *head) {
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    if (head) hak_sink_put(k, head);
    hak_report(k);
    hak_sink_close(k);
    pthread_setcancelstate(cancel, NULL);
}

HAK_EXPORT void hakmem_stats_print(void) {
    hak_sink_t k;
    hak_sink_default(&k);
    hak_report_to(&k, NULL);
}

HAK_EXPORT void hakmem_stats_print_cb(void (*write)(void *arg, const char *text), void *arg) {
    if (!write) return;
    hak_sink_t k;
    memset(&k, 0, sizeof k);
    k.cb = write;
    k.arg = arg;
    k.fd = -1;
    hak_report_to(&k, NULL);
}

/* malloc_stats (hak_glibc.c): glibc's summary lines (head), then the
 * report, to stderr as glibc's (to a file of its own if stderr is closed). */
void hak_stats_print_glibc(const char *head) {
    hak_sink_t k;
    hak_sink_stderr(&k);
    hak_report_to(&k, head);
}

static void hak_stats_at_exit(void) { hakmem_stats_print(); }

/* After hak_heap.c's constructor (101): options are read.  HAKMEM_STATS_FILE
 * alone asks for the report too. */
__attribute__((constructor(102))) static void hak_stats_constructor(void) {
    if (hak_opt.stats || (hak_opt.stats_file && *hak_opt.stats_file)) atexit(hak_stats_at_exit);
}
