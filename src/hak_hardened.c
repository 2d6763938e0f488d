/* hak_hardened.c -- the hardened build's layer around every entry point
 * (make hardened; docs/security.md, "The hardened build").  Compiled into
 * every build; only the hardened build's entry points call it
 * (HAK_HARDENED_ENABLED, hak_hardened.h).
 *
 * A block of n bytes asks the ordinary machinery for n + 8 and lays out its
 * slot of U bytes (the underlying usable size) as
 *     [0, n)        the program's bytes
 *     [n, n + 16)   the canary (cut short by the trailer): a 0 byte (a
 *                   string filling the block ends there), then a secret
 *                   byte repeated
 *     [n + 16, U - 8)  zero
 *     [U - 8, U)    the trailer: n and who allocated (malloc or new),
 *                   encoded with secret 1 and the address; its low byte is
 *                   0, so with no canary byte the trailer's first byte ends
 *                   a string; its high bit is 1 (HAK_H_HIGH)
 * free checks the trailer and the canary (an overflow, or an underflow of
 * the next block, is reported), zeroes the block to the canary's end,
 * writes the freed mark in the trailer and puts the block into the
 * thread's quarantine.  A block leaves the quarantine at random when it is
 * full, after a check that it is still zero whole (a write after free, or
 * an overflow that jumped the canary), and only then goes back to the free
 * lists.  malloc checks the first line of a block it hands out again
 * (a write after it left the quarantine) and probes the first word of one
 * quarantined block.
 *
 * Huge blocks (above HAK_LARGE_MAX) skip the quarantine and the zeroing:
 * at free their mapping becomes inaccessible past its header and goes to
 * the huge cache, and a huge block that takes it back is zeroed there
 * (hak_huge.c, hak_huge_guarded). */
#include "hak_hardened.h"
#include <pthread.h>

/* ---- the trailer ---- */

#define HAK_H_N_BITS 47                        /* n < 2^47 */
#define HAK_H_V_MASK (((uint64_t)1 << 55) - 1)
/* The trailer's last byte -- the one just before the next slot, which a
 * 1-byte underflow of the next block writes -- always has its high bit set:
 * a NUL or ASCII byte written there never decodes (with a secret byte there
 * instead, 1 write in 256 did). */
#define HAK_H_HIGH ((uint64_t)1 << 63)

/* The secrets an entry point loads once and passes down: s1 for the
 * trailers; c8 the canary byte in each of a word's bytes; freed the mark a
 * quarantined block's trailer holds -- secret, the high bit set, and the
 * low byte not 0, so that it never decodes as a live block's trailer
 * (hak_h_decode).  Derived from the process secrets at the first call. */
typedef struct { uint64_t s1, c8, freed; } hak_h_keys_t;
static _Atomic uint64_t hak_h_kv[3];            /* s1, c8 (0 until set), freed */
static HAK_COLD HAK_NOINLINE hak_h_keys_t hak_h_keys_init(void) {
    uint64_t s1 = hak_secret(1);
    hak_h_keys_t k = { s1, ((uint8_t)(hak_secret(0) >> 24) | 0x80) * 0x0101010101010101u,
                       (s1 * 0xd1342543de82ef95u) | HAK_H_HIGH | 0x5a };
    atomic_store_explicit(&hak_h_kv[0], k.s1, memory_order_relaxed);
    atomic_store_explicit(&hak_h_kv[2], k.freed, memory_order_relaxed);
    atomic_store_explicit(&hak_h_kv[1], k.c8, memory_order_release);
    return k;
}
HAK_INLINE hak_h_keys_t hak_h_keys(void) {
    uint64_t c8 = atomic_load_explicit(&hak_h_kv[1], memory_order_acquire);
    if (hak_unlikely(c8 == 0)) return hak_h_keys_init();
    return (hak_h_keys_t){ atomic_load_explicit(&hak_h_kv[0], memory_order_relaxed), c8,
                           atomic_load_explicit(&hak_h_kv[2], memory_order_relaxed) };
}

/* The word a trailer is xored with: the address and the secret mixed,
 * bits 8 to 62 of it, and the high bit.  A value v < 2^55 shifted by 8
 * keeps the low byte 0 and the high bit 1. */
