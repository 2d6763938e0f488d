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
    static const uint8_t shift[HAK_PAGE_KINDS + 1] = { 16, 17, 18, 19, 22, 22 };
    return shift[kind];
}
