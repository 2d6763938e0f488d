/* hak_zero.c -- the blocks of malloc(0): distinct addresses that fault when
 * touched.
 *
 * A block of size 0 may not be read or written, but an ordinary allocator
 * hands out a small slot for it (glibc 24 bytes, hakmem before this file a
 * 16-byte slot), where a read leaks a neighbour's old data and a write goes
 * unnoticed.  malloc(0) -- and calloc with a zero total, realloc(NULL, 0),
 * operator new(0), the aligned allocations of size 0 -- returns instead an
 * address inside one reservation that stays PROT_NONE: the first access
 * faults (SIGSEGV in the program's own code).  Each address stays distinct
 * while its block lives, as C requires of two malloc(0) results: the region
 * is HAK_ZERO_SLOTS slots of 16 bytes, a bit each in a bitmap, taken and
 * given back with one atomic operation (no lock: fork and signal handlers
 * see a consistent bitmap).  free of a slot whose bit is clear is a double
 * free; a pointer inside the region not at a slot's start is invalid.
 *
 * The region is reserved at the first zero-size request (4 MiB of address
 * space, no memory: the bitmap lives in .bss, 32 KiB touched as it fills).
 * If the reservation fails, or every slot is live, or the alignment asked
 * for exceeds what a slot index can give, hak_zero_alloc returns NULL and the
 * caller serves an ordinary block of its smallest class: a zero-size request
 * never fails for want of this region.  malloc_usable_size of such a block
 * is 0.  The public heaps (hakmem_heap_malloc) keep ordinary blocks: a heap's
 * blocks live in its own segments (docs/heaps.md).
 *
 * Cost: none on the fast paths.  heap->direct[0] is always the empty page, so
 * malloc(0) misses the fast path's pop and reaches hak_malloc_general, which
 * calls here; free of such a block fails the region map's test and reaches
 * the complete check (hak_free.c), which asks here before calling it
 * foreign. */
#include "hak_internal.h"

#define HAK_ZERO_SLOT 16
#define HAK_ZERO_SLOTS ((uint32_t)1 << 18)
#define HAK_ZERO_BYTES ((size_t)HAK_ZERO_SLOTS * HAK_ZERO_SLOT)   /* 4 MiB */
#define HAK_ZERO_WORDS (HAK_ZERO_SLOTS / 64)
#define HAK_ZERO_ALIGN_MAX ((size_t)HAK_ZERO_SLOT * 64)              /* bit 0 of a word */
#define HAK_ZERO_FAILED ((uintptr_t)1)

static _Atomic uint64_t hak_zero_bits[HAK_ZERO_WORDS];   /* bit set: slot live */
static _Atomic uintptr_t hak_zero_base;                   /* 0: not yet; HAK_ZERO_FAILED */
static _Atomic uint32_t hak_zero_cursor;                  /* the word to look at first */

static HAK_NOINLINE uintptr_t hak_zero_reserve(void) {
    void *r = hak_os_reserve_aligned(HAK_ZERO_BYTES, HAK_ZERO_ALIGN_MAX);
    uintptr_t want = r ? (uintptr_t)r : HAK_ZERO_FAILED, none = 0;
    if (!atomic_compare_exchange_strong_explicit(&hak_zero_base, &none, want, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        if (r) hak_os_unmap(r, HAK_ZERO_BYTES);   /* another thread's came first */
        return none;
    }
    if (r) {
        hak_count_clean((int64_t)HAK_ZERO_BYTES);   /* no-access: never resident */
        hak_crash_zero_region((uintptr_t)r, HAK_ZERO_BYTES);   /* the crash report names a touch */
    }
    return want;
}

/* The memory account: the region's reservation (false: none). */
bool hak_zero_region(uintptr_t *base, size_t *size) {
    uintptr_t b = atomic_load_explicit(&hak_zero_base, memory_order_acquire);
    if (b == 0 || b == HAK_ZERO_FAILED) return false;
    *base = b;
    *size = HAK_ZERO_BYTES;
    return true;
}

/* The slots of a word whose index is a multiple of k (a power of two <= 64). */
static uint64_t hak_zero_allowed(size_t k) {
    uint64_t m = 1;
    for (size_t s = k; s < 64; s *= 2) m |= m << s;
    return m;
}

void *hak_zero_alloc(size_t align) {
    uintptr_t base = atomic_load_explicit(&hak_zero_base, memory_order_acquire);
    if (hak_unlikely(base == 0)) base = hak_zero_reserve();
    if (base == HAK_ZERO_FAILED || align > HAK_ZERO_ALIGN_MAX) return NULL;
    uint64_t allowed = hak_zero_allowed(align <= HAK_ZERO_SLOT ? 1 : align / HAK_ZERO_SLOT);
    uint32_t start = atomic_load_explicit(&hak_zero_cursor, memory_order_relaxed);
    for (uint32_t i = 0; i < HAK_ZERO_WORDS; i++) {
        uint32_t w = (start + i) % HAK_ZERO_WORDS;
        uint64_t v = atomic_load_explicit(&hak_zero_bits[w], memory_order_relaxed);
        uint64_t open;
        while ((open = ~v & allowed) != 0) {
            uint64_t bit = open & (~open + 1);
            if (atomic_compare_exchange_weak_explicit(&hak_zero_bits[w], &v, v | bit, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                if (w != start) atomic_store_explicit(&hak_zero_cursor, w, memory_order_relaxed);
                return (void *)(base + ((size_t)w * 64 + (size_t)__builtin_ctzll(bit)) * HAK_ZERO_SLOT);
            }
        }
    }
    return NULL;   /* every slot live */
}

/* p's offset in the region, or HAK_ZERO_BYTES when p lies outside it */
static size_t hak_zero_offset(const void *p) {
    uintptr_t base = atomic_load_explicit(&hak_zero_base, memory_order_relaxed);
    size_t off = (uintptr_t)p - base;
    return base > HAK_ZERO_FAILED && off < HAK_ZERO_BYTES ? off : HAK_ZERO_BYTES;
}

bool hak_zero_owns(const void *p) { return hak_zero_offset(p) < HAK_ZERO_BYTES; }

bool hak_zero_free(const void *p, const char *op) {
    size_t off = hak_zero_offset(p);
    if (off == HAK_ZERO_BYTES) return false;
    if (off % HAK_ZERO_SLOT) hak_fatal(op, "invalid pointer (inside the region of malloc(0)'s blocks)", p);
    size_t slot = off / HAK_ZERO_SLOT;
    uint64_t bit = (uint64_t)1 << (slot % 64);
    uint64_t was = atomic_fetch_and_explicit(&hak_zero_bits[slot / 64], ~bit, memory_order_relaxed);
    if (!(was & bit)) hak_fatal(op, "double free of", p);
    return true;
}

bool hak_zero_live(const void *p) {
    size_t off = hak_zero_offset(p);
    if (off == HAK_ZERO_BYTES || off % HAK_ZERO_SLOT) return false;
    size_t slot = off / HAK_ZERO_SLOT;
    return atomic_load_explicit(&hak_zero_bits[slot / 64], memory_order_relaxed) >> (slot % 64) & 1;
}
