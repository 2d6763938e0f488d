/* test_reach.c -- a segment's reach (issue 37, src/hak_segment.c "reach"):
 * the part of a 4 MiB segment past the pages handed out so far stays
 * no-access, so a write 1 MiB past (or before) a block faults.
 *
 * usage: test_reach [-p PREFIX] [-t TEST] [--expect-hakmem]
 * Runs under LD_PRELOAD (tests/suite_reach.sh: the release and debug
 * libraries, the hardened one for far_writes, glibc for the tests that mean
 * something there).  Set HAKMEM_GUARD_SAMPLE=0: the counts of mprotect calls
 * must not include guarded sampling's.
 *   far_writes     one block of each size class up to 2 MiB, alone in a new
 *                  process (a fork child): a store 1 MiB past its end, 32
 *                  bytes by memcpy there, a store 1 MiB and 32 bytes before
 *                  its start -- each must end the child by SIGSEGV (or, for
 *                  the memcpy, SIGABRT: the hardened build's checked copy)
 *   grows          a fresh small segment: no-access past its first 256 KiB;
 *                  filled with pages, its accessible part doubles (one
 *                  mapping, not one per page) and ends as one accessible
 *                  mapping, in at most 5 mprotect calls; a large segment's
 *                  accessible part ends where its last span ends
 *   thread_churn   threads that start, allocate small, medium and large
 *                  blocks, free them and end, 4 at a time, 60 rounds after
 *                  a warm-up: no mprotect call at all (a thread's heap keeps
 *                  a segment for the next one, the cache keeps the others,
 *                  each with its reach)
 *   denied_eperm   a seccomp filter makes every mprotect fail with EPERM
 *                  (installed in a fork child, after start-up): blocks of
 *                  every kind, over several segments, are all given and keep
 *                  their contents (a growth falls back to mmap over the
 *                  rest; a new segment is all accessible)
 *   denied_enomem  the same with ENOMEM (what the map count limit gives)
 *   denied_both    mprotect and mmap with MAP_FIXED both fail: malloc gives
 *                  a block whose bytes are usable, or NULL with errno ENOMEM
 *                  -- never a crash
 *   map_limit      the process at vm.max_map_count (mappings made by the
 *                  test until mmap fails, then one given back): malloc gives
 *                  usable blocks or NULL with ENOMEM, never a crash; the
 *                  blocks of a segment whose reach was set before still come
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "hakmem.h"

#pragma weak hakmem_stats_get

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define SEG ((size_t)4 << 20)

static volatile void *sink;

static bool hakmem(void) { return hakmem_stats_get != NULL; }

static uint64_t mprotects(void) {
    hakmem_stats_t s;
    if (!hakmem() || hakmem_stats_get(&s, sizeof s) != 0) return 0;
    return s.mprotect_calls;
}

static uint64_t mmaps(void) {
    hakmem_stats_t s;
    if (!hakmem() || hakmem_stats_get(&s, sizeof s) != 0) return 0;
    return s.mmap_calls;
}

/* ---- /proc/self/maps, read without malloc ---- */

typedef struct { uintptr_t lo, hi; char perms[5]; } map_t;
static char maps_buf[1 << 20];
static map_t maps[8192];

/* every mapping, in address order; -1 if unreadable */
static int maps_read(void) {
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0) return -1;
    size_t len = 0;
    ssize_t r;
    while (len < sizeof maps_buf - 1 && (r = read(fd, maps_buf + len, sizeof maps_buf - 1 - len)) > 0) len += (size_t)r;
    close(fd);
    maps_buf[len] = 0;
    int n = 0;
    for (char *s = maps_buf; *s && n < (int)(sizeof maps / sizeof maps[0]);) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(s, "%lx-%lx %4s", &lo, &hi, perms) == 3) {
            maps[n].lo = lo; maps[n].hi = hi;
            memcpy(maps[n].perms, perms, 5);
            n++;
        }
        char *e = strchr(s, '\n');
        if (!e) break;
        s = e + 1;
    }
    return n;
}

