/* hak_memcheck.c -- the hardened build's checked copies (make hardened;
 * docs/security.md, "The hardened build"): memcpy, memmove, memset,
 * mempcpy and the string copies strcpy, stpcpy, strncpy, strcat and
 * strncat check the bytes they are about to write against the block the
 * destination's first byte lies in, and report an overflow, an underflow
 * of the next block, or a write into a freed block, before writing.  The
 * idea is snmalloc's "checks" build, which exports a memcpy that checks
 * its destination.
 *
 * The check: the region map says whether the destination is hakmem's (one
 * load; a destination of the stack, globals, mmap or glibc's heap is not,
 * and is copied unchecked); the segment and the page give the slot, and
 * the trailer (hak_hardened.c) the block's size n.  [d, d + len) must lie
 * in [block, block + n).  When the trailer is no live block's at the
 * slot's start (an aligned block, whose pointer lies inside the slot), the
 * limit is the trailer itself.  A destination in hakmem's memory but in no
 * block (a segment's header, a page not in use, a slot never carved) is
 * reported too.  A public heap's blocks (hakmem_heap_malloc: no trailer)
 * are checked against their slot.  Only the destination is checked; copies gcc inlines in
 * the program (small constant sizes) are not seen.
 *
 * The other builds export none of these (this file is empty there).
 * hakmem's own copies go around them (hak_internal.h, hak_copy.c). */
#define HAK_MEMCHECK_EXPORTS 1   /* the real names here, not hak_raw_* */
#include "hak_hardened.h"

#if HAK_HARDENED_ENABLED
#include <stdint.h>

void *hak_raw_memcpy(void *d, const void *s, size_t n);    /* hak_copy.c */
void *hak_raw_memmove(void *d, const void *s, size_t n);
void *hak_raw_memset(void *d, int c, size_t n);

/* The slot a (an address in seg) lies in: true with its start and size
 * when a lies in a carved slot of a page in use (or in a huge block),
 * false when it lies in hakmem's memory outside every block. */
static bool hak_mc_slot(hak_segment_t *seg, const uint8_t *a, const uint8_t **block, size_t *slot) {
    if (seg->kind == HAK_PAGE_HUGE) {
        const hak_page_t *page = &seg->pages[0];
        *block = page->start;
        *slot = page->block_size;
        return a >= page->start && (size_t)(a - page->start) < page->block_size;
    }
    const hak_page_t *page = hak_page_of(seg, a);
    size_t bs = page->block_size;
    if (a < page->start || bs == 0) return false;
    /* the block's index by the page's magic (exact for offsets in a
     * segment: docs/design.md, "The carved-block test") */
    size_t start = (size_t)(((unsigned __int128)(size_t)(a - page->start) * page->div_magic) >> 64) * bs;
    /* a carved block: the quick test on line 1 of the page (0 for pages
     * with flags: then the owner's fields, as hak_block_in) */
    uint64_t limit = HAK_RELAXED(page->carved_limit);
    bool carved = limit ? start * page->div_magic < limit
                        : (page != &seg->pages[0] || !seg->first_page) && page->in_use &&
                          start < (size_t)HAK_RELAXED(page->capacity) * bs;
    *block = page->start + start;
    *slot = bs;
    return carved;
}

/* the program's bytes of the slot, [block, block + limit): its size for a
 * live block, 0 for a freed one, up to the trailer when the trailer is no
 * live block's at the slot's start (an aligned block, whose pointer lies
 * inside the slot; a slot not handed out yet) */
HAK_INLINE size_t hak_mc_limit(size_t n, size_t slot) {
    return n < HAK_HARDENED_UNKNOWN ? n : n == HAK_HARDENED_FREED ? 0 : slot - 8;
}

#define HAK_MC_S(k) ((k) == 1 ? "" : "s")

/* The live block a write that starts before it at d runs into or ends
 * just before (an underflow of it), or NULL: the slot of the write's last
 * byte when it starts after d, else the slot starting at d + len. */
static const uint8_t *hak_mc_next(const uint8_t *d, size_t len, size_t *n) {
    for (int i = 0; i < 2; i++) {
        const uint8_t *a = i == 0 ? d + len - 1 : d + len, *next;
        size_t next_slot;
        hak_segment_t *seg = hak_segment_of_checked(a);
        if (seg && hak_mc_slot(seg, a, &next, &next_slot) && next > d && (i == 0 || next == a)) {
            *n = hak_hardened_block_n(next, next_slot);
            return *n < HAK_HARDENED_UNKNOWN ? next : NULL;
        }
    }
    return NULL;
}

/* a report: "hakmem: memcpy(): write of 9 bytes at 0x... overflows by 1
 * byte the 8-byte block 0x...; aborting" (hak_fatal: SIGABRT) */
