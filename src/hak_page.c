/* hak_page.c -- page queues and the slow paths of malloc and free.
 *
 * The fast paths (hak_internal.h) only pop page->free and push
 * page->local_free.  Everything else lands here: refilling a class's current
 * page, moving pages between the class queues and the full queue, remote
 * frees, delayed frees into full pages, aligned blocks, and misuse checks. */
#include "hak_hardened.h"   /* HAK_HARDENED_ENABLED: fresh blocks in random order */

/* ---- queues ---- */

static hak_page_queue_t *hak_queue_of(hak_heap_t *heap, hak_page_t *page) {
    return (page->flags & HAK_PAGE_IN_FULL) ? &heap->full : &heap->queues[page->class_idx];
}

void hak_queue_set_direct(hak_heap_t *heap, unsigned cls) {
    if (cls >= HAK_DIRECT_CLASSES) return;   /* a constant: no call for the classes above */
    /* direct[0], size 0, stays the empty page: malloc(0) takes the slow path
     * to a block that faults when touched (hak_zero.c) */
    size_t lo = cls == 0 ? 1 : (size_t)hak_direct_hi[cls - 1] + 1, hi = hak_direct_hi[cls];
    hak_page_t *page = heap->queues[cls].first ? heap->queues[cls].first : &hak_page_empty;
    for (size_t i = lo; i <= hi; i++) heap->direct[i] = page;
}

void hak_queue_remove(hak_heap_t *heap, hak_page_t *page) {
    hak_page_queue_t *q = hak_queue_of(heap, page);
    if (hak_unlikely(!page->prev && q->first != page)) return;   /* in no queue: fork (hak_heap.c) */
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

/* The first page of a class queue with more than one page goes to its
 * back.  heap->direct does not follow: the caller sets it once, after its
 * last move (hak_find_page). */
static void hak_queue_rotate(hak_page_queue_t *q, hak_page_t *page) {
    q->first = page->next;
    q->first->prev = NULL;
    page->next = NULL;
    page->prev = q->last;
    q->last->next = page;
    q->last = page;
}

/* first, the first page of q, and its successor second change places.  For
 * classes above HAK_DIRECT_MAX only: heap->direct does not follow. */
static void hak_queue_swap_first(hak_page_queue_t *q, hak_page_t *first, hak_page_t *second) {
    hak_page_t *after = second->next;
    q->first = second;
    second->prev = NULL;
    second->next = first;
    first->prev = second;
    first->next = after;
    if (after) after->prev = first; else q->last = first;
}

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
        page->local_magic != page->div_magic || page->local_key != page->free_key)
        hak_fatal("consistency check", "free-check limits out of date in page", page);
    if (page->kind == HAK_PAGE_SMALL && ((uintptr_t)page->start & 0xffff) != 0)
        hak_fatal("consistency check", "small page not on a 64 KiB boundary", page);
    if (page->kind == HAK_PAGE_LARGE && page->reserved > HAK_LARGE_BLOCKS)   /* one large_req each */
        hak_fatal("consistency check", "large page with more blocks than large_req holds", page);
    /* blocks aligned as their size allows, up to 64 KiB
     * (hak_segment_init_page; hak_aligned_plain relies on it) */
    size_t natural = page->block_size & (0 - page->block_size);
    if (natural > ((size_t)1 << HAK_SLICE_SHIFT)) natural = (size_t)1 << HAK_SLICE_SHIFT;
    if (page->kind <= HAK_PAGE_LARGE && (uintptr_t)page->start % natural != 0)
        hak_fatal("consistency check", "page start not aligned to its block size", page);
}

/* ---- collecting remote frees ---- */

/* Take the remote frees (xthread_free), keeping the NOTIFY bit, and make
 * sure page->free has the blocks if there are any.  The list's length comes
 * with it (hak_types.h): it becomes the allocation list, or local_free, as
 * it is; only when both hold blocks already is it walked to its end. */
