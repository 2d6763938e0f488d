/* hak_segment.c -- segments and their page slots.
 * (The region map is hak_segmap.c; huge blocks are hak_huge.c; purging and
 * the process-wide caches are hak_purge.c.)
 *
 * A heap owns its segments.  A page slot given back stays committed
 * ("dirty") and the decay (hak_purge.h) decides when its memory is purged.
 * A segment whose pages are all free goes to the process-wide segment cache
 * (or back to the OS when the cache is full); new and adopted heaps take
 * segments from that cache before they map new ones, dirty ones of the kind
 * they need first, so a program whose threads come and go reuses the same
 * committed memory.  The heap's segment lists and slot purge state are
 * written under heap->slot_lock (hak_purge.h). */
#include "hak_purge.h"
#include "hak_hardened.h"

_Static_assert(sizeof(hak_segment_t) + HAK_MAX_PAGES_PER_SEGMENT * sizeof(hak_page_t) <= HAK_HARDENED_GUARD_AT,
               "every header ends before the hardened build's guard page");

size_t hak_segment_header_bytes(const hak_segment_t *seg) { return hak_segment_header_size(seg->page_count); }

void hak_segment_set_slices(hak_segment_t *seg) {
    unsigned per_page = 1u << (seg->page_shift - HAK_SLICE_SHIFT);
    for (unsigned i = 0; i < HAK_MAX_PAGES_PER_SEGMENT; i++) {
        unsigned pi = i / per_page;
        seg->slice_page[i] = &seg->pages[pi < seg->page_count ? pi : 0];
    }
}

/* Byte range of page slot i (page 0 starts after the header). */
uint8_t *hak_segment_page_area(hak_segment_t *seg, hak_page_t *page, size_t *size) {
    size_t i = (size_t)(page - seg->pages);
    uint8_t *lo = (uint8_t *)seg + (i << seg->page_shift);
    size_t len = (size_t)1 << seg->page_shift;
    if (i == 0) {   /* (the hardened build: past the header's guard page) */
        size_t h = HAK_HARDENED_ENABLED ? HAK_HARDENED_HEADER : hak_segment_header_size(seg->page_count);
        lo += h; len -= h;
    }
    *size = len;
    return lo;
}

/* ---- segments ---- */

static void hak_segment_counted(int delta) {
    hak_count_peak(&hak_counters.segments_in_use, &hak_counters.segments_peak, delta);
}

/* ---- spans (large segments) ----
 * A large segment is 64 slices of 64 KiB (16 in the hardened build), each
 * with a descriptor.  A page
 * of a large class is a span of slices (its first slice's descriptor is the
 * page; slice_page[] of every slice of the span points to it), holding
 * HAK_LARGE_SPAN_BYTES' worth of blocks (at least one); free slices form
 * free spans, described the same way (in_use 0), which merge with free
 * neighbours.  So the memory a freed large block leaves committed serves
 * the next large block of any class.  Every slice's own descriptor also
 * keeps that slice's purge state (needs_purge, freed_at_ms, dirty_kb): the
 * decay works slice by slice. */
#define HAK_SLICES HAK_MAX_PAGES_PER_SEGMENT
/* A large segment's slices: 64, or in the hardened build the first MiB's
 * 16 (HAK_HARDENED_USED; page_count says so, the release build's code
 * keeps its constant) */
#define HAK_SEG_SLICES(seg) (HAK_HARDENED_ENABLED ? (unsigned)(seg)->page_count : HAK_SLICES)
#define HAK_SLICE_SIZE ((size_t)1 << HAK_SLICE_SHIFT)
#define HAK_LARGE_SPAN_BYTES ((size_t)256 << 10)
#define HAK_LARGE_STALE 16     /* see hak_kept_release_classes */

/* a large page's blocks, at most: each has its large_req (hak_types.h) */
_Static_assert(HAK_LARGE_SPAN_BYTES / (HAK_MEDIUM_MAX + 1) <= HAK_LARGE_BLOCKS, "large_req holds every block");

static void hak_span_map(hak_segment_t *seg, unsigned head, unsigned n) {
    for (unsigned i = head; i < head + n; i++) seg->slice_page[i] = &seg->pages[head];
    seg->pages[head].span = (uint8_t)n;
}

/* Slices a page of bsize blocks needs when its span starts at slice i. */
static unsigned hak_span_need(const hak_segment_t *seg, unsigned i, size_t bsize) {
    size_t blocks = HAK_LARGE_SPAN_BYTES / bsize;
    if (blocks == 0) blocks = 1;
    size_t bytes = (i == 0 ? HAK_SLICE_SIZE : 0) + blocks * bsize;   /* slot 0: blocks from slice 1 */
    size_t n = (bytes + HAK_SLICE_SIZE - 1) >> HAK_SLICE_SHIFT;
    if (n > HAK_SEG_SLICES(seg) - i) {   /* fewer blocks, as many as fit */
        n = HAK_SEG_SLICES(seg) - i;
        if ((n << HAK_SLICE_SHIFT) - (i == 0 ? HAK_SLICE_SIZE : 0) < bsize) return 0;
    }
    return (unsigned)n;
}

