/* libc_internal.c -- do libc's own allocations come from hakmem?
 *
 * usage: libc_internal PREFIX
 * Built twice by mk/compat.mk: statically (gcc -static, libhakmem.a as a
 * whole archive) and dynamically (run under LD_PRELOAD).  Each check prints
 * "PASS PREFIX.<check>" or "FAIL PREFIX.<check>: why"; the exit status is 1 if
 * any failed.  hakmem_owns is a weak reference: absent (no hakmem) every
 * ownership check fails, which is the point of the negative control. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hakmem.h"

extern int hakmem_owns(const void *p) __attribute__((weak));
extern int hakmem_stats_get(hakmem_stats_t *out, size_t size) __attribute__((weak));

static const char *prefix;
static int failures;

static void check(const char *name, int ok, const char *why) {
    if (ok) printf("PASS %s.%s\n", prefix, name);
    else { printf("FAIL %s.%s: %s\n", prefix, name, why); failures++; }
}

static int owned(const void *p) { return p && hakmem_owns && hakmem_owns(p) == 1; }

static void check_owned(const char *name, const void *p) {
    char why[160];
    snprintf(why, sizeof why, "pointer %p %s", p,
             !hakmem_owns ? "(hakmem_owns not linked: hakmem absent)" : "is not owned by hakmem");
    check(name, owned(p), why);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void *thread_main(void *arg) {
    (void)arg;
    char *s = strdup("from a thread");
    void *r = (void *)(intptr_t)owned(s);
    free(s);
    return r;
}

int main(int argc, char **argv) {
    prefix = argc > 1 ? argv[1] : "libc_internal";
    char tmpl[] = "/tmp/hakmem-libc-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) { perror("mkstemp"); return 2; }
    const char text[] = "first line of the file\nsecond, a little longer line\nthird\n";
    if (write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1)) { perror("write"); return 2; }
    close(fd);

    void *m = malloc(100);
    check_owned("malloc", m);
    free(m);

    char *s = strdup("hello, hakmem");
    check_owned("strdup", s);
    check("strdup_content", s && strcmp(s, "hello, hakmem") == 0, "wrong copy");
    free(s);
    s = strndup("truncate me please", 8);
    check_owned("strndup", s);
    free(s);

    FILE *f = fopen(tmpl, "r");
    if (!f) { perror("fopen"); return 2; }
    check_owned("fopen_FILE", f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    check_owned("getline", line);
    check("getline_content", n == 23 && strcmp(line, "first line of the file\n") == 0, "wrong line");
    /* glibc allocates a FILE's buffer with malloc on first read */
    check_owned("stdio_buffer", f->_IO_buf_base);
    char *d = NULL;
    cap = 0;
    n = getdelim(&d, &cap, ',', f);
    check_owned("getdelim", d);
    check("getdelim_content", n == 7 && strcmp(d, "second,") == 0, "wrong field");
    free(d);
    free(line);
    fclose(f);
    unlink(tmpl);

    char *a = NULL;
    int an = asprintf(&a, "%s-%d-%0*d", "asprintf", 42, 300, 7);   /* 300+ chars: grows the buffer */
    check_owned("asprintf", a);
    check("asprintf_content", an == 312 && a && strncmp(a, "asprintf-42-000", 15) == 0, "wrong text");
    free(a);

    char *ms = NULL;
    size_t msize = 0;
    FILE *mf = open_memstream(&ms, &msize);
    if (!mf) { perror("open_memstream"); return 2; }
    for (int i = 0; i < 10000; i++) fprintf(mf, "%d,", i);
    fclose(mf);
    check_owned("open_memstream", ms);
    check("open_memstream_content", msize == 48890 && ms && strncmp(ms, "0,1,2,", 6) == 0, "wrong size");
    free(ms);

    /* qsort of 2M elements (16 MiB) takes its temporary buffer from malloc
     * (glibc's merge sort; true of 2.36 here -- a libc whose qsort sorts in
     * place would make this check fail without any fault in hakmem):
     * with hakmem that is a huge block, visible in the huge-block peak. */
    size_t count = (size_t)2 << 20;
    uint64_t *v = malloc(count * sizeof *v);
    if (!v) return 2;
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < count; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; v[i] = x; }
    hakmem_stats_t before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    if (hakmem_stats_get) hakmem_stats_get(&before, sizeof before);
    qsort(v, count, sizeof *v, cmp_u64);
    if (hakmem_stats_get) hakmem_stats_get(&after, sizeof after);
    int sorted = 1;
    for (size_t i = 1; i < count; i++) if (v[i - 1] > v[i]) sorted = 0;
    check("qsort_sorted", sorted, "array not sorted");
    check("qsort_buffer", hakmem_stats_get && (after.mmap_calls > before.mmap_calls ||
                                               after.huge_peak > before.huge_peak ||
                                               after.bytes_mapped_peak > before.bytes_mapped_peak),
          "qsort's 16 MiB temporary buffer did not come from hakmem (no new hakmem mapping)");
    free(v);

    pthread_t t;
    void *r = NULL;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, &r) != 0) return 2;
    check("thread_strdup", r == (void *)1, "strdup in a second thread not served by hakmem");

    printf("%s: %d failure(s)\n", prefix, failures);
    return failures ? 1 : 0;
}
