/* test_os.c -- the platform layer against glibc's behaviour and the region
 * map's limits (tests/suite_os.sh).
 *
 * usage: test_os [-p PREFIX] [-t TEST] [--expect-hakmem | --expect-glibc]
 *        test_os --canary
 *        test_os_lowmap [-p PREFIX] [-t TEST] --lowmap   (tests/os.mk builds)
 *
 * Default: glibc 2.36's rules, run against whatever malloc the process has
 * (glibc itself proves the tests sound):
 *   memalign_rounds    memalign and aligned_alloc round an alignment that is
 *                      not a power of two up (<= 16: like malloc); beyond
 *                      SIZE_MAX/2+1: EINVAL
 *   posix_memalign_rules  posix_memalign keeps EINVAL for those
 *   overcommit         malloc, calloc, realloc (small and huge blocks) and the
 *                      aligned family of more than RAM+swap fail with ENOMEM
 *                      as the kernel's overcommit policy says, and the
 *                      program goes on (skipped when overcommit_memory is 1)
 * --canary: print the stack canary's bits 8..19 and bits 30..41 of the
 * address of a malloc'd block (the suite compares them over many runs).
 * --lowmap: only in the builds of tests/os.mk, where hakmem is compiled in
 * with HAK_TEST_ADDRESS_BITS=HAK_TEST_LOWMAP (a region map of 1 TiB): every
 * allocation must return NULL with ENOMEM or memory the map describes, and
 * the map is never written past its end.  Each case runs in a child process.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pattern.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define GiB ((size_t)1024 * 1024 * 1024)
#define ALIGNED(p, a) (((uintptr_t)(p) & ((a) - 1)) == 0)

static hak_owns_fn_t owns;          /* NULL unless hakmem is the allocator */

static inline int intact(const char *p, size_t n, int c)
{
    for (size_t i = 0; i < n; i += 4093)
        if (p[i] != (char)c)
            return 0;
    return p[n - 1] == (char)c;
}

static void test_served(void)
{
    if (chk_expect_hakmem < 0)
        SKIP_TEST("no --expect-hakmem/--expect-glibc given");
    if (chk_expect_hakmem)
        CHECKF(owns != NULL, "hakmem_owns not found: the allocator in use is not hakmem");
    else
        CHECKF(owns == NULL, "hakmem_owns present although the glibc baseline was expected");
}

/* ---- memalign and aligned_alloc: glibc 2.36 ---- */

/* volatile: the compiler must not reason about these sizes */
static volatile size_t v_size_max = SIZE_MAX;

static void check_block(const char *fn, size_t a, size_t s, void *p, int e, size_t want_align)
{
    CHECKF(p != NULL, "%s(%zu, %zu) = NULL errno %d, want a block", fn, a, s, e);
    if (!p)
        return;
    CHECKF(ALIGNED(p, want_align), "%s(%zu, %zu) = %p, not aligned to %zu", fn, a, s, p,
           want_align);
    CHECKF(malloc_usable_size(p) >= s, "%s(%zu, %zu): usable %zu", fn, a, s,
           malloc_usable_size(p));
    CHECKF(!owns || owns(p) == 1, "%s(%zu, %zu) = %p not hakmem's", fn, a, s, p);
    memset(p, 0x6b, s);
}

