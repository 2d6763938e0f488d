/* fuzz_replay.c -- runs inputs of hakmem's fuzzer (fuzz_ops.h) without
 * libFuzzer: the committed corpus under the sanitizer builds and under
 * LD_PRELOAD, and reproducers.
 *
 * usage: fuzz_replay [-p NAME] [--expect-hakmem] [--trace] [--repeat N]
 *                    [--random N] [--seed S] [--max-len L] [--dump DIR] PATH...
 *   PATH         an input file, or a directory: every regular file in it
 *                (sorted by name)
 *   --random N   also N pseudo-random inputs (xorshift from --seed, default
 *                1; lengths up to --max-len, default 1024); the failing one
 *                can be rerun with --random-only I (same --seed, --max-len)
 *   --dump DIR   write each random input to DIR before running it
 *   --repeat N   run the whole list N times (default 1)
 *   --trace      print every operation
 * Prints "PASS NAME" (-p) when everything ran; a mismatch prints "fuzz: FAIL
 * ..." and aborts.  FZ_CRASH_FILE=path keeps the failing input there. */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz_ops.h"
#include "../testutil.h"

static unsigned long n_files, n_random;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: cannot open %s\n", path);
        exit(2);
    }
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    fz_set_input_name(path);
    fz_run(buf, n);
    n_files++;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz_replay: no such file %s\n", path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        run_file(path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
        exit(2);
    }
    static char names[4096][512];
    static char *sorted[4096];
    size_t k = 0;
    struct dirent *e;
    while ((e = readdir(d)) && k < 4096) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(names[k], sizeof names[k], "%s/%s", path, e->d_name);
        struct stat fs;
        if (stat(names[k], &fs) == 0 && S_ISREG(fs.st_mode))
            sorted[k] = names[k], k++;
    }
    closedir(d);
    qsort(sorted, k, sizeof sorted[0], name_cmp);
    for (size_t i = 0; i < k; i++)
        run_file(sorted[i]);
}

int main(int argc, char **argv)
{
    const char *prefix = NULL, *dump = NULL;
    int expect = 0, trace = 0;
    long repeat = 1, random_n = 0, random_only = -1, max_len = 1024;
    unsigned long long seed = 1;
    char **paths = argv;   /* the paths, gathered in place: nothing is allocated before fz_init */
    int npaths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-p") && i + 1 < argc) prefix = argv[++i];
        else if (!strcmp(a, "--expect-hakmem")) expect = 1;
        else if (!strcmp(a, "--trace")) trace = 1;
        else if (!strcmp(a, "--repeat") && i + 1 < argc) repeat = atol(argv[++i]);
        else if (!strcmp(a, "--random") && i + 1 < argc) random_n = atol(argv[++i]);
        else if (!strcmp(a, "--random-only") && i + 1 < argc) random_only = atol(argv[++i]);
        else if (!strcmp(a, "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--max-len") && i + 1 < argc) max_len = atol(argv[++i]);
        else if (!strcmp(a, "--dump") && i + 1 < argc) dump = argv[++i];
        else if (a[0] == '-') {
            fprintf(stderr, "usage: %s [-p NAME] [--expect-hakmem] [--trace] [--repeat N] [--random N] "
                            "[--random-only I] [--seed S] [--max-len L] [--dump DIR] PATH...\n", argv[0]);
            return 2;
        } else paths[npaths++] = argv[i];
    }
    if (max_len < 1) max_len = 1;
    if (random_only >= 0 && random_n <= random_only) random_n = random_only + 1;
    fz_init();
    fz_report_aborts();
    fz_set_trace(trace);
    if (expect && !fz_hakmem_serves()) {
        printf("FAIL %s: hakmem does not serve the allocations (hakmem_owns missing or 0)\n",
               prefix ? prefix : "fuzz_replay");
        return 1;
    }
    double t0 = now();
    for (long r = 0; r < repeat; r++) {
        for (int i = 0; i < npaths; i++)
            run_path(paths[i]);
        uint64_t s = seed ? seed : 1;
        static uint8_t buf[1 << 16];
        size_t cap = (size_t)max_len < sizeof buf ? (size_t)max_len : sizeof buf;
        for (long i = 0; i < random_n; i++) {
            size_t len = 1 + rnd(&s) % cap;
            for (size_t j = 0; j < len; j += 8) {
                uint64_t w = rnd(&s);
                memcpy(buf + j, &w, len - j < 8 ? len - j : 8);
            }
            if (random_only >= 0 && i != random_only)
                continue;
            char name[128];
            snprintf(name, sizeof name, "random #%ld (--seed %llu --max-len %ld)", i, seed, max_len);
            if (dump) {
                char path[4096];
                snprintf(path, sizeof path, "%s/random-%ld", dump, i);
                FILE *f = fopen(path, "wb");
                if (f) {
                    fwrite(buf, 1, len, f);
                    fclose(f);
                }
            }
            fz_set_input_name(name);
            fz_run(buf, len);
            n_random++;
        }
    }
    fprintf(stderr, "fuzz_replay: %lu inputs (%lu files, %lu random) in %.1f s\n", n_files + n_random,
            n_files, n_random, now() - t0);
    fz_print_counts();
    if (prefix)
        printf("PASS %s\n", prefix);
    return 0;
}
