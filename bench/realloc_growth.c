/* realloc_growth -- strings and vectors that grow by realloc.
 *
 * usage: realloc_growth [STEPS=2000000] [LIVE=32] [SEED=1] [MAXSTR=16384] [MAXVEC=1048576]
 * LIVE growable objects are kept at once; each step picks one at random and
 * grows it:
 *   string (3 of 4 objects): append 1..64 bytes (realloc to the exact new
 *       length + 1, as naive string building does), write the appended bytes;
 *       target length random in 64..MAXSTR;
 *   vector (1 of 4 objects): capacity grows by 1.5x + 64 bytes (realloc), the
 *       first and last byte of the new part and one byte per 4 KiB page of it
 *       are written; target capacity random in 4 KiB..MAXVEC.
 * An object that reached its target is freed and replaced by a new, empty one
 * (realloc(NULL, ...)).  Interleaving several objects means in-place growth
 * is not always possible.  ops = realloc calls.
 */
#include "bench_common.h"

typedef struct grow_s {
    unsigned char *p;
    size_t len, target;
    int vector;
} grow_t;

static void restart(grow_t *g, bench_rng_t *rng, size_t maxstr, size_t maxvec)
{
    free(g->p);
    g->p = NULL;
    g->len = 0;
    g->vector = (bench_rng_next(rng) & 3) == 0;
    if (g->vector)
        g->target = (size_t)bench_rng_range(rng, 4096, maxvec);
    else
        g->target = (size_t)bench_rng_range(rng, 64, maxstr);
}

int main(int argc, char **argv)
{
    long steps = bench_arg_long(argc, argv, 1, 2000000);
    long live = bench_arg_long(argc, argv, 2, 32);
    long seed = bench_arg_long(argc, argv, 3, 1);
    size_t maxstr = (size_t)bench_arg_long(argc, argv, 4, 16384);
    size_t maxvec = (size_t)bench_arg_long(argc, argv, 5, 1048576);
    grow_t *g;
    bench_rng_t rng;
    uint64_t reallocs = 0, sum = 0, completed = 0;
    double t0, t1;
    long i;

    if (steps < 1 || live < 1 || maxstr < 64 || maxvec < 4096)
        bench_die("bad arguments");
    g = calloc((size_t)live, sizeof *g);
    if (!g)
        bench_die("out of memory");
    bench_rng_seed(&rng, (uint64_t)seed);
    for (i = 0; i < live; i++)
        restart(&g[i], &rng, maxstr, maxvec);

    t0 = bench_now();
    for (i = 0; i < steps; i++) {
        uint64_t r = bench_rng_next(&rng);
        grow_t *o = &g[(r >> 32) % (uint64_t)live];
        size_t old = o->len, nlen;
        unsigned char *np;
        if (o->vector)
            nlen = old + old / 2 + 64;
        else
            nlen = old + 1 + (size_t)(r & 63);
        np = realloc(o->p, o->vector ? nlen : nlen + 1);
        if (!np)
            bench_die("realloc failed");
        reallocs++;
        if (old)
            sum += np[old - 1]; /* the old contents must have been kept */
        if (o->vector) {
            size_t off;
            for (off = old; off < nlen; off += 4096)
                np[off] = (unsigned char)(off >> 12 | 1);
            np[nlen - 1] = (unsigned char)r;
        } else {
            memset(np + old, 'a' + (int)(r % 26), nlen - old);
            np[nlen] = 0;
        }
        o->p = np;
        o->len = nlen;
        if (nlen >= o->target) {
            completed++;
            restart(o, &rng, maxstr, maxvec);
        }
    }
    t1 = bench_now();

    for (i = 0; i < live; i++) {
        bench_sample_owned(g[i].p);
        free(g[i].p);
    }
    free(g);
    bench_result("realloc_growth", 1, reallocs, t1 - t0, "completed=%llu checksum=%llu",
                 (unsigned long long)completed, (unsigned long long)(sum & 0xffff));
    return 0;
}
