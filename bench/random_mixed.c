/* random_mixed -- single-thread random malloc/free over a working set of slots.
 *
 * usage: random_mixed [ITERATIONS=1000000] [WS=400] [SEED=1] [MODE=mixed]
 *   MODE mixed : sizes uniform in 16..1040 B   -> workload=random_mixed
 *   MODE 256   : every block is 256 B          -> workload=random_256
 *   MODE large : sizes uniform in 8..64 KiB    -> workload=random_large
 * Each iteration picks a random slot: an occupied slot is freed (after reading
 * the block), an empty one gets malloc(random size) and the new block's first
 * and last bytes are written.  ops = ITERATIONS (each is one malloc or one free).
 */
#include "bench_common.h"

int main(int argc, char **argv)
{
    long iters = bench_arg_long(argc, argv, 1, 1000000);
    long ws = bench_arg_long(argc, argv, 2, 400);
    long seed = bench_arg_long(argc, argv, 3, 1);
    const char *mode = argc > 4 ? argv[4] : "mixed";
    size_t lo, hi;
    const char *name;
    void **slot;
    size_t *len;
    bench_rng_t rng;
    uint64_t sum = 0, mallocs = 0;
    double t0, t1;
    long i;

    if (strcmp(mode, "mixed") == 0) {
        lo = 16; hi = 1040; name = "random_mixed";
    } else if (strcmp(mode, "256") == 0) {
        lo = 256; hi = 256; name = "random_256";
    } else if (strcmp(mode, "large") == 0) {
        lo = 8 * 1024; hi = 64 * 1024; name = "random_large";
    } else {
        bench_die("MODE must be mixed, 256 or large");
        return 2;
    }
    if (iters < 1 || ws < 1)
        bench_die("ITERATIONS and WS must be positive");

    slot = calloc((size_t)ws, sizeof *slot);
    len = calloc((size_t)ws, sizeof *len);
    if (!slot || !len)
        bench_die("out of memory");
    bench_rng_seed(&rng, (uint64_t)seed);

    t0 = bench_now();
    for (i = 0; i < iters; i++) {
        uint64_t r = bench_rng_next(&rng);
        size_t k = (size_t)((r >> 32) % (uint64_t)ws);
        if (slot[k]) {
            sum += bench_read(slot[k], len[k]);
            free(slot[k]);
            slot[k] = NULL;
        } else {
            size_t n = lo == hi ? lo : lo + (size_t)((r & 0xffffffffu) % (hi - lo + 1));
            void *p = malloc(n);
            if (!p)
                bench_die("malloc failed");
            bench_touch(p, n, r);
            slot[k] = p;
            len[k] = n;
            mallocs++;
        }
    }
    t1 = bench_now();

    for (i = 0; i < ws; i++) {
        bench_sample_owned(slot[i]);
        free(slot[i]);
    }
    free(slot);
    free(len);
    bench_result(name, 1, (uint64_t)iters, t1 - t0, "ws=%ld mallocs=%llu checksum=%llu",
                 ws, (unsigned long long)mallocs, (unsigned long long)(sum & 0xffff));
    return 0;
}
