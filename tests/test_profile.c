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
 *   test_profile cancel DIR     (sampling on) a thread dumping in a loop is
 *                               cancelled 200 times at random moments; then
 *                               main and another thread must still take
 *                               samples and dump, and no descriptor leaked
 *   test_profile concurrent DIR two threads each dump to a file of their own
 *                               300 times at once; every dump must be whole
 *   test_profile reload NAME A.so B.so DUMP  (every allocation sampled) allocates
 *                               through A's lib_alloc, dlcloses A, dlopens B
 *                               (tests/unwind_lib.S: the same code but the
 *                               frame size, usually at the same address) and
 *                               allocates through B's: every sample taken in
 *                               B must name reload_site as lib_alloc's caller
 *   test_profile reload_threads NAME A.so B.so  two threads load A or B in
 *                               turn, allocate through it and unload it, 2000
 *                               times each, while main allocates: no hang
 *                               (the loader's lock inside malloc), and in the
 *                               debug build no cached walk that differs from
 *                               libgcc's
 * (cancel, concurrent and reload print PASS/FAIL lines themselves; a
 * watchdog turns a hang into a FAIL line)
 * The sites are functions of their own (noinline, exported with -rdynamic), so
 * pprof and the leak report can name them. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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


/* ---- cancel and concurrent: dumps in threads ---- */

static int (*dump_fn)(const char *);
static const char *watch_name = "?";
static void *watchdog(void *arg) {
    sleep((unsigned)(long)arg);
    char msg[256];
    int n = snprintf(msg, sizeof msg, "FAIL %s: hung (a lock of the profile left taken?)\n", watch_name);
    if (write(1, msg, (size_t)n) < 0) {}
    _exit(1);
}
static void start_watchdog(const char *name, long seconds) {
    pthread_t w;
    watch_name = name;
    pthread_create(&w, NULL, watchdog, (void *)seconds);
    pthread_detach(w);
}
static int count_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}
/* n blocks of 64..1023 bytes, kept: with a small HAKMEM_SAMPLE_BYTES most
 * are sampled, so a dump writes many buffers' worth under the lock */
NOINL void **dump_site(size_t n) {
    void **v = calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) { v[i] = malloc(64 + (i * 37) % 960); memset(v[i], 1, 64); }
    return v;
}

static const char *cancel_path;
static void *dump_forever(void *arg) {
    (void)arg;
    for (;;) {
        dump_fn(cancel_path);
        pthread_testcancel();
    }
    return NULL;
}
static void *alloc_and_dump(void *arg) {
    void **v = dump_site(2000);
    int rc = dump_fn((const char *)arg);
    for (size_t i = 0; i < 2000; i++) free(v[i]);
    free(v);
    return (void *)(long)rc;
}

static int test_cancel(const char *dir) {
    static char path[4096], path2[4096], path3[4096];
    snprintf(path, sizeof path, "%s/cancel.prof", dir);
    snprintf(path2, sizeof path2, "%s/after_main.prof", dir);
    snprintf(path3, sizeof path3, "%s/after_thread.prof", dir);
    cancel_path = path;
    start_watchdog("profile.cancel", 60);
    void **kept = dump_site(4000);   /* a dump of a few hundred KiB */
    int fds_before = count_fds();
    unsigned seed = 12345;
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, dump_forever, NULL)) { puts("FAIL profile.cancel: pthread_create"); return 1; }
        seed = seed * 1103515245u + 12345u;
        struct timespec ts = { 0, (long)((seed >> 8) % 3000) * 1000 };   /* 0..3 ms */
        nanosleep(&ts, NULL);
        pthread_cancel(t);
        void *res;
        pthread_join(t, &res);
        if (res != PTHREAD_CANCELED) { puts("FAIL profile.cancel: thread not cancelled"); return 1; }
    }
    /* sampled allocations and dumps still work, here and in another thread */
    void **more = dump_site(2000);
    int rc_main = dump_fn(path2);
    pthread_t t;
    void *rc_thread = (void *)1L;
    pthread_create(&t, NULL, alloc_and_dump, path3);
    pthread_join(t, &rc_thread);
    int fds_after = count_fds();
    struct stat st2, st3;
    bool ok = rc_main == 0 && rc_thread == NULL && stat(path2, &st2) == 0 && stat(path3, &st3) == 0 &&
              st2.st_size > 0 && st3.st_size > 0;
    printf("%s profile.cancel.dump_after\n", ok ? "PASS" : "FAIL");
    if (fds_after == fds_before) puts("PASS profile.cancel.no_fd_leak");
    else printf("FAIL profile.cancel.no_fd_leak: %d descriptors open before, %d after\n", fds_before, fds_after);
    (void)kept; (void)more;
    return ok && fds_after == fds_before ? 0 : 1;
}

