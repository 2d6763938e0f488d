/* hak_heap_api.c -- first-class heaps (hakmem_heap_*), and the walk of every
 * live block (hakmem_visit).  Design: docs/heaps.md.
 *
 * A public heap is an ordinary hak_heap_t that no thread has as its default
 * (hak_tls.heap): it has its own tag, pages and segments, so the slow paths
 * of malloc (hak_malloc_slow) and of free serve it unchanged.
 * heap->pub_owner names the thread that made it (hak_thread_id, an id no
 * other thread ever has): only that thread may allocate from it, destroy,
 * delete, visit it or read its stats (hak_pub_check) -- also from its key
 * destructors after hakmem's own exit handler gave its default heap up.
 * Any thread frees its blocks with plain free(); the
 * region map holds the public heap's tag, which is no thread's, so every such
 * free -- the owner's too -- is a remote free (one CAS), collected when the
 * heap next needs a page.  The fast paths of malloc and free do not change.
 *
 * destroy gives every page slot back (hak_segment_page_free: capacity 0, not
 * in use) and the then empty segments to the segment cache or the OS, so a
 * later free() of one of its blocks finds a page not in use, or memory that
 * is no longer hakmem's, and is reported.  delete moves the heap's
 * segments and pages to the owner's default heap.  The heap structure then
 * waits on a free list for the next hakmem_heap_new, tag and all (heaps are
 * never unmapped: remote freers may hold a pointer to one). */
#include "hak_internal.h"
#include "hak_hardened.h"   /* HAK_HARDENED_ENABLED: huge blocks move by copy */
#include <pthread.h>

#define HAK_PUB_LIVE 0x6c697665u   /* "live" */
#define HAK_PUB_DEAD 0x64656164u   /* "dead": destroyed, waiting for reuse */
#define HAK_PUB_GONE 0x676f6e65u   /* "gone": deleted, waiting for reuse */

static pthread_mutex_t hak_pub_lock = PTHREAD_MUTEX_INITIALIZER;
/* The lists of huge blocks of every public heap (heap->pub_huge, linked by
 * seg->next/prev): the owner adds, any thread's free() removes. */
static pthread_mutex_t hak_pub_huge_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_heap_t *hak_pub_free;      /* dead heaps, linked by pub_next */
static pthread_once_t hak_pub_once = PTHREAD_ONCE_INIT;

static void hak_pub_prepare(void) { pthread_mutex_lock(&hak_pub_lock); pthread_mutex_lock(&hak_pub_huge_lock); }
static void hak_pub_parent(void) { pthread_mutex_unlock(&hak_pub_huge_lock); pthread_mutex_unlock(&hak_pub_lock); }
static void hak_pub_child(void) { pthread_mutex_init(&hak_pub_huge_lock, NULL); pthread_mutex_init(&hak_pub_lock, NULL); }
static void hak_pub_huge_unlink(hak_segment_t *seg);
static hak_heap_t *hak_pub_huge_hold(hak_segment_t *seg);
static void hak_pub_huge_unhold(hak_heap_t *h, hak_segment_t *seg);

static void hak_pub_init(void) {
    hak_fork_hook_add(hak_pub_prepare, hak_pub_parent, hak_pub_child);
    /* before any block of a public heap exists: hak_huge.c's hooks */
    hak_huge_hooks.unlink = hak_pub_huge_unlink;
    hak_huge_hooks.hold = hak_pub_huge_hold;
    hak_huge_hooks.unhold = hak_pub_huge_unhold;
}

/* The misuse checks every hakmem_heap_* call makes: a NULL heap, a destroyed
 * (or deleted) one, something else, a heap of another thread.  The common
 * case in two compares (a dead heap has no owner); the report out of line. */
static HAK_NOINLINE void hak_pub_report(hak_heap_t *h, const char *op) {
    if (!h) hak_fatal(op, "NULL heap", NULL);
    uint32_t magic = __atomic_load_n(&h->pub_magic, __ATOMIC_ACQUIRE);
    if (magic == HAK_PUB_DEAD || magic == HAK_PUB_GONE) hak_fatal(op, "heap already destroyed or deleted", h);
    if (magic != HAK_PUB_LIVE || !h->pub_owner) hak_fatal(op, "invalid heap (not made by hakmem_heap_new)", h);
    if (h->pub_owner != hak_tls_thread_id) hak_fatal(op, "heap used from a thread that does not own it", h);
}
HAK_INLINE hak_heap_t *hak_pub_check(hakmem_heap_t *hh, const char *op) {
    hak_heap_t *h = (hak_heap_t *)hh;
    if (hak_unlikely(!h || h->pub_owner != hak_tls_thread_id || h->pub_magic != HAK_PUB_LIVE)) hak_pub_report(h, op);
    return h;
}

