/* hak_hardened.c -- the hardened build's layer around every entry point
 * (make hardened; docs/security.md, "The hardened build").  Compiled into
 * every build; only the hardened build's entry points call it
 * (HAK_HARDENED_ENABLED, hak_hardened.h).
 *
 * A block of n bytes asks the ordinary machinery for n + 8 and lays out its
 * slot of U bytes (the underlying usable size) as
 *     [0, n)        the program's bytes
 *     [n, U - 8)    the canary: a 0 byte (a string filling the block ends
 *                   there), then a secret byte repeated
 *     [U - 8, U)    the trailer: n and who allocated (malloc or new),
 *                   encoded with secret 1 and the address; its low byte is
 *                   0, so with no canary byte the trailer's first byte ends
 *                   a string; its high bit is 1 (HAK_H_HIGH)
 * free checks the trailer and the canary (an overflow, or an underflow of
 * the next block, is reported), zeroes [0, U - 8), writes the freed mark in
 * the trailer and puts the block into the thread's quarantine.  A block
 * leaves the quarantine at random when it is full, after a check that it is
 * still zero (a write after free), and only then goes back to the free
 * lists.  malloc checks that a block it hands out again is still zero past
 * the free list's 16 bytes, and probes one random quarantined block.
 *
 * Huge blocks (above HAK_LARGE_MAX) skip the quarantine and the zeroing:
 * the hardened build unmaps them at free (hak_huge.c: no huge cache), and a
 * new one is a fresh mapping between guard pages. */
#include "hak_hardened.h"
#include <pthread.h>

/* ---- the trailer ---- */

#define HAK_H_N_BITS 47                        /* n < 2^47 */
#define HAK_H_V_MASK (((uint64_t)1 << 55) - 1)
#define HAK_H_FREED ((uint64_t)0x3f << 49)      /* never a live trailer's value */
/* The trailer's last byte -- the one just before the next slot, which a
 * 1-byte underflow of the next block writes -- always has its high bit set:
 * a NUL or ASCII byte written there never decodes (with a secret byte there
 * instead, 1 write in 256 did). */
#define HAK_H_HIGH ((uint64_t)1 << 63)

static inline uint64_t hak_h_mask(const void *p) {
    return (((uintptr_t)p ^ hak_secret(1)) * 0x9fb21c651e98df25u) >> 5;
}
static inline uint64_t hak_h_encode(const void *p, uint64_t v) {
    return (((v ^ hak_h_mask(p)) & HAK_H_V_MASK) << 8) | HAK_H_HIGH;   /* low byte 0 */
}
static inline uint64_t *hak_h_trailer(void *p, size_t slot) { return (uint64_t *)((uint8_t *)p + slot - 8); }
static inline uint8_t hak_h_canary_byte(void) { return (uint8_t)(hak_secret(0) >> 24) | 0x80; }

/* Seal a block of n bytes in a slot of slot bytes: canary and trailer. */
HAK_INLINE void hak_h_seal(void *p, size_t n, size_t slot, unsigned by) {
    uint8_t *c = (uint8_t *)p + n;
    size_t len = slot - 8 - n;
    if (len > 0) {
        c[0] = 0;
        memset(c + 1, hak_h_canary_byte(), len - 1);
    }
    *hak_h_trailer(p, slot) = hak_h_encode(p, (uint64_t)n | ((uint64_t)by << HAK_H_N_BITS));
}

/* The block's size and who allocated it, from a trailer that must be
 * intact (fatal otherwise: a freed block, or an overflow). */
typedef struct { size_t n; unsigned by; } hak_h_info_t;
static HAK_COLD void hak_h_bad_trailer(const void *p, uint64_t t, const char *op) {
    if (t == hak_h_encode(p, HAK_H_FREED)) hak_fatal(op, "pointer already freed", p);
    hak_fatal(op, "heap overflow detected (the size word after the block was overwritten) in block", p);
}
/* Decode trailer t of the block p in a slot of slot bytes: false if it is
 * not a live block's. */