static void test_memalign_rounds(void)
{
    /* <= 16: malloc's alignment; else the next power of two */
    static const size_t aligns[] = {0, 1, 2, 3, 8, 15, 16, 17, 24, 31, 33, 48, 100, 4095, 4097,
                                    3 * 4096, 100000, 3 * MiB + 1, 5 * MiB};
    static const size_t sizes[] = {0, 1, 64, 5000, 300 * KiB, 3 * MiB};
    for (int fn = 0; fn < 2; fn++) {
        const char *name = fn ? "aligned_alloc" : "memalign";
        for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
            size_t a = aligns[i], want = 16;
            while (want < a)
                want *= 2;
            for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
                size_t s = sizes[j];
                errno = 0;
                void *p = fn ? aligned_alloc(a, s) : memalign(a, s);
                check_block(name, a, s, p, errno, want);
                free(p);
            }
        }
        /* alignments no power of two of size_t reaches: EINVAL; 2^63 (or
         * rounded up to it): no room, ENOMEM */
        static const size_t einval[] = {((size_t)1 << 63) + 1, ((size_t)1 << 63) + 4096,
                                        SIZE_MAX - 1};
        for (size_t i = 0; i < sizeof einval / sizeof einval[0]; i++) {
            errno = 0;
            void *p = fn ? aligned_alloc(einval[i], 64) : memalign(einval[i], 64);
            int e = errno;
            CHECKF(p == NULL && e == EINVAL, "%s(%#zx, 64) = %p errno %d, want NULL/EINVAL", name,
                   einval[i], p, e);
            free(p);
        }
        errno = 0;
        void *p = fn ? aligned_alloc(v_size_max, 64) : memalign(v_size_max, 64);
        CHECKF(p == NULL && errno == EINVAL, "%s(SIZE_MAX, 64) = %p errno %d, want EINVAL", name,
               p, errno);
        free(p);
        static const size_t enomem[] = {(size_t)1 << 63, ((size_t)1 << 62) + 1};
        for (size_t i = 0; i < sizeof enomem / sizeof enomem[0]; i++) {
            errno = 0;
            p = fn ? aligned_alloc(enomem[i], 64) : memalign(enomem[i], 64);
            int e = errno;
            CHECKF(p == NULL && e == ENOMEM, "%s(%#zx, 64) = %p errno %d, want NULL/ENOMEM", name,
                   enomem[i], p, e);
            free(p);
        }
    }
}

static void test_posix_memalign_rules(void)
{
    static const size_t bad[] = {0, 1, 2, 4, 3, 12, 24, 48, 100, 4097, 3 * 4096,
                                 ((size_t)1 << 63) + 1, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *sentinel = (void *)&owns, *p = sentinel;
        int rc = posix_memalign(&p, bad[i], 64);
        CHECKF(rc == EINVAL && p == sentinel, "posix_memalign(%#zx, 64) = %d, %p; want EINVAL",
               bad[i], rc, p);
        if (rc == 0)
            free(p);
    }
    /* size 0 with an alignment above the huge header: the block must still
     * be one that free and malloc_usable_size accept */
    static const size_t good[] = {8, 16, 32, 4096, 4 * MiB, 8 * MiB};
    static const size_t sizes[] = {0, 100};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        for (size_t j = 0; j < 2; j++) {
            void *p = NULL;
            int rc = posix_memalign(&p, good[i], sizes[j]);
            CHECKF(rc == 0, "posix_memalign(%zu, %zu) = %d", good[i], sizes[j], rc);
            if (rc == 0)
                check_block("posix_memalign", good[i], sizes[j], p, 0, good[i]);
            free(p);
        }
    }
}

/* ---- the kernel's overcommit policy ---- */

static int read_overcommit_mode(void)
{
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    int mode = -1;
    if (f) {
        if (fscanf(f, "%d", &mode) != 1)
            mode = -1;
        fclose(f);
    }
    return mode;
}

static char *filled(size_t n, int c)
{
    char *p = malloc(n);
    if (p)
        memset(p, c, n);
    return p;
}