static HAK_COLD HAK_NOINLINE void hak_mc_report(const char *op, const uint8_t *d, size_t len, bool in_block,
                                                const uint8_t *block, size_t slot, size_t n) {
    char what[256];
    size_t off = (size_t)(d - block), limit = in_block ? hak_mc_limit(n, slot) : 0;
    if (in_block && n == HAK_HARDENED_FREED) {
        hak_format(what, sizeof what, "write of %zu byte%s at %p (offset %zu) into the freed block",
                   len, HAK_MC_S(len), d, off);
        hak_fatal(op, what, block);
    }
    if (in_block && off < limit) {   /* from the program's bytes on past them */
        size_t k = off + len - limit;
        if (n == HAK_HARDENED_UNKNOWN)
            hak_format(what, sizeof what, "write of %zu byte%s at %p runs %zu byte%s past the first %zu bytes "
                       "(the most a block there can hold) of the %zu-byte slot of", len, HAK_MC_S(len), d,
                       k, HAK_MC_S(k), limit, slot);
        else
            hak_format(what, sizeof what, "write of %zu byte%s at %p overflows by %zu byte%s the %zu-byte block",
                       len, HAK_MC_S(len), d, k, HAK_MC_S(k), n);
        hak_fatal(op, what, block);
    }
    /* it starts past the program's bytes: right at a live block's end (an
     * overflow), or before the next live block (an underflow of it) */
    size_t next_n;
    const uint8_t *next = in_block && n < HAK_HARDENED_UNKNOWN && off == n ? NULL : hak_mc_next(d, len, &next_n);
    if (next) {
        hak_format(what, sizeof what, "write of %zu byte%s at %p starts %zu byte%s before (underflow) the "
                   "%zu-byte block", len, HAK_MC_S(len), d, (size_t)(next - d), HAK_MC_S((size_t)(next - d)), next_n);
        hak_fatal(op, what, next);
    }
    if (!in_block) {
        hak_format(what, sizeof what, "write of %zu byte%s at %p lies in hakmem's memory outside every block, at",
                   len, HAK_MC_S(len), d);
        hak_fatal(op, what, d);
    }
    if (n == HAK_HARDENED_UNKNOWN)
        hak_format(what, sizeof what, "write of %zu byte%s at %p starts %zu byte%s past the first %zu bytes "
                   "(the most a block there can hold) of the %zu-byte slot of", len, HAK_MC_S(len), d,
                   off - limit, HAK_MC_S(off - limit), limit, slot);
    else
        hak_format(what, sizeof what, "write of %zu byte%s at %p starts %zu byte%s past the end of the %zu-byte block",
                   len, HAK_MC_S(len), d, off - n, HAK_MC_S(off - n), n);
    hak_fatal(op, what, block);
}

/* d lies in a unit the region map gives to hakmem: find its slot and
 * check [d, d + len) */
static HAK_NOINLINE void hak_mc_check_slow(const char *op, const uint8_t *d, size_t len) {
    hak_segment_t *seg = hak_segment_of_checked(d);
    if (seg == NULL || len == 0) return;
    const uint8_t *block;
    size_t slot;
    if (hak_unlikely(!hak_mc_slot(seg, d, &block, &slot))) hak_mc_report(op, d, len, false, block, slot, 0);
    size_t at = (size_t)(d - block);
    /* a public heap's blocks (hakmem_heap_malloc) have no trailer: the slot
     * is theirs, and what lies where a trailer would is stale (a freed
     * mark) or the program's */
    hak_heap_t *heap = __atomic_load_n(&seg->heap, __ATOMIC_RELAXED);
    size_t n = heap && __atomic_load_n(&heap->pub_magic, __ATOMIC_RELAXED) ? slot : hak_hardened_block_n(block, slot);
    size_t limit = hak_mc_limit(n, slot);
    if (hak_unlikely(at >= limit || len > limit - at)) hak_mc_report(op, d, len, true, block, slot, n);
}

/* the check: the quick one (hak_hardened.c: one load of the region map
 * for a destination that is not hakmem's; the page and the trailer for a
 * block of a page without flags); else the complete one above */
HAK_INLINE void hak_mc_check(const char *op, void *d, size_t len) {
    if (hak_unlikely(!hak_hardened_write_ok(d, len))) hak_mc_check_slow(op, (const uint8_t *)d, len);
}

HAK_EXPORT void *memcpy(void *d, const void *s, size_t n) {
    hak_mc_check("memcpy()", d, n);
    return hak_raw_memcpy(d, s, n);
}
HAK_EXPORT void *memmove(void *d, const void *s, size_t n) {
    hak_mc_check("memmove()", d, n);
    return hak_raw_memmove(d, s, n);
}
HAK_EXPORT void *memset(void *d, int c, size_t n) {
    hak_mc_check("memset()", d, n);
    return hak_raw_memset(d, c, n);
}
HAK_EXPORT void *mempcpy(void *d, const void *s, size_t n) {
    hak_mc_check("mempcpy()", d, n);
    return (uint8_t *)hak_raw_memcpy(d, s, n) + n;
}
/* the string copies: the bytes they write, measured first (glibc's strlen
 * and strnlen: not exported here) */
HAK_EXPORT char *strcpy(char *d, const char *s) {
    size_t k = strlen(s) + 1;
    hak_mc_check("strcpy()", d, k);
    return hak_raw_memcpy(d, s, k);
}
HAK_EXPORT char *stpcpy(char *d, const char *s) {
    size_t k = strlen(s);
    hak_mc_check("stpcpy()", d, k + 1);
    hak_raw_memcpy(d, s, k + 1);
    return d + k;
}
HAK_EXPORT char *strncpy(char *d, const char *s, size_t n) {
    size_t k = strnlen(s, n);
    hak_mc_check("strncpy()", d, n);   /* writes n bytes: the rest are NULs */
    hak_raw_memcpy(d, s, k);
    hak_raw_memset(d + k, 0, n - k);
    return d;
}
HAK_EXPORT char *strcat(char *d, const char *s) {
    size_t at = strlen(d), k = strlen(s) + 1;
    hak_mc_check("strcat()", d + at, k);
    hak_raw_memcpy(d + at, s, k);
    return d;
}
HAK_EXPORT char *strncat(char *d, const char *s, size_t n) {
    size_t at = strlen(d), k = strnlen(s, n);
    hak_mc_check("strncat()", d + at, k + 1);
    hak_raw_memcpy(d + at, s, k);
    d[at + k] = 0;
    return d;
}
#endif
