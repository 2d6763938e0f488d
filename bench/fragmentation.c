/* fragmentation -- footprint after fill / random free / refill / free all.
 *
 * usage: fragmentation [FILL_MB=256] [SEED=1] [SLEEP_MS=1000]
 *  1. fill:   malloc blocks of 16..128 B until FILL_MB MiB are requested
 *  2. punch:  free a random 90% of them
 *  3. refill: malloc blocks of 129..1024 B (other size classes) until the
 *             requested live bytes are back at FILL_MB
 *  4. free everything, then sleep SLEEP_MS so lazy purging can happen
 * Reported (KiB, from /proc/self/statm unless noted):
 *  baseline_rss_kb   before step 1
 *  rss_fill_kb       after step 1
 *  rss_refill_kb     after step 3
 *  peak_rss_kb       getrusage ru_maxrss (whole run)
 *  rss_after_free_kb right after step 4 (bookkeeping arrays already unmapped)
 *  rss_after_sleep_kb after the sleep
 *  bookkeeping_kb    the pointer arrays (mmap'ed, not malloc'ed: 8 B per block),
 *                    included in rss_fill/rss_refill/peak for every allocator
 * ops = malloc + free calls; seconds covers steps 1-4, not the sleep.
 */
#include "bench_common.h"
#include <sys/mman.h>

static void **map_array(size_t n, size_t *bytes)
{
    void *p;
    *bytes = (n * sizeof(void *) + 4095) & ~(size_t)4095;
    p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
             -1, 0);
    if (p == MAP_FAILED)
        bench_die("mmap of bookkeeping array failed");
    return (void **)p;
}

int main(int argc, char **argv)
{
    long fill_mb = bench_arg_long(argc, argv, 1, 256);
    long seed = bench_arg_long(argc, argv, 2, 1);
    long sleep_ms = bench_arg_long(argc, argv, 3, 1000);
    size_t fill, live = 0, cap_a, cap_b, bytes_a, bytes_b, na = 0, nb = 0, kept = 0, i;
    void **a, **b;
    bench_rng_t rng;
    uint64_t ops = 0, sum = 0;
    long baseline, rss_fill, rss_refill, rss_free, rss_sleep, book_kb;
    double t0, t1;

    if (fill_mb < 1 || sleep_ms < 0)
        bench_die("bad arguments");
    fill = (size_t)fill_mb << 20;
    cap_a = fill / 16 + 1;
    cap_b = fill / 129 + 1;
    a = map_array(cap_a, &bytes_a);
    b = map_array(cap_b, &bytes_b);
    bench_rng_seed(&rng, (uint64_t)seed);
    baseline = bench_rss_kb();

    t0 = bench_now();
    while (live < fill && na < cap_a) { /* 1. fill */
        uint64_t r = bench_rng_next(&rng);
        size_t n = 16 + (size_t)(r % 113);
        void *p = malloc(n);
        if (!p)
            bench_die("malloc failed");
        bench_touch(p, n, r);
        memcpy(p, &n, sizeof n); /* remember the size inside the block */
        a[na++] = p;
        live += n;
        ops++;
    }
    rss_fill = bench_rss_kb();
    book_kb = (long)((na * sizeof(void *)) >> 10);
    live = 0;
    for (i = 0; i < na; i++) { /* 2. free a random 90% */
        if (bench_rng_next(&rng) % 10 != 0) {
            sum += *(unsigned char *)a[i];
            free(a[i]);
            ops++;
        } else {
            size_t n;
            memcpy(&n, a[i], sizeof n);
            live += n;
            a[kept++] = a[i];
        }
    }
    while (live < fill && nb < cap_b) { /* 3. refill with other sizes */
        uint64_t r = bench_rng_next(&rng);
        size_t n = 129 + (size_t)(r % 896);
        void *p = malloc(n);
        if (!p)
            bench_die("malloc failed");
        bench_touch(p, n, r);
        b[nb++] = p;
        live += n;
        ops++;
    }
    rss_refill = bench_rss_kb();
    book_kb += (long)((nb * sizeof(void *)) >> 10);
    for (i = 0; i < kept; i += 64)
        bench_sample_owned(a[i]);
    for (i = 0; i < nb; i += 64)
        bench_sample_owned(b[i]);
    for (i = 0; i < kept; i++) { /* 4. free everything */
        sum += *(unsigned char *)a[i];
        free(a[i]);
        ops++;
    }
    for (i = 0; i < nb; i++) {
        sum += *(unsigned char *)b[i];
        free(b[i]);
        ops++;
    }
    t1 = bench_now();
    munmap(a, bytes_a);
    munmap(b, bytes_b);
    rss_free = bench_rss_kb();
    if (sleep_ms > 0) {
        struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    rss_sleep = bench_rss_kb();

    bench_result("fragmentation", 1, ops, t1 - t0,
                 "fill_mb=%ld blocks=%zu baseline_rss_kb=%ld rss_fill_kb=%ld rss_refill_kb=%ld "
                 "rss_after_free_kb=%ld rss_after_sleep_kb=%ld bookkeeping_kb=%ld checksum=%llu",
                 fill_mb, na + nb, baseline, rss_fill, rss_refill, rss_free, rss_sleep, book_kb,
                 (unsigned long long)(sum & 0xffff));
    return 0;
}
