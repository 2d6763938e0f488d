/* hak_hardened.h -- the hardened build (make hardened, -DHAK_HARDENED=1;
 * docs/security.md, "The hardened build").  hak_hardened.c is compiled into
 * every build, but only the hardened build's entry points call it: each
 * entry point tests HAK_HARDENED_ENABLED, a constant, so the other builds'
 * code is unchanged (their fast paths keep their instruction counts).  The
 * segment and huge-block layers test it too, for their guard pages. */
#ifndef HAK_HARDENED_H
#define HAK_HARDENED_H

#include "hak_internal.h"

#if defined(HAK_HARDENED) && HAK_HARDENED
#define HAK_HARDENED_ENABLED 1
#else
#define HAK_HARDENED_ENABLED 0
#endif

/* what a block was allocated by, kept in its trailer: a delete of a block
 * malloc handed out is reported */
#define HAK_HARDENED_BY_MALLOC 0u
#define HAK_HARDENED_BY_NEW    1u

void  *hak_hardened_malloc(size_t n, unsigned by);
void  *hak_hardened_calloc(size_t total);
void  *hak_hardened_aligned(size_t n, size_t align, bool zero, unsigned by);
void  *hak_hardened_realloc(void *p, size_t n);
size_t hak_hardened_usable(const void *p);
/* free (op names the caller in reports); sized: size must be the size
 * allocated; by_new: an operator delete (the block must come from new) */
void   hak_hardened_free(void *p, const char *op, bool sized, size_t size, bool by_new);

/* the program's size of the block at block in a slot of slot bytes, read
 * from its trailer, or one of these (hak_memcheck.c's check) */
#define HAK_HARDENED_FREED   (SIZE_MAX)
#define HAK_HARDENED_UNKNOWN (SIZE_MAX - 1)
size_t hak_hardened_block_n(const void *block, size_t slot);
/* d is not hakmem's, or [d, d + len) lies in a live block's bytes (the
 * common cases, quick); false: not known so (hak_memcheck.c looks closer) */
bool   hak_hardened_write_ok(const void *d, size_t len);

/* Helpers of the layers below, for the hardened layer only. */
/* Is w a key hak_page_new_key has issued (a free block's key word left in
 * memory)?  (hak_secret.c) */
bool   hak_page_key_issued(uint64_t w);
/* hak_usable_size, naming op in a report (hak_free.c) */
size_t hak_usable_op(const void *p, const char *op);
/* make [p, p + size) inaccessible, or accessible again, its contents kept
 * (hak_os.c) */
bool   hak_os_guard(void *p, size_t size);
bool   hak_os_unguard(void *p, size_t size);
/* zero [p, p + size) but for the pages neither in memory nor in swap
 * (hak_os.c) */
void   hak_os_zero_touched(void *p, size_t size);

/* The guard page between a segment's header and its pages (hak_segment.c):
 * the header's bytes [0, HAK_HARDENED_HEADER) are the same for every kind of
 * segment, so a cached segment formatted for another kind keeps its guard. */
#define HAK_HARDENED_GUARD_AT ((size_t)16 << 10)   /* past the largest header (64 descriptors) */
#define HAK_HARDENED_GUARD    ((size_t)4 << 10)
#define HAK_HARDENED_HEADER   (HAK_HARDENED_GUARD_AT + HAK_HARDENED_GUARD)

/* Far overflows (docs/security.md, "The hardened build"): a segment holds
 * pages in its first MiB only, [0, HAK_HARDENED_USED); the other 3 MiB are
 * no-access, made so when the segment is mapped and kept while it is
 * cached (every kind has this layout).  A write 1 MiB (up to 3 MiB) past
 * any block of a segment lands there, and one 1 MiB before lands in the
 * previous 4 MiB unit's last 3 MiB: no-access too, when that unit is a
 * segment or a huge mapping (whose block ends at least HAK_HARDENED_FAR
 * before the mapping's end, hak_huge.c).  Blocks that do not fit in a MiB
 * with the header (above HAK_LARGE_MAX, 960 KiB here) are huge. */
#define HAK_HARDENED_USED     ((size_t)1 << 20)
#define HAK_HARDENED_FAR      ((size_t)1 << 20)
_Static_assert(HAK_HARDENED_USED % ((size_t)1 << HAK_SLICE_SHIFT) == 0, "whole slices");

#endif /* HAK_HARDENED_H */
