/* hak_purge.c -- purging and the caches: when free memory goes back to the
 * OS (the segments layer; the rule is stated in hak_purge.h and
 * docs/design.md, "Memory return").
 *
 * Three pools hold free memory that is still committed ("dirty"):
 *   - free page slots in a heap's segments (per heap, under its slot lock);
 *   - the segment cache: empty 4 MiB segments, process-wide;
 *   - the huge cache: freed huge mappings, process-wide.
 * Each pool keeps dirty memory for at most the purge delay D and holds at
 * most max(floor, demand) bytes dirty, purging the oldest first; the demand
 * is what the program took again from that pool lately (bytes, halving
 * every D; the limit is a multiple of it, hak_purge.h); the huge cache also
 * stays within the program's peak of huge memory in use.  Purging runs
 * inside allocator calls (a slot freed or taken, a
 * segment or huge block cached or taken, the malloc slow path) and, when
 * HAKMEM_BACKGROUND_PURGE=1, in one background thread that also reaches idle
 * threads.  malloc_trim(0) purges every pool at once. */
#include "hak_purge.h"
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- the decay ---- */

#define HAK_DEMAND_MAX ((uint64_t)1 << 44)

/* hakmem_option_set may change the delay while it is used: each read is one
 * load, and a -1 read after hak_purging() said yes counts as the longest
 * delay (an hour), never as 2^64 - 1 ms, which would wrap a due time.
 * The soft memory limit's pressure (hak_limit.c) makes the delay 0: every
 * pool purges what is freed at once, and neither cache keeps anything. */
static bool hak_purging(void) {
    return __atomic_load_n(&hak_opt.purge_delay_ms, __ATOMIC_RELAXED) >= 0 || hak_limit_pressed();
}
static uint64_t hak_delay_ms(void) {   /* when hak_purging() */
    if (hak_limit_pressed()) return 0;
    long d = __atomic_load_n(&hak_opt.purge_delay_ms, __ATOMIC_RELAXED);
    return d >= 0 ? (uint64_t)d : 3600000;
}

/* Halving every delay (at least every ms): 2^-x, with x = dt / D, is taken
 * as 2^-floor(x) times the chord 1 - frac(x) / 2. */
static uint64_t hak_decayed(uint64_t bytes, uint64_t at_ms, uint64_t now) {
    if (bytes == 0 || now <= at_ms || !hak_purging()) return bytes;
    uint64_t h = hak_delay_ms() ? hak_delay_ms() : 1, dt = now - at_ms, n = dt / h;
    if (n >= 44) return 0;
    bytes >>= n;
    return bytes - bytes * (dt % h) / (2 * h);
}

/* The demand of a pool: when the program takes memory from a pool that
 * holds `dirty` bytes, a pool of that size is in use -- plus the memory it
 * took again although the decay had purged it lately (regret, summed and
 * halving like the demand: the next cycle keeps that much more).  The
 * demand is the high-water mark of dirty + regret, halving every delay. */
static void hak_demand_note(uint64_t *hw, uint64_t *hw_at, uint64_t *rg, uint64_t *rg_at, uint64_t now,
                            uint64_t dirty, uint64_t regret) {
    uint64_t r = hak_decayed(*rg, *rg_at, now) + regret;
    if (r > HAK_DEMAND_MAX) r = HAK_DEMAND_MAX;
    *rg = r; *rg_at = now;
    uint64_t h = hak_decayed(*hw, *hw_at, now), c = dirty + r;
    *hw = c > h ? (c < HAK_DEMAND_MAX ? c : HAK_DEMAND_MAX) : h;
    *hw_at = now;
}

static uint64_t hak_floor_bytes(void) {
    return hak_opt.purge_budget_kb < 0 ? UINT64_MAX : (uint64_t)hak_opt.purge_budget_kb << 10;
}

/* What a pool may keep dirty: the floor, or 5/4 of the demand if larger. */
static uint64_t hak_keep_bytes(uint64_t demand_bytes, uint64_t demand_at, uint64_t now) {
    uint64_t f = hak_floor_bytes(), d = hak_decayed(demand_bytes, demand_at, now);
    d += d / 4;
    return d > f ? d : f;
}

void hak_purge_range(void *p, size_t size) {
    if (hak_opt.purge_lazy) hak_os_purge_lazy(p, size);
    else hak_os_purge(p, size);
}

/* malloc_trim (HAK_PURGE_ALL) returns the memory now, whatever the profile's
 * way: MADV_FREE would leave it in RSS until the kernel needs it. */
static void hak_purge_mode_range(void *p, size_t size, bool all) {
    if (all) hak_os_purge(p, size);
    else hak_purge_range(p, size);
}

/* ---- statistics (HAKMEM_STATS) ---- */
static struct {
    _Atomic uint64_t seg_taken, seg_dirty_taken, seg_put, seg_unmapped;
    _Atomic uint64_t huge_taken, huge_put, huge_unmapped, huge_missed;
    _Atomic uint64_t slot_purges, slot_purged_kb, cache_purges, purger_rounds;
    _Atomic uint64_t cache_age_purges, cache_cap_purges;
} hak_pst;
#define hak_pst_add(f, n) atomic_fetch_add_explicit(&hak_pst.f, (n), memory_order_relaxed)

/* ---- free page slots of a heap (slot lock held) ---- */

static void hak_heap_due(hak_heap_t *heap, uint64_t due) {
    if (heap->purge_due_ms == 0 || due < heap->purge_due_ms)
        __atomic_store_n(&heap->purge_due_ms, due, __ATOMIC_RELAXED);   /* the purger peeks */
}

void hak_purge_slot_freed(hak_heap_t *heap, hak_segment_t *seg, hak_page_t *page, size_t used,
                          uint64_t now, bool decay) {
    page->freed_at_ms = now ? now : 1;          /* non-zero: the slot has been used */
    /* what may be committed: what this tenure carved, and what was still
     * committed from before when the slot was taken */
    uint32_t kb = (uint32_t)((used + 1023) >> 10);
    if (kb > hak_slot_kb(seg)) kb = hak_slot_kb(seg);
    if (page->dirty_kb > kb) kb = page->dirty_kb;
    page->dirty_kb = kb;
    page->needs_purge = 1;
    seg->purge_pending++;
    heap->purge_pending_bytes_k += kb;
    if (!hak_purging()) return;                 /* kept dirty: only malloc_trim purges */
    hak_heap_due(heap, now + hak_delay_ms());
    if (decay && (hak_delay_ms() == 0 ||
                  ((uint64_t)heap->purge_pending_bytes_k << 10) >
                      hak_keep_bytes(heap->demand_bytes, heap->demand_at_ms, now)))
        hak_purge_heap_locked(heap, now, HAK_PURGE_DECAY);
}

void hak_purge_kept_due(hak_heap_t *heap, uint64_t now) {
    if (hak_purging() && hak_delay_ms() > 0) hak_heap_due(heap, now + hak_delay_ms());
}

