/* fuzz_ops.c -- hakmem's fuzzer: one interpreter that turns input bytes into
 * a sequence of allocator operations and checks every result against a model.
 * Used by the libFuzzer target (fuzz_target.c) and by the replay driver
 * (fuzz_replay.c), in the sanitizer builds through the hakmem_* names
 * (tests/hak_prefix.h) and, in the plain build, through the standard names
 * under LD_PRELOAD.
 *
 * Input format.  Every byte string is a valid input: bytes are read one
 * operation at a time, and reads past the end give 0 and end the run.  An
 * operation is one opcode byte (modulo OP_COUNT, see fz_op_names) followed by
 * its arguments:
 *   slot   1 byte, one of FZ_SLOTS live-block slots (an allocation into a
 *          slot that holds a block first frees that block)
 *   size   1 byte whose top 3 bits pick a range (fz_size: tiny, direct,
 *          small, medium, large, near a size class or page size, huge,
 *          enormous), then 0..2 more bytes
 *   align  1 byte: a power of two 1..4 MiB, or one of a table of invalid or
 *          extreme alignments (fz_align)
 *   n      1 byte: calloc/reallocarray's element count (the size is divided
 *          by it), or one of a table of overflowing pairs
 * The operations: malloc, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc, C++ new (plain, array, nothrow,
 * aligned; through hakmem's operators under LD_PRELOAD, through the
 * equivalent C calls in the prefix builds), free (free, free_sized,
 * free_aligned_sized, realloc(p, 0), reallocarray(p, 0, n), the matching
 * delete), malloc_usable_size (then the program writes the whole usable
 * size), a full contents check, realloc chains, remote free (the block goes
 * to one of two helper threads, which checks and frees it), remote alloc and
 * remote realloc (a helper allocates or resizes and hands the block back),
 * sync (wait for a helper's queue), restart (a helper thread exits, leaving
 * its heap abandoned with blocks still live, and a new one starts; perhaps
 * with a pthread key destructor that frees one of the main thread's blocks
 * and allocates, reallocs and frees in up to 4 destructor rounds, before or
 * after hakmem's own exit handler), burst
 * (up to 256 blocks of one size allocated by one thread, freed by others in
 * some order: full pages, remote and delayed frees) and query
 * (hakmem_collect, stats, mallinfo2, malloc_trim).
 *
 * The model.  Each live block is filled with a pattern derived from a seed
 * (a counter, so from its slot's history) and its offset, and checked before
 * every free and realloc (sampled for blocks above 64 KiB: 16 KiB at each
 * end and one word per 4 KiB; in full by the check operation); realloc must keep min(old, new) bytes; calloc's block
 * must be zero.  Every block must be aligned (16, or what was asked: a
 * non-power-of-two alignment of memalign/aligned_alloc is rounded up as
 * glibc does), owned by hakmem, have malloc_usable_size >= the size asked,
 * and overlap no other live block (over the usable sizes).  Failures must
 * be the documented ones: ENOMEM for calloc/reallocarray overflow and sizes
 * above PTRDIFF_MAX, EINVAL for memalign's alignments above SIZE_MAX/2+1,
 * posix_memalign returns EINVAL for an alignment that is not a power of two
 * multiple of sizeof(void *) (errno and *memptr untouched); aligned_alloc
 * may refuse a non-power-of-two alignment with EINVAL (glibc 2.38) or round
 * it up (2.36, hakmem).  Enormous requests (above 16 MiB in the input's
 * ranges, i.e. the table of extreme sizes) and alignments above 4 MiB may
 * fail with ENOMEM, or succeed (then the block is checked and freed at once).
 * Everything else must succeed.  A mismatch prints "fuzz: FAIL ..." and
 * aborts. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hakmem.h"
#include "fuzz_ops.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

#define FZ_SLOTS      64
#define FZ_HELPERS    2
#define FZ_QCAP       1024          /* helper queue entries */
#define FZ_KEEP_MAX   (16 * MiB)    /* larger successful blocks are freed at once */
#define FZ_ALIGN_SAFE (4 * MiB)     /* larger alignments may fail with ENOMEM */
#define FZ_LIVE_MAX   (32 * MiB)    /* live bytes in slots; larger requests shrink */
#define FZ_FILL_MAX   (48 * MiB)    /* bytes written per input; then requests shrink */
#define FZ_PENDING_MAX (32 * MiB)   /* bytes queued for one helper before a sync */
#define FZ_SAMPLE_MIN (64 * KiB)    /* blocks up to this size are checked in full */
#define FZ_MAX_RESTARTS 8           /* helper restarts per input */
#define FZ_BURST_MAX  256
#define FZ_CANARY     4242          /* errno before a call; no real errno value */

/* ---------------------------------------------------------------- names --
 * In the prefix builds (tests/hak_prefix.h is force-included) malloc & co
 * are macros for the hakmem_* names and hakmem is linked in.  In the plain
 * build they are the standard names and hakmem's extras are looked up with
 * dlsym (present when hakmem is preloaded). */
#ifdef HAK_PREFIX_BUILD
int hakmem_malloc_trim(size_t pad);
struct mallinfo2 hakmem_mallinfo2(void);
#endif

typedef struct fz_api_s {
    int (*owns)(const void *);
    int (*collect)(void);
    int (*stats_get)(hakmem_stats_t *, size_t);
    int (*trim)(size_t);
    struct mallinfo2 (*mallinfo2)(void);
    void (*free_sized)(void *, size_t);
    void (*free_aligned_sized)(void *, size_t, size_t);
    /* C++ operators, [0] scalar, [1] array; nothrow_t is passed by reference */
    void *(*op_new[2])(size_t);
    void *(*op_new_nt[2])(size_t, const void *);
    void *(*op_new_al[2])(size_t, size_t);
    void *(*op_new_al_nt[2])(size_t, size_t, const void *);
    void (*op_del[2])(void *);
    void (*op_del_sized[2])(void *, size_t);
    void (*op_del_al[2])(void *, size_t);
    void (*op_del_sized_al[2])(void *, size_t, size_t);
    int cxx;                        /* 1: the operators are hakmem's own */
} fz_api_t;
static fz_api_t A;
static const char fz_nothrow = 0;  /* std::nothrow stand-in */

/* fallbacks: what hakmem's operators do, through the C entry points */
#define FZ_UNUSED __attribute__((unused))
static FZ_UNUSED void fb_free_sized(void *p, size_t n) { (void)n; free(p); }
static FZ_UNUSED void fb_free_aligned_sized(void *p, size_t a, size_t n) { (void)a; (void)n; free(p); }
static FZ_UNUSED void *fb_new(size_t n) { return malloc(n); }
static FZ_UNUSED void *fb_new_nt(size_t n, const void *t) { (void)t; return malloc(n); }
static FZ_UNUSED void *fb_new_al(size_t n, size_t a) { return memalign(a, n); }
static FZ_UNUSED void *fb_new_al_nt(size_t n, size_t a, const void *t) { (void)t; return memalign(a, n); }
static FZ_UNUSED void fb_del(void *p) { free(p); }
static FZ_UNUSED void fb_del_sized(void *p, size_t n) { A.free_sized(p, n); }
static FZ_UNUSED void fb_del_al(void *p, size_t a) { (void)a; free(p); }
static FZ_UNUSED void fb_del_sized_al(void *p, size_t n, size_t a) { A.free_aligned_sized(p, a, n); }
static FZ_UNUSED int fb_collect(void) { return malloc_trim(0); }

#ifndef HAK_PREFIX_BUILD
static void *fz_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }
#define FZ_SYM(field, name, fallback) \
    do { void *s_ = fz_sym(name); A.field = s_ ? (__typeof__(A.field))s_ : (fallback); } while (0)
#endif

