/* hak_huge.c -- huge blocks (above HAK_LARGE_MAX): a mapping of their own
 * with a segment header (hak_segment_t and one hak_page_t, 768 bytes) in
 * front of the block: the block starts 768 bytes into its 4 MiB-aligned
 * mapping (rounded up to the alignment asked for), not on a page boundary.
 * Its usable size is the size asked rounded up to the end of its last OS
 * page; realloc keeps it in place while its mapping holds the new size
 * (hak_huge_set_size, hak_huge_realloc).
 *
 * A freed huge block goes to the huge cache (hak_purge.c) with its memory
 * still committed; a later huge request takes the smallest cached mapping
 * that holds it and splits off the rest at a 4 MiB boundary (the rest goes
 * back to the cache), or grows the largest one with mremap (its pages move,
 * nothing is copied).  realloc goes through the cache as well: a shrink
 * caches the units the block no longer reaches, a growth takes cached
 * memory before fresh.  The decay unmaps what is not reused.  A cached
 * mapping keeps its header and region-map entries: its one page is not in
 * use, so free() of a pointer into it is reported (a double free), and
 * hakmem_owns() still knows it. */
#include "hak_purge.h"
#include "hak_hardened.h"

static size_t hak_huge_header(void) { return sizeof(hak_segment_t) + sizeof(hak_page_t); }
/* the header's OS pages: what stays accessible of a hardened mapping */
static size_t hak_huge_header_pages(void) { return hak_round_up(hak_huge_header(), hak_os_page_size()); }
static size_t hak_units(size_t size) { return (size + HAK_SEGMENT_SIZE - 1) >> HAK_SEGMENT_SHIFT; }

/* Mark (or clear) the 4 MiB units [from, to) of a huge mapping in the
 * region map, so that hakmem_owns() knows its interior and free() of an
 * interior pointer is reported as such.  Unit u points back u units to the
 * header. */
static void hak_huge_mark_units(hak_segment_t *seg, size_t from, size_t to, bool on) {
    if (to > HAK_TAG_LAST) to = HAK_TAG_LAST;
    for (size_t u = from; u < to; u++) {
        uint16_t v = !on ? HAK_TAG_NONE : u == 0 ? HAK_TAG_SHARED : (uint16_t)(HAK_TAG_BACK | u);
        hak_segmap_set((uint8_t *)seg + (u << HAK_SEGMENT_SHIFT), v);
    }
}
static void hak_huge_mark(hak_segment_t *seg, size_t map_size, bool on) {
    hak_huge_mark_units(seg, 0, hak_units(map_size), on);
}

/* The header of a huge mapping: a segment with one page, in use (a block)
 * or not (cached). */
static void hak_huge_header_init(hak_segment_t *seg, size_t map_size) {
    memset(seg, 0, hak_huge_header());
    seg->kind = HAK_PAGE_HUGE;
    seg->page_shift = HAK_SEGMENT_SHIFT;
    seg->page_count = 1;
    seg->map_size = map_size;
    hak_segment_set_slices(seg);
    hak_page_t *page = &seg->pages[0];
    page->kind = HAK_PAGE_HUGE;
    page->class_idx = 255;
    page->div_magic = page->local_magic = 1;
    page->free_key = page->local_key = hak_page_new_key();
    hak_page_set_flags(page, HAK_PAGE_IS_HUGE);
}

/* A huge block's two sizes (page 0 of its mapping, whose block starts
 * offset bytes in): block_size, its usable size -- the size asked, rounded
 * up to the end of the OS page it ends in (malloc_usable_size, a sized
 * free's check, realloc's copy, the heap walks); area, what it can grow to
 * in place: the rest of its mapping (realloc keeps the block while the new
 * size fits there, and records it).  A request of 0 (an aligned one) counts
 * as 1 byte.  The hardened build's block ends at its guard page: there the
 * two are the same (hak_huge_guarded). */
static void hak_huge_set_size(hak_page_t *page, size_t offset, size_t map_size, size_t size) {
    size_t end = hak_round_up(offset + (size ? size : 1), hak_os_page_size());
    page->area = map_size - offset;
    page->block_size = (end < map_size ? end : map_size) - offset;
}