void hak_purge_heap_check(hak_heap_t *heap, uint64_t now) {
    if (!hak_purging()) return;
    if (hak_delay_ms() == 0 ||
        ((uint64_t)heap->purge_pending_bytes_k << 10) > hak_keep_bytes(heap->demand_bytes, heap->demand_at_ms, now))
        hak_purge_heap_locked(heap, now, HAK_PURGE_DECAY);
}

extern HAK_TLS bool hak_tls_taking_over;   /* hak_segment.c */
bool hak_heap_leaving(hak_heap_t *heap) {
    return hak_tls_exiting || hak_tls_taking_over ||
           atomic_load_explicit(&heap->state, memory_order_relaxed) != HAK_HEAP_OWNED;
}

void hak_purge_slot_taken(hak_heap_t *heap, hak_segment_t *seg, hak_page_t *page, uint64_t now) {
    /* the demand: what the heap held dirty, and (purged) what the slot's
     * last tenure had used -- memory the decay should have kept */
    uint64_t regret = page->freed_at_ms && !page->needs_purge ? (uint64_t)page->dirty_kb << 10 : 0;
    hak_demand_note(&heap->demand_bytes, &heap->demand_at_ms, &heap->regret_bytes, &heap->regret_at_ms, now,
                    (uint64_t)heap->purge_pending_bytes_k << 10, regret);
    if (page->needs_purge) {
        page->needs_purge = 0;                  /* dirty_kb stays: still committed */
        seg->purge_pending--;
        heap->purge_pending_bytes_k -= page->dirty_kb;
    } else {
        page->dirty_kb = 0;
        hak_segment_clean(seg, -(int64_t)hak_slot_kb(seg));   /* resident from now on */
    }
}

void hak_purge_segment_joined(hak_heap_t *heap, hak_segment_t *seg, uint64_t now) {
    unsigned n = 0;
    uint64_t oldest = 0, kb = 0;
    for (unsigned i = 0; i < seg->page_count; i++) {
        hak_page_t *pg = &seg->pages[i];
        if (!pg->needs_purge) continue;
        n++;
        kb += pg->dirty_kb;
        if (oldest == 0 || pg->freed_at_ms < oldest) oldest = pg->freed_at_ms;
    }
    seg->purge_pending = (uint16_t)n;
    if (n == 0) return;
    heap->purge_pending_bytes_k += (uint32_t)kb;
    if (hak_purging()) hak_heap_due(heap, oldest + hak_delay_ms());
    (void)now;
}

/* KiB a segment's dirty slots may hold. */
static uint64_t hak_segment_dirty_kb(const hak_segment_t *seg) {
    uint64_t kb = 0;
    if (seg->purge_pending)
        for (unsigned i = 0; i < seg->page_count; i++)
            if (seg->pages[i].needs_purge) kb += seg->pages[i].dirty_kb;
    return kb;
}

void hak_purge_segment_left(hak_heap_t *heap, hak_segment_t *seg) {
    heap->purge_pending_bytes_k -= (uint32_t)hak_segment_dirty_kb(seg);
}

/* Age buckets: 0 for 0 ms, b for [2^(b-1), 2^b) ms. */
#define HAK_AGE_BUCKETS 40
static unsigned hak_age_bucket(uint64_t age) { return age == 0 ? 0 : 64u - (unsigned)__builtin_clzll(age); }
static uint64_t hak_bucket_lo(unsigned b) { return b == 0 ? 0 : (uint64_t)1 << (b - 1); }

/* Slot (or slice) i of seg is free and holds nothing committed that the
 * decay counts: purged already, or never used.  A purge may span it (its
 * memory is no block's, so a second madvise of it changes nothing). */
static bool hak_slot_clean(const hak_segment_t *seg, unsigned i) {
    const hak_page_t *pg = &seg->pages[i];
    /* (a large segment: a slice is free when its span's head is; small:
     * slot 0 is the header) */
    const hak_page_t *owner = seg->kind == HAK_PAGE_LARGE ? seg->slice_page[i] : pg;
    return i >= seg->first_page && !owner->in_use && !pg->needs_purge;
}

/* How much of seg's slots are free, in 64ths. */
static unsigned hak_seg_free64(const hak_segment_t *seg) {
    unsigned slots = seg->page_count - seg->first_page;
    unsigned free = seg->kind == HAK_PAGE_LARGE ? seg->free_slices : slots - seg->used_pages;
    return free * 64 / slots;
}

/* The decay for one heap's free slots: purge every slot unused for the
 * delay, then, while more than max(floor, demand) stays dirty, the oldest
 * ones down to 3/4 of that (so a heap that keeps freeing is not scanned on
 * every free).  Neighbouring slots go in one madvise, across free slots
 * that are clean already (hak_slot_clean). */