HAK_INLINE bool hak_h_decode(const void *p, size_t slot, uint64_t t, hak_h_info_t *out) {
    uint64_t v = ((t >> 8) ^ hak_h_mask(p)) & HAK_H_V_MASK;
    out->n = (size_t)(v & (((uint64_t)1 << HAK_H_N_BITS) - 1));
    out->by = (unsigned)(v >> HAK_H_N_BITS) & 1u;
    return (t & 0xff) == 0 && (t & HAK_H_HIGH) && (v >> (HAK_H_N_BITS + 1)) == 0 && out->n <= slot - 8;
}
HAK_INLINE hak_h_info_t hak_h_read(void *p, size_t slot, const char *op) {
    uint64_t t = *hak_h_trailer(p, slot);
    hak_h_info_t b;
    if (hak_unlikely(!hak_h_decode(p, slot, t, &b))) hak_h_bad_trailer(p, t, op);
    return b;
}

/* The canary after n bytes: intact, or fatal. */
HAK_INLINE void hak_h_check_canary(const void *p, size_t n, size_t slot, const char *op) {
    const uint8_t *c = (const uint8_t *)p + n;
    size_t len = slot - 8 - n, i = 1;
    if (len == 0) return;
    uint8_t want = hak_h_canary_byte();
    uint64_t want8 = want * 0x0101010101010101u, bad = c[0];
    for (; i + 8 <= len; i += 8) {              /* 8 bytes a step, unaligned */
        uint64_t w;
        memcpy(&w, c + i, 8);
        bad |= w ^ want8;
    }
    if (i < len && len >= 9) {                 /* the tail: the last 8 bytes, overlapping */
        uint64_t w;
        memcpy(&w, c + len - 8, 8);
        bad |= w ^ want8;
    } else {
        for (; i < len; i++) bad |= (uint8_t)(c[i] ^ want);
    }
    if (hak_unlikely(bad != 0))
        hak_fatal(op, "heap overflow detected (the canary after the block was overwritten) in block", p);
}

/* ---- zero checks ---- */

/* Are the bytes [from, to) of p all zero?  (from and to multiples of 8;
 * 64 bytes a step in 16-byte vectors, SSE2 or NEON, then words) */
typedef uint64_t hak_v2_t __attribute__((vector_size(16), may_alias, aligned(8)));
HAK_INLINE bool hak_h_zero(const void *p, size_t from, size_t to) {
    const uint8_t *b = (const uint8_t *)p + from, *e = (const uint8_t *)p + to;
    hak_v2_t acc = { 0, 0 };
    for (; b + 64 <= e; b += 64) {
        const hak_v2_t *v = (const hak_v2_t *)b;
        acc |= v[0] | v[1] | v[2] | v[3];
    }
    uint64_t w = acc[0] | acc[1];
    for (; b < e; b += 8) w |= *(const uint64_t *)b;
    return w == 0;
}

/* A block malloc hands out again: past the free list's 16 bytes it must be
 * zero, but for the free-list words that blocks of an earlier class of the
 * page left, at 16-byte steps (hak_h_free_words: a link, 0 or into p's
 * segment, then 0 -- a block carved but never handed out -- or a key
 * hak_page_new_key issued). */
static bool hak_h_free_words(const uint64_t *w, const void *p) {
    return (w[0] == 0 || hak_segment_of((void *)(uintptr_t)w[0]) == hak_segment_of(p)) &&
           (w[1] == 0 || hak_page_key_issued(w[1]));
}
static HAK_NOINLINE void hak_h_check_reused_slow(void *p, size_t slot) {
    const uint64_t *w = (const uint64_t *)p;
    for (size_t i = 2; i + 1 < slot / 8; i += 2)
        if (!hak_h_free_words(w + i, p)) {
            hak_message("hakmem: malloc(): block %p of %zu bytes: bytes at offset %zu changed after free "
                        "(words %p %p)\n", p, slot, i * 8, (void *)w[i], (void *)w[i + 1]);
            hak_fatal("malloc()", "write after free detected in the block it would return", p);
        }
}
static inline void hak_h_check_reused(void *p, size_t slot) {
    if (slot <= HAK_LARGE_MAX && hak_unlikely(!hak_h_zero(p, 16, slot))) hak_h_check_reused_slow(p, slot);
}

