/* size_ops.c -- malloc_usable_size and aligned allocations, one call at a
 * time: a workload for instruction counts (bench/callgrind_ops.sh), not for
 * `make bench` (it is not in BENCH_NAMES; make build/bench/size_ops builds it).
 *   size_ops usable ITERS [LIVE=1024]
 *       LIVE blocks of 16..1024 bytes (as a Ruby heap's strings and arrays),
 *       then ITERS calls of malloc_usable_size, round-robin over them.
 *   size_ops aligned ITERS ALIGN SIZE [LIVE=64]
 *       a ring of LIVE blocks from posix_memalign(ALIGN, SIZE): each
 *       iteration frees the oldest and takes a new one (LIVE 1: a pair).
 *       Every block is checked for its alignment and its usable size. */
#include "bench_common.h"
#include <malloc.h>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "usable";
    long iters = bench_arg_long(argc, argv, 2, 1000000);
    uint64_t sum = 0;
    double t0 = bench_now();
    if (strcmp(mode, "usable") == 0) {
        long live = bench_arg_long(argc, argv, 3, 1024);
        void **blocks = bench_xmalloc((size_t)live * sizeof *blocks);
        bench_rng_t rng;
        bench_rng_seed(&rng, 42);
        for (long i = 0; i < live; i++) {
            blocks[i] = bench_xmalloc(bench_rng_range(&rng, 16, 1024));
            bench_sample_owned(blocks[i]);
        }
        for (long i = 0, j = 0; i < iters; i++) {
            sum += malloc_usable_size(blocks[j]);
            if (++j == live) j = 0;
        }
        for (long i = 0; i < live; i++) free(blocks[i]);
        free(blocks);
    } else if (strcmp(mode, "aligned") == 0) {
        size_t align = (size_t)bench_arg_long(argc, argv, 3, 65536);
        size_t size = (size_t)bench_arg_long(argc, argv, 4, 65536 - 40);
        long live = bench_arg_long(argc, argv, 5, 64);
        void **ring = calloc((size_t)live, sizeof *ring);
        if (!ring) bench_die("calloc");
        for (long i = 0, j = 0; i < iters; i++) {
            free(ring[j]);
            if (posix_memalign(&ring[j], align, size) != 0) bench_die("posix_memalign failed");
            if ((uintptr_t)ring[j] & (align - 1)) bench_die("misaligned block");
            *(volatile char *)ring[j] = 1;
            sum += (uintptr_t)ring[j] >> 16;
            if (++j == live) j = 0;
        }
        for (long i = 0; i < live; i++) {
            if (ring[i] && malloc_usable_size(ring[i]) < size) bench_die("usable size too small");
            if (ring[i]) bench_sample_owned(ring[i]);
            free(ring[i]);
        }
        free(ring);
    } else {
        bench_die("usage: size_ops usable ITERS [LIVE] | aligned ITERS ALIGN SIZE [LIVE]");
    }
    bench_result("size_ops", 1, (uint64_t)iters, bench_now() - t0, "mode=%s sum=%llu", mode,
                 (unsigned long long)sum);
    return 0;
}
