/* hak_segment.c -- segments, page slots, purging and the segment cache.
 * (The region map is hak_segmap.c; huge blocks are hak_huge.c.)
 *
 * A heap owns its segments.  A segment whose pages are all free goes to a
 * small process-wide cache (hak_opt.segment_cache entries) or back to the OS.
 * A cached segment keeps its memory for hak_opt.purge_delay_ms, so a segment
 * freed and taken again soon costs no system call; after that it is purged
 * (or purged at once when the delay is 0).  Free page slots
 * inside a live segment keep their memory for hak_opt.purge_delay_ms and are
 * then purged by the owner on one of its slow paths: no background thread. */
#include "hak_internal.h"
#include <pthread.h>

static pthread_mutex_t hak_cache_lock = PTHREAD_MUTEX_INITIALIZER;
#define HAK_SEGMENT_CACHE_MAX 64
typedef struct hak_cached_s { hak_segment_t *seg; uint64_t since_ms; bool purged; } hak_cached_t;
static hak_cached_t hak_cache[HAK_SEGMENT_CACHE_MAX];  /* a stack: newest last */
static size_t hak_cache_count;

static void hak_segment_purge_body(hak_segment_t *seg) {
    hak_os_purge((uint8_t *)seg + hak_os_page_size(), HAK_SEGMENT_SIZE - hak_os_page_size());
}

/* Purge cached segments whose delay has passed, and the oldest ones beyond
 * hak_opt.cache_unpurged (nothing else would purge them if the program stops
 * allocating).  Called with the lock held; rare (segment release and
 * allocation only). */
static void hak_cache_expire_locked(uint64_t now) {
    if (hak_opt.purge_delay_ms < 0) return;
    long unpurged = 0;
    for (size_t i = hak_cache_count; i-- > 0;) {       /* newest first */
        hak_cached_t *c = &hak_cache[i];
        if (c->purged) continue;
        if (++unpurged > hak_opt.cache_unpurged || now >= c->since_ms + (uint64_t)hak_opt.purge_delay_ms) {
            hak_segment_purge_body(c->seg);
            c->purged = true;
        }
    }
}

static size_t hak_segment_header_size(unsigned page_count) {
    return hak_round_up(sizeof(hak_segment_t) + page_count * sizeof(hak_page_t), 256);
}

void hak_segment_set_slices(hak_segment_t *seg) {
    unsigned per_page = 1u << (seg->page_shift - HAK_SLICE_SHIFT);
    for (unsigned i = 0; i < HAK_MAX_PAGES_PER_SEGMENT; i++) {
        unsigned pi = i / per_page;
        seg->slice_page[i] = &seg->pages[pi < seg->page_count ? pi : 0];
    }
}

/* Byte range of page slot i (page 0 starts after the header). */
static uint8_t *hak_page_area(hak_segment_t *seg, hak_page_t *page, size_t *size) {
    size_t i = (size_t)(page - seg->pages);
    uint8_t *lo = (uint8_t *)seg + (i << seg->page_shift);
    size_t len = (size_t)1 << seg->page_shift;
    if (i == 0) {
        size_t h = hak_segment_header_size(seg->page_count);
        lo += h; len -= h;
    }
    *size = len;
    return lo;
}

/* ---- segments ---- */

static void hak_segment_counted(int delta) {
    hak_count_peak(&hak_counters.segments_in_use, &hak_counters.segments_peak, delta);
}

