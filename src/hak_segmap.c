/* hak_segmap.c -- the region map: 16 bits per 4 MiB of address space, saying
 * whether hakmem owns the unit and which heap's segment it is (HAK_TAG_*,
 * hak_types.h).  free() reads it inline (hak_segmap_get); every write goes
 * through hak_segmap_set. */
#include "hak_internal.h"

_Atomic uint16_t hak_segmap[HAK_SEGMAP_ENTRIES];

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
    atomic_store_explicit(&hak_segmap[idx], v, memory_order_release);
}

hak_segment_t *hak_segment_of_checked(const void *p) {
    if ((uintptr_t)p >> HAK_ADDRESS_BITS) return NULL;
    uint16_t v = hak_segmap_get_acquire(p);   /* then the header: see hak_segmap_set */
    if (v == HAK_TAG_NONE) return NULL;
    uintptr_t back = (v & HAK_TAG_BACK) ? (uintptr_t)(v & ~HAK_TAG_BACK) : 0;
    return (hak_segment_t *)(((uintptr_t)p & ~(uintptr_t)HAK_SEGMENT_MASK) - (back << HAK_SEGMENT_SHIFT));
}
