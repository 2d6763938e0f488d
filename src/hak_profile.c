/* hak_profile.c -- sampled heap profiles (HAKMEM_SAMPLE_BYTES), the pprof
 * dump (hakmem_profile_dump, HAKMEM_PROFILE_AT_EXIT) and the leak report
 * (HAKMEM_LEAK_REPORT).  docs/profiling.md describes the design.
 *
 *  - malloc, calloc, realloc, the aligned allocations (hak_alloc.c) and
 *    operator new (hak_cxx.c) subtract each request from a per-thread
 *    countdown, hak_tls.sample_left; when it goes negative they call
 *    hak_profile_malloc.  It starts at 0, so each thread's first allocation
 *    comes here once: with sampling off the countdown is set to INT64_MAX.
 *    Guarded sampling (HAKMEM_GUARD_SAMPLE, hak_guard.c) shares it: it runs
 *    to the nearer of the next sample and the next guarded block
 *    (hak_sample_due), and hak_profile_malloc makes either or both.
 *  - The intervals are drawn from an exponential distribution of mean
 *    HAKMEM_SAMPLE_BYTES, so every byte is sampled with the same probability
 *    and the profile is an unbiased estimate (pprof's heap_v2 unsampling).
 *  - A sampled block gets a page of its own, flagged HAK_PAGE_SAMPLED
 *    (hak_page_sampled_alloc, hak_page.c); above the large-block limit, a
 *    huge block.  Either's free reaches free's complete check, from any
 *    thread, which calls hak_profile_free (through hak_sampled_freed or
 *    hak_huge_hooks.freed).  No other free pays anything.
 *  - The stack comes from the cached unwind rules of hak_unwind.c, or from
 *    libgcc's _Unwind_Backtrace (.eh_frame, no frame pointers needed),
 *    both warmed up in the constructor; neither takes a lock of the dynamic
 *    loader's (hak_unwind.c says how); a per-thread guard serves any
 *    allocation the unwinder makes unsampled, so it never recurses.
 *  - The table is static (HAK_PROF_MAX samples); when it is full a sample is
 *    dropped and counted.  One mutex, held across fork (pthread_atfork). */
#include "hak_internal.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <execinfo.h>

#define HAK_PROF_MAX    16384      /* samples live at once */
#define HAK_PROF_DEPTH  32         /* frames per sample */
#define HAK_PROF_HASH   16384      /* buckets (power of two) */

typedef struct hak_sample_s {
    void *ptr;                     /* NULL: free entry */
    size_t size;                   /* requested bytes */
    uint32_t next;                 /* bucket chain or free list, index + 1 */
    uint32_t depth;
    void *frames[HAK_PROF_DEPTH];
} hak_sample_t;

static hak_sample_t hak_samples[HAK_PROF_MAX];
static uint32_t hak_prof_bucket[HAK_PROF_HASH];   /* index + 1 of the first entry */
static uint32_t hak_prof_free_list;               /* index + 1 */
static uint32_t hak_prof_fresh;                   /* entries never used yet */
static size_t hak_prof_live, hak_prof_dropped;
static pthread_mutex_t hak_prof_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int hak_prof_state;                /* 0 unknown, 1 off, 2 on */
static _Atomic uint64_t hak_prof_seed;

static __thread bool hak_tls_in_prof __attribute__((tls_model("initial-exec")));
static __thread uint64_t hak_tls_rng __attribute__((tls_model("initial-exec")));
/* The two countdowns behind hak_tls.sample_left (hak_sample_due): bytes
 * until the next heap-profile sample and the next guarded block, and the
 * value sample_left was last set to (their minimum). */
static __thread int64_t hak_tls_prof_left __attribute__((tls_model("initial-exec")));
static __thread int64_t hak_tls_guard_left __attribute__((tls_model("initial-exec")));
static __thread int64_t hak_tls_armed __attribute__((tls_model("initial-exec")));
static bool hak_prof_on, hak_guard_on;            /* HAKMEM_SAMPLE_BYTES, HAKMEM_GUARD_SAMPLE > 0 */
static _Atomic bool hak_prof_ready;               /* the constructor ran: sampling may start */
static bool hak_prof_stacks;                      /* the unwinder is loaded: samples get their stacks */