HAK_INLINE uint64_t hak_h_mask(const void *p, uint64_t s1) {
    return ((((uintptr_t)p ^ s1) * 0x9fb21c651e98df25u) & (HAK_H_V_MASK << 8)) | HAK_H_HIGH;
}
HAK_INLINE uint64_t hak_h_encode(const void *p, uint64_t v, uint64_t s1) {
    return (v << 8) ^ hak_h_mask(p, s1);
}
static inline uint64_t *hak_h_trailer(void *p, size_t slot) { return (uint64_t *)((uint8_t *)p + slot - 8); }
/* (words are read and written little-endian: the low byte of a word comes
 * first in memory, as on every architecture hak_arch.h supports) */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the canary's and trailer's first bytes are words' low bytes");

/* Every check and fill below is a few 16-byte vectors (SSE2, NEON) and as
 * few branches as the lengths allow: sizes vary from call to call, and a
 * mispredicted branch costs more than the vector work (cachegrind's branch
 * simulation of random_mixed: 6.5 mispredictions a malloc-free pair before,
 * most of them on lengths; docs/experiments.md, 2026-11-26). */
typedef uint64_t hak_v2_t __attribute__((vector_size(16), may_alias, aligned(1)));
typedef int8_t   hak_vb_t __attribute__((vector_size(16), may_alias, aligned(1)));
typedef uint64_t hak_va_t __attribute__((vector_size(16), may_alias));   /* 16-byte aligned */
static const hak_vb_t hak_h_iota = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
HAK_INLINE bool hak_h_none(hak_v2_t v) { return (v[0] | v[1]) == 0; }

/* The canary: the bytes [n, n + 16) after a block of n bytes, or [n, U - 8)
 * when the trailer comes sooner -- a 0 byte (a string filling the block
 * ends there), then the secret byte.  Every overflow that runs on from the
 * block's end crosses it.  It is one 16-byte vector at `at`, inside the
 * slot, with the canary's bytes selected by `mask`: at the block's end,
 * or, when fewer than 8 bytes follow it, at the slot's last 16 bytes.  The
 * rest of the slot, [n + 16, U - 8), stays zero: a block comes out of the
 * quarantine checked zero whole, and a write there is seen when it leaves
 * the quarantine again (hak_q_check). */
typedef struct { uint8_t *at; hak_vb_t mask, want; } hak_h_canary_t;
HAK_INLINE hak_h_canary_t hak_h_canary(void *p, size_t n, size_t slot, uint64_t c8) {
    size_t off = n < slot - 16 ? n : slot - 16;  /* (slots are at least 16 bytes) */
    size_t end = slot - 8 - off;                /* the trailer, from at */
    int8_t lo = (int8_t)(n - off), hi = (int8_t)(end < 16 ? end : 16);
    hak_vb_t mask = (hak_h_iota >= lo) & (hak_h_iota < hi);
    hak_vb_t byte = (hak_vb_t)(hak_v2_t){ c8, c8 };
    return (hak_h_canary_t){ (uint8_t *)p + off, mask, byte & mask & (hak_h_iota != lo) };
}
/* write it, keeping the vector's other bytes (the block's, or the trailer's) */
HAK_INLINE void hak_h_canary_put(hak_h_canary_t c) {
    hak_vb_t *v = (hak_vb_t *)c.at;
    *v = (*v & ~c.mask) | c.want;
}
HAK_INLINE bool hak_h_canary_ok(hak_h_canary_t c) {
    return hak_h_none((hak_v2_t)((*(const hak_vb_t *)c.at ^ c.want) & c.mask));
}

/* Seal a block of n bytes in a slot of slot bytes: canary and trailer. */
HAK_INLINE void hak_h_seal(void *p, size_t n, size_t slot, unsigned by, hak_h_keys_t k) {
    hak_h_canary_put(hak_h_canary(p, n, slot, k.c8));
    *hak_h_trailer(p, slot) = hak_h_encode(p, (uint64_t)n | ((uint64_t)by << HAK_H_N_BITS), k.s1);
}

/* The block's size and who allocated it, from a trailer that must be
 * intact (fatal otherwise: a freed block, or an overflow). */