/* ---- huge blocks of public heaps ----
 * A huge block (hak_huge.c) has a mapping of its own, no page in a heap's
 * segment: a public heap's huge block carries the heap in seg->heap (NULL
 * for every other huge block) and sits on the heap's list.  hak_huge_free
 * and a moving hak_huge_realloc call the two hooks below. */
static void hak_pub_huge_link_locked(hak_heap_t *h, hak_segment_t *seg) {
    __atomic_store_n(&seg->heap, h, __ATOMIC_RELAXED);   /* hak_huge.c reads it unlocked */
    seg->prev = NULL;
    seg->next = h->pub_huge;
    if (seg->next) seg->next->prev = seg;
    h->pub_huge = seg;
}
static void hak_pub_huge_link(hak_heap_t *h, hak_segment_t *seg) {
    pthread_mutex_lock(&hak_pub_huge_lock);
    hak_pub_huge_link_locked(h, seg);
    pthread_mutex_unlock(&hak_pub_huge_lock);
}
static void hak_pub_huge_unlink_locked(hak_segment_t *seg) {
    hak_heap_t *h = seg->heap;
    if (!h) return;
    if (seg->prev) seg->prev->next = seg->next;
    else h->pub_huge = seg->next;
    if (seg->next) seg->next->prev = seg->prev;
    seg->next = seg->prev = NULL;
    __atomic_store_n(&seg->heap, NULL, __ATOMIC_RELAXED);
}
static void hak_pub_huge_unlink(hak_segment_t *seg) {
    pthread_mutex_lock(&hak_pub_huge_lock);
    hak_pub_huge_unlink_locked(seg);
    pthread_mutex_unlock(&hak_pub_huge_lock);
}

/* A moving hak_huge_realloc of a heap's block (from any thread) holds the
 * lock over the move, so that a delete or destroy of the heap sees the block
 * either before (and makes it plain: seg->heap NULL, no hold) or after, at
 * its new place; never unlinked half-way. */
static hak_heap_t *hak_pub_huge_hold(hak_segment_t *seg) {
    if (!__atomic_load_n(&seg->heap, __ATOMIC_RELAXED)) return NULL;
    pthread_mutex_lock(&hak_pub_huge_lock);
    hak_heap_t *h = seg->heap;
    if (!h) { pthread_mutex_unlock(&hak_pub_huge_lock); return NULL; }
    hak_pub_huge_unlink_locked(seg);
    return h;
}
static void hak_pub_huge_unhold(hak_heap_t *h, hak_segment_t *seg) {
    hak_pub_huge_link_locked(h, seg);
    pthread_mutex_unlock(&hak_pub_huge_lock);
}

/* A huge block for heap h (size above HAKMEM_HEAP_MAX_SIZE, or an alignment
 * the size classes do not give). */
static void *hak_pub_huge_alloc(hak_heap_t *h, size_t size, size_t align, bool zero) {
    void *p = hak_huge_alloc(size, align, zero);
    if (p) hak_pub_huge_link(h, hak_segment_of_checked(p));   /* the header may lie units before p */
    return p;
}

HAK_EXPORT hakmem_heap_t *hakmem_heap_new(void) {
    hak_process_init();
    uint64_t owner = hak_thread_id();
    pthread_once(&hak_pub_once, hak_pub_init);
    pthread_mutex_lock(&hak_pub_lock);
    hak_heap_t *h = hak_pub_free;
    if (h) hak_pub_free = h->pub_next;
    pthread_mutex_unlock(&hak_pub_lock);
    if (!h && !(h = hak_heap_make(HAK_HEAP_OWNED))) { errno = ENOMEM; return NULL; }
    /* a remote free that raced with hakmem_heap_delete may have left a block
     * on the deleted heap's delayed list: it goes to its segment's owner now
     * (after a destroy the list holds nothing: a free racing with the destroy
     * is the program's data race, docs/heaps.md) */
    if (h->pub_magic == HAK_PUB_GONE) hak_heap_process_delayed(h);
    else atomic_store_explicit(&h->xdelayed, NULL, memory_order_relaxed);
    h->pub_next = NULL;
    h->pub_owner = owner;
    __atomic_store_n(&h->pub_magic, HAK_PUB_LIVE, __ATOMIC_RELEASE);
    return (hakmem_heap_t *)h;
}