static void hak_huge_setup(hak_segment_t *seg, size_t map_size, size_t offset, size_t size) {
    hak_huge_header_init(seg, map_size);
    seg->used_pages = 1;
    hak_page_t *page = &seg->pages[0];
    page->in_use = 1;
    page->start = (uint8_t *)seg + offset;
    hak_huge_set_size(page, offset, map_size, size);
    page->reserved = page->used = 1;
    HAK_SET_RELAXED(page->capacity, 1);
    hak_page_update_limit(page);
    hak_huge_mark(seg, map_size, true);
}

/* A cached mapping's header and region-map entries, for a mapping of size
 * bytes at seg: after neighbouring cached mappings were joined into one. */
void hak_huge_cached_header(hak_segment_t *seg, size_t size) {
    hak_huge_header_init(seg, size);
    hak_huge_mark(seg, size, true);
}

/* Unmap a huge mapping (a cached one the decay gives back). */
void hak_huge_release(hak_segment_t *seg, size_t size) {
    hak_huge_mark(seg, size, false);
    hak_os_unmap(seg, size);
}

/* Move a mapping of old bytes to a new 4 MiB-aligned (or align-aligned)
 * place of new bytes: its pages move, nothing is copied.  The part beyond
 * old is made writable first, then the pages move in front of it (a move
 * that also grows leaves valgrind unaware of the grown part).  NULL if that
 * fails (the mapping is left as it was). */
static hak_segment_t *hak_huge_move(hak_segment_t *seg, size_t old_map, size_t new_map, size_t align) {
    uint8_t *dest = hak_os_reserve_aligned(new_map, align);
    if (!dest) return NULL;
    if (new_map > old_map && !hak_os_commit(dest + old_map, new_map - old_map)) {
        hak_os_unmap(dest, new_map);
        return NULL;
    }
    hak_huge_mark(seg, old_map, false);
    hak_segment_t *moved = hak_os_remap(seg, old_map, old_map, dest);
    if (!moved) {
        hak_huge_mark(seg, old_map, true);
        hak_os_unmap(dest, new_map);
        return NULL;
    }
    /* The reservation's accounting covers the moved pages now. */
    hak_count_peak(&hak_counters.bytes_mapped, &hak_counters.bytes_mapped_peak, -(int64_t)old_map);
    return moved;
}

/* A cached mapping of size bytes holding more than need (both multiples of
 * 4 MiB): what lies beyond need goes back to the cache (or is unmapped). */
static void hak_huge_split(hak_segment_t *seg, size_t size, size_t need, size_t *dirty, bool freed) {
    hak_segment_t *tail = (hak_segment_t *)((uint8_t *)seg + need);
    size_t tail_size = size - need, tail_dirty = *dirty > need ? *dirty - need : 0;
    hak_huge_header_init(tail, tail_size);
    hak_huge_mark(tail, tail_size, true);
    if (!hak_cache_huge_put(tail, tail_size, tail_dirty, freed)) hak_huge_release(tail, tail_size);
    if (*dirty > need) *dirty = need;
}

/* A piece taken from the cache that will not be used after all. */
static void hak_huge_give_back(const hak_piece_t *p) {
    if (!hak_cache_huge_put(p->seg, p->size, p->dirty, false)) hak_huge_release(p->seg, p->size);
}

/* Pieces taken from the cache for need bytes: if they hold more, the last
 * one gives what lies beyond need back to the cache.  Returns the bytes they
 * hold now (need, or less when the cache had less). */
static size_t hak_pieces_trim(hak_piece_t *pc, size_t n, size_t need) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += pc[i].size;
    if (total > need) {                        /* the last piece holds more than is missing */
        size_t keep = need - (total - pc[n - 1].size);
        hak_huge_split(pc[n - 1].seg, pc[n - 1].size, keep, &pc[n - 1].dirty, false);
        pc[n - 1].size = keep;
        total = need;
    }
    return total;
}

/* Move the pieces' pages into the reservation dest, one after the other
 * from off: each replaces part of the (counted) reservation.  A piece the
 * kernel will not move stays where it is, cached; its part of dest stays
 * fresh memory (made writable here if commit).  False if such a commit
 * failed.  *dirty: the end, from dest, of the last moved piece that may
 * hold non-zero bytes (0: none). */
