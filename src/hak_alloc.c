/* hak_alloc.c -- the standard allocation entry points.
 *
 * Each is defined once under its hakmem_ name; unless HAK_NO_OVERRIDE is set
 * the glibc name is an alias of the same code, so a preloaded or statically
 * linked hakmem serves malloc, free, calloc, realloc, reallocarray,
 * posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 * malloc_usable_size, free_sized and free_aligned_sized. */
#include "hak_hardened.h"
#include <stdlib.h>

#ifdef HAK_NO_OVERRIDE
#define HAK_ALIAS(std, ours)
#else
#define HAK_ALIAS(std, ours) extern __typeof__(ours) std __attribute__((alias(#ours), visibility("default")));
#endif

/* The sampling hook: HAK_SAMPLED (hak_internal.h).  Every entry point
 * goes through the hardened layer in the hardened build (hak_hardened.h). */
HAK_PROF_ENTRY
HAK_EXPORT void *hakmem_malloc(size_t size) {
    if (HAK_HARDENED_ENABLED) return hak_hardened_malloc(size, HAK_HARDENED_BY_MALLOC);
    return hak_malloc_sampled(size);
}
HAK_EXPORT void hakmem_free(void *p) {
    if (HAK_HARDENED_ENABLED) hak_hardened_free(p, "free()", false, 0, false);
    else hak_free_inline(p);
}

HAK_PROF_ENTRY
HAK_EXPORT void *hakmem_calloc(size_t n, size_t size) {
    size_t total;
    if (hak_unlikely(__builtin_mul_overflow(n, size, &total))) { errno = ENOMEM; return NULL; }
    if (HAK_HARDENED_ENABLED) return hak_hardened_calloc(total);
    if (HAK_SAMPLED(total)) return hak_profile_malloc(total, HAK_MIN_ALIGN, true);
    return hak_calloc_total(total);
}

/* realloc's move: a new block, the copy, the old block's free */
static HAK_PROF_ENTRY void *hak_realloc_move(void *p, size_t size, size_t usable) {
    void *q = hak_malloc_sampled(size);
    if (!q) return NULL;
    memcpy(q, p, size < usable ? size : usable);
    hak_tls_moving = true;     /* the block left its class: its emptied large page is not kept */
    hak_free_inline(p);
    hak_tls_moving = false;
    return q;
}

/* Resize p.  Keeps the block when the new size fits and wastes at most half
 * of it; huge blocks move pages with mremap; otherwise allocate, copy, free.
 * The new size is sampled for heap profiles as malloc's is when realloc takes
 * a new block or resizes a huge one, and the growth when it grows a large
 * block in place; a block kept in place is not (nothing is allocated; a
 * sampled block kept keeps its sample, with the new size).  A
 * sampled block (HAK_PAGE_SAMPLED) that moves leaves the profile with its
 * free; the new block is sampled, or not, as any. */
