/* test_memcheck.c -- the hardened build's checked copies (src/hak_memcheck.c;
 * docs/security.md, "The hardened build").
 *   test_memcheck [-p PREFIX]   correct copies, none reported: exact block
 *                               sizes, offsets inside blocks, aligned,
 *                               realloc'd, huge and other threads' blocks,
 *                               a public heap's blocks,
 *                               overlapping memmove, the stack, globals,
 *                               mmap'd memory (run under every build)
 *   test_memcheck CASE          one bad copy (tests/suite_hardened.sh): the
 *                               hardened build reports it and aborts; the
 *                               others run on and print SURVIVED
 * Every copy is called through a volatile pointer, so that the compiler
 * neither inlines nor folds it: the library's symbol runs.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <wchar.h>
#include "check.h"

static void *(*volatile f_memcpy)(void *, const void *, size_t) = memcpy;
static void *(*volatile f_memmove)(void *, const void *, size_t) = memmove;
static void *(*volatile f_memset)(void *, int, size_t) = memset;
static void *(*volatile f_mempcpy)(void *, const void *, size_t) = mempcpy;
static char *(*volatile f_strcpy)(char *, const char *) = strcpy;
static char *(*volatile f_stpcpy)(char *, const char *) = stpcpy;
static char *(*volatile f_strncpy)(char *, const char *, size_t) = strncpy;
static char *(*volatile f_strcat)(char *, const char *) = strcat;
static char *(*volatile f_strncat)(char *, const char *, size_t) = strncat;

#define SRC_MAX ((size_t)5 << 20)
static char *src;            /* SRC_MAX bytes of 'a', then a NUL */
static char global[8192];