void hak_page_free_collect(hak_page_t *page) {
    uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
    if (tf & ~HAK_TF_NOTIFY) {
        while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, tf & HAK_TF_NOTIFY,
                                                      memory_order_acquire, memory_order_relaxed)) {}
        hak_block_t *list = HAK_TF_LIST(tf);
        page->used -= HAK_TF_COUNT(tf);
        if (!page->free) {
            page->free = list;
        } else if (!page->local_free) {
            page->local_free = list;
        } else {
            hak_block_t *tail = list;
            while (tail->next) tail = tail->next;
            tail->next = page->local_free;
            page->local_free = list;
        }
    }
    if (!page->free) {
        page->free = page->local_free;
        page->local_free = NULL;
    }
}

/* The hardened build: the n fresh blocks from first go on the free list in
 * a random order (Fisher-Yates with a per-thread xorshift seeded from
 * getrandom), so the next fresh block of a class is not the neighbour of
 * the last.  n <= 256 (4 KiB of 16-byte blocks). */
static HAK_TLS uint64_t hak_carve_rng;
static HAK_NOINLINE void hak_page_link_shuffled(hak_page_t *page, uint8_t *first, uint32_t n) {
    uint16_t order[256];
    uint64_t x = hak_carve_rng ? hak_carve_rng : (hak_os_random() | 1);
    for (uint32_t i = 0; i < n; i++) order[i] = (uint16_t)i;
    for (uint32_t i = n - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint32_t j = (uint32_t)(x % (i + 1));
        uint16_t t = order[i]; order[i] = order[j]; order[j] = t;
    }
    hak_carve_rng = x;
    hak_block_t *head = page->free;
    for (uint32_t i = 0; i < n; i++) {
        hak_block_t *b = (hak_block_t *)(first + (size_t)order[i] * page->block_size);
        b->next = head;
        b->key = page->free_key;   /* what malloc's pop checks */
        head = b;
    }
    page->free = head;
}

/* Carve fresh blocks from the never-used tail: about 4 KiB worth, and one
 * block at a time from 4 KiB up.  Carving writes each block's link, so it
 * touches one OS page per block of 4 KiB or more: a class that needs one
 * block more than ever before (a block another thread frees late) then
 * commits that block's pages and no others (the soak's drift: design.md,
 * "What is left"). */