HAK_PROF_ENTRY void *hak_realloc(void *p, size_t size) {
    if (HAK_HARDENED_ENABLED) return hak_hardened_realloc(p, size);
    if (p == NULL) return hak_malloc_sampled(size);
    if (size == 0) { hak_free_inline(p); return NULL; }   /* as glibc */
    /* The common case first, with a remote free's quick check (a live block
     * at the start of a carved block, no aligned, huge or sampled blocks on
     * its page): kept in place or moved.  A large block that grows may grow
     * in place: the complete path below. */
    hak_page_t *page = hak_quick_page(p);
    if (hak_likely(page != NULL) && (size <= page->block_size || page->kind != HAK_PAGE_LARGE)) {
        size_t usable = page->block_size;
        if (size <= usable && size >= usable / 2) return p;
        return hak_realloc_move(p, size, usable);
    }
    hak_segment_t *seg = hak_segment_of_checked(p);
    if (hak_unlikely(!seg)) {
        /* a block the region map does not know moves: malloc(0)'s
         * (nothing to copy), glibc's (to hakmem), a guarded one unless it
         * keeps at least half of its size (hak_guard_resize: its end stays
         * at the guard page, so it cannot grow); the complete usable-size
         * check and free tell which it is and report anything else */
        if (hak_guard_resize(p, size)) return p;
        size_t old = hak_usable_op(p, "realloc()");
        void *q = hak_malloc_sampled(size);
        if (!q) return NULL;
        memcpy(q, p, old < size ? old : size);
        hak_free_inline(p);
        return q;
    }
    uint8_t *block = (uint8_t *)hak_block_in(seg, p, "realloc()", &page);
    if (hak_block_is_free(seg, page, (hak_block_t *)block, "realloc()")) hak_fatal("realloc()", "pointer already freed", p);
    if (hak_page_has_canary(page)) hak_large_check(page, block, "realloc()");
    size_t usable, room;   /* what it holds, what it could hold */
    if (page->flags & HAK_PAGE_IS_HUGE) {
        /* (p is the block's start: hak_block_in) its usable size, and the
         * rest of its mapping: a size that fits there stays in place, with
         * the size recorded; a larger one moves pages (hak_huge_realloc) */
        usable = page->block_size;
        room = page->area;
        if (size > HAK_LARGE_MAX || hak_realloc_keeps(size, usable, room)) {
            hak_profile_free(p);   /* sampled again below, as any resize of a huge block */
            void *q = hak_huge_realloc(seg, p, size);
            if (q) {
                if (HAK_SAMPLED(size)) hak_profile_resized(q, size);
                return q;
            }
            if (size > ((size_t)1 << 46)) return NULL;   /* errno set */
        }
        return hak_realloc_move(p, size, usable);
    }
    usable = hak_block_usable(page, block, p);
    room = hak_block_room(page, block, p);
    if (hak_realloc_keeps(size, usable, room)) {
        if (hak_unlikely(page->flags & HAK_PAGE_SAMPLED)) hak_profile_resize(p, size);
        hak_block_resize(page, block, p, size);
        return p;
    }
    /* the owner test first: another thread's page's used and flags are not ours to read */
    size_t need = hak_canary_need(size);
    if (size > room && size <= HAK_LARGE_MAX && seg->heap == hak_tls.heap && page->kind == HAK_PAGE_LARGE &&
        (page->flags & (uint8_t)~HAK_PAGE_SAMPLED) == 0 && block == page->start && page->used == 1 &&
        hak_class_kind(hak_size_class(need)) == HAK_PAGE_LARGE && hak_size_class(need) != page->class_idx) {
        bool sampled = page->flags & HAK_PAGE_SAMPLED;
        if (hak_page_reclass(seg->heap, page, hak_size_class(need))) {   /* grow in place */
            hak_block_resize(page, block, p, size);
            /* the bytes beyond the old block count as allocated: a block
             * grown by steps is then sampled as one allocated at its size */
            bool due = HAK_SAMPLED(size - usable);
            if (sampled) hak_profile_resize(p, size);
            if (hak_unlikely(due) && hak_profile_grown(p, size, sampled)) sampled = true;
            if (sampled) hak_page_sampled_again(seg->heap, page);   /* (reclass cleared the flag) */
            return p;
        }
    }
    return hak_realloc_move(p, size, usable);
}
HAK_PROF_ENTRY
HAK_EXPORT void *hakmem_realloc(void *p, size_t size) { return hak_realloc(p, size); }

HAK_PROF_ENTRY HAK_EXPORT void *hakmem_reallocarray(void *p, size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) { errno = ENOMEM; return NULL; }
    return hak_realloc(p, total);
}

/* The aligned allocations, sampled for heap profiles as malloc is. */
HAK_PROF_ENTRY void *hak_malloc_aligned(size_t size, size_t align, bool zero) {
    if (HAK_HARDENED_ENABLED) return hak_hardened_aligned(size, align, zero, HAK_HARDENED_BY_MALLOC);
    if (size <= PTRDIFF_MAX && HAK_SAMPLED(size)) return hak_profile_malloc(size, align, zero);
    return hak_aligned_plain(size, align, zero);
}

static bool hak_pow2(size_t a) { return a != 0 && (a & (a - 1)) == 0; }

/* A bad alignment: EINVAL, errno untouched.  No memory: ENOMEM, and errno
 * ENOMEM too, as glibc's (its tst-malloc-thread-fail reads errno after a
 * failed posix_memalign). */
HAK_PROF_ENTRY HAK_EXPORT int hakmem_posix_memalign(void **out, size_t align, size_t size) {
    if (!hak_pow2(align) || align % sizeof(void *) != 0) return EINVAL;
    void *p = hak_malloc_aligned(size, align, false);
    if (!p) { errno = ENOMEM; return ENOMEM; }
    *out = p;
    return 0;
}