/* ---- the interval: -ln(U) * N, without libm ---- */

static uint64_t hak_rng_next(void) {
    uint64_t x = hak_tls_rng;
    if (x == 0) x = atomic_fetch_add(&hak_prof_seed, 0x9e3779b97f4a7c15ull) ^ (uintptr_t)&hak_tls_rng ^ 0x2545f4914f6cdd1dull;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;      /* xorshift64 */
    return hak_tls_rng = x ? x : 1;
}

/* ln(x) for x in (0, 1]: x = m * 2^e with m in [1, 2), ln m = 2 atanh((m-1)/(m+1)). */
static double hak_ln(double x) {
    int e = 0;
    while (x < 1.0) { x *= 2.0; e--; }
    double t = (x - 1.0) / (x + 1.0), t2 = t * t, sum = 0.0, pow = t;
    for (int k = 1; k < 30; k += 2) { sum += pow / k; pow *= t2; }
    return 2.0 * sum + e * 0.6931471805599453;
}

/* exp(-q) for q >= 0: (1 - q/2^20)^(2^20) is close enough for a report */
static double hak_exp_neg(double q) {
    if (q > 40) return 0.0;
    double e = 1.0 - q / 1048576.0;
    for (int k = 0; k < 20; k++) e *= e;
    return e;
}

/* An exponential interval of mean bytes; 0 for a mean of 1 (every
 * allocation). */
static int64_t hak_next_interval(long mean) {
    if (mean <= 1) return 0;
    double u = (double)((hak_rng_next() >> 11) + 1) * (1.0 / 9007199254740992.0);   /* (0, 1] */
    double v = -hak_ln(u) * (double)mean;
    return v >= 9.0e18 ? INT64_MAX : (int64_t)v;
}

/* ---- stack capture ---- */

typedef struct { void **frames; unsigned n, max; uintptr_t lo, hi; } hak_unwind_t;
static uintptr_t hak_self_lo, hak_self_hi;    /* the hooks' section: frames skipped */

