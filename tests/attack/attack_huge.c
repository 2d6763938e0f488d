/* attack_huge.c -- impossible sizes.
 *   attack_huge CASE
 * Caught ("OK"): the call fails with ENOMEM (errno, or the returned error
 * for posix_memalign), no crash, and a block passed to realloc or
 * reallocarray is left intact.
 */
#include <errno.h>
#include <malloc.h>
#include "attack.h"

/* sizes the compiler cannot see (it would warn, or fold the call away) */
static volatile size_t max_size = SIZE_MAX;

static int failed_with_enomem(void *r, int err, const char *what)
{
    if (r == NULL && err == ENOMEM)
        return 1;
    attack_say("%s returned %p, errno %d\n", what, r, err);
    return 0;
}

int main(int argc, char **argv)
{
    attack_begin();
    if (argc < 2)
        attack_setup_failed("usage: attack_huge CASE");
    const char *c = argv[1];
    size_t max = max_size, half = max / 2 + 1, wraps = half + 1; /* wraps * 2 == 2 */
    char *keep = malloc(64);
    if (!keep)
        attack_setup_failed("malloc");
    memset(keep, 7, 64);
    void *r = NULL;
    int err = -1;   /* posix_memalign returns its error */
    errno = 0;
    if (!strcmp(c, "malloc_max"))
        r = malloc(max);
    else if (!strcmp(c, "malloc_half"))           /* above PTRDIFF_MAX */
        r = malloc(half);
    else if (!strcmp(c, "malloc_terabytes"))      /* 64 TiB: beyond the address space left */
        r = malloc((size_t)1 << 46);
    else if (!strcmp(c, "calloc_overflow"))       /* the product wraps to 2 */
        r = calloc(wraps, 2);
    else if (!strcmp(c, "calloc_max"))
        r = calloc(1, max);
    else if (!strcmp(c, "realloc_max"))
        r = realloc(keep, max - 64);
    else if (!strcmp(c, "reallocarray_overflow"))
        r = reallocarray(keep, wraps, 2);
    else if (!strcmp(c, "posix_memalign_max")) {
        err = posix_memalign(&r, 64, max - 1000);
        if (err)
            r = NULL;
    } else if (!strcmp(c, "aligned_alloc_max"))
        r = aligned_alloc(64, max - 63);
    else if (!strcmp(c, "memalign_max"))
        r = memalign(4096, max - 4095);
    else if (!strcmp(c, "valloc_max"))
        r = valloc(max - 100);
    else if (!strcmp(c, "pvalloc_max"))           /* rounding up to a page wraps */
        r = pvalloc(max - 100);
    else
        attack_setup_failed("unknown case");
    if (err < 0)
        err = errno;
    int ok = failed_with_enomem(r, err, c);
    for (int i = 0; ok && i < 64; i++)            /* a failed realloc keeps the block */
        if (keep[i] != 7) {
            attack_say("the block changed\n");
            ok = 0;
        }
    if (!ok)
        attack_survived();
    attack_say("OK\n");
    return 0;
}