/* As glibc 2.36, where aligned_alloc is memalign (glibc 2.38 made it
 * refuse an alignment that is not a power of two). */
HAK_PROF_ENTRY HAK_EXPORT void *hakmem_aligned_alloc(size_t align, size_t size) { return hakmem_memalign(align, size); }

/* As glibc: an alignment up to 16 is malloc's, one that is not a power of
 * two is rounded up to the next (a drop-in replacement must not fail where
 * glibc succeeds), and one above the largest power of two of size_t fails
 * with EINVAL.  posix_memalign keeps its own rule (EINVAL). */
HAK_PROF_ENTRY HAK_EXPORT void *hakmem_memalign(size_t align, size_t size) {
    if (align > SIZE_MAX / 2 + 1) { errno = EINVAL; return NULL; }
    if (align > HAK_MIN_ALIGN && !hak_pow2(align))
        align = (size_t)1 << (sizeof(unsigned long) * 8 - (size_t)__builtin_clzl((unsigned long)align));
    return hak_malloc_aligned(size, align, false);
}

HAK_PROF_ENTRY HAK_EXPORT void *hakmem_valloc(size_t size) { return hak_malloc_aligned(size, hak_os_page_size(), false); }

HAK_PROF_ENTRY HAK_EXPORT void *hakmem_pvalloc(size_t size) {
    size_t ps = hak_os_page_size();
    if (size > SIZE_MAX - ps) { errno = ENOMEM; return NULL; }
    size_t rounded = size == 0 ? ps : (size + ps - 1) & ~(ps - 1);
    return hak_malloc_aligned(rounded, ps, false);
}

HAK_EXPORT size_t hakmem_usable_size(const void *p) {
    if (HAK_HARDENED_ENABLED) return hak_hardened_usable(p);
    return hak_usable_size(p);
}

/* C23: the size (and alignment) must be what the block was allocated with;
 * a size larger than the block can hold is a misuse hakmem reports. */
HAK_EXPORT void hakmem_free_sized(void *p, size_t size) {
    if (HAK_HARDENED_ENABLED) { hak_hardened_free(p, "free_sized()", true, size, false); return; }
    if (HAK_DEBUG_ENABLED && p && size > hak_usable_size(p)) hak_fatal("free_sized()", "size larger than the block", p);
    hak_free_inline(p);
}
HAK_EXPORT void hakmem_free_aligned_sized(void *p, size_t align, size_t size) {
    if (HAK_HARDENED_ENABLED) {
        if (align != 0 && ((uintptr_t)p & (align - 1)) != 0)
            hak_fatal("free_aligned_sized()", "alignment does not match the block", p);
        hak_hardened_free(p, "free_aligned_sized()", true, size, false);
        return;
    }
    if (HAK_DEBUG_ENABLED && p && (((uintptr_t)p & (align - 1)) != 0 || size > hak_usable_size(p)))
        hak_fatal("free_aligned_sized()", "alignment or size does not match the block", p);
    hak_free_inline(p);
}

HAK_EXPORT int hakmem_owns(const void *p) {
    return hak_segment_of_checked(p) != NULL || hak_zero_owns(p) || hak_guard_owns(p);
}
HAK_EXPORT const char *hakmem_version(void) { return HAKMEM_VERSION_STRING; }

HAK_ALIAS(malloc, hakmem_malloc)
HAK_ALIAS(free, hakmem_free)
HAK_ALIAS(calloc, hakmem_calloc)
HAK_ALIAS(realloc, hakmem_realloc)
HAK_ALIAS(reallocarray, hakmem_reallocarray)
HAK_ALIAS(posix_memalign, hakmem_posix_memalign)
HAK_ALIAS(aligned_alloc, hakmem_aligned_alloc)
HAK_ALIAS(memalign, hakmem_memalign)
HAK_ALIAS(valloc, hakmem_valloc)
HAK_ALIAS(pvalloc, hakmem_pvalloc)
HAK_ALIAS(malloc_usable_size, hakmem_usable_size)
HAK_ALIAS(free_sized, hakmem_free_sized)
HAK_ALIAS(free_aligned_sized, hakmem_free_aligned_sized)