/* A whole dump: the header, as many sample lines as it counts (their sizes
 * adding up to its bytes), an empty line, MAPPED_LIBRARIES: once, then lines
 * of /proc/self/maps to the end.  NULL if so, else what is wrong. */
static const char *check_dump(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return "cannot open";
    size_t len = 0;
    ssize_t r;
    while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)r;
    close(fd);
    buf[len] = 0;
    if (len == 0 || buf[len - 1] != '\n') return "empty or not ending with a newline";
    size_t live, bytes, live2, bytes2;
    long period;
    if (sscanf(buf, "heap profile: %zu: %zu [%zu: %zu] @ heap_v2/%ld", &live, &bytes, &live2, &bytes2, &period) != 5 ||
        live != live2 || bytes != bytes2)
        return "no header on the first line";
    char *line = strchr(buf, '\n') + 1;
    size_t lines = 0, sum = 0;
    int state = 0;   /* 0 samples, 1 maps */
    while (*line) {
        char *end = strchr(line, '\n');
        if (!end) return "a NUL byte in the file";
        *end = 0;
        if (!strncmp(line, "heap profile:", 13)) return "a second header";
        if (state == 0) {
            int c1, c2;
            size_t s1, s2;
            int used = 0;
            if (line[0] == 0) {
                if (strncmp(end + 1, "MAPPED_LIBRARIES:\n", 18))
                    return "the empty line is not followed by MAPPED_LIBRARIES:";
                end = strchr(end + 1, '\n');
                state = 1;
            } else if (sscanf(line, "%d: %zu [%d: %zu] @%n", &c1, &s1, &c2, &s2, &used) == 4 && used > 0 &&
                       c1 == 1 && c2 == 1 && s1 == s2 && line[used] == ' ' && !strncmp(line + used, " 0x", 3)) {
                lines++;
                sum += s1;
            } else return "a line in the samples that is no sample";
        } else {
            unsigned long lo, hi;
            char perms[8];
            if (!strcmp(line, "MAPPED_LIBRARIES:")) return "MAPPED_LIBRARIES: twice";
            if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || lo >= hi) return "a line in the maps that is no mapping";
        }
        line = end + 1;
    }
    if (state != 1) return "no MAPPED_LIBRARIES:";
    if (lines != live || sum != bytes) return "the sample lines do not add up to the header";
    return NULL;
}

#define CONC_DUMPS 300
static const char *conc_dir;
static void *dump_and_check(void *arg) {
    long id = (long)arg;
    char path[4096];
    snprintf(path, sizeof path, "%s/conc%ld.prof", conc_dir, id);
    size_t cap = 16 << 20;
    char *buf = malloc(cap);
    long bad = 0;
    for (int i = 0; i < CONC_DUMPS; i++) {
        if (dump_fn(path) != 0) { bad++; continue; }
        const char *why = check_dump(path, buf, cap);
        if (why) {
            if (!bad) printf("  thread %ld, dump %d: %s\n", id, i, why);
            bad++;
        }
    }
    free(buf);
    return (void *)bad;
}
static int test_concurrent(const char *dir) {
    conc_dir = dir;
    start_watchdog("profile.concurrent", 240);
    void **kept = dump_site(1000);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, dump_and_check, (void *)i);
    long bad = 0;
    for (int i = 0; i < 2; i++) { void *r; pthread_join(t[i], &r); bad += (long)r; }
    if (bad) printf("FAIL profile.concurrent: %ld of %d dumps broken\n", bad, 2 * CONC_DUMPS);
    else printf("PASS profile.concurrent (%d dumps, all whole)\n", 2 * CONC_DUMPS);
    (void)kept;
    return bad != 0;
}


/* ---- reload: a plug-in unloaded and another loaded at its address ---- */

NOINL void *reload_site(void *(*fn)(size_t), size_t n) {
    char *p = fn(n);
    if (p) p[0] = 'r';   /* (not a tail call: this frame stays on the stack) */
    return p;
}

/* the dump's sample lines whose first frame is ret: how many, and how many
 * of them have reload_site as the second frame */