/* An underflow of any other block reaches the previous slot's last word:
 * the trailer of a live block, the freed mark of a quarantined one, 0 (a
 * free or fresh slot, zero past its free-list words), or the key word of a
 * free 16-byte slot.  Checked at free, so that an underflow is caught
 * whether or not the previous slot is ever freed or handed out. */
HAK_INLINE void hak_h_check_prev(void *p, size_t slot) {
    const uint8_t *prev = (const uint8_t *)p - slot;
    uint64_t t = ((const uint64_t *)p)[-1];
    hak_h_info_t b;
    if (hak_unlikely(t != 0 && !hak_h_decode(prev, slot, t, &b) && t != hak_h_encode(prev, HAK_H_FREED) &&
                     !hak_page_key_issued(t)))
        hak_fatal("free()", "heap underflow detected (the size word before the block was overwritten) in block", p);
}

/* An underflow of a page's first block runs into what lies before the
 * page: the previous page's slack, or the slack of slot 0 after the
 * header's guard page, which no correct program writes -- zero but for the
 * free-list words of earlier pages (as at reuse).  Checked at that block's
 * free when the segment is this thread's (no other thread writes there). */
static HAK_NOINLINE void hak_h_check_before(void *p, hak_page_t *page) {
    hak_segment_t *seg = hak_segment_of(p);
    uint8_t *from = (uint8_t *)p - 64, *lo = (uint8_t *)seg + HAK_HARDENED_HEADER;
    if (seg->heap != hak_tls.heap || (uint8_t *)p <= lo) return;
    if (from < lo) from = lo;
    hak_page_t *prev = hak_page_of(seg, from);
    if (prev != page && prev->in_use && prev->start + prev->area > from) from = prev->start + prev->area;
    const uint64_t *w = (const uint64_t *)((uintptr_t)from & ~(uintptr_t)15);
    for (; (const uint8_t *)w < (uint8_t *)p; w += 2) {
        if ((const uint8_t *)w >= from && !hak_h_free_words(w, p))
            hak_fatal("free()", "heap underflow detected (the bytes before the block were overwritten) in block", p);
    }
}


/* ---- the quarantine: a ring per thread ---- */

#define HAK_Q_SLOTS 64
#define HAK_Q_BYTES ((size_t)256 << 10)      /* bytes it may hold */
#define HAK_Q_PROBE 64                        /* bytes of a block malloc's probe checks */

typedef struct hak_quarantine_s {
    struct hak_quarantine_s *next;            /* on the list of spare rings */
    uint64_t rng;
    size_t bytes;
    unsigned count;
    struct { void *p; size_t slot; } e[HAK_Q_SLOTS];
} hak_quarantine_t;

static HAK_TLS hak_quarantine_t *hak_q;
static pthread_key_t hak_q_key;
static pthread_once_t hak_q_once = PTHREAD_ONCE_INIT;
static bool hak_q_key_ok;
static hak_quarantine_t *hak_q_spare;        /* rings of exited threads, for reuse */
static _Atomic int hak_q_lock;

static uint64_t hak_q_random(hak_quarantine_t *q) {     /* xorshift64 */
    uint64_t x = q->rng;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return q->rng = x;
}

/* A quarantined block must still be zero, with its freed mark (bytes
 * checked: at most limit). */
HAK_INLINE void hak_q_check(void *p, size_t slot, size_t limit) {
    size_t end = slot - 8 < limit ? slot - 8 : limit;
    if (hak_unlikely(!hak_h_zero(p, 0, end) || *hak_h_trailer(p, slot) != hak_h_encode(p, HAK_H_FREED)))
        hak_fatal("free()", "write after free detected in the freed block", p);
}

/* Entry i leaves: checked, its mark cleared, really freed.  Only the 16
 * bytes the free list overwrites are checked here: the rest is checked
 * when malloc hands the block out again (hak_h_check_reused). */
HAK_INLINE void hak_q_evict(hak_quarantine_t *q, unsigned i) {
    void *p = q->e[i].p;
    size_t slot = q->e[i].slot;
    q->e[i] = q->e[--q->count];
    q->bytes -= slot;
    hak_q_check(p, slot, 16);
    *hak_h_trailer(p, slot) = 0;
    hak_free_inline(p);
}