/* the mapping holding a (NULL: none) */
static const map_t *map_at(int n, uintptr_t a) {
    for (int i = 0; i < n; i++)
        if (maps[i].lo <= a && a < maps[i].hi) return &maps[i];
    return NULL;
}

/* How the segment at seg is mapped: the end of its accessible part from
 * seg on (0 if seg itself is not accessible), and the number of mappings
 * that cover [seg, seg + SEG) (-1 if /proc cannot be read). */
static int seg_layout(uintptr_t seg, size_t *accessible) {
    int n = maps_read();
    if (n < 0) return -1;
    *accessible = 0;
    const map_t *m = map_at(n, seg);
    if (m && m->perms[0] == 'r' && m->perms[1] == 'w')
        *accessible = (m->hi < seg + SEG ? m->hi : seg + SEG) - seg;
    int parts = 0;
    for (int i = 0; i < n; i++)
        if (maps[i].hi > seg && maps[i].lo < seg + SEG) parts++;
    return parts;
}

/* ---- far writes ---- */

/* a child: one block of n bytes, then one write `how` far from it; its status */
static int far_write(size_t n, int how) {
    pid_t pid = chk_fork(30);
    if (pid < 0) return -1;
    if (pid == 0) {
        close(2);   /* (any crash report) */
        char *p = malloc(n);
        if (!p) _exit(3);
        memset(p, 1, n);
        chk_far_write(how == 2 ? p - MiB - 32 : p + n + MiB, how == 1);
    }
    return chk_status(pid);
}

static void test_far_writes(void) {
    if (!hakmem()) SKIP_TEST("hakmem not preloaded (glibc puts small blocks in its heap, where a far write may land)");
    static size_t sizes[160];
    size_t n_sizes = chk_class_sizes(sizes), missed = 0, total = 0;
    static const char *what[] = { "a store 1 MiB past", "memcpy 1 MiB past", "a store 1 MiB before" };
    for (size_t i = 0; i < n_sizes; i++)
        for (int how = 0; how < 3; how++) {
            size_t n = sizes[i] - 8;
            int st = far_write(n, how);
            /* (the hardened build's checked memcpy reports it first: SIGABRT) */
            bool faulted = WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || (how == 1 && WTERMSIG(st) == SIGABRT));
            missed += !faulted;
            total++;
            CHECKF(faulted, "%s a block of %zu bytes: %s", what[how], n,
                   WIFEXITED(st) ? (WEXITSTATUS(st) == 3 ? "malloc failed" : "landed unseen")
                   : WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "?");
        }
    printf("# far writes: %zu of %zu did not fault\n", missed, total);
}

/* ---- the reach grows ---- */