static void test_overcommit(void)
{
    int mode = read_overcommit_mode();
    if (mode == 1)
        SKIP_TEST("vm.overcommit_memory is 1: the kernel grants every mapping");
    if (mode < 0)
        SKIP_TEST("cannot read /proc/sys/vm/overcommit_memory");
    struct sysinfo si;
    if (sysinfo(&si) != 0)
        SKIP_TEST("sysinfo failed");
    /* mode 0 refuses one mapping larger than RAM + swap; mode 2 accounts
     * everything against CommitLimit (swap + overcommit_ratio % of RAM) */
    uint64_t ram_swap = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
    uint64_t limit = ram_swap;
    unsigned long long commit_kb = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "CommitLimit: %llu kB", &commit_kb) == 1)
            break;
    if (f)
        fclose(f);
    if (mode == 2 && commit_kb * 1024 > limit)
        limit = commit_kb * 1024;
    size_t big = (size_t)(limit + limit / 8 + GiB);
    printf("# overcommit_memory %d, RAM+swap %llu MiB, CommitLimit %llu MiB, asking for %zu MiB\n",
           mode, (unsigned long long)(ram_swap >> 20), commit_kb >> 10,
           big >> 20);
#define EXPECT_ENOMEM(expr, what)                                                             \
    do {                                                                                      \
        errno = 0;                                                                            \
        void *q_ = (expr);                                                                    \
        int e_ = errno;                                                                       \
        CHECKF(q_ == NULL && e_ == ENOMEM, "%s of %zu MiB = %p errno %d, want NULL/ENOMEM",   \
               what, big >> 20, q_, e_);                                                      \
        free(q_);                                                                             \
    } while (0)
    EXPECT_ENOMEM(malloc(big), "malloc");
    EXPECT_ENOMEM(calloc(1, big), "calloc(1, n)");
    EXPECT_ENOMEM(calloc(big / 4096, 4096), "calloc(n/4096, 4096)");
    EXPECT_ENOMEM(memalign(4096, big), "memalign");
    EXPECT_ENOMEM(aligned_alloc(64, big), "aligned_alloc");
    EXPECT_ENOMEM(valloc(big), "valloc");
    void *pm = (void *)&owns;
    int rc = posix_memalign(&pm, 64, big);
    CHECKF(rc == ENOMEM && pm == (void *)&owns, "posix_memalign of %zu MiB = %d", big >> 20, rc);
    if (rc == 0)
        free(pm);
    /* realloc of a small and of a huge block: NULL, ENOMEM, the block intact */
    static const size_t from[] = {1000, 300 * KiB, 8 * MiB};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++) {
        char *p = filled(from[i], 0x3c);
        CHECKF(p != NULL, "malloc(%zu) failed", from[i]);
        if (!p)
            continue;
        errno = 0;
        void *q = realloc(p, big);
        int e = errno;
        CHECKF(q == NULL && e == ENOMEM, "realloc(%zu-byte block, %zu MiB) = %p errno %d",
               from[i], big >> 20, q, e);
        if (q) {
            free(q);
            continue;
        }
        CHECKF(intact(p, from[i], 0x3c), "a failed realloc damaged the %zu-byte block", from[i]);
        free(p);
    }
    /* the program goes on */
    static const size_t after[] = {100, 1 * MiB, 64 * MiB};
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++) {
        char *p = filled(after[i], 0x11);
        CHECKF(p != NULL, "malloc(%zu) after the refusals failed", after[i]);
        if (p)
            CHECK(intact(p, after[i], 0x11));
        free(p);
    }
}

/* ---- --canary ---- */

static int print_canary(void)
{
    uintptr_t canary;
#if defined(__x86_64__)
    __asm__ volatile("mov %%fs:0x28, %0" : "=r"(canary));
#elif defined(__aarch64__) || defined(__powerpc64__) || defined(__s390x__)
    extern uintptr_t __stack_chk_guard __attribute__((weak));
    if (!&__stack_chk_guard) {
        printf("SKIP no stack canary on this platform\n");
        return 0;
    }
    canary = __stack_chk_guard;
#else
    printf("SKIP no stack canary on this platform\n");
    return 0;
#endif
    void *p = malloc(64);
    if (!p) {
        printf("FAIL malloc(64) failed\n");
        return 1;
    }
    /* glibc: canary = AT_RANDOM bytes 0..7 with the low byte zeroed */
    owns = hak_find_owns();
    printf("canary_bits %u addr_bits %u owned %d canary %#lx addr %p\n",
           (unsigned)((canary >> 8) & 0xfff), (unsigned)(((uintptr_t)p >> 30) & 0xfff),
           owns ? owns(p) : 0, (unsigned long)canary, p);
    free(p);
    return 0;
}

