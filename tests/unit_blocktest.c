/* unit_blocktest.c -- the fast free's block test, exhaustively.
 *
 * free() accepts p as the start of a block when offset * magic (mod 2^64)
 * is below the page's limit (hak_local_block / hak_wide_block /
 * hak_carved_block).  For every size class and several capacities, this
 * checks that the test holds for exactly the starts of the carved blocks:
 *  - small pages: every 16-bit offset (the fast free takes the low 16 bits
 *    of the address, so no other offset can reach the test);
 *  - medium and large pages: every offset in the first MiB of the page (all
 *    of it for medium pages) and the 16 KiB below the page start (offsets
 *    that wrap to huge values), up to 64 KiB more for a medium or large
 *    class (in slot 0 a medium page starts a block's slack after the
 *    header, a large one at the second slice).
 * Also: the table of medium classes (hak_medium_class) against hak_size_class.
 * White-box: built against src/ with hak_size.c (tests/tests.mk). */
#include "check.h"
#include "hak_internal.h"
#include <stdint.h>

static int check_class(unsigned cls, uint32_t cap, size_t span) {
    size_t size = hak_class_size(cls);
    uint64_t magic = hak_div_magic(size), step = magic * size;
    uint64_t limit = hak_block_limit(cap, step);
    int bad = 0;
    for (size_t off = 0; off < span; off++) {
        bool want = off % size == 0 && off / size < cap;
        if ((off * magic < limit) != want && bad++ < 3)
            CHECKF(0, "class %u (size %zu), capacity %u: offset %zu gives %d, want %d",
                   cls, size, cap, off, !want, want);
    }
    /* in slot 0 a medium page starts up to a block's slack after the
     * header, a large page 64 KiB after the segment's start */
    size_t below_max = 16384 + (hak_class_kind(cls) == HAK_PAGE_SMALL ? 0 : size < 65536 ? size : 65536);
    for (size_t below = 1; below <= below_max; below++) {
        size_t off = (size_t)0 - below;   /* a pointer below the page start */
        if (off * magic < limit && bad++ < 3)
            CHECKF(0, "class %u: offset -%zu passes", cls, below);
    }
    return bad;
}

static void test_every_class(void) {
    for (unsigned cls = 0; cls < HAK_CLASS_COUNT; cls++) {
        hak_page_kind_t kind = hak_class_kind(cls);
        size_t page = (size_t)1 << hak_kind_shift(kind);
        size_t size = hak_class_size(cls);
        uint32_t reserved = (uint32_t)(page / size);
        size_t span = kind == HAK_PAGE_SMALL ? 65536 : (page < ((size_t)1 << 20) ? page : (size_t)1 << 20);
        uint32_t caps[4] = { 1, reserved > 2 ? 2 : 1, reserved / 2 > 0 ? reserved / 2 : 1, reserved };
        for (int i = 0; i < 4; i++)
            if (check_class(cls, caps[i], span)) break;
    }
}

static void test_capacity_zero_accepts_nothing(void) {
    for (unsigned cls = 0; cls < HAK_CLASS_COUNT; cls += 7) {
        size_t size = hak_class_size(cls);
        uint64_t magic = hak_div_magic(size);
        for (size_t off = 0; off < 4 * size; off += 16)
            CHECKF(!(off * magic < hak_block_limit(0, magic * size)), "class %u offset %zu", cls, off);
    }
}

/* hak_malloc_slow's table of medium classes gives hak_size_class's answer
 * for every size it covers. */
static void test_medium_class_table(void) {
    int bad = 0;
    for (size_t size = HAK_DIRECT_MAX + 1; size <= HAK_MEDIUM_MAX; size++) {
        unsigned want = hak_size_class(size), got = hak_medium_class[(size - 1) >> 8];
        if (got != want && bad++ < 3)
            CHECKF(0, "size %zu: table gives class %u, hak_size_class %u", size, got, want);
    }
    CHECK(bad == 0);
}

/* hak_queue_set_direct's table: each direct class's last heap->direct[]
 * index is its size / 16, and every size up to HAK_DIRECT_MAX lands in the
 * entries of its own class (direct[(size + 15) >> 4], the fast path's). */
static void test_direct_table(void) {
    CHECK(hak_size_class(HAK_DIRECT_MAX) == HAK_DIRECT_CLASSES - 1);
    for (unsigned cls = 0; cls < HAK_DIRECT_CLASSES; cls++)
        CHECKF(hak_direct_hi[cls] == hak_class_size(cls) >> 4, "class %u: %u", cls, hak_direct_hi[cls]);
    int bad = 0;
    for (size_t size = 1; size <= HAK_DIRECT_MAX; size++) {
        size_t i = (size + 15) >> 4;
        unsigned cls = hak_size_class(size);
        bool in = i <= hak_direct_hi[cls] && (cls == 0 || i > hak_direct_hi[cls - 1]);
        if (!in && bad++ < 3) CHECKF(0, "size %zu: entry %zu outside class %u's", size, i, cls);
    }
    CHECK(bad == 0);
}

/* the constants hak_find_page tests classes against agree with
 * hak_class_kind */
static void test_class_kind_bounds(void) {
    for (unsigned cls = 0; cls < HAK_CLASS_COUNT; cls++) {
        hak_page_kind_t kind = hak_class_kind(cls);
        CHECKF((kind == HAK_PAGE_SMALL) == (cls <= HAK_CLASS_SMALL_LAST), "class %u: kind %d", cls, kind);
        CHECKF((kind == HAK_PAGE_LARGE) == (cls > HAK_CLASS_MEDIUM_LAST), "class %u: kind %d", cls, kind);
    }
}

int main(int argc, char **argv) {
    chk_prefix = argc > 2 && !strcmp(argv[1], "-p") ? argv[2] : "blocktest";
    RUN_TEST(every_class);
    RUN_TEST(capacity_zero_accepts_nothing);
    RUN_TEST(medium_class_table);
    RUN_TEST(direct_table);
    RUN_TEST(class_kind_bounds);
    return check_exit_code();
}