#define HAK_PROF_TEXT __attribute__((section("hak_prof_text"), noinline))
HAK_PROF_TEXT static _Unwind_Reason_Code hak_unwind_step(struct _Unwind_Context *ctx, void *arg) {
    hak_unwind_t *u = arg;
    uintptr_t ip = hak_gcc_get_ip(ctx);
    if (ip == 0) return _URC_END_OF_STACK;
    if (u->n == 0 && ip >= u->lo && ip < u->hi) return _URC_NO_REASON;   /* ours */
    u->frames[u->n++] = (void *)ip;
    return u->n < u->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

/* hak_unwind.c: may the debug build check this complete walk against
 * libgcc's? (Not if libgcc's walk could take the loader's lock, nor for
 * an allocation of libgcc's own.) */
bool hak_unwind_gcc_may_check(void *const *frames, int n);

/* The calling stack, its leading frames in [lo, hi) left out (lo == hi:
 * the hooks' section); 0 frames before the constructor loaded the unwinder.
 * Takes no lock of the dynamic loader's (hak_unwind.c): libgcc's walk runs
 * only where hak_unwind allows it (-1, or the debug build's check). */
HAK_PROF_TEXT unsigned hak_stack_capture(void **frames, unsigned max, uintptr_t lo, uintptr_t hi) {
    if (max > HAK_PROF_DEPTH) max = HAK_PROF_DEPTH;
    if (!atomic_load_explicit(&hak_prof_ready, memory_order_acquire) || !hak_prof_stacks) return 0;
    if (lo == hi) { lo = hak_self_lo; hi = hak_self_hi; }
    int n = hak_unwind(frames, max, lo, hi);   /* the cached rules (hak_unwind.c) */
    if (hak_likely(n >= 0) && (!HAK_DEBUG_ENABLED || !hak_unwind_gcc_may_check(frames, n))) return (unsigned)n;
    void *slow[HAK_PROF_DEPTH];
    hak_unwind_t u = { n >= 0 ? slow : frames, 0, max, lo, hi };
    hak_gcc_backtrace(hak_unwind_step, &u);
    if (n < 0) return u.n;
    /* the debug build checks every cached walk against libgcc's */
    if ((unsigned)n != u.n) hak_fatal("heap profile", "cached stack walk differs from libgcc's (depth) at", frames[0]);
    for (unsigned i = 0; i < u.n; i++)
        if (frames[i] != slow[i]) hak_fatal("heap profile", "cached stack walk differs from libgcc's at", slow[i]);
    return (unsigned)n;
}

/* The frames to skip: the hooks' functions (hakmem_malloc, hakmem_calloc,
 * hak_profile_malloc and the capture) live in the section hak_prof_text,
 * whose bounds the linker defines, in the shared and the static library. */
extern char __start_hak_prof_text[] __attribute__((weak)), __stop_hak_prof_text[] __attribute__((weak));

/* ---- the table ---- */

static uint32_t hak_prof_hash(const void *p) {
    return (uint32_t)(((uintptr_t)p * 0x9e3779b97f4a7c15ull) >> 40) & (HAK_PROF_HASH - 1);
}

static void hak_prof_insert(void *p, size_t size, void **frames, unsigned depth) {
    pthread_mutex_lock(&hak_prof_lock);
    uint32_t i;
    if (hak_prof_free_list) { i = hak_prof_free_list - 1; hak_prof_free_list = hak_samples[i].next; }
    else if (hak_prof_fresh < HAK_PROF_MAX) i = hak_prof_fresh++;
    else { hak_prof_dropped++; pthread_mutex_unlock(&hak_prof_lock); return; }
    hak_sample_t *s = &hak_samples[i];
    s->ptr = p;
    s->size = size;
    s->depth = depth;
    memcpy(s->frames, frames, depth * sizeof(void *));
    uint32_t h = hak_prof_hash(p);
    s->next = hak_prof_bucket[h];
    hak_prof_bucket[h] = i + 1;
    hak_prof_live++;
    pthread_mutex_unlock(&hak_prof_lock);
}

/* A huge block is freed (or moved by realloc): forget it if it was sampled. */
void hak_profile_free(void *p) {
    if (atomic_load_explicit(&hak_prof_state, memory_order_relaxed) != 2 || !hak_prof_on) return;
    pthread_mutex_lock(&hak_prof_lock);
    uint32_t *link = &hak_prof_bucket[hak_prof_hash(p)];
    while (*link) {
        hak_sample_t *s = &hak_samples[*link - 1];
        if (s->ptr == p) {
            uint32_t i = *link - 1;
            *link = s->next;
            s->ptr = NULL;
            s->next = hak_prof_free_list;
            hak_prof_free_list = i + 1;
            hak_prof_live--;
            break;
        }
        link = &s->next;
    }
    pthread_mutex_unlock(&hak_prof_lock);
}

/* A report of misuse (hak_report.c): sampled block p's allocation stack.
 * Tries the lock only: the report may come from this thread holding it. */
bool hak_profile_sample_of(const void *p, void **frames, unsigned max, unsigned *depth, size_t *size) {
    if (atomic_load_explicit(&hak_prof_state, memory_order_relaxed) != 2 || !hak_prof_on ||
        pthread_mutex_trylock(&hak_prof_lock) != 0)
        return false;
    bool found = false;
    for (uint32_t i = hak_prof_bucket[hak_prof_hash(p)], n = 0; i && n < HAK_PROF_MAX; i = hak_samples[i - 1].next, n++) {
        const hak_sample_t *s = &hak_samples[i - 1];
        if (s->ptr != p) continue;
        *depth = s->depth < max ? s->depth : max;
        memcpy(frames, s->frames, *depth * sizeof(void *));
        *size = s->size;
        found = true;
        break;
    }
    pthread_mutex_unlock(&hak_prof_lock);
    return found;
}

/* realloc kept sampled block p in place: its sample gets the new size. */
void hak_profile_resize(void *p, size_t size) {
    pthread_mutex_lock(&hak_prof_lock);
    for (uint32_t i = hak_prof_bucket[hak_prof_hash(p)]; i; i = hak_samples[i - 1].next)
        if (hak_samples[i - 1].ptr == p) { hak_samples[i - 1].size = size; break; }
    pthread_mutex_unlock(&hak_prof_lock);
}

/* ---- the hook ---- */

/* State 2 (the countdown in use) if heap profiles or guarded sampling are
 * on; 1 if neither. */
static void hak_prof_decide(void) {
    hak_process_init();
    int expected = 0;
    hak_prof_on = hak_opt.sample_bytes > 0;
    hak_guard_on = hak_opt.guard_sample > 0;
    if (hak_prof_on) {   /* before the first sampled block */
        hak_sampled_freed = hak_profile_free;       /* a sampled page's block */
        hak_huge_hooks.freed = hak_profile_free;    /* a huge block */
    }
    atomic_compare_exchange_strong(&hak_prof_state, &expected, hak_prof_on || hak_guard_on ? 2 : 1);
}

/* unsampled: malloc, calloc or an aligned allocation */
static void *hak_plain(size_t size, size_t align, bool zero) {
    if (align > HAK_MIN_ALIGN) return hak_aligned_plain(size, align, zero);
    return zero ? hak_calloc_total(size) : hak_malloc_inline(size);
}

/* What hak_sample_due says is due */
#define HAK_DUE_PROFILE 1u   /* a heap profile's sample */
#define HAK_DUE_GUARD   2u   /* a guarded block (hak_guard.c) */

/* The countdown went negative (or this is the thread's first allocation).
 * It runs to the nearer of two events, each with its own countdown: the
 * next heap-profile sample and the next guarded block.  Both are charged
 * the bytes counted since it was set; each that went negative is due and
 * draws its next interval; the countdown is set to the nearer again.
 * Returns the due events (HAK_DUE_*). */
static unsigned hak_sample_due(void) {
    if (hak_unlikely(atomic_load_explicit(&hak_prof_state, memory_order_relaxed) == 0)) hak_prof_decide();
    if (hak_prof_state != 2) {
        hak_tls.sample_left = INT64_MAX;
        return 0;
    }
    if (hak_tls_in_prof) return 0;   /* the unwinder's or a dump's own allocation */
    /* not before the constructor loaded the unwinder (an allocation of the
     * dynamic loader's or of an earlier constructor) */
    if (hak_unlikely(!atomic_load_explicit(&hak_prof_ready, memory_order_acquire))) return 0;
    uint64_t spent = (uint64_t)hak_tls_armed - (uint64_t)hak_tls.sample_left;
    int64_t charge = spent > INT64_MAX ? INT64_MAX : (int64_t)spent;
    unsigned due = 0;
    if (hak_tls_rng == 0) {   /* the thread's first allocation: not a profile's crossing */
        (void)hak_rng_next();
        hak_tls_prof_left = hak_prof_on ? hak_next_interval(hak_opt.sample_bytes) : INT64_MAX;
        hak_tls_guard_left = hak_guard_on ? hak_next_interval(hak_opt.guard_sample) : INT64_MAX;
    } else if (hak_prof_on && (hak_tls_prof_left -= charge) < 0) {
        due |= HAK_DUE_PROFILE;
        hak_tls_prof_left = hak_next_interval(hak_opt.sample_bytes);
    }
    if (hak_guard_on && (hak_tls_guard_left -= charge) < 0) {
        due |= HAK_DUE_GUARD;
        hak_tls_guard_left = hak_next_interval(hak_opt.guard_sample);
    }
    hak_tls_armed = hak_tls_prof_left < hak_tls_guard_left ? hak_tls_prof_left : hak_tls_guard_left;
    hak_tls.sample_left = hak_tls_armed;
    return hak_tls_exiting ? 0 : due;
}

/* A sampled allocation: the stack first, then the block -- on a page of its
 * own (hak_page_sampled_alloc), or a huge block above the large-block limit
 * -- then the table. */
HAK_PROF_TEXT void *hak_profile_malloc(size_t size, size_t align, bool zero) {
    unsigned due = hak_sample_due();
    if (!due) return hak_plain(size, align, zero);
    hak_heap_t *heap = hak_tls.heap;
    if (heap == &hak_heap_empty && !(heap = hak_heap_for_thread())) { errno = ENOMEM; return NULL; }
    hak_tls_in_prof = true;
    void *frames[HAK_PROF_DEPTH];
    unsigned depth = hak_stack_capture(frames, HAK_PROF_DEPTH, 0, 0);
    void *p = NULL;
    /* a guarded block if it can be one (hak_guard.c: its pages are fresh,
     * so zeroed), else a sample's or an ordinary block; not for size 0,
     * whose ordinary block (hak_zero.c) faults on its first byte already */
    if ((due & HAK_DUE_GUARD) && size != 0) p = hak_guard_alloc(size, align, frames, depth);
    if (!p && !(due & HAK_DUE_PROFILE)) {
        hak_tls_in_prof = false;
        return hak_plain(size, align, zero);
    }
    if (!p && (size > HAK_LARGE_MAX || align > HAK_LARGE_MAX - size)) p = hak_huge_alloc(size, align, zero);
    else if (!p) {
        p = hak_page_sampled_alloc(heap, size, align);
        if (p && zero) memset(p, 0, size);
    }
    if (p && (due & HAK_DUE_PROFILE)) hak_prof_insert(p, size, frames, depth);
    hak_tls_in_prof = false;
    return p;
}

/* realloc grew block p in place to size bytes, and the countdown went
 * negative over the growth: draws the next interval; true if p, not sampled
 * before, is now (the caller flags its page). */
HAK_PROF_TEXT bool hak_profile_grown(void *p, size_t size, bool sampled) {
    if (!(hak_sample_due() & HAK_DUE_PROFILE) || sampled) return false;
    hak_tls_in_prof = true;
    void *frames[HAK_PROF_DEPTH];
    unsigned depth = hak_stack_capture(frames, HAK_PROF_DEPTH, 0, 0);
    hak_prof_insert(p, size, frames, depth);
    hak_tls_in_prof = false;
    return true;
}

/* realloc resized a huge block (in place or moved to q) and the countdown
 * went negative: sample q as an allocation of size bytes.  (The old block
 * left the profile before the resize.) */
HAK_PROF_TEXT void hak_profile_resized(void *q, size_t size) {
    if (!(hak_sample_due() & HAK_DUE_PROFILE)) return;
    hak_tls_in_prof = true;
    void *frames[HAK_PROF_DEPTH];
    unsigned depth = hak_stack_capture(frames, HAK_PROF_DEPTH, 0, 0);
    hak_prof_insert(q, size, frames, depth);
    hak_tls_in_prof = false;
}

/* ---- output ---- */

/* A dump's output: its own descriptor and buffer, on the dumping thread's
 * stack, so that two dumps at once never share either (a static one, used
 * after the lock was released, mixed two dumps' files).  err: a write
 * failed (its errno). */
typedef struct { int fd, err; size_t n; char buf[4096]; } hak_out_t;
static void hak_out_flush(hak_out_t *o) {
    size_t off = 0;
    while (off < o->n && !o->err) {
        ssize_t w = write(o->fd, o->buf + off, o->n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) o->err = w < 0 ? errno : EIO;
        else off += (size_t)w;
    }
    o->n = 0;
}
__attribute__((format(printf, 2, 3)))
static void hak_out(hak_out_t *o, const char *fmt, ...) {
    if (o->n + 512 > sizeof o->buf) hak_out_flush(o);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->buf + o->n, sizeof o->buf - o->n, fmt, ap);
    va_end(ap);
    if (k > 0) o->n += (size_t)k < sizeof o->buf - o->n ? (size_t)k : sizeof o->buf - o->n - 1;
}

