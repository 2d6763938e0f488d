/* hak_secret.c -- two random words drawn once per process, used to encode
 * what hakmem writes into freed or padding memory: a free block's key word
 * (hak_page_key) and an aligned block's mark (hak_aligned_mark).  Neither may
 * reveal an address to a program that reads freed memory, and neither may be
 * a value a program stores by chance. */
#include "hak_internal.h"

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