static void hak_page_extend(hak_page_t *page) {
    size_t bsize = page->block_size;
    uint32_t n = page->reserved - page->capacity;
    /* 4096 / bsize without a division: div_magic is floor(2^64 / bsize) + 1 */
    uint32_t step = bsize >= 4096 ? 1 : bsize >= 1024 ? 4 :
                    (uint32_t)(((unsigned __int128)4096 * page->div_magic) >> 64);
    if (n > step) n = step;
    uint8_t *first = page->start + (size_t)page->capacity * bsize;
    if (HAK_HARDENED_ENABLED && n > 1) {
        hak_page_link_shuffled(page, first, n);
    } else {
        /* each block's link and key (what malloc's pop checks) in one
         * 16-byte store, two blocks a step: 3 instructions a block */
        typedef uint64_t hak_v2_t __attribute__((vector_size(16)));
        uint8_t *last = first + (size_t)(n - 1) * bsize, *p = first;
        uintptr_t pair_end = (uintptr_t)last - bsize;   /* a pair starts below it */
        hak_v2_t w = { (uint64_t)(uintptr_t)(first + bsize), page->free_key }, d = { bsize, 0 };
        hak_v2_t w2 = w + d, d2 = d + d;
        for (; (uintptr_t)p < pair_end; p += 2 * bsize) {
            *(hak_v2_t *)p = w;
            *(hak_v2_t *)(p + bsize) = w2;
            w += d2;
            w2 += d2;
        }
        if (p < last) *(hak_v2_t *)p = w;
        ((hak_block_t *)last)->next = page->free;
        ((hak_block_t *)last)->key = page->free_key;
        page->free = (hak_block_t *)first;
    }
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

/* Empty pages a medium (large) class keeps on the heap's kept list (see
 * hak_page_retire); a large class keeps them only while it cycles: it asked
 * for a page at most HAK_LARGE_CYCLE large requests after one emptied. */
#define HAK_MEDIUM_KEEP 3
#define HAK_LARGE_KEEP 2
#define HAK_LARGE_CYCLE 1
/* large pages kept since the heap's last request for a large page: a heap
 * that frees many large blocks without asking for any (done with them)
 * keeps no more than these */
#define HAK_LARGE_UNCLAIMED 4

static bool hak_large_cycling(const hak_heap_t *heap, unsigned cls) {
    return (__atomic_load_n(&heap->large_cycling[cls >> 6], __ATOMIC_RELAXED) >> (cls & 63)) & 1;
}

/* A page whose blocks all came back.  A small page (64 KiB) stays if it is
 * its class's only page (no ping-pong of page setup for a block that is
 * allocated and freed in a loop).  A medium page leaves its queue and is
 * kept, still formatted for its class, on the heap's kept list
 * (hak_segment_page_keep) if the class keeps fewer than HAK_MEDIUM_KEEP
 * there: a medium class has a handful of live blocks, so its page count
 * swings by one or two all the time, and giving the slot back to take
 * another (often a slot another class used, whose block boundaries touch
 * other OS pages) cost instructions, page faults and RSS (random_large:
 * docs/design.md, "Memory return").  A large page is kept likewise (up to
 * HAK_LARGE_KEEP) if its class cycles -- a block freed and one of its class
 * asked for right after: given back, its span would merge with free
 * neighbours and the next page of the class land elsewhere, so the OS pages
 * the program touches at its blocks' ends would spread ("Empty large
 * pages") -- and not when realloc moved its block (hak_tls_moving).
 * hak_find_page takes a kept page of its class before a new one.  Kept
 * pages are in no queue and written under the slot lock, so the heap's
 * decay (age: empty for the purge delay), the background purger,
 * malloc_trim from any thread and hak_heap_collect give them back (and a
 * new large span that would fault fresh memory in gives back the large
 * ones first, hak_span_find); with a purge delay of 0 (lean), or under the
 * soft memory limit's pressure, nothing is kept.  Anything else gives its
 * slot back to the segment, where the purge delay and budget apply. */
void hak_page_retire(hak_page_t *page) {
    hak_heap_t *heap = hak_segment_of(page)->heap;
    hak_page_queue_t *q = &heap->queues[page->class_idx];
    if (page->kind == HAK_PAGE_LARGE && !hak_tls_moving)
        __atomic_store_n(&heap->large_freed_seq[page->class_idx], heap->large_seq ? heap->large_seq : 1,
                         __ATOMIC_RELAXED);
    /* under the soft memory limit's pressure (hak_limit.c) nothing is kept */
    bool pressed = hak_limit_pressed();
    if (!(page->flags & HAK_PAGE_IN_FULL) && !pressed) {
        if (page->kind == HAK_PAGE_SMALL) {
            if (q->first == page && page->next == NULL) return;
        } else if (page->kind != HAK_PAGE_HUGE && hak_opt.purge_delay_ms != 0 && !(page->flags & HAK_PAGE_SAMPLED) &&
                   (page->kind != HAK_PAGE_LARGE ||
                    (!hak_tls_moving && heap->large_unclaimed < HAK_LARGE_UNCLAIMED &&
                     hak_large_cycling(heap, page->class_idx)))) {
            hak_queue_remove(heap, page);
            bool large = page->kind == HAK_PAGE_LARGE;
            if (hak_segment_page_keep(heap, page, large ? HAK_LARGE_KEEP : HAK_MEDIUM_KEEP))
                heap->large_unclaimed += large;
            else
                hak_segment_page_free(heap, page);
            return;
        }
    }
    hak_queue_remove(heap, page);
    hak_segment_page_free(heap, page);
}

/* ---- sampled blocks (heap profiles) ---- */

/* A sampled block gets a page of its own class to itself (a 64 KiB slot for
 * a small one), in no queue, so that no other malloc takes from it: its flag
 * HAK_PAGE_SAMPLED (carved_limit 0, hak_page_limits) sends its free to the
 * complete check from any thread, which calls hak_sampled_freed; no other
 * free pays anything.  NOTIFY is set as on a full page: a remote free goes to
 * the owner's delayed list, where the owner frees it locally and retires the
 * page (hak_free_local; hak_queue_remove leaves a page in no queue alone).
 * An aligned block whose class's page start is not aligned enough takes a
 * class large enough to hold it aligned, marked as aligned_alloc marks one. */
void *hak_page_sampled_alloc(hak_heap_t *heap, size_t size, size_t align) {
    size_t bytes = size ? size : 1, need = hak_canary_need(bytes);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (need > HAK_LARGE_MAX) break;
        hak_page_t *page = hak_segment_page_alloc(heap, hak_size_class(need));
        if (!page) break;
        uint8_t *q = (uint8_t *)(((uintptr_t)page->start + align - 1) & ~(uintptr_t)(align - 1));
        if (q + bytes > page->start + page->block_size) {
            /* not aligned enough: a class with room for any start (q - start <= align - 16) */
            hak_segment_page_free(heap, page);
            need = hak_canary_need(bytes + align - HAK_MIN_ALIGN);
            continue;
        }
        hak_block_t *b = (hak_block_t *)page->start;
        b->next = NULL;
        b->key = 0;
        HAK_SET_RELAXED(page->capacity, 1);
        page->used = 1;
        atomic_store_explicit(&page->xthread_free, HAK_TF_NOTIFY, memory_order_relaxed);
        if (q != page->start) *(uintptr_t *)b = hak_aligned_mark(q, page);
        if (hak_page_has_canary(page)) hak_large_seal(page, b, (size_t)(q - page->start) + bytes);
        hak_page_set_flags(page, HAK_PAGE_SAMPLED | (q != page->start ? HAK_PAGE_HAS_ALIGNED : 0));
        hak_page_check(page);
        return q;
    }
    errno = ENOMEM;
    return NULL;
}