void hak_purge_heap_locked(hak_heap_t *heap, uint64_t now, hak_purge_mode_t mode) {
    bool all = mode == HAK_PURGE_ALL;
    if (all) heap->demand_bytes = heap->regret_bytes = 0;   /* malloc_trim: the program is done with it */
    else if (!hak_purging()) return;            /* HAKMEM_PURGE_DELAY_MS=-1: only malloc_trim purges */
    uint64_t delay = hak_purging() ? hak_delay_ms() : UINT64_MAX;
    uint64_t cut = all ? 0 : delay;             /* age from which every slot goes */
    /* kept medium and large pages (hak_segment.c) empty for as long go back to their
     * slots first, freed when they became empty: age alone decides them */
    uint64_t kept_due = 0;
    if (heap->kept_count) kept_due = hak_segment_kept_release_locked(heap, now, cut, delay);
    if (heap->purge_pending_bytes_k == 0) { __atomic_store_n(&heap->purge_due_ms, kept_due, __ATOMIC_RELAXED); return; }
    unsigned part_b = HAK_AGE_BUCKETS;          /* bucket purged in part ... */
    uint64_t part_kb = 0;                       /* ... this many KiB of it */
    if (mode == HAK_PURGE_DECAY) {
        uint64_t hist[HAK_AGE_BUCKETS] = {0}, young = 0;
        for (int k = 0; k < HAK_PAGE_KINDS; k++)
            for (hak_segment_t *seg = heap->segs[k].first; seg; seg = seg->next) {
                if (seg->purge_pending == 0) continue;
                for (unsigned i = 0; i < seg->page_count; i++) {
                    const hak_page_t *pg = &seg->pages[i];
                    if (!pg->needs_purge) continue;
                    uint64_t age = now > pg->freed_at_ms ? now - pg->freed_at_ms : 0;
                    if (age >= cut) continue;
                    unsigned b = hak_age_bucket(age);
                    hist[b < HAK_AGE_BUCKETS ? b : HAK_AGE_BUCKETS - 1] += pg->dirty_kb;
                    young += pg->dirty_kb;
                }
            }
        uint64_t keep = hak_keep_bytes(heap->demand_bytes, heap->demand_at_ms, now) >> 10;
        if (young > keep) {
            uint64_t target = keep - keep / 4;
            for (unsigned b = HAK_AGE_BUCKETS; b-- > 0 && young > target;) {
                if (hist[b] == 0) continue;
                if (young - hist[b] >= target) { young -= hist[b]; cut = hak_bucket_lo(b); }
                else { part_b = b; part_kb = young - target; young = target; }
            }
        }
    }
    /* The part of bucket part_b that goes: from the segments with the most
     * free slots first, where free slots lie next to each other and next to
     * slots purged before (fewer calls for the same bytes: fragmentation's
     * final frees, docs/memory-return.md).  Segments more than part_free
     * 64ths free give all of that bucket's slots, those part_free free as
     * many as part_kb still asks for. */
    unsigned part_free = 64;
    if (part_kb > 0) {
        uint64_t by_free[65] = {0};
        for (int k = 0; k < HAK_PAGE_KINDS; k++)
            for (hak_segment_t *seg = heap->segs[k].first; seg; seg = seg->next) {
                if (seg->purge_pending == 0) continue;
                uint64_t kb = 0;
                for (unsigned i = 0; i < seg->page_count; i++) {
                    const hak_page_t *pg = &seg->pages[i];
                    if (pg->needs_purge && hak_age_bucket(now > pg->freed_at_ms ? now - pg->freed_at_ms : 0) == part_b)
                        kb += pg->dirty_kb;
                }
                by_free[hak_seg_free64(seg)] += kb;
            }
        uint64_t hi = 0;
        while (part_free > 0 && hi + by_free[part_free] < part_kb) hi += by_free[part_free--];
        part_kb -= hi;
    }
    uint64_t next_due = 0;
    size_t os_page = hak_os_page_size();
    uint64_t purged_kb = 0;
    for (int k = 0; k < HAK_PAGE_KINDS; k++) {
        for (hak_segment_t *seg = heap->segs[k].first; seg; seg = seg->next) {
            if (seg->purge_pending == 0) continue;
            /* the run to purge, [run_lo, run_hi), and the free slots
             * already clean right after it, up to gap_hi, which the run
             * may span to the next slot that goes (one call, not two) */
            uint8_t *run_lo = NULL, *run_hi = NULL, *gap_hi = NULL;
            unsigned free64 = part_b < HAK_AGE_BUCKETS ? hak_seg_free64(seg) : 0;   /* (0: no part) */
            for (unsigned i = 0; i <= seg->page_count; i++) {
                hak_page_t *page = i < seg->page_count ? &seg->pages[i] : NULL;
                bool go = false;
                if (page && page->needs_purge) {
                    uint64_t age = now > page->freed_at_ms ? now - page->freed_at_ms : 0;
                    if (age >= cut) go = true;
                    else if (free64 > part_free && hak_age_bucket(age) == part_b) go = true;
                    else if (free64 == part_free && part_kb > 0 && hak_age_bucket(age) == part_b) {
                        go = true;
                        part_kb = part_kb > page->dirty_kb ? part_kb - page->dirty_kb : 0;
                    } else if (delay != UINT64_MAX) {
                        uint64_t due = page->freed_at_ms + delay;
                        if (next_due == 0 || due < next_due) next_due = due;
                    }
                }
                if (go) {
                    size_t len;
                    uint8_t *lo = hak_segment_page_area(seg, page, &len);
                    uint8_t *alo = (uint8_t *)hak_round_up((uintptr_t)lo, os_page);
                    if (run_hi != alo && gap_hi != alo) {
                        if (run_lo) hak_purge_mode_range(run_lo, (size_t)(run_hi - run_lo), all);
                        run_lo = alo;
                    }
                    run_hi = gap_hi = lo + len;
                    page->needs_purge = 0;
                    seg->purge_pending--;
                    heap->purge_pending_bytes_k -= page->dirty_kb;
                    purged_kb += page->dirty_kb;       /* dirty_kb stays: the extent last used */
                    hak_segment_clean(seg, hak_slot_kb(seg));
                } else if (run_lo && page && hak_slot_clean(seg, i)) {
                    size_t len;
                    uint8_t *lo = hak_segment_page_area(seg, page, &len);
                    if (lo == gap_hi) gap_hi = lo + len;
                } else if (run_lo) {
                    hak_purge_mode_range(run_lo, (size_t)(run_hi - run_lo), all);
                    run_lo = run_hi = gap_hi = NULL;
                }
            }
        }
    }
    if (purged_kb) { hak_pst_add(slot_purges, 1); hak_pst_add(slot_purged_kb, purged_kb); }
    if (!heap->purge_pending_bytes_k) next_due = 0;
    if (kept_due && (next_due == 0 || kept_due < next_due)) next_due = kept_due;
    __atomic_store_n(&heap->purge_due_ms, next_due, __ATOMIC_RELAXED);
}

/* The owner's check on its slow paths (hak_page.c, hak_heap.c). */
void hak_segment_purge_due(hak_heap_t *heap, bool force) {
    uint64_t now = hak_os_now_ms();
    /* unlocked: the purger writes it under the slot lock (an atomic load) */
    uint64_t due = __atomic_load_n(&heap->purge_due_ms, __ATOMIC_RELAXED);
    if (!force && (due == 0 || now < due)) return;
    hak_slots_lock(heap);
    hak_purge_heap_locked(heap, now, force ? HAK_PURGE_ALL : hak_heap_leaving(heap) ? HAK_PURGE_AGE : HAK_PURGE_DECAY);
    hak_slots_unlock(heap);
}

/* ---- the process-wide caches ----
 * Two arrays in the order entries came in (oldest first), under one lock,
 * which only segment and huge-block allocation and release take. */

static pthread_mutex_t hak_cache_lock = PTHREAD_MUTEX_INITIALIZER;
#define HAK_SEGMENT_CACHE_MAX 1024
#define HAK_HUGE_CACHE_MAX 64
typedef struct hak_centry_s {
    hak_segment_t *seg;
    size_t size;             /* bytes mapped */
    size_t dirty;            /* bytes that may be committed (0: purged); huge: from the start */
    size_t used;             /* bytes the last user had committed (kept when purged) */
    uint64_t since_ms;       /* when it came in */
    uint8_t kind;
    size_t clean;            /* huge: bytes known not resident, counted in hak_counters.bytes_clean
                                (hak_limit.c; dirty is from the start, and joining mappings
                                makes it cover the earlier ones whole: this stays exact) */
} hak_centry_t;
static hak_centry_t hak_cseg[HAK_SEGMENT_CACHE_MAX], hak_chuge[HAK_HUGE_CACHE_MAX];
static size_t hak_cseg_n, hak_chuge_n;
static uint64_t hak_cache_dirty;             /* bytes, both arrays */
static uint64_t hak_chuge_bytes;             /* bytes mapped in the huge cache */
static uint64_t hak_cache_demand, hak_cache_demand_at, hak_cache_regret, hak_cache_regret_at;
/* segments that heaps leaving their threads gave up lately (bytes, halving
 * every delay): the next threads are likely to want them, so the cache may
 * keep that much on top of the demand */