/* ---- reach ----
 * A far write -- an index off by a million, p[1 << 20] -- lands 1 MiB from
 * its block, in another page slot of the same 4 MiB segment.  So a segment
 * is accessible only up to its reach: a fresh one as far as its first page
 * needs, 256 KiB at least (its header and first pages), the rest no-access
 * (one mprotect, when that page is taken); when a page
 * is to lie past the reach, the reach grows by one mprotect adding access,
 * which merges the range into the accessible part -- one mapping, not one
 * per slot -- and needs no TLB shootdown.  A small or medium segment's
 * reach doubles (to the power of two that holds the page: a segment filled
 * to its end took 5 mprotect calls in its life); a large segment's goes to
 * the new span's end (a span holds 256 KiB of blocks or more: at most 16
 * calls), so the slices past its last span stay no-access.  A far write
 * faults while the segment is not filled that far (slots and spans are
 * handed out from the low end).  The reach never shrinks: a
 * cached segment keeps it, and whoever takes it next -- an adopted heap, a
 * new thread's, another kind's -- pays no system call for it
 * (docs/design.md, "Far writes: a segment's reach").
 * If the kernel refuses the first mprotect (the map count limit, a
 * seccomp filter), the segment is all accessible, as before; if it refuses
 * a growth, the rest is opened whole (one mprotect that splits no mapping),
 * else mapped over afresh (mmap MAP_FIXED: the rest was never accessible,
 * it holds nothing); only when both are refused does the page allocation
 * fail (ENOMEM).
 * The hardened build keeps its own layout instead: pages in the first MiB
 * only, the rest no-access for good (HAK_HARDENED_USED, hak_segment_alloc). */
#define HAK_REACH_FIRST ((size_t)256 << 10)
_Static_assert((HAK_REACH_FIRST & (HAK_REACH_FIRST - 1)) == 0 && HAK_REACH_FIRST >= 2 * HAK_SLICE_SIZE,
               "the reach doubles; it holds the header's slice and a page after it");

/* The crash report's question (hak_crash_unreached, in a signal handler: no
 * lock): does addr lie in a segment of pages past its reach? */
static bool hak_segment_unreached(const void *addr, uintptr_t *base, size_t *reach) {
    uint16_t tag = hak_segmap_get_acquire(addr);
    if (tag == HAK_TAG_NONE || tag == HAK_TAG_INVALID || (tag & HAK_TAG_BACK)) return false;
    const hak_segment_t *seg = hak_segment_of(addr);   /* (its header slice is always accessible) */
    if (seg->kind == HAK_PAGE_HUGE) return false;
    size_t r = __atomic_load_n(&seg->reach, __ATOMIC_RELAXED), off = (size_t)((uintptr_t)addr - (uintptr_t)seg);
    if (r == 0 || off < r) return false;
    *base = (uintptr_t)seg;
    *reach = r;
    return true;
}

/* The crash report's hook, before the first segment (hak_process_init). */
void hak_segment_init(void) { hak_crash_unreached = hak_segment_unreached; }

/* A fresh segment's reach: 0, all accessible but not yet guarded -- its
 * first page (the same call's) sets it, with the guard of the rest, in one
 * mprotect.  (The hardened build: its first MiB, where its pages lie,
 * decommitted past it already by hak_segment_alloc.) */
static void hak_segment_reach_fresh(hak_segment_t *seg) {
    seg->reach = HAK_HARDENED_ENABLED ? (uint32_t)HAK_HARDENED_USED : 0;
}

static HAK_NOINLINE bool hak_segment_reach_grow(hak_segment_t *seg, size_t need) {
    size_t to = seg->reach ? seg->reach : HAK_REACH_FIRST;
    if (seg->kind == HAK_PAGE_LARGE) to = hak_round_up(need, HAK_SLICE_SIZE);   /* a span's end */
    while (to < need) to <<= 1;
    if (to > HAK_SEGMENT_SIZE) to = HAK_SEGMENT_SIZE;
    if (seg->reach == 0) {   /* the first page of a fresh segment: no-access past it */
        bool ok = to < HAK_SEGMENT_SIZE && hak_os_guard((uint8_t *)seg + to, HAK_SEGMENT_SIZE - to);
        seg->reach = (uint32_t)(ok ? to : HAK_SEGMENT_SIZE);   /* (refused: all accessible) */
        return true;
    }
    uint8_t *at = (uint8_t *)seg + seg->reach;
    size_t rest = HAK_SEGMENT_SIZE - seg->reach;
    if (!hak_os_unguard(at, to - seg->reach)) {
        to = HAK_SEGMENT_SIZE;
        if (!hak_os_unguard(at, rest) && !hak_os_commit(at, rest)) return false;
    }
    seg->reach = (uint32_t)to;
    return true;
}

/* [seg, end) accessible (slot lock held): false if the kernel refused
 * (nothing changed then) */
static inline bool hak_segment_open(hak_segment_t *seg, const uint8_t *end) {
    size_t need = (size_t)(end - (const uint8_t *)seg);
    if (hak_likely(need <= seg->reach)) return true;
    return hak_segment_reach_grow(seg, need);
}

/* fresh: the segment comes straight from the OS, its header already zero
 * (not written: a new thread's first segment touches only the header's
 * pages it uses) */
static void hak_segment_format(hak_segment_t *seg, hak_page_kind_t kind, bool fresh) {
    bool large = kind == HAK_PAGE_LARGE;
    unsigned shift = large ? HAK_SLICE_SHIFT : hak_kind_shift(kind);
    /* (the hardened build: pages in the first MiB only, HAK_HARDENED_USED) */
    unsigned count = HAK_HARDENED_ENABLED ? (unsigned)(HAK_HARDENED_USED >> shift) : 1u << (HAK_SEGMENT_SHIFT - shift);
    uint32_t reach = seg->reach;                /* (what the memory is, not the kind) */
    if (!fresh) memset(seg, 0, hak_segment_header_size(count));
    seg->reach = reach;
    seg->kind = (uint8_t)kind;
    seg->page_shift = (uint8_t)shift;
    seg->page_count = (uint16_t)count;
    seg->first_page = kind == HAK_PAGE_SMALL;   /* slot 0: the header (hak_types.h) */
    seg->map_size = HAK_SEGMENT_SIZE;
    hak_segment_set_slices(seg);
    if (large) {                                /* one free span of every slice */
        unsigned slices = HAK_HARDENED_ENABLED ? count : HAK_SLICES;
        hak_span_map(seg, 0, slices);
        seg->free_slices = (uint8_t)slices;
    }
}