/* Give a large page whose only live block is its first one a larger class,
 * in place: the block keeps its address and grows into the page's span
 * (hak_segment_span_grow; realloc of a growing large buffer: no copy).  The
 * caller checked: owner thread, kind LARGE, no flags, used == 1, block ==
 * start.  False: no room after the span. */
bool hak_page_reclass(hak_heap_t *heap, hak_page_t *page, unsigned cls) {
    if (!hak_segment_span_grow(heap, page, cls)) return false;
    hak_queue_remove(heap, page);
    hak_count_page(page->class_idx, -1, page->area);
    hak_segment_init_page(hak_segment_of(page), page, cls);   /* capacity 0, used 0, empty lists */
    HAK_SET_RELAXED(page->capacity, 1);      /* block 0 is the caller's */
    page->used = 1;
    hak_page_update_limit(page);
    hak_queue_push_back(heap, page);
    hak_count_page(cls, 1, page->area);
    return true;
}

/* A sampled page that hak_page_reclass grew in place for realloc (which made
 * it an ordinary page in its class queue): sampled again, as above. */
void hak_page_sampled_again(hak_heap_t *heap, hak_page_t *page) {
    hak_queue_remove(heap, page);
    atomic_store_explicit(&page->xthread_free, HAK_TF_NOTIFY, memory_order_relaxed);
    hak_page_set_flags(page, HAK_PAGE_SAMPLED);
    hak_page_check(page);
}

/* ---- malloc slow path ---- */

/* Exhausted pages a walk leaves in the class queue before it moves the rest
 * to the full queue: a class with a few live blocks per page (medium
 * classes) then takes its pages' frees back on the fast free path, without
 * the round trip through heap->full (hak_page_to_full, and a slow free with
 * hak_page_unfull); the walk stays bounded. */
#define HAK_QUEUE_KEEP_FULL 2

/* A new page for class cls, first in its queue. */
static hak_page_t *hak_find_page_new(hak_heap_t *heap, unsigned cls) {
    hak_page_t *page = hak_segment_page_alloc(heap, cls);
    /* the decay's due purge after the take, not before: it never purges
     * the dirty slot the class is about to take back (which the take
     * prefers: hak_segment_page_alloc) */
    hak_segment_purge_due(heap, false);
    if (!page) return NULL;
    hak_queue_push(heap, page, true);
    hak_page_extend(page);
    hak_stat_inc(heap->st_refills[cls]);
    hak_page_check(page);
    return page;
}

