/* hak_account.c -- the memory account: every byte of hakmem's segments,
 * huge mappings and caches by what holds it (live blocks, free blocks in
 * pages in use, empty pages kept, the two caches, headers, memory returned
 * to the system), and how much of each is resident.  Computed when asked
 * (hakmem_stats_get, the report, mallinfo), from what the structures hold
 * already -- pages' used counts times their block size, huge blocks' sizes,
 * the slots' purge state, the caches' entries -- and mincore: nothing is
 * counted on the fast paths.
 *
 * The walk finds segments through the region map (hak_segmap_next skips the
 * blocks of it that never had an entry).  It holds the cache lock (no
 * segment moves between the cache and a heap) and the mapping lock (no
 * mapping is unmapped or moved: hak_os.c), so every header it reads stays
 * mapped; other threads may still allocate and free, so with other threads
 * at work the figures are a moment's approximation (the parts then need not
 * add up exactly). */
#include "hak_purge.h"
#include "hak_hardened.h"

/* Resident bytes of [lo, hi) (offsets into a region whose OS pages' mincore
 * bits are vec, from offset 0). */
static uint64_t hak_vec_resident(const unsigned char *vec, size_t lo, size_t hi, size_t ps) {
    uint64_t r = 0;
    for (size_t k = lo / ps; k * ps < hi; k++) {
        if (!(vec[k] & 1)) continue;
        size_t a = k * ps > lo ? k * ps : lo, b = (k + 1) * ps < hi ? (k + 1) * ps : hi;
        r += b - a;
    }
    return r;
}

/* One part of a region whose residency the caller has (vec, or NULL). */
static void hak_acct_add(hak_account_t *a, unsigned part, const unsigned char *vec, size_t lo, size_t hi) {
    if (hi <= lo) return;
    a->mapped[part] += hi - lo;
    if (vec) a->resident[part] += hak_vec_resident(vec, lo, hi, hak_os_page_size());
}

/* A page in use: live bytes of it are live blocks (resident first), the
 * rest free blocks; no live block: an empty page kept. */
static void hak_acct_page(hak_account_t *a, const unsigned char *vec, size_t lo, size_t hi, uint64_t live,
                          uint64_t blocks) {
    if (hi <= lo) return;
    if (blocks == 0) { hak_acct_add(a, HAK_PART_EMPTY, vec, lo, hi); return; }
    if (live > hi - lo) live = hi - lo;
    a->live_blocks += blocks;
    a->mapped[HAK_PART_LIVE] += live;
    a->mapped[HAK_PART_FREE] += hi - lo - live;
    if (vec) {
        uint64_t r = hak_vec_resident(vec, lo, hi, hak_os_page_size()), rl = r < live ? r : live;
        a->resident[HAK_PART_LIVE] += rl;
        a->resident[HAK_PART_FREE] += r - rl;
    }
}

/* The account reads the pages' fields (in_use, used, block_size,
 * needs_purge) while their owners change them with plain stores: a
 * statistic, exact only when the program is quiet, and never a pointer
 * followed (segments cannot be unmapped meanwhile: the mapping lock).  So
 * ThreadSanitizer is told not to instrument these readers. */
#if defined(__SANITIZE_THREAD__)
#define HAK_RACY_READER __attribute__((no_sanitize("thread"), noinline))
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HAK_RACY_READER __attribute__((no_sanitize("thread"), noinline))
#endif
#endif
#ifndef HAK_RACY_READER
#define HAK_RACY_READER
#endif

/* Live blocks of a page in use: its used count, less the remote frees
 * waiting on its list (blocks on the owner's delayed list still count). */
static HAK_RACY_READER uint64_t hak_acct_page_blocks(const hak_page_t *page) {
    uint32_t used = __atomic_load_n(&page->used, __ATOMIC_RELAXED);
    uint32_t pending = HAK_TF_COUNT(atomic_load_explicit(&page->xthread_free, memory_order_relaxed));
    uint32_t reserved = __atomic_load_n(&page->reserved, __ATOMIC_RELAXED);
    uint32_t n = used > pending ? used - pending : 0;
    return n < reserved ? n : reserved;
}

static bool hak_acct_incore(hak_account_t *a, const void *p, size_t size, unsigned char *vec) {
    if (!a->want_resident) return false;
    if (hak_os_incore(p, size, vec)) return true;
    a->resident_ok = false;
    return false;
}

/* A segment a heap holds: its header (metadata), then each page slot (or,
 * in a large segment, each span of slices) by its state. */