/* The 64 KiB slices a cached segment's dirty slots cover, before its header
 * is formatted for another kind. */
static uint64_t hak_segment_dirty_slices(hak_segment_t *seg) {
    uint64_t mask = 0;
    unsigned per = 1u << (seg->page_shift - HAK_SLICE_SHIFT);
    for (unsigned i = 0; i < seg->page_count && i < HAK_MAX_PAGES_PER_SEGMENT; i++) {
        const hak_page_t *pg = &seg->pages[i];
        if (!pg->needs_purge) continue;
        unsigned n = (unsigned)((((size_t)pg->dirty_kb << 10) + ((size_t)1 << HAK_SLICE_SHIFT) - 1) >> HAK_SLICE_SHIFT);
        if (n > per) n = per;
        mask |= (n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1)) << (i * per);
    }
    return mask;
}

/* A segment for heap (slot lock held): from the cache -- a dirty one of this
 * kind keeps its slot descriptors, so its dirty slots are known; a dirty one
 * of another kind marks the new slots that overlap old dirty ones -- or
 * fresh from the OS. */
static hak_segment_t *hak_segment_alloc(hak_heap_t *heap, unsigned cls, uint64_t now) {
    hak_page_kind_t kind = hak_class_kind(cls);
    hak_cached_state_t state = HAK_CACHED_CLEAN;
    hak_segment_t *seg = hak_cache_segment_take(kind, &state);
    bool fresh = !seg;
    if (!seg) {
        seg = hak_os_map_aligned(HAK_SEGMENT_SIZE, HAK_SEGMENT_SIZE);
        if (!seg) return NULL;
        /* no transparent huge pages, whatever the system's mode: a segment
         * is filled and purged a 4 KiB OS page at a time, and with THP
         * "always" a 2 MiB page under a few small pages multiplied RSS
         * (docs/memory-return.md, "Transparent huge pages") */
        (void)hak_os_hugepage(seg, HAK_SEGMENT_SIZE, false);
        /* the hardened build: a guard page between the header and the
         * pages, kept while the segment is cached (where it lies does not
         * depend on the kind); not with OS pages larger than the guard */
        if (HAK_HARDENED_ENABLED && hak_os_page_size() <= HAK_HARDENED_GUARD)
            hak_os_guard((uint8_t *)seg + HAK_HARDENED_GUARD_AT, HAK_HARDENED_GUARD);
        /* and no-access past its first MiB, where no page lies (far
         * overflows fault there; HAK_HARDENED_USED) */
        if (HAK_HARDENED_ENABLED)
            hak_os_decommit((uint8_t *)seg + HAK_HARDENED_USED, HAK_SEGMENT_SIZE - HAK_HARDENED_USED);
        /* the release build: no-access past its first page (its reach) */
        hak_segment_reach_fresh(seg);
    }
    if (state == HAK_CACHED_SAME) {
        seg->next = seg->prev = NULL;
        seg->in_free_list = false;
        seg->used_pages = 0;
    } else {
        uint64_t dirty = state == HAK_CACHED_OTHER ? hak_segment_dirty_slices(seg) : 0;
        int64_t was_clean = fresh ? 0 : seg->clean_kb;    /* (the format clears it) */
        hak_segment_format(seg, kind, fresh);
        unsigned per = 1u << (seg->page_shift - HAK_SLICE_SHIFT);
        uint64_t unit = per >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << per) - 1);
        uint32_t clean = hak_segment_clean_full_kb(seg);
        for (unsigned i = seg->first_page; dirty && i < seg->page_count; i++) {
            if (dirty & (unit << (i * per))) {
                seg->pages[i].needs_purge = 1;     /* hak_purge_segment_joined counts it */
                seg->pages[i].freed_at_ms = now;
                seg->pages[i].dirty_kb = hak_slot_kb(seg);
                clean -= hak_slot_kb(seg);
            }
        }
        seg->clean_kb = (uint32_t)was_clean;
        hak_segment_clean(seg, (int64_t)clean - was_clean);
    }
    seg->heap = heap;
    if (!fresh) hak_purge_segment_joined(heap, seg, now);   /* (a fresh one has no dirty slot) */
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

/* An empty segment leaves heap (slot lock held) for the process-wide cache,
 * its dirty slots still marked in its header, or goes back to the OS. */
static void hak_segment_release(hak_heap_t *heap, hak_segment_t *seg, bool leaving) {
    if (HAK_DEBUG_ENABLED) {   /* every slot is free: the clean ones are those not dirty (and the
                                  hardened build's no-access rest past the slots) */
        uint32_t kb = (uint32_t)((HAK_SEGMENT_SIZE - ((size_t)seg->page_count << seg->page_shift)) >> 10);
        for (unsigned i = seg->first_page; i < seg->page_count; i++) kb += seg->pages[i].needs_purge ? 0 : hak_slot_kb(seg);
        if (kb != seg->clean_kb) hak_fatal("hak_segment_release", "clean_kb does not match the slots", seg);
    }
    hak_seglist_remove(heap, seg);
    hak_purge_segment_left(heap, seg);
    hak_segment_counted(-1);
    seg->heap = NULL;
    hak_segmap_set(seg, HAK_TAG_SHARED);
    if (!hak_cache_segment_put(seg, leaving)) {
        hak_segmap_set(seg, 0);
        hak_count_clean(-(int64_t)seg->clean_kb * 1024);
        hak_os_unmap(seg, HAK_SEGMENT_SIZE);
    }
}