static hak_segment_t *hak_segment_alloc(hak_heap_t *heap, hak_page_kind_t kind) {
    hak_segment_t *seg = NULL;
    pthread_mutex_lock(&hak_cache_lock);
    if (hak_cache_count > 0) seg = hak_cache[--hak_cache_count].seg;
    hak_cache_expire_locked(hak_os_now_ms());
    pthread_mutex_unlock(&hak_cache_lock);
    if (!seg) {
        seg = hak_os_map_aligned(HAK_SEGMENT_SIZE, HAK_SEGMENT_SIZE);
        if (!seg) return NULL;
    }
    unsigned shift = hak_kind_shift(kind);
    unsigned count = 1u << (HAK_SEGMENT_SHIFT - shift);
    memset(seg, 0, hak_segment_header_size(count));
    seg->heap = heap;
    seg->kind = (uint8_t)kind;
    seg->page_shift = (uint8_t)shift;
    seg->page_count = (uint16_t)count;
    seg->first_page = kind == HAK_PAGE_SMALL;   /* slot 0: the header (hak_types.h) */
    seg->map_size = HAK_SEGMENT_SIZE;
    hak_segment_set_slices(seg);
    hak_segmap_set(seg, heap->tag);
    hak_segment_counted(1);
    return seg;
}

static void hak_seglist_push(hak_heap_t *heap, hak_segment_t *seg) {
    hak_segment_list_t *l = &heap->segs[seg->kind];
    seg->prev = NULL;
    seg->next = l->first;
    if (l->first) l->first->prev = seg;
    l->first = seg;
    seg->in_free_list = true;
}

static void hak_seglist_remove(hak_heap_t *heap, hak_segment_t *seg) {
    hak_segment_list_t *l = &heap->segs[seg->kind];
    if (seg->prev) seg->prev->next = seg->next; else l->first = seg->next;
    if (seg->next) seg->next->prev = seg->prev;
    seg->next = seg->prev = NULL;
    seg->in_free_list = false;
}

/* Forget the pending purges of a segment about to be released (it is purged
 * or unmapped whole). */
static void hak_segment_drop_pending(hak_heap_t *heap, hak_segment_t *seg) {
    for (unsigned i = 0; i < seg->page_count; i++) seg->pages[i].needs_purge = 0;
    heap->purge_pending_bytes_k -= (uint32_t)((seg->purge_pending * ((size_t)1 << seg->page_shift)) >> 10);
    seg->purge_pending = 0;
}

static void hak_segment_release(hak_heap_t *heap, hak_segment_t *seg) {
    hak_seglist_remove(heap, seg);
    hak_segment_counted(-1);
    seg->heap = NULL;
    hak_segmap_set(seg, HAK_TAG_SHARED);
    uint64_t now = hak_os_now_ms();
    pthread_mutex_lock(&hak_cache_lock);
    if (hak_cache_count < (size_t)hak_opt.segment_cache && hak_cache_count < HAK_SEGMENT_CACHE_MAX) {
        bool purge_now = hak_opt.purge_delay_ms == 0;
        if (purge_now) hak_segment_purge_body(seg);
        hak_cache[hak_cache_count++] = (hak_cached_t){ seg, now, purge_now };
        seg = NULL;
    }
    hak_cache_expire_locked(now);
    pthread_mutex_unlock(&hak_cache_lock);
    if (seg) {
        hak_segmap_set(seg, 0);
        hak_os_unmap(seg, HAK_SEGMENT_SIZE);
    }
}

/* Unmap every cached segment; returns bytes released. */
size_t hak_segment_cache_trim(void) {
    hak_segment_t *take[HAK_SEGMENT_CACHE_MAX];
    pthread_mutex_lock(&hak_cache_lock);
    size_t n = hak_cache_count;
    for (size_t i = 0; i < n; i++) take[i] = hak_cache[i].seg;
    hak_cache_count = 0;
    pthread_mutex_unlock(&hak_cache_lock);
    for (size_t i = 0; i < n; i++) {
        hak_segmap_set(take[i], 0);
        hak_os_unmap(take[i], HAK_SEGMENT_SIZE);
    }
    return n * HAK_SEGMENT_SIZE;
}

void hak_segment_lock_for_fork(void) { pthread_mutex_lock(&hak_cache_lock); }
void hak_segment_unlock_after_fork(bool child) {
    if (child) pthread_mutex_init(&hak_cache_lock, NULL);
    else pthread_mutex_unlock(&hak_cache_lock);
}

/* ---- page slots ---- */