static void hak_q_lock_take(void) {
    while (atomic_exchange_explicit(&hak_q_lock, 1, memory_order_acquire)) {}
}
static void hak_q_lock_drop(void) { atomic_store_explicit(&hak_q_lock, 0, memory_order_release); }

/* thread exit: every block goes back, the ring to the spares */
static void hak_q_done(void *value) {
    hak_quarantine_t *q = value;
    if (!q || q != hak_q) return;
    while (q->count) hak_q_evict(q, q->count - 1);
    hak_q = NULL;
    hak_q_lock_take();
    q->next = hak_q_spare;
    hak_q_spare = q;
    hak_q_lock_drop();
}
/* fork: the spare rings' lock is free in the child (hak_fork_hook_add) */
static void hak_q_lock_fork_child(void) { atomic_store_explicit(&hak_q_lock, 0, memory_order_relaxed); }
static void hak_q_key_init(void) {
    hak_q_key_ok = pthread_key_create(&hak_q_key, hak_q_done) == 0;
    hak_fork_hook_add(hak_q_lock_take, hak_q_lock_drop, hak_q_lock_fork_child);
}

static HAK_NOINLINE hak_quarantine_t *hak_q_make(void) {
    pthread_once(&hak_q_once, hak_q_key_init);
    if (!hak_q_key_ok) return NULL;
    hak_q_lock_take();
    hak_quarantine_t *q = hak_q_spare;
    if (q) hak_q_spare = q->next;
    hak_q_lock_drop();
    if (!q && !(q = hak_os_map(sizeof *q))) return NULL;
    q->rng = hak_os_random() | 1;
    hak_q = q;
    pthread_setspecific(hak_q_key, q);   /* (may calloc: hak_q is set already) */
    return q;
}

/* Put a zeroed, marked block into the quarantine; without one (a thread
 * past its exit handler, no memory) it goes back at once. */
static void hak_q_put(void *p, size_t slot) {
    hak_quarantine_t *q = hak_q;
    if (!q && (hak_tls_exiting || !(q = hak_q_make()))) {
        *hak_h_trailer(p, slot) = 0;
        hak_free_inline(p);
        return;
    }
    while (q->count == HAK_Q_SLOTS || (q->count > 0 && q->bytes + slot > HAK_Q_BYTES))
        hak_q_evict(q, (unsigned)(hak_q_random(q) % q->count));
    q->e[q->count].p = p;
    q->e[q->count].slot = slot;
    q->count++;
    q->bytes += slot;
}

/* malloc's probe: one quarantined block, at random */
static inline void hak_q_probe(void) {
    hak_quarantine_t *q = hak_q;
    if (q && q->count) {
        unsigned i = (unsigned)(hak_q_random(q) % q->count);
        hak_q_check(q->e[i].p, q->e[i].slot, HAK_Q_PROBE);
    }
}

/* ---- the entry points ---- */

/* the slot of a hakmem block (its underlying usable size), or 0 when p is
 * not hakmem's */
HAK_INLINE size_t hak_h_slot(const void *p, const char *op) {
    const hak_page_t *page = hak_quick_page(p);
    if (hak_likely(page != NULL)) return page->block_size;
    if (!hak_segment_of_checked(p)) return 0;
    return hak_usable_op(p, op);
}

static void *hak_h_finish(void *p, size_t n, unsigned by) {
    if (hak_unlikely(!p)) return NULL;
    size_t slot = hak_h_slot(p, "malloc()");
    hak_h_check_reused(p, slot);
    hak_q_probe();
    hak_h_seal(p, n, slot, by);
    return p;
}

void *hak_hardened_malloc(size_t n, unsigned by) {
    if (hak_unlikely(n > PTRDIFF_MAX)) { errno = ENOMEM; return NULL; }
    if (n == 0) {   /* a block that faults when touched, as in release (hak_zero.c) */
        void *z = hak_zero_alloc(HAK_MIN_ALIGN);
        if (z) return z;
    }
    return hak_h_finish(hak_malloc_sampled(n + 8), n, by);
}