static void fz_resolve(void) {
#ifdef HAK_PREFIX_BUILD
    A.owns = hakmem_owns;
    A.collect = hakmem_collect;
    A.stats_get = hakmem_stats_get;
    A.trim = hakmem_malloc_trim;
    A.mallinfo2 = hakmem_mallinfo2;
    A.free_sized = hakmem_free_sized;
    A.free_aligned_sized = hakmem_free_aligned_sized;
    for (int i = 0; i < 2; i++) {
        A.op_new[i] = fb_new; A.op_new_nt[i] = fb_new_nt;
        A.op_new_al[i] = fb_new_al; A.op_new_al_nt[i] = fb_new_al_nt;
        A.op_del[i] = fb_del; A.op_del_sized[i] = fb_del_sized;
        A.op_del_al[i] = fb_del_al; A.op_del_sized_al[i] = fb_del_sized_al;
    }
#else
    A.owns = (int (*)(const void *))fz_sym("hakmem_owns");
    A.stats_get = (int (*)(hakmem_stats_t *, size_t))fz_sym("hakmem_stats_get");
    FZ_SYM(collect, "hakmem_collect", fb_collect);
    FZ_SYM(trim, "malloc_trim", malloc_trim);
    A.mallinfo2 = (struct mallinfo2 (*)(void))fz_sym("mallinfo2");
    FZ_SYM(free_sized, "free_sized", fb_free_sized);
    FZ_SYM(free_aligned_sized, "free_aligned_sized", fb_free_aligned_sized);
    FZ_SYM(op_new[0], "_Znwm", fb_new);
    FZ_SYM(op_new[1], "_Znam", fb_new);
    FZ_SYM(op_new_nt[0], "_ZnwmRKSt9nothrow_t", fb_new_nt);
    FZ_SYM(op_new_nt[1], "_ZnamRKSt9nothrow_t", fb_new_nt);
    FZ_SYM(op_new_al[0], "_ZnwmSt11align_val_t", fb_new_al);
    FZ_SYM(op_new_al[1], "_ZnamSt11align_val_t", fb_new_al);
    FZ_SYM(op_new_al_nt[0], "_ZnwmSt11align_val_tRKSt9nothrow_t", fb_new_al_nt);
    FZ_SYM(op_new_al_nt[1], "_ZnamSt11align_val_tRKSt9nothrow_t", fb_new_al_nt);
    FZ_SYM(op_del[0], "_ZdlPv", fb_del);
    FZ_SYM(op_del[1], "_ZdaPv", fb_del);
    FZ_SYM(op_del_sized[0], "_ZdlPvm", fb_del_sized);
    FZ_SYM(op_del_sized[1], "_ZdaPvm", fb_del_sized);
    FZ_SYM(op_del_al[0], "_ZdlPvSt11align_val_t", fb_del_al);
    FZ_SYM(op_del_al[1], "_ZdaPvSt11align_val_t", fb_del_al);
    FZ_SYM(op_del_sized_al[0], "_ZdlPvmSt11align_val_t", fb_del_sized_al);
    FZ_SYM(op_del_sized_al[1], "_ZdaPvmSt11align_val_t", fb_del_sized_al);
    A.cxx = A.op_new[0] != fb_new;
#endif
}

/* ------------------------------------------------------------ reporting -- */
static const char *fz_input_name;
static const uint8_t *fz_input;            /* the input being run, for --crash-file */
static size_t fz_input_len;
static int fz_trace_on;
static _Atomic unsigned long fz_op_index;  /* read by the helpers' messages */
static _Atomic int fz_op_code = -1;
static _Thread_local const char *fz_thread = "main";
static _Atomic int fz_failed;              /* fz_fail is reporting */
static const char *fz_crash_file;          /* $FZ_CRASH_FILE, for the abort handler */

enum {
    OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_REALLOCARRAY, OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC,
    OP_MEMALIGN, OP_VALLOC, OP_PVALLOC, OP_NEW, OP_FREE, OP_USABLE, OP_CHECK, OP_CHAIN,
    OP_REMOTE_FREE, OP_REMOTE_ALLOC, OP_REMOTE_REALLOC, OP_SYNC, OP_RESTART, OP_BURST,
    OP_QUERY, OP_COUNT
};
static const char *const fz_op_names[OP_COUNT] = {
    "malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "new", "free", "usable", "check", "chain",
    "remote_free", "remote_alloc", "remote_realloc", "sync", "restart", "burst", "query"
};
static unsigned long fz_counts[OP_COUNT];

void fz_set_input_name(const char *name) { fz_input_name = name; }
void fz_set_trace(int on) { fz_trace_on = on; }

static void fz_write(const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w; n -= (size_t)w;
    }
}

/* Ends a message whose first n bytes are in buf with fmt, a newline, and
 * writes it.  No allocation: the heap may be what is broken. */
static void fz_vline(char *buf, size_t cap, int n, const char *fmt, va_list ap) {
    if (n < 0 || n >= (int)cap) n = 0;
    int m = vsnprintf(buf + n, cap - (size_t)n - 1, fmt, ap);
    if (m < 0) m = 0;
    n += m;
    if (n > (int)cap - 2) n = (int)cap - 2;
    buf[n++] = '\n';
    fz_write(buf, (size_t)n);
}

/* Keeps the input being replayed in the file crash (open/write/close only,
 * so that the abort handler can call it too). */
static bool fz_save_input(const char *crash) {
    if (!crash || !fz_input) return false;
    int fd = open(crash, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return false;
    size_t left = fz_input_len;
    const uint8_t *q = fz_input;
    while (left > 0) {
        ssize_t w = write(fd, q, left);
        if (w <= 0) break;
        q += w; left -= (size_t)w;
    }
    close(fd);
    return true;
}

__attribute__((noreturn, format(printf, 1, 2)))
static void fz_fail(const char *fmt, ...) {
    char buf[1024];
    int op = atomic_load(&fz_op_code);
    int n = snprintf(buf, sizeof buf, "fuzz: FAIL %s%s%sop #%lu (%s, %s thread): ",
                     fz_input_name ? "input " : "", fz_input_name ? fz_input_name : "",
                     fz_input_name ? " " : "",
                     atomic_load(&fz_op_index), op >= 0 && op < OP_COUNT ? fz_op_names[op] : "cleanup",
                     fz_thread);
    va_list ap;
    va_start(ap, fmt);
    fz_vline(buf, sizeof buf, n, fmt, ap);
    va_end(ap);
    const char *crash = getenv("FZ_CRASH_FILE");
    if (fz_save_input(crash)) {
        fz_write("fuzz: input written to ", 23);
        fz_write(crash, strlen(crash));
        fz_write("\n", 1);
    }
    atomic_store(&fz_failed, 1);
    abort();
}

/* SIGABRT from anything but fz_fail (hakmem's own checks, a sanitizer's
 * abort): name the input and the operation, keep the input in
 * $FZ_CRASH_FILE.  Async-signal-safe: write, open, close only. */
static void fz_put(char **o, const char *end, const char *s) {
    while (*s && *o < end) *(*o)++ = *s++;
}
static void fz_abort_handler(int sig) {
    (void)sig;
    if (atomic_load(&fz_failed)) return;      /* fz_fail has said it all */
    char buf[768], *o = buf, num[24], *n = num + sizeof num;
    const char *end = buf + sizeof buf - 1;
    unsigned long k = atomic_load(&fz_op_index);
    *--n = 0;
    do { *--n = (char)('0' + k % 10); k /= 10; } while (k);
    int op = atomic_load(&fz_op_code);
    fz_put(&o, end, "fuzz: aborted in ");
    if (fz_input_name) { fz_put(&o, end, "input "); fz_put(&o, end, fz_input_name); fz_put(&o, end, " "); }
    fz_put(&o, end, "op #");
    fz_put(&o, end, n);
    fz_put(&o, end, " (");
    fz_put(&o, end, op >= 0 && op < OP_COUNT ? fz_op_names[op] : "cleanup");
    fz_put(&o, end, ", ");
    fz_put(&o, end, fz_thread);
    fz_put(&o, end, " thread)\n");
    fz_write(buf, (size_t)(o - buf));
    fz_save_input(fz_crash_file);
}

void fz_report_aborts(void) {
    fz_crash_file = getenv("FZ_CRASH_FILE");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fz_abort_handler;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGABRT, &sa, NULL);
}

__attribute__((format(printf, 1, 2)))
static void fz_tr(const char *fmt, ...) {
    if (!fz_trace_on) return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "fuzz: #%lu ", atomic_load(&fz_op_index));
    va_list ap;
    va_start(ap, fmt);
    fz_vline(buf, sizeof buf, n, fmt, ap);
    va_end(ap);
}

/* The pattern loops are most of the harness's time: they carry neither
 * libFuzzer's comparison tracing (it would cost more than everything else
 * and say nothing about hakmem) nor ASan's checks (hakmem's memory comes
 * from mmap, never poisoned: the checks could not fire).  TSan keeps them:
 * it sees two threads using one block. */
#if defined(__clang__)
#define FZ_FAST __attribute__((no_sanitize("address", "coverage")))
#elif defined(__GNUC__)
#define FZ_FAST __attribute__((no_sanitize_address))
#else
#define FZ_FAST
#endif