/* ---- --lowmap: hakmem compiled in with a 2^HAK_TEST_LOWMAP region map ---- */
#ifdef HAK_TEST_LOWMAP
#define LIMIT ((uintptr_t)1 << HAK_TEST_LOWMAP)
#define SEG ((uintptr_t)4 * MiB)
/* hakmem's internals, linked into this program (hidden, not static) */
extern _Atomic uint16_t hak_segmap[];
void hak_segmap_set(const void *p, uint16_t v);
void hak_os_test_hint(uintptr_t hint);
#define SEGMAP_ENTRIES (LIMIT / SEG)

static int describable(const void *p, size_t n)
{
    return (uintptr_t)p < LIMIT && n <= LIMIT - (uintptr_t)p;
}

/* An allocation of n bytes gave p (errno e): NULL with ENOMEM, or memory
 * the map describes and hakmem owns, from its first byte to its last. */
static int lowmap_result(const char *what, void *p, size_t n, int e)
{
    if (!p) {
        CHECKF(e == ENOMEM, "%s: NULL with errno %d, want ENOMEM", what, e);
        return 0;
    }
    CHECKF(describable(p, n), "%s = %p, up to %p: beyond the region map's 2^%d", what, p,
           (void *)((uintptr_t)p + n), HAK_TEST_LOWMAP);
    CHECKF(hakmem_owns(p) == 1 && hakmem_owns((char *)p + n - 1) == 1,
           "%s = %p: hakmem_owns denies its first or last byte", what, p);
    ((volatile char *)p)[n - 1] = 1;           /* mapped to its end (a realloc's old bytes stay) */
    return 1;
}

/* Every size path, aligned blocks, calloc and a huge realloc. */
static void lowmap_blocks(void)
{
    static const size_t sizes[] = {16, 100, 1000, 8000, 20000, 60000, 300 * KiB, 2 * MiB,
                                   3 * MiB, 9 * MiB, 100 * MiB};
    void *keep[64];
    int got = 0;
    char what[64];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 0;
        void *p = malloc(sizes[i]);
        snprintf(what, sizeof what, "malloc(%zu)", sizes[i]);
        got += lowmap_result(what, p, sizes[i], errno);
        free(p);
    }
    CHECKF(got == sizeof sizes / sizeof sizes[0], "only %d of %zu mallocs succeeded", got,
           sizeof sizes / sizeof sizes[0]);
    for (int i = 0; i < 64; i++) {             /* many segments: the hint moves on */
        errno = 0;
        keep[i] = malloc(1 * MiB + 1000);
        lowmap_result("malloc(1 MiB + 1000)", keep[i], 1 * MiB + 1000, errno);
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    errno = 0;
    void *c = calloc(1, 40 * MiB);
    lowmap_result("calloc(1, 40 MiB)", c, 40 * MiB, errno);
    free(c);
    static const size_t aligns[] = {64, 4096, 1 * MiB, 8 * MiB, 64 * MiB};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        errno = 0;
        void *p = memalign(aligns[i], 5 * MiB);
        snprintf(what, sizeof what, "memalign(%zu, 5 MiB)", aligns[i]);
        if (lowmap_result(what, p, 5 * MiB, errno))
            CHECKF(ALIGNED(p, aligns[i]), "%s = %p misaligned", what, p);
        free(p);
    }
    errno = 0;
    void *h = malloc(9 * MiB);
    if (lowmap_result("malloc(9 MiB)", h, 9 * MiB, errno)) {
        errno = 0;
        void *g = realloc(h, 300 * MiB);
        if (lowmap_result("realloc(9 MiB block, 300 MiB)", g, 300 * MiB, errno))
            h = g;
        free(h);
    }
}

