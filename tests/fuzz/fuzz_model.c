/* fuzz_model.c -- the model of hakmem's fuzzer (fuzz_internal.h): what
 * each live block must hold, which outcomes a request may have, and the
 * checked allocation, free and realloc that every operation goes through.
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
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_internal.h"

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
FZ_FAST void pat_fill(uint8_t *p, size_t from, size_t to, uint64_t seed) {
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
const char *const fz_api_names[API_COUNT] = {
    "malloc", "calloc", "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
    "realloc(NULL)", "reallocarray(NULL)", "new", "new(nothrow)", "new(align)", "new(align, nothrow)"
};

size_t fz_page;
static const char fz_nothrow = 0;  /* std::nothrow stand-in */
static void *fz_sentinel = (void *)&fz_sentinel;

static bool pow2(size_t a) { return a != 0 && (a & (a - 1)) == 0; }
static size_t next_pow2(size_t a) {      /* a <= SIZE_MAX/2+1 */
    if (pow2(a)) return a;
    return (size_t)1 << (64 - __builtin_clzl((unsigned long)a));
}
static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* the outcomes allowed for a request of total bytes aligned to align */
int fz_expect(size_t total, size_t align) {
    if (total > PTRDIFF_MAX) return FZ_ENOMEM;
    if (total > FZ_KEEP_MAX || align > FZ_ALIGN_SAFE) return FZ_OK | FZ_ENOMEM;
    return FZ_OK;
}

void fz_check_ptr(const char *what, const void *p, size_t req, size_t align, size_t *usable) {
    if ((uintptr_t)p & (align - 1))
        fz_fail("%s: %p is not aligned to %zu", what, p, align);
    if (fz_api.owns && !fz_api.owns(p))
        fz_fail("%s: %p (size %zu) is not hakmem's (hakmem_owns() = 0)", what, p, req);
    size_t u = malloc_usable_size((void *)p);
    if (u < req)
        fz_fail("%s: malloc_usable_size(%p) = %zu < %zu asked", what, p, u, req);
    *usable = u;
}

void blk_check(const fz_block_t *b, int depth, const char *when) {
    size_t off = pat_find(b->p, b->filled, b->seed, depth);
    if (off != SIZE_MAX)
        fz_fail("%s: block %p (size %zu, filled %zu, align %zu, %s): byte at offset %zu is 0x%02x, "
                "want 0x%02x", when, (void *)b->p, b->req, b->filled, b->align,
                b->seed ? "pattern" : "zero", off, b->p[off], pat_byte(b->seed, off));
}

_Atomic size_t fz_fill_bytes;

/* Allocate per r into b.  Returns true if b now holds a live block (false:
 * an allowed failure, or an enormous block that was checked and freed). */
bool blk_alloc(fz_block_t *b, const fz_areq_t *r, uint64_t seed) {
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
    case API_NEW: p = fz_api.op_new[arr](r->size); break;
    case API_NEW_NT: p = fz_api.op_new_nt[arr](r->size, &fz_nothrow); break;
    case API_NEW_AL: p = fz_api.op_new_al[arr](r->size, a); break;
    case API_NEW_AL_NT: p = fz_api.op_new_al_nt[arr](r->size, a, &fz_nothrow); break;
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
    /* pvalloc(0): glibc gives a small block, hakmem a page -- then the
     * block's size is the page's, which free_sized must be given (the
     * hardened build checks it exactly) */
    if (r->api == API_PVALLOC && total == 0 && usable >= fz_page) total = fz_page;
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
void blk_free(fz_block_t *b, unsigned how) {
    blk_check(b, CHK_SAMPLED, "before free");
    void *p = b->p, *q = NULL;
    int arr = b->array ? 1 : 0;
    b->p = NULL;
    switch (how % 6) {
    case 0: free(p); break;
    case 1: fz_api.free_sized(p, b->req); break;
    case 2:
        if (b->origin == ORIG_ALIGNED || b->origin == ORIG_NEW_ALIGNED) fz_api.free_aligned_sized(p, b->align, b->req);
        else fz_api.free_sized(p, b->req);
        break;
    case 3: q = realloc(p, 0); break;
    case 4: q = (how & 8) ? reallocarray(p, 0, 12) : reallocarray(p, 7, 0); break;
    case 5:
        if (b->origin == ORIG_NEW) {
            if (how & 8) fz_api.op_del_sized[arr](p, b->req); else fz_api.op_del[arr](p);
        } else if (b->origin == ORIG_NEW_ALIGNED) {
            if (how & 8) fz_api.op_del_sized_al[arr](p, b->req, b->ualign); else fz_api.op_del_al[arr](p, b->ualign);
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
bool blk_realloc(fz_block_t *b, int api, size_t n, size_t size) {
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