static uint64_t hak_cache_credit, hak_cache_credit_at;
/* huge mappings the decay unmapped lately (bytes, halving every delay like
 * the demand): a later huge request that finds no mapping to take is
 * memory the decay should have kept, and raises the demand by as much */
static uint64_t hak_cache_ghost, hak_cache_ghost_at;
static uint64_t hak_cache_due;               /* earliest since + delay of a dirty entry (0: none) */
/* bytes of huge mappings in use, and their high-water mark: the huge cache
 * keeps no more dirty than the floor plus what the program would need to be
 * back at that mark (hak_cache_huge_live) */
static uint64_t hak_huge_live, hak_huge_live_peak;
/* the grace: bytes of the huge mapping the program freed last, which the
 * demand limit spares until the program's next huge request (the age and
 * the peak cap still apply), if the program still has huge blocks in use:
 * before the demand has seen any reuse, a program that frees a huge block
 * and then asks for another would find nothing (docs/design.md, "Memory
 * return") */
static uint64_t hak_chuge_grace;

/* What the unlocked peeks of hak_cache_segment_take and hak_cache_huge_take
 * read: whether there is anything to take (or, for huge blocks, a ghost to
 * count), published at every unlock. */
static _Atomic bool hak_cseg_any, hak_chuge_any;
static void hak_cache_unlock(void) {
    atomic_store_explicit(&hak_cseg_any, hak_cseg_n != 0, memory_order_relaxed);
    atomic_store_explicit(&hak_chuge_any, hak_chuge_n != 0 || hak_cache_ghost != 0, memory_order_relaxed);
    pthread_mutex_unlock(&hak_cache_lock);
}

static void hak_centry_remove(hak_centry_t *a, size_t *n, size_t i) {
    memmove(&a[i], &a[i + 1], (*n - i - 1) * sizeof *a);
    (*n)--;
}

static void hak_cache_note_due(uint64_t since) {
    if (!hak_purging()) return;
    uint64_t due = since + hak_delay_ms();
    if (hak_cache_due == 0 || due < hak_cache_due) hak_cache_due = due;
}

/* Purge a cached segment's memory; it stays mapped (its header page too:
 * the region map still leads free() there, which must find no page in use). */
static void hak_cseg_purge(hak_centry_t *e) {
    size_t os_page = hak_os_page_size();
    hak_purge_range((uint8_t *)e->seg + os_page, HAK_SEGMENT_SIZE - os_page);
    hak_segment_clean(e->seg, (int64_t)hak_segment_clean_full_kb(e->seg) - (int64_t)e->seg->clean_kb);
    hak_cache_dirty -= e->dirty;
    e->dirty = 0;
    hak_pst_add(cache_purges, 1);
}

static void hak_cseg_unmap(size_t i) {
    hak_centry_t e = hak_cseg[i];
    hak_centry_remove(hak_cseg, &hak_cseg_n, i);
    hak_cache_dirty -= e.dirty;
    hak_segmap_set(e.seg, 0);
    hak_count_clean(-(int64_t)e.seg->clean_kb * 1024);
    hak_os_unmap(e.seg, HAK_SEGMENT_SIZE);
    hak_pst_add(seg_unmapped, 1);
}

/* The soft memory limit's estimate (hak_limit.c): a cached huge mapping's
 * clean bytes; sign 1 when it comes into the cache, -1 when it leaves. */
static void hak_chuge_clean(const hak_centry_t *e, int sign) {
    if (e->clean) hak_count_clean(sign * (int64_t)e->clean);
}

/* A huge mapping is purged by unmapping it. */
static void hak_chuge_unmap(size_t i) {
    hak_centry_t e = hak_chuge[i];
    uint64_t now = hak_os_now_ms();
    hak_cache_ghost = hak_decayed(hak_cache_ghost, hak_cache_ghost_at, now) + e.dirty;
    hak_cache_ghost_at = now;
    hak_centry_remove(hak_chuge, &hak_chuge_n, i);
    hak_cache_dirty -= e.dirty;
    hak_chuge_bytes -= e.size;
    hak_chuge_clean(&e, -1);
    hak_huge_release(e.seg, e.size);
    hak_pst_add(huge_unmapped, 1);
}

/* The decay for both caches (lock held): entries dirty for the delay are
 * purged, then the oldest dirty ones while more than max(floor, demand)
 * stays dirty, down to 3/4 of that.  all: everything. */
static void hak_cache_expire_locked(uint64_t now, bool all) {
    if (!hak_purging() && !all) return;
    uint64_t delay = hak_purging() ? hak_delay_ms() : 0;
    if (all || (hak_cache_due && now >= hak_cache_due)) {
        hak_cache_due = 0;
        for (size_t i = 0; i < hak_cseg_n; i++) {
            hak_centry_t *e = &hak_cseg[i];
            if (!e->dirty) continue;
            if (all || now >= e->since_ms + delay) { hak_cseg_purge(e); hak_pst_add(cache_age_purges, 1); }
            else hak_cache_note_due(e->since_ms);
        }
        for (size_t i = 0; i < hak_chuge_n;) {
            if (all || now >= hak_chuge[i].since_ms + delay) { hak_chuge_unmap(i); continue; }
            hak_cache_note_due(hak_chuge[i].since_ms);
            i++;
        }
    }
    /* The caches keep the floor or twice their demand (a heap 5/4): the
     * huge cache's peak cap (hak_chuge_cap_locked) bounds what that costs
     * in RSS, and a program's huge blocks come and go in larger steps than
     * its slots.  On top: the credit of heaps leaving their threads. */
    uint64_t d = hak_decayed(hak_cache_demand, hak_cache_demand_at, now), f = hak_floor_bytes();
    uint64_t keep = 2 * d > f ? 2 * d : f, credit = hak_decayed(hak_cache_credit, hak_cache_credit_at, now);
    keep = keep + credit < keep ? UINT64_MAX : keep + credit;
    uint64_t grace = hak_chuge_grace;
    if (hak_cache_dirty <= keep || hak_cache_dirty - keep <= grace) return;
    uint64_t target = keep - keep / 4 + grace;
    size_t si = 0, hi = 0;
    while (hak_cache_dirty > target) {        /* oldest first, across both arrays */
        while (si < hak_cseg_n && !hak_cseg[si].dirty) si++;
        while (hi < hak_chuge_n && !hak_chuge[hi].dirty) hi++;
        bool seg = si < hak_cseg_n, huge = hi < hak_chuge_n;
        if (seg && (!huge || hak_cseg[si].since_ms <= hak_chuge[hi].since_ms)) { hak_cseg_purge(&hak_cseg[si]); hak_pst_add(cache_cap_purges, 1); }
        else if (huge) hak_chuge_unmap(hi);
        else break;
    }
}

