/* hak_size.c -- size classes.
 *
 * Classes 0..7 are 16..128 in steps of 16 (16 B is the alignment floor, so
 * the steps between 64 and 128 cannot be finer).  Above 128 B each power of
 * two is split in 8 classes, so neighbouring classes are at most 12.5% apart:
 * 144, 160, ..., 256, 288, ..., 512, ..., up to 2 MiB (class 119).  Every
 * class size is a multiple of 16, so every block is 16-byte aligned. */
#include "hak_internal.h"

size_t hak_class_size(unsigned cls) {
    if (cls < 8) return (size_t)(cls + 1) * 16;
    unsigned k = 7 + (cls - 8) / 8, sub = (cls - 8) % 8;
    return (size_t)(9 + sub) << (k - 3);
}

hak_page_kind_t hak_class_kind(unsigned cls) {
    size_t s = hak_class_size(cls);
    if (s <= HAK_SMALL_MAX) return HAK_PAGE_SMALL;
    if (s <= 2 * HAK_SMALL_MAX) return HAK_PAGE_MEDIUM1;
    if (s <= 4 * HAK_SMALL_MAX) return HAK_PAGE_MEDIUM2;
    if (s <= HAK_MEDIUM_MAX) return HAK_PAGE_MEDIUM;
    return HAK_PAGE_LARGE;
}

unsigned hak_kind_shift(hak_page_kind_t kind) {
    static const uint8_t shift[HAK_PAGE_KINDS + 1] = { 16, 18, 19, 20, 22, 22 };
    return shift[kind];
}

/* The class of each size in (HAK_DIRECT_MAX, HAK_MEDIUM_MAX], by 256-byte
 * step: above 2 KiB every class size is a multiple of 256 (8 classes per
 * power of two), so sizes (i*256, (i+1)*256] share a class, that of
 * (i+1)*256.  hak_malloc_slow's medium path reads it instead of computing
 * hak_size_class (unit_blocktest compares the two for every size). */
#define HAK_SC_K(s) (63u - (unsigned)__builtin_clzl((s) - 1))
#define HAK_SC(s) (uint8_t)(8u + (HAK_SC_K(s) - 7u) * 8u + (unsigned)((((s) - 1) >> (HAK_SC_K(s) - 3u)) & 7u))
#define HAK_SC1(i) HAK_SC(((size_t)(i) + 1) << 8),
#define HAK_SC4(i) HAK_SC1(i) HAK_SC1(i + 1) HAK_SC1(i + 2) HAK_SC1(i + 3)
#define HAK_SC16(i) HAK_SC4(i) HAK_SC4(i + 4) HAK_SC4(i + 8) HAK_SC4(i + 12)
#define HAK_SC64(i) HAK_SC16(i) HAK_SC16(i + 16) HAK_SC16(i + 32) HAK_SC16(i + 48)
const uint8_t hak_medium_class[HAK_MEDIUM_MAX >> 8] = {
    HAK_SC64(0) HAK_SC64(64) HAK_SC64(128) HAK_SC64(192)
};
_Static_assert(HAK_MEDIUM_MAX >> 8 == 256 && HAK_DIRECT_MAX % 256 == 0, "hak_medium_class covers 2..64 KiB");

/* The last heap->direct[] index of each class that has one (direct[i] serves
 * sizes up to i * 16): class_size(cls) / 16, as constants, so that a change
 * of a class's first page costs its stores and no size arithmetic. */
#define HAK_DCS(c) ((c) < 8 ? ((c) + 1) * 16 : (9 + ((c) - 8) % 8) << (4 + ((c) < 8 ? 0 : ((c) - 8) / 8)))
#define HAK_DHI(c) (uint8_t)(HAK_DCS(c) >> 4),
#define HAK_DHI8(c) HAK_DHI(c) HAK_DHI(c + 1) HAK_DHI(c + 2) HAK_DHI(c + 3) \
                    HAK_DHI(c + 4) HAK_DHI(c + 5) HAK_DHI(c + 6) HAK_DHI(c + 7)
const uint8_t hak_direct_hi[HAK_DIRECT_CLASSES] = {
    HAK_DHI8(0) HAK_DHI8(8) HAK_DHI8(16) HAK_DHI8(24) HAK_DHI8(32)
};
_Static_assert(HAK_DCS(HAK_DIRECT_CLASSES - 1) == HAK_DIRECT_MAX, "hak_direct_hi ends at HAK_DIRECT_MAX");
