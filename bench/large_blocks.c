/* large_blocks -- large allocations, every page written.
 *
 * usage: large_blocks [ITERATIONS=2000] [WS=8] [SEED=1] [MIN=65536] [MAX=67108864]
 * Like random_mixed but with WS slots and block sizes MIN..MAX drawn
 * log-uniformly (as many 64-128 KiB blocks as 32-64 MiB blocks).  A fresh
 * block gets one byte written in every 4 KiB page (so the cost of faulting
 * pages in, or of reusing already-resident memory, is part of the result);
 * a block is read at its ends before it is freed.  ops = ITERATIONS.
 */
#include "bench_common.h"
#include <math.h>

int main(int argc, char **argv)
{
    long iters = bench_arg_long(argc, argv, 1, 2000);
    long ws = bench_arg_long(argc, argv, 2, 8);
    long seed = bench_arg_long(argc, argv, 3, 1);
    double lo = (double)bench_arg_long(argc, argv, 4, 65536);
    double hi = (double)bench_arg_long(argc, argv, 5, 67108864);
    unsigned char **slot;
    size_t *len;
    bench_rng_t rng;
    uint64_t sum = 0, bytes = 0;
    double t0, t1, llo, lhi;
    long i;

    if (iters < 1 || ws < 1 || lo < 4096 || hi < lo)
        bench_die("bad arguments");
    slot = calloc((size_t)ws, sizeof *slot);
    len = calloc((size_t)ws, sizeof *len);
    if (!slot || !len)
        bench_die("out of memory");
    bench_rng_seed(&rng, (uint64_t)seed);
    llo = log(lo);
    lhi = log(hi);

    t0 = bench_now();
    for (i = 0; i < iters; i++) {
        uint64_t r = bench_rng_next(&rng);
        size_t k = (size_t)((r >> 40) % (uint64_t)ws);
        if (slot[k]) {
            sum += bench_read(slot[k], len[k]);
            free(slot[k]);
            slot[k] = NULL;
        } else {
            double u = (double)(r & 0xffffffffffull) / (double)0xffffffffffull;
            size_t n = (size_t)exp(llo + u * (lhi - llo)), off;
            unsigned char *p;
            if (n < (size_t)lo)
                n = (size_t)lo;
            p = malloc(n);
            if (!p)
                bench_die("malloc failed");
            for (off = 0; off < n; off += 4096)
                p[off] = (unsigned char)(off >> 12 | 1);
            p[n - 1] = 1;
            slot[k] = p;
            len[k] = n;
            bytes += n;
        }
    }
    t1 = bench_now();

    for (i = 0; i < ws; i++) {
        bench_sample_owned(slot[i]);
        free(slot[i]);
    }
    free(slot);
    free(len);
    bench_result("large_blocks", 1, (uint64_t)iters, t1 - t0,
                 "ws=%ld mib_allocated=%llu checksum=%llu", ws,
                 (unsigned long long)(bytes >> 20), (unsigned long long)(sum & 0xffff));
    return 0;
}