/* -------------------------------------------------------------- pattern --
 * Word k of a block with seed s (s != 0) is s + k * PAT_STEP; byte i is byte
 * i%8 of word i/8.  Seed 0 means all zero (calloc).  Checks compare words,
 * then find the byte. */
#define PAT_STEP 0x9e3779b97f4a7c15ull
FZ_FAST static inline uint64_t pat_word(uint64_t seed, size_t k) {
    return seed ? seed + (uint64_t)k * PAT_STEP : 0;
}
FZ_FAST static inline uint8_t pat_byte(uint64_t seed, size_t i) {
    uint64_t w = pat_word(seed, i >> 3);
    uint8_t b[8];
    memcpy(b, &w, 8);
    return b[i & 7];
}
FZ_FAST static void pat_fill(uint8_t *p, size_t from, size_t to, uint64_t seed) {
    size_t i = from;
    for (; i < to && (i & 7); i++) p[i] = pat_byte(seed, i);
    uint64_t w = pat_word(seed, i >> 3), step = seed ? PAT_STEP : 0;
    for (; i + 8 <= to; i += 8, w += step) memcpy(p + i, &w, 8);
    for (; i < to; i++) p[i] = pat_byte(seed, i);
}
/* first offset in [from, to) that differs, or SIZE_MAX */
FZ_FAST static size_t pat_diff(const uint8_t *p, size_t from, size_t to, uint64_t seed) {
    size_t i = from;
    for (; i < to && (i & 7); i++)
        if (p[i] != pat_byte(seed, i)) return i;
    uint64_t w = pat_word(seed, i >> 3), step = seed ? PAT_STEP : 0;
    for (; i + 8 <= to; i += 8, w += step) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if (v != w) break;
    }
    for (; i < to; i++)
        if (p[i] != pat_byte(seed, i)) return i;
    return SIZE_MAX;
}

enum { CHK_FULL, CHK_SAMPLED, CHK_MINIMAL };
/* Check [0, n): in full up to FZ_SAMPLE_MIN (or CHK_FULL); else the first
 * and last 16 KiB and one word per 4 KiB between (CHK_MINIMAL: the first and
 * last 4 KiB only, for enormous blocks). */
FZ_FAST static size_t pat_find(const uint8_t *p, size_t n, uint64_t seed, int depth) {
    if (depth == CHK_FULL || (n <= FZ_SAMPLE_MIN && depth == CHK_SAMPLED))
        return pat_diff(p, 0, n, seed);
    size_t edge = depth == CHK_MINIMAL ? 4 * KiB : 16 * KiB, r;
    if (edge > n / 2) edge = n / 2;
    if ((r = pat_diff(p, 0, edge, seed)) != SIZE_MAX) return r;
    if ((r = pat_diff(p, n - edge, n, seed)) != SIZE_MAX) return r;
    if (depth == CHK_MINIMAL) return SIZE_MAX;
    for (size_t o = (edge + 4095) & ~(size_t)4095; o + 8 <= n - edge; o += 4096)
        if ((r = pat_diff(p, o, o + 8, seed)) != SIZE_MAX) return r;
    return SIZE_MAX;
}

/* ---------------------------------------------------------------- model -- */
enum { ORIG_MALLOC, ORIG_ALIGNED, ORIG_NEW, ORIG_NEW_ALIGNED };

typedef struct fz_block_s {
    uint8_t *p;          /* NULL: no block */
    size_t req;          /* size asked for */
    size_t usable;       /* malloc_usable_size when allocated */
    size_t align;        /* alignment p must have (>= 16) */
    size_t ualign;       /* alignment the program passed (free_aligned_sized, delete) */
    size_t filled;       /* [0, filled) holds the pattern (req, or usable) */
    uint64_t seed;
    uint8_t origin, array;
} fz_block_t;

enum {
    API_MALLOC, API_CALLOC, API_POSIX_MEMALIGN, API_ALIGNED_ALLOC, API_MEMALIGN, API_VALLOC,
    API_PVALLOC, API_REALLOC_NULL, API_REALLOCARRAY_NULL, API_NEW, API_NEW_NT, API_NEW_AL,
    API_NEW_AL_NT, API_COUNT
};
static const char *const fz_api_names[API_COUNT] = {
    "malloc", "calloc", "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
    "realloc(NULL)", "reallocarray(NULL)", "new", "new(nothrow)", "new(align)", "new(align, nothrow)"
};

typedef struct fz_areq_s {
    int api;
    size_t n, size, align;   /* n: calloc / reallocarray count */
    int array;               /* new[] */
} fz_areq_t;

/* what a call may do */
#define FZ_OK     1
#define FZ_ENOMEM 2
#define FZ_EINVAL 4

static size_t fz_page;
static void *fz_sentinel = (void *)&fz_sentinel;

static bool pow2(size_t a) { return a != 0 && (a & (a - 1)) == 0; }
static size_t next_pow2(size_t a) {      /* a <= SIZE_MAX/2+1 */
    if (pow2(a)) return a;
    return (size_t)1 << (64 - __builtin_clzl((unsigned long)a));
}
static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* the outcomes allowed for a request of total bytes aligned to align */
static int fz_expect(size_t total, size_t align) {
    if (total > PTRDIFF_MAX) return FZ_ENOMEM;
    if (total > FZ_KEEP_MAX || align > FZ_ALIGN_SAFE) return FZ_OK | FZ_ENOMEM;
    return FZ_OK;
}

static void fz_check_ptr(const char *what, const void *p, size_t req, size_t align, size_t *usable) {
    if ((uintptr_t)p & (align - 1))
        fz_fail("%s: %p is not aligned to %zu", what, p, align);
    if (A.owns && !A.owns(p))
        fz_fail("%s: %p (size %zu) is not hakmem's (hakmem_owns() = 0)", what, p, req);
    size_t u = malloc_usable_size((void *)p);
    if (u < req)
        fz_fail("%s: malloc_usable_size(%p) = %zu < %zu asked", what, p, u, req);
    *usable = u;
}

static void blk_check(const fz_block_t *b, int depth, const char *when) {
    size_t off = pat_find(b->p, b->filled, b->seed, depth);
    if (off != SIZE_MAX)
        fz_fail("%s: block %p (size %zu, filled %zu, align %zu, %s): byte at offset %zu is 0x%02x, "
                "want 0x%02x", when, (void *)b->p, b->req, b->filled, b->align,
                b->seed ? "pattern" : "zero", off, b->p[off], pat_byte(b->seed, off));
}

static _Atomic size_t fz_fill_bytes;  /* written this input (helpers add too) */

/* Allocate per r into b.  Returns true if b now holds a live block (false:
 * an allowed failure, or an enormous block that was checked and freed). */