typedef struct { size_t n; unsigned by; } hak_h_info_t;
static HAK_COLD void hak_h_bad_trailer(const void *p, uint64_t t, const char *op) {
    if (t == hak_h_keys().freed) hak_fatal(op, "pointer already freed", p);
    hak_fatal(op, "heap overflow detected (the size word after the block was overwritten) in block", p);
}
/* Decode trailer t of the block p in a slot of slot bytes: false if it is
 * not a live block's. */
HAK_INLINE bool hak_h_decode(const void *p, size_t slot, uint64_t t, uint64_t s1, hak_h_info_t *out) {
    uint64_t v = (t ^ hak_h_mask(p, s1)) >> 8;
    out->n = (size_t)(v & (((uint64_t)1 << HAK_H_N_BITS) - 1));
    out->by = (unsigned)(v >> HAK_H_N_BITS) & 1u;
    /* (v's bit 55 is 0 when t's high bit is set; one branch, not three) */
    return ((t & 0xff) | (v >> (HAK_H_N_BITS + 1)) | (uint64_t)(out->n > slot - 8)) == 0;
}
HAK_INLINE hak_h_info_t hak_h_read(void *p, size_t slot, uint64_t s1, const char *op) {
    uint64_t t = *hak_h_trailer(p, slot);
    hak_h_info_t b;
    if (hak_unlikely(!hak_h_decode(p, slot, t, s1, &b))) hak_h_bad_trailer(p, t, op);
    return b;
}

/* The canary after n bytes: intact, or fatal. */
HAK_INLINE void hak_h_check_canary(void *p, size_t n, size_t slot, uint64_t c8, const char *op) {
    if (hak_unlikely(!hak_h_canary_ok(hak_h_canary(p, n, slot, c8))))
        hak_fatal(op, "heap overflow detected (the canary after the block was overwritten) in block", p);
}

/* The rest of the slot, [n + 16, slot - 8), past the canary and before the
 * trailer: zero in a live block (the canary's 16 bytes catch an overflow
 * that runs on from the block's end; this, one that starts past them or
 * jumps them -- a write 32 bytes past a 256 KiB block lands 16 bytes past
 * the canary, in a tail of 32 KiB).  Checked whole at free: aligned
 * vectors, four a step, the first masked below n + 16 and the last (which
 * ends with the trailer) to its first 8 bytes. */
static HAK_NOINLINE bool hak_h_tail_clear_long(const hak_va_t *v, size_t from, size_t to) {
    hak_va_t acc = { 0, 0 };
    for (size_t i = from; i + 4 <= to; i += 4) acc |= v[i] | v[i + 1] | v[i + 2] | v[i + 3];
    acc |= v[to - 4] | v[to - 3] | v[to - 2] | v[to - 1];
    return (acc[0] | acc[1]) == 0;
}
HAK_INLINE bool hak_h_tail_clear(const void *p, size_t n, size_t slot) {
    size_t t0 = n + 16;
    if (t0 >= slot - 8) return true;            /* no tail: the canary reaches the trailer */
    const hak_va_t *v = (const hak_va_t *)p;
    size_t a = t0 / 16, last = slot / 16 - 1;   /* v[last] ends with the trailer */
    int8_t lo = (int8_t)(t0 & 15), hi = a == last ? 8 : 16;
    hak_va_t acc = (hak_va_t)((hak_vb_t)v[a] & ((hak_h_iota >= lo) & (hak_h_iota < hi)));
    if (a < last) {
        acc[0] |= v[last][0];
        size_t k = last - a - 1;                /* whole vectors between */
        if (k >= 4) return (acc[0] | acc[1]) == 0 && hak_h_tail_clear_long(v, a + 1, last);
        if (k > 0) acc |= v[a + 1] | v[a + (k + 1) / 2] | v[a + k];
    }
    return (acc[0] | acc[1]) == 0;
}
HAK_INLINE void hak_h_check_tail(void *p, size_t n, size_t slot, const char *op) {
    if (hak_unlikely(!hak_h_tail_clear(p, n, slot)))
        hak_fatal(op, "heap overflow detected (the slot past the canary was written) in block", p);
}

/* Zero on free: the bytes [0, len) of a freed block (16-byte aligned),
 * whole vectors (len rounded up: the caller writes the freed mark over any
 * bytes of the trailer this reaches); glibc's memset for long lengths (rep
 * stosb, which valgrind counts a byte at a time). */