/* ---- page slots ---- */

void hak_segment_init_page(hak_segment_t *seg, hak_page_t *page, unsigned cls) {
    size_t bsize = hak_class_size(cls), len;
    uint8_t *start = hak_segment_page_area(seg, page, &len);
    /* Every block of every page is aligned to the largest power of two,
     * up to 64 KiB, that divides its block size: what an aligned
     * allocation relies on (hak_aligned_plain).  Slot 0, after the header,
     * needs care: a medium page there has its blocks end at the slot's end
     * (as many as from the header on); a large page's blocks start at its
     * span's second slice (a start that does not depend on the class:
     * hak_page_reclass gives the first block a new class in place; the rest
     * of slice 0 is never touched). */
    if (seg->kind == HAK_PAGE_LARGE) {
        len += ((size_t)page->span - 1) << HAK_SLICE_SHIFT;
        if (page == &seg->pages[0]) {
            start = (uint8_t *)seg + HAK_SLICE_SIZE;
            len = ((size_t)page->span - 1) << HAK_SLICE_SHIFT;
        }
    } else if (page == &seg->pages[0]) {
        size_t slack = len % bsize;
        start += slack;
        len -= slack;
    }
    page->free = page->local_free = NULL;
    page->used = 0;
    page->rotated = 0;
    page->class_idx = (uint8_t)cls;
    page->kind = seg->kind;
    /* hak_page_reclass formats a page that is in use already, outside the
     * slot lock the purger reads in_use under (hak_slot_clean): no store
     * then (TSan: tsan.stress.purger.clean) */
    if (!page->in_use) page->in_use = 1;
    page->start = start;
    page->block_size = bsize;
    page->reserved = (uint32_t)(len / bsize);
    page->area = (size_t)page->reserved * bsize;
    HAK_SET_RELAXED(page->capacity, 0);
    page->div_magic = page->local_magic = hak_div_magic(bsize);
    page->div_step = page->div_magic * bsize;       /* mod 2^64 */
    page->free_key = page->local_key = hak_page_new_key();
    if (hak_span_has_canary(page)) hak_span_seal(page);   /* large: the canary at the span's end */
    hak_page_set_flags(page, 0);
    atomic_store_explicit(&page->xthread_free, 0, memory_order_relaxed);
    page->next = page->prev = NULL;
}

/* ---- spans: taking and giving back (slot lock held) ---- */

static unsigned hak_span_dirty(const hak_segment_t *seg, unsigned from, unsigned n) {
    unsigned d = 0;
    for (unsigned j = from; j < from + n; j++) d += seg->pages[j].needs_purge;
    return d;
}

/* Take slices [at, at + n) out of the free span headed by head. */
static void hak_span_take(hak_heap_t *heap, hak_segment_t *seg, unsigned head, unsigned at, unsigned n,
                          uint64_t now) {
    unsigned len = seg->pages[head].span;
    if (at > head) hak_span_map(seg, head, at - head);                 /* free part before */
    if (at + n < head + len) hak_span_map(seg, at + n, head + len - at - n);   /* and after */
    for (unsigned j = at; j < at + n; j++) hak_purge_slot_taken(heap, seg, &seg->pages[j], now);
    hak_span_map(seg, at, n);
    seg->free_slices = (uint8_t)(seg->free_slices - n);
}

/* A span for a page of class cls in one of the heap's large segments: the
 * free span that fits most tightly, and in it the end with more committed
 * slices.  False if none fits; else *seg_out, *at_out (its first slice),
 * *head_out (the free span it lies in) and *need_out (its slices). */
static bool hak_span_best(hak_heap_t *heap, unsigned cls, hak_segment_t **seg_out, unsigned *head_out,
                          unsigned *at_out, unsigned *need_out) {
    size_t bsize = hak_class_size(cls);
    hak_segment_t *best_seg = NULL;
    unsigned best = 0, best_len = 0, best_need = 0;
    for (hak_segment_t *seg = heap->segs[HAK_PAGE_LARGE].first; seg; seg = seg->next) {
        for (unsigned i = 0; i < HAK_SEG_SLICES(seg); i += seg->pages[i].span) {
            const hak_page_t *h = &seg->pages[i];
            if (h->in_use) continue;
            unsigned need = hak_span_need(seg, i, bsize);
            if (need == 0 || h->span < need) continue;
            if (!best_seg || h->span < best_len) { best_seg = seg; best = i; best_len = h->span; best_need = need; }
            if (h->span == need) break;
        }
        if (best_seg && best_len == best_need) break;
    }
    if (!best_seg) return false;
    hak_segment_t *seg = best_seg;
    unsigned at = best;
    if (best_len > best_need) {                 /* the end may hold more committed slices */
        unsigned end_need = hak_span_need(seg, best + best_len - best_need, bsize);
        unsigned end_at = best + best_len - end_need;
        if (end_need && end_at > best &&
            hak_span_dirty(seg, end_at, end_need) > hak_span_dirty(seg, best, best_need)) {
            at = end_at; best_need = end_need;
        }
    }
    *seg_out = seg; *head_out = best; *at_out = at; *need_out = best_need;
    return true;
}