static bool blk_alloc(fz_block_t *b, const fz_areq_t *r, uint64_t seed) {
    size_t total = r->size, a = r->align, eff = 16;
    int allow;
    bool zero = false;
    memset(b, 0, sizeof *b);
    b->origin = ORIG_MALLOC;
    b->ualign = a;
    switch (r->api) {
    case API_MALLOC: case API_REALLOC_NULL: case API_NEW: case API_NEW_NT:
        allow = fz_expect(total, 16);
        if (r->api == API_NEW || r->api == API_NEW_NT) b->origin = ORIG_NEW;
        break;
    case API_CALLOC: case API_REALLOCARRAY_NULL:
        if (__builtin_mul_overflow(r->n, r->size, &total)) { allow = FZ_ENOMEM; total = SIZE_MAX; }
        else allow = fz_expect(total, 16);
        zero = r->api == API_CALLOC;
        break;
    case API_POSIX_MEMALIGN:
        if (!pow2(a) || a % sizeof(void *) != 0) allow = FZ_EINVAL;
        else { eff = a > 16 ? a : 16; allow = fz_expect(total, eff); }
        b->origin = ORIG_ALIGNED;
        break;
    case API_ALIGNED_ALLOC: case API_MEMALIGN:
        if (a > SIZE_MAX / 2 + 1) { allow = FZ_EINVAL; break; }
        eff = a <= 16 ? 16 : next_pow2(a);
        allow = fz_expect(total, eff);
        /* glibc 2.38 refuses what is not a power of two; 2.36 and hakmem round up */
        if (r->api == API_ALIGNED_ALLOC && !pow2(a)) allow |= FZ_EINVAL;
        b->origin = ORIG_ALIGNED;
        break;
    case API_VALLOC:
        eff = fz_page;
        allow = fz_expect(total, eff);
        break;
    case API_PVALLOC:
        eff = fz_page;
        if (total > SIZE_MAX - fz_page) { allow = FZ_ENOMEM; break; }
        total = (total + fz_page - 1) & ~(fz_page - 1);   /* 0 stays 0: glibc gives 1 byte */
        allow = fz_expect(total, eff);
        break;
    case API_NEW_AL: case API_NEW_AL_NT:
        eff = a > 16 ? a : 16;            /* a: a power of two */
        allow = fz_expect(total, eff);
        b->origin = ORIG_NEW_ALIGNED;
        break;
    default:
        fz_fail("bad api %d", r->api);
    }
    b->array = (uint8_t)r->array;

    void *p = NULL, *out = fz_sentinel;
    int rc = 0, arr = r->array ? 1 : 0;
    errno = FZ_CANARY;
    switch (r->api) {
    case API_MALLOC: p = malloc(r->size); break;
    case API_CALLOC: p = calloc(r->n, r->size); break;
    case API_POSIX_MEMALIGN: rc = posix_memalign(&out, a, r->size); p = rc ? NULL : out; break;
    case API_ALIGNED_ALLOC: p = aligned_alloc(a, r->size); break;
    case API_MEMALIGN: p = memalign(a, r->size); break;
    case API_VALLOC: p = valloc(r->size); break;
    case API_PVALLOC: p = pvalloc(r->size); break;
    case API_REALLOC_NULL: p = realloc(NULL, r->size); break;
    case API_REALLOCARRAY_NULL: p = reallocarray(NULL, r->n, r->size); break;
    case API_NEW: p = A.op_new[arr](r->size); break;
    case API_NEW_NT: p = A.op_new_nt[arr](r->size, &fz_nothrow); break;
    case API_NEW_AL: p = A.op_new_al[arr](r->size, a); break;
    case API_NEW_AL_NT: p = A.op_new_al_nt[arr](r->size, a, &fz_nothrow); break;
    }
    int e = errno;
    const char *name = fz_api_names[r->api];
    if (p == NULL) {
        if (r->api == API_POSIX_MEMALIGN) {
            if (rc == 0) fz_fail("posix_memalign(%zu, %zu) returned 0 and NULL", a, r->size);
            if (!(rc == EINVAL && (allow & FZ_EINVAL)) && !(rc == ENOMEM && (allow & FZ_ENOMEM)))
                fz_fail("posix_memalign(%zu, %zu) returned %d (allowed:%s%s%s)", a, r->size, rc,
                        allow & FZ_OK ? " success" : "", allow & FZ_ENOMEM ? " ENOMEM" : "",
                        allow & FZ_EINVAL ? " EINVAL" : "");
            if (out != fz_sentinel) fz_fail("posix_memalign failed but wrote *memptr = %p", out);
            if (rc == EINVAL && e != FZ_CANARY)
                fz_fail("posix_memalign(%zu, %zu) = EINVAL changed errno to %d", a, r->size, e);
            return false;
        }
        if (r->api == API_NEW_NT || r->api == API_NEW_AL_NT) {   /* no errno in C++ */
            if (!(allow & FZ_ENOMEM)) fz_fail("%s(%zu, align %zu) returned NULL", name, r->size, a);
            return false;
        }
        if (r->api == API_NEW || r->api == API_NEW_AL)
            fz_fail("%s(%zu, align %zu) returned NULL", name, r->size, a);
        if (!(e == ENOMEM && (allow & FZ_ENOMEM)) && !(e == EINVAL && (allow & FZ_EINVAL)))
            fz_fail("%s(n %zu, size %zu, align %zu) = NULL with errno %d%s (allowed:%s%s%s)", name,
                    r->n, r->size, a, e, e == FZ_CANARY ? " (not set)" : "",
                    allow & FZ_OK ? " success" : "", allow & FZ_ENOMEM ? " ENOMEM" : "",
                    allow & FZ_EINVAL ? " EINVAL" : "");
        return false;
    }
    if (!(allow & FZ_OK))
        fz_fail("%s(n %zu, size %zu, align %zu) = %p, want failure with %s", name, r->n, r->size, a, p,
                allow & FZ_EINVAL ? "EINVAL" : "ENOMEM");
    size_t usable;
    fz_check_ptr(name, p, total, eff, &usable);
    b->p = (uint8_t *)p;
    b->req = total;
    b->usable = usable;
    b->align = eff;
    b->filled = total;
    b->seed = 0;                      /* zero: what calloc must give */
    if (zero) blk_check(b, total > FZ_KEEP_MAX ? CHK_MINIMAL : CHK_SAMPLED, "calloc");
    if (total > FZ_KEEP_MAX) {        /* enormous and granted: write the ends, free */
        b->p[0] = 1;
        b->p[total - 1] = 2;
        free(p);
        b->p = NULL;
        return false;
    }
    b->seed = seed;
    pat_fill(b->p, 0, total, seed);
    atomic_fetch_add_explicit(&fz_fill_bytes, total, memory_order_relaxed);
    return true;
}

/* Free b (checked first); how picks the entry point. */
static void blk_free(fz_block_t *b, unsigned how) {
    blk_check(b, CHK_SAMPLED, "before free");
    void *p = b->p, *q = NULL;
    int arr = b->array ? 1 : 0;
    b->p = NULL;
    switch (how % 6) {
    case 0: free(p); break;
    case 1: A.free_sized(p, b->req); break;
    case 2:
        if (b->origin == ORIG_ALIGNED || b->origin == ORIG_NEW_ALIGNED) A.free_aligned_sized(p, b->align, b->req);
        else A.free_sized(p, b->req);
        break;
    case 3: q = realloc(p, 0); break;
    case 4: q = (how & 8) ? reallocarray(p, 0, 12) : reallocarray(p, 7, 0); break;
    case 5:
        if (b->origin == ORIG_NEW) {
            if (how & 8) A.op_del_sized[arr](p, b->req); else A.op_del[arr](p);
        } else if (b->origin == ORIG_NEW_ALIGNED) {
            if (how & 8) A.op_del_sized_al[arr](p, b->req, b->ualign); else A.op_del_al[arr](p, b->ualign);
        } else {
            free(p);
        }
        break;
    }
    if (q) {   /* realloc(p, 0) may return a minimum block (not glibc, not hakmem) */
        size_t u;
        fz_check_ptr("realloc(p, 0)", q, 0, 16, &u);
        free(q);
    }
}

/* realloc (api API_REALLOC_NULL) or reallocarray (API_REALLOCARRAY_NULL) of
 * the live block b.  Returns true if b holds a live block afterwards. */
static bool blk_realloc(fz_block_t *b, int api, size_t n, size_t size) {
    blk_check(b, CHK_SAMPLED, "before realloc");
    size_t total = size;
    int allow;
    bool ra = api == API_REALLOCARRAY_NULL;
    if (ra && __builtin_mul_overflow(n, size, &total)) { allow = FZ_ENOMEM; total = SIZE_MAX; }
    else allow = fz_expect(total, 16);
    errno = FZ_CANARY;
    uint8_t *q = ra ? reallocarray(b->p, n, size) : realloc(b->p, size);
    int e = errno;
    const char *name = ra ? "reallocarray" : "realloc";
    if (total == 0 && q == NULL) { b->p = NULL; return false; }  /* freed, as glibc */
    if (q == NULL) {
        if (!(allow & FZ_ENOMEM) || e != ENOMEM)
            fz_fail("%s(%p, n %zu, size %zu) = NULL with errno %d (allowed:%s%s)", name, (void *)b->p,
                    n, size, e, allow & FZ_OK ? " success" : "", allow & FZ_ENOMEM ? " ENOMEM" : "");
        blk_check(b, CHK_SAMPLED, "after a failed realloc");
        return true;
    }
    if (!(allow & FZ_OK))
        fz_fail("%s(%p, n %zu, size %zu) = %p, want ENOMEM", name, (void *)b->p, n, size, (void *)q);
    size_t usable, keep = min_sz(b->req, total);
    fz_check_ptr(name, q, total, 16, &usable);
    size_t off = pat_find(q, keep, b->seed, CHK_SAMPLED);
    if (off != SIZE_MAX)
        fz_fail("%s(%p size %zu -> %zu) = %p: byte at offset %zu is 0x%02x, want 0x%02x (kept %zu bytes)",
                name, (void *)b->p, b->req, total, (void *)q, off, q[off], pat_byte(b->seed, off), keep);
    if (total > FZ_KEEP_MAX) {        /* enormous and granted */
        q[total - 1] = 1;
        free(q);
        b->p = NULL;
        return false;
    }
    pat_fill(q, keep, total, b->seed);
    atomic_fetch_add_explicit(&fz_fill_bytes, total - keep, memory_order_relaxed);
    b->p = q;
    b->req = b->filled = total;
    b->usable = usable;
    b->align = b->ualign = 16;
    b->origin = ORIG_MALLOC;
    b->array = 0;
    return true;
}