static bool hak_pieces_move(hak_piece_t *pc, size_t n, uint8_t *dest, size_t off, bool commit, size_t *dirty) {
    bool ok = true;
    *dirty = 0;
    for (size_t i = 0; i < n; i++) {
        hak_huge_mark(pc[i].seg, pc[i].size, false);
        if (hak_os_remap(pc[i].seg, pc[i].size, pc[i].size, dest + off)) {
            hak_count_peak(&hak_counters.bytes_mapped, &hak_counters.bytes_mapped_peak, -(int64_t)pc[i].size);
            if (pc[i].dirty) *dirty = off + pc[i].dirty;
        } else {                               /* it stays where it is; that part is fresh */
            hak_huge_mark(pc[i].seg, pc[i].size, true);
            hak_huge_give_back(&pc[i]);
            if (commit) ok = ok && hak_os_commit(dest + off, pc[i].size);
        }
        off += pc[i].size;
    }
    return ok;
}

/* A new mapping of need bytes (aligned to align) made of cached mappings
 * that are each smaller: their pages move into one reservation, nothing is
 * copied, and what they do not cover is fresh memory.  *dirty: how many of
 * its first bytes may be non-zero.  NULL if the kernel refuses (the pieces
 * go back to the cache, or are lost to the OS if already moved). */
static hak_segment_t *hak_huge_compose(hak_piece_t *pc, size_t n, size_t need, size_t align, size_t *dirty) {
    size_t d, off = hak_pieces_trim(pc, n, need);
    uint8_t *dest = hak_os_reserve_aligned(need, align);
    if (!dest) {
        for (size_t i = 0; i < n; i++) hak_huge_give_back(&pc[i]);
        return NULL;
    }
    bool ok = hak_pieces_move(pc, n, dest, 0, true, &d);
    if (off < need) ok = ok && hak_os_commit(dest + off, need - off);
    if (!ok) {
        hak_os_unmap(dest, need);
        return NULL;
    }
    *dirty = d;
    return (hak_segment_t *)dest;
}

/* The soft memory limit's estimate (hak_limit.c): bytes of an in-use huge
 * mapping, past the block's end, known not to be resident -- the hardened
 * build's no-access end -- kept in seg->clean_kb and counted in
 * hak_counters.bytes_clean (KiB: at most 4 TiB of it is counted).  Returns
 * the bytes counted before. */
static size_t hak_huge_clean_set(hak_segment_t *seg, size_t bytes) {
    size_t kb = bytes >> 10, was = (size_t)seg->clean_kb << 10;
    if (kb > UINT32_MAX) kb = UINT32_MAX;
    seg->clean_kb = (uint32_t)kb;
    if ((kb << 10) != was) hak_count_clean((int64_t)(kb << 10) - (int64_t)was);
    return was;
}

/* A huge mapping is a whole number of 4 MiB units: no unit the region map
 * marks has a hole another mapping of the process could take.  A request
 * takes, in this order: the smallest cached mapping that holds it (split);
 * one cached mapping grown in place; several cached mappings composed;
 * fresh memory. */
#define HAK_HUGE_PIECES 8
static void *hak_huge_guarded(size_t size, size_t align);
void *hak_huge_alloc(size_t size, size_t align, bool zero) {
    if (HAK_HARDENED_ENABLED) return hak_huge_guarded(size, align);
    if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
    size_t offset = hak_round_up(hak_huge_header(), align);
    size_t map_align = align > HAK_SEGMENT_SIZE ? align : HAK_SEGMENT_SIZE;
    if ((offset >> HAK_SEGMENT_SHIFT) >= 0x7fff || size > ((size_t)1 << 46)) { errno = ENOMEM; return NULL; }
    /* size 0 (an aligned allocation): the block must still start inside the mapping */
    size_t end = hak_round_up(offset + (size ? size : 1), hak_os_page_size());
    size_t need = hak_round_up(end, HAK_SEGMENT_SIZE);
    hak_piece_t pc[HAK_HUGE_PIECES];
    size_t n = hak_cache_huge_take(need, map_align, pc, HAK_HUGE_PIECES);
    hak_segment_t *seg = NULL;
    size_t dirty = 0;
    bool aligned = n > 0 && !((uintptr_t)pc[0].seg & (map_align - 1));
    if (n == 1 && pc[0].size >= need && aligned) {
        seg = pc[0].seg;
        dirty = pc[0].dirty;
        if (pc[0].size > need) hak_huge_split(seg, pc[0].size, need, &dirty, false);
    } else if (n == 1 && aligned && pc[0].size < need && hak_os_remap(pc[0].seg, pc[0].size, need, NULL)) {
        seg = pc[0].seg;                        /* grown in place: the new part is zero */
        dirty = pc[0].dirty;
    } else if (n > 0) {
        seg = hak_huge_compose(pc, n, need, map_align, &dirty);
    }
    if (!seg) {
        seg = hak_os_map_aligned(need, map_align);
        if (!seg) { errno = ENOMEM; return NULL; }
        dirty = 0;                               /* fresh mappings are zero */
    }
    /* A reused mapping's last unit may hold committed memory beyond the
     * block's end: it stays, as room to grow in place (purging it cost more
     * faults than it saved memory: docs/design.md). */
    hak_huge_setup(seg, need, offset, size);
    hak_count_peak(&hak_counters.huge_in_use, &hak_counters.huge_peak, 1);
    hak_cache_huge_live((int64_t)need);
    uint8_t *p = seg->pages[0].start;
    size_t usable = seg->pages[0].block_size;    /* calloc: zero to the usable end */
    if (zero && dirty > offset) memset(p, 0, dirty - offset < usable ? dirty - offset : usable);
    hak_limit_check();   /* the soft memory limit: after the cache had its chance */
    return p;
}