static uint64_t hak_kept_release_classes(hak_heap_t *heap, uint64_t now, uint64_t cut, uint64_t delay,
                                         unsigned lo, unsigned hi);

/* Take the span hak_span_best picks; NULL if none fits.  A span that is not
 * all committed would fault fresh memory in: then the large pages other
 * classes keep (hak_page_retire) go back first, to merge with the free
 * spans, and the pick is made again. */
static hak_page_t *hak_span_find(hak_heap_t *heap, unsigned cls, uint64_t now) {
    hak_segment_t *seg;
    unsigned head, at, need;
    bool found = hak_span_best(heap, cls, &seg, &head, &at, &need);
    uint32_t kept = heap->kept_count;
    if (kept && (!found || hak_span_dirty(seg, at, need) < need)) {
        hak_kept_release_classes(heap, now, 0, UINT64_MAX, HAK_CLASS_MEDIUM_LAST + 1, HAK_CLASS_COUNT - 1);
        if (heap->kept_count != kept) found = hak_span_best(heap, cls, &seg, &head, &at, &need);
    }
    if (!found) return NULL;
    if (!hak_segment_open(seg, (uint8_t *)seg + ((size_t)(at + need) << HAK_SLICE_SHIFT))) return NULL;
    hak_span_take(heap, seg, head, at, need, now);
    return &seg->pages[at];
}

/* Give back page's span, marking the slices it touched dirty, and merge it
 * with free neighbours; returns the merged span's head. */
static void hak_span_free(hak_heap_t *heap, hak_segment_t *seg, hak_page_t *page, uint8_t *carved_end,
                          uint64_t now) {
    unsigned head = (unsigned)(page - seg->pages), n = page->span;
    for (unsigned j = head; j < head + n; j++) {
        uint8_t *lo = (uint8_t *)seg + ((size_t)j << HAK_SLICE_SHIFT);
        size_t used = carved_end > lo ? (size_t)(carved_end - lo) : 0;
        if (used > HAK_SLICE_SIZE) used = HAK_SLICE_SIZE;
        hak_page_t *sl = &seg->pages[j];
        sl->in_use = 0;
        if (used || sl->dirty_kb) hak_purge_slot_freed(heap, seg, sl, used, now, false);
        else hak_segment_clean(seg, hak_slot_kb(seg));      /* taken clean, left untouched */
    }
    seg->free_slices = (uint8_t)(seg->free_slices + n);
    unsigned next = head + n;
    if (next < HAK_SEG_SLICES(seg) && !seg->pages[next].in_use) n += seg->pages[next].span;
    if (head > 0) {
        hak_page_t *prev = seg->slice_page[head - 1];
        if (!prev->in_use) { n += prev->span; head = (unsigned)(prev - seg->pages); }
    }
    hak_span_map(seg, head, n);
}

static void hak_segment_slot_back(hak_heap_t *heap, hak_page_t *page, uint64_t now, bool decay);

/* Slot lock held: the kept page *pp leaves its class's kept list. */
static hak_page_t *hak_kept_unlink(hak_heap_t *heap, hak_page_t **pp) {
    hak_page_t *p = *pp;
    *pp = p->next;
    p->next = NULL;
    __atomic_store_n(&heap->kept_count, heap->kept_count - 1, __ATOMIC_RELAXED);   /* the owner peeks */
    return p;
}

/* Slot lock held: if pg is a page its class keeps empty (heap->kept), give
 * its slot back, as of when it emptied. */
static void hak_kept_drop_locked(hak_heap_t *heap, hak_page_t *pg) {
    for (hak_page_t **pp = &heap->kept[pg->class_idx]; *pp; pp = &(*pp)->next) {
        if (*pp != pg) continue;
        hak_segment_slot_back(heap, hak_kept_unlink(heap, pp), pg->freed_at_ms, false);
        return;
    }
}

/* The span of a large page whose only live block is its first one, made
 * large enough for one block of class cls: it first takes free slices
 * after it if it must (hak_page_reclass, hak_page.c, which then gives the
 * page its new class).  False: no room after the span. */
bool hak_segment_span_grow(hak_heap_t *heap, hak_page_t *page, unsigned cls) {
    hak_segment_t *seg = hak_segment_of(page);
    unsigned head = (unsigned)(page - seg->pages), need = hak_span_need(seg, head, hak_class_size(cls));
    size_t room = ((size_t)page->span << HAK_SLICE_SHIFT) - (size_t)(page->start - ((uint8_t *)seg + ((size_t)head << HAK_SLICE_SHIFT)));
    if (room < hak_class_size(cls)) {
        /* one block of the new class must fit: take the free slices after the span */
        size_t bytes = (size_t)(page->start - (uint8_t *)seg) + hak_class_size(cls);
        need = (unsigned)((bytes + HAK_SLICE_SIZE - 1) >> HAK_SLICE_SHIFT) - head;
        unsigned next = head + page->span;
        uint64_t now = hak_os_now_ms();
        hak_slots_lock(heap);
        /* a page its class keeps empty there goes back first */
        if (next < HAK_SEG_SLICES(seg) && seg->pages[next].in_use) hak_kept_drop_locked(heap, &seg->pages[next]);
        bool ok = next < HAK_SEG_SLICES(seg) && !seg->pages[next].in_use && page->span + seg->pages[next].span >= need &&
                  hak_segment_open(seg, (uint8_t *)seg + ((size_t)(head + need) << HAK_SLICE_SHIFT));
        if (ok) {
            unsigned more = need - page->span;
            hak_span_take(heap, seg, next, next, more, now);
            hak_span_map(seg, head, need);
            if (seg->free_slices == 0 && seg->in_free_list) hak_seglist_remove(heap, seg);
        }
        hak_slots_unlock(heap);
        if (!ok) return false;
    }
    return true;
}

