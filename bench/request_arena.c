/* request_arena -- per-request allocation: many blocks with one lifetime.
 *
 * usage: request_arena [REQUESTS=20000] [BLOCKS=300] [MODE=free] [SEED=1]
 * Each request allocates BLOCKS blocks of 16 B..4 KiB (most small: tree
 * nodes of 32 B, strings of 16..256 B, a few buffers up to 4 KiB), links the
 * nodes into a tree (each node holds a child array and a string), writes
 * every block and walks the tree once, then releases everything:
 *   MODE=free     every block with free(), walking the tree (any allocator)
 *   MODE=destroy  the request's heap at once: hakmem_heap_new/_malloc/_destroy
 *                 under hakmem, mi_heap_new/_malloc/_destroy under mimalloc
 *                 (looked up at run time in the preloaded allocator: the
 *                 binary stays the same for every allocator); fails (exit 2)
 *                 under an allocator without a heap API.
 * ops = blocks allocated.  The proof: blocks sampled with hakmem_owns()
 * (bench_sample_owned), and under mimalloc mi_heap_check_owned() on the
 * sampled heap blocks (a block not in its heap aborts the run).
 */
#include "bench_common.h"
#include <stdbool.h>

typedef struct node_s {
    struct node_s **kids;
    char *name;
    unsigned nkids, cap;
    uint64_t value;
} node_t;

/* the heap API, either allocator's */
static void *(*heap_new)(void);
static void *(*heap_malloc)(void *, size_t);
static void (*heap_destroy)(void *);
static bool (*mi_owned)(void *, const void *);
static const char *api = "none";

static void *heap;   /* the current request's heap, or NULL: malloc */
static uint64_t nalloc;

static void *alloc(size_t n)
{
    void *p = heap ? heap_malloc(heap, n) : malloc(n);
    if (!p)
        bench_die("allocation failed");
    if ((++nalloc & 1023) == 0) {
        bench_sample_owned(p);
        if (heap && mi_owned && !mi_owned(heap, p))
            bench_die("mi_heap_malloc's block is not in its heap");
    }
    return p;
}

static void release(void *p)
{
    if (!heap)
        free(p);
}

static uint64_t walk(node_t *n, bool rel)
{
    uint64_t s = n->value + (unsigned char)n->name[0];
    for (unsigned i = 0; i < n->nkids; i++)
        s += walk(n->kids[i], rel);
    if (rel) {
        release(n->kids);
        release(n->name);
        release(n);
    }
    return s;
}

static node_t *new_node(bench_rng_t *rng, uint64_t v)
{
    node_t *n = alloc(sizeof *n);
    size_t len = (size_t)bench_rng_range(rng, 16, 256);
    n->name = alloc(len);
    memset(n->name, (int)('a' + v % 26), len - 1);
    n->name[len - 1] = 0;
    n->cap = 4;
    n->nkids = 0;
    n->kids = alloc(n->cap * sizeof *n->kids);
    n->value = v;
    return n;
}

int main(int argc, char **argv)
{
    long requests = bench_arg_long(argc, argv, 1, 20000);
    long blocks = bench_arg_long(argc, argv, 2, 300);
    const char *mode = argc > 3 ? argv[3] : "free";
    long seed = bench_arg_long(argc, argv, 4, 1);
    bool destroy = !strcmp(mode, "destroy");
    if (requests < 1 || blocks < 8 || (!destroy && strcmp(mode, "free")))
        bench_die("bad arguments");
    if (destroy) {
        if ((heap_new = (void *(*)(void))dlsym(RTLD_DEFAULT, "hakmem_heap_new"))) {
            heap_malloc = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_heap_malloc");
            heap_destroy = (void (*)(void *))dlsym(RTLD_DEFAULT, "hakmem_heap_destroy");
            api = "hakmem_heap";
        } else if ((heap_new = (void *(*)(void))dlsym(RTLD_DEFAULT, "mi_heap_new"))) {
            heap_malloc = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "mi_heap_malloc");
            heap_destroy = (void (*)(void *))dlsym(RTLD_DEFAULT, "mi_heap_destroy");
            mi_owned = (bool (*)(void *, const void *))dlsym(RTLD_DEFAULT, "mi_heap_check_owned");
            api = "mi_heap";
            if (!mi_owned)
                bench_die("mimalloc without mi_heap_check_owned");
        }
        if (!heap_new || !heap_malloc || !heap_destroy)
            bench_die("MODE=destroy needs hakmem's or mimalloc's heap API (preload one)");
    }
    bench_rng_t rng;
    bench_rng_seed(&rng, (uint64_t)seed);
    uint64_t sum = 0;
    node_t **all = bench_xmalloc((size_t)blocks * sizeof *all);
    double t0 = bench_now();
    for (long r = 0; r < requests; r++) {
        if (destroy)
            heap = heap_new();
        uint64_t start = nalloc;
        unsigned nn = 0;
        node_t *root = new_node(&rng, (uint64_t)r);
        all[nn++] = root;
        while (nalloc - start + 3 <= (uint64_t)blocks) {
            uint64_t pick = bench_rng_next(&rng);
            if ((pick & 7) == 0) {               /* a buffer: 256 B..4 KiB, hung on a node's name */
                node_t *n = all[(pick >> 8) % nn];
                size_t len = (size_t)bench_rng_range(&rng, 256, 4096);
                char *b = alloc(len);
                memcpy(b, n->name, 8);
                b[len - 1] = 0;
                release(n->name);
                n->name = b;
                continue;
            }
            node_t *parent = all[(pick >> 8) % nn];
            node_t *n = new_node(&rng, pick);
            if (parent->nkids == parent->cap) {  /* grow the child array: a new block */
                node_t **k = alloc(parent->cap * 2 * sizeof *k);
                memcpy(k, parent->kids, parent->nkids * sizeof *k);
                release(parent->kids);
                parent->kids = k;
                parent->cap *= 2;
            }
            parent->kids[parent->nkids++] = n;
            if (nn < (unsigned)blocks)
                all[nn++] = n;
        }
        sum += walk(root, !destroy);
        if (destroy) {
            heap_destroy(heap);
            heap = NULL;
        }
    }
    double t1 = bench_now();
    free(all);
    bench_result("request_arena", 1, nalloc, t1 - t0, "mode=%s api=%s blocks=%ld checksum=%llu", mode, api,
                 blocks, (unsigned long long)(sum & 0xffff));
    return 0;
}
