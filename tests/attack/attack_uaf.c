/* attack_uaf.c -- use after free, leaks through freed and reused blocks,
 * and immediate reuse.
 *   attack_uaf CASE SIZE
 * CASE:
 *   write         free, write 64 bytes through the dangling pointer, then
 *                 allocate and free the size
 *   write_reuse   free, allocate the size again (the block may come back),
 *                 write through the dangling pointer, free and allocate
 *   zero_on_free  fill with a secret, free, read it through the dangling
 *                 pointer: "SURVIVED" when a whole word of it is still there
 *   zero_on_malloc  fill, free, allocate the size again: "SURVIVED" when the
 *                 new block shows a whole word of the secret
 *   zero_after_reuse  fill many blocks of the size (4,096, or 16 above 4 KiB),
 *                 free them all, allocate 64 (or 16) again: "SURVIVED" when a
 *                 new block holds any byte that is not zero -- the last
 *                 owner's data, or the allocator's own words (a free-list
 *                 link is a heap address)
 *   reuse         free then allocate the size: "SURVIVED" when the same
 *                 address comes back
 * Caught: the program stops before "SURVIVED" (a fault on the read counts).
 */
#include "attack.h"

static void churn(size_t n, int rounds)
{
    void *q[16];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 16; i++)
            q[i] = malloc(n);
        for (int i = 0; i < 16; i++)
            free(q[i]);
    }
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

int main(int argc, char **argv)
{
    attack_begin();
    if (argc < 3)
        attack_setup_failed("usage: attack_uaf CASE SIZE");
    const char *c = argv[1];
    size_t n = attack_size_arg(argc, argv, 2);
    volatile unsigned char *p = malloc(n);
    if (!p)
        attack_setup_failed("malloc");
    memset((void *)p, 1, n);

    if (!strcmp(c, "write")) {
        free((void *)p);
        for (size_t i = 0; i < min_size(n, 64); i++)
            p[i] = 0x41;
        churn(n, 4);
    } else if (!strcmp(c, "write_reuse")) {
        free((void *)p);
        void *q = malloc(n);
        attack_keep(q);
        for (size_t i = 0; i < min_size(n, 64); i++)
            p[i] = 0x41;
        free(q);
        churn(n, 4);
    } else if (!strcmp(c, "zero_on_free")) {
        attack_fill_secret((void *)p, n);
        free((void *)p);
        if (!attack_secret_left(p, n)) {
            attack_say("the freed block no longer holds the secret\n");
            return 0;
        }
    } else if (!strcmp(c, "zero_on_malloc")) {
        attack_fill_secret((void *)p, n);
        free((void *)p);
        volatile unsigned char *q = malloc(n);
        if (!q)
            attack_setup_failed("malloc");
        if (!attack_secret_left(q, n)) {
            attack_say("the new block shows none of the secret\n");
            return 0;
        }
    } else if (!strcmp(c, "zero_after_reuse")) {
        enum { MANY = 4096 };
        static unsigned char *v[MANY];
        size_t k = n <= 4096 ? MANY : 16, again = k < 64 ? k : 64;
        free((void *)p);
        for (size_t i = 0; i < k; i++) {
            if (!(v[i] = malloc(n)))
                attack_setup_failed("malloc");
            memset(v[i], 0xab, n);
        }
        for (size_t i = 0; i < k; i++)
            free(v[i]);
        size_t dirty = 0;
        for (size_t i = 0; i < again; i++) {
            volatile unsigned char *q = malloc(n);
            if (!q)
                attack_setup_failed("malloc");
            size_t j = 0;
            while (j < n && q[j] == 0)
                j++;
            dirty += j < n;
        }
        if (dirty == 0) {
            attack_say("every new block is zero\n");
            return 0;
        }
        attack_say("%zu of %zu new blocks not zero\n", dirty, again);
    } else if (!strcmp(c, "reuse")) {
        free((void *)p);
        void *q = malloc(n);
        if (q != (void *)p) {
            attack_say("a different address came back\n");
            return 0;
        }
    } else {
        attack_setup_failed("unknown case");
    }
    attack_survived();
}