/* -------------------------------------------------------------- helpers --
 * Two persistent threads, each with a queue.  Frees are queued (the main
 * thread goes on: the helper checks and frees the block meanwhile); allocs,
 * reallocs and burst allocs are calls (the main thread waits for the
 * reply). */
enum { HR_FREE, HR_ALLOC, HR_REALLOC, HR_BURST_ALLOC, HR_EXIT };
typedef struct fz_hreq_s {
    int kind;
    unsigned how;
    fz_block_t b;
    fz_areq_t a;
    uint64_t seed;
    size_t size, count;
    int key;                /* HR_EXIT: -1, or which fz_keys[] destructor runs */
} fz_hreq_t;

/* Work for a helper's exit: a pthread key destructor frees b (a block of
 * the main thread's), then allocates per a, reallocs and frees, and re-arms
 * itself for up to rounds of glibc's destructor rounds.  fz_keys[0] is
 * created before hakmem's own key (so its destructor runs before hakmem's
 * exit handler in each round), fz_keys[1] after (it runs after: the
 * allocations of a thread past hakmem's exit handler). */
typedef struct fz_exit_s {
    fz_block_t b;
    fz_areq_t a;
    uint64_t seed;
    unsigned rounds, round, how;
    int key;
    const char *name;
} fz_exit_t;
static pthread_key_t fz_keys[2];
/* TSan ends a thread's state in the last of glibc's 4 destructor rounds:
 * code running after that (hakmem's exit handler, re-armed by a late
 * allocation) crashes in TSan itself.  Under TSan the exit work runs in 2
 * rounds at most. */
#if defined(__SANITIZE_THREAD__)
#define FZ_EXIT_ROUNDS 2
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FZ_EXIT_ROUNDS 2
#endif
#endif
#ifndef FZ_EXIT_ROUNDS
#define FZ_EXIT_ROUNDS 4
#endif

typedef struct fz_helper_s {
    pthread_t tid;
    int id;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    unsigned head, tail;
    bool busy;
    fz_hreq_t q[FZ_QCAP];
    fz_block_t reply;       /* HR_ALLOC, HR_REALLOC */
    bool reply_live;
    size_t pending;         /* main thread's count of queued bytes */
    fz_exit_t exit_work;    /* HR_EXIT with a key */
} fz_helper_t;

static fz_helper_t fz_helpers[FZ_HELPERS];
static fz_block_t fz_burst[FZ_BURST_MAX];

static void fz_exit_dtor(void *arg) {
    fz_exit_t *w = arg;
    fz_thread = w->name;
    if (w->b.p) blk_free(&w->b, w->how);
    fz_block_t nb;
    if (blk_alloc(&nb, &w->a, w->seed + 2 * w->round) &&
        blk_realloc(&nb, API_REALLOC_NULL, 0, nb.req / 2 + 24))
        blk_free(&nb, w->how + w->round);
    if (++w->round < w->rounds) pthread_setspecific(fz_keys[w->key], w);
}

static void *fz_helper_main(void *arg) {
    fz_helper_t *h = arg;
    static const char *const names[FZ_HELPERS] = { "helper 0", "helper 1" };
    static const char *const exiting[FZ_HELPERS] = { "exiting helper 0", "exiting helper 1" };
    fz_thread = names[h->id];
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->head == h->tail) pthread_cond_wait(&h->work, &h->mu);
        fz_hreq_t r = h->q[h->head % FZ_QCAP];
        h->head++;
        h->busy = true;
        pthread_mutex_unlock(&h->mu);
        switch (r.kind) {
        case HR_FREE: blk_free(&r.b, r.how); break;
        case HR_ALLOC: h->reply_live = blk_alloc(&h->reply, &r.a, r.seed); break;
        case HR_REALLOC:
            h->reply = r.b;
            h->reply_live = blk_realloc(&h->reply, r.a.api, r.a.n, r.size);
            break;
        case HR_BURST_ALLOC:
            for (size_t i = 0; i < r.count; i++)
                if (!blk_alloc(&fz_burst[i], &r.a, r.seed + 2 * i))
                    fz_fail("burst %s(%zu) #%zu failed", fz_api_names[r.a.api], r.a.size, i);
            break;
        case HR_EXIT:
            if (r.key >= 0) {
                h->exit_work = (fz_exit_t){ .b = r.b, .a = r.a, .seed = r.seed, .rounds = (unsigned)r.count,
                                            .how = r.how, .key = r.key, .name = exiting[h->id] };
                pthread_setspecific(fz_keys[r.key], &h->exit_work);
            }
            break;
        }
        pthread_mutex_lock(&h->mu);
        h->busy = false;
        pthread_cond_broadcast(&h->done);
        if (r.kind == HR_EXIT) break;
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void h_start(fz_helper_t *h) {
    int e = pthread_create(&h->tid, NULL, fz_helper_main, h);
    if (e) fz_fail("pthread_create: error %d", e);
}
static void h_push(fz_helper_t *h, const fz_hreq_t *r) {
    pthread_mutex_lock(&h->mu);
    while (h->tail - h->head == FZ_QCAP) pthread_cond_wait(&h->done, &h->mu);
    h->q[h->tail % FZ_QCAP] = *r;
    h->tail++;
    pthread_cond_signal(&h->work);
    pthread_mutex_unlock(&h->mu);
}
static void h_wait(fz_helper_t *h) {
    pthread_mutex_lock(&h->mu);
    while (h->head != h->tail || h->busy) pthread_cond_wait(&h->done, &h->mu);
    pthread_mutex_unlock(&h->mu);
    h->pending = 0;
}
static void h_call(fz_helper_t *h, const fz_hreq_t *r) { h_push(h, r); h_wait(h); }
/* the helper exits (r: HR_EXIT, perhaps with exit work), a new one starts */
static void h_restart(fz_helper_t *h, const fz_hreq_t *r) {
    h_push(h, r);
    pthread_join(h->tid, NULL);
    h->pending = 0;
    h_start(h);
}
/* queue b for helper h to free */
static void h_free(fz_helper_t *h, const fz_block_t *b, unsigned how) {
    fz_hreq_t r = { .kind = HR_FREE, .how = how, .b = *b };
    h_push(h, &r);
    h->pending += b->req;
    if (h->pending > FZ_PENDING_MAX) h_wait(h);
}

/* ---------------------------------------------------------- interpreter -- */
typedef struct fz_reader_s { const uint8_t *p, *end; bool done; } fz_reader_t;
static fz_reader_t rd;
static uint8_t u8(void) {
    if (rd.p >= rd.end) { rd.done = true; return 0; }
    return *rd.p++;
}
static unsigned u16(void) { unsigned a = u8(); return (a << 8) | u8(); }

static fz_block_t slots[FZ_SLOTS];
static size_t fz_live_bytes;
static uint64_t fz_seq;
static unsigned fz_restarts;

static uint64_t fz_new_seed(void) {
    uint64_t x = ++fz_seq * 0x9e3779b97f4a7c15ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    return (x ^ (x >> 32)) | 1;      /* never 0: 0 is calloc's zero */
}

/* hakmem's size classes: 16..128 step 16, then 8 per power of two */
static size_t fz_class_size(unsigned c) {
    if (c < 8) return (size_t)(c + 1) * 16;
    unsigned k = 7 + (c - 8) / 8, j = (c - 8) % 8;
    return ((size_t)1 << k) + (size_t)(j + 1) * ((size_t)1 << (k - 3));
}