static HAK_NOINLINE hak_page_t *hak_find_page(hak_heap_t *heap, unsigned cls) {
    if (cls > HAK_CLASS_MEDIUM_LAST) {   /* a large class */
        /* a class whose page emptied at most HAK_LARGE_CYCLE requests of a
         * large class ago cycles: it keeps its emptied pages (hak_page_retire) */
        heap->large_unclaimed = 0;
        uint32_t seq = heap->large_seq + 1, at = heap->large_freed_seq[cls];
        __atomic_store_n(&heap->large_seq, seq, __ATOMIC_RELAXED);     /* malloc_trim reads it */
        if (at && seq - at <= HAK_LARGE_CYCLE && !hak_large_cycling(heap, cls))
            __atomic_fetch_or(&heap->large_cycling[cls >> 6], (uint64_t)1 << (cls & 63), __ATOMIC_RELAXED);
    }
    hak_heap_process_delayed(heap);
    hak_page_queue_t *q = &heap->queues[cls];
    hak_page_t *page = q->first, *extendable = NULL;
    if (cls < HAK_DIRECT_CLASSES) {
        /* A class served by heap->direct: only its first page hands out
         * blocks, and a page joins the queue with blocks (a fresh page, or a
         * free into a full one: hak_page_unfull), so the switch is no walk.
         * A dry page goes once to the back (page->rotated), where frees
         * reach it on the fast path while the pages before it are used; dry
         * again when it comes round, it leaves for the full queue.  One with
         * a never-used tail goes to the back too, carved only when no page
         * of the class has a freed block (the carved, touched memory then
         * follows the class's real peak).  Each page is looked at at most
         * twice; direct[] is rewritten once, after the last move. */
        bool rotated = false;
        while ((page = q->first) != NULL) {
            hak_page_free_collect(page);
            if (page->free) { page->rotated = 0; break; }
            if (page->capacity < page->reserved) {
                if (page == extendable || page->next == NULL) { hak_page_extend(page); break; }
                if (!extendable) extendable = page;
                hak_queue_rotate(q, page);
                rotated = true;
            } else if (!page->rotated && page->next != NULL) {
                page->rotated = 1;
                hak_queue_rotate(q, page);
                rotated = true;
            } else if (!hak_page_to_full(heap, page)) {
                hak_page_free_collect(page);   /* a remote free came first */
                if (page->free) break;
            }
        }
        if (rotated) hak_queue_set_direct(heap, cls);
        if (page) { hak_page_check(page); return page; }
        return hak_find_page_new(heap, cls);
    }
    /* Reuse freed blocks of any page before carving fresh memory from one:
     * the carved (touched) memory then follows the class's real peak. */
    unsigned kept = 0;
    while (page) {
        hak_page_t *next = page->next;
        hak_page_free_collect(page);
        if (page->free) break;
        if (page->capacity < page->reserved) {
            if (!extendable) extendable = page;
        } else if (kept < HAK_QUEUE_KEEP_FULL) {
            kept++;
        } else if (!hak_page_to_full(heap, page)) {
            hak_page_free_collect(page);
            if (page->free) break;
        }
        page = next;
    }
    if (!page && cls > HAK_CLASS_SMALL_LAST && (page = hak_segment_kept_take(heap, cls)) != NULL) {
        /* a kept medium page (hak_page_retire): empty, still formatted */
        hak_queue_push(heap, page, true);
        hak_page_free_collect(page);
        if (!page->free) hak_page_extend(page);
    } else if (!page && extendable) {
        page = extendable;
        hak_page_extend(page);
    }
    if (!page) return hak_find_page_new(heap, cls);
    if (q->first != page) { hak_queue_remove(heap, page); hak_queue_push(heap, page, true); }
    hak_page_check(page);
    return page;
}

_Static_assert(offsetof(hak_page_t, free) == 0, "hak_malloc_slow selects a list by offset");