#define HAK_H_OWN_ZERO 2048
HAK_INLINE void hak_h_clear(void *p, size_t len) {
    hak_va_t *v = (hak_va_t *)p, z = { 0, 0 };
    size_t k = (len + 15) / 16;
    if (k > HAK_H_OWN_ZERO / 16) { memset(p, 0, k * 16); return; }
    if (k >= 4) {                               /* four a step, the last four overlapping */
        for (size_t i = 0; i + 4 <= k; i += 4) v[i] = v[i + 1] = v[i + 2] = v[i + 3] = z;
        v[k - 4] = v[k - 3] = v[k - 2] = v[k - 1] = z;
    } else {                                    /* 1 to 3 */
        v[0] = v[(k - 1) >> 1] = v[k - 1] = z;
    }
}

/* Is a quarantined block of slot bytes (16-byte aligned) as its free left
 * it: zero, and the freed mark in the trailer?  Its vectors four a step,
 * the last four overlapping (or three covering 1 to 3), and one branch. */
HAK_INLINE bool hak_h_cleared(const void *p, size_t slot, uint64_t freed) {
    const hak_va_t *v = (const hak_va_t *)p;
    size_t k = slot / 16 - 1;                    /* v[k] ends with the trailer */
    hak_va_t acc = v[k] ^ (hak_va_t){ 0, freed };
    if (k >= 4) {
        for (size_t i = 0; i + 4 <= k; i += 4) acc |= v[i] | v[i + 1] | v[i + 2] | v[i + 3];
        acc |= v[k - 4] | v[k - 3] | v[k - 2] | v[k - 1];
    } else if (k > 0) {
        acc |= v[0] | v[(k - 1) >> 1] | v[k - 1];
    }
    return (acc[0] | acc[1]) == 0;
}

/* The free-list words that blocks of an earlier class of a page leave at
 * 16-byte steps in memory no block now covers: a link, 0 or into p's
 * segment, then 0 -- a block carved but never handed out -- or a key
 * hak_page_new_key issued.  (hak_h_check_before) */
static bool hak_h_free_link(uint64_t w, const void *p) {
    return w == 0 || hak_segment_of((void *)(uintptr_t)w) == hak_segment_of(p);
}
static bool hak_h_free_words(const uint64_t *w, const void *p) {
    return hak_h_free_link(w[0], p) && (w[1] == 0 || hak_page_key_issued(w[1]));
}
/* The first pair of words at a 16-byte step in [from, to) (word indexes)
 * that are not free-list words, or to. */
static size_t hak_h_foreign_words(const uint64_t *w, size_t from, size_t to, const void *p) {
    for (size_t i = from; i + 1 < to; i += 2)
        if (!hak_h_free_words(w + i, p)) return i;
    return to;
}

/* A block malloc hands out again: its first line past the free list's 16
 * bytes, [16, 64), must still be zero -- a write after the block left the
 * quarantine (the rest of it was checked when it left: hak_q_release).
 * The pop read that line already, so this reads no memory the program has
 * not touched.  The only non-zero words it accepts are free-list words
 * that blocks of an earlier class of the page left (hak_h_free_words). */
/* The allocation a report names (an index, so that the entry points pass
 * a constant, or the `by` they have anyway, and only the cold paths look
 * the name up): malloc and new as HAK_HARDENED_BY_*, then the others. */
enum { HAK_H_OP_CALLOC = 2, HAK_H_OP_REALLOC = 3, HAK_H_OP_ALIGNED = 4 /* + by */ };
static const char *const hak_h_op_names[6] = { "malloc()", "operator new()", "calloc()", "realloc()",
                                               "aligned allocation", "operator new()" };
static const char *hak_h_op(unsigned opc) { return hak_h_op_names[opc < 6 ? opc : 0]; }