/* The huge cache's own cap (lock held): committed huge memory, in use and
 * cached, stays within the floor plus the most the program has had in use;
 * beyond that the oldest cached mappings go (what the program could not use
 * even at its peak is not worth its RSS). */
static void hak_chuge_cap_locked(void) {
    if (!hak_purging()) return;
    uint64_t hd = 0;
    for (size_t i = 0; i < hak_chuge_n; i++) hd += hak_chuge[i].dirty;
    uint64_t gap = hak_huge_live_peak > hak_huge_live ? hak_huge_live_peak - hak_huge_live : 0;
    uint64_t cap = gap + hak_floor_bytes();
    if (cap < gap) return;                      /* no floor (-1): no limit */
    for (size_t i = 0; hd > cap && i < hak_chuge_n;) {
        if (!hak_chuge[i].dirty) { i++; continue; }
        hd -= hak_chuge[i].dirty;
        hak_chuge_unmap(i);
        hak_pst_add(cache_cap_purges, 1);
    }
}

void hak_cache_huge_live(int64_t delta) {
    hak_count_peak(&hak_counters.active_bytes, &hak_counters.active_peak, delta);
    hak_count_peak(&hak_counters.huge_bytes, &hak_counters.huge_bytes_peak, delta);
    pthread_mutex_lock(&hak_cache_lock);
    hak_huge_live += (uint64_t)delta;
    if (hak_huge_live > hak_huge_live_peak) hak_huge_live_peak = hak_huge_live;
    /* only growth can push the cached memory over the cap: less in use
     * widens the gap to the peak (a freed block's own put checks again) */
    if (delta > 0) hak_chuge_cap_locked();
    pthread_mutex_unlock(&hak_cache_lock);
}

/* Which cached segment to take: the newest dirty one of the kind asked
 * for, else the newest dirty one of another kind, else the newest purged. */
static size_t hak_cseg_pick(hak_page_kind_t kind, hak_cached_state_t *state) {
    size_t other = SIZE_MAX;
    for (size_t i = hak_cseg_n; i-- > 0;) {   /* newest first */
        const hak_centry_t *e = &hak_cseg[i];
        if (!e->dirty) continue;
        if (e->kind == kind) { *state = HAK_CACHED_SAME; return i; }
        if (other == SIZE_MAX) other = i;
    }
    if (other != SIZE_MAX) { *state = HAK_CACHED_OTHER; return other; }
    *state = HAK_CACHED_CLEAN;
    return hak_cseg_n ? hak_cseg_n - 1 : SIZE_MAX;
}

bool hak_cache_segment_any(void) { return atomic_load_explicit(&hak_cseg_any, memory_order_relaxed); }

hak_segment_t *hak_cache_segment_take(hak_page_kind_t kind, hak_cached_state_t *state) {
    *state = HAK_CACHED_CLEAN;
    if (!atomic_load_explicit(&hak_cseg_any, memory_order_relaxed)) return NULL;   /* nothing to take */
    uint64_t now = hak_os_now_ms();
    pthread_mutex_lock(&hak_cache_lock);
    size_t pick = hak_cseg_pick(kind, state);
    hak_segment_t *seg = NULL;
    if (pick != SIZE_MAX) {
        hak_centry_t *e = &hak_cseg[pick];
        seg = e->seg;
        hak_cache_dirty -= e->dirty;
        hak_demand_note(&hak_cache_demand, &hak_cache_demand_at, &hak_cache_regret, &hak_cache_regret_at, now,
                        hak_cache_dirty + e->dirty, e->dirty ? 0 : e->used);
        hak_centry_remove(hak_cseg, &hak_cseg_n, pick);
    }
    hak_cache_expire_locked(now, false);
    hak_cache_unlock();
    if (seg) {
        hak_pst_add(seg_taken, 1);
        if (*state != HAK_CACHED_CLEAN) hak_pst_add(seg_dirty_taken, 1);
    }
    return seg;
}

bool hak_cache_segment_put(hak_segment_t *seg, bool leaving) {
    size_t max = (size_t)hak_opt.segment_cache;
    if (max == 0) return false;
    if (max > HAK_SEGMENT_CACHE_MAX) max = HAK_SEGMENT_CACHE_MAX;
    size_t dirty = (size_t)hak_segment_dirty_kb(seg) << 10;
    uint64_t now = hak_os_now_ms();
    pthread_mutex_lock(&hak_cache_lock);
    if (hak_cseg_n >= max) {                   /* full: the oldest purged one goes, else the oldest */
        size_t victim = 0;
        for (size_t i = 0; i < hak_cseg_n; i++) if (!hak_cseg[i].dirty) { victim = i; break; }
        hak_cseg_unmap(victim);
    }
    hak_cseg[hak_cseg_n++] = (hak_centry_t){ seg, HAK_SEGMENT_SIZE, dirty, dirty, now, seg->kind, 0 };
    hak_cache_dirty += dirty;
    if (leaving && dirty) {
        hak_cache_credit = hak_decayed(hak_cache_credit, hak_cache_credit_at, now) + dirty;
        if (hak_cache_credit > HAK_DEMAND_MAX) hak_cache_credit = HAK_DEMAND_MAX;
        hak_cache_credit_at = now;
    }
    if (dirty) hak_cache_note_due(now);
    if (dirty && hak_purging() && hak_delay_ms() == 0) hak_cseg_purge(&hak_cseg[hak_cseg_n - 1]);
    hak_cache_expire_locked(now, false);
    hak_cache_unlock();
    hak_pst_add(seg_put, 1);
    return true;
}

/* Cached huge mappings for a request of need bytes: the smallest one that
 * holds it (aligned to align), else the largest ones, up to max of them,
 * until they hold need bytes together or the cache runs out (the caller
 * moves their pages into one new mapping, or grows the one).  Returns how
 * many were taken. */