/* The list a block of a class above HAK_DIRECT_MAX comes from: the block
 * this thread freed last into the page (local_free), if any, else free.  Its
 * first line is likely still in cache, while the head of page->free may have
 * been freed long ago (random_large); remote and delayed frees wait, as they
 * do while page->free lasts.  A select, not a branch: whether a block came
 * back since the class's last malloc is a coin toss in a random workload,
 * and the mispredicted branch cost random_large more than its instructions
 * (docs/design.md, "What is left"). */
HAK_INLINE hak_block_t **hak_medium_list(hak_page_t *page) {
    uintptr_t back = page->local_free != NULL;   /* 0 or 1: arithmetic gcc keeps branch-free */
    return (hak_block_t **)((char *)page + back * offsetof(hak_page_t, local_free));
}

/* No remote frees wait on page and no delayed frees on heap: what the quick
 * refills (the page's own local_free, a swap with the next page) may skip,
 * since collecting those is hak_find_page's job. */
HAK_INLINE bool hak_nothing_to_collect(const hak_heap_t *heap, hak_page_t *page) {
    return atomic_load_explicit(&page->xthread_free, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&heap->xdelayed, memory_order_relaxed) == NULL;
}

/* The common refill of a page whose free list ran dry: this thread's own
 * frees become the allocation list, when there are some and no remote or
 * delayed frees wait to be collected.  False: hak_find_page's job. */
HAK_INLINE bool hak_quick_refill(hak_heap_t *heap, hak_page_t *page) {
    if (page->local_free == NULL || !hak_nothing_to_collect(heap, page)) return false;
    page->free = page->local_free;
    page->local_free = NULL;
    hak_page_check(page);   /* debug build */
    return true;
}

/* The pages after page in its class queue that hak_find_page's walk would
 * look at before it carves page: none of them has a block at hand or
 * waiting, and there are no more of them than the walk leaves exhausted in
 * the queue (HAK_QUEUE_KEEP_FULL; more: the walk moves some to the full
 * queue). */
HAK_INLINE bool hak_queue_rest_exhausted(const hak_page_t *page) {
    const hak_page_t *p = page->next;
    for (unsigned n = 0; p != NULL; n++, p = p->next) {
        if (n >= HAK_QUEUE_KEEP_FULL || p->free != NULL || p->local_free != NULL ||
            atomic_load_explicit(&p->xthread_free, memory_order_relaxed) != 0)
            return false;
    }
    return true;
}

/* The class's first page has no block at hand but blocks never handed out
 * (its tail), and nothing else of the class would serve first: carve its
 * next blocks (hak_page_extend) here, what hak_find_page would do after its
 * walk (fragmentation: a fifth of the slow path's instructions a carve). */
HAK_INLINE bool hak_quick_extend(hak_heap_t *heap, hak_page_t *page) {
    if (HAK_RELAXED(page->capacity) >= page->reserved || page->local_free != NULL ||
        !hak_nothing_to_collect(heap, page) || !hak_queue_rest_exhausted(page))
        return false;
    hak_page_extend(page);
    hak_page_check(page);   /* debug build */
    return true;
}

/* A free block whose key word is not its page's: the program wrote to it
 * after its free, or ran past the end of the block before it (or before
 * the start of the one after).  Reported before the block's link is
 * followed, so the corrupted link is never handed out. */
static HAK_NOINLINE __attribute__((noreturn, cold)) void hak_page_block_written(const hak_block_t *b) {
    hak_fatal("malloc()", "free block written to (a write after free, or an overflow of a neighbouring block) at", b);
}

/* Hand out the head of list, a list of page's (its key checked). */
HAK_INLINE void *hak_page_pop(hak_heap_t *heap, hak_page_t *page, hak_block_t **list, unsigned cls) {
    hak_block_t *b = *list;
    if (hak_unlikely(b->key != page->free_key)) hak_page_block_written(b);
    *list = b->next;
    b->key = 0;
    page->used++;
    if (HAK_STATS_FULL_ENABLED) hak_stat_inc(heap->st_allocs[cls]);
    return b;
}

