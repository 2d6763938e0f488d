/* thp.c -- allocate, verify and release memory under the current transparent
 * huge page mode (the suite switches /sys/kernel/mm/transparent_hugepage/
 * enabled to always and madvise when it can).
 *
 * usage: thp PREFIX
 * Checks: data (small, large, huge and 2 MiB-aligned blocks -- the last one
 * madvise(MADV_HUGEPAGE)'d by the program, as some applications do -- keep
 * their contents through a realloc growth), released (after free +
 * malloc_trim(0) the resident set falls back by at least 3/4 of what the
 * allocations added: huge pages must not pin freed memory).  Prints the
 * AnonHugePages seen at the peak as a comment line. */
#define _GNU_SOURCE 1
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
static const char *prefix;
static int failures;

static void result(const char *name, int ok, const char *why) {
    if (ok) printf("PASS %s.%s\n", prefix, name);
    else { printf("FAIL %s.%s: %s\n", prefix, name, why); failures++; }
}

static size_t rss(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (f) { if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0; fclose(f); }
    return res * (size_t)sysconf(_SC_PAGESIZE);
}

static long anon_huge_kb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 512) p[i] = (unsigned char)(seed + i / 512);
}
static int same(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 512) if (p[i] != (unsigned char)(seed + i / 512)) return 0;
    return 1;
}

#define NSMALL ((48 * MiB) / 96)
#define NLARGE 192
#define NHUGE 4
static unsigned char *small[NSMALL], *large[NLARGE], *huge[NHUGE];

int main(int argc, char **argv) {
    prefix = argc > 1 ? argv[1] : "thp";
    setvbuf(stdout, NULL, _IOLBF, 0);
    malloc_trim(0);
    size_t base = rss();
    for (size_t i = 0; i < NSMALL; i++) { small[i] = malloc(96); if (!small[i]) return 2; memset(small[i], (int)i, 96); }
    for (int i = 0; i < NLARGE; i++) { large[i] = malloc(256 * 1024); if (!large[i]) return 2; fill(large[i], 256 * 1024, i); }
    for (int i = 0; i < NHUGE; i++) { huge[i] = malloc(12 * MiB); if (!huge[i]) return 2; fill(huge[i], 12 * MiB, 100 + i); }
    unsigned char *hp = aligned_alloc(2 * MiB, 16 * MiB);
    if (!hp) return 2;
    int adv = madvise(hp, 16 * MiB, MADV_HUGEPAGE);
    fill(hp, 16 * MiB, 7);
    /* grow two huge blocks (mremap or copy) */
    for (int i = 0; i < 2; i++) { huge[i] = realloc(huge[i], 20 * MiB); if (!huge[i]) return 2; }
    size_t peak = rss();
    printf("# %s: THP AnonHugePages at peak %ld kB, madvise(MADV_HUGEPAGE) %s, rss %zu -> %zu MiB\n",
           prefix, anon_huge_kb(), adv == 0 ? "ok" : "failed", base / MiB, peak / MiB);

    int ok = 1;
    for (size_t i = 0; i < NSMALL; i++) if (small[i][0] != (unsigned char)i || small[i][95] != (unsigned char)i) ok = 0;
    for (int i = 0; i < NLARGE; i++) if (!same(large[i], 256 * 1024, i)) ok = 0;
    for (int i = 0; i < NHUGE; i++) if (!same(huge[i], 12 * MiB, 100 + i)) ok = 0;
    if (!same(hp, 16 * MiB, 7) || ((uintptr_t)hp & (2 * MiB - 1))) ok = 0;
    result("data", ok, "block contents changed (or 2 MiB alignment lost)");

    for (size_t i = 0; i < NSMALL; i++) free(small[i]);
    for (int i = 0; i < NLARGE; i++) free(large[i]);
    for (int i = 0; i < NHUGE; i++) free(huge[i]);
    free(hp);
    malloc_trim(0);
    size_t after = rss();
    char why[200];
    snprintf(why, sizeof why, "rss %zu MiB before, %zu MiB at peak, %zu MiB after free + malloc_trim(0)",
             base / MiB, peak / MiB, after / MiB);
    int released = peak > base + 100 * MiB && after < base + (peak - base) / 4;
    result("released", released, why);
    return failures ? 1 : 0;
}