static HAK_RACY_READER void hak_acct_segment(hak_account_t *a, hak_segment_t *seg) {
    unsigned char vecbuf[HAK_SEGMENT_SIZE / HAK_ARCH_PAGE_MIN];
    const unsigned char *vec = hak_acct_incore(a, seg, HAK_SEGMENT_SIZE, vecbuf) ? vecbuf : NULL;
    unsigned shift = __atomic_load_n(&seg->page_shift, __ATOMIC_RELAXED);
    unsigned kind = __atomic_load_n(&seg->kind, __ATOMIC_RELAXED);
    a->segments++;
    if (kind >= HAK_PAGE_KINDS ||
        shift != (kind == HAK_PAGE_LARGE ? HAK_SLICE_SHIFT : hak_kind_shift((hak_page_kind_t)kind))) {
        hak_acct_add(a, HAK_PART_META, vec, 0, HAK_SEGMENT_SIZE);   /* a header being rewritten */
        return;
    }
    size_t len0;
    uint8_t *first = hak_segment_page_area(seg, &seg->pages[0], &len0);
    size_t hdr = (size_t)(first - (uint8_t *)seg);   /* the header's extent (hardened: its guard page too) */
    if (kind == HAK_PAGE_SMALL) hdr = hak_round_up(hdr, hak_os_page_size());   /* the rest of slot 0 is unused */
    hak_acct_add(a, HAK_PART_META, vec, 0, hdr);
    if (kind == HAK_PAGE_LARGE) {
        for (unsigned i = 0; i < HAK_MAX_PAGES_PER_SEGMENT;) {
            const hak_page_t *pg = &seg->pages[i];
            unsigned n = __atomic_load_n(&pg->span, __ATOMIC_RELAXED);
            if (n == 0 || n > HAK_MAX_PAGES_PER_SEGMENT - i) n = 1;
            size_t lo = (size_t)i << HAK_SLICE_SHIFT, hi = (size_t)(i + n) << HAK_SLICE_SHIFT;
            if (lo < hdr) lo = hdr;
            if (__atomic_load_n(&pg->in_use, __ATOMIC_RELAXED)) {
                uint64_t blocks = hak_acct_page_blocks(pg);
                hak_acct_page(a, vec, lo, hi, blocks * __atomic_load_n(&pg->block_size, __ATOMIC_RELAXED), blocks);
            } else {                              /* a free span: each slice keeps its purge state */
                for (unsigned j = i; j < i + n; j++) {
                    size_t slo = (size_t)j << HAK_SLICE_SHIFT;
                    hak_acct_add(a, seg->pages[j].needs_purge ? HAK_PART_EMPTY : HAK_PART_RETURNED, vec,
                                 slo > hdr ? slo : hdr, (size_t)(j + 1) << HAK_SLICE_SHIFT);
                }
            }
            i += n;
        }
        return;
    }
    unsigned count = 1u << (HAK_SEGMENT_SHIFT - shift);
    for (unsigned i = 0; i < count; i++) {
        const hak_page_t *pg = &seg->pages[i];
        size_t lo = (size_t)i << shift, hi = (size_t)(i + 1) << shift;
        if (lo < hdr) lo = hdr;
        if (i == 0 && kind == HAK_PAGE_SMALL) {   /* the header's slot: the rest is never used */
            hak_acct_add(a, HAK_PART_RETURNED, vec, lo, hi);
        } else if (__atomic_load_n(&pg->in_use, __ATOMIC_RELAXED)) {
            uint64_t blocks = hak_acct_page_blocks(pg);
            hak_acct_page(a, vec, lo, hi, blocks * __atomic_load_n(&pg->block_size, __ATOMIC_RELAXED), blocks);
        } else {
            hak_acct_add(a, pg->needs_purge ? HAK_PART_EMPTY : HAK_PART_RETURNED, vec, lo, hi);
        }
    }
}

/* Resident bytes of [lo, hi) of a mapping at p (a huge one may be large:
 * mincore a piece at a time). */
static uint64_t hak_acct_resident(hak_account_t *a, const uint8_t *p, size_t lo, size_t hi) {
    unsigned char vec[1024];
    size_t ps = hak_os_page_size(), chunk = sizeof vec * ps;
    uint64_t r = 0;
    for (size_t at = lo & ~(ps - 1); at < hi && a->resident_ok; at += chunk) {
        size_t end = hi - at < chunk ? hi : at + chunk;
        if (!hak_acct_incore(a, p + at, hak_round_up(end - at, ps), vec)) break;
        r += hak_vec_resident(vec, (lo > at ? lo : at) - at, end - at, ps);
    }
    return r;
}