/* The heap this thread collected before it first needed new memory: a
 * heap adopted from an exited thread may hold pages whose blocks were all
 * freed remotely after that thread's last collect -- memory the new thread
 * would otherwise leave idle while it takes more. */
static HAK_TLS hak_heap_t *hak_tls_collected;
hak_segment_hooks_t hak_segment_hooks;   /* hak_internal.h */
/* set while that collect runs: what it frees is the last thread's memory,
 * about to serve this one (hak_heap_leaving) */
HAK_TLS bool hak_tls_taking_over;

/* Does the heap have a free slot (or span) for class cls? */
static bool hak_segment_has_room(hak_heap_t *heap, hak_page_kind_t kind, unsigned cls) {
    if (kind != HAK_PAGE_LARGE) return heap->segs[kind].first != NULL;
    size_t bsize = hak_class_size(cls);
    for (hak_segment_t *seg = heap->segs[HAK_PAGE_LARGE].first; seg; seg = seg->next)
        for (unsigned i = 0; i < HAK_SEG_SLICES(seg); i += seg->pages[i].span) {
            unsigned need = hak_span_need(seg, i, bsize);
            if (!seg->pages[i].in_use && need && seg->pages[i].span >= need) return true;
        }
    return false;
}

hak_page_t *hak_segment_page_alloc(hak_heap_t *heap, unsigned cls) {
    hak_page_kind_t kind = hak_class_kind(cls);
    hak_limit_check();   /* the soft memory limit: no lock of hakmem's is held here */
    /* (not for a public heap: it has no previous thread to take over from) */
    /* the heap's segment lists and slots are read under the slot lock: the
     * purger and malloc_trim write them too (a kept page given back) */
    bool room = true;
    if (hak_tls_collected != heap && !heap->pub_magic) {
        hak_slots_lock(heap);
        room = hak_segment_has_room(heap, kind, cls);
        hak_slots_unlock(heap);
    }
    if (!room) {
        hak_tls_collected = heap;
        hak_tls_taking_over = true;
        hak_segment_hooks.collect(heap, false);
        hak_tls_taking_over = false;
    }
    /* abandoned heaps' empty segments go to the cache when swept: sweep
     * when the cache has none (a sweep keeps those heaps from being adopted
     * meanwhile) */
    hak_slots_lock(heap);
    bool none = heap->segs[kind].first == NULL;
    hak_slots_unlock(heap);
    if (none && !hak_cache_segment_any()) hak_segment_hooks.sweep(false);
    uint64_t now = hak_os_now_ms();
    hak_slots_lock(heap);
    hak_page_t *page = NULL;
    hak_segment_t *seg;
    if (kind == HAK_PAGE_LARGE) {
        page = hak_span_find(heap, cls, now);
        if (!page) {
            seg = hak_segment_alloc(heap, cls, now);
            if (!seg) { hak_slots_unlock(heap); return NULL; }
            hak_seglist_push(heap, seg);
            page = hak_span_find(heap, cls, now);
            if (!page) { hak_slots_unlock(heap); return NULL; }   /* (no reach: the kernel refused) */
        }
        seg = hak_segment_of(page);
        seg->used_pages++;
        if (seg->free_slices == 0) hak_seglist_remove(heap, seg);
    } else {
        seg = heap->segs[kind].first;
        if (!seg) {
            seg = hak_segment_alloc(heap, cls, now);
            if (!seg) { hak_slots_unlock(heap); return NULL; }
            hak_seglist_push(heap, seg);
        }
        /* Prefer a free slot whose memory is still committed (not yet purged):
         * reusing it touches no new memory and saves the page faults.  Best
         * is one this class had last: its blocks lie where they lay, so the
         * new tenure touches the OS pages the last one touched and no others
         * (class_idx stays in a free slot's descriptor).  Another class's
         * dirty slot puts its blocks elsewhere, and its links land on OS pages
         * the old tenure left alone: over many tenures every dirty slot
         * became as touched as its most touched class (larson: ~1 MB of RSS
         * per heap against ~430 KB carved; docs/design.md, "Memory return"). */
        hak_page_t *dirty = NULL;
        bool any_dirty = seg->purge_pending != 0;   /* else the first free slot: the scan reads no
                                                       more descriptors (a fresh segment's are
                                                       untouched zero pages) */
        for (unsigned i = seg->first_page; i < seg->page_count; i++) {
            hak_page_t *pg = &seg->pages[i];
            if (pg->in_use) continue;
            if (pg->needs_purge) {
                if (pg->class_idx == cls) { dirty = pg; break; }
                if (!dirty) dirty = pg;
            } else if (!page) {
                page = pg;
                if (!any_dirty) break;
            }
        }
        if (dirty) page = dirty;
        if (HAK_DEBUG_ENABLED && !page) hak_fatal("hak_segment_page_alloc", "segment in free list has no free page", seg);
        size_t len;
        uint8_t *area = hak_segment_page_area(seg, page, &len);
        if (!hak_segment_open(seg, area + len)) { hak_slots_unlock(heap); return NULL; }   /* (ENOMEM) */
        seg->used_pages++;
        if (seg->used_pages == seg->page_count - seg->first_page) hak_seglist_remove(heap, seg);
        hak_purge_slot_taken(heap, seg, page, now);
    }
    hak_segment_init_page(seg, page, cls);
    hak_slots_unlock(heap);
    hak_count_page(cls, 1, page->area);
    return page;
}