/* path with %p replaced by the pid, into out */
static void hak_expand_path(const char *path, char *out, size_t cap) {
    size_t n = 0;
    for (const char *s = path; *s && n + 24 < cap; s++) {
        if (s[0] == '%' && s[1] == 'p') { n += (size_t)snprintf(out + n, cap - n, "%d", (int)getpid()); s++; }
        else out[n++] = *s;
    }
    out[n] = 0;
}

/* The dump into o, whose fd is open: the samples under the lock, then the
 * maps. */
static void hak_dump_to(hak_out_t *o) {
    pthread_mutex_lock(&hak_prof_lock);
    size_t bytes = 0;
    for (uint32_t i = 0; i < hak_prof_fresh; i++) if (hak_samples[i].ptr) bytes += hak_samples[i].size;
    long period = hak_opt.sample_bytes > 0 ? hak_opt.sample_bytes : 1;
    hak_out(o, "heap profile: %6zu: %8zu [%6zu: %8zu] @ heap_v2/%ld\n",
            hak_prof_live, bytes, hak_prof_live, bytes, period);
    for (uint32_t i = 0; i < hak_prof_fresh; i++) {
        const hak_sample_t *s = &hak_samples[i];
        if (!s->ptr) continue;
        hak_out(o, "%6d: %8zu [%6d: %8zu] @", 1, s->size, 1, s->size);
        for (unsigned k = 0; k < s->depth; k++)
            hak_out(o, " %#lx", (unsigned long)(uintptr_t)s->frames[k]);
        hak_out(o, "\n");
    }
    pthread_mutex_unlock(&hak_prof_lock);
    hak_out(o, "\nMAPPED_LIBRARIES:\n");
    hak_out_flush(o);
    int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (maps >= 0) {
        ssize_t r;
        while ((r = read(maps, o->buf, sizeof o->buf)) > 0) { o->n = (size_t)r; hak_out_flush(o); }
        close(maps);
    }
}