static HAK_NOINLINE void hak_h_check_reused_slow(void *p, size_t end, unsigned opc) {
    const char *op = hak_h_op(opc);
    const uint64_t *w = (const uint64_t *)p;
    size_t i = hak_h_foreign_words(w, 2, end / 8, p);   /* (slots are multiples of 16 bytes) */
    if (i < end / 8) {
        hak_message("hakmem: %s: block %p: bytes at offset %zu changed after free (words %p %p)\n",
                    op, p, i * 8, (void *)w[i], (void *)w[i + 1]);
        hak_fatal(op, "write after free detected in the block it would return", p);
    }
    memset((uint8_t *)p + 16, 0, end - 16);    /* (no metadata word is handed out) */
}
HAK_INLINE void hak_h_check_reused(void *p, size_t slot, unsigned opc) {
    if (slot <= 16) return;
    size_t end = slot < 64 ? slot : 64;         /* 32, 48 or 64 */
    const hak_v2_t *v = (const hak_v2_t *)p;
    hak_v2_t acc = v[1];
    if (end == 64) acc |= v[2] | v[3];
    else if (end == 48) acc |= v[2];
    if (hak_unlikely((acc[0] | acc[1]) != 0)) hak_h_check_reused_slow(p, end, opc);
}

/* An underflow of any other block reaches the previous slot's last word:
 * the trailer of a live block, the freed mark of a quarantined one, 0 (a
 * free or fresh slot, zero past its free-list words), or the key word of a
 * free 16-byte slot.  Checked at free, so that an underflow is caught
 * whether or not the previous slot is ever freed or handed out. */
