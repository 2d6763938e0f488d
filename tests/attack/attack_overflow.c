/* attack_overflow.c -- writes past a block's requested size or before its
 * start, then frees and allocates around it; and a string that runs off
 * its block.
 *   attack_overflow over|under store|memcpy BYTES SIZE
 *   attack_overflow over|under store|memcpy|memset|strcpy BYTES SIZE nofree
 *   attack_overflow far|farunder store|memcpy SIZE
 *   attack_overflow string SIZE
 * nofree: the write, and nothing after it (no free, no allocation): caught
 * only at the write itself (a guard page, or a checked copy).  The byte
 * stores, the memcpy and the memset write BYTES bytes at the block's end
 * (over) or BYTES bytes before it (under); strcpy copies a string of
 * SIZE + BYTES - 1 characters into the block (over), or one of BYTES - 1
 * characters BYTES bytes before it (under).
 * far: one far write, a byte (or 32 bytes by memcpy) 1 MiB past the
 * block's end, or 1 MiB and 32 bytes before its start; then the frees and
 * allocations around it.
 * Caught: the program stops before "SURVIVED" (for string: strlen stops at
 * the block's end, or the read faults).
 */
#include <malloc.h>
#include "attack.h"

#define NEIGHBOURS 8
#define MIB ((size_t)1 << 20)

static char source[MIB];   /* what memcpy writes (0x41 bytes) */

/* how: STORE, MEMCPY, MEMSET or STRCPY; far: 1 = 1 MiB past the end, -1 =
 * 1 MiB (and 32 bytes) before the start, 0 = k bytes from the end on (or up
 * to the start) */
enum { STORE, MEMCPY, MEMSET, STRCPY };

static void overflow(int under, int how, int nofree, size_t k, size_t n, int far)
{
    char *nb[2 * NEIGHBOURS], *p;
    /* neighbours on both sides, half of them freed, so the write lands on
     * live and free blocks (or the allocator's metadata) */
    for (int i = 0; i < NEIGHBOURS; i++)
        nb[i] = malloc(n);
    p = malloc(n);
    for (int i = NEIGHBOURS; i < 2 * NEIGHBOURS; i++)
        nb[i] = malloc(n);
    if (!p)
        attack_setup_failed("malloc");
    for (int i = 0; i < 2 * NEIGHBOURS; i++) {
        if (!nb[i])
            attack_setup_failed("malloc");
        memset(nb[i], 1, n);
    }
    for (int i = 0; i < 2 * NEIGHBOURS; i += 2) {
        free(nb[i]);
        nb[i] = NULL;
    }
    memset(p, 2, n);

    volatile char *dst = under ? p - k : p + n;
    if (far) {
        k = how == MEMCPY ? 32 : 1;
        dst = far > 0 ? p + n + MIB : p - MIB - 32;
    }
    if (nofree) {
        if (how == STORE) {
            for (size_t i = 0; i < k; i++)
                dst[i] = 0x41;
        } else if (how == MEMCPY) {
            memset(source, 0x41, k);
            memcpy((char *)dst, source, k);
        } else if (how == MEMSET) {
            memset((char *)dst, 0x41, k);
        } else {   /* the string's NUL is the last byte written */
            size_t len = under ? k - 1 : n + k - 1;
            char *s = malloc(len + 1);
            if (!s)
                attack_setup_failed("malloc");
            memset(s, 0x41, len);
            s[len] = 0;
            strcpy(under ? (char *)dst : p, s);
        }
        return;
    }
    if (how == MEMCPY) {
        memset(source, 0x41, k);
        memcpy((char *)dst, source, k);
    } else {
        for (size_t i = 0; i < k; i++)
            dst[i] = 0x41;
    }

    /* chances to notice: free the block and its neighbours, reuse the size */
    free(p);
    for (int i = 0; i < 2 * NEIGHBOURS; i++)
        free(nb[i]);
    void *q[2 * NEIGHBOURS + 1];
    for (int i = 0; i <= 2 * NEIGHBOURS; i++)
        q[i] = malloc(n);
    for (int i = 0; i <= 2 * NEIGHBOURS; i++)
        free(q[i]);
}

/* fill the whole usable size with non-zero bytes: does a string end there? */
static void string_overflow(size_t n)
{
    char *nb[NEIGHBOURS];
    for (int i = 0; i < NEIGHBOURS; i++) {   /* live, non-zero neighbours */
        nb[i] = malloc(n);
        if (!nb[i])
            attack_setup_failed("malloc");
        memset(nb[i], 'b', malloc_usable_size(nb[i]));
    }
    char *p = nb[NEIGHBOURS / 2];
    size_t usable = malloc_usable_size(p);
    memset(p, 'a', usable);
    size_t len = strlen(p);
    attack_say("strlen %zu, usable size %zu\n", len, usable);
    if (len > usable)
        attack_survived();
    attack_say("string ends at the block's end\n");
    exit(0);
}

int main(int argc, char **argv)
{
    attack_begin();
    if (argc == 3 && !strcmp(argv[1], "string")) {
        string_overflow(attack_size_arg(argc, argv, 2));
    }
    if (argc == 4 && (!strcmp(argv[1], "far") || !strcmp(argv[1], "farunder"))) {
        int how = !strcmp(argv[2], "memcpy") ? MEMCPY : !strcmp(argv[2], "store") ? STORE : -1;
        if (how < 0)
            attack_setup_failed("usage: attack_overflow far|farunder store|memcpy SIZE");
        overflow(0, how, 0, 0, attack_size_arg(argc, argv, 3), !strcmp(argv[1], "far") ? 1 : -1);
        attack_survived();
    }
    if (argc < 5)
        attack_setup_failed("usage: attack_overflow over|under store|memcpy BYTES SIZE");
    int under = !strcmp(argv[1], "under");
    int nofree = argc > 5 && !strcmp(argv[5], "nofree");
    int how = !strcmp(argv[2], "store") ? STORE : !strcmp(argv[2], "memcpy") ? MEMCPY
            : !strcmp(argv[2], "memset") ? MEMSET : !strcmp(argv[2], "strcpy") ? STRCPY : -1;
    if (how < 0 || (!nofree && how != STORE && how != MEMCPY))
        attack_setup_failed("usage: attack_overflow over|under store|memcpy BYTES SIZE, or store|memcpy|memset|strcpy ... nofree");
    size_t k = attack_size_arg(argc, argv, 3), n = attack_size_arg(argc, argv, 4);
    if (k > MIB)
        attack_setup_failed("at most 1 MiB");
    overflow(under, how, nofree, k, n, 0);
    attack_survived();
}
