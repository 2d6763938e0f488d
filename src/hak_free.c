/* hak_free.c -- every free that the inline fast path (hak_free_inline,
 * hak_internal.h) does not finish, and the one validation of a pointer.
 *
 *   hak_free_inline        region map == this thread's tag, block test and key
 *        |                 test pass: local push, done
 *        +-- hak_free_local_slow   region map matched, a test failed
 *        +-- hak_free_slow         region map did not match
 *                 |
 *         quick check (hak_free_quick): a heap's segment, the start of a
 *         carved block, not free -- the common remote free
 *                 |  fails: hak_free_checked -- NULL, glibc's blocks, huge
 *                 |  blocks, aligned blocks, sampled blocks (heap profiles:
 *                 |  hak_sampled_freed), guarded blocks (hak_guard_hooks),
 *                 |  misuse (reported, abort)
 *                 v
 *         hak_free_block: the owner frees locally, any other thread pushes
 *         onto the page's remote list (hak_free_remote)
 *
 * The complete check, hak_block_in, also serves realloc() and
 * malloc_usable_size(). */
#include "hak_purge.h"   /* the slot lock (hak_block_is_free) */
#include "hak_hardened.h" /* hak_usable_op */

void (*hak_sampled_freed)(void *p);   /* hak_internal.h: registered by hak_profile.c */
hak_guard_hooks_t hak_guard_hooks;    /* hak_internal.h: registered by hak_guard.c */

/* ---- local and remote frees of a validated block ---- */

/* A large block's canary, and the canary at its span's end, are intact;
 * so is the canary at the end of the span before a page's first block when
 * this thread owns the segment (no other thread then changes that page). */
static bool hak_span_intact(const hak_page_t *page) {
    uint64_t c[2], want[2];
    const uint8_t *e = hak_span_end(page);
    memcpy(c, e - 16, sizeof c);
    hak_span_canary(e, want);
    return c[0] == want[0] && c[1] == want[1];
}
void hak_large_check(const hak_page_t *page, const void *block, const char *op) {
    uint64_t c;
    size_t n = page->large_req[hak_large_index(page, block)];
    if (hak_large_has_room(page, n)) {
        memcpy(&c, (const uint8_t *)block + n, sizeof c);
        if (hak_unlikely(c != hak_large_canary(block)))
            hak_fatal(op, "heap overflow detected (the canary after the block was overwritten) in block", block);
    }
    if (hak_span_has_canary(page) && hak_unlikely(!hak_span_intact(page)))
        hak_fatal(op, "heap underflow detected (the canary after the last block of its span was overwritten) "
                      "before the block after", hak_span_end(page));
    hak_segment_t *seg = hak_segment_of(block);
    unsigned head = (unsigned)(page - seg->pages);
    hak_heap_t *heap = hak_tls.heap;
    if (block == page->start && head > 0 && seg->heap == heap) {
        /* Under the slot lock: the purger gives this heap's kept pages back
         * (hak_segment.c), which marks them not in use, joins their spans
         * (slice_page[]) and purges their memory -- a canary read meanwhile
         * would read a purged zero (tsan.stress.purger.clean saw the race) */
        hak_slots_lock(heap);
        const hak_page_t *prev = seg->slice_page[head - 1];
        bool bad = prev->in_use && hak_span_has_canary(prev) && !hak_span_intact(prev);
        hak_slots_unlock(heap);
        if (hak_unlikely(bad))
            hak_fatal(op, "heap underflow detected (the bytes before the block were overwritten) in block", block);
    }
}

/* Local free of a valid block; handles full and empty pages. */
static void hak_free_local(hak_heap_t *heap, hak_page_t *page, hak_block_t *b) {
    b->key = page->local_key;
    b->next = page->local_free;
    page->local_free = b;
    page->used--;
    if (page->flags & HAK_PAGE_IN_FULL) hak_page_unfull(heap, page);
    if (page->used == 0) hak_page_retire(page);
}

/* The heap a thread without one counts its remote frees in.  A thread that
 * only frees (a consumer) gets a heap on its first remote free, as if it had
 * allocated -- but not while it exits: a heap taken after its destructor ran
 * would never be abandoned.  Then the counts go to the static empty heap,
 * which nobody sums. */
static HAK_NOINLINE hak_heap_t *hak_free_remote_counter(void) {
    hak_heap_t *self = hak_tls_exiting ? NULL : hak_heap_empty.thread_heap();
    return self ? self : &hak_heap_empty;
}

