/* attack_legit.c -- correct programs that must not be reported (false
 * positives).  attack_legit CASE [SIZE]; "OK" when the program ran right.
 *   growth         an array grown by realloc from 256 KiB by 3/2, 12 times
 *   realloc_thread a block from realloc(NULL, 12) grown by another thread
 *   calloc_zeroed  a dirtied block freed, then calloc of the size: all zero
 *   realloc_keeps  realloc up and down keeps the contents
 *   free_null      free(NULL), realloc(NULL, n), malloc_usable_size(NULL)
 *   usable_fill    every byte of malloc_usable_size written, in a run of
 *                  neighbours, then all freed and the size allocated again
 *   stale_copy     a block copied whole (stale free-list words included) from
 *                  one reused after its free, into a live block then freed
 *                  (glibc's tst-tcfree3 idea: old metadata in program data)
 *   zero_grow      malloc(0), then realloc to n and the n bytes written
 */
#include <malloc.h>
#include <pthread.h>
#include "attack.h"

static void *grow_in_thread(void *p)
{
    p = realloc(p, 1024);
    if (p)
        memset(p, 5, 1024);
    free(p);
    return p;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

static int run(const char *c, size_t n)
{
    if (!strcmp(c, "growth")) {
        unsigned char *p = NULL;
        size_t size = 256 * 1024, old = 0;
        for (int i = 0; i < 12; i++, old = size, size = size * 3 / 2) {
            p = realloc(p, size);
            if (!p || (old && !all_bytes(p, old, (unsigned char)i)))
                return 0;
            memset(p, i + 1, size);
        }
        free(p);
        return 1;
    } else if (!strcmp(c, "realloc_thread")) {
        void *p = realloc(NULL, 12), *r;
        pthread_t t;
        if (!p || pthread_create(&t, NULL, grow_in_thread, p) || pthread_join(t, &r))
            return 0;
        return r != NULL;
    } else if (!strcmp(c, "calloc_zeroed")) {
        unsigned char *p = malloc(n);
        if (!p)
            return 0;
        memset(p, 0xff, n);
        free(p);
        p = calloc(1, n);
        int ok = p && all_bytes(p, n, 0);
        free(p);
        return ok;
    } else if (!strcmp(c, "realloc_keeps")) {
        unsigned char *p = malloc(n);
        if (!p)
            return 0;
        memset(p, 9, n);
        p = realloc(p, n * 4);
        if (!p || !all_bytes(p, n, 9))
            return 0;
        p = realloc(p, n / 2 + 1);
        int ok = p && all_bytes(p, n / 2 + 1, 9);
        free(p);
        return ok;
    } else if (!strcmp(c, "free_null")) {
        free(NULL);
        void *p = realloc(NULL, 32);
        int ok = p && malloc_usable_size(NULL) == 0;
        free(p);
        return ok;
    } else if (!strcmp(c, "usable_fill")) {
        unsigned char *b[16];
        for (int i = 0; i < 16; i++) {
            if (!(b[i] = malloc(n)))
                return 0;
            memset(b[i], 0x5a, malloc_usable_size(b[i]));
        }
        for (int i = 0; i < 16; i++)
            free(b[i]);
        for (int i = 0; i < 16; i++)
            if (!(b[i] = malloc(n)))
                return 0;
        for (int i = 0; i < 16; i++)
            free(b[i]);
        return 1;
    } else if (!strcmp(c, "stale_copy")) {
        for (int round = 0; round < 64; round++) {
            unsigned char *a = malloc(n), *live = malloc(n);
            if (!a || !live)
                return 0;
            free(a);
            unsigned char *again = malloc(n);   /* most likely a's slot: its old words */
            if (!again)
                return 0;
            memcpy(live, again, n);             /* uninitialized bytes, as a program may */
            free(live);
            free(again);
        }
        return 1;
    } else if (!strcmp(c, "zero_grow")) {
        unsigned char *p = malloc(0);
        if (!p)
            return 0;
        p = realloc(p, n);
        if (!p)
            return 0;
        memset(p, 3, n);
        int ok = all_bytes(p, n, 3);
        free(p);
        return ok;
    }
    attack_setup_failed("unknown case");
    return 0;
}

int main(int argc, char **argv)
{
    attack_begin();
    if (argc < 2)
        attack_setup_failed("usage: attack_legit CASE [SIZE]");
    if (!run(argv[1], argc > 2 ? attack_size_arg(argc, argv, 2) : 0))
        return 1;
    attack_say("OK\n");
    return 0;
}