static const size_t sizes[] = { 1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 100, 255, 256, 1000,
                                1024, 4095, 4096, 4097, 16384, 65535, 65536, 65537, 131072, 262144,
                                (size_t)1 << 20, ((size_t)1 << 20) + 1, (size_t)4 << 20 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* every copy into [p, p + n), whole and at offsets: all must run */
static void copies_into(char *p, size_t n) {
    CHECK(f_memcpy(p, src, n) == p);
    CHECK(f_memset(p, 0, n) == p);
    CHECK(f_mempcpy(p, src, n) == p + n);
    f_memcpy(p + n - 1, src, 1);                 /* the last byte */
    f_memset(p + n / 2, 'b', n - n / 2);         /* from the middle to the end */
    f_memmove(p + n / 3, p, n - n / 3);          /* overlapping, up */
    f_memmove(p, p + n / 3, n - n / 3);          /* overlapping, down */
    f_memcpy(p + n, src, 0);                     /* nothing, at the end */
    f_memset(p, 0, 0);
    /* strings: n - 1 characters and the NUL fill the block */
    char c = src[n - 1];
    src[n - 1] = 0;
    CHECK(f_strcpy(p, src) == p);
    CHECK(f_stpcpy(p, src) == p + n - 1);
    CHECK(f_strncpy(p, "xyz", n) == p);          /* writes n bytes, NUL-padded */
    CHECK(n < 3 || p[2] == (n > 2 ? 'z' : 0));
    CHECK(p[n - 1] == 0 || n <= 3);
    src[n - 1] = c;
    p[0] = 0;
    f_strcat(p, "");
    if (n >= 2) {
        p[0] = 0;
        c = src[n / 2];
        src[n / 2] = 0;
        f_strcat(p, src);                        /* n/2 characters */
        src[n / 2] = c;
        f_strncat(p, src, n - 1 - n / 2);        /* to n - 1 characters and the NUL */
        CHECKF(strlen(p) == n - 1, "strlen %zu, want %zu", strlen(p), n - 1);
    }
}

static void test_exact_sizes(void) {
    for (size_t i = 0; i < NSIZES; i++) {
        char *p = malloc(sizes[i]);
        CHECK(p != NULL);
        if (!p) continue;
        copies_into(p, sizes[i]);
        free(p);
    }
}

/* blocks next to each other: copies filling each one, in the middle of a
 * page of live neighbours */
static void test_neighbours(void) {
    enum { N = 64 };
    for (size_t i = 0; i < NSIZES && sizes[i] <= 65536; i++) {
        char *v[N];
        for (int j = 0; j < N; j++) v[j] = malloc(sizes[i]);
        for (int j = 0; j < N; j++) f_memset(v[j], j, sizes[i]);
        for (int j = 0; j < N; j++) CHECK((unsigned char)v[j][sizes[i] - 1] == (unsigned char)j);
        for (int j = 1; j < N; j++) f_memcpy(v[j], v[j - 1], sizes[i]);
        for (int j = 0; j < N; j++) free(v[j]);
    }
}

static void test_usable_size(void) {
    for (size_t i = 0; i < NSIZES; i++) {
        char *p = malloc(sizes[i]);
        size_t u = malloc_usable_size(p);
        CHECK(u >= sizes[i]);
        f_memset(p, 1, u);
        free(p);
    }
}

static void test_calloc_realloc(void) {
    for (size_t i = 0; i + 1 < NSIZES; i++) {
        char *p = calloc(1, sizes[i]);
        f_memset(p, 1, sizes[i]);
        p = realloc(p, sizes[i + 1]);            /* grown */
        f_memset(p, 2, sizes[i + 1]);
        p = realloc(p, sizes[i] / 2 + 1);        /* shrunk */
        f_memset(p, 3, sizes[i] / 2 + 1);
        free(p);
    }
}

static void test_aligned(void) {
    static const size_t aligns[] = { 16, 32, 64, 256, 4096, 65536, (size_t)1 << 22 };
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
        for (size_t i = 0; i < NSIZES; i += 3) {
            void *p = NULL;
            CHECK(posix_memalign(&p, aligns[a], sizes[i]) == 0);
            if (!p) continue;
            copies_into(p, sizes[i]);
            free(p);
            p = aligned_alloc(aligns[a], (sizes[i] + aligns[a] - 1) / aligns[a] * aligns[a]);
            CHECK(p != NULL);
            f_memset(p, 4, (sizes[i] + aligns[a] - 1) / aligns[a] * aligns[a]);
            free(p);
        }
}

static void *other_alloc(void *arg) {
    return malloc((size_t)(uintptr_t)arg);
}

/* a block another thread allocated (and whose heap is gone) */
static void test_other_thread(void) {
    for (size_t i = 0; i < NSIZES; i += 2) {
        pthread_t t;
        void *p = NULL;
        CHECK(pthread_create(&t, NULL, other_alloc, (void *)(uintptr_t)sizes[i]) == 0);
        pthread_join(t, &p);
        CHECK(p != NULL);
        if (p) copies_into(p, sizes[i]);
        free(p);
    }
}

/* memory not from malloc: never checked against a block */
static void test_not_heap(void) {
    char stack[4096];
    copies_into(stack, sizeof stack);
    copies_into(global, sizeof global);
    size_t len = ((size_t)4 << 20) + 8192;   /* (at most SRC_MAX a copy) */
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m != MAP_FAILED) {
        copies_into(m, 4096);
        copies_into(m + 4096, len - 4096);
        munmap(m, len);
    }
}

/* a public heap's blocks (hakmem_heap_malloc: no trailer in the hardened
 * build), in memory that held freed blocks of the default heap before */
static void test_public_heap(void) {
    void *(*heap_new)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "hakmem_heap_new");
    void *(*heap_malloc)(void *, size_t) = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_heap_malloc");
    void (*heap_destroy)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "hakmem_heap_destroy");
    if (!heap_new || !heap_malloc || !heap_destroy) SKIP_TEST("no hakmem_heap_* (not hakmem)");
    for (int round = 0; round < 2; round++) {
        enum { N = 2000 };
        static void *v[N];
        for (int i = 0; i < N; i++) v[i] = malloc(sizes[i % 12]);
        for (int i = 0; i < N; i++) free(v[i]);
        void *h = heap_new();
        CHECK(h != NULL);
        if (!h) return;
        for (size_t i = 0; i < NSIZES; i++) {
            char *p = heap_malloc(h, sizes[i]);
            CHECK(p != NULL);
            if (p) copies_into(p, sizes[i]);
        }
        for (int i = 0; i < N; i++) {
            char *p = heap_malloc(h, sizes[i % 12]);
            if (p) f_memset(p, 7, sizes[i % 12]);
        }
        heap_destroy(h);
    }
}