/* The hardened build's huge block: a mapping with a guard page after the
 * header and the rest of the mapping after the block inaccessible; the
 * block ends at that guard (as far as its alignment allows).  Its free
 * makes everything past the header inaccessible and caches the mapping
 * (hak_huge_free): a use after free faults, and the data is out of reach.
 * A cached mapping of the size needed comes back with all but the block's
 * pages inaccessible again (a mapping the cache joined from two has a
 * header page in its middle) and the block zeroed: its pages are resident
 * already, and zeroing them costs far less than faulting in fresh ones
 * (large_blocks up to 4 MiB: 22.8k ops/s against 8.3k with a fresh mapping
 * each time, docs/experiments.md).  Only the pages that may hold data are
 * zeroed (hak_os_zero_touched): a memset of pages the last owner never
 * touched faulted them all in, and the resident set it left made a fork
 * every 0.5 ms from a signal handler take longer than 0.5 ms, so that the
 * program never ran again (test_fork_signal: hangs.fork_signal.hardened). */
static hak_segment_t *hak_huge_guarded_reuse(size_t need, size_t map_align, size_t hdr, size_t lo, size_t end,
                                             size_t *dirty_out) {
    hak_piece_t pc;
    if (hak_cache_huge_take(need, map_align, &pc, 1) != 1) return NULL;
    if (pc.size < need || ((uintptr_t)pc.seg & (map_align - 1))) {
        hak_huge_give_back(&pc);
        return NULL;
    }
    hak_segment_t *seg = pc.seg;
    size_t dirty = pc.dirty;
    if (pc.size > need) {                        /* the rest goes back, its header page writable */
        if (!hak_os_unguard((uint8_t *)seg + need, hdr)) { hak_huge_give_back(&pc); return NULL; }
        hak_huge_split(seg, pc.size, need, &dirty, false);
    }
    if (!hak_os_guard((uint8_t *)seg + hdr, need - hdr) || !hak_os_unguard((uint8_t *)seg + lo, end - lo)) {
        hak_huge_release(seg, need);
        return NULL;
    }
    hak_os_zero_touched((uint8_t *)seg + lo, end - lo);
    *dirty_out = dirty;
    return seg;
}

/* A freed hardened mapping, about to be cached: all but its header
 * inaccessible. */
static bool hak_huge_guard_cached(hak_segment_t *seg, size_t size) {
    size_t hdr = hak_huge_header_pages();
    return hak_os_guard((uint8_t *)seg + hdr, size - hdr);
}