/* A heap whose pages are all gone goes on the free list for reuse.  The
 * first one there keeps its empty segments (at most one per kind: the rest
 * went back as their last page did), so that the next heap of a program
 * that makes one heap per request starts with them, without a trip through
 * the segment cache; their free slots are purged by the decay as any heap's.
 * Any other dead heap gives them back. */
static void hak_pub_retire(hak_heap_t *h, uint32_t magic) {
    pthread_mutex_lock(&hak_pub_lock);
    bool keep = hak_pub_free == NULL;
    pthread_mutex_unlock(&hak_pub_lock);
    if (!keep) hak_segment_release_empty(h);
    if (HAK_DEBUG_ENABLED && !keep) {
        for (int k = 0; k < HAK_PAGE_KINDS; k++)
            if (h->segs[k].first) hak_fatal("hakmem_heap_destroy()", "segment left in a dead heap", h);
        if (h->purge_pending_bytes_k) hak_fatal("hakmem_heap_destroy()", "purge accounting left in a dead heap", h);
    }
    __atomic_store_n(&h->pub_magic, magic, __ATOMIC_RELEASE);
    h->pub_owner = 0;
    pthread_mutex_lock(&hak_pub_lock);
    h->pub_next = hak_pub_free;
    hak_pub_free = h;
    pthread_mutex_unlock(&hak_pub_lock);
}

HAK_EXPORT void hakmem_heap_destroy(hakmem_heap_t *hh) {
    hak_heap_t *h = hak_pub_check(hh, "hakmem_heap_destroy()");
    /* huge blocks go to the huge cache (page not in use: a later free is
     * reported) or back to the OS (no longer hakmem's: reported) */
    for (;;) {
        pthread_mutex_lock(&hak_pub_huge_lock);
        hak_segment_t *seg = h->pub_huge;
        if (seg) hak_pub_huge_unlink_locked(seg);
        pthread_mutex_unlock(&hak_pub_huge_lock);
        if (!seg) break;
        hak_huge_free(seg);
    }
    /* remote frees into full pages: their pages go now */
    atomic_store_explicit(&h->xdelayed, NULL, memory_order_relaxed);
    for (unsigned c = 0; c <= HAK_CLASS_COUNT; c++) {
        hak_page_queue_t *q = c < HAK_CLASS_COUNT ? &h->queues[c] : &h->full;
        hak_page_t *page = q->first;
        if (!page) continue;
        q->first = q->last = NULL;
        if (c < HAK_CLASS_COUNT) hak_queue_set_direct(h, c);
        while (page) {
            hak_page_t *next = page->next;
            hak_segment_page_free(h, page);   /* capacity 0, not in use: later frees are reported */
            page = next;
        }
    }
    hak_segment_kept_release_all(h);       /* kept medium and large pages, in no queue */
    hak_pub_retire(h, HAK_PUB_DEAD);
}

