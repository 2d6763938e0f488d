/* hak_page.c -- page queues and the slow paths of malloc and free.
 *
 * The fast paths (hak_internal.h) only pop page->free and push
 * page->local_free.  Everything else lands here: refilling a class's current
 * page, moving pages between the class queues and the full queue, remote
 * frees, delayed frees into full pages, aligned blocks, and misuse checks. */
#include "hak_internal.h"

/* ---- queues ---- */

static hak_page_queue_t *hak_queue_of(hak_heap_t *heap, hak_page_t *page) {
    return (page->flags & HAK_PAGE_IN_FULL) ? &heap->full : &heap->queues[page->class_idx];
}

void hak_queue_set_direct(hak_heap_t *heap, unsigned cls) {
    size_t hi_size = hak_class_size(cls);
    if (hi_size > HAK_DIRECT_MAX) return;
    size_t lo = cls == 0 ? 0 : (hak_class_size(cls - 1) >> 4) + 1, hi = hi_size >> 4;
    hak_page_t *page = heap->queues[cls].first ? heap->queues[cls].first : &hak_page_empty;
    for (size_t i = lo; i <= hi; i++) heap->direct[i] = page;
}

void hak_queue_remove(hak_heap_t *heap, hak_page_t *page) {
    hak_page_queue_t *q = hak_queue_of(heap, page);
    bool was_first = q->first == page;
    if (page->prev) page->prev->next = page->next; else q->first = page->next;
    if (page->next) page->next->prev = page->prev; else q->last = page->prev;
    page->next = page->prev = NULL;
    if (was_first && !(page->flags & HAK_PAGE_IN_FULL)) hak_queue_set_direct(heap, page->class_idx);
}

static void hak_queue_push(hak_heap_t *heap, hak_page_t *page, bool front) {
    hak_page_queue_t *q = hak_queue_of(heap, page);
    if (front || !q->first) {
        page->prev = NULL;
        page->next = q->first;
        if (q->first) q->first->prev = page; else q->last = page;
        q->first = page;
        if (!(page->flags & HAK_PAGE_IN_FULL)) hak_queue_set_direct(heap, page->class_idx);
    } else {
        page->next = NULL;
        page->prev = q->last;
        q->last->next = page;
        q->last = page;
    }
}

void hak_queue_push_back(hak_heap_t *heap, hak_page_t *page) { hak_queue_push(heap, page, false); }

/* ---- consistency (debug build) ---- */

void hak_page_check(const hak_page_t *page) {
    if (!HAK_DEBUG_ENABLED) return;
    size_t n = 0;
    const hak_block_t *lists[2] = { page->free, page->local_free };
    for (int l = 0; l < 2; l++) {
        for (const hak_block_t *b = lists[l]; b; b = b->next) {
            size_t off = (uintptr_t)b - (uintptr_t)page->start;
            if (off >= (size_t)page->capacity * page->block_size || off % page->block_size != 0)
                hak_fatal("consistency check", "free list holds a foreign block", b);
            if (++n > page->capacity) hak_fatal("consistency check", "free list cycle in page", page);
        }
    }
    if (n + page->used != page->capacity)
        hak_fatal("consistency check", "used + free != capacity in page", page);
    if (page->capacity > page->reserved) hak_fatal("consistency check", "capacity > reserved in page", page);
    /* the fast free's limits (hak_types.h): small pages on a 64 KiB boundary */
    hak_limits_t l = hak_page_limits(page);
    if (page->carved_limit != l.carved || page->local_limit != l.local || page->wide_limit != l.wide ||
        page->local_magic != page->div_magic)
        hak_fatal("consistency check", "free-check limits out of date in page", page);
    if (page->kind == HAK_PAGE_SMALL && ((uintptr_t)page->start & 0xffff) != 0)
        hak_fatal("consistency check", "small page not on a 64 KiB boundary", page);
}

/* ---- collecting remote frees ---- */

/* Move remote frees (xthread_free) onto local_free, keeping the NOTIFY bit,
 * and make local_free the allocation list when free is empty. */
void hak_page_free_collect(hak_page_t *page) {
    uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
    if (tf & ~HAK_TF_NOTIFY) {
        while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, tf & HAK_TF_NOTIFY,
                                                      memory_order_acquire, memory_order_relaxed)) {}
        hak_block_t *list = (hak_block_t *)(tf & ~HAK_TF_NOTIFY), *tail = list;
        uint32_t n = 1;
        while (tail->next) { tail = tail->next; n++; }
        tail->next = page->local_free;
        page->local_free = list;
        page->used -= n;
    }
    if (!page->free) {
        page->free = page->local_free;
        page->local_free = NULL;
    }
}