/* The hardened build: a page whose slot goes back leaves no byte but zero
 * behind, so that the next page carved there -- of any class, in any heap
 * -- hands out zeroed blocks and no word of metadata.  Its blocks are all
 * free, and the hardened layer zeroed each at its free, so only their
 * free-list words are left (the link and the key, or an aligned block's
 * mark, in each carved block's first 16 bytes): one 16-byte store a block.
 * A public heap's blocks are not hardened (never zeroed: the heap is
 * destroyed with its blocks' data in them): its carved bytes are zeroed
 * whole, but for the pages that were never touched (hak_os_zero_touched). */
static void hak_segment_scrub(hak_heap_t *heap, hak_page_t *page) {
    size_t bsize = page->block_size, cap = HAK_RELAXED(page->capacity);
    uint8_t *p = page->start, *end = p + cap * bsize;
    if (cap == 0) return;
    if (heap->pub_magic) {
        size_t ps = hak_os_page_size();
        uint8_t *lo = (uint8_t *)hak_round_up((uintptr_t)p, ps), *hi = (uint8_t *)((uintptr_t)end & ~(ps - 1));
        if (lo >= hi) { memset(p, 0, (size_t)(end - p)); return; }
        memset(p, 0, (size_t)(lo - p));
        hak_os_zero_touched(lo, (size_t)(hi - lo));
        memset(hi, 0, (size_t)(end - hi));
        return;
    }
    for (; p < end; p += bsize) memset(p, 0, 16);
}

/* The slot of page goes back to its segment (slot lock held).  The caller
 * may write the page's fields: its owner, or whoever holds the slot lock
 * for a kept page (in no queue, hak_segment_page_keep).  now: when the slot
 * became unused; decay: apply the decay (false from inside it). */
static void hak_segment_slot_back(hak_heap_t *heap, hak_page_t *page, uint64_t now, bool decay) {
    hak_segment_t *seg = hak_segment_of(page);
    if (HAK_HARDENED_ENABLED) hak_segment_scrub(heap, page);
    /* the end of what this tenure carved (and so touched) */
    uint8_t *carved_end = page->start + (size_t)HAK_RELAXED(page->capacity) * page->block_size;
    if (hak_span_has_canary(page)) carved_end = hak_span_end(page);   /* and the canary there */
    size_t used = (size_t)(carved_end - ((uint8_t *)seg + ((size_t)(page - seg->pages) << seg->page_shift)));
    hak_count_page(page->class_idx, -1, page->area);
    page->free = page->local_free = NULL;
    page->used = 0;
    HAK_SET_RELAXED(page->capacity, 0);   /* no block of a released slot passes a free check */
    hak_page_set_flags(page, 0);
    seg->used_pages--;
    if (!seg->in_free_list) hak_seglist_push(heap, seg);
    /* An empty segment goes to the cache -- unless it is the heap's only
     * segment of its kind: keeping that one (its free slots purged by the
     * decay like any others) stops a heap whose use of a kind goes up and
     * down from taking and giving back a segment each time.
     * hak_heap_collect releases it. */
    bool release = false;
    if (seg->used_pages == 0) {
        hak_segment_list_t *l = &heap->segs[seg->kind];
        release = !(l->first == seg && seg->next == NULL);
    }
    /* a heap leaving its thread keeps its free slots for the next thread:
     * only age purges them (hak_heap_leaving) */
    bool leaving = hak_heap_leaving(heap);
    if (seg->kind == HAK_PAGE_LARGE) {
        hak_span_free(heap, seg, page, carved_end, now);
        if (decay && !release && !leaving) hak_purge_heap_check(heap, now);
    } else {
        page->in_use = 0;
        hak_purge_slot_freed(heap, seg, page, used, now, decay && !release && !leaving);
    }
    if (release) hak_segment_release(heap, seg, leaving);
}

void hak_segment_page_free(hak_heap_t *heap, hak_page_t *page) {
    uint64_t now = hak_os_now_ms();
    hak_slots_lock(heap);
    hak_segment_slot_back(heap, page, now, true);
    hak_slots_unlock(heap);
    hak_purger_kick();
    hak_limit_relax();
}

/* ---- kept pages ----
 * An emptied medium or large page its owner keeps, still formatted for its class
 * (hak_page_retire), waits in no queue on heap->kept[its class], linked by
 * next and written only under the slot lock: its owner takes it back for a new page
 * of its class (hak_segment_kept_take), and whoever holds the lock -- the
 * owner's own decay, malloc_trim from any thread (HAK_PURGE_ALL), the
 * background purger (age) -- gives it back to its segment
 * (hak_segment_kept_release_locked).  No block of a kept page is live, so
 * nothing but these touches it. */

/* Keep page (out of its queue, used == 0) unless its class keeps max
 * already; then the caller gives it back. */
