/* test_profile.c -- sampled heap profiles (HAKMEM_SAMPLE_BYTES), run by
 * tests/suite_profile.sh under LD_PRELOAD of the library, which checks the
 * dumps with google-pprof and the leak report on stderr.
 *
 *   test_profile sites DUMP     site_a/b/c keep 96, 128 and 160 MiB live
 *   test_profile cxx DUMP       new_site keeps 48 MiB live through operator new
 *   test_profile leak           leak_site leaks 64 MiB, other sites free theirs
 *   test_profile threads DUMP   4 threads: kept_site keeps 64 MiB, freed_site's
 *                               blocks are all freed by other threads
 *   test_profile fork DUMP      the parent keeps parent_site's 64 MiB and forks;
 *                               the child frees them, keeps child_site's 96 MiB
 *                               and dumps
 *   test_profile realloc DUMP   grow_site mallocs 16 MiB in 1..8 KiB blocks,
 *                               realloc_site moves each to 4 times its size (64
 *                               MiB live, all moved: grow_site keeps nothing);
 *                               vec_site grows 32 vectors to 2 MiB (64 MiB)
 *   test_profile aligned FN DUMP  FN (posix_memalign, aligned_alloc, memalign,
 *                               valloc, pvalloc) keeps 64 MiB live from a site
 *                               named FN_site; the blocks' alignment is checked
 *   test_profile misuse KIND    (run with every allocation sampled) a double
 *                               free, or the free of a pointer inside a
 *                               block: hakmem must report it and abort
 * The sites are functions of their own (noinline, exported with -rdynamic), so
 * pprof and the leak report can name them. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define NOINL __attribute__((noinline, used))

static int dump(const char *path) {
    int (*fn)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hakmem_profile_dump");
    if (!fn) { fprintf(stderr, "hakmem_profile_dump not found (not preloaded?)\n"); return 1; }
    if (fn(path) != 0) { perror("hakmem_profile_dump"); return 1; }
    return 0;
}

/* total bytes in blocks of 1..8 KiB (varied sizes); the block array is
 * allocated with calloc of its own site, not sampled into the sites' totals */
typedef struct { void **v; size_t n; } blocks_t;
static size_t block_size(size_t i) { return 1024 + (i * 2654435761u) % 7168; }
static blocks_t reserve(size_t total) {
    blocks_t b = { calloc(total / 1024 + 1, sizeof(void *)), 0 };
    return b;
}
static void *(*op_new)(size_t);   /* operator new (hakmem's, looked up at run time) */
static inline __attribute__((always_inline)) void fill_by(blocks_t *b, size_t total, char tag, bool by_new) {
    size_t got = 0;
    while (got < total) {
        size_t s = block_size(b->n);
        if (s > total - got) s = total - got;
        char *p = by_new ? op_new(s) : malloc(s);
        if (!p) { perror("malloc"); exit(1); }
        p[0] = tag;
        b->v[b->n++] = p;
        got += s;
    }
}
#define fill(b, total, tag) fill_by(b, total, tag, false)
static void drop(blocks_t *b) { for (size_t i = 0; i < b->n; i++) free(b->v[i]); b->n = 0; }

NOINL void site_a(blocks_t *b) { fill(b, 96 * MIB, 'a'); }
NOINL void site_b(blocks_t *b) { fill(b, 128 * MIB, 'b'); }
NOINL void site_c(blocks_t *b) { fill(b, 160 * MIB, 'c'); }
NOINL void leak_site(blocks_t *b) { fill(b, 64 * MIB, 'l'); }
NOINL void kept_site(blocks_t *b) { fill(b, 16 * MIB, 'k'); }
NOINL void freed_site(blocks_t *b) { fill(b, 16 * MIB, 'f'); }
NOINL void parent_site(blocks_t *b) { fill(b, 64 * MIB, 'p'); }
NOINL void child_site(blocks_t *b) { fill(b, 96 * MIB, 'q'); }
NOINL void new_site(blocks_t *b) { fill_by(b, 48 * MIB, 'n', true); }

NOINL void grow_site(blocks_t *b) { fill(b, 16 * MIB, 'g'); }
/* each block to 4 times its size: never in place (hakmem keeps a block only
 * when the new size fits in it) */
NOINL void realloc_site(blocks_t *b) {
    for (size_t i = 0; i < b->n; i++) {
        char *p = realloc(b->v[i], 4 * block_size(i));
        if (!p || p[0] != 'g') { fprintf(stderr, "realloc lost the contents\n"); exit(1); }
        b->v[i] = p;
    }
}

/* 32 vectors grown by realloc from 64 KiB to 2 MiB, 64 KiB a step, one after
 * the other (so mostly in place: the growth counts as allocated bytes) */
NOINL void vec_site(blocks_t *b) {
    for (int v = 0; v < 32; v++) {
        char *p = NULL;
        for (size_t n = 64 << 10; n <= (2u << 20); n += 64 << 10) {
            char *q = realloc(p, n);
            if (!q || (p && (q[0] != (char)v || q[n - (64 << 10) - 1] != (char)v))) {
                fprintf(stderr, "realloc lost the contents\n");
                exit(1);
            }
            q[0] = q[n - 1] = (char)v;
            p = q;
        }
        b->v[b->n++] = p;
    }
}

/* 64 MiB in blocks of 1..8 KiB (pvalloc: multiples of 4 KiB, its rounding),
 * each aligned to align and checked */