static void test_grows(void) {
    if (!hakmem()) SKIP_TEST("hakmem not preloaded");
    pid_t pid = chk_fork(60);
    if (pid < 0) return;
    if (pid == 0) {
        /* a child: a new small segment of its own, from 4,000-byte blocks
         * (16 a 64 KiB page) until one lands in another segment */
        enum { MAX = 4096 };
        static char *v[MAX];
        int k = 0, fails = 0;
        /* fill whatever small segment the child has until a new one comes */
        char *first = malloc(4000);
        uintptr_t old = (uintptr_t)first & ~(SEG - 1), seg = 0;
        for (int i = 0; i < 4 * MAX; i++) {
            char *p = malloc(4000);
            if (!p) _exit(10);
            if (((uintptr_t)p & ~(SEG - 1)) != old) {
                seg = (uintptr_t)p & ~(SEG - 1);
                memset(p, 7, 4000);
                v[k++] = p;
                break;
            }
        }
        if (!seg) _exit(11);
        size_t acc;
        int parts = seg_layout(seg, &acc);
        if (parts < 0) _exit(77);
        printf("# a new small segment: %d mappings, %zu KiB accessible\n", parts, acc >> 10);
        if (acc != 256 * KiB || parts != 2) { printf("# expected 256 KiB accessible, in 2 mappings\n"); fails++; }
        uint64_t m0 = mprotects();
        size_t want = 256 * KiB;
        while (k < MAX) {
            char *p = malloc(4000);
            if (!p) _exit(12);
            if (((uintptr_t)p & ~(SEG - 1)) != seg) break;
            memset(p, 7, 4000);
            v[k++] = p;
            size_t end = (uintptr_t)p + 4000 - seg;
            if (end > want) {
                while (want < end) want *= 2;
                parts = seg_layout(seg, &acc);
                if (acc != want || parts != (want == SEG ? 1 : 2)) {
                    printf("# a block ends at %zu KiB: %zu KiB accessible in %d mappings, expected %zu KiB in %d\n",
                           end >> 10, acc >> 10, parts, want >> 10, want == SEG ? 1 : 2);
                    fails++;
                }
            }
        }
        uint64_t calls = mprotects() - m0;
        parts = seg_layout(seg, &acc);
        printf("# filled (%d blocks): %zu KiB accessible in %d mappings; %llu mprotect calls\n", k, acc >> 10, parts,
               (unsigned long long)calls);
        if (acc != SEG || parts != 1) fails++;
        /* 256 -> 512 KiB -> 1 -> 2 -> 4 MiB, and the next segment's first */
        if (calls < 4 || calls > 5) { printf("# expected 4 or 5 mprotect calls\n"); fails++; }
        for (int i = 0; i < k; i++) if (v[i][0] != 7 || v[i][3999] != 7) { fails++; break; }

        /* a large segment: its accessible part ends at its last span's end */
        enum { L = 6 };
        char *b[L];
        size_t ln = 300 * KiB;
        uintptr_t lseg = 0;
        for (int i = 0; i < L; i++) {
            b[i] = malloc(ln);
            if (!b[i]) _exit(13);
            memset(b[i], 5, ln);
            if (i == 0) lseg = (uintptr_t)b[0] & ~(SEG - 1);
        }
        uintptr_t top = 0;
        for (int i = 0; i < L; i++)
            if (((uintptr_t)b[i] & ~(SEG - 1)) == lseg && (uintptr_t)b[i] + ln > top) top = (uintptr_t)b[i] + ln;
        parts = seg_layout(lseg, &acc);
        size_t top_off = top - lseg;
        printf("# large segment: the last block ends at %zu KiB, %zu KiB accessible in %d mappings\n", top_off >> 10,
               acc >> 10, parts);
        if (acc < top_off || acc > ((top_off + 16 + 64 * KiB - 1) & ~(64 * KiB - 1))) {
            printf("# expected the accessible part to end in the 64 KiB slice after the last block\n");
            fails++;
        }
        _exit(fails ? 1 : 0);
    }
    chk_wait(pid, "the segment child", 0);
}

/* ---- thread churn ---- */

static void *churn_thread(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    static const size_t sizes[] = { 16, 48, 200, 1000, 4000, 9000, 30000, 60000, 100000, 300000, 1000000 };
    void *v[64];
    for (int i = 0; i < 64; i++) {
        size_t n = sizes[(seed + (unsigned)i * 7) % (sizeof sizes / sizeof sizes[0])];
        v[i] = malloc(n);
        if (v[i]) memset(v[i], i, n < 256 ? n : 256);
    }
    for (int i = 0; i < 64; i++) free(v[i]);
    return NULL;
}

static void churn_round(int r, int at_once) {
    pthread_t t[4];
    for (int i = 0; i < at_once; i++)
        CHECK(pthread_create(&t[i], NULL, churn_thread, (void *)(uintptr_t)(r * 4 + i)) == 0);
    for (int i = 0; i < at_once; i++) pthread_join(t[i], NULL);
}

