/* oom.c -- running out of address space (run under `ulimit -v`).
 *
 * usage: oom PREFIX LIMIT_MIB
 * Every allocation function must return NULL / ENOMEM, never crash, and the
 * process must recover once memory is freed.  Checks:
 *   too_large        malloc, calloc, realloc, aligned_alloc, posix_memalign of
 *                    2 x LIMIT: failure with ENOMEM; realloc keeps the block
 *   exhaust_SIZE     malloc(SIZE) until NULL (errno ENOMEM) for small, medium,
 *                    large and huge sizes; then free everything
 *   recovered        after each exhaustion a big block fits again
 * stdout uses a static buffer so that printing needs no malloc. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <malloc.h>
#include <string.h>

static const char *prefix;
static int failures;
static char outbuf[1 << 16];

static void result(const char *name, int ok, const char *why) {
    if (ok) printf("PASS %s.%s\n", prefix, name);
    else { printf("FAIL %s.%s: %s\n", prefix, name, why); failures++; }
    fflush(stdout);
}

#define MiB ((size_t)1 << 20)
static size_t limit;

static void too_large(void) {
    size_t big = 2 * limit;
    char why[256] = "";
    int ok = 1;
#define EXPECT_NULL(expr, what) do { errno = 0; void *q_ = (expr); int e_ = errno; \
        if (q_ || e_ != ENOMEM) { ok = 0; snprintf(why + strlen(why), sizeof why - strlen(why), \
            "%s -> %p errno %d; ", what, q_, e_); free(q_); } } while (0)
    EXPECT_NULL(malloc(big), "malloc");
    EXPECT_NULL(calloc(1, big), "calloc");
    EXPECT_NULL(calloc(big / 16, 16), "calloc(n,16)");
    EXPECT_NULL(aligned_alloc(4096, big), "aligned_alloc");
    EXPECT_NULL(malloc(SIZE_MAX / 2), "malloc(SIZE_MAX/2)");
    char *p = malloc(1000);
    if (!p) { result("too_large", 0, "malloc(1000) failed"); return; }
    memset(p, 0x42, 1000);
    EXPECT_NULL(realloc(p, big), "realloc");
    if (p[999] != 0x42) { ok = 0; strcat(why, "realloc failure damaged the block; "); }
    free(p);
    void *a = NULL;
    int rc = posix_memalign(&a, 64, big);
    if (rc != ENOMEM || a) { ok = 0; snprintf(why + strlen(why), sizeof why - strlen(why), "posix_memalign %d", rc); }
    result("too_large", ok, why);
}

static void exhaust(const char *name, size_t size) {
    size_t cap = 2 * limit / size + 16;           /* cannot all fit: the limit must bite */
    void **v = calloc(cap, sizeof *v);
    char why[200];
    if (!v) { result(name, 0, "calloc of the pointer table failed"); return; }
    size_t n = 0;
    int e = 0;
    for (; n < cap; n++) {
        errno = 0;
        v[n] = malloc(size);
        if (!v[n]) { e = errno; break; }
        ((char *)v[n])[0] = (char)n;                 /* touch: first byte of each block */
        ((char *)v[n])[size - 1] = (char)n;
    }
    int ok = n < cap && e == ENOMEM && n * size >= limit / 4;
    snprintf(why, sizeof why, "%zu x %zu bytes allocated (%zu MiB), last malloc %s, errno %d",
             n, size, n * size / MiB, n < cap ? "NULL" : "never failed", e);
    int intact = 1;
    for (size_t i = 0; i < n; i++) {
        if (((char *)v[i])[0] != (char)i || ((char *)v[i])[size - 1] != (char)i) intact = 0;
        free(v[i]);
    }
    if (!intact) { ok = 0; strcat(why, "; blocks corrupted"); }
    free(v);
    result(name, ok, why);

    /* recovered: a block of a quarter of the limit fits again */
    char rname[64];
    snprintf(rname, sizeof rname, "%s_recovered", name);
    malloc_trim(0);
    void *b = malloc(limit / 4);
    if (b) memset(b, 1, limit / 4);
    snprintf(why, sizeof why, "malloc(%zu MiB) after freeing everything: errno %d", limit / 4 / MiB, errno);
    result(rname, b != NULL, why);
    free(b);
}

int main(int argc, char **argv) {
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    prefix = argc > 1 ? argv[1] : "oom";
    limit = (argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 200) * MiB;
    too_large();
    exhaust("exhaust_small", 200);
    exhaust("exhaust_medium", 20000);
    exhaust("exhaust_large", 300000);
    exhaust("exhaust_huge", 9 * MiB);
    exhaust("exhaust_small_again", 64);
    return failures ? 1 : 0;
}