HAK_INLINE void hak_h_check_prev(void *p, size_t slot, hak_h_keys_t k) {
    const uint8_t *prev = (const uint8_t *)p - slot;
    uint64_t t = ((const uint64_t *)p)[-1];
    hak_h_info_t b;
    /* (the three tests in one branch: which of them passes varies) */
    int ok = hak_h_decode(prev, slot, t, k.s1, &b) | (t == 0) | (t == k.freed);
    __asm__("" : "+r"(ok));                     /* (else the compiler tests them one by one) */
    if (hak_unlikely(!ok) && !hak_page_key_issued(t))
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

typedef struct hak_quarantine_s {
    struct hak_quarantine_s *next;            /* on the list of spare rings */
    uint64_t rng, probe;
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

/* an entry at random: xorshift64, scaled to [0, count) with a multiply
 * (a division here cost more than the rest of the choice) */
static inline unsigned hak_q_random(hak_quarantine_t *q) {
    uint64_t x = q->rng;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    q->rng = x;
    return (unsigned)(((x >> 32) * q->count) >> 32);
}

/* A quarantined block must still be zero, with its freed mark.  op: the
 * call whose check found it -- a free that made room in the quarantine
 * (probe false), an allocation's probe, a thread's exit. */
static HAK_COLD HAK_NOINLINE void hak_q_written(void *p, const char *op, bool probe) {
    hak_fatal(op, probe ? "write after free detected in a quarantined block (by this allocation's probe of "
                          "the quarantine) at"
                        : "write after free detected in a quarantined block (as it left the quarantine) at", p);
}
static HAK_COLD HAK_NOINLINE void hak_q_probed_written(void *p, unsigned opc) { hak_q_written(p, hak_h_op(opc), true); }
/* Not quite: free zeroed the block only to its canary's end, so the rest
 * may hold free-list words that blocks of an earlier class of the page left
 * (hak_h_free_words; past the block's first 16 bytes, which free zeroed;
 * the last word before the trailer a link alone, its key word under the
 * trailer).  They are cleared; any other byte not zero is a write after
 * free -- or an overflow that jumped the canary into the slot's rest. */
static HAK_COLD HAK_NOINLINE void hak_q_check_slow(void *p, size_t slot, uint64_t freed, const char *op) {
    uint64_t *w = (uint64_t *)p;
    size_t last = slot / 8 - 2;                 /* the word before the trailer */
    if (w[last + 1] != freed || w[0] != 0 || (last >= 2 && w[1] != 0)) hak_q_written(p, op, false);
    size_t i = hak_h_foreign_words(w, 2, last, p);
    if (i < last) {
        hak_message("hakmem: %s: quarantined block %p: bytes at offset %zu changed after free, "
                    "or an overflow ran past the canary (words %p %p)\n",
                    op, p, i * 8, (void *)w[i], (void *)w[i + 1]);
        hak_q_written(p, op, false);
    }
    if (!hak_h_free_link(w[last], p)) hak_q_written(p, op, false);
    if (last >= 2) memset(w + 2, 0, (last - 1) * 8);   /* [16, slot - 8) */
}
HAK_INLINE void hak_q_check(void *p, size_t slot, uint64_t freed, const char *op) {
    if (hak_unlikely(!hak_h_cleared(p, slot, freed))) hak_q_check_slow(p, slot, freed, op);
}

/* A block leaves: checked whole (the free zeroed it: any byte not zero is
 * a write after free), its mark cleared, really freed.  The check is here,
 * where the block leaves the quarantine for the free lists, and not when
 * malloc hands it out again: the quarantine holds at most HAK_Q_BYTES, so
 * the block is still in the caches, and malloc reads only a block's first
 * line, which its pop read already (hak_h_check_reused) -- never memory the
 * program has not touched yet (a read maps the kernel's zero page, and the
 * program's first write then costs a second fault and a TLB shootdown). */
HAK_INLINE void hak_q_release(void *p, size_t slot, uint64_t freed, const char *op) {
    hak_q_check(p, slot, freed, op);
    *hak_h_trailer(p, slot) = 0;
    hak_free_inline(p);
}
HAK_INLINE void hak_q_evict(hak_quarantine_t *q, unsigned i) {
    void *p = q->e[i].p;
    size_t slot = q->e[i].slot;
    q->e[i] = q->e[--q->count];
    q->bytes -= slot;
    hak_q_release(p, slot, hak_h_keys().freed, "thread exit");
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
static void hak_q_put(void *p, size_t slot, uint64_t freed, const char *op) {
    hak_quarantine_t *q = hak_q;
    if (!q && (hak_tls_exiting || !(q = hak_q_make()))) {
        hak_q_release(p, slot, freed, op);
        return;
    }
    /* full: a random entry leaves, and the block takes its place when
     * that makes room (the common case), else another leaves */
    unsigned i = q->count;
    while (q->count == HAK_Q_SLOTS || (q->count > 0 && q->bytes + slot > HAK_Q_BYTES)) {
        i = hak_q_random(q);
        void *old = q->e[i].p;
        size_t old_slot = q->e[i].slot;
        q->bytes -= old_slot;
        hak_q_release(old, old_slot, freed, op);
        if (q->bytes + slot <= HAK_Q_BYTES) break;
        q->e[i] = q->e[--q->count];
        i = q->count;
    }
    if (i == q->count) q->count++;
    q->e[i].p = p;
    q->e[i].slot = slot;
    q->bytes += slot;
}

/* malloc's probe: one quarantined block, its first word (where a dangling
 * pointer's first field is) */
HAK_INLINE void hak_q_probe(unsigned opc) {
    hak_quarantine_t *q = hak_q;
    if (q && q->count) {
        q->probe += 0x9e3779b97f4a7c15u;        /* a Weyl sequence: which block, not when, is what matters */
        unsigned i = (unsigned)(((q->probe >> 32) * q->count) >> 32);
        const uint64_t *w = q->e[i].p;
        if (hak_unlikely(w[0] != 0)) hak_q_probed_written(q->e[i].p, opc);
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

/* p, new from the machinery below, in a slot of slot bytes (0: not known
 * yet), becomes a block of n bytes (op names the allocation in reports) */
HAK_INLINE void *hak_h_finish(void *p, size_t slot, size_t n, unsigned by, unsigned opc) {
    if (hak_unlikely(!p)) return NULL;
    if (slot == 0) {   /* hak_h_slot's, the op's name looked up only where it is needed */
        const hak_page_t *page = hak_quick_page(p);
        if (hak_likely(page != NULL)) slot = page->block_size;
        else if (hak_segment_of_checked(p)) slot = hak_usable_op(p, hak_h_op(opc));
    }
    hak_h_check_reused(p, slot, opc);
    /* the free list's link and key: the block is zero whole from here on
     * (the quarantine checked the rest; hak_segment_scrub cleared the
     * words of earlier classes' blocks), so the program never sees a
     * heap address or a key */
    *(hak_va_t *)p = (hak_va_t){ 0, 0 };
    hak_h_keys_t k = hak_h_keys();
    hak_q_probe(opc);
    hak_h_seal(p, n, slot, by, k);
    return p;
}

HAK_INLINE void *hak_h_malloc(size_t n, unsigned by, unsigned opc) {
    if (hak_unlikely(n > PTRDIFF_MAX)) { errno = ENOMEM; return NULL; }
    if (n == 0) {   /* a block that faults when touched, as in release (hak_zero.c) */
        void *z = hak_zero_alloc(HAK_MIN_ALIGN);
        if (z) return z;
    }
    size_t slot = 0;                            /* (the inline pop's: no lookup) */
    void *p = hak_malloc_sampled_slot(n + 8, &slot);
    return hak_h_finish(p, slot, n, by, opc);
}
void *hak_hardened_malloc(size_t n, unsigned by) { return hak_h_malloc(n, by, by); }

void *hak_hardened_calloc(size_t total) {
    void *p = hak_h_malloc(total, HAK_HARDENED_BY_MALLOC, HAK_H_OP_CALLOC);
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
    return hak_h_finish(p, 0, n, by, HAK_H_OP_ALIGNED + by);
}

void hak_hardened_free(void *p, const char *op, bool sized, size_t size, bool by_new) {
    if (p == NULL) return;
    hak_page_t *page = hak_quick_page(p);   /* a carved block of a plain page */
    hak_segment_t *seg = NULL;              /* (else: its segment, if hakmem's) */
    size_t slot = 0;
    if (hak_likely(page != NULL)) slot = page->block_size;
    else if ((seg = hak_segment_of_checked(p)) != NULL) slot = hak_usable_op(p, op);
    if (slot == 0) {   /* malloc(0)'s, glibc's block, or misuse: reported there */
        if (hak_unlikely(sized && size != 0) && hak_zero_owns(p))
            hak_fatal(op, by_new ? "size does not match the block (sized delete)" : "size does not match the block", p);
        hak_free_inline(p);
        return;
    }
    hak_h_keys_t k = hak_h_keys();
    hak_h_info_t b = hak_h_read(p, slot, k.s1, op);
    hak_h_check_canary(p, b.n, slot, k.c8, op);
    if (slot > HAK_H_OWN_ZERO) hak_h_check_tail(p, b.n, slot, op);
    if (hak_unlikely(sized && size != b.n))
        hak_fatal(op, by_new ? "size does not match the block (sized delete)" : "size does not match the block", p);
    if (hak_unlikely(by_new && b.by != HAK_HARDENED_BY_NEW))
        hak_fatal(op, "block not allocated by operator new", p);
    /* what lies before the block: its page's or the previous slot's last
     * word, when the page is plain (not one of aligned blocks: the quick
     * page says so, or the carved-block test) */
    bool plain = page != NULL;
    if (!plain) {
        /* a huge block -- known by its segment, not its size: one aligned to
         * 4 MiB or more may be small, and may start a unit its mapping's
         * header is not in -- is cached inaccessible (hak_huge_free) */
        if (seg->kind == HAK_PAGE_HUGE) { hak_free_inline(p); return; }
        page = hak_page_of(seg, p);
    }
    if (hak_unlikely(page->start == (uint8_t *)p)) hak_h_check_before(p, page);
    else if (plain || hak_carved_block(page, (size_t)((uint8_t *)p - page->start))) hak_h_check_prev(p, slot, k);
    /* zero on free, to the canary's end: the rest of the slot is zero
     * (hak_h_canary) */
    hak_h_clear(p, b.n + 16 < slot - 8 ? b.n + 16 : slot - 8);
    *hak_h_trailer(p, slot) = k.freed;
    hak_q_put(p, slot, k.freed, op);
}

/* For the checked copies (hak_memcheck.c): the program's bytes in the slot
 * of slot bytes at block, from its trailer -- the size when the trailer is
 * a live block's that starts there, HAK_HARDENED_FREED when it holds the
 * freed mark, HAK_HARDENED_UNKNOWN otherwise (an aligned block, whose
 * pointer lies inside the slot; a slot not handed out yet). */
size_t hak_hardened_block_n(const void *block, size_t slot) {
    uint64_t t = *hak_h_trailer((void *)block, slot);
    hak_h_keys_t k = hak_h_keys();
    hak_h_info_t b;
    if (hak_h_decode(block, slot, t, k.s1, &b)) return b.n;
    return t == k.freed ? HAK_HARDENED_FREED : HAK_HARDENED_UNKNOWN;
}

/* The checked copies' common cases (hak_memcheck.c): true when d is not
 * hakmem's (the region map says so: no check), or when [d, d + len) lies
 * in the program's bytes of a live block of a page without flags -- the
 * page's line 1, the trailer.  False sends the copy to the complete check
 * (hak_memcheck.c), which reports or lets it be. */
bool hak_hardened_write_ok(const void *d, size_t len) {
    uint16_t tag = hak_segmap_get(d);
    if (tag == HAK_TAG_NONE) return true;
    if (hak_unlikely(tag < HAK_TAG_FIRST || tag > HAK_TAG_LAST)) return false;
    const hak_page_t *page = hak_page_of(hak_segment_of(d), d);
    size_t bs = page->block_size, off = (size_t)((const uint8_t *)d - page->start);
    /* the slot's start by the page's magic (exact for offsets in a
     * segment: docs/design.md, "The carved-block test"); carved_limit is 0
     * for pages with flags, and d before start gives a huge offset */
    uint64_t magic = page->div_magic;
    size_t start = (size_t)(((unsigned __int128)off * magic) >> 64) * bs;
    if (hak_unlikely(start * magic >= HAK_RELAXED(page->carved_limit))) return false;
    const uint8_t *block = page->start + start;
    hak_h_info_t b;
    if (hak_unlikely(!hak_h_decode(block, bs, *hak_h_trailer((void *)block, bs),
                                   atomic_load_explicit(&hak_h_kv[0], memory_order_relaxed), &b))) return false;
    size_t at = off - start;
    return at < b.n && len <= b.n - at;
}

size_t hak_hardened_usable(const void *p) {
    if (p == NULL) return 0;
    size_t slot = hak_h_slot(p, "malloc_usable_size()");
    if (slot == 0) return hak_usable_size(p);        /* glibc's block, or misuse */
    return hak_h_read((void *)p, slot, hak_secret(1), "malloc_usable_size()").n;
}

/* Kept in place when the new size fits the slot and uses at least half of
 * it; else a new block, the copy, the old block's free. */
void *hak_hardened_realloc(void *p, size_t n) {
    if (p == NULL) return hak_h_malloc(n, HAK_HARDENED_BY_MALLOC, HAK_H_OP_REALLOC);
    if (n == 0) { hak_hardened_free(p, "realloc()", false, 0, false); return NULL; }   /* as glibc */
    size_t slot = hak_h_slot(p, "realloc()"), old;
    if (slot == 0) {   /* malloc(0)'s, a guarded or a glibc block (moved), or misuse (reported) */
        old = hak_usable_op(p, "realloc()");
    } else {
        hak_h_keys_t k = hak_h_keys();
        hak_h_info_t b = hak_h_read(p, slot, k.s1, "realloc()");
        hak_h_check_canary(p, b.n, slot, k.c8, "realloc()");
        if (slot > HAK_H_OWN_ZERO) hak_h_check_tail(p, b.n, slot, "realloc()");
        old = b.n;
        if (n <= PTRDIFF_MAX && n + 8 <= slot && n + 8 >= slot / 2) {
            if (n > old) {
                /* the old canary's bytes become the block's: zero, as the
                 * rest of the slot (no secret byte is handed out) */
                hak_h_canary_t c = hak_h_canary(p, old, slot, k.c8);
                *(hak_vb_t *)c.at &= ~c.mask;
            } else if (n < old) {
                /* the old size's bytes and canary past n: zero, as the
                 * slot's rest -- to a 16-byte step (or the slot's end; the
                 * seal writes the trailer again), so that no free-list
                 * word an earlier class left there is cut in two: free
                 * zeroes only to the new canary's end, and the quarantine
                 * accepts such words whole (a fuzzer input found it) */
                size_t end = hak_round_up(old + 16, 16);
                memset((uint8_t *)p + n, 0, (end < slot ? end : slot) - n);
            }
            hak_h_seal(p, n, slot, b.by, k);
            return p;
        }
    }
    void *q = hak_h_malloc(n, HAK_HARDENED_BY_MALLOC, HAK_H_OP_REALLOC);
    if (!q) return NULL;
    memcpy(q, p, old < n ? old : n);
    hak_hardened_free(p, "realloc()", false, 0, false);   /* (slot 0: hak_free_inline's) */
    return q;
}
