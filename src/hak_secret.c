/* hak_secret.c -- two random words drawn once per process, used to encode
 * what hakmem writes into freed or padding memory: a free block's key word
 * (hak_page_new_key) and an aligned block's mark (hak_aligned_mark).  Neither may
 * reveal an address to a program that reads freed memory, and neither may be
 * a value a program stores by chance. */
#include "hak_hardened.h"

_Atomic uint64_t hak_secrets[2];

/* Draw the secrets (once; racing callers agree on the first winner's). */
HAK_NOINLINE uint64_t hak_secret_init(unsigned i) {
    uint64_t r[2] = { hak_os_random(), hak_os_random() };
    for (unsigned k = 0; k < 2; k++) {
        uint64_t expected = 0, v = r[k] | 1;       /* odd: never 0 */
        atomic_compare_exchange_strong_explicit(&hak_secrets[k], &expected, v,
                                                memory_order_relaxed, memory_order_relaxed);
    }
    return atomic_load_explicit(&hak_secrets[i], memory_order_relaxed);
}

/* Page keys (hak_page_new_key, hak_internal.h): the n-th page incarnation
 * of the process gets (((4n ^ s) * C) >> 1) | 1 | 2^63 with s = secret 0
 * less its low two bits and C odd.  4n ^ s is a multiple of 4 and distinct
 * for every n below 2^62; a multiply by an odd constant permutes the 64-bit
 * words and keeps a multiple of 4 one, so the shift keeps distinct serials
 * distinct (an even word, top bit 0) and setting bits 0 and 63 keeps them
 * so, none of them 0.  Bit 63: the key's last byte -- the byte just before
 * the next block, which a 1-byte underflow writes -- is never NUL or ASCII,
 * so such a write always changes it (the hardened build's check of the
 * previous slot; before, 1 page in 256 had 'A' there).  Page keys are drawn
 * only where a page gets its class (a slow path): one shared atomic add. */
static _Atomic uint64_t hak_key_serial;
#define HAK_KEY_C    0x9e3779b97f4a7c15u
#define HAK_KEY_CINV 0xf1de83e19937733du   /* HAK_KEY_C's inverse mod 2^64 */
#define HAK_KEY_BITS (((uint64_t)1 << 63) | 1u)

uintptr_t hak_page_new_key(void) {
    uint64_t n = atomic_fetch_add_explicit(&hak_key_serial, 1, memory_order_relaxed);
    return ((((n << 2) ^ (hak_secret(0) & ~(uint64_t)3)) * HAK_KEY_C) >> 1) | HAK_KEY_BITS;
}

/* The inverse: w is a key if bits 0 and 63 are set and
 * (((w less them) << 1) * C^-1) ^ s is four times a serial already drawn
 * (the hardened build's reuse check, hak_hardened.c). */
bool hak_page_key_issued(uint64_t w) {
    if ((w & HAK_KEY_BITS) != HAK_KEY_BITS) return false;
    uint64_t x = (((w & ~HAK_KEY_BITS) << 1) * HAK_KEY_CINV) ^ (hak_secret(0) & ~(uint64_t)3);
    return (x & 3) == 0 && (x >> 2) < atomic_load_explicit(&hak_key_serial, memory_order_relaxed);
}