HAK_EXPORT void hakmem_heap_delete(hakmem_heap_t *hh) {
    hak_heap_t *h = hak_pub_check(hh, "hakmem_heap_delete()");
    /* the pages go to the calling thread's heap; after its exit handler, to
     * a borrowed abandoned heap, abandoned again at the end */
    hak_heap_t *to = hak_heap_for_thread(), *borrowed = NULL;
    if (!to || to == &hak_heap_empty) to = borrowed = hak_heap_borrow();
    if (!to) hak_fatal("hakmem_heap_delete()", "no memory for a heap to take the blocks over", h);
    /* huge blocks become plain huge blocks (the default heaps' huge blocks
     * belong to no heap) */
    pthread_mutex_lock(&hak_pub_huge_lock);
    while (h->pub_huge) hak_pub_huge_unlink_locked(h->pub_huge);
    pthread_mutex_unlock(&hak_pub_huge_lock);
    hak_heap_collect(h, false);         /* empty pages and segments go first */
    /* no page stays full: no remote free goes to h->xdelayed any more
     * (one that read the owner before the move: hak_heap_process_delayed) */
    for (hak_page_t *page = h->full.first, *next; page; page = next) {
        next = page->next;
        hak_page_unfull(h, page);
    }
    hak_heap_process_delayed(h);
    /* a delayed free that emptied a medium page kept it on h's kept list:
     * back to its segment before the segments move (a kept page of a moved
     * segment would stay with h) */
    hak_segment_kept_release_all(h);
    for (unsigned c = 0; c < HAK_CLASS_COUNT; c++) {
        hak_page_t *page;
        while ((page = h->queues[c].first) != NULL) {
            hak_queue_remove(h, page);
            hak_segment_t *seg = hak_segment_of(page);
            if (seg->heap == h) hak_segment_move(h, to, seg);
            hak_queue_push_back(to, page);
        }
    }
    hak_heap_process_delayed(h);        /* late remote frees (docs/heaps.md): to their new owner */
    if (borrowed) hak_heap_give_back(borrowed);
    hak_pub_retire(h, HAK_PUB_GONE);
}

/* ---- allocation ---- */

static void *hak_pub_alloc(hak_heap_t *h, size_t size) {
    if (hak_unlikely(size > HAK_LARGE_MAX)) return hak_pub_huge_alloc(h, size, HAK_MIN_ALIGN, false);
    return hak_heap_malloc_inline(h, size);
}

HAK_EXPORT void *hakmem_heap_malloc(hakmem_heap_t *hh, size_t size) {
    return hak_pub_alloc(hak_pub_check(hh, "hakmem_heap_malloc()"), size);
}

HAK_EXPORT void *hakmem_heap_calloc(hakmem_heap_t *hh, size_t n, size_t size) {
    hak_heap_t *h = hak_pub_check(hh, "hakmem_heap_calloc()");
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) { errno = ENOMEM; return NULL; }
    if (total > HAK_LARGE_MAX) return hak_pub_huge_alloc(h, total, HAK_MIN_ALIGN, true);   /* zeroes only reused memory */
    void *p = hak_pub_alloc(h, total);
    if (p) memset(p, 0, total);
    return p;
}

HAK_EXPORT void *hakmem_heap_realloc(hakmem_heap_t *hh, void *p, size_t size) {
    static const char op[] = "hakmem_heap_realloc()";
    hak_heap_t *h = hak_pub_check(hh, op);
    if (!p) return hak_pub_alloc(h, size);
    if (size == 0) { hak_free_inline(p); return NULL; }   /* as realloc */
    size_t usable;
    hak_segment_t *seg = hak_segment_of_checked(p);
    if (seg) {
        hak_page_t *page;
        uint8_t *block = (uint8_t *)hak_block_in(seg, p, op, &page);
        bool huge = page->flags & HAK_PAGE_IS_HUGE;
        if (hak_block_is_free(seg, page, (hak_block_t *)block, op)) hak_fatal(op, "pointer already freed", p);
        if (hak_page_has_canary(page)) hak_large_check(page, block, op);
        /* a huge block: its usable size, and the rest of its mapping (p is
         * its start: hak_block_in) */
        usable = huge ? page->block_size : hak_block_usable(page, block, p);
        size_t room = huge ? page->area : hak_block_room(page, block, p);
        bool keeps = hak_realloc_keeps(size, usable, room);
        if (seg->heap == h && keeps && (!huge || HAK_HARDENED_ENABLED)) {   /* stays */
            if (!huge) hak_block_resize(page, block, p, size);
            return p;
        }
        /* pages move, it stays h's, or it stays where it is with its new size
         * recorded (not in the hardened build: its huge mappings have guards,
         * and cached ones are inaccessible) */
        if (huge && seg->heap == h && (size > HAK_LARGE_MAX || keeps) && !HAK_HARDENED_ENABLED) {
            void *q = hak_huge_realloc(seg, p, size);
            if (q || size > ((size_t)1 << 46)) return q;
        }
    } else {
        usable = hak_usable_size(p);    /* a glibc block, or reported */
    }
    void *q = hak_pub_alloc(h, size);
    if (!q) return NULL;
    memcpy(q, p, size < usable ? size : usable);
    hak_free_inline(p);
    return q;
}