/* The kernel cannot put a hinted mapping inside the map (a PROT_NONE block
 * covers the hint area): every try lands outside it, so allocations must
 * fail with ENOMEM; once the block is gone, they work again. */
static void lowmap_blocked(void)
{
    uintptr_t lo = LIMIT / 64;
    size_t len = LIMIT - lo;
    void *b = mmap((void *)lo, len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (b == MAP_FAILED || b != (void *)lo) {
        if (b != MAP_FAILED)
            munmap(b, len);
        SKIP_TEST("cannot reserve the hint area");
    }
    static const size_t sizes[] = {100, 20000, 300 * KiB, 3 * MiB, 9 * MiB};
    char what[64];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 0;
        void *p = malloc(sizes[i]);
        snprintf(what, sizeof what, "blocked: malloc(%zu)", sizes[i]);
        lowmap_result(what, p, sizes[i], errno);
        free(p);
    }
    errno = 0;
    void *a = memalign(8 * MiB, 100);
    lowmap_result("blocked: memalign(8 MiB, 100)", a, 100, errno);
    free(a);
    munmap(b, len);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 0;
        void *p = malloc(sizes[i]);
        snprintf(what, sizeof what, "unblocked: malloc(%zu)", sizes[i]);
        CHECKF(lowmap_result(what, p, sizes[i], errno), "%s failed once the area was free", what);
        free(p);
    }
}

/* A huge block just below the map's end grows: in place it would cross the
 * end, so it must move (or fail), never be described past the map. */
static void lowmap_remap(void)
{
    uintptr_t at = LIMIT - 2 * SEG;
    hak_os_test_hint(at);
    errno = 0;
    char *p = malloc(5 * MiB);
    if (!lowmap_result("malloc(5 MiB)", p, 5 * MiB, errno))
        return;
    if (((uintptr_t)p & ~(SEG - 1)) != at) {
        free(p);
        SKIP_TEST("the kernel did not honour the hint below the map's end");
    }
    memset(p, 0x77, 5 * MiB);
    errno = 0;
    char *q = realloc(p, 64 * MiB);
    if (lowmap_result("realloc(5 MiB block at the end of the map, 64 MiB)", q, 64 * MiB, errno)) {
        CHECKF(intact(q, 5 * MiB, 0x77), "realloc lost the contents");
        p = q;
    } else {
        CHECKF(intact(p, 5 * MiB, 0x77), "a failed realloc damaged the block");
    }
    free(p);
}

/* hak_segmap_set with an address outside the map: refused (release) or
 * fatal (debug), never a write past the map nor into an aliased entry. */
static int debug_build;
static void lowmap_segmap_set(void)
{
    static const uintptr_t bad[] = {LIMIT, LIMIT + SEG, 2 * LIMIT, (uintptr_t)1 << 46,
                                    (uintptr_t)1 << 47, (uintptr_t)1 << 56,
                                    UINTPTR_MAX & ~(SEG - 1)};
    uint64_t before = 0;
    for (size_t i = 0; i < SEGMAP_ENTRIES; i++)
        before = before * 31 + hak_segmap[i];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        hak_segmap_set((void *)bad[i], 0x1234);
    CHECKF(!debug_build, "the debug build did not stop at an address outside the map");
    uint64_t after = 0;
    for (size_t i = 0; i < SEGMAP_ENTRIES; i++)
        after = after * 31 + hak_segmap[i];
    CHECKF(before == after, "refused writes changed entries inside the map");
}

/* Run body in a child process (a clean allocator, and a crash is a failure
 * of this test only); want_sig: the signal it must die of, or 0. */