void hak_segment_init_page(hak_segment_t *seg, hak_page_t *page, unsigned cls) {
    size_t bsize = hak_class_size(cls), len;
    uint8_t *start = hak_page_area(seg, page, &len);
    if (page->needs_purge) {
        page->needs_purge = 0;
        seg->purge_pending--;
        seg->heap->purge_pending_bytes_k -= (uint32_t)(((size_t)1 << seg->page_shift) >> 10);
    }
    page->free = page->local_free = NULL;
    page->used = 0;
    page->class_idx = (uint8_t)cls;
    page->kind = seg->kind;
    page->in_use = 1;
    page->start = start;
    page->block_size = bsize;
    page->reserved = (uint32_t)(len / bsize);
    page->area = (size_t)page->reserved * bsize;
    HAK_SET_RELAXED(page->capacity, 0);
    page->div_magic = page->local_magic = hak_div_magic(bsize);
    page->div_step = page->div_magic * bsize;       /* mod 2^64 */
    page->free_key = page->local_key = hak_page_key(page);
    hak_page_set_flags(page, 0);
    atomic_store_explicit(&page->xthread_free, 0, memory_order_relaxed);
    page->next = page->prev = NULL;
}

/* Give a large page whose only live block is its first one a larger class,
 * in place: the block keeps its address and grows into the page's free space
 * (realloc of a growing large buffer: no new page, no copy).  The caller
 * checked: owner thread, kind LARGE, no flags, used == 1, block == start. */
void hak_page_reclass(hak_heap_t *heap, hak_page_t *page, unsigned cls) {
    hak_queue_remove(heap, page);
    hak_count_peak(&hak_counters.class_pages[page->class_idx], &hak_counters.class_pages_peak[page->class_idx], -1);
    hak_segment_t *seg = hak_segment_of(page);
    hak_segment_init_page(seg, page, cls);   /* capacity 0, used 0, empty lists */
    HAK_SET_RELAXED(page->capacity, 1);      /* block 0 is the caller's */
    page->used = 1;
    hak_page_update_limit(page);
    hak_queue_push_back(heap, page);
    hak_count_peak(&hak_counters.class_pages[cls], &hak_counters.class_pages_peak[cls], 1);
}

hak_page_t *hak_segment_page_alloc(hak_heap_t *heap, unsigned cls) {
    hak_page_kind_t kind = hak_class_kind(cls);
    hak_segment_t *seg = heap->segs[kind].first;
    if (!seg) {
        if (hak_sweep_abandoned(false) > 0) seg = heap->segs[kind].first;
        if (!seg) {
            seg = hak_segment_alloc(heap, kind);
            if (!seg) return NULL;
            hak_seglist_push(heap, seg);
        }
    }
    /* Prefer a free slot whose memory is still committed (not yet purged):
     * reusing it touches no new memory and saves the page faults. */
    hak_page_t *page = NULL;
    for (unsigned i = seg->first_page; i < seg->page_count; i++) {
        hak_page_t *pg = &seg->pages[i];
        if (pg->in_use) continue;
        if (pg->needs_purge) { page = pg; break; }
        if (!page) page = pg;
    }
    if (HAK_DEBUG_ENABLED && !page) hak_fatal("hak_segment_page_alloc", "segment in free list has no free page", seg);
    seg->used_pages++;
    if (seg->used_pages == seg->page_count - seg->first_page) hak_seglist_remove(heap, seg);
    hak_segment_init_page(seg, page, cls);
    hak_count_peak(&hak_counters.class_pages[cls], &hak_counters.class_pages_peak[cls], 1);
    return page;
}