/* As aligned_alloc (glibc 2.36: memalign): an alignment that is not a power
 * of two is rounded up.  A block that is not aligned already is taken
 * larger, and the aligned pointer inside it is marked (hak_alloc.c). */
HAK_EXPORT void *hakmem_heap_aligned_alloc(hakmem_heap_t *hh, size_t align, size_t size) {
    hak_heap_t *h = hak_pub_check(hh, "hakmem_heap_aligned_alloc()");
    if (align > SIZE_MAX / 2 + 1) { errno = EINVAL; return NULL; }
    if (align <= HAK_MIN_ALIGN) return hak_pub_alloc(h, size);
    if (align & (align - 1)) align = (size_t)1 << (64 - __builtin_clzl((unsigned long)align));
    if (size > HAK_LARGE_MAX || size + align > HAK_LARGE_MAX) return hak_pub_huge_alloc(h, size, align, false);
    void *p = hak_pub_alloc(h, size);
    if (!p || ((uintptr_t)p & (align - 1)) == 0) return p;
    hak_free_inline(p);
    p = hak_pub_alloc(h, (size ? size : 1) + align - HAK_MIN_ALIGN);
    if (!p) return NULL;
    uint8_t *q = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (q != p) {
        hak_page_t *page = hak_page_of(hak_segment_of(p), p);   /* this heap's page: ours to mark */
        *(uintptr_t *)p = hak_aligned_mark(q, page);
        hak_page_set_flags(page, page->flags | HAK_PAGE_HAS_ALIGNED);
    }
    return q;
}

/* ---- walking live blocks ---- */

typedef struct hak_walk_s {
    hakmem_visit_fn fn;
    void *arg;
    uint64_t blocks, bytes, pages, page_bytes;
} hak_walk_t;

#define HAK_WALK_MAX_BLOCKS 4096    /* 64 KiB of 16-byte blocks: the most a page holds */

/* Mark the blocks of list (at most cap of them) in bits; false if the list
 * leaves the page or loops (a corrupt list: the page is then skipped). */
static bool hak_walk_mark(const hak_page_t *page, const hak_block_t *b, uint32_t cap, uint64_t *bits, bool foreign_ok) {
    for (uint32_t n = 0; b; b = b->next) {
        uintptr_t off = (uintptr_t)b - (uintptr_t)page->start;
        if (off >= (uintptr_t)cap * page->block_size) {
            if (foreign_ok) continue;    /* the heap's delayed list holds other pages' blocks */
            return false;
        }
        size_t i = off / page->block_size;
        if (bits[i >> 6] & ((uint64_t)1 << (i & 63)) || ++n > cap) return false;
        bits[i >> 6] |= (uint64_t)1 << (i & 63);
    }
    return true;
}

/* Every live block of page (of heap owner): the carved blocks that are on
 * none of its free lists -- free, local_free, the remote list and, for a full
 * page, the owner's delayed list.  Returns the callback's nonzero answer. */
static int hak_walk_page(hak_heap_t *owner, hak_page_t *page, hak_walk_t *w) {
    uint32_t cap = HAK_RELAXED(page->capacity);
    w->pages++;
    w->page_bytes += page->area;
    if (page->flags & HAK_PAGE_IS_HUGE) {   /* its usable size (hak_huge.c) */
        w->blocks++;
        w->bytes += page->block_size;
        return w->fn ? w->fn(page->start, page->block_size, w->arg) : 0;
    }
    if (cap == 0 || cap > HAK_WALK_MAX_BLOCKS) return 0;
    uint64_t bits[HAK_WALK_MAX_BLOCKS / 64] = { 0 };
    const hak_block_t *remote = HAK_TF_LIST(atomic_load_explicit(&page->xthread_free, memory_order_acquire));
    if (!hak_walk_mark(page, page->free, cap, bits, false) ||
        !hak_walk_mark(page, page->local_free, cap, bits, false) ||
        !hak_walk_mark(page, remote, cap, bits, false))
        return 0;
    if ((page->flags & (HAK_PAGE_IN_FULL | HAK_PAGE_SAMPLED)) &&   /* (a sampled page: NOTIFY too) */
        !hak_walk_mark(page, atomic_load_explicit(&owner->xdelayed, memory_order_acquire), cap, bits, true))
        return 0;
    bool aligned = page->flags & HAK_PAGE_HAS_ALIGNED;
    for (uint32_t i = 0; i < cap; i++) {
        if (bits[i >> 6] & ((uint64_t)1 << (i & 63))) continue;
        uint8_t *block = page->start + (size_t)i * page->block_size, *q = block;
        if (aligned) {      /* the pointer an aligned allocation handed out (hak_free.c) */
            uintptr_t m = hak_aligned_unmark(*(const uintptr_t *)block, page);
            if (m > (uintptr_t)block && m < (uintptr_t)block + page->block_size && m % HAK_MIN_ALIGN == 0)
                q = (uint8_t *)m;
        }
        size_t usable = hak_block_usable(page, block, q);
        w->blocks++;
        w->bytes += usable;
        if (w->fn) {
            int r = w->fn(q, usable, w->arg);
            if (r) return r;
        }
    }
    return 0;
}