static const size_t fz_special_sizes[] = {
    4096, 8192, 16384, 65536 - 768, 65536, 128 * KiB, 256 * KiB, 512 * KiB, 1 * MiB,
    2 * MiB - 768, 2 * MiB, 2 * MiB + 4096, 4 * MiB - 768, 4 * MiB, 4 * MiB + 1, 3 * MiB,
};
#define NSPECIAL (sizeof fz_special_sizes / sizeof fz_special_sizes[0])
static const size_t fz_enormous[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, SIZE_MAX - 2 * MiB, SIZE_MAX / 2 + 1, PTRDIFF_MAX,
    PTRDIFF_MAX - 4095, (size_t)1 << 62, (size_t)1 << 48, (size_t)1 << 47, ((size_t)1 << 46) + 1,
    (size_t)1 << 46, ((size_t)1 << 46) - 4096, (size_t)1 << 44, (size_t)1 << 40, ((size_t)64 << 30) + 1,
};
#define NENORMOUS (sizeof fz_enormous / sizeof fz_enormous[0])

static size_t fz_size(void) {
    unsigned b = u8(), lo = b & 31;
    switch (b >> 5) {
    case 0: return lo;                                               /* 0..31 */
    case 1: return ((lo << 8) | u8()) % 2049;                        /* direct: 0..2048 */
    case 2: return (lo << 8) | u8();                                 /* small: 0..8191 */
    case 3: return 8192 + (size_t)((lo << 8) | u8()) * 7;            /* medium: 8..64 KiB */
    case 4: return 64 * KiB + ((((size_t)lo << 16) | u16()) % (2 * MiB - 64 * KiB + 1)); /* large */
    case 5: {                                                        /* near a boundary */
        unsigned v = u8();
        if (lo < 24) {
            size_t s = fz_class_size(v % 120) + (lo % 5);
            return s >= 2 ? s - 2 : s;
        }
        return fz_special_sizes[v % NSPECIAL] + lo - 28;
    }
    case 6: return 2 * MiB - 4096 + ((((size_t)lo << 16) | u16()) * 2) % (4 * MiB + 4096); /* huge */
    default: return fz_enormous[lo % NENORMOUS];
    }
}

static const size_t fz_special_aligns[] = {
    0, 2, 3, 4, 5, 6, 12, 20, 24, 33, 48, 100, 4097, 12288, 65535, 65537, MiB + 1, 3 * MiB,
    8 * MiB, (size_t)1 << 30, (size_t)1 << 40, SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2, SIZE_MAX,
};
#define NSPECIAL_ALIGN (sizeof fz_special_aligns / sizeof fz_special_aligns[0])
static size_t fz_align(void) {
    unsigned b = u8();
    if (b < 184) return (size_t)1 << (b % 23);                       /* 1..4 MiB */
    return fz_special_aligns[(b - 184) % NSPECIAL_ALIGN];
}

/* calloc / reallocarray: count and element size from a byte and a size */
static const size_t fz_overflow_pairs[][2] = {
    { SIZE_MAX, 2 }, { (size_t)1 << 32, (size_t)1 << 32 }, { SIZE_MAX / 2 + 1, 2 }, { 3, SIZE_MAX / 3 + 1 },
    { 1, SIZE_MAX }, { SIZE_MAX, 1 }, { SIZE_MAX, 0 }, { 0, SIZE_MAX }, { 65537, (size_t)1 << 48 },
    { (size_t)1 << 20, (size_t)1 << 27 }, { 16, PTRDIFF_MAX / 8 }, { 2, PTRDIFF_MAX / 2 + 1 },
    { 4096, (size_t)1 << 40 }, { 1, 0 }, { 0, 0 }, { 7, ((size_t)1 << 61) + 1 },
};
static void fz_count_size(size_t *n, size_t *size) {
    unsigned b = u8();
    size_t s = fz_size();
    if (b >= 240) {
        *n = fz_overflow_pairs[b - 240][0];
        *size = fz_overflow_pairs[b - 240][1];
        return;
    }
    *n = b & 31;
    *size = *n ? s / *n : s;
}

/* keep a run's memory bounded: requests that would pass the budgets shrink */
static size_t fz_budget(size_t size) {
    if (size > FZ_KEEP_MAX) return size;     /* enormous: never kept */
    if (fz_live_bytes + size > FZ_LIVE_MAX ||
        atomic_load_explicit(&fz_fill_bytes, memory_order_relaxed) + size > FZ_FILL_MAX)
        return size & 0x3fff;
    return size;
}

/* the block b is about to go into slot s: it must not overlap any other */
static void fz_overlap(const fz_block_t *b, int self, const char *what) {
    uintptr_t lo = (uintptr_t)b->p, hi = lo + (b->usable ? b->usable : 1);
    for (int i = 0; i < FZ_SLOTS; i++) {
        const fz_block_t *o = &slots[i];
        if (i == self || !o->p) continue;
        uintptr_t olo = (uintptr_t)o->p, ohi = olo + (o->usable ? o->usable : 1);
        if (lo < ohi && olo < hi)
            fz_fail("%s: %p (usable %zu) overlaps slot %d's live block %p (usable %zu)", what, (void *)b->p,
                    b->usable, i, (void *)o->p, o->usable);
    }
}

static void slot_put(int s, const fz_block_t *b, const char *what) {
    fz_overlap(b, s, what);
    slots[s] = *b;
    fz_live_bytes += b->req;
}
static void slot_free(int s, unsigned how) {
    if (!slots[s].p) return;
    fz_live_bytes -= slots[s].req;
    blk_free(&slots[s], how);
}
/* take the block out of slot s (the caller passes it on) */
static fz_block_t slot_take(int s) {
    fz_block_t b = slots[s];
    if (b.p) fz_live_bytes -= b.req;
    slots[s].p = NULL;
    return b;
}

static void op_alloc(int s, fz_areq_t *r) {
    slot_free(s, 0);
    if (r->api == API_CALLOC || r->api == API_REALLOCARRAY_NULL) {
        size_t total;
        if (!__builtin_mul_overflow(r->n, r->size, &total) && fz_budget(total) != total)
            r->size = fz_budget(total) / (r->n ? r->n : 1);
    } else {
        r->size = fz_budget(r->size);
    }
    fz_tr("%s slot %d n %zu size %zu align %zu%s", fz_api_names[r->api], s, r->n, r->size, r->align,
          r->array ? " []" : "");
    fz_block_t b;
    if (blk_alloc(&b, r, fz_new_seed())) slot_put(s, &b, fz_api_names[r->api]);
}

static void op_realloc(int s, int api, size_t n, size_t size) {
    fz_block_t *b = &slots[s];
    size_t total;
    if (!__builtin_mul_overflow(n, size, &total)) {
        size_t old = b->p ? b->req : 0, t = total;
        fz_live_bytes -= old;
        t = fz_budget(total);
        fz_live_bytes += old;
        if (t != total) { size = api == API_REALLOCARRAY_NULL && n ? t / n : t; }
    }
    fz_tr("%s slot %d (%p size %zu) n %zu size %zu", api == API_REALLOCARRAY_NULL ? "reallocarray" : "realloc",
          s, (void *)b->p, b->p ? b->req : 0, n, size);
    if (!b->p) {
        fz_areq_t r = { .api = api, .n = n, .size = size };
        fz_block_t nb;
        if (blk_alloc(&nb, &r, fz_new_seed())) slot_put(s, &nb, fz_api_names[api]);
        return;
    }
    fz_block_t nb = slot_take(s);
    if (blk_realloc(&nb, api, n, size)) slot_put(s, &nb, api == API_REALLOC_NULL ? "realloc" : "reallocarray");
}

static void op_chain(int s) {
    unsigned steps = (u8() & 15) + 1;
    for (unsigned i = 0; i < steps && !rd.done; i++) {
        unsigned v = u8(), m = v >> 6, x = v & 63;
        size_t old = slots[s].p ? slots[s].req : 64, nsz;
        switch (m) {
        case 0: nsz = old + old * (x + 1) / 16 + (x & 7); break;           /* grow up to 5x */
        case 1: nsz = old * x / 64; break;                                /* shrink */
        case 2: nsz = fz_class_size(x * 119 / 63) + (x & 1); break;       /* a class boundary */
        default: nsz = 2 * MiB + ((size_t)x - 32) * 64 * KiB; break;      /* around 2 MiB */
        }
        if (nsz > 8 * MiB) nsz %= 8 * MiB;
        op_realloc(s, API_REALLOC_NULL, 0, nsz);
    }
}

static void op_free(int s, unsigned how) {
    fz_tr("free slot %d (%p) how %u", s, (void *)slots[s].p, how);
    if (slots[s].p) { slot_free(s, how); return; }
    switch (how % 4) {                         /* the NULL forms */
    case 0: free(NULL); break;
    case 1: A.free_sized(NULL, how); break;
    case 2: A.free_aligned_sized(NULL, 64, how); break;
    case 3: A.op_del[how & 1](NULL); A.op_del_sized[how & 1](NULL, 0); break;
    }
}