static void in_child(void (*body)(void), int want_sig, const char *want_err)
{
    struct shared { int fails, skipped; char msg[512]; } *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int errp[2];
    if (sh == MAP_FAILED || pipe(errp) != 0) {
        CHECKF(0, "mmap/pipe failed");
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(errp[0]);
        dup2(errp[1], 2);
        body();
        sh->fails = chk_fail_count;
        sh->skipped = chk_skipped;
        snprintf(sh->msg, sizeof sh->msg, "%s", chk_fail_count ? chk_first : chk_skip_reason);
        fflush(stdout);
        _exit(0);
    }
    close(errp[1]);
    char err[2048], sink[512];
    size_t n = 0;
    for (;;) {                                 /* read to EOF: the child never blocks */
        int room = n < sizeof err - 1;
        ssize_t r = room ? read(errp[0], err + n, sizeof err - 1 - n) : read(errp[0], sink, sizeof sink);
        if (r <= 0)
            break;
        if (room)
            n += (size_t)r;
    }
    err[n] = 0;
    close(errp[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    for (char *c = err; *c; c++)
        if (*c == '\n')
            *c = ' ';
    if (WIFSIGNALED(st)) {
        CHECKF(WTERMSIG(st) == want_sig, "child died of signal %d (%s); stderr: %.200s",
               WTERMSIG(st), strsignal(WTERMSIG(st)), err);
        if (want_err)
            CHECKF(strstr(err, want_err) != NULL, "stderr lacks \"%s\": %.200s", want_err, err);
    } else if (want_sig) {
        CHECKF(0, "child exited (status %d), want signal %d; %s", WEXITSTATUS(st), want_sig,
               sh->fails ? sh->msg : "");
    } else if (sh->fails) {
        CHECKF(0, "%s%s", sh->msg, sh->fails > 1 ? " (and more)" : "");
    } else if (sh->skipped) {
        chk_skipped = 1;
        snprintf(chk_skip_reason, sizeof chk_skip_reason, "%.250s", sh->msg);
    }
    munmap(sh, sizeof *sh);
}

static void test_lowmap_blocks(void) { in_child(lowmap_blocks, 0, NULL); }
static void test_lowmap_blocked(void) { in_child(lowmap_blocked, 0, NULL); }
static void test_lowmap_remap(void) { in_child(lowmap_remap, 0, NULL); }
static void test_lowmap_segmap_set(void)
{
    if (debug_build)
        in_child(lowmap_segmap_set, SIGABRT, "hakmem: ");
    else
        in_child(lowmap_segmap_set, 0, NULL);
}
#endif /* HAK_TEST_LOWMAP */

int main(int argc, char **argv)
{
    int lowmap = 0;
    for (int i = 1; i < argc; i++) {
        if (chk_common_option(argc, argv, &i))
            continue;
        else if (!strcmp(argv[i], "--canary"))
            return print_canary();
        else if (!strcmp(argv[i], "--lowmap"))
            lowmap = 1;
        else {
            fprintf(stderr, "usage: %s [-p prefix] [-t test] [--expect-hakmem|--expect-glibc] "
                            "[--canary | --lowmap]\n", argv[0]);
            return 2;
        }
    }
    if (lowmap) {
#ifdef HAK_TEST_LOWMAP
        debug_build = !strcmp(hakmem_build_variant(), "debug");
        printf("# hakmem %s compiled in, region map 2^%d bytes\n", hakmem_build_variant(),
               HAK_TEST_LOWMAP);
        RUN_TEST(lowmap_segmap_set);
        RUN_TEST(lowmap_blocks);
        RUN_TEST(lowmap_blocked);
        RUN_TEST(lowmap_remap);
        return check_exit_code();
#else
        fprintf(stderr, "%s: --lowmap needs the build of tests/os.mk\n", argv[0]);
        return 2;
#endif
    }
    owns = hak_find_owns();
    RUN_TEST(served);
    RUN_TEST(memalign_rounds);
    RUN_TEST(posix_memalign_rules);
    RUN_TEST(overcommit);
    return check_exit_code();
}