/* A remote free into a full page: the owner set NOTIFY and the push cleared
 * it; the block goes to the owner's delayed list, where the owner sees it. */
static HAK_NOINLINE void hak_free_delayed(hak_heap_t *owner, hak_block_t *b) {
    hak_block_t *head = atomic_load_explicit(&owner->xdelayed, memory_order_relaxed);
    do { b->next = head; } while (!atomic_compare_exchange_weak_explicit(&owner->xdelayed, &head, b,
                                                memory_order_release, memory_order_relaxed));
}

/* One attempt at a remote push, the only code that writes xthread_free from
 * a freeing thread: link b in front of the list -- or, when the owner marked
 * the page full (NOTIFY), only clear the mark (the block then goes to the
 * owner's delayed list).  On failure *tf holds the list's new value. */
HAK_INLINE bool hak_remote_try_push(hak_page_t *page, hak_block_t *b, uintptr_t *tf) {
    uintptr_t desired;
    if (hak_likely(!(*tf & HAK_TF_NOTIFY))) {
        b->next = HAK_TF_LIST(*tf);
        desired = (uintptr_t)b | ((*tf & ~(HAK_TF_ONE - 1)) + HAK_TF_ONE);   /* count + 1 */
    } else {
        desired = *tf & ~HAK_TF_NOTIFY;
    }
    return atomic_compare_exchange_weak_explicit(&page->xthread_free, tf, desired,
                                                 memory_order_release, memory_order_relaxed);
}

/* Every remote free but the common one: a thread without a heap, a full
 * page, a CAS that lost a race.  The owner and the class are read before the
 * push: the block counts as used until then, so the segment cannot go away,
 * and heaps are never freed.  Statistics are counted by the freeing thread in
 * its own heap: no shared cache line, no lock prefix. */
static HAK_NOINLINE void hak_free_remote_slow(hak_heap_t *owner, hak_page_t *page, hak_block_t *b,
                                              hak_heap_t *self) {
    unsigned cls = page->class_idx, retries = 0;
    if (self == &hak_heap_empty) self = hak_free_remote_counter();
    b->key = page->free_key;
    uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
    while (!hak_remote_try_push(page, b, &tf)) retries++;
    if (tf & HAK_TF_NOTIFY) hak_free_delayed(owner, b);
    hak_stat_inc(self->st_remote[cls]);
    if (HAK_STATS_FULL_ENABLED) hak_stat_inc(self->st_frees[cls]);
    if (retries)
        atomic_store_explicit(&self->st_cas_retries,
            atomic_load_explicit(&self->st_cas_retries, memory_order_relaxed) + retries, memory_order_relaxed);
}

/* Remote free, the common case in a straight line: a thread with a heap, a
 * page not marked full, one CAS. */
HAK_INLINE void hak_free_remote(hak_heap_t *owner, hak_page_t *page, hak_block_t *b, hak_heap_t *self) {
    if (hak_likely(self != &hak_heap_empty)) {
        unsigned cls = page->class_idx;
        b->key = page->free_key;
        uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
        if (hak_likely(!(tf & HAK_TF_NOTIFY)) && hak_likely(hak_remote_try_push(page, b, &tf))) {
            hak_stat_inc(self->st_remote[cls]);
            if (HAK_STATS_FULL_ENABLED) hak_stat_inc(self->st_frees[cls]);
            if (hak_unlikely(atomic_load_explicit(&owner->state, memory_order_relaxed) == HAK_HEAP_ABANDONED))
                hak_heap_empty.follow(owner);
            return;
        }
    }
    hak_free_remote_slow(owner, page, b, self);
}

/* Free a validated block of a non-huge page: locally when this thread's
 * heap owns its segment, remotely otherwise. */
HAK_INLINE void hak_free_block(hak_segment_t *seg, hak_page_t *page, hak_block_t *b) {
    hak_heap_t *self = hak_tls.heap, *owner = seg->heap;
    if (owner == self) {
        if (HAK_STATS_FULL_ENABLED) hak_stat_inc(self->st_frees[page->class_idx]);
        hak_free_local(self, page, b);
    } else {
        hak_free_remote(owner, page, b, self);
    }
}

/* Apply the remote frees that came in while their pages were full. */
void hak_heap_process_delayed(hak_heap_t *heap) {
    if (!atomic_load_explicit(&heap->xdelayed, memory_order_relaxed)) return;
    hak_block_t *b = atomic_exchange_explicit(&heap->xdelayed, NULL, memory_order_acquire);
    while (b) {
        hak_block_t *next = b->next;
        hak_segment_t *seg = hak_segment_of(b);
        hak_page_t *page = hak_page_of(seg, b);
        if (hak_likely(seg->heap == heap)) hak_free_local(heap, page, b);
        /* a remote freer read the owner before hakmem_heap_delete moved the
         * page to another heap: free it there (if the page still lives) */
        else if (seg->heap && page->in_use) hak_free_block(seg, page, b);
        b = next;
    }
}