size_t hak_cache_huge_take(size_t need, size_t align, hak_piece_t *out, size_t max) {
    if (!atomic_load_explicit(&hak_chuge_any, memory_order_relaxed)) return 0;  /* nothing to take */
    uint64_t now = hak_os_now_ms();
    pthread_mutex_lock(&hak_cache_lock);
    uint64_t dirty_before = hak_cache_dirty;
    size_t best = SIZE_MAX, n = 0, got = 0;
    for (size_t i = 0; i < hak_chuge_n; i++) {
        const hak_centry_t *e = &hak_chuge[i];
        if (e->size >= need && !((uintptr_t)e->seg & (align - 1)) &&
            (best == SIZE_MAX || e->size < hak_chuge[best].size)) best = i;
    }
    while (n < max && got < need && hak_chuge_n) {
        size_t pick = best;
        if (pick == SIZE_MAX)                    /* the largest left */
            for (size_t i = 0; i < hak_chuge_n; i++)
                if (pick == SIZE_MAX || hak_chuge[i].size > hak_chuge[pick].size) pick = i;
        hak_centry_t e = hak_chuge[pick];
        hak_centry_remove(hak_chuge, &hak_chuge_n, pick);
        hak_cache_dirty -= e.dirty;
        hak_chuge_bytes -= e.size;
        hak_chuge_clean(&e, -1);
        out[n++] = (hak_piece_t){ e.seg, e.size, e.dirty };
        got += e.size;
        best = SIZE_MAX;
    }
    hak_chuge_grace = 0;                         /* the program came back: the demand judges now */
    uint64_t credit = 0;
    if (got < need) {                            /* memory the decay gave back is missed */
        uint64_t ghost = hak_decayed(hak_cache_ghost, hak_cache_ghost_at, now);
        credit = ghost < need - got ? ghost : need - got;
        hak_cache_ghost = ghost - credit;
        hak_cache_ghost_at = now;
    }
    if (n || credit)
        hak_demand_note(&hak_cache_demand, &hak_cache_demand_at, &hak_cache_regret, &hak_cache_regret_at, now,
                        dirty_before, credit);
    hak_cache_expire_locked(now, false);
    hak_cache_unlock();
    if (n) hak_pst_add(huge_taken, 1);
    else hak_pst_add(huge_missed, 1);
    return n;
}

/* The cached mapping that starts at addr, if there is one: a huge block
 * that grows takes the one right after it without moving.  Counted as a
 * take (the demand). */
bool hak_cache_huge_take_at(void *addr, hak_piece_t *out) {
    if (!atomic_load_explicit(&hak_chuge_any, memory_order_relaxed)) return false;
    uint64_t now = hak_os_now_ms();
    pthread_mutex_lock(&hak_cache_lock);
    size_t i = 0;
    while (i < hak_chuge_n && (void *)hak_chuge[i].seg != addr) i++;
    bool found = i < hak_chuge_n;
    if (found) {
        hak_centry_t e = hak_chuge[i];
        uint64_t dirty_before = hak_cache_dirty;
        hak_centry_remove(hak_chuge, &hak_chuge_n, i);
        hak_cache_dirty -= e.dirty;
        hak_chuge_bytes -= e.size;
        hak_chuge_clean(&e, -1);
        *out = (hak_piece_t){ e.seg, e.size, e.dirty };
        hak_demand_note(&hak_cache_demand, &hak_cache_demand_at, &hak_cache_regret, &hak_cache_regret_at, now,
                        dirty_before, 0);
        hak_chuge_grace = 0;
    }
    hak_cache_expire_locked(now, false);
    hak_cache_unlock();
    if (found) hak_pst_add(huge_taken, 1);
    return found;
}

bool hak_cache_huge_put(hak_segment_t *seg, size_t size, size_t dirty, bool freed) {
    uint64_t max = (uint64_t)hak_opt.huge_cache_mb << 20;
    if (size > max || (hak_purging() && hak_delay_ms() == 0)) return false;
    uint64_t now = hak_os_now_ms();
    size_t clean = size > dirty ? size - dirty : 0;     /* what it holds past its dirty start */
    pthread_mutex_lock(&hak_cache_lock);
    /* join cached neighbours: a block split off a cached mapping meets the
     * rest of it again, so a later large request finds it whole */
    for (size_t i = 0; i < hak_chuge_n;) {
        hak_centry_t *e = &hak_chuge[i];
        uint8_t *lo = (uint8_t *)seg, *elo = (uint8_t *)e->seg;
        if (elo + e->size == lo) {                      /* e, then seg */
            dirty = dirty ? e->size + dirty : e->dirty;
            seg = e->seg;
        } else if (lo + size == elo) {                  /* seg, then e */
            dirty = e->dirty ? size + e->dirty : dirty;
        } else { i++; continue; }
        size += e->size;
        hak_cache_dirty -= e->dirty;
        hak_chuge_bytes -= e->size;
        hak_chuge_clean(e, -1);
        clean += e->clean;
        hak_centry_remove(hak_chuge, &hak_chuge_n, i);
        hak_huge_cached_header(seg, size);
        i = 0;                                          /* it may now meet another */
    }
    while (hak_chuge_n > 0 && (hak_chuge_n >= HAK_HUGE_CACHE_MAX || hak_chuge_bytes + size > max))
        hak_chuge_unmap(0);
    if (size > max) {
        hak_cache_unlock();
        hak_huge_release(seg, size);
        return true;
    }
    hak_chuge[hak_chuge_n++] = (hak_centry_t){ seg, size, dirty, dirty, now, HAK_PAGE_HUGE, clean };
    hak_chuge_clean(&hak_chuge[hak_chuge_n - 1], 1);
    /* the newest free waits for the next request, while the program still
     * has huge blocks in use (one that freed its last is likely done) */
    if (freed) hak_chuge_grace = hak_huge_live ? size : 0;
    hak_chuge_bytes += size;
    hak_cache_dirty += dirty;
    hak_cache_note_due(now);
    hak_cache_expire_locked(now, false);
    hak_chuge_cap_locked();
    hak_cache_unlock();
    hak_pst_add(huge_put, 1);
    return true;
}

/* Empty both caches: every segment and huge mapping is unmapped. */
size_t hak_cache_trim(void) {
    size_t bytes = 0;
    pthread_mutex_lock(&hak_cache_lock);
    while (hak_cseg_n) { bytes += HAK_SEGMENT_SIZE; hak_cseg_unmap(hak_cseg_n - 1); }
    while (hak_chuge_n) { bytes += hak_chuge[hak_chuge_n - 1].size; hak_chuge_unmap(hak_chuge_n - 1); }
    hak_cache_due = 0;
    hak_cache_ghost = hak_cache_demand = hak_cache_regret = hak_cache_credit = hak_chuge_grace = 0;   /* malloc_trim */
    hak_huge_live_peak = hak_huge_live;
    hak_cache_unlock();
    return bytes;
}

/* The memory account (hak_account.c): each cached segment and huge mapping
 * (its address, bytes mapped, and whether it may hold committed memory),
 * then `then`, all with the cache lock held, so that no segment moves
 * between the cache and a heap meanwhile. */
void hak_cache_account(void (*each)(void *arg, hak_segment_t *seg, size_t size, size_t dirty, bool huge),
                       void (*then)(void *arg), void *arg) {
    pthread_mutex_lock(&hak_cache_lock);
    for (size_t i = 0; i < hak_cseg_n; i++) each(arg, hak_cseg[i].seg, hak_cseg[i].size, hak_cseg[i].dirty, false);
    for (size_t i = 0; i < hak_chuge_n; i++) each(arg, hak_chuge[i].seg, hak_chuge[i].size, hak_chuge[i].dirty, true);
    then(arg);
    hak_cache_unlock();
}