/* Everything hak_malloc_slow's medium path does not finish: a thread's first
 * malloc, huge and large blocks, small classes whose direct page ran dry, a
 * class with no page that has a block at hand (hak_find_page). */
static HAK_NOINLINE void *hak_malloc_general(size_t size, hak_heap_t *heap) {
    if (hak_unlikely(heap == &hak_heap_empty)) return heap->first_malloc(size);   /* a thread's first */
    if (size > HAK_LARGE_MAX) {
        hak_stat_inc(heap->st_slow);
        if (HAK_STATS_FULL_ENABLED) hak_stat_inc(heap->st_allocs[HAK_CLASS_COUNT]);
        return hak_huge_alloc(size, HAK_MIN_ALIGN, false);
    }
    if (size == 0 && !heap->pub_owner) {   /* heap->direct[0] sends malloc(0) here */
        void *z = hak_zero_alloc(HAK_MIN_ALIGN);
        if (z) return z;
    }
    unsigned cls = hak_size_class(hak_canary_need(size));   /* a large block: room for its canary */
    hak_page_t *page = heap->queues[cls].first;
    void *b;
    if (size > HAK_DIRECT_MAX && page != NULL && *hak_medium_list(page) != NULL) {
        b = hak_page_pop(heap, page, hak_medium_list(page), cls);   /* large classes (above 64 KiB) */
    } else {
        if (page && !page->free && !hak_quick_refill(heap, page)) page = NULL;
        if (!page) {
            hak_stat_inc(heap->st_slow);
            page = hak_find_page(heap, cls);
            if (!page) { errno = ENOMEM; return NULL; }
        }
        /* a page hak_find_page found may hold this thread's last frees too (a
         * kept page taken back: the block freed last emptied it) */
        b = hak_page_pop(heap, page, size > HAK_DIRECT_MAX ? hak_medium_list(page) : &page->free, cls);
    }
    if (hak_page_has_canary(page)) hak_large_seal(page, b, size);
    return b;
}

/* malloc's miss for a class up to 2 KiB: the fast path hands over the
 * class's current page (heap->direct's, the class queue's first, or
 * hak_page_empty), whose free list ran dry.  The common refill -- this
 * thread's own frees become the allocation list when no remote or delayed
 * frees wait -- needs neither the class nor the queue; everything else is
 * hak_malloc_general's. */
void *hak_malloc_refill(size_t size, hak_heap_t *heap, hak_page_t *page) {
    if (hak_likely(hak_quick_refill(heap, page) || hak_quick_extend(heap, page)))
        return hak_page_pop(heap, page, &page->free, page->class_idx);
    return hak_malloc_general(size, heap);
}

/* malloc's slow path: 2..64 KiB first, the classes without a fast path whose
 * blocks are many a page -- the class from a table, the class's current
 * page, its list -- in a function of its own that saves no register. */
void *hak_malloc_slow(size_t size, hak_heap_t *heap) {
    if (hak_likely(size - (HAK_DIRECT_MAX + 1) < HAK_MEDIUM_MAX - HAK_DIRECT_MAX)) {
        /* (hak_heap_empty has no pages: a thread's first malloc goes on to
         * hak_malloc_general) */
        unsigned cls = hak_medium_class[(size - 1) >> 8];
        hak_page_t *page = heap->queues[cls].first;
        if (hak_likely(page != NULL)) {
            hak_block_t **list = hak_medium_list(page);
            if (hak_likely(*list != NULL)) return hak_page_pop(heap, page, list, cls);
            /* The page ran dry and the next one of the class has this
             * thread's frees: the two swap places, what hak_find_page would
             * do at twice the cost (random_large: 31 K of its 39 K calls per
             * million operations), when no remote or delayed frees wait --
             * those are hak_find_page's to collect. */
            hak_page_t *next = page->next;
            if (next != NULL && (next->free != NULL || next->local_free != NULL) &&
                hak_nothing_to_collect(heap, page)) {
                hak_queue_swap_first(&heap->queues[cls], page, next);
                return hak_page_pop(heap, next, hak_medium_list(next), cls);
            }
        }
    }
    return hak_malloc_general(size, heap);
}