/* The legacy text heap profile (gperftools' heap-profiler, "heap_v2"): one
 * line per live sample, raw; pprof unsamples with the period in the header.
 * Then MAPPED_LIBRARIES: and /proc/self/maps, for symbolization by the tool.
 * Cancellation is disabled throughout: write(2), read(2) and open(2) are
 * cancellation points, and a thread cancelled in one of them left
 * hak_prof_lock taken (every later sample, in every thread, then blocked
 * for ever) and the descriptor open.  A cancel requested meanwhile acts at
 * the caller's next cancellation point. */
HAK_EXPORT int hakmem_profile_dump(const char *path) {
    if (!path) { errno = EINVAL; return -1; }
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    bool saved_guard = hak_tls_in_prof;
    hak_tls_in_prof = true;
    hak_out_t o;
    hak_expand_path(path, o.buf, sizeof o.buf);   /* the file's name, then the output */
    o.fd = open(o.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = -1, err = errno;
    if (o.fd >= 0) {
        o.err = 0;
        o.n = 0;
        hak_dump_to(&o);
        rc = close(o.fd);
        err = errno;
        if (o.err) { rc = -1; err = o.err; }
    }
    hak_tls_in_prof = saved_guard;
    pthread_setcancelstate(cancel, NULL);
    if (rc != 0) errno = err;
    return rc;
}

/* ---- at exit ---- */

static int hak_cmp_size_desc(const void *a, const void *b) {
    const hak_sample_t *x = *(hak_sample_t *const *)a, *y = *(hak_sample_t *const *)b;
    return x->size < y->size ? 1 : x->size > y->size ? -1 : 0;
}

/* The leak report: stacks of the samples still live, merged by stack, the
 * largest estimated total first. */
static void hak_leak_report(void) {
    static hak_sample_t *order[HAK_PROF_MAX];
    static hak_sample_t merged[HAK_PROF_MAX];
    hak_tls_in_prof = true;
    pthread_mutex_lock(&hak_prof_lock);
    size_t n = 0;
    double period = (double)hak_opt.sample_bytes;
    for (uint32_t i = 0; i < hak_prof_fresh; i++) {
        const hak_sample_t *s = &hak_samples[i];
        if (!s->ptr) continue;
        /* estimated bytes this sample stands for: size / P(sampled) */
        double w = (double)s->size, pr = 1.0 - hak_exp_neg(w / period);
        size_t est = (size_t)(w / (pr > 0 ? pr : 1));
        size_t j;
        for (j = 0; j < n; j++)
            if (merged[j].depth == s->depth && !memcmp(merged[j].frames, s->frames, s->depth * sizeof(void *))) break;
        if (j == n) { merged[n] = *s; merged[n].size = 0; merged[n].next = 0; n++; }
        merged[j].size += est;
        merged[j].next++;
    }
    pthread_mutex_unlock(&hak_prof_lock);
    for (size_t j = 0; j < n; j++) order[j] = &merged[j];
    qsort(order, n, sizeof order[0], hak_cmp_size_desc);
    hak_message("hakmem: leak report: %zu stacks of sampled blocks still live at exit (sample period %ld bytes)\n",
                n, hak_opt.sample_bytes);
    for (size_t j = 0; j < n; j++) {
        hak_message("hakmem: ~%zu bytes live (%u samples) allocated at:\n", order[j]->size, order[j]->next);
        backtrace_symbols_fd(order[j]->frames, (int)order[j]->depth, 2);
    }
    if (hak_prof_dropped) hak_message("hakmem: leak report: %zu samples dropped (table full)\n", hak_prof_dropped);
    hak_tls_in_prof = false;
}

static char hak_exit_path[4096];
static void hak_profile_at_exit(void) {
    if (hak_exit_path[0] && hakmem_profile_dump(hak_exit_path) != 0)
        hak_message("hakmem: warning: HAKMEM_PROFILE_AT_EXIT: cannot write '%s'\n", hak_exit_path);
    if (hak_opt.leak_report) {
        int cancel;   /* the report writes (cancellation points) and takes the lock */
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
        hak_leak_report();
        pthread_setcancelstate(cancel, NULL);
    }
}

static void hak_prof_prepare(void) { pthread_mutex_lock(&hak_prof_lock); }
static void hak_prof_parent(void) { pthread_mutex_unlock(&hak_prof_lock); }
static void hak_prof_child(void) { pthread_mutex_init(&hak_prof_lock, NULL); }

static void hak_prof_find_self(void) {
    hak_self_lo = (uintptr_t)__start_hak_prof_text;
    hak_self_hi = (uintptr_t)__stop_hak_prof_text;
}

/* After hak_heap.c's constructor (101): options are read. */
__attribute__((constructor(102))) static void hak_profile_constructor(void) {
    hak_prof_decide();
    hak_report_enable();   /* reports of misuse: the block, the stacks, the next step */
    const char *path = getenv("HAKMEM_PROFILE_AT_EXIT");
    if (!hak_prof_on && ((path && *path) || hak_opt.leak_report))
        hak_message("hakmem: warning: HAKMEM_PROFILE_AT_EXIT and HAKMEM_LEAK_REPORT need HAKMEM_SAMPLE_BYTES > 0; "
                    "no profile is taken\n");
    /* the stack walk: for reports of misuse (hak_report.c) in every
     * dynamically linked program, whether or not anything is sampled --
     * _dl_find_object only, no libgcc_s mapped -- and libgcc's walk besides
     * for heap profiles (hak_unwind.c) */
    hak_tls_in_prof = true;   /* dlopen and the unwinder's warm-up may allocate */
    const char *why = hak_unwind_load(hak_prof_on ? HAK_UNWIND_PROFILE :
                                      hak_prof_state == 2 ? HAK_UNWIND_GUARD : HAK_UNWIND_REPORTS);
    if (hak_prof_state != 2) {
        hak_tls_in_prof = false;
        return;
    }
    if (why) {
        /* heap profiles need the stacks; guarded blocks are kept without
         * them (said only when HAKMEM_GUARD_SAMPLE was set: it is on by
         * default, also in static programs) */
        if (hak_prof_on)
            hak_message("hakmem: warning: heap profiles need libgcc's unwinder (%s); HAKMEM_SAMPLE_BYTES "
                        "ignored\n", why);
        if (hak_guard_on && getenv("HAKMEM_GUARD_SAMPLE"))
            hak_message("hakmem: warning: guarded sampling: no unwinder (%s): guarded blocks are reported "
                        "without their stacks\n", why);
        hak_prof_on = false;
        if (!hak_guard_on) {
            hak_tls_in_prof = false;
            atomic_store(&hak_prof_state, 1);
            return;
        }
    } else {
        hak_prof_stacks = true;
    }
    hak_prof_find_self();
    if (hak_guard_on) hak_guard_enable();   /* its hooks, before the first guarded block */
    atomic_store_explicit(&hak_prof_ready, true, memory_order_release);
    void *frames[4];
    (void)hak_stack_capture(frames, 4, 0, 0);
    hak_tls_in_prof = false;
    if (!hak_prof_on) return;
    hak_fork_hook_add(hak_prof_prepare, hak_prof_parent, hak_prof_child);
    if (path && *path) {
        if (strlen(path) >= sizeof hak_exit_path)
            hak_message("hakmem: warning: HAKMEM_PROFILE_AT_EXIT='%s' is too long; ignored\n", path);
        else memcpy(hak_exit_path, path, strlen(path) + 1);
    }
    if (hak_exit_path[0] || hak_opt.leak_report) atexit(hak_profile_at_exit);
}
