/* hak_alloc_plain.c -- the unsampled allocations that a size class alone
 * does not serve, shared by the entry points (hak_alloc.c) and the heap
 * profile's sampled path (hak_profile.c): calloc of a total size, and
 * aligned blocks.  Heaps layer: both may need the calling thread's heap
 * (hak_heap_for_thread) and go down to pages and huge blocks. */
#include "hak_internal.h"

/* calloc of total bytes, unsampled */
void *hak_calloc_total(size_t total) {
    if (total > HAK_LARGE_MAX) {
        hak_heap_t *heap = hak_tls.heap;
        if (heap == &hak_heap_empty && !hak_heap_for_thread()) { errno = ENOMEM; return NULL; }
        return hak_huge_alloc(total, HAK_MIN_ALIGN, true);   /* fresh mapping: already zero */
    }
    void *p = hak_malloc_inline(total);
    if (hak_likely(p != NULL)) memset(p, 0, total);
    return p;
}

/* The marked over-allocation, and huge blocks: alignments above 64 KiB. */
static HAK_NOINLINE void *hak_aligned_marked(size_t size, size_t align, bool zero) {
    /* (a thread past its exit handler owns no page to mark: a mapping of its own) */
    if (size + align <= HAK_LARGE_MAX && !hak_tls_exiting) {
        /* room for the aligned pointer and at least one byte behind it: for
         * size 0 the pointer must still lie inside the block, not at the
         * next block's start */
        void *p = hak_malloc_inline((size ? size : 1) + align - HAK_MIN_ALIGN);
        if (!p) return NULL;
        uint8_t *q = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
        if (q != p) {
            /* p's first word lies before q: it names q, the one pointer
             * free() accepts for this block (hak_free.c) */
            hak_page_t *page = hak_page_of(hak_segment_of(p), p);   /* our own page */
            *(uintptr_t *)p = hak_aligned_mark(q, page);
            hak_page_set_flags(page, page->flags | HAK_PAGE_HAS_ALIGNED);
        }
        if (zero) memset(q, 0, size);
        return q;
    }
    if (hak_tls.heap == &hak_heap_empty && !hak_heap_for_thread()) { errno = ENOMEM; return NULL; }
    return hak_huge_alloc(size, align, zero);
}

/* An ordinary block of n bytes, its first size bytes zeroed. */
static HAK_NOINLINE void *hak_aligned_zeroed(size_t n, size_t size) {
    void *p = hak_malloc_inline(n);
    if (p) memset(p, 0, size);
    return p;
}

/* Aligned blocks.  A block of size round_up(size, align) comes from a class
 * whose block size is a multiple of align (every power of two >= 16 that
 * divides such a size divides its class's size), and every block of a page
 * that is not huge is aligned to the largest power of two, up to 64 KiB,
 * that divides its block size (hak_segment_init_page): for align <= 64 KiB
 * that block is aligned -- an ordinary block, which free() takes on its fast
 * path.  For a larger align, take a block large enough to contain an aligned
 * one and mark the page, so free() knows to look for the block's start.
 * Unsampled: hak_malloc_aligned below is the sampled entry. */
void *hak_aligned_plain(size_t size, size_t align, bool zero) {
    if (align <= HAK_MIN_ALIGN) return zero ? hak_calloc_total(size) : hak_malloc_inline(size);
    if (size == 0 && !hak_tls_exiting) {   /* malloc(0)'s kind of block, aligned (hak_zero.c) */
        void *z = hak_zero_alloc(align);
        if (z) return z;
    }
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    size_t n = hak_round_up(size ? size : 1, align);   /* (size <= PTRDIFF_MAX: no overflow) */
    /* a large block's class holds its canary too: n + HAK_CANARY a multiple of align */
    if (hak_canary_need(n) != n) n = hak_round_up(n + HAK_CANARY, align) - HAK_CANARY;
    if (hak_likely(align <= ((size_t)1 << HAK_SLICE_SHIFT) && n <= HAK_LARGE_MAX)) {
        /* aligned by construction: hak_page_check (debug) checks the page
         * starts, tests/api_aligned.h every block */
        return zero ? hak_aligned_zeroed(n, size) : hak_malloc_inline(n);
    }
    return hak_aligned_marked(size, align, zero);
}
