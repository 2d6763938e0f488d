/* hak_huge.c -- huge blocks (above HAK_LARGE_MAX): a mapping of their own
 * with a segment header (hak_segment_t and one hak_page_t, 768 bytes) in
 * front of the block: the block starts 768 bytes into its 4 MiB-aligned
 * mapping (rounded up to the alignment asked for), not on a page boundary. */
#include "hak_internal.h"

static size_t hak_huge_header(void) { return sizeof(hak_segment_t) + sizeof(hak_page_t); }

/* Mark (or clear) every 4 MiB unit of a huge mapping in the region map, so
 * that hakmem_owns() knows its interior and free() of an interior pointer is
 * reported as such.  Unit u points back u units to the header. */
static void hak_huge_mark(hak_segment_t *seg, size_t map_size, bool on) {
    size_t units = (map_size + HAK_SEGMENT_SIZE - 1) >> HAK_SEGMENT_SHIFT;
    if (units > HAK_TAG_LAST) units = HAK_TAG_LAST;
    for (size_t u = 0; u < units; u++) {
        uint16_t v = !on ? HAK_TAG_NONE : u == 0 ? HAK_TAG_SHARED : (uint16_t)(HAK_TAG_BACK | u);
        hak_segmap_set((uint8_t *)seg + (u << HAK_SEGMENT_SHIFT), v);
    }
}

static void hak_huge_setup(hak_segment_t *seg, size_t map_size, size_t offset) {
    seg->heap = NULL;
    seg->kind = HAK_PAGE_HUGE;
    seg->page_shift = HAK_SEGMENT_SHIFT;
    seg->page_count = 1;
    seg->used_pages = 1;
    seg->map_size = map_size;
    hak_segment_set_slices(seg);
    hak_page_t *page = &seg->pages[0];
    page->kind = HAK_PAGE_HUGE;
    page->class_idx = 255;
    page->in_use = 1;
    page->start = (uint8_t *)seg + offset;
    page->block_size = page->area = map_size - offset;
    page->reserved = page->used = 1;
    HAK_SET_RELAXED(page->capacity, 1);
    page->div_magic = page->local_magic = 1;
    page->div_step = 0;
    page->free_key = page->local_key = hak_page_key(page);
    hak_page_set_flags(page, HAK_PAGE_IS_HUGE);
    hak_huge_mark(seg, map_size, true);
}

void *hak_huge_alloc(size_t size, size_t align, bool zero) {
    (void)zero; /* fresh mappings are zero */
    if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
    size_t offset = hak_round_up(hak_huge_header(), align);
    size_t map_align = align > HAK_SEGMENT_SIZE ? align : HAK_SEGMENT_SIZE;
    if ((offset >> HAK_SEGMENT_SHIFT) >= 0x7fff || size > ((size_t)1 << 46)) { errno = ENOMEM; return NULL; }
    /* size 0 (an aligned allocation): the block must still start inside the mapping */
    size_t map_size = hak_round_up(offset + (size ? size : 1), hak_os_page_size());
    hak_segment_t *seg = hak_os_map_aligned(map_size, map_align);
    if (!seg) { errno = ENOMEM; return NULL; }
    hak_huge_setup(seg, map_size, offset);
    hak_count_peak(&hak_counters.huge_in_use, &hak_counters.huge_peak, 1);
    return seg->pages[0].start;
}

void hak_huge_free(hak_segment_t *seg) {
    hak_huge_mark(seg, seg->map_size, false);
    hak_count_peak(&hak_counters.huge_in_use, &hak_counters.huge_peak, -1);
    hak_os_unmap(seg, seg->map_size);
}

/* Resize a huge block by moving pages, never copying them: in place when the
 * address space after it is free, else into a new 4 MiB-aligned reservation.
 * Returns the new pointer, or NULL (errno set) leaving the block untouched. */
void *hak_huge_realloc(hak_segment_t *seg, void *p, size_t size) {
    hak_page_t *page = &seg->pages[0];
    size_t offset = (size_t)(page->start - (uint8_t *)seg);
    if (offset >= HAK_SEGMENT_SIZE || size > ((size_t)1 << 46)) { errno = ENOMEM; return NULL; }
    size_t new_map = hak_round_up(offset + size, hak_os_page_size());
    size_t old_map = seg->map_size;
    if (new_map <= old_map) {
        /* Shrink: give back the tail if it is worth a syscall. */
        if (old_map - new_map >= ((size_t)1 << 20)) {
            if (hak_os_remap(seg, old_map, new_map, NULL)) {
                hak_huge_mark(seg, old_map, false);
                hak_huge_mark(seg, new_map, true);
                seg->map_size = new_map;
                page->block_size = page->area = new_map - offset;
            }
        }
        return p;
    }
    if (hak_os_remap(seg, old_map, new_map, NULL)) {
        seg->map_size = new_map;
        page->block_size = page->area = new_map - offset;
        hak_huge_mark(seg, new_map, true);
        return p;
    }
    void *dest = hak_os_reserve_aligned(new_map, HAK_SEGMENT_SIZE);
    if (!dest) { errno = ENOMEM; return NULL; }
    hak_huge_mark(seg, old_map, false);
    hak_segment_t *moved = hak_os_remap(seg, old_map, new_map, dest);
    if (!moved) {
        hak_huge_mark(seg, old_map, true);
        hak_os_unmap(dest, new_map);
        errno = ENOMEM;
        return NULL;
    }
    /* The reservation's accounting was replaced by the moved mapping. */
    hak_count_peak(&hak_counters.bytes_mapped, &hak_counters.bytes_mapped_peak, -(int64_t)new_map);
    hak_huge_setup(moved, new_map, offset);
    return moved->pages[0].start;
}