/* ---- every heap: the purger and malloc_trim ----
 * hak_purger_lock is held by whoever purges other heaps' slots (the purger
 * thread, malloc_trim), so that fork() -- which takes it first -- never
 * copies a slot lock held by a thread the child does not have. */

static pthread_mutex_t hak_purger_lock = PTHREAD_MUTEX_INITIALIZER;

/* The list of every heap (linked by next_all; heaps are never freed): the
 * heap layer pushes each heap it makes (hak_heap_make), the purger and
 * malloc_trim walk it from here. */
_Atomic(hak_heap_t *) hak_heaps_all;
hak_heap_t *hak_heap_list(void) { return atomic_load_explicit(&hak_heaps_all, memory_order_acquire); }

/* A fork child's heap that the fork left without its thread and nobody has
 * checked yet (FORKED), or that the check found caught inside an operation
 * (LOST): the purger and malloc_trim leave it alone.  The check
 * (hak_fork_settle, on the child's first adoption or sweep) reads the
 * heap's slot lock and segment lists unlocked, to tell a thread the fork
 * left inside them: a purge of the heap under way at that moment made the
 * check call a sound heap LOST.  The child's purger starts with the child
 * and purges every heap that is due, so a child whose first new thread
 * settled while the purger held one of those locks made a new heap for
 * that thread (lifecycle.nokey.purger.fork_adopt: "4 new threads made 2
 * new heaps").  The check stores ABANDONED (release) after its reads, so
 * a heap seen in any other state is past it.  A FORKED heap's free slots
 * wait for the settle, as they do without the purger. */
static bool hak_purge_leaves(const hak_heap_t *heap) {
    int st = atomic_load_explicit(&heap->state, memory_order_acquire);
    return st == HAK_HEAP_FORKED || st == HAK_HEAP_LOST;
}

/* One round over every heap and the caches; returns the earliest time
 * something else comes due (0: nothing dirty anywhere). */
static uint64_t hak_purge_round(uint64_t now) {
    uint64_t next = 0;
#define HAK_NEXT(t) do { uint64_t t_ = (t); if (t_ && (next == 0 || t_ < next)) next = t_; } while (0)
    for (hak_heap_t *heap = hak_heap_list(); heap; heap = heap->next_all) {
        if (hak_purge_leaves(heap)) continue;
        uint64_t due = __atomic_load_n(&heap->purge_due_ms, __ATOMIC_SEQ_CST);
        if (due == 0) continue;
        if (now < due) { HAK_NEXT(due); continue; }
        if (!hak_slots_trylock(heap)) { HAK_NEXT(now + 10); continue; }   /* its owner is busy */
        /* an abandoned heap's free slots wait for the next thread: age only */
        hak_purge_heap_locked(heap, now, atomic_load_explicit(&heap->state, memory_order_relaxed) == HAK_HEAP_OWNED
                                             ? HAK_PURGE_DECAY : HAK_PURGE_AGE);
        HAK_NEXT(__atomic_load_n(&heap->purge_due_ms, __ATOMIC_RELAXED));
        hak_slots_unlock(heap);
    }
    pthread_mutex_lock(&hak_cache_lock);
    hak_cache_expire_locked(now, false);
    HAK_NEXT(hak_cache_due);
    hak_cache_unlock();
#undef HAK_NEXT
    return next;
}

void hak_purge_all_heaps(void) {
    pthread_mutex_lock(&hak_purger_lock);
    uint64_t now = hak_os_now_ms();
    for (hak_heap_t *heap = hak_heap_list(); heap; heap = heap->next_all) {
        if (hak_purge_leaves(heap)) continue;
        /* an owner holds its lock briefly; a heap whose lock stays taken
         * belongs to a thread that forked away (the child has no such
         * thread; its heap is LOST once settled, and the callers settle
         * first) */
        bool locked = false;
        for (int i = 0; i < 1000 && !(locked = hak_slots_trylock(heap)); i++) hak_slots_wait();
        if (!locked) continue;
        hak_purge_heap_locked(heap, now, HAK_PURGE_ALL);
        hak_slots_unlock(heap);
    }
    pthread_mutex_unlock(&hak_purger_lock);
}

/* ---- the background purger ----
 * One thread, started at start-up (hakmem's constructor) when the option is
 * on, and again in a fork child (the fork handler, once every lock is
 * free again) -- never from malloc or free: glibc calls free() with its
 * own locks held (the TLS vector of a joined thread under the stack-cache
 * lock, among others), and pthread_create takes those locks.  It sleeps
 * until the next purge is due; with nothing dirty anywhere it sleeps on a
 * futex until the next kick, or a second.
 *
 * It never keeps the process alive.  glibc ends a process when its last
 * thread ends, and the purger is a thread: so when the program's threads
 * have all ended it returns, and glibc, seeing its last thread end, calls
 * exit(0) as it would have for the program's last one -- on the purger's
 * stack, which is therefore a default-sized one (reserved, not committed),
 * room for the program's atexit handlers.  Whether a thread has ended is
 * told by the kernel through tokens (hak_alive.c), never by /proc: the
 * first thread (the one that ran hakmem's constructor, or the forking
 * thread in a fork child) holds one, and every thread holds its heap's.
 * The program has ended when the first thread's token and every heap's are
 * let go or marked ended.  A live thread that never allocated holds no
 * token: with the first thread gone and every allocating thread too, the
 * purger returns early, and such a thread purges on its own slow paths as
 * with the option off.  It looks when a thread's exit handler tells it,
 * and once a second besides (a thread that ended without the handler). */

static _Atomic int hak_purger_state;         /* 0 none, 1 starting, 2 running, 3 could not start */
static _Atomic uint32_t hak_purger_awake;    /* futex word: 0 while it sleeps with nothing dirty */
static _Atomic uint32_t hak_purger_look;     /* a thread of the program ended: is any left? */
static hak_alive_t hak_first_thread;         /* held by the first thread of the process */
static bool hak_first_thread_held;