/* The heap's huge blocks: only the owner adds one, but any thread may free
 * one meanwhile, so the walk holds the lock (the callback must not free). */
static int hak_walk_huge(hak_heap_t *h, hak_walk_t *w) {
    int r = 0;
    pthread_mutex_lock(&hak_pub_huge_lock);
    for (hak_segment_t *seg = h->pub_huge; seg && !r; seg = seg->next) r = hak_walk_page(h, &seg->pages[0], w);
    pthread_mutex_unlock(&hak_pub_huge_lock);
    return r;
}

static int hak_walk_heap(hak_heap_t *h, hak_walk_t *w) {
    int r = hak_walk_huge(h, w);
    if (r) return r;
    for (unsigned c = 0; c <= HAK_CLASS_COUNT; c++) {
        for (hak_page_t *page = c < HAK_CLASS_COUNT ? h->queues[c].first : h->full.first; page; page = page->next) {
            int r = hak_walk_page(h, page, w);
            if (r) return r;
        }
    }
    return 0;
}

HAK_EXPORT int hakmem_heap_visit(hakmem_heap_t *hh, hakmem_visit_fn fn, void *arg) {
    hak_heap_t *h = hak_pub_check(hh, "hakmem_heap_visit()");
    if (!fn) return 0;
    hak_walk_t w = { fn, arg, 0, 0, 0, 0 };
    return hak_walk_heap(h, &w);
}

HAK_EXPORT int hakmem_heap_stats(hakmem_heap_t *hh, hakmem_heap_stats_t *out, size_t size) {
    hak_heap_t *h = hak_pub_check(hh, "hakmem_heap_stats()");
    if (!out) return -1;
    hak_walk_t w = { NULL, NULL, 0, 0, 0, 0 };
    hak_walk_heap(h, &w);
    hakmem_heap_stats_t s = { w.blocks, w.bytes, w.pages, w.page_bytes };
    memcpy(out, &s, size < sizeof s ? size : sizeof s);
    return 0;
}

/* Every live block of the process, found through the region map: each
 * segment a heap holds (thread heaps, abandoned ones, public heaps) and each
 * huge block.  Segments in the cache (no heap) and cached huge mappings (page
 * not in use) hold no live block.  The other threads must not allocate or
 * free meanwhile (docs/heaps.md): a segment may leave the map under the walk. */
HAK_EXPORT int hakmem_visit(hakmem_visit_fn fn, void *arg) {
    if (!fn) return 0;
    hak_walk_t w = { fn, arg, 0, 0, 0, 0 };
    for (size_t i = 0; i < HAK_SEGMAP_ENTRIES; i++) {
        uint16_t v = atomic_load_explicit(&hak_segmap[i], memory_order_acquire);
        if (v == HAK_TAG_NONE || (v & HAK_TAG_BACK)) continue;
        hak_segment_t *seg = (hak_segment_t *)(i << HAK_SEGMENT_SHIFT);
        int r = 0;
        if (seg->kind == HAK_PAGE_HUGE) {
            if (seg->pages[0].in_use) r = hak_walk_page(NULL, &seg->pages[0], &w);
        } else if (seg->heap) {
            for (unsigned p = seg->first_page; p < seg->page_count && !r; p++)
                if (seg->pages[p].in_use) r = hak_walk_page(seg->heap, &seg->pages[p], &w);
        }
        if (r) return r;
    }
    return 0;
}