/* malloc(0): a block of no bytes, and copies of none */
static void test_zero_size(void) {
    char *p = malloc(0);
    f_memcpy(p, src, 0);
    f_memset(p, 0, 0);
    free(p);
}

static char *volatile g_block;
static void on_abort(int sig) {
    const char *m = g_block[48] == 'x' ? "WRITTEN\n" : "UNWRITTEN\n";
    ssize_t r = write(1, m, strlen(m));
    (void)r;
    signal(SIGABRT, SIG_DFL);
    raise(SIGABRT);
}

/* one bad copy; SURVIVED when it ran */
static int misuse(const char *c) {
    char *p = malloc(48), *h = malloc((size_t)4 << 20), *q;
    void *a = NULL;
    if (!p || !h || posix_memalign(&a, 64, 100)) return 2;
    src[0] = 0;                                  /* src: "" then 'a's */
    if (!strcmp(c, "memcpy_over")) f_memcpy(p, src + 1, 49);
    else if (!strcmp(c, "memcpy_past")) f_memcpy(p + 48, src + 1, 1);
    else if (!strcmp(c, "memcpy_under")) {
        q = malloc(48);                          /* p's neighbour, maybe: a block on either side */
        f_memcpy(q - 1, src + 1, 1);
    }
    else if (!strcmp(c, "memmove_over")) f_memmove(p + 40, p, 9);
    else if (!strcmp(c, "memset_over")) f_memset(p, 0, 64);
    else if (!strcmp(c, "mempcpy_over")) f_mempcpy(p + 1, src + 1, 48);
    else if (!strcmp(c, "strcpy_over")) { src[49] = 0; f_strcpy(p, src + 1); }        /* 48 characters */
    else if (!strcmp(c, "stpcpy_over")) { src[49] = 0; f_stpcpy(p, src + 1); }
    else if (!strcmp(c, "strncpy_over")) f_strncpy(p, "short", 49);
    else if (!strcmp(c, "strcat_over")) { src[41] = 0; f_strcpy(p, "12345678"); f_strcat(p, src + 1); }
    else if (!strcmp(c, "strncat_over")) { f_strcpy(p, "12345678"); f_strncat(p, src + 1, 40); }
    else if (!strcmp(c, "huge_over")) f_memset(h + ((size_t)4 << 20) - 8, 0, 9);
    else if (!strcmp(c, "aligned_over")) f_memset(a, 0, 4096);
    else if (!strcmp(c, "freed")) { free(p); f_memset(p, 0, 8); }
    else if (!strcmp(c, "before_write")) {
        /* the report comes before the write: at the abort, the byte past
         * the block has not become 'x' */
        g_block = p;
        signal(SIGABRT, on_abort);
        f_memset(p, 'x', 49);
    }
    else { fprintf(stderr, "unknown case %s\n", c); return 2; }
    printf("SURVIVED\n");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    src = malloc(SRC_MAX + 1);
    if (!src) return 2;
    memset(src, 'a', SRC_MAX);
    src[SRC_MAX] = 0;
    if (argc == 2 && argv[1][0] != '-') return misuse(argv[1]);
    if (chk_parse_options(argc, argv)) return 2;
    RUN_TEST(exact_sizes);
    RUN_TEST(neighbours);
    RUN_TEST(usable_size);
    RUN_TEST(calloc_realloc);
    RUN_TEST(aligned);
    RUN_TEST(other_thread);
    RUN_TEST(not_heap);
    RUN_TEST(public_heap);
    RUN_TEST(zero_size);
    return check_exit_code();
}
