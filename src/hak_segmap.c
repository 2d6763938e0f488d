/* hak_segmap.c -- the region map: 16 bits per 4 MiB of address space, saying
 * whether hakmem owns the unit and which heap's segment it is (HAK_TAG_*,
 * hak_types.h).  free() reads it inline (hak_segmap_get); every write goes
 * through hak_segmap_set. */
#include "hak_internal.h"

_Atomic uint16_t hak_segmap[HAK_SEGMAP_ENTRIES];

/* One bit per block of 2,048 entries (4 KiB of the map, 8 GiB of address
 * space): set once an entry of the block has been set.  The memory account
 * (hak_account.c) looks only at those blocks, not at the whole 64 MiB. */
#define HAK_SEGMAP_BLOCK 2048
#define HAK_SEGMAP_BLOCKS ((HAK_SEGMAP_ENTRIES + HAK_SEGMAP_BLOCK - 1) / HAK_SEGMAP_BLOCK)
static _Atomic uint64_t hak_segmap_touched[(HAK_SEGMAP_BLOCKS + 63) / 64];

static bool hak_segmap_block_touched(size_t b) {
    return atomic_load_explicit(&hak_segmap_touched[b >> 6], memory_order_acquire) & ((uint64_t)1 << (b & 63));
}

/* The OS layer hands out only memory the map describes (hak_os.c), so an
 * address beyond it is a bug: refused, never written past the map nor into
 * an aliased entry; fatal in the debug build. */
void hak_segmap_set(const void *p, uint16_t v) {
    uintptr_t idx = (uintptr_t)p >> HAK_SEGMENT_SHIFT;
    if (hak_unlikely(idx >= HAK_SEGMAP_ENTRIES)) {
        if (HAK_DEBUG_ENABLED) hak_fatal("region map", "address outside the map", p);
        return;
    }
    /* release: the segment's header, written before, is visible to whoever
     * reads v with acquire (hak_segmap_get_acquire) */
    if (v != HAK_TAG_NONE && !hak_segmap_block_touched(idx / HAK_SEGMAP_BLOCK))
        atomic_fetch_or_explicit(&hak_segmap_touched[idx / HAK_SEGMAP_BLOCK >> 6],
                                 (uint64_t)1 << (idx / HAK_SEGMAP_BLOCK & 63), memory_order_release);
    atomic_store_explicit(&hak_segmap[idx], v, memory_order_release);
}

size_t hak_segmap_next(size_t i) {
    while (i < HAK_SEGMAP_ENTRIES) {
        size_t b = i / HAK_SEGMAP_BLOCK;
        if (!hak_segmap_block_touched(b)) { i = (b + 1) * HAK_SEGMAP_BLOCK; continue; }
        size_t end = (b + 1) * HAK_SEGMAP_BLOCK < HAK_SEGMAP_ENTRIES ? (b + 1) * HAK_SEGMAP_BLOCK : HAK_SEGMAP_ENTRIES;
        for (; i < end; i++)
            if (atomic_load_explicit(&hak_segmap[i], memory_order_acquire) != HAK_TAG_NONE) return i;
    }
    return HAK_SEGMAP_ENTRIES;
}

hak_segment_t *hak_segment_of_checked(const void *p) {
    if ((uintptr_t)p >> HAK_ADDRESS_BITS) return NULL;
    uint16_t v = hak_segmap_get_acquire(p);   /* then the header: see hak_segmap_set */
    if (v == HAK_TAG_NONE) return NULL;
    uintptr_t back = (v & HAK_TAG_BACK) ? (uintptr_t)(v & ~HAK_TAG_BACK) : 0;
    return (hak_segment_t *)(((uintptr_t)p & ~(uintptr_t)HAK_SEGMENT_MASK) - (back << HAK_SEGMENT_SHIFT));
}