/* [lo, hi) of a mapping at p to part; live bytes of it (from lo) to live
 * blocks, resident first. */
static void hak_acct_span(hak_account_t *a, const uint8_t *p, size_t lo, size_t hi, unsigned part, uint64_t live) {
    if (hi <= lo) return;
    if (live > hi - lo) live = hi - lo;
    a->mapped[HAK_PART_LIVE] += live;
    a->mapped[part] += hi - lo - live;
    if (!a->want_resident) return;
    uint64_t r = hak_acct_resident(a, p, lo, hi), rl = r < live ? r : live;
    a->resident[HAK_PART_LIVE] += rl;
    a->resident[part] += r - rl;
}

void hak_account_range(hak_account_t *a, const void *p, size_t size, unsigned part, uint64_t live) {
    hak_acct_span(a, (const uint8_t *)p, 0, size, part, live);
}

/* A huge block in use: header (and alignment padding) metadata, the block
 * (its usable size) live, the rest of its area -- room to grow in place,
 * pages an earlier, larger size may have touched -- free, what follows it
 * (the hardened build's no-access tail) returned. */
static HAK_RACY_READER void hak_acct_huge(hak_account_t *a, hak_segment_t *seg) {
    const hak_page_t *pg = &seg->pages[0];
    size_t map = __atomic_load_n(&seg->map_size, __ATOMIC_RELAXED);
    size_t off = (size_t)(__atomic_load_n(&pg->start, __ATOMIC_RELAXED) - (uint8_t *)seg);
    size_t area = __atomic_load_n(&pg->area, __ATOMIC_RELAXED);
    size_t used = __atomic_load_n(&pg->block_size, __ATOMIC_RELAXED);
    if (off > map) off = map;
    if (area > map - off) area = map - off;
    if (used > area) used = area;
    a->huge++;
    a->live_blocks++;
    a->live_huge += used;
    hak_acct_span(a, (uint8_t *)seg, 0, off, HAK_PART_META, 0);
    hak_acct_span(a, (uint8_t *)seg, off, off + used, HAK_PART_LIVE, used);
    hak_acct_span(a, (uint8_t *)seg, off + used, off + area, HAK_PART_FREE, 0);
    hak_acct_span(a, (uint8_t *)seg, off + area, map, HAK_PART_RETURNED, 0);
}

/* A cached segment: all of it while it may hold committed memory; once
 * purged, its header page (which stays) and the rest returned.  A cached
 * huge mapping: what may be committed, and the rest (never touched). */
static void hak_acct_cached(void *arg, hak_segment_t *seg, size_t size, size_t dirty, bool huge) {
    hak_account_t *a = arg;
    size_t keep = huge ? (dirty > hak_os_page_size() ? dirty : hak_os_page_size())
                       : (dirty ? size : hak_os_page_size());
    if (keep > size) keep = size;
    if (huge) a->huge_cached++;
    else a->segments_cached++;
    hak_acct_span(a, (uint8_t *)seg, 0, keep, huge ? HAK_PART_HUGECACHE : HAK_PART_SEGCACHE, 0);
    hak_acct_span(a, (uint8_t *)seg, keep, size, HAK_PART_RETURNED, 0);
}

/* Every segment and huge block in use, through the region map (cached ones
 * came from the cache's entries), the mapping lock held. */
static void hak_acct_walk(void *arg) {
    hak_account_t *a = arg;
    hak_os_maps_hold();
    for (size_t i = hak_segmap_next(0); i < HAK_SEGMAP_ENTRIES; i = hak_segmap_next(i + 1)) {
        uint16_t v = atomic_load_explicit(&hak_segmap[i], memory_order_acquire);
        if (v == HAK_TAG_NONE || (v & HAK_TAG_BACK)) continue;   /* a huge mapping's interior */
        hak_segment_t *seg = (hak_segment_t *)(i << HAK_SEGMENT_SHIFT);
        if (__atomic_load_n(&seg->kind, __ATOMIC_RELAXED) == HAK_PAGE_HUGE) {
            if (__atomic_load_n(&seg->pages[0].in_use, __ATOMIC_RELAXED)) hak_acct_huge(a, seg);
        } else if (__atomic_load_n(&seg->heap, __ATOMIC_ACQUIRE)) {
            hak_acct_segment(a, seg);
        }                                          /* else cached, or between the cache and a heap */
    }
    hak_os_maps_release();
}

void hak_account_segments(hak_account_t *a) {
    hak_cache_account(hak_acct_cached, hak_acct_walk, a);
}
