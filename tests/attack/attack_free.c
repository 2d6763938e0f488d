/* attack_free.c -- double frees and frees (reallocs, malloc_usable_size) of
 * pointers the allocator never returned.
 *   attack_free CASE SIZE
 * Caught: the program stops before "SURVIVED" (cases.tsv).
 */
#include <alloca.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include "attack.h"

#define GIB ((size_t)1 << 30)

static char global_buf[4096];

static void *free_in_thread(void *p)
{
    free(p);
    return NULL;
}

/* after the misuse: allocations and frees of the same size */
static void churn(size_t n)
{
    void *q[16];
    for (int i = 0; i < 16; i++)
        q[i] = malloc(n);
    for (int i = 0; i < 16; i++)
        free(q[i]);
}

static char *block(size_t n)
{
    char *p = malloc(n);
    if (!p)
        attack_setup_failed("malloc");
    memset(p, 1, n);
    return p;
}

static void double_free(const char *c, size_t n)
{
    char *p = block(n);
    if (!strcmp(c, "immediate")) {
        free(p);
        free(p);
    } else if (!strcmp(c, "interleaved")) {     /* a, b, a */
        char *b = block(n);
        free(p);
        free(b);
        free(p);
    } else if (!strcmp(c, "delayed")) {         /* other sizes in between */
        free(p);
        for (int i = 0; i < 100; i++) {
            free(malloc(24));
            free(malloc(n * 2 + 64));
        }
        free(p);
    } else if (!strcmp(c, "thread")) {          /* freed by another thread first */
        pthread_t t;
        if (pthread_create(&t, NULL, free_in_thread, p) || pthread_join(t, NULL))
            attack_setup_failed("thread");
        free(p);
    } else if (!strcmp(c, "realloc")) {         /* realloc of a freed block */
        free(p);
        p = realloc(p, n * 2);
        attack_keep(p);
    } else {
        attack_setup_failed("unknown double_free case");
    }
    churn(n);
}

static void invalid_free(const char *c, size_t n)
{
    char *p = block(n);
    char *bad;
    if (!strcmp(c, "stack")) {
        char vla[n];
        memset(vla, 2, n);
        attack_keep(vla);
        free(vla);
        churn(n);
        return;
    } else if (!strcmp(c, "alloca")) {
        bad = alloca(n);
        memset(bad, 2, n);
    } else if (!strcmp(c, "unaligned")) {
        bad = p + 1;
    } else if (!strcmp(c, "far")) {             /* 1 GiB past a block */
        bad = p + GIB;
    } else if (!strcmp(c, "before")) {          /* 16 bytes before a block */
        bad = p - 16;
    } else if (!strcmp(c, "inside")) {          /* in the middle of a block */
        bad = p + n / 2;
    } else if (!strcmp(c, "end")) {             /* just past the requested size */
        bad = p + n;
    } else {
        attack_setup_failed("unknown invalid_free case");
        return;
    }
    attack_keep(bad);
    free(bad);
    churn(n);
    free(p);
}

/* cases of no size: wild pointers, static data, foreign mappings */
static void invalid_other(const char *c)
{
    char *p = block(16);
    if (!strcmp(c, "free_wild")) {              /* an uninitialized pointer */
        free((void *)1);
    } else if (!strcmp(c, "free_global")) {
        free(global_buf + 64);
    } else if (!strcmp(c, "free_mmap_rw") || !strcmp(c, "free_mmap_none")) {
        int prot = strcmp(c, "free_mmap_rw") ? PROT_NONE : PROT_READ | PROT_WRITE;
        char *m = mmap(NULL, 16 * 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            attack_setup_failed("mmap");
        free(m + 8 * 4096);
    } else if (!strcmp(c, "realloc_wild")) {
        attack_keep(realloc((void *)1, 16));
    } else if (!strcmp(c, "realloc_stack")) {
        char buf[64];
        memset(buf, 3, sizeof buf);
        attack_keep(buf);
        attack_keep(realloc(buf, 128));
    } else if (!strcmp(c, "realloc_inside")) {
        char *q = block(4096);
        attack_keep(realloc(q + 2048, 8192));
    } else if (!strcmp(c, "usable_wild")) {
        attack_keep((void *)malloc_usable_size((void *)1));
    } else if (!strcmp(c, "usable_far")) {      /* 16 KiB past a small block */
        attack_keep((void *)malloc_usable_size(p + 16 * 1024));
    } else if (!strcmp(c, "usable_unaligned")) {
        attack_keep((void *)malloc_usable_size(p + 1));
    } else {
        attack_setup_failed("unknown invalid_other case");
    }
    churn(16);
}

int main(int argc, char **argv)
{
    attack_begin();
    if (argc < 3)
        attack_setup_failed("usage: attack_free double_free|invalid_free|invalid_other CASE [SIZE]");
    if (!strcmp(argv[1], "double_free"))
        double_free(argv[2], attack_size_arg(argc, argv, 3));
    else if (!strcmp(argv[1], "invalid_free"))
        invalid_free(argv[2], attack_size_arg(argc, argv, 3));
    else if (!strcmp(argv[1], "invalid_other"))
        invalid_other(argv[2]);
    else
        attack_setup_failed("unknown family");
    attack_survived();
}
