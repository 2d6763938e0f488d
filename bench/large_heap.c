/* large_heap -- a heap of large blocks, a few hundred MiB live, every page used.
 *
 * usage: large_heap [STEPS=1500] [LIVE_MIB=256] [SEED=1] [MIN=65536] [MAX=67108864]
 * Models a database buffer pool or a compiler's arenas: block sizes MIN..MAX
 * drawn log-uniformly (as many 64-128 KiB blocks as 32-64 MiB blocks; mean
 * ~9 MiB with the defaults), and a live set of LIVE_MIB MiB.
 *   fill:  blocks are malloc'ed until LIVE_MIB MiB are live; their number N
 *          stays fixed from then on (N ~ 28 with the defaults);
 *   steps: each step picks a random live block and replaces it:
 *            3 in 4 steps: free it, malloc a block of a fresh size;
 *            1 in 4 steps: realloc it to a fresh size (grow or shrink; the
 *                          kept prefix is checked);
 *          then writes one byte in every 4 KiB page of the new block.
 * Every page of every block is written, so a page the allocator gave back to
 * the OS (munmap, MADV_DONTNEED) and takes again costs a page fault, and
 * memory it keeps resident is reused without one.  The live set stays within
 * LIVE_MIB +- 25 %: a fresh size that would leave that band is redrawn,
 * unless it brings the live set closer to LIVE_MIB (live_mib_min/max report
 * the range reached).  The same seed gives every allocator the same requests.
 * ops = blocks allocated or reallocated: N for the fill plus STEPS (the fill
 * is timed as well, so the process's page faults all belong to timed ops).
 */
#include "bench_common.h"
#include <math.h>

typedef struct blk_s {
    unsigned char *p;
    size_t n;
    unsigned char tag;
} blk_t;

static size_t draw(bench_rng_t *rng, double llo, double lhi, size_t lo)
{
    double u = (double)(bench_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    size_t n = (size_t)exp(llo + u * (lhi - llo));
    return n < lo ? lo : n;
}

static size_t dist(size_t a, size_t b)
{
    return a > b ? a - b : b - a;
}

static int in_band(size_t live, size_t target)
{
    return dist(live, target) <= target / 4;
}

/* one byte per 4 KiB page, plus the last byte */
static void fill_pages(unsigned char *p, size_t from, size_t n, unsigned char tag)
{
    size_t off;
    for (off = from; off < n; off += 4096)
        p[off] = tag;
    p[n - 1] = tag;
}

int main(int argc, char **argv)
{
    long steps = bench_arg_long(argc, argv, 1, 1500);
    long live_mib = bench_arg_long(argc, argv, 2, 256);
    long seed = bench_arg_long(argc, argv, 3, 1);
    long lo = bench_arg_long(argc, argv, 4, 65536);
    long hi = bench_arg_long(argc, argv, 5, 67108864);
    size_t target, live = 0, live_max = 0, live_min;
    blk_t *b;
    long nb = 0, cap = 4096, i, reallocs = 0;
    bench_rng_t rng;
    uint64_t sum = 0, bytes = 0;
    double t0, t1, llo, lhi;

    if (steps < 0 || live_mib < 1 || lo < 4096 || hi < lo)
        bench_die("bad arguments");
    target = (size_t)live_mib << 20;
    b = calloc((size_t)cap, sizeof *b); /* bookkeeping, before the timing */
    if (!b)
        bench_die("out of memory");
    bench_rng_seed(&rng, (uint64_t)seed);
    llo = log((double)lo);
    lhi = log((double)hi);

    t0 = bench_now();
    while (live < target && nb < cap) {
        size_t n = draw(&rng, llo, lhi, (size_t)lo);
        unsigned char *p = malloc(n);
        if (!p)
            bench_die("malloc failed");
        b[nb].p = p;
        b[nb].n = n;
        b[nb].tag = (unsigned char)(nb | 1);
        fill_pages(p, 0, n, b[nb].tag);
        live += n;
        bytes += n;
        nb++;
    }
    live_max = live_min = live;
    for (i = 0; i < steps; i++) {
        uint64_t r = bench_rng_next(&rng);
        blk_t *x = &b[(r >> 32) % (uint64_t)nb];
        unsigned char tag = (unsigned char)(r >> 8 | 1);
        size_t n;
        int tries;
        live -= x->n;
        /* keep the live set within LIVE_MIB +- 25 %: redraw a size that would
         * leave it, unless it moves the live set closer to the target */
        for (tries = 0;; tries++) {
            size_t now = live + x->n, next;
            n = draw(&rng, llo, lhi, (size_t)lo);
            next = live + n;
            if (tries == 64 || in_band(next, target) || dist(next, target) < dist(now, target))
                break;
        }
        if ((r & 3) == 0) {
            size_t keep = n < x->n ? n : x->n;
            unsigned char *p = realloc(x->p, n);
            if (!p)
                bench_die("realloc failed");
            /* the prefix must have survived: first byte, last kept page */
            if (p[0] != x->tag || p[(keep - 1) & ~(size_t)4095] != x->tag)
                bench_die("realloc lost the block's contents");
            sum += p[0];
            reallocs++;
            x->p = p;
        } else {
            sum += x->p[0] + x->p[x->n - 1];
            free(x->p);
            x->p = malloc(n);
            if (!x->p)
                bench_die("malloc failed");
        }
        x->n = n;
        x->tag = tag;
        fill_pages(x->p, 0, n, tag);
        live += n;
        bytes += n;
        if (live > live_max)
            live_max = live;
        if (live < live_min)
            live_min = live;
    }
    t1 = bench_now();

    for (i = 0; i < nb; i++) {
        bench_sample_owned(b[i].p);
        free(b[i].p);
    }
    free(b);
    bench_result("large_heap", 1, (uint64_t)(nb + steps), t1 - t0,
                 "blocks=%ld reallocs=%ld live_mib_min=%llu live_mib_max=%llu mib_allocated=%llu "
                 "checksum=%llu", nb, reallocs, (unsigned long long)(live_min >> 20),
                 (unsigned long long)(live_max >> 20),
                 (unsigned long long)(bytes >> 20), (unsigned long long)(sum & 0xffff));
    return 0;
}