typedef void *(*alloc_fn)(size_t size, size_t align);
static inline __attribute__((always_inline)) void fill_aligned(blocks_t *b, alloc_fn fn, size_t align, bool pages) {
    size_t got = 0;
    while (got < 64 * MIB) {
        size_t s = block_size(b->n);
        if (pages) s = (s + 4095) & ~(size_t)4095;
        char *p = fn(s, align);
        if (!p || ((uintptr_t)p & (align - 1))) { fprintf(stderr, "bad aligned block %p\n", (void *)p); exit(1); }
        p[0] = 'x'; p[s - 1] = 'y';
        b->v[b->n++] = p;
        got += s;
    }
}
static void *by_posix_memalign(size_t s, size_t a) { void *p; return posix_memalign(&p, a, s) ? NULL : p; }
static void *by_aligned_alloc(size_t s, size_t a) { return aligned_alloc(a, s); }
static void *by_memalign(size_t s, size_t a) { return memalign(a, s); }
static void *by_valloc(size_t s, size_t a) { (void)a; return valloc(s); }
static void *by_pvalloc(size_t s, size_t a) { (void)a; return pvalloc(s); }
NOINL void posix_memalign_site(blocks_t *b) { fill_aligned(b, by_posix_memalign, 64, false); }
NOINL void aligned_alloc_site(blocks_t *b) { fill_aligned(b, by_aligned_alloc, 256, false); }
NOINL void memalign_site(blocks_t *b) { fill_aligned(b, by_memalign, 4096, false); }
NOINL void valloc_site(blocks_t *b) { fill_aligned(b, by_valloc, 4096, false); }
NOINL void pvalloc_site(blocks_t *b) { fill_aligned(b, by_pvalloc, 4096, true); }

static void *free_in_thread(void *p) { free(p); return NULL; }

#define NT 4
static blocks_t kept[NT], freed[NT];
static pthread_barrier_t bar;
static void *worker(void *arg) {
    int i = (int)(long)arg;
    kept[i] = reserve(16 * MIB);
    freed[i] = reserve(16 * MIB);
    kept_site(&kept[i]);
    freed_site(&freed[i]);
    pthread_barrier_wait(&bar);
    drop(&freed[(i + 1) % NT]);   /* another thread's blocks: remote frees */
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "sites") && argc == 3) {
        blocks_t a = reserve(96 * MIB), b = reserve(128 * MIB), c = reserve(160 * MIB);
        site_a(&a); site_b(&b); site_c(&c);
        /* churn that leaves nothing live: must not appear */
        blocks_t t = reserve(64 * MIB);
        fill(&t, 64 * MIB, 't'); drop(&t);
        return dump(argv[2]);
    }
    if (!strcmp(argv[1], "misuse") && argc == 3) {
        /* (a thread's first allocation is never sampled: it draws the first interval) */
        char *volatile first = malloc(100), *volatile p = malloc(100), *volatile q = malloc(100);
        if (malloc_usable_size(p) < 100 || ((uintptr_t)p & 0xffff) != 0) {   /* a sampled page's block */
            fprintf(stderr, "not sampled: %p\n", (void *)p);
            return 3;
        }
        if (!strcmp(argv[2], "double")) { free(p); free(p); }
        else if (!strcmp(argv[2], "inside")) free(p + 16);
        else if (!strcmp(argv[2], "remote_double")) {   /* freed by another thread first */
            pthread_t t;
            pthread_create(&t, NULL, free_in_thread, p);
            pthread_join(t, NULL);
            free(p);
        }
        (void)q; (void)first;
        return 0;   /* not reported */
    }
    if (!strcmp(argv[1], "realloc") && argc == 3) {
        blocks_t g = reserve(16 * MIB);
        blocks_t v = reserve(32 * 1024);
        grow_site(&g);
        realloc_site(&g);
        vec_site(&v);
        return dump(argv[2]);
    }
    if (!strcmp(argv[1], "aligned") && argc == 4) {
        static const struct { const char *name; void (*site)(blocks_t *); } fns[] = {
            { "posix_memalign", posix_memalign_site }, { "aligned_alloc", aligned_alloc_site },
            { "memalign", memalign_site }, { "valloc", valloc_site }, { "pvalloc", pvalloc_site } };
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            if (strcmp(argv[2], fns[i].name)) continue;
            blocks_t b = reserve(64 * MIB);
            fns[i].site(&b);
            int rc = dump(argv[3]);
            drop(&b);   /* the frees of sampled aligned blocks */
            return rc;
        }
        return 2;
    }
    if (!strcmp(argv[1], "cxx") && argc == 3) {   /* operator new is sampled as malloc is */
        op_new = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
        if (!op_new) { fprintf(stderr, "no _Znwm\n"); return 3; }
        blocks_t n = reserve(48 * MIB);
        new_site(&n);
        return dump(argv[2]);
    }
    if (!strcmp(argv[1], "leak")) {
        blocks_t l = reserve(64 * MIB), t = reserve(64 * MIB);
        leak_site(&l);
        site_a(&t); drop(&t);
        return 0;   /* l's blocks leak */
    }
    if (!strcmp(argv[1], "threads") && argc == 3) {
        pthread_t th[NT];
        pthread_barrier_init(&bar, NULL, NT);
        for (long i = 0; i < NT; i++) pthread_create(&th[i], NULL, worker, (void *)i);
        for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
        return dump(argv[2]);
    }
    if (!strcmp(argv[1], "fork") && argc == 3) {
        blocks_t p = reserve(64 * MIB), q = reserve(96 * MIB);
        parent_site(&p);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) {
            drop(&p);
            child_site(&q);
            _exit(dump(argv[2]));
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 1;
        return WEXITSTATUS(st);
    }
    return 2;
}
