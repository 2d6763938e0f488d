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
 * of the process gets ((2n ^ s) * C) | 1 with s = secret 0 less its low bit
 * and C odd.  2n ^ s is even and distinct for every n below 2^63; a
 * multiply by an odd constant permutes the 64-bit words and keeps an even
 * word even, so setting bit 0 maps distinct serials to distinct keys, none
 * of them 0.  Page keys are drawn only where a page gets its class (a slow
 * path): one shared atomic add. */
static _Atomic uint64_t hak_key_serial;

uintptr_t hak_page_new_key(void) {
    uint64_t n = atomic_fetch_add_explicit(&hak_key_serial, 1, memory_order_relaxed);
    return (((n << 1) ^ (hak_secret(0) & ~(uint64_t)1)) * 0x9e3779b97f4a7c15u) | 1u;
}

/* The inverse: w is a key if it is odd and ((w & ~1) * C^-1) ^ s is twice a
 * serial already drawn (the hardened build's reuse check, hak_hardened.c). */
bool hak_page_key_issued(uint64_t w) {
    if (!(w & 1)) return false;
    uint64_t x = ((w & ~(uint64_t)1) * 0xf1de83e19937733du) ^ (hak_secret(0) & ~(uint64_t)1);
    return (x >> 1) < atomic_load_explicit(&hak_key_serial, memory_order_relaxed);
}