/* Carve fresh blocks (about 4 KiB worth) from the never-used tail. */
static void hak_page_extend(hak_page_t *page) {
    size_t bsize = page->block_size;
    uint32_t n = page->reserved - page->capacity;
    uint32_t step = bsize >= 1024 ? 4 : (uint32_t)(4096 / bsize);
    if (n > step) n = step;
    uint8_t *first = page->start + (size_t)page->capacity * bsize;
    for (uint32_t i = 0; i + 1 < n; i++) ((hak_block_t *)(first + i * bsize))->next = (hak_block_t *)(first + (i + 1) * bsize);
    ((hak_block_t *)(first + (size_t)(n - 1) * bsize))->next = page->free;
    page->free = (hak_block_t *)first;
    HAK_SET_RELAXED(page->capacity, page->capacity + n);
    hak_page_update_limit(page);
}

/* A page with nothing to hand out moves to heap->full, asking remote freers
 * to notify the heap.  Fails if a remote free slipped in first. */
static bool hak_page_to_full(hak_heap_t *heap, hak_page_t *page) {
    uintptr_t expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&page->xthread_free, &expected, HAK_TF_NOTIFY,
                                                 memory_order_acq_rel, memory_order_relaxed))
        return false;
    hak_queue_remove(heap, page);
    hak_page_set_flags(page, page->flags | HAK_PAGE_IN_FULL);
    hak_queue_push(heap, page, true);
    return true;
}

void hak_page_unfull(hak_heap_t *heap, hak_page_t *page) {
    uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, tf & ~HAK_TF_NOTIFY,
                                                  memory_order_acq_rel, memory_order_relaxed)) {}
    hak_queue_remove(heap, page);
    hak_page_set_flags(page, page->flags & (uint8_t)~HAK_PAGE_IN_FULL);
    hak_queue_push(heap, page, false);
}

/* A page whose blocks all came back.  A small page (64 KiB) stays if it is
 * its class's only page (no ping-pong of page setup for a block that is
 * allocated and freed in a loop); anything else gives its slot back to the
 * segment, where the purge delay and budget apply -- a retained empty large
 * page would hold up to 4 MiB that nothing purges. */
void hak_page_retire(hak_page_t *page) {
    hak_heap_t *heap = hak_segment_of(page)->heap;
    hak_page_queue_t *q = &heap->queues[page->class_idx];
    if (!(page->flags & HAK_PAGE_IN_FULL) && page->kind == HAK_PAGE_SMALL &&
        q->first == page && page->next == NULL) return;
    hak_queue_remove(heap, page);
    hak_segment_page_free(heap, page);
}

/* ---- malloc slow path ---- */

static hak_page_t *hak_find_page(hak_heap_t *heap, unsigned cls) {
    hak_heap_process_delayed(heap);
    hak_page_queue_t *q = &heap->queues[cls];
    /* Reuse freed blocks of any page before carving fresh memory from one:
     * the carved (touched) memory then follows the class's real peak. */
    hak_page_t *page = q->first, *extendable = NULL;
    while (page) {
        hak_page_t *next = page->next;
        hak_page_free_collect(page);
        if (page->free) break;
        if (page->capacity < page->reserved) {
            if (!extendable) extendable = page;
        } else if (!hak_page_to_full(heap, page)) {
            hak_page_free_collect(page);
            if (page->free) break;
        }
        page = next;
    }
    if (!page && extendable) {
        page = extendable;
        hak_page_extend(page);
    }
    if (page) {
        if (q->first != page) { hak_queue_remove(heap, page); hak_queue_push(heap, page, true); }
    } else {
        hak_segment_purge_due(heap, false);
        page = hak_segment_page_alloc(heap, cls);
        if (!page) return NULL;
        hak_queue_push(heap, page, true);
        hak_page_extend(page);
        hak_stat_inc(heap->st_refills[cls]);
    }
    hak_page_check(page);
    return page;
}