static void test_thread_churn(void) {
    if (!hakmem()) SKIP_TEST("hakmem not preloaded");
    /* one thread at a time: each adopts the heap of the one before, with
     * the segment it kept, and takes the others from the cache */
    for (int r = 0; r < 20; r++) churn_round(r, 1);   /* warm-up: the segments and their reach */
    uint64_t m0 = mprotects();
    for (int r = 0; r < 200; r++) churn_round(r, 1);
    uint64_t calls = mprotects() - m0;
    printf("# 200 threads, one at a time: %llu mprotect calls\n", (unsigned long long)calls);
    CHECKF(calls == 0, "%llu mprotect calls for 200 thread starts and ends", (unsigned long long)calls);
    /* four at a time: the heaps and segments in use vary with the timing,
     * and a segment mapped anew pays its guard and its reach's growth (at
     * most 1 + 16); a segment taken back from the cache may still grow its
     * reach (at most 5 calls, 16 for a large one), and which ones a round
     * takes depends on the timing too (21 calls with no new mapping seen
     * under load).  But no thread pays one for starting: 400 threads stay
     * far above the bound. */
    for (int r = 0; r < 20; r++) churn_round(r, 4);
    m0 = mprotects();
    uint64_t mm0 = mmaps();
    for (int r = 0; r < 100; r++) churn_round(r, 4);
    calls = mprotects() - m0;
    uint64_t maps_new = mmaps() - mm0;
    printf("# 400 threads, four at a time: %llu mprotect calls, %llu mmap calls\n", (unsigned long long)calls,
           (unsigned long long)maps_new);
    CHECKF(calls <= 17 * maps_new + 64, "%llu mprotect calls for 400 thread starts and ends, %llu mmap calls",
           (unsigned long long)calls, (unsigned long long)maps_new);
}

/* ---- mprotect refused ---- */

#if defined(__x86_64__)
#define REACH_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define REACH_ARCH AUDIT_ARCH_AARCH64
#endif

#define LD_W(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