bool hak_segment_page_keep(hak_heap_t *heap, hak_page_t *page, unsigned max) {
    uint64_t now = hak_os_now_ms();
    unsigned n = 0;
    hak_page_t **head = &heap->kept[page->class_idx];
    hak_slots_lock(heap);
    for (hak_page_t *p = *head; p && n < max; p = p->next) n++;
    if (n >= max) { hak_slots_unlock(heap); return false; }
    page->freed_at_ms = now;
    page->prev = NULL;
    page->next = *head;
    *head = page;
    __atomic_store_n(&heap->kept_count, heap->kept_count + 1, __ATOMIC_RELAXED);   /* the owner peeks */
    /* the decay of this heap: kept pages that stayed empty for the delay go
     * back (hak_purge_heap_locked), and this one is due after it */
    uint64_t due = heap->purge_due_ms;
    if (due != 0 && now >= due)
        hak_purge_heap_locked(heap, now, hak_heap_leaving(heap) ? HAK_PURGE_AGE : HAK_PURGE_DECAY);
    hak_purge_kept_due(heap, now);
    hak_slots_unlock(heap);
    hak_purger_kick();
    return true;
}

/* A kept page of class cls, out of heap->kept (NULL: none); the owner's. */
hak_page_t *hak_segment_kept_take(hak_heap_t *heap, unsigned cls) {
    if (__atomic_load_n(&heap->kept_count, __ATOMIC_RELAXED) == 0) return NULL;
    hak_slots_lock(heap);
    hak_page_t *p = heap->kept[cls] ? hak_kept_unlink(heap, &heap->kept[cls]) : NULL;
    hak_slots_unlock(heap);
    return p;
}

/* Slot lock held: give back the kept pages empty for cut ms or more (their
 * slots freed when they became empty); returns when the next of the others
 * has been empty for delay ms (0: none left). */
static uint64_t hak_kept_release_classes(hak_heap_t *heap, uint64_t now, uint64_t cut, uint64_t delay,
                                         unsigned lo, unsigned hi) {
    uint64_t next = 0;
    for (unsigned c = lo; c <= hi; c++) {
        hak_page_t **pp = &heap->kept[c], *p;
        while ((p = *pp) != NULL) {
            uint64_t at = p->freed_at_ms < now ? p->freed_at_ms : now;
            if (now - at >= cut) {
                hak_kept_unlink(heap, pp);
                /* a large page kept in vain (empty for the delay, or its class
                 * made no request for HAK_LARGE_STALE large requests): the
                 * class stops keeping until it cycles again (hak_find_page) */
                if (p->kind == HAK_PAGE_LARGE &&
                    (cut != 0 || __atomic_load_n(&heap->large_seq, __ATOMIC_RELAXED) -
                                     __atomic_load_n(&heap->large_freed_seq[c], __ATOMIC_RELAXED) > HAK_LARGE_STALE))
                    __atomic_fetch_and(&heap->large_cycling[c >> 6], ~((uint64_t)1 << (c & 63)), __ATOMIC_RELAXED);
                hak_segment_slot_back(heap, p, at, false);
            } else {
                if (delay != UINT64_MAX && (next == 0 || at + delay < next)) next = at + delay;
                pp = &p->next;
            }
        }
    }
    return next;
}

uint64_t hak_segment_kept_release_locked(hak_heap_t *heap, uint64_t now, uint64_t cut, uint64_t delay) {
    return hak_kept_release_classes(heap, now, cut, delay, HAK_CLASS_SMALL_LAST + 1, HAK_CLASS_COUNT - 1);
}

/* Give back every kept page (hak_heap_collect, hakmem_heap_destroy). */
void hak_segment_kept_release_all(hak_heap_t *heap) {
    if (__atomic_load_n(&heap->kept_count, __ATOMIC_RELAXED) == 0) return;
    hak_slots_lock(heap);
    hak_segment_kept_release_locked(heap, hak_os_now_ms(), 0, UINT64_MAX);
    hak_slots_unlock(heap);
    hak_purger_kick();
}

/* Release the heap's empty segments (kept as the only one of their kind). */
void hak_segment_release_empty(hak_heap_t *heap) {
    bool leaving = hak_heap_leaving(heap);
    /* A thread's exit handler keeps one empty segment in its heap, for the
     * thread that adopts the heap next: that thread then starts with no
     * mapping, no header to format and pages already committed, and the
     * exiting one unmaps nothing (a munmap at every thread exit doubled the
     * TLB shootdowns of a pool's end: docs/design.md, "Thread start and
     * end").  An abandoned heap keeps at most this one; a sweep (a heap that
     * needs a segment finds the cache empty) gives it to the cache, and the
     * purger ages its free slots as it does an abandoned heap's others. */
    bool keep_one = hak_tls_exiting && !heap->pub_magic;
    hak_slots_lock(heap);
    for (int k = 0; k < HAK_PAGE_KINDS; k++) {
        hak_segment_t *seg = heap->segs[k].first;
        while (seg) {
            hak_segment_t *next = seg->next;
            if (seg->used_pages == 0) {
                if (keep_one) keep_one = false;
                else hak_segment_release(heap, seg, leaving);
            }
            seg = next;
        }
    }
    hak_slots_unlock(heap);
}

/* hakmem_heap_delete: segment seg, with pages in use, leaves heap from for
 * heap to (both the calling thread's), its free slots and their purge state
 * with it.  The caller moves its pages between the heaps' queues. */
void hak_segment_move(hak_heap_t *from, hak_heap_t *to, hak_segment_t *seg) {
    uint64_t now = hak_os_now_ms();
    hak_slots_lock(from);
    bool listed = seg->in_free_list;
    if (listed) hak_seglist_remove(from, seg);
    hak_purge_segment_left(from, seg);
    hak_slots_unlock(from);
    hak_slots_lock(to);
    seg->heap = to;
    hak_purge_segment_joined(to, seg, now);
    if (listed) hak_seglist_push(to, seg);
    hak_segmap_set(seg, to->tag);
    hak_slots_unlock(to);
}
