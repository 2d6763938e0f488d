/* hak_foreign.c -- blocks from glibc's own malloc that reach hakmem.
 *
 * A library loaded with RTLD_DEEPBIND binds malloc to glibc's before the
 * preloaded hakmem, so its blocks can reach hakmem's free, realloc and
 * malloc_usable_size.  Those are handed back to glibc (__libc_free) instead
 * of being reported as invalid, when they look like glibc chunks: inside the
 * brk heap (hakmem itself never uses brk), or a page-aligned mmapped chunk
 * with glibc's IS_MMAPPED bit.  Anything else stays a reported misuse.  The
 * other direction (glibc's free given a hakmem block) cannot be fixed from
 * here: link such a plug-in with -lhakmem (docs/install.md). */
#include "hak_internal.h"
#include <sys/mman.h>
#include <unistd.h>

extern void __libc_free(void *) __attribute__((weak));

static uintptr_t hak_brk_start;

void hak_foreign_init(void) {
    void *b = sbrk(0);
    hak_brk_start = b == (void *)-1 ? 0 : (uintptr_t)b;
}

/* The chunk size glibc stores before a block, if p looks like one of its
 * blocks; 0 otherwise.  *mmapped tells which kind. */
static size_t hak_libc_chunk(const void *p, bool *mmapped) {
    uintptr_t a = (uintptr_t)p;
    if (!__libc_free || (a & 15) != 0 || a < 4096) return 0;
    void *b = sbrk(0);
    uintptr_t brk_end = b == (void *)-1 ? 0 : (uintptr_t)b;
    if (hak_brk_start && a >= hak_brk_start + 16 && a < brk_end) {
        size_t sz = ((const size_t *)p)[-1] & ~(size_t)7;
        if (sz < 32 || a - 16 + sz > brk_end) return 0;
        *mmapped = false;
        return sz;
    }
    size_t ps = hak_os_page_size();
    uintptr_t chunk = a - 16;
    if ((chunk & (ps - 1)) != 0) return 0;
    unsigned char vec;
    if (mincore((void *)chunk, ps, &vec) != 0) return 0;   /* not mapped */
    size_t raw = ((const size_t *)p)[-1];
    size_t sz = raw & ~(size_t)7;
    if (!(raw & 2) || sz < ps || (sz & (ps - 1)) != 0) return 0;
    *mmapped = true;
    return sz;
}

bool hak_foreign_free(void *p) {
    bool mm;
    if (!hak_libc_chunk(p, &mm)) return false;
    __libc_free(p);
    return true;
}

size_t hak_foreign_usable(const void *p) {
    bool mm;
    size_t sz = hak_libc_chunk(p, &mm);
    return sz ? sz - (mm ? 16 : 8) : 0;
}