/* mprotect fails with err; with fixed, mmap with MAP_FIXED too.  0 or -1. */
static int deny_mprotect(int err, bool fixed) {
#ifdef REACH_ARCH
    struct sock_filter f[] = {
        LD_W(offsetof(struct seccomp_data, arch)),
        JEQ(REACH_ARCH, 1, 0),
        RET(SECCOMP_RET_ALLOW),
        LD_W(offsetof(struct seccomp_data, nr)),
        JEQ(SYS_mprotect, 4, 0),
        JEQ(SYS_mmap, 0, 2),
        LD_W(offsetof(struct seccomp_data, args[3])),   /* flags (the low word) */
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_FIXED, fixed ? 1 : 0, 0),
        RET(SECCOMP_RET_ALLOW),
        RET(SECCOMP_RET_ERRNO | ((uint32_t)err & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = { (unsigned short)(sizeof f / sizeof f[0]), f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#else
    (void)err; (void)fixed;
    errno = ENOSYS;
    return -1;
#endif
}

/* In the calling process: blocks of every kind over several segments,
 * written and checked, freed, and again.  with_null: NULL with ENOMEM is
 * allowed.  Returns the number of faults found (blocks with wrong bytes,
 * NULLs not allowed, NULL with another errno); *nulls counts NULLs. */
static int exercise(bool with_null, int *nulls) {
    static const size_t sizes[] = { 24, 4000, 9000, 40000, 200000, 300000, 1500000 };
    enum { N = 2100 };
    static char *v[N];
    static size_t len[N];
    int bad = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            size_t n = sizes[i % 7];
            if (n >= 200000 && i % 140 >= 7) n = 24;   /* 45 large blocks, about 30 MB */
            errno = 0;
            v[i] = malloc(n);
            len[i] = n;
            if (!v[i]) {
                (*nulls)++;
                if (!with_null || errno != ENOMEM) bad++;
                continue;
            }
            memset(v[i], (int)(i & 0x7f) + 1, n);
        }
        for (int i = 0; i < N; i++) {
            if (!v[i]) continue;
            unsigned char c = (unsigned char)((i & 0x7f) + 1);
            if (((unsigned char *)v[i])[0] != c || ((unsigned char *)v[i])[len[i] - 1] != c ||
                ((unsigned char *)v[i])[len[i] / 2] != c)
                bad++;
        }
        for (int i = 0; i < N; i++) free(v[i]);
    }
    return bad;
}

static void denied(int err, bool fixed) {
    pid_t pid = chk_fork(60);
    if (pid < 0) return;
    if (pid == 0) {
        sink = malloc(100);   /* a segment with its reach before the filter */
        if (deny_mprotect(err, fixed) != 0) { printf("# seccomp: errno %d\n", errno); _exit(77); }
        uint64_t m0 = mprotects();
        int nulls = 0, bad = exercise(fixed, &nulls);
        printf("# mprotect refused (errno %d%s): %llu refused calls, %d mallocs returned NULL, %d faults\n", err,
               fixed ? ", and mmap MAP_FIXED" : "", (unsigned long long)(mprotects() - m0), nulls, bad);
        if (hakmem() && mprotects() == m0) { printf("# no mprotect was tried\n"); _exit(1); }
        _exit(bad ? 1 : 0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) SKIP_TEST("no seccomp filter (prctl refused)");
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child %s %d",
           WIFSIGNALED(st) ? "died by signal" : "exited with", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

static void test_denied_eperm(void) { denied(EPERM, false); }
static void test_denied_enomem(void) { denied(ENOMEM, false); }
static void test_denied_both(void) { denied(EPERM, true); }

/* ---- the map count limit ---- */

static void test_map_limit(void) {
    long max = 0;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (!f) SKIP_TEST("no /proc/sys/vm/max_map_count");
    if (fscanf(f, "%ld", &max) != 1) max = 0;
    fclose(f);
    if (max <= 0 || max > 300000) SKIP_TEST("vm.max_map_count unreadable or above 300000 (too slow to fill)");
    pid_t pid = chk_fork(60);
    if (pid < 0) return;
    if (pid == 0) {
        sink = malloc(100);
        /* alternate pages of one reservation read-only: a mapping each,
         * until the kernel refuses one (ENOMEM) */
        size_t ps = (size_t)sysconf(_SC_PAGESIZE), span = (size_t)(max + 16) * 2 * ps;
        char *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED) _exit(77);
        size_t made = 0;
        for (size_t off = ps; off + ps < span; off += 2 * ps, made++)
            if (mprotect(r + off, ps, PROT_READ) != 0) break;
        if (errno != ENOMEM) { printf("# mprotect: errno %d after %zu\n", errno, made); _exit(77); }
        /* one mapping given back (a hole at the end of the reservation's split part) */
        munmap(r + span - ps, ps);
        int nulls = 0, bad = exercise(true, &nulls);
        printf("# at the map count limit (%ld; %zu mappings made): %d mallocs returned NULL, %d faults\n", max, made,
               nulls, bad);
        _exit(bad ? 1 : 0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) SKIP_TEST("could not reach the map count limit");
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child %s %d",
           WIFSIGNALED(st) ? "died by signal" : "exited with", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (chk_parse_options(argc, argv)) return 2;
    if (chk_expect_hakmem == 1 && !hakmem()) {
        printf("FAIL %s.served: hakmem is not the allocator\n", chk_prefix);
        return 1;
    }
    RUN_TEST(far_writes);   /* first: the process has allocated next to nothing */
    RUN_TEST(grows);
    RUN_TEST(thread_churn);
    RUN_TEST(denied_eperm);
    RUN_TEST(denied_enomem);
    RUN_TEST(denied_both);
    RUN_TEST(map_limit);
    return check_exit_code();
}