static void hak_futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts) {
    int saved = errno;
    syscall(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
    errno = saved;
}

/* The calling thread is the process's first (hakmem's constructor; the
 * forking thread in a fork child, before the child's purger starts). */
void hak_purger_first_thread(void) { hak_first_thread_held = hak_alive_claim(&hak_first_thread); }

/* Every thread of the program that holds a token has ended (the purger's
 * own heap, if it has one, aside). */
static bool hak_purger_program_ended(void) {
    if (hak_alive_state(&hak_first_thread) != HAK_ALIVE_ENDED) return false;
    for (hak_heap_t *heap = hak_heap_list(); heap; heap = heap->next_all) {
        int st = atomic_load_explicit(&heap->state, memory_order_acquire);
        if (heap->pub_magic || heap == hak_tls.heap || (st != HAK_HEAP_OWNED && st != HAK_HEAP_BUSY)) continue;
        if (st == HAK_HEAP_BUSY || hak_alive_state(&heap->owner_alive) != HAK_ALIVE_ENDED) return false;
    }
    return true;
}

static void *hak_purger_main(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "hakmem-purge", 0, 0, 0);
    uint64_t looked = hak_os_now_ms();
    for (;;) {
        /* announce the sleep first, then look: a kick after the look sees 0 and wakes us */
        atomic_store_explicit(&hak_purger_awake, 0, memory_order_seq_cst);
        pthread_mutex_lock(&hak_purger_lock);
        uint64_t now = hak_os_now_ms(), next = hak_purge_round(now);
        pthread_mutex_unlock(&hak_purger_lock);
        hak_pst_add(purger_rounds, 1);
        uint64_t ms = 1000;                  /* nothing dirty: until a kick, or a look at the threads */
        if (next != 0) {
            ms = next > now ? next - now : 0;
            if (ms < 5) ms = 5;              /* the clock is coarse: no busy rounds */
            if (ms > 1000) ms = 1000;
            atomic_store_explicit(&hak_purger_awake, 1, memory_order_relaxed);
        }
        struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
        /* asleep: a kick that sees awake == 0 wakes it; a thread's end
         * always does (it sets awake to 2, which no wait expects) */
        bool ended = atomic_exchange_explicit(&hak_purger_look, 0, memory_order_seq_cst) != 0;
        if (!ended) {
            hak_futex(&hak_purger_awake, FUTEX_WAIT, next == 0 ? 0 : 1, &ts);
            ended = atomic_exchange_explicit(&hak_purger_look, 0, memory_order_seq_cst) != 0;
        }
        now = hak_os_now_ms();
        if (ended || now - looked >= 1000) {
            looked = now;
            if (hak_purger_program_ended()) break;
        }
    }
    atomic_store(&hak_purger_state, 0);
    return NULL;   /* the process's last thread: glibc calls exit(0) */
}

/* Start the purger if the options want one (hakmem's constructor, a fork
 * child): never while hakmem or libc may hold a lock pthread_create needs. */
void hak_purger_start(void) {
    if (!hak_opt.background_purge || hak_opt.purge_delay_ms <= 0) return;   /* the options, not the pressure */
    /* without the kernel's word on threads' ends it could not know when to
     * leave: the threads purge on their own slow paths, as with the option off */
    if (!hak_first_thread_held) {
        if (hak_opt.verbose) hak_message("hakmem: background purger not started: robust mutexes are unavailable\n");
        return;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&hak_purger_state, &expected, 1)) return;
    pthread_attr_t attr;
    pthread_t tid;
    sigset_t all, old;
    sigfillset(&all);
    int saved = errno;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* the default stack size: the last thread runs the program's atexit
     * handlers (see above) */
    pthread_sigmask(SIG_SETMASK, &all, &old);      /* the purger takes no signal of the program's */
    atomic_store_explicit(&hak_purger_awake, 1, memory_order_relaxed);
    int rc = pthread_create(&tid, &attr, hak_purger_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    errno = saved;
    atomic_store(&hak_purger_state, rc == 0 ? 2 : 3);
}

/* Something became dirty: wake the purger if it sleeps with nothing dirty.
 * Never starts it (see above): without a purger, the threads' own slow
 * paths purge, as with the option off. */
void hak_purger_kick(void) {
    if (!hak_opt.background_purge) return;
    if (hak_likely(atomic_load_explicit(&hak_purger_state, memory_order_relaxed) == 2)) {
        /* the dirty state this thread published must be seen by a purger
         * that goes to sleep now (store-load order: a full fence) */
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&hak_purger_awake, memory_order_relaxed) == 0 &&
            atomic_exchange_explicit(&hak_purger_awake, 1, memory_order_seq_cst) == 0)
            hak_futex(&hak_purger_awake, FUTEX_WAKE, 1, NULL);
    }
}

/* A thread of the program is ending (hakmem's exit handler): the purger
 * looks whether it was the last. */
void hak_purger_thread_ends(void) {
    if (atomic_load_explicit(&hak_purger_state, memory_order_relaxed) != 2) return;
    atomic_store_explicit(&hak_purger_look, 1, memory_order_seq_cst);
    atomic_store_explicit(&hak_purger_awake, 2, memory_order_seq_cst);
    hak_futex(&hak_purger_awake, FUTEX_WAKE, 1, NULL);
}

/* ---- fork (hak_heap.c's pthread_atfork handlers) ---- */

void hak_segment_lock_for_fork(void) {
    pthread_mutex_lock(&hak_purger_lock);
    pthread_mutex_lock(&hak_cache_lock);
    hak_os_maps_hold();                        /* after the cache lock, as the account takes them */
}

void hak_segment_unlock_after_fork(bool child) {
    hak_os_maps_unlock_after_fork(child);
    if (child) {
        pthread_mutex_init(&hak_cache_lock, NULL);
        pthread_mutex_init(&hak_purger_lock, NULL);
        /* the purger thread is not copied: hak_fork_child starts the child's own */
        atomic_store(&hak_purger_state, 0);
        atomic_store(&hak_purger_awake, 0);
        atomic_store(&hak_purger_look, 0);
        hak_limit_fork_child();
    } else {
        pthread_mutex_unlock(&hak_cache_lock);
        pthread_mutex_unlock(&hak_purger_lock);
    }
}

void hak_purge_stats_lines(void (*line)(void *arg, const char *text), void *arg) {
#define L(f) (unsigned long)atomic_load_explicit(&hak_pst.f, memory_order_relaxed)
    char buf[512];
    pthread_mutex_lock(&hak_cache_lock);
    size_t nseg = hak_cseg_n, nhuge = hak_chuge_n;
    uint64_t huge_bytes = hak_chuge_bytes;
    hak_cache_unlock();
    hak_format(buf, sizeof buf, "hakmem:   segment cache: %lu taken (%lu dirty), %lu cached, %lu unmapped, %lu purged (%lu by age, %lu by cap); now %lu\n",
               L(seg_taken), L(seg_dirty_taken), L(seg_put), L(seg_unmapped), L(cache_purges), L(cache_age_purges), L(cache_cap_purges),
               (unsigned long)nseg);
    line(arg, buf);
    hak_format(buf, sizeof buf, "hakmem:   huge cache: %lu taken, %lu missed, %lu cached, %lu unmapped; now %lu (%lu KiB)\n",
               L(huge_taken), L(huge_missed), L(huge_put), L(huge_unmapped), (unsigned long)nhuge,
               (unsigned long)(huge_bytes >> 10));
    line(arg, buf);
    hak_format(buf, sizeof buf, "hakmem:   slot purges %lu (%lu KiB); purger rounds %lu\n",
               L(slot_purges), L(slot_purged_kb), L(purger_rounds));
    line(arg, buf);
#undef L
}