static void op_usable(int s) {
    fz_block_t *b = &slots[s];
    if (!b->p) {
        size_t u = malloc_usable_size(NULL);
        if (u != 0) fz_fail("malloc_usable_size(NULL) = %zu", u);
        return;
    }
    size_t u = malloc_usable_size(b->p);
    fz_tr("usable slot %d (%p size %zu) = %zu", s, (void *)b->p, b->req, u);
    if (u != b->usable)
        fz_fail("malloc_usable_size(%p) = %zu, was %zu when allocated (size %zu)", (void *)b->p, u, b->usable, b->req);
    if (u > b->filled) {   /* the program may use all of it */
        blk_check(b, CHK_SAMPLED, "before writing the usable size");
        pat_fill(b->p, b->filled, u, b->seed);
        atomic_fetch_add_explicit(&fz_fill_bytes, u - b->filled, memory_order_relaxed);
        b->filled = u;
    }
}

static void op_check(int s) {
    fz_block_t *b = &slots[s];
    fz_tr("check slot %d (%p)", s, (void *)b->p);
    if (!b->p) return;
    size_t u;
    fz_check_ptr("check", b->p, b->req, b->align, &u);
    blk_check(b, CHK_FULL, "check");
}

static void check_all(const char *when) {
    for (int i = 0; i < FZ_SLOTS; i++)
        if (slots[i].p) blk_check(&slots[i], CHK_SAMPLED, when);
}

static void op_remote_free(int s, unsigned hh) {
    fz_helper_t *h = &fz_helpers[hh & 1];
    fz_tr("remote_free slot %d (%p) helper %u how %u", s, (void *)slots[s].p, hh & 1, hh >> 1);
    if (!slots[s].p) return;
    fz_block_t b = slot_take(s);
    blk_check(&b, CHK_SAMPLED, "before handing to a helper");
    h_free(h, &b, hh >> 1);
}

static void op_remote_alloc(int s, unsigned hk) {
    static const int apis[] = { API_MALLOC, API_CALLOC, API_MEMALIGN, API_POSIX_MEMALIGN,
                                API_REALLOC_NULL, API_NEW, API_ALIGNED_ALLOC, API_VALLOC };
    fz_helper_t *h = &fz_helpers[hk & 1];
    fz_areq_t a = { .api = apis[(hk >> 1) & 7], .n = 1 };
    a.align = fz_align();
    a.size = fz_budget(fz_size());
    if (a.api == API_NEW && fz_expect(a.size, 16) != FZ_OK) a.api = API_NEW_NT;
    slot_free(s, 0);
    fz_tr("remote_alloc slot %d helper %u %s size %zu align %zu", s, hk & 1, fz_api_names[a.api], a.size, a.align);
    fz_hreq_t r = { .kind = HR_ALLOC, .a = a, .seed = fz_new_seed() };
    h_call(h, &r);
    if (!h->reply_live) return;
    fz_block_t b = h->reply;
    blk_check(&b, CHK_SAMPLED, "a helper's new block");
    size_t u;
    fz_check_ptr("remote_alloc", b.p, b.req, b.align, &u);
    if (u != b.usable) fz_fail("malloc_usable_size(%p) = %zu here, %zu in the helper", (void *)b.p, u, b.usable);
    slot_put(s, &b, "remote_alloc");
}

static void op_remote_realloc(int s, unsigned hh, size_t size) {
    fz_helper_t *h = &fz_helpers[hh & 1];
    size_t old = slots[s].p ? slots[s].req : 0;
    fz_live_bytes -= old;
    size = fz_budget(size);
    fz_live_bytes += old;
    fz_tr("remote_realloc slot %d (%p size %zu) helper %u size %zu", s, (void *)slots[s].p, old, hh & 1, size);
    fz_hreq_t r = { .kind = HR_ALLOC, .a = { .api = API_REALLOC_NULL, .size = size }, .seed = fz_new_seed() };
    if (slots[s].p) {
        r.kind = HR_REALLOC;
        r.b = slot_take(s);
        r.size = size;
    }
    h_call(h, &r);
    if (!h->reply_live) return;
    fz_block_t b = h->reply;
    blk_check(&b, CHK_SAMPLED, "a helper's realloc");
    slot_put(s, &b, "remote_realloc");
}

static void fz_shuffle(unsigned *ix, unsigned n, uint64_t x) {
    for (unsigned i = n; i > 1; i--) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned j = (unsigned)((x >> 33) % i), t = ix[i - 1];
        ix[i - 1] = ix[j];
        ix[j] = t;
    }
}

/* up to 256 blocks of one size: one thread allocates, the same or others
 * free them in some order */
static void op_burst(void) {
    unsigned count = u8() + 1u, mode = u8();
    size_t size = fz_size();
    if (size > 32 * KiB) size &= 32 * KiB - 1;
    unsigned by = mode & 3, fby = (mode >> 2) & 3, order = (mode >> 4) & 3;
    static const int apis[] = { API_MALLOC, API_CALLOC, API_MEMALIGN, API_NEW };
    fz_areq_t a = { .api = apis[mode >> 6], .n = 1, .size = size, .align = 64 };
    fz_tr("burst %u x %s(size %zu%s) by %u freed by %u order %u", count, fz_api_names[a.api], size,
          a.api == API_MEMALIGN ? ", align 64" : "", by, fby, order);
    uint64_t seed = fz_new_seed();
    if (by == 1 || by == 2) {
        fz_hreq_t r = { .kind = HR_BURST_ALLOC, .a = a, .seed = seed, .count = count };
        h_call(&fz_helpers[by - 1], &r);
    } else {
        for (unsigned i = 0; i < count; i++)
            if (!blk_alloc(&fz_burst[i], &a, seed + 2 * i))
                fz_fail("burst %s(%zu) #%u failed", fz_api_names[a.api], size, i);
    }
    /* no two of them, nor any of them and a live block, overlap */
    unsigned ix[FZ_BURST_MAX];
    for (unsigned i = 0; i < count; i++) {
        ix[i] = i;
        fz_overlap(&fz_burst[i], -1, "burst");
        size_t u;
        fz_check_ptr("burst", fz_burst[i].p, fz_burst[i].req, fz_burst[i].align, &u);
    }
    for (unsigned gap = count / 2; gap > 0; gap /= 2)          /* shell sort by address */
        for (unsigned i = gap; i < count; i++)
            for (unsigned j = i; j >= gap && fz_burst[ix[j - gap]].p > fz_burst[ix[j]].p; j -= gap) {
                unsigned t = ix[j]; ix[j] = ix[j - gap]; ix[j - gap] = t;
            }
    for (unsigned i = 1; i < count; i++) {
        const fz_block_t *x = &fz_burst[ix[i - 1]], *y = &fz_burst[ix[i]];
        if (x->p + (x->usable ? x->usable : 1) > y->p)
            fz_fail("burst: %p (usable %zu) overlaps %p", (void *)x->p, x->usable, (void *)y->p);
    }
    /* the freeing order */
    for (unsigned i = 0; i < count; i++) ix[i] = i;
    if (order == 1) for (unsigned i = 0; i < count; i++) ix[i] = count - 1 - i;
    if (order == 2) { unsigned k = 0; for (unsigned i = 0; i < count; i += 2) ix[k++] = i;
                      for (unsigned i = 1; i < count; i += 2) ix[k++] = i; }
    if (order == 3) fz_shuffle(ix, count, seed ^ mode);
    for (unsigned i = 0; i < count; i++) {
        fz_block_t *b = &fz_burst[ix[i]];
        unsigned who = fby == 3 ? (i & 1) * 2 : fby;      /* 0 main, 1/2 a helper */
        if (who == 0) blk_free(b, i);
        else h_free(&fz_helpers[who - 1], b, i);
    }
}

static void op_query(unsigned q) {
    fz_tr("query %u", q % 5);
    switch (q % 5) {
    case 0:
        A.collect();
        check_all("after hakmem_collect");
        break;
    case 1:
        if (A.stats_get) {
            hakmem_stats_t st;
            if (A.stats_get(&st, sizeof st) != 0) fz_fail("hakmem_stats_get failed");
            if (A.stats_get(NULL, sizeof st) != -1) fz_fail("hakmem_stats_get(NULL) != -1");
        }
        break;
    case 2:
        if (A.mallinfo2) {
            struct mallinfo2 mi = A.mallinfo2();
            if (A.owns && mi.uordblks > mi.arena)
                fz_fail("mallinfo2: uordblks %zu > arena %zu", mi.uordblks, mi.arena);
        }
        break;
    case 3:
        A.trim(0);
        check_all("after malloc_trim");
        break;
    case 4:   /* let the helpers catch up, then purge with their frees done */
        for (int i = 0; i < FZ_HELPERS; i++) h_wait(&fz_helpers[i]);
        A.collect();
        check_all("after the helpers and hakmem_collect");
        break;
    }
}