static void *hak_huge_guarded(size_t size, size_t align) {
    if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
    size_t ps = hak_os_page_size();
    size_t hdr = hak_huge_header_pages(), base = hdr + ps;
    if (size > ((size_t)1 << 46)) { errno = ENOMEM; return NULL; }
    size_t n = size ? size : 1, offset, end;
    if (align <= ps) {
        end = hak_round_up(base + n, ps);
        offset = (end - n) & ~(align - 1);
    } else {
        offset = hak_round_up(base, align);
        end = hak_round_up(offset + n, ps);
    }
    /* at least HAK_HARDENED_FAR and a page inaccessible after the block: a
     * write 1 MiB past its end faults in its own mapping, and one 1 MiB
     * before a block of the next 4 MiB unit lands here (hak_hardened.h) */
    size_t need = hak_round_up(end + HAK_HARDENED_FAR + ps, HAK_SEGMENT_SIZE);
    size_t map_align = align > HAK_SEGMENT_SIZE ? align : HAK_SEGMENT_SIZE;
    if ((offset >> HAK_SEGMENT_SHIFT) >= 0x7fff) { errno = ENOMEM; return NULL; }
    size_t lo = offset & ~(ps - 1);
    size_t dirty = 0;                            /* bytes from the start that may be committed */
    hak_segment_t *seg = hak_huge_guarded_reuse(need, map_align, hdr, lo, end, &dirty);
    if (!seg) {
        seg = hak_os_map_aligned(need, map_align);
        if (!seg) { errno = ENOMEM; return NULL; }
        hak_os_guard((uint8_t *)seg + hdr, lo - hdr);
        hak_os_guard((uint8_t *)seg + end, need - end);
    }
    hak_huge_setup(seg, need, offset, size);
    seg->pages[0].block_size = seg->pages[0].area = end - offset;   /* the guard page follows */
    /* the soft memory limit's estimate (hak_limit.c): what lies past the
     * block and past anything a former user committed is no-access and was
     * never touched -- the 1 MiB and more after every block -- not resident */
    size_t touched = dirty > end ? dirty : end;
    hak_huge_clean_set(seg, need > touched ? need - touched : 0);
    hak_count_peak(&hak_counters.huge_in_use, &hak_counters.huge_peak, 1);
    hak_cache_huge_live((int64_t)need);
    hak_limit_check();
    return seg->pages[0].start;
}

hak_huge_hooks_t hak_huge_hooks;

void hak_huge_free(hak_segment_t *seg) {
    if (hak_huge_hooks.freed) hak_huge_hooks.freed(seg->pages[0].start);   /* a sampled block */
    if (__atomic_load_n(&seg->heap, __ATOMIC_RELAXED)) hak_huge_hooks.unlink(seg);   /* a public heap's block */
    size_t size = seg->map_size;
    /* what may be committed: all of it, but for the hardened block's
     * never-touched end (the cache counts it clean from here on) */
    size_t dirty = size - hak_huge_clean_set(seg, 0);
    hak_count_peak(&hak_counters.huge_in_use, &hak_counters.huge_peak, -1);
    hak_cache_huge_live(-(int64_t)size);
    hak_huge_header_init(seg, size);             /* its page is no longer in use */
    /* (hardened: all but the header inaccessible while cached) */
    if ((!HAK_HARDENED_ENABLED || hak_huge_guard_cached(seg, size)) && hak_cache_huge_put(seg, size, dirty, true)) {
        hak_purger_kick();
        return;
    }
    hak_huge_release(seg, size);
    hak_limit_relax();
}

/* Grow a huge block of old_map mapping bytes to new_map with cached memory:
 * in a new reservation whose new part is made writable first, the block's
 * pages move to the front, then the cached mappings' pages over the new
 * part; only what they do not cover stays fresh memory.  NULL, with the
 * pieces back in the cache and the block as it was, if nothing is cached or
 * the kernel refuses the reservation or the block's move (a piece the
 * kernel will not move stays cached; that part of the block is fresh). */
static hak_segment_t *hak_huge_grow_cached(hak_segment_t *seg, size_t old_map, size_t new_map) {
    hak_piece_t pc[HAK_HUGE_PIECES];
    size_t extra = new_map - old_map;
    size_t n = hak_cache_huge_take(extra, HAK_SEGMENT_SIZE, pc, HAK_HUGE_PIECES);
    if (n == 0) return NULL;
    hak_pieces_trim(pc, n, extra);
    uint8_t *dest = hak_os_reserve_aligned(new_map, HAK_SEGMENT_SIZE);
    bool ok = dest && hak_os_commit(dest + old_map, extra);
    if (ok) {
        hak_huge_mark(seg, old_map, false);
        ok = hak_os_remap(seg, old_map, old_map, dest) != NULL;
        if (!ok) hak_huge_mark(seg, old_map, true);
    }
    if (!ok) {
        if (dest) hak_os_unmap(dest, new_map);
        for (size_t i = 0; i < n; i++) hak_huge_give_back(&pc[i]);
        return NULL;
    }
    /* the block's pages replace part of the (counted) reservation; its new
     * part is writable already */
    hak_count_peak(&hak_counters.bytes_mapped, &hak_counters.bytes_mapped_peak, -(int64_t)old_map);
    size_t dirty;
    hak_pieces_move(pc, n, dest, old_map, false, &dirty);
    return (hak_segment_t *)dest;
}