static void count_reload_samples(const char *path, uintptr_t ret, int *n, int *good) {
    FILE *f = fopen(path, "r");
    char line[4096];
    *n = *good = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "MAPPED_LIBRARIES:", 17)) break;
        char *at = strstr(line, "] @ ");
        if (!at || !strncmp(line, "heap profile:", 13)) continue;
        char *s = at + 3, *end;
        uintptr_t f1 = (uintptr_t)strtoull(s, &end, 16), f2 = (uintptr_t)strtoull(end, NULL, 16);
        if (f1 != ret) continue;
        (*n)++;
        Dl_info di;
        if (f2 && dladdr((void *)f2, &di) && di.dli_saddr == (void *)reload_site) (*good)++;
    }
    fclose(f);
}

static const char *reload_name;
static int test_reload(const char *liba, const char *libb, const char *path) {
    const char *name = reload_name;
    start_watchdog(name, 60);
    void *ha = dlopen(liba, RTLD_NOW | RTLD_LOCAL);
    if (!ha) { printf("FAIL %s: %s\n", name, dlerror()); return 1; }
    void *(*fa)(size_t) = (void *(*)(size_t))dlsym(ha, "lib_alloc");
    uintptr_t reta = (uintptr_t)dlsym(ha, "lib_ret");
    void *blocks[16];
    for (int i = 0; i < 16; i++) blocks[i] = reload_site(fa, 100);   /* the walk's rules for A */
    for (int i = 0; i < 16; i++) free(blocks[i]);
    dlclose(ha);
    void *hb = dlopen(libb, RTLD_NOW | RTLD_LOCAL);
    if (!hb) { printf("FAIL %s: %s\n", name, dlerror()); return 1; }
    void *(*fb)(size_t) = (void *(*)(size_t))dlsym(hb, "lib_alloc");
    uintptr_t retb = (uintptr_t)dlsym(hb, "lib_ret");
    for (int i = 0; i < 16; i++) blocks[i] = reload_site(fb, 100);
    if (dump_fn(path) != 0) { printf("FAIL %s: dump failed\n", name); return 1; }
    int n, good;
    count_reload_samples(path, retb, &n, &good);
    const char *where = reta == retb ? "B at A's address" : "B elsewhere";
    if (n == 0) { printf("FAIL %s: no sample taken in B's lib_alloc (%s)\n", name, where); return 1; }
    if (good != n) {
        printf("FAIL %s: %d of %d samples taken in B's lib_alloc lack its caller (%s: a stale unwind rule)\n",
               name, n - good, n, where);
        return 1;
    }
    printf("PASS %s (%d samples, %s)\n", name, n, where);
    for (int i = 0; i < 16; i++) free(blocks[i]);
    return 0;
}


static const char *reload_libs[2];
static _Atomic int reload_done;
static void *reload_loop(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < 2000; i++) {
        void *h = dlopen(reload_libs[(i + id) & 1], RTLD_NOW | RTLD_LOCAL);
        if (!h) { printf("FAIL %s: %s\n", reload_name, dlerror()); exit(1); }
        void *(*fn)(size_t) = (void *(*)(size_t))dlsym(h, "lib_alloc");
        void *b[4];
        for (int k = 0; k < 4; k++) b[k] = reload_site(fn, 64 + k);
        for (int k = 0; k < 4; k++) free(b[k]);
        dlclose(h);
    }
    reload_done++;
    return NULL;
}
static int test_reload_threads(void) {
    start_watchdog(reload_name, 100);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, reload_loop, (void *)i);
    long n = 0;
    while (reload_done < 2) { void *p = malloc(32 + (n++ & 255)); free(p); }   /* sampled too */
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("PASS %s (%ld allocations by main meanwhile)\n", reload_name, n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "reload_threads") && argc == 5) {
        reload_name = argv[2];
        reload_libs[0] = argv[3];
        reload_libs[1] = argv[4];
        setvbuf(stdout, NULL, _IONBF, 0);
        return test_reload_threads();
    }
    if (!strcmp(argv[1], "reload") && argc == 6) {
        reload_name = argv[2];
        dump_fn = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hakmem_profile_dump");
        if (!dump_fn) { printf("FAIL %s: hakmem_profile_dump not found (not preloaded?)\n", argv[2]); return 1; }
        setvbuf(stdout, NULL, _IONBF, 0);
        return test_reload(argv[3], argv[4], argv[5]);
    }
    if ((!strcmp(argv[1], "cancel") || !strcmp(argv[1], "concurrent")) && argc == 3) {
        dump_fn = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hakmem_profile_dump");
        if (!dump_fn) { printf("FAIL profile.%s: hakmem_profile_dump not found (not preloaded?)\n", argv[1]); return 1; }
        setvbuf(stdout, NULL, _IONBF, 0);
        return argv[1][1] == 'a' ? test_cancel(argv[2]) : test_concurrent(argv[2]);
    }
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