void hak_segment_page_free(hak_heap_t *heap, hak_page_t *page) {
    hak_segment_t *seg = hak_segment_of(page);
    hak_count_peak(&hak_counters.class_pages[page->class_idx], &hak_counters.class_pages_peak[page->class_idx], -1);
    page->in_use = 0;
    page->free = page->local_free = NULL;
    page->used = 0;
    HAK_SET_RELAXED(page->capacity, 0);   /* no block of a released slot passes a free check */
    hak_page_set_flags(page, 0);
    seg->used_pages--;
    if (seg->used_pages == 0) {
        /* An empty segment goes back to the cache -- unless it is the heap's
         * only segment of its kind: keeping that one (its free slots purged
         * by delay and budget like any others) stops a heap whose use of a
         * kind goes up and down from mapping and purging a segment each time.
         * hak_heap_collect releases it. */
        hak_segment_list_t *l = &heap->segs[seg->kind];
        bool only = seg->in_free_list ? (l->first == seg && seg->next == NULL) : l->first == NULL;
        if (!only) {
            if (!seg->in_free_list) hak_seglist_push(heap, seg);
            hak_segment_drop_pending(heap, seg);
            hak_segment_release(heap, seg);
            return;
        }
    }
    if (!seg->in_free_list) hak_seglist_push(heap, seg);
    if (hak_opt.purge_delay_ms >= 0) {
        page->needs_purge = 1;
        seg->purge_pending++;
        heap->purge_pending_bytes_k += (uint32_t)(((size_t)1 << seg->page_shift) >> 10);
        page->freed_at_ms = hak_os_now_ms();
        uint64_t due = page->freed_at_ms + (uint64_t)hak_opt.purge_delay_ms;
        if (heap->purge_due_ms == 0 || due < heap->purge_due_ms) heap->purge_due_ms = due;
        /* The budget bounds what a thread that stops allocating keeps:
         * nothing else would purge its free slots. */
        if (hak_opt.purge_delay_ms == 0 ||
            (hak_opt.purge_budget_kb >= 0 && heap->purge_pending_bytes_k > (uint64_t)hak_opt.purge_budget_kb))
            hak_segment_purge_due(heap, true);
    }
}

/* Release the heap's empty segments (kept as the only one of their kind). */
void hak_segment_release_empty(hak_heap_t *heap) {
    for (int k = 0; k < HAK_PAGE_KINDS; k++) {
        hak_segment_t *seg = heap->segs[k].first;
        while (seg) {
            hak_segment_t *next = seg->next;
            if (seg->used_pages == 0) {
                hak_segment_drop_pending(heap, seg);
                hak_segment_release(heap, seg);
            }
            seg = next;
        }
    }
}

/* Purge free page slots whose delay has passed (all of them when force). */
void hak_segment_purge_due(hak_heap_t *heap, bool force) {
    uint64_t now = hak_os_now_ms(), next_due = 0;
    size_t os_page = hak_os_page_size();
    if (!force && (heap->purge_due_ms == 0 || now < heap->purge_due_ms)) return;
    for (int k = 0; k < HAK_PAGE_KINDS; k++) {
        for (hak_segment_t *seg = heap->segs[k].first; seg; seg = seg->next) {
            if (seg->purge_pending == 0) continue;
            /* neighbouring due slots are purged with one madvise */
            uint8_t *run_lo = NULL, *run_hi = NULL;
            for (unsigned i = 0; i <= seg->page_count; i++) {
                hak_page_t *page = i < seg->page_count ? &seg->pages[i] : NULL;
                bool due_now = false;
                if (page && page->needs_purge) {
                    uint64_t due = page->freed_at_ms + (uint64_t)hak_opt.purge_delay_ms;
                    if (force || due <= now) due_now = true;
                    else if (next_due == 0 || due < next_due) next_due = due;
                }
                if (due_now) {
                    size_t len;
                    uint8_t *lo = hak_page_area(seg, page, &len);
                    uint8_t *alo = (uint8_t *)hak_round_up((uintptr_t)lo, os_page);
                    if (run_hi != alo) {
                        if (run_lo) hak_os_purge(run_lo, (size_t)(run_hi - run_lo));
                        run_lo = alo;
                    }
                    run_hi = lo + len;
                    page->needs_purge = 0;
                    seg->purge_pending--;
                    heap->purge_pending_bytes_k -= (uint32_t)(((size_t)1 << seg->page_shift) >> 10);
                } else if (run_lo) {
                    hak_os_purge(run_lo, (size_t)(run_hi - run_lo));
                    run_lo = run_hi = NULL;
                }
            }
        }
    }
    heap->purge_due_ms = next_due;
}
