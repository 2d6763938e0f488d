/* dl_main.c -- allocations across a dlopen boundary.
 *
 * usage: dl_main PREFIX LIBRARY [deepbind]
 * Loads LIBRARY (tests/compat/dl_lib.c) with RTLD_NOW | RTLD_LOCAL, plus
 * RTLD_DEEPBIND if asked, and runs each check in a forked child so that a
 * crash (e.g. glibc's free() handed a hakmem block) becomes one FAIL line:
 *   bound            the library's malloc is the main program's malloc
 *   lib_lib          library allocates and frees its own blocks (+ churn)
 *   lib_to_main      library allocates, main program frees
 *   main_to_lib      main program allocates, library frees
 *   after_dlclose    library allocates blocks of many sizes, is dlclose'd
 *                    (and really unloaded), main program checks and frees
 *                    them; then the library is loaded again and used. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef char *(*alloc_fn)(size_t, int);
typedef int (*free_fn)(char *, size_t, int);
typedef unsigned long (*churn_fn)(int);
typedef void *(*addr_fn)(void);

static const char *prefix, *libpath;
static int flags;
static int failures;

static void *load(void) {
    void *h = dlopen(libpath, flags);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); _exit(3); }
    return h;
}
static void *sym(void *h, const char *name) {
    void *s = dlsym(h, name);
    if (!s) { fprintf(stderr, "dlsym %s: %s\n", name, dlerror()); _exit(3); }
    return s;
}

static int check_bound(void) {
    void *h = load();
    void *lib_malloc = ((addr_fn)sym(h, "lib_malloc_address"))();
    if (lib_malloc == (void *)&malloc) return 0;
    Dl_info a, b;
    if (dladdr(lib_malloc, &a) && dladdr((void *)&malloc, &b))
        fprintf(stderr, "library's malloc is in %s, the program's in %s\n", a.dli_fname, b.dli_fname);
    return 1;
}

static int check_lib_lib(void) {
    void *h = load();
    alloc_fn la = (alloc_fn)sym(h, "lib_alloc");
    free_fn lf = (free_fn)sym(h, "lib_free_checked");
    for (size_t n = 1; n <= (1u << 22); n = n * 3 + 1) {
        char *p = la(n, 0x5a);
        if (!p || lf(p, n, 0x5a) != 0) { fprintf(stderr, "size %zu\n", n); return 1; }
    }
    /* per round: realloc bytes 32+64+128 (+0 for each larger power of two as
     * (char)n wraps to 0), 1 for the aligned block, strlen 14 */
    unsigned long want = 0;
    for (int r = 0; r < 200; r++) want += 32 + 64 + 128 + 1 + 14;
    unsigned long got = ((churn_fn)sym(h, "lib_churn"))(200);
    if (got != want) { fprintf(stderr, "lib_churn %lu, expected %lu\n", got, want); return 1; }
    return 0;
}

static int check_lib_to_main(void) {
    void *h = load();
    alloc_fn la = (alloc_fn)sym(h, "lib_alloc");
    for (size_t n = 1; n <= (1u << 22); n = n * 3 + 1) {
        unsigned char *p = (unsigned char *)la(n, 0x33);
        if (!p) return 1;
        for (size_t i = 0; i < n; i++) if (p[i] != 0x33) return 1;
        p = realloc(p, n + 100);
        if (!p || p[0] != 0x33) return 1;
        free(p);
    }
    return 0;
}

static int check_main_to_lib(void) {
    void *h = load();
    free_fn lf = (free_fn)sym(h, "lib_free_checked");
    for (size_t n = 1; n <= (1u << 22); n = n * 3 + 1) {
        char *p = malloc(n);
        if (!p) return 1;
        memset(p, 0x77, n);
        if (lf(p, n, 0x77) != 0) return 1;
    }
    return 0;
}

#define KEEP 3000
static int check_after_dlclose(void) {
    static char *keep[KEEP];
    static size_t size[KEEP];
    for (int round = 0; round < 2; round++) {
        void *h = load();
        alloc_fn la = (alloc_fn)sym(h, "lib_alloc");
        unsigned x = 12345u + (unsigned)round;
        for (int i = 0; i < KEEP; i++) {
            x = x * 1103515245u + 12345u;
            size[i] = i % 500 == 0 ? (size_t)1 << 21 : i % 50 == 0 ? 40000 + x % 200000 : 1 + (x >> 8) % 2000;
            keep[i] = la(size[i], i & 0xff);
            if (!keep[i]) return 1;
        }
        if (dlclose(h) != 0) { fprintf(stderr, "dlclose: %s\n", dlerror()); return 1; }
        if (dlopen(libpath, RTLD_NOW | RTLD_NOLOAD)) { fprintf(stderr, "library still loaded after dlclose\n"); return 1; }
        for (int i = 0; i < KEEP; i++) {
            for (size_t j = 0; j < size[i]; j += 97)
                if ((unsigned char)keep[i][j] != (unsigned)(i & 0xff)) { fprintf(stderr, "block %d corrupt\n", i); return 1; }
            free(keep[i]);
        }
    }
    return 0;
}

/* run fn in a child; its stderr (the reason for a failure) goes into the FAIL line */
static void run(const char *name, int (*fn)(void)) {
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(2); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(2); }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        _exit(fn());
    }
    close(fds[1]);
    char msg[4096];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0) len += (size_t)n;
    close(fds[0]);
    msg[len] = 0;
    for (char *c = msg; *c; c++) if (*c == '\n') *c = (c[1] ? ' ' : 0);
    int st;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) { printf("PASS %s.%s\n", prefix, name); return; }
    failures++;
    if (WIFSIGNALED(st))
        printf("FAIL %s.%s: crashed with signal %d (%s)%s%s\n", prefix, name, WTERMSIG(st),
               strsignal(WTERMSIG(st)), len ? ": " : "", msg);
    else printf("FAIL %s.%s: exit status %d%s%s\n", prefix, name, WEXITSTATUS(st), len ? ": " : "", msg);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: dl_main PREFIX LIBRARY [deepbind]\n"); return 2; }
    prefix = argv[1];
    libpath = argv[2];
    flags = RTLD_NOW | RTLD_LOCAL | (argc > 3 && strcmp(argv[3], "deepbind") == 0 ? RTLD_DEEPBIND : 0);
    run("bound", check_bound);
    run("lib_lib", check_lib_lib);
    run("lib_to_main", check_lib_to_main);
    run("main_to_lib", check_main_to_lib);
    run("after_dlclose", check_after_dlclose);
    return failures ? 1 : 0;
}