void *hak_malloc_slow(size_t size, hak_heap_t *heap) {
    if (hak_unlikely(heap == &hak_heap_empty)) {
        heap = hak_heap_for_thread();
        if (!heap) { errno = ENOMEM; return NULL; }
    }
    if (size > HAK_LARGE_MAX) {
        hak_stat_inc(heap->st_slow);
        if (HAK_STATS_FULL_ENABLED) hak_stat_inc(heap->st_allocs[HAK_CLASS_COUNT]);
        return hak_huge_alloc(size, HAK_MIN_ALIGN, false);
    }
    unsigned cls = hak_size_class(size);
    hak_page_t *page = heap->queues[cls].first;
    if (page && !page->free) {
        /* The common refill: this thread's own frees become the allocation
         * list, when no remote or delayed frees wait to be collected. */
        if (page->local_free && atomic_load_explicit(&page->xthread_free, memory_order_relaxed) == 0 &&
            atomic_load_explicit(&heap->xdelayed, memory_order_relaxed) == NULL) {
            page->free = page->local_free;
            page->local_free = NULL;
        } else {
            page = NULL;
        }
    }
    if (!page) {
        hak_stat_inc(heap->st_slow);
        page = hak_find_page(heap, cls);
        if (!page) { errno = ENOMEM; return NULL; }
    }
    hak_block_t *b = page->free;
    page->free = b->next;
    b->key = 0;
    page->used++;
    if (HAK_STATS_FULL_ENABLED) hak_stat_inc(heap->st_allocs[cls]);
    return b;
}

/* ---- free slow path ---- */

void *hak_page_block_start(const hak_page_t *page, const void *p) {
    size_t off = (uintptr_t)p - (uintptr_t)page->start;
    return page->start + (off / page->block_size) * page->block_size;
}

/* Local free of a block known to be valid; handles full and empty pages. */
static void hak_free_local(hak_heap_t *heap, hak_page_t *page, hak_block_t *b) {
    b->key = (uintptr_t)page;
    b->next = page->local_free;
    page->local_free = b;
    page->used--;
    if (page->flags & HAK_PAGE_IN_FULL) hak_page_unfull(heap, page);
    if (page->used == 0) hak_page_retire(page);
}

/* Remote free: push onto the page's lock-free list, or -- when the owner
 * marked the page full -- clear the mark and hand the block to the owning
 * heap's delayed list so the owner sees the page again.  The heap pointer is
 * read before the push: the block is still counted as used, so the segment
 * cannot go away until the owner has seen it, and heaps are never freed. */
static HAK_NOINLINE void hak_free_remote(hak_segment_t *seg, hak_page_t *page, hak_block_t *b,
                                         unsigned retries) {
    hak_heap_t *heap = seg->heap;
    unsigned cls = page->class_idx;    /* read before the push: after it the page may be gone */
    b->key = (uintptr_t)page;
    uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed), desired;
    bool notify;
    for (;;) {
        notify = (tf & HAK_TF_NOTIFY) != 0;
        if (notify) desired = tf & ~HAK_TF_NOTIFY;
        else { b->next = (hak_block_t *)tf; desired = (uintptr_t)b; }
        if (atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, desired,
                                                  memory_order_release, memory_order_relaxed)) break;
        retries++;
    }
    if (notify) {
        hak_block_t *head = atomic_load_explicit(&heap->xdelayed, memory_order_relaxed);
        do { b->next = head; } while (!atomic_compare_exchange_weak_explicit(&heap->xdelayed, &head, b,
                                                    memory_order_release, memory_order_relaxed));
    }
    /* Counted by the freeing thread in its own heap: no shared cache line, no
     * lock prefix.  A thread that only frees (a consumer) gets a heap on its
     * first remote free, as if it had allocated -- but not while it exits:
     * a heap taken after its destructor ran would never be abandoned. */
    hak_heap_t *self = hak_tls_heap;
    if (cls >= HAK_CLASS_COUNT) return;
    if (hak_unlikely(self == &hak_heap_empty)) {
        if (hak_tls_exiting || !(self = hak_heap_for_thread())) return;
    }
    hak_stat_inc(self->st_remote[cls]);
    if (retries)
        atomic_store_explicit(&self->st_cas_retries,
            atomic_load_explicit(&self->st_cas_retries, memory_order_relaxed) + retries, memory_order_relaxed);
}

void hak_heap_process_delayed(hak_heap_t *heap) {
    if (!atomic_load_explicit(&heap->xdelayed, memory_order_relaxed)) return;
    hak_block_t *b = atomic_exchange_explicit(&heap->xdelayed, NULL, memory_order_acquire);
    while (b) {
        hak_block_t *next = b->next;
        hak_segment_t *seg = hak_segment_of(b);
        hak_free_local(heap, hak_page_of(seg, b), b);
        b = next;
    }
}

/* Validate p, in hakmem's segment seg, for operation op and return its
 * block's start (and page).  Reports misuse and aborts: a pointer inside a
 * block, one in a free page slot, one past the carved blocks.  (A pointer
 * outside hakmem's segments is the caller's case: it may be glibc's.) */