/* ---- validation ---- */

/* The block an aligned allocation handed out at an interior offset names
 * itself in the block's first word (hak_aligned_mark); any other pointer
 * into a block names the block's start. */
static const uint8_t *hak_expected_pointer(const hak_page_t *page, const uint8_t *block) {
    if (HAK_RELAXED(page->flags) & HAK_PAGE_HAS_ALIGNED) {
        uintptr_t q = hak_aligned_unmark(*(const uintptr_t *)block, page);
        if (q > (uintptr_t)block && q < (uintptr_t)block + page->block_size && q % HAK_MIN_ALIGN == 0)
            return (const uint8_t *)q;
    }
    return block;
}

/* ---- is a block free? ----
 * A free block holds its page's free_key in its key word; malloc writes 0
 * there.  A live block's key word is the program's, and a check that program
 * data could satisfy by chance confirms before anything is reported: the
 * thread that owns the page (the one that allocates from it and takes its
 * remote frees) looks for the block on the page's lists.  Any other thread
 * cannot walk them (a link it reads from a block the owner has since handed
 * out could lead anywhere, even to the block), and relies on the key alone:
 * each incarnation of a page has a key of its own (hak_page_new_key), which
 * a correct program never holds (docs/design.md, "Misuse checks never accuse
 * a correct program"). */

/* Does list, of page, hold b?  1 yes, 0 no, -1 a link leaves the page or the
 * list is longer than the page (a freed block was written to). */
static int hak_list_holds(const hak_page_t *page, const hak_block_t *list, const hak_block_t *b, uint32_t max) {
    size_t carved = (size_t)HAK_RELAXED(page->capacity) * page->block_size;
    for (uint32_t n = 0; list; n++, list = list->next) {
        size_t off = (uintptr_t)list - (uintptr_t)page->start;
        if (n >= max || off >= carved || off % page->block_size) return -1;
        if (list == b) return 1;
    }
    return 0;
}

/* Does the heap's delayed list (blocks of many pages, freed remotely into
 * full pages) hold b?  The owner is its only taker, so the part reachable
 * from a head it loaded stays as it is; pushes only add in front.  A cycle
 * (Brent's test) or a link outside hakmem's memory: -1. */
static int hak_delayed_holds(hak_heap_t *heap, const hak_block_t *b) {
    const hak_block_t *x = atomic_load_explicit(&heap->xdelayed, memory_order_acquire), *mark = NULL;
    for (uint64_t n = 0, power = 1; x; n++, x = x->next) {
        if (x == b) return 1;
        if (x == mark || (uintptr_t)x % HAK_MIN_ALIGN || !hak_segment_of_checked(x)) return -1;
        if (n == power) { mark = x; power *= 2; n = 0; }
    }
    return 0;
}

/* b holds page's key: is b free? (hak_block_is_free, hak_internal.h) */
HAK_NOINLINE bool hak_block_confirm_free(hak_segment_t *seg, hak_page_t *page, const hak_block_t *b, const char *op) {
    if (HAK_RELAXED(page->flags) & HAK_PAGE_IS_HUGE) return false;
    hak_heap_t *self = hak_tls.heap, *owner = seg->heap;
    /* a public heap is the thread's that made it (hak_heap_api.c) */
    bool mine = owner == self || (owner && owner->pub_owner && owner->pub_owner == hak_tls_thread_id);
    if (!owner || !mine) return true;
    int found;
    /* the slot lock holds off whoever else may give back a page its class
     * keeps empty (hak_segment_page_keep), and the segment with it */
    hak_slots_lock(owner);
    if (seg->heap != owner || !page->in_use || hak_page_of(seg, b) != page) {
        found = 1;   /* such a page went back meanwhile: every block of it was free */
    } else {
        uint32_t cap = HAK_RELAXED(page->capacity);
        uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
        found = hak_list_holds(page, page->free, b, cap);
        if (found == 0) found = hak_list_holds(page, page->local_free, b, cap);
        if (found == 0) found = hak_list_holds(page, HAK_TF_LIST(tf), b, HAK_TF_COUNT(tf));
        if (found == 0) found = hak_delayed_holds(owner, b);
    }
    hak_slots_unlock(owner);
    if (found < 0) hak_fatal(op, "heap corrupted (a free list was overwritten) at block", b);
    return found;
}