void *hak_hardened_calloc(size_t total) {
    void *p = hak_hardened_malloc(total, HAK_HARDENED_BY_MALLOC);
    if (p) memset(p, 0, total);
    return p;
}

/* the aligned allocations, sampled for heap profiles as malloc is */
void *hak_hardened_aligned(size_t n, size_t align, bool zero, unsigned by) {
    if (hak_unlikely(n > PTRDIFF_MAX)) { errno = ENOMEM; return NULL; }
    if (n == 0) {
        void *z = hak_zero_alloc(align);
        if (z) return z;
    }
    void *p = HAK_SAMPLED(n + 8) ? hak_profile_malloc(n + 8, align, zero) : hak_aligned_plain(n + 8, align, zero);
    return hak_h_finish(p, n, by);
}

void hak_hardened_free(void *p, const char *op, bool sized, size_t size, bool by_new) {
    if (p == NULL) return;
    size_t slot = hak_h_slot(p, op);
    if (slot == 0) {   /* malloc(0)'s, glibc's block, or misuse: reported there */
        if (hak_unlikely(sized && size != 0) && hak_zero_owns(p))
            hak_fatal(op, by_new ? "size does not match the block (sized delete)" : "size does not match the block", p);
        hak_free_inline(p);
        return;
    }
    hak_h_info_t b = hak_h_read(p, slot, op);
    hak_h_check_canary(p, b.n, slot, op);
    if (hak_unlikely(sized && size != b.n))
        hak_fatal(op, by_new ? "size does not match the block (sized delete)" : "size does not match the block", p);
    if (hak_unlikely(by_new && b.by != HAK_HARDENED_BY_NEW))
        hak_fatal(op, "block not allocated by operator new", p);
    if (slot > HAK_LARGE_MAX) { hak_free_inline(p); return; }   /* huge: unmapped */
    hak_page_t *page = hak_page_of(hak_segment_of(p), p);
    if (hak_unlikely(page->start == (uint8_t *)p)) hak_h_check_before(p, page);
    else if (hak_carved_block(page, (size_t)((uint8_t *)p - page->start))) hak_h_check_prev(p, slot);
    /* zero on free: glibc's memset (vector stores; rep stosb for large
     * lengths, which valgrind counts a byte at a time -- the instruction
     * counts of docs/security.md predate it) */
    memset(p, 0, slot - 8);
    *hak_h_trailer(p, slot) = hak_h_encode(p, HAK_H_FREED);
    hak_q_put(p, slot);
}

size_t hak_hardened_usable(const void *p) {
    if (p == NULL) return 0;
    size_t slot = hak_h_slot(p, "malloc_usable_size()");
    if (slot == 0) return hak_usable_size(p);        /* glibc's block, or misuse */
    return hak_h_read((void *)p, slot, "malloc_usable_size()").n;
}

/* Kept in place when the new size fits the slot and uses at least half of
 * it; else a new block, the copy, the old block's free. */
void *hak_hardened_realloc(void *p, size_t n) {
    if (p == NULL) return hak_hardened_malloc(n, HAK_HARDENED_BY_MALLOC);
    if (n == 0) { hak_hardened_free(p, "realloc()", false, 0, false); return NULL; }   /* as glibc */
    size_t slot = hak_h_slot(p, "realloc()"), old;
    if (slot == 0) {   /* malloc(0)'s, a guarded or a glibc block (moved), or misuse (reported) */
        old = hak_usable_op(p, "realloc()");
    } else {
        hak_h_info_t b = hak_h_read(p, slot, "realloc()");
        hak_h_check_canary(p, b.n, slot, "realloc()");
        old = b.n;
        if (n <= PTRDIFF_MAX && n + 8 <= slot && n + 8 >= slot / 2) {
            hak_h_seal(p, n, slot, b.by);
            return p;
        }
    }
    void *q = hak_hardened_malloc(n, HAK_HARDENED_BY_MALLOC);
    if (!q) return NULL;
    memcpy(q, p, old < n ? old : n);
    hak_hardened_free(p, "realloc()", false, 0, false);   /* (slot 0: hak_free_inline's) */
    return q;
}