void *hak_block_in(hak_segment_t *seg, const void *p, const char *op, hak_page_t **page_out) {
    hak_page_t *page = seg->kind == HAK_PAGE_HUGE ? &seg->pages[0] : hak_page_of(seg, p);
    if (page == &seg->pages[0] && seg->first_page) hak_fatal(op, "invalid pointer (not a block)", p);
    if (!page->in_use) hak_fatal(op, "double free or stale pointer (its page was already released)", p);
    *page_out = page;
    size_t off = (uintptr_t)p - (uintptr_t)page->start;
    if (page->flags & HAK_PAGE_IS_HUGE) {
        if (off != 0) hak_fatal(op, "invalid pointer (inside a huge block)", p);
        return (void *)p;
    }
    uint32_t cap = HAK_RELAXED(page->capacity);
    if (off >= (size_t)cap * page->block_size) hak_fatal(op, "invalid pointer (not a block)", p);
    if (hak_carved_block(page, off)) return (void *)p;
    if (!(page->flags & HAK_PAGE_HAS_ALIGNED)) hak_fatal(op, "invalid pointer (inside a block)", p);
    return hak_page_block_start(page, p);
}

/* Everything free() does not take on one of its two quick paths: NULL,
 * foreign (glibc's) blocks, huge blocks, pages with flags, aligned blocks,
 * heaps without a fast-path tag, and every misuse. */
static HAK_NOINLINE void hak_free_generic(void *p) {
    if (p == NULL) return;
    hak_segment_t *seg = hak_segment_of_checked(p);
    if (hak_unlikely(!seg)) {
        if (hak_foreign_free(p)) return;
        hak_fatal("free()", "invalid pointer (not allocated by hakmem)", p);
    }
    hak_page_t *page;
    hak_block_t *b = hak_block_in(seg, p, "free()", &page);
    if (HAK_STATS_FULL_ENABLED && hak_tls_heap != &hak_heap_empty)
        hak_stat_inc(hak_tls_heap->st_frees[(page->flags & HAK_PAGE_IS_HUGE) ? HAK_CLASS_COUNT : page->class_idx]);
    if (page->flags & HAK_PAGE_IS_HUGE) { hak_huge_free(seg); return; }
    if (b->key == (uintptr_t)page) hak_fatal("free()", "double free of", p);
    if (seg->heap == hak_tls_heap) hak_free_local(seg->heap, page, b);
    else hak_free_remote(seg, page, b, 0);
}

/* A free the fast path did not take although the region map says the block
 * is this thread's: a block of a medium or large page (whose offset is not
 * the low 16 bits of its address), of a page with flags, or misuse. */
void hak_free_local_slow(hak_page_t *page, void *p) {
    hak_block_t *b = (hak_block_t *)p;
    size_t off = (uintptr_t)p - (uintptr_t)page->start;
    if (hak_likely(hak_carved_block(page, off) && b->key != (uintptr_t)page && !HAK_STATS_FULL_ENABLED)) {
        hak_free_local(hak_tls_heap, page, b);
        return;
    }
    hak_free_generic(p);
}

/* free() of a block that is not this thread's by the region map.  The
 * common case first, in a straight line: a remote free of a valid block in
 * another heap's segment (the fast path's checks, against the page's carved
 * blocks) by a thread with a heap, onto a page not marked full -- one CAS.
 * Everything else, a CAS that lost a race included, goes on to
 * hak_free_remote or hak_free_generic. */
void hak_free_slow(void *p) {
    uint16_t tag = hak_segmap_get(p);
    if (hak_likely(tag >= HAK_TAG_FIRST && tag <= HAK_TAG_LAST) && !HAK_STATS_FULL_ENABLED) {
        hak_segment_t *seg = hak_segment_of(p);
        hak_page_t *page = hak_page_of(seg, p);
        hak_block_t *b = (hak_block_t *)p;
        size_t off = (uintptr_t)p - (uintptr_t)page->start;
        hak_heap_t *self = hak_tls_heap;
        if (hak_carved_block(page, off) && b->key != (uintptr_t)page && seg->heap != self) {
            unsigned retries = 0;
            if (hak_likely(self != &hak_heap_empty)) {
                unsigned cls = page->class_idx;    /* before the push: after it the page may be gone */
                b->key = (uintptr_t)page;
                uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
                if (hak_likely(!(tf & HAK_TF_NOTIFY))) {
                    b->next = (hak_block_t *)tf;
                    if (hak_likely(atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf,
                            (uintptr_t)b, memory_order_release, memory_order_relaxed))) {
                        hak_stat_inc(self->st_remote[cls]);
                        return;
                    }
                    retries = 1;
                }
            }
            hak_free_remote(seg, page, b, retries);
            return;
        }
    }
    hak_free_generic(p);
}