/* The complete check of p, in hakmem's segment seg, for operation op: returns
 * its block's start and page.  Reports misuse and aborts: a pointer into a
 * free page slot, into the segment header, past the carved blocks, or inside
 * a block (any pointer but the one malloc or an aligned allocation returned).
 * A free block (hak_block_is_free) is returned as it is: the caller decides
 * whether that is a double free. */
hak_block_t *hak_block_in(hak_segment_t *seg, const void *p, const char *op, hak_page_t **page_out) {
    hak_page_t *page = seg->kind == HAK_PAGE_HUGE ? &seg->pages[0] : hak_page_of(seg, p);
    if (page == &seg->pages[0] && seg->first_page) hak_fatal(op, "invalid pointer (not a block)", p);
    if (!page->in_use) hak_fatal(op, "double free or stale pointer (its page was already released)", p);
    *page_out = page;
    size_t off = (uintptr_t)p - (uintptr_t)page->start;
    if (page->flags & HAK_PAGE_IS_HUGE) {
        if (off != 0) hak_fatal(op, "invalid pointer (inside a huge block)", p);
        return (hak_block_t *)p;
    }
    if (off >= (size_t)HAK_RELAXED(page->capacity) * page->block_size)
        hak_fatal(op, "invalid pointer (not a block)", p);
    uint8_t *block = page->start + off / page->block_size * page->block_size;
    if (hak_block_is_free(seg, page, (hak_block_t *)block, op)) return (hak_block_t *)block;
    if ((const uint8_t *)p != hak_expected_pointer(page, block)) hak_fatal(op, "invalid pointer (inside a block)", p);
    return (hak_block_t *)block;
}

/* What a report says of p (hak_internal.h): read without a lock and
 * without checks that could abort, from fields that may be changing. */
bool hak_block_info(const void *p, hak_block_info_t *o) {
    static const char *const kinds[] = { "small", "medium", "medium", "medium", "large", "huge" };
    memset(o, 0, sizeof *o);
    hak_segment_t *seg = hak_segment_of_checked(p);
    if (!seg) return false;
    o->kind = seg->kind <= HAK_PAGE_HUGE ? kinds[seg->kind] : "?";
    hak_page_t *page = seg->kind == HAK_PAGE_HUGE ? &seg->pages[0] : hak_page_of(seg, p);
    if (page == &seg->pages[0] && seg->first_page) { o->header = true; return true; }
    if (!page->in_use) { o->released = true; return true; }
    if (HAK_RELAXED(page->flags) & HAK_PAGE_IS_HUGE) {
        o->block = page->start;
        o->size = page->area;
        return true;
    }
    size_t off = (uintptr_t)p - (uintptr_t)page->start, bs = page->block_size;
    if ((uintptr_t)p < (uintptr_t)page->start || bs == 0 || off >= page->area) return true;
    o->size = bs;
    o->cls = page->class_idx;
    o->block = page->start + off / bs * bs;
    if (hak_page_has_canary(page)) o->asked = page->large_req[hak_large_index(page, o->block)];
    return true;
}

/* Everything the quick check does not pass: NULL, foreign (glibc's) blocks,
 * huge blocks, aligned blocks, and every misuse. */
static HAK_NOINLINE void hak_free_checked(void *p) {
    if (p == NULL) return;
    hak_segment_t *seg = hak_segment_of_checked(p);
    if (hak_unlikely(!seg)) {
        if (hak_guard_hooks.free && hak_guard_hooks.free(p)) return;   /* a guarded block */
        if (hak_zero_free(p, "free()") || hak_foreign_free(p)) return;
        hak_fatal("free()", "invalid pointer (not allocated by hakmem)", p);
    }
    hak_page_t *page;
    hak_block_t *b = hak_block_in(seg, p, "free()", &page);
    if (page->flags & HAK_PAGE_IS_HUGE) {
        if (HAK_STATS_FULL_ENABLED && hak_tls.heap != &hak_heap_empty)
            hak_stat_inc(hak_tls.heap->st_frees[HAK_CLASS_COUNT]);
        hak_huge_free(seg);   /* (a sampled block leaves the profile there) */
        return;
    }
    if (hak_block_is_free(seg, page, b, "free()")) hak_fatal("free()", "double free of", p);
    if (hak_page_has_canary(page)) hak_large_check(page, b, "free()");   /* before the block goes back */
    /* a heap profile's sample: out of the profile before the block can be reused */
    if (HAK_RELAXED(page->flags) & HAK_PAGE_SAMPLED) hak_sampled_freed(p);
    hak_free_block(seg, page, b);
}

