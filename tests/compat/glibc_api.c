/* glibc_api.c -- glibc's malloc extension API under hakmem: mallinfo,
 * mallinfo2, malloc_trim, malloc_info, mallopt, malloc_stats.
 *
 * Three checks follow glibc 2.36's own tests of these functions (our own
 * code, after what those tests rely on): posix_memalign_enomem
 * (tst-malloc-thread-fail: a failed posix_memalign leaves errno ENOMEM),
 * mallinfo_threads (tst-malloc-tcache-leak: uordblks does not grow after
 * 5,000 threads were created and joined, each leaving a 32-byte block for
 * main to free), malloc_stats_cancel (tst-malloc-stats-cancellation:
 * malloc_stats in a thread with a cancel pending writes glibc's summary to
 * the end -- "max mmap bytes" -- and leaves the cancel to the next
 * cancellation point).
 *
 * usage: glibc_api PREFIX            run every check (stdout: PASS/FAIL lines)
 *        glibc_api --stats           only call malloc_stats() (stderr is checked
 *                                    by the suite)
 * Run under LD_PRELOAD=libhakmem.so or statically linked with libhakmem.a.
 * Every check also insists that hakmem is the allocator in charge (weak
 * hakmem_owns present and owning malloc's blocks), so on glibc's malloc the
 * checks fail rather than pass by accident. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern int hakmem_owns(const void *p) __attribute__((weak));

static const char *prefix;
static int failures;

static void check(const char *name, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#include <stdarg.h>
static void check(const char *name, int ok, const char *fmt, ...) {
    if (ok) { printf("PASS %s.%s\n", prefix, name); return; }
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s.%s: ", prefix, name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures++;
}

#define MiB ((size_t)1 << 20)
#define NSMALL ((64 * MiB) / 64)

static void **blocks;

/* ---- tst-malloc-tcache-leak's behaviour ---- */
static void *leak_worker(void *arg) {
    (void)arg;
    void *p = malloc(32);
    __asm__ volatile("" ::: "memory");
    free(p);
    return malloc(32);                      /* main frees it */
}

/* ---- tst-malloc-thread-fail's behaviour: in a child under an address-space
 * limit, posix_memalign until it fails; exit 0 if it failed with ENOMEM
 * returned and errno ENOMEM, 1 if errno was something else, 2 if it never
 * failed ---- */
static int memalign_until_full(void) {
    struct rlimit rl = { 200u << 20, 200u << 20 };
    long page = sysconf(_SC_PAGESIZE);
    struct rlimit cur;
    if (getrlimit(RLIMIT_AS, &cur) == 0 && cur.rlim_cur != RLIM_INFINITY && cur.rlim_cur < rl.rlim_cur) rl = cur;
    /* the address space the process has already, plus room to fill */
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long vm = 0;
    if (f) { if (fscanf(f, "%lu", &vm) != 1) vm = 0; fclose(f); }
    rl.rlim_cur = rl.rlim_max = vm * (unsigned long)page + (200u << 20);
    if (setrlimit(RLIMIT_AS, &rl) != 0) return 3;
    void **head = NULL;
    for (long i = 0; i < 10000000; i++) {
        void *p;
        errno = 0;
        int rc = posix_memalign(&p, 128, 17 * (size_t)page);
        if (rc != 0) return rc == ENOMEM && errno == ENOMEM ? 0 : 1;
        *(void **)p = head;
        head = p;
    }
    return 2;
}