/* A huge block whose mapping grew from old_map to new_map bytes where it
 * lies (its block starts offset bytes in), now of size bytes. */
static void hak_huge_grown_in_place(hak_segment_t *seg, size_t old_map, size_t new_map, size_t offset,
                                    size_t size) {
    seg->map_size = new_map;
    hak_huge_set_size(&seg->pages[0], offset, new_map, size);
    hak_huge_mark(seg, new_map, true);
    hak_cache_huge_live((int64_t)(new_map - old_map));
}

/* Resize a huge block by moving pages, never copying them.  A size its
 * mapping holds keeps the block where it is, with the new size recorded
 * (hak_huge_set_size); the units it no longer reaches go to the huge cache.
 * Growing past the mapping takes, in this order: the cached mapping right
 * after the block (nothing moves); cached memory, composed behind the block
 * in a new reservation; the address space after it (fresh memory, in place);
 * a new reservation (fresh).  Returns the new pointer, or NULL (errno set)
 * leaving the block untouched: a growth that would move a block aligned to
 * more than 4 MiB (the caller copies it). */
void *hak_huge_realloc(hak_segment_t *seg, void *p, size_t size) {
    hak_page_t *page = &seg->pages[0];
    hak_huge_clean_set(seg, 0);                  /* (the estimate: resident, all of it, from now on) */
    size_t offset = (size_t)(page->start - (uint8_t *)seg);
    if (size > ((size_t)1 << 46)) { errno = ENOMEM; return NULL; }
    size_t new_map = hak_round_up(offset + size, HAK_SEGMENT_SIZE);
    size_t old_map = seg->map_size;
    if (new_map <= old_map) {
        /* Shrink: the units it no longer reaches go to the cache, committed. */
        if (new_map < old_map) {
            size_t dirty = old_map;
            seg->map_size = new_map;
            hak_cache_huge_live(-(int64_t)(old_map - new_map));
            hak_huge_split(seg, old_map, new_map, &dirty, true);
        }
        hak_huge_set_size(page, offset, new_map, size);
        return p;
    }
    if (offset >= HAK_SEGMENT_SIZE) { errno = ENOMEM; return NULL; }
    hak_piece_t next;
    if (hak_cache_huge_take_at((uint8_t *)seg + old_map, &next)) {
        size_t d = next.dirty;
        if (next.size > new_map - old_map) {
            hak_huge_split(next.seg, next.size, new_map - old_map, &d, false);
            next.size = new_map - old_map;
        }
        if (next.size >= new_map - old_map ||
            hak_os_remap(seg, old_map + next.size, new_map, NULL)) {   /* and the space after it */
            hak_huge_grown_in_place(seg, old_map, new_map, offset, size);
            hak_limit_check();
            return p;
        }
        hak_huge_give_back(&next);
    }
    hak_heap_t *owner = hak_huge_hooks.hold ? hak_huge_hooks.hold(seg) : NULL;   /* a public heap's block stays its */
    hak_segment_t *moved = hak_huge_grow_cached(seg, old_map, new_map);
    if (!moved && hak_os_remap(seg, old_map, new_map, NULL)) {
        hak_huge_grown_in_place(seg, old_map, new_map, offset, size);
        if (owner) hak_huge_hooks.unhold(owner, seg);
        hak_limit_check();
        return p;
    }
    if (!moved) moved = hak_huge_move(seg, old_map, new_map, HAK_SEGMENT_SIZE);
    if (moved) hak_huge_setup(moved, new_map, offset, size);
    if (owner) hak_huge_hooks.unhold(owner, moved ? moved : seg);
    if (!moved) { errno = ENOMEM; return NULL; }
    hak_cache_huge_live((int64_t)(new_map - old_map));
    hak_limit_check();
    return moved->pages[0].start;
}