/* ---- the two entries from the fast path ---- */

/* The region map says the block is this thread's, but the fast path's tests
 * failed: a page with flags (full, aligned blocks), or misuse. */
void hak_free_local_slow(hak_page_t *page, void *p) {
    if (hak_likely(hak_free_quick(page, p))) hak_free_block(hak_segment_of(p), page, p);
    else hak_free_checked(p);
}

/* The region map does not say "this thread's".  The common case first: a
 * block of another heap's segment (a remote free), or of this thread's heap
 * when that heap has no fast-path tag. */
void hak_free_slow(void *p) {
    hak_page_t *page = hak_quick_page(p);
    if (hak_likely(page != NULL)) hak_free_block(hak_segment_of(p), page, p);
    else hak_free_checked(p);
}

/* ---- malloc_usable_size ---- */

/* Everything the quick check does not pass: NULL, foreign (glibc's) blocks,
 * huge blocks, aligned blocks, sampled blocks, free blocks, and misuse. */
static HAK_NOINLINE size_t hak_usable_exact(const void *p, const char *op, bool *exact) {
    *exact = false;
    if (p == NULL) return 0;
    hak_segment_t *seg = hak_segment_of_checked(p);
    if (hak_unlikely(!seg)) {
        size_t n;
        if (hak_guard_hooks.usable && hak_guard_hooks.usable(p, op, &n)) return n;   /* a guarded block */
        if (hak_zero_owns(p)) {   /* malloc(0)'s */
            if (!hak_zero_live(p)) hak_fatal(op, "invalid pointer (not a live malloc(0) block)", p);
            return 0;
        }
        n = hak_foreign_usable(p);
        if (!n) hak_fatal(op, "invalid pointer (not allocated by hakmem)", p);
        return n;
    }
    hak_page_t *page;
    uint8_t *block = (uint8_t *)hak_block_in(seg, p, op, &page);
    if (page->flags & HAK_PAGE_IS_HUGE) return page->block_size;   /* the size asked, page-rounded (hak_huge.c) */
    *exact = hak_page_has_canary(page) && (const uint8_t *)p == block;   /* the size it was allocated with */
    return hak_block_usable(page, block, p);
}
static size_t hak_usable_checked(const void *p, const char *op) {
    bool exact;
    return hak_usable_exact(p, op, &exact);
}

/* Usable size of a live block, or 0 when p is NULL; fatal for foreign p.
 * The quick check first, as a remote free's (hak_free_slow): a heap's
 * segment, the start of a carved block of a page without aligned blocks,
 * not free -- then the block is the page's block size. */
HAK_INLINE size_t hak_usable_in(const void *p, const char *op) {
    const hak_page_t *page = hak_quick_page(p);
    return hak_likely(page != NULL) ? page->block_size : hak_usable_checked(p, op);
}
size_t hak_usable_size(const void *p) { return hak_usable_in(p, "malloc_usable_size()"); }
/* The same, naming op in a report (the hardened layer's free and realloc). */
size_t hak_usable_op(const void *p, const char *op) { return hak_usable_in(p, op); }

/* ---- operator delete's size ---- */

/* A sized operator delete passes the size the program allocated: it must be
 * one whose allocation could have returned p -- of the block's class on a
 * page without flags (the quick check's pages), at most the usable size
 * otherwise (aligned, sampled, huge and foreign blocks, and every aligned
 * delete, whose block may be of a larger class); exactly the size a guarded
 * block or a large one (not at an aligned interior offset) was allocated
 * with.  A block the quick check
 * refuses (free, misuse) is measured by the complete check, and free then
 * reports what it is. */
void hak_check_delete_size(const void *p, size_t n, bool aligned) {
    const hak_page_t *page = hak_quick_page(p);
    size_t size;
    bool exact, ok;
    if (page != NULL) ok = aligned ? n <= page->block_size : hak_size_class(n) == page->class_idx;
    else if (hak_guard_hooks.usable && hak_guard_hooks.usable(p, "operator delete()", &size)) ok = n == size;
    else {
        size = hak_usable_exact(p, "operator delete()", &exact);
        ok = exact && !aligned ? n == size : n <= size;
    }
    if (hak_unlikely(!ok))
        hak_fatal("operator delete()", "size does not match the block (sized delete)", p);
}