/* ---- tst-malloc-stats-cancellation's behaviour ---- */
static pthread_barrier_t cancel_gate;
static void *stats_cancelled(void *arg) {
    (void)arg;
    pthread_barrier_wait(&cancel_gate);     /* a cancel is pending from here on */
    malloc_stats();                         /* no cancellation point inside */
    fputs("after malloc_stats: cancellation should have come first\n", stderr);
    return NULL;
}
static int stats_pipe_rd;
static char stats_seen[1 << 16];
static void *stats_reader(void *arg) {
    (void)arg;
    size_t n = 0;
    ssize_t r;
    while ((r = read(stats_pipe_rd, stats_seen + n, sizeof stats_seen - 1 - n)) > 0) n += (size_t)r;
    stats_seen[n] = 0;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--stats") == 0) {
        void *p = malloc(1000);
        malloc_stats();
        free(p);
        return 0;
    }
    prefix = argc > 1 ? argv[1] : "glibc_api";
    setvbuf(stdout, NULL, _IOLBF, 0);

    void *probe = malloc(64);
    int hak = hakmem_owns && hakmem_owns(probe) == 1;
    free(probe);
    check("hakmem_in_charge", hak, "malloc is not served by hakmem");

    /* ---- mallinfo2 / mallinfo: 64 MiB of 64-byte blocks ---- */
    malloc_trim(0);
    struct mallinfo2 m0 = mallinfo2();
    blocks = malloc(NSMALL * sizeof *blocks);
    if (!blocks) return 2;
    for (size_t i = 0; i < NSMALL; i++) {
        blocks[i] = malloc(64);
        if (!blocks[i]) { printf("FAIL %s.alloc: malloc(64) failed at %zu\n", prefix, i); return 1; }
        memset(blocks[i], (int)i, 64);
    }
    struct mallinfo2 m1 = mallinfo2();
    struct mallinfo o1 = mallinfo();
    check("mallinfo2_arena_grows", hak && m1.arena >= m0.arena + 64 * MiB,
          "arena %zu -> %zu after allocating 64 MiB of small blocks", m0.arena, m1.arena);
    check("mallinfo2_uordblks_grows", hak && m1.uordblks >= m0.uordblks + 64 * MiB && m1.uordblks <= m1.arena,
          "uordblks %zu -> %zu (arena %zu)", m0.uordblks, m1.uordblks, m1.arena);
    check("mallinfo2_consistent", m1.fordblks == m1.arena - m1.uordblks && m1.usmblks >= m1.arena,
          "fordblks %zu != arena %zu - uordblks %zu, or usmblks %zu < arena", m1.fordblks, m1.arena,
          m1.uordblks, m1.usmblks);
    check("mallinfo_matches_mallinfo2", hak && o1.arena > 0 && (size_t)o1.arena == m1.arena &&
          (size_t)o1.uordblks == m1.uordblks,
          "mallinfo arena %d uordblks %d vs mallinfo2 %zu %zu", o1.arena, o1.uordblks, m1.arena, m1.uordblks);

    for (size_t i = 0; i < NSMALL; i++) free(blocks[i]);
    int trimmed = malloc_trim(0);
    struct mallinfo2 m2 = mallinfo2();
    check("malloc_trim_returns_1", hak && trimmed == 1, "malloc_trim(0) after freeing 64 MiB returned %d", trimmed);
    check("mallinfo2_arena_shrinks", hak && m2.arena + 32 * MiB <= m1.arena && m2.uordblks + 32 * MiB <= m1.uordblks,
          "after free + malloc_trim(0): arena %zu -> %zu, uordblks %zu -> %zu", m1.arena, m2.arena,
          m1.uordblks, m2.uordblks);
    trimmed = malloc_trim(0);
    check("malloc_trim_idle_returns_0", trimmed == 0, "second malloc_trim(0) with nothing to release returned %d", trimmed);
    free(blocks);

    /* ---- huge blocks: hblks / hblkhd ---- */
    struct mallinfo2 h0 = mallinfo2();
    void *big = malloc(48 * MiB);
    memset(big, 1, 48 * MiB);
    struct mallinfo2 h1 = mallinfo2();
    check("mallinfo2_hblks", hak && h1.hblks == h0.hblks + 1 && h1.hblkhd >= h0.hblkhd + 48 * MiB,
          "hblks %zu -> %zu, hblkhd %zu -> %zu after malloc(48 MiB)", h0.hblks, h1.hblks, h0.hblkhd, h1.hblkhd);
    free(big);
    struct mallinfo2 h2 = mallinfo2();
    check("mallinfo2_hblks_freed", hak && h2.hblks == h0.hblks && h2.hblkhd + 48 * MiB <= h1.hblkhd,
          "after free: hblks %zu, hblkhd %zu (before malloc %zu, %zu)", h2.hblks, h2.hblkhd, h0.hblks, h0.hblkhd);

    /* ---- glibc's own tests of the extension API, as hakmem's ---- */
    void *q = (void *)&prefix;
    errno = 0;
    int prc = posix_memalign(&q, 64, SIZE_MAX - 4096);
    int perr = errno;
    check("posix_memalign_enomem", hak && prc == ENOMEM && perr == ENOMEM && q == (void *)&prefix,
          "posix_memalign(64, SIZE_MAX - 4096) returned %d, errno %d (want ENOMEM, ENOMEM)", prc, perr);
    fflush(stdout);
    /* GLIBC_API_QEMU=1 (tests/suite_aarch64.sh): under qemu-user RLIMIT_AS
     * bounds qemu's own reservations, not the guest's, and a thread costs
     * a hundred times more */
    bool qemu = getenv("GLIBC_API_QEMU") != NULL;
    if (qemu) {
        printf("SKIP %s.posix_memalign_enomem_full: under qemu-user RLIMIT_AS limits qemu's reservations, "
               "not the guest's\n", prefix);
    } else {
        pid_t pid = fork();
        if (pid == 0) { alarm(30); _exit(memalign_until_full()); }   /* (never outlives the run) */
        int wst = 0;
        waitpid(pid, &wst, 0);
        check("posix_memalign_enomem_full", hak && WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
              "under RLIMIT_AS: child %s %d (1: errno not ENOMEM after the failure, 2: never failed, 3: no limit)",
              WIFEXITED(wst) ? "exited" : "killed by signal", WIFEXITED(wst) ? WEXITSTATUS(wst) : WTERMSIG(wst));
    }

    pthread_t *th = calloc(1, sizeof *th);
    struct mallinfo2 t0 = mallinfo2();
    int threads = qemu ? 500 : 5000, made = 0;
    for (int i = 0; i < threads; i++) {
        void *ret = NULL;
        if (pthread_create(th, NULL, leak_worker, NULL) != 0) break;
        pthread_join(*th, &ret);
        free(ret);
        made++;
    }
    struct mallinfo2 t1 = mallinfo2();
    free(th);
    check("mallinfo_threads", hak && made == threads && t1.uordblks <= t0.uordblks + (size_t)threads,
          "uordblks %zu before and %zu after %d threads (at most %zu)", t0.uordblks, t1.uordblks, made,
          t0.uordblks + (size_t)threads);

    int pfd[2];
    fflush(stderr);
    int real_err = dup(2);
    if (pipe(pfd) == 0 && real_err >= 0) {
        dup2(pfd[1], 2);
        close(pfd[1]);
        stats_pipe_rd = pfd[0];
        pthread_t rd, tc;
        pthread_create(&rd, NULL, stats_reader, NULL);
        pthread_barrier_init(&cancel_gate, NULL, 2);
        pthread_create(&tc, NULL, stats_cancelled, NULL);
        pthread_cancel(tc);
        pthread_barrier_wait(&cancel_gate);
        void *rv = NULL;
        pthread_join(tc, &rv);
        dup2(real_err, 2);                  /* the pipe's last writer goes: the reader sees its end */
        close(real_err);
        pthread_join(rd, NULL);
        close(pfd[0]);
        const char *arena = strstr(stats_seen, "Arena 0:\n"), *max = strstr(stats_seen, "max mmap bytes   = ");
        const char *ours = strstr(stats_seen, "hakmem ");
        check("malloc_stats_cancel", rv == PTHREAD_CANCELED && arena == stats_seen && max && ours && max < ours &&
              !strstr(stats_seen, "cancellation should have come first"),
              "thread %s; output (%zu bytes) starts \"%.60s\"%s%s", rv == PTHREAD_CANCELED ? "cancelled" : "not cancelled",
              strlen(stats_seen), stats_seen, max ? "" : ", no \"max mmap bytes\"",
              strstr(stats_seen, "cancellation should have come first") ? ", the fputs after it wrote" : "");
    } else {
        check("malloc_stats_cancel", 0, "pipe or dup failed: errno %d", errno);
    }

    /* ---- malloc_info ---- */
    char *xml = NULL;
    size_t xlen = 0;
    FILE *mf = open_memstream(&xml, &xlen);
    int rc = malloc_info(0, mf);
    fclose(mf);
    check("malloc_info_xml", rc == 0 && xml && strncmp(xml, "<malloc", 7) == 0 && strstr(xml, "hakmem") &&
          strstr(xml, "</malloc>"), "rc %d, output starts \"%.40s\"", rc, xml ? xml : "(null)");
    free(xml);
    mf = open_memstream(&xml, &xlen);
    errno = 0;
    rc = malloc_info(1, mf);
    int e = errno;
    fclose(mf);
    check("malloc_info_bad_options", hak && rc == -1 && e == EINVAL && xlen == 0,
          "malloc_info(1, fp) returned %d errno %d, wrote %zu bytes", rc, e, xlen);
    free(xml);

    /* ---- mallopt ---- */
    static const struct { int param, value, want; const char *name; } opts[] = {
        { M_ARENA_MAX, 2, 1, "M_ARENA_MAX" },       { M_MMAP_THRESHOLD, 1 << 20, 1, "M_MMAP_THRESHOLD" },
        { M_TRIM_THRESHOLD, 1 << 20, 1, "M_TRIM_THRESHOLD" }, { M_TOP_PAD, 0, 1, "M_TOP_PAD" },
        { M_PERTURB, 0, 1, "M_PERTURB" },           { 12345, 1, 0, "12345" }, { -100, 1, 0, "-100" },
    };
    int bad = 0;
    char badmsg[256] = "";
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        int r = mallopt(opts[i].param, opts[i].value);
        if (r != opts[i].want) {
            bad++;
            size_t l = strlen(badmsg);
            snprintf(badmsg + l, sizeof badmsg - l, "mallopt(%s)=%d want %d; ", opts[i].name, r, opts[i].want);
        }
    }
    check("mallopt", hak && bad == 0, "%s", bad ? badmsg : "hakmem not in charge");
    /* accepted parameters have no effect: allocation still works and is hakmem's */
    void *after = malloc(2 * MiB);
    check("mallopt_no_effect", after && hakmem_owns && hakmem_owns(after) == 1, "malloc after mallopt not hakmem's");
    free(after);

    printf("%s: %d failure(s)\n", prefix, failures);
    return failures ? 1 : 0;
}