static void fz_op(unsigned op) {
    int s;
    fz_areq_t r = { .n = 1 };
    switch (op) {
    case OP_MALLOC: s = u8() % FZ_SLOTS; r.api = API_MALLOC; r.size = fz_size(); op_alloc(s, &r); break;
    case OP_CALLOC:
        s = u8() % FZ_SLOTS; r.api = API_CALLOC; fz_count_size(&r.n, &r.size); op_alloc(s, &r); break;
    case OP_REALLOC: s = u8() % FZ_SLOTS; op_realloc(s, API_REALLOC_NULL, 0, fz_size()); break;
    case OP_REALLOCARRAY: {
        s = u8() % FZ_SLOTS;
        size_t n, size;
        fz_count_size(&n, &size);
        op_realloc(s, API_REALLOCARRAY_NULL, n, size);
        break;
    }
    case OP_POSIX_MEMALIGN: case OP_ALIGNED_ALLOC: case OP_MEMALIGN:
        s = u8() % FZ_SLOTS;
        r.api = op == OP_POSIX_MEMALIGN ? API_POSIX_MEMALIGN : op == OP_ALIGNED_ALLOC ? API_ALIGNED_ALLOC : API_MEMALIGN;
        r.align = fz_align();
        r.size = fz_size();
        op_alloc(s, &r);
        break;
    case OP_VALLOC: case OP_PVALLOC:
        s = u8() % FZ_SLOTS; r.api = op == OP_VALLOC ? API_VALLOC : API_PVALLOC; r.size = fz_size();
        op_alloc(s, &r);
        break;
    case OP_NEW: {
        s = u8() % FZ_SLOTS;
        unsigned k = u8(), ab = u8();
        r.size = fz_size();
        r.array = k & 1;
        bool aligned = k & 4, nothrow = k & 2;
        /* C++ alignments are powers of two; the table's last three are extreme */
        static const size_t extreme[] = { (size_t)1 << 30, (size_t)1 << 40, SIZE_MAX / 2 + 1 };
        r.align = ab < 230 ? (size_t)1 << (ab % 23) : extreme[(ab - 230) % 3];
        int allow = fz_expect(r.size, aligned ? r.align : 16);
        if (allow != FZ_OK) nothrow = true;    /* a throwing new must not fail here */
        r.api = aligned ? (nothrow ? API_NEW_AL_NT : API_NEW_AL) : (nothrow ? API_NEW_NT : API_NEW);
        op_alloc(s, &r);
        break;
    }
    case OP_FREE: s = u8() % FZ_SLOTS; op_free(s, u8()); break;
    case OP_USABLE: op_usable(u8() % FZ_SLOTS); break;
    case OP_CHECK: op_check(u8() % FZ_SLOTS); break;
    case OP_CHAIN: op_chain(u8() % FZ_SLOTS); break;
    case OP_REMOTE_FREE: s = u8() % FZ_SLOTS; op_remote_free(s, u8()); break;
    case OP_REMOTE_ALLOC: s = u8() % FZ_SLOTS; op_remote_alloc(s, u8()); break;
    case OP_REMOTE_REALLOC: {
        s = u8() % FZ_SLOTS;
        unsigned hh = u8();
        op_remote_realloc(s, hh, fz_size());
        break;
    }
    case OP_SYNC: {
        unsigned h = u8();
        fz_tr("sync %u", h & 3);
        for (int i = 0; i < FZ_HELPERS; i++)
            if ((h & 2) || (unsigned)i == (h & 1)) h_wait(&fz_helpers[i]);
        break;
    }
    case OP_RESTART: {
        unsigned hb = u8();
        fz_helper_t *h = &fz_helpers[hb & 1];
        fz_hreq_t r = { .kind = HR_EXIT, .key = -1 };
        /* with exit work: slot, work byte (bit 0 key, 1-2 rounds, 3-5 api, 6-7 how), align, size */
        if (hb & 2) {
            static const int apis[] = { API_MALLOC, API_CALLOC, API_MEMALIGN, API_POSIX_MEMALIGN,
                                        API_REALLOC_NULL, API_NEW, API_VALLOC, API_ALIGNED_ALLOC };
            s = u8() % FZ_SLOTS;
            unsigned w = u8();
            r.key = (int)(w & 1);
            r.count = ((w >> 1) & 3) % FZ_EXIT_ROUNDS + 1;
            r.how = w >> 6;
            r.a = (fz_areq_t){ .api = apis[(w >> 3) & 7], .n = 1 };
            r.a.align = fz_align();
            r.a.size = fz_budget(fz_size());
            if (r.a.api == API_NEW && fz_expect(r.a.size, 16) != FZ_OK) r.a.api = API_NEW_NT;
            r.seed = fz_new_seed();
            if (slots[s].p) {
                r.b = slot_take(s);
                blk_check(&r.b, CHK_SAMPLED, "before handing to an exiting helper");
            }
        }
        fz_tr("restart %u, exit work: key %d, %zu rounds, %s(size %zu, align %zu), frees %p", hb & 1, r.key,
              r.count, r.key >= 0 ? fz_api_names[r.a.api] : "-", r.a.size, r.a.align, (void *)r.b.p);
        if (fz_restarts++ < FZ_MAX_RESTARTS) {
            h_restart(h, &r);
        } else {
            if (r.b.p) h_free(h, &r.b, r.how);
            h_wait(h);
        }
        break;
    }
    case OP_BURST: op_burst(); break;
    case OP_QUERY: op_query(u8()); break;
    }
}

void fz_run(const uint8_t *data, size_t size) {
    rd.p = data;
    rd.end = data + size;
    rd.done = false;
    fz_input = data;
    fz_input_len = size;
    fz_seq = 0;
    fz_restarts = 0;
    atomic_store(&fz_fill_bytes, 0);
    atomic_store(&fz_op_index, 0);
    for (;;) {
        unsigned b = u8();
        if (rd.done) break;
        unsigned op = b % OP_COUNT;
        atomic_store(&fz_op_code, (int)op);
        fz_counts[op]++;
        fz_op(op);
        atomic_fetch_add(&fz_op_index, 1);
    }
    atomic_store(&fz_op_code, -1);
    for (int i = 0; i < FZ_SLOTS; i++) slot_free(i, 0);
    for (int i = 0; i < FZ_HELPERS; i++) h_wait(&fz_helpers[i]);
    if (fz_live_bytes != 0) fz_fail("model: %zu live bytes after cleanup", fz_live_bytes);
    fz_input = NULL;
}

void fz_init(void) {
    long ps = sysconf(_SC_PAGESIZE);
    fz_page = ps > 0 ? (size_t)ps : 4096;
    fz_resolve();
    /* one key before hakmem's (in the prefix builds nothing has called
     * hakmem yet), one after */
    if (pthread_key_create(&fz_keys[0], fz_exit_dtor) != 0) fz_fail("pthread_key_create failed");
    free(malloc(1));
    if (pthread_key_create(&fz_keys[1], fz_exit_dtor) != 0) fz_fail("pthread_key_create failed");
    for (int i = 0; i < FZ_HELPERS; i++) {
        fz_helper_t *h = &fz_helpers[i];
        h->id = i;
        pthread_mutex_init(&h->mu, NULL);
        pthread_cond_init(&h->work, NULL);
        pthread_cond_init(&h->done, NULL);
        h_start(h);
    }
}

int fz_hakmem_serves(void) {
    if (!A.owns) return 0;
    void *p = malloc(100);
    int r = p && A.owns(p);
    free(p);
    return r;
}

void fz_print_counts(void) {
    unsigned long total = 0;
    for (int i = 0; i < OP_COUNT; i++) total += fz_counts[i];
    fprintf(stderr, "fuzz: %lu operations:", total);
    for (int i = 0; i < OP_COUNT; i++) fprintf(stderr, " %s %lu", fz_op_names[i], fz_counts[i]);
    fprintf(stderr, "\n");
}
