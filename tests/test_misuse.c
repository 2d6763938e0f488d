/* test_misuse.c -- one misuse (or diagnostic) per run, chosen by argv[1].
 * tests/suite_misuse.sh runs each case in a subprocess under hakmem and checks
 * hakmem's message and the exit status.  Cases that must abort print nothing
 * after the misuse; a line "SURVIVED" means hakmem did not stop the program. */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *volatile sink;

static void *alloc_in_thread_fn(void *arg) { return malloc((size_t)(uintptr_t)arg); }
static void *alloc_in_thread(size_t n) {
    pthread_t t; void *p;
    pthread_create(&t, NULL, alloc_in_thread_fn, (void *)(uintptr_t)n);
    pthread_join(t, &p);
    return p;
}
static void on_segv(int sig) { (void)sig; _exit(42); }

/* A 48-byte block on memory that held free 32-byte blocks: four pages of
 * 32-byte blocks freed, then 48-byte blocks until one lies there (the slot
 * is carved again for the other class; the others stay allocated), with
 * another live block on its page.  NULL if none does. */
static void *reused_block(void) {
    enum { N = 4 * 65536 / 32 };
    static uintptr_t old[N];
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < N; i++) {
        old[i] = (uintptr_t)malloc(32);
        if (old[i] < lo) lo = old[i];
        if (old[i] > hi) hi = old[i];
    }
    for (int i = 0; i < N; i++) free((void *)old[i]);
    for (int i = 0; i < 2 * N; i++) {
        void *p = malloc(48);
        if ((uintptr_t)p < lo || (uintptr_t)p > hi) continue;
        /* and a block after it on its page, so that the page stays in use
         * when p is freed (else it goes back, and a second free of p finds
         * a released page: which comes first depends on what the process
         * allocated before, e.g. the unwinder's start-up) */
        for (int k = 0; k < 64; k++) {
            void *q = malloc(48);
            if (((uintptr_t)q >> 16) == ((uintptr_t)p >> 16)) return p;
        }
        return NULL;
    }
    return NULL;
}
static void *reused_in_thread_fn(void *arg) { (void)arg; return reused_block(); }
static void *free_in_thread_fn(void *p) { free(p); return NULL; }
static void free_in_thread(void *p) {
    pthread_t t;
    pthread_create(&t, NULL, free_in_thread_fn, p);
    pthread_join(t, NULL);
}

/* thread generations, as in a larson server: each detached thread frees its
 * predecessor's blocks (remote frees, before it allocates anything),
 * allocates its own, starts its successor and exits. */
static pthread_mutex_t gen_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gen_cv = PTHREAD_COND_INITIALIZER;
static int gen_left = 2000;
static pthread_attr_t gen_attr;
static void *generation(void *arg) {
    void **blocks = arg;
    for (int i = 0; i < 64; i++) free(blocks[i]);
    for (int i = 0; i < 64; i++) blocks[i] = malloc(48);
    pthread_mutex_lock(&gen_mu);
    int more = --gen_left > 0;
    pthread_mutex_unlock(&gen_mu);
    pthread_t t;
    if (more && pthread_create(&t, &gen_attr, generation, blocks) == 0) return NULL;
    pthread_mutex_lock(&gen_mu);
    gen_left = -1;
    pthread_cond_signal(&gen_cv);
    pthread_mutex_unlock(&gen_mu);
    return NULL;
}

/* C++'s operator new and sized operator delete (Itanium names), as the
 * preloaded library exports them */
static void *cxx_new(size_t n) {
    void *(*f)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
    if (!f) { fprintf(stderr, "test_misuse: no _Znwm\n"); exit(2); }
    return f(n);
}
static void cxx_delete_sized(void *p, size_t n) {
    void (*f)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
    if (!f) { fprintf(stderr, "test_misuse: no _ZdlPvm\n"); exit(2); }
    f(p, n);
}

/* ---- complete reports (issue 37): each misuse is made by a function of
 * its own, never inlined and never a tail call, which the report's stack
 * must name (tests/suite_misuse.sh, expect_full) ---- */
#define REPORT_FN __attribute__((noinline, used))
#define NO_TAIL() __asm__ volatile("" ::: "memory")
REPORT_FN void report_free_twice(void *p) { free(p); free(p); NO_TAIL(); }
REPORT_FN void report_malloc_after_write(size_t n) { for (int i = 0; i < 4; i++) sink = malloc(n); NO_TAIL(); }
REPORT_FN void report_free_large(void *p) { free(p); NO_TAIL(); }
REPORT_FN void report_free_foreign(void) { char buf[64]; sink = buf; free(buf); NO_TAIL(); }
REPORT_FN void report_realloc_freed(void *p) { sink = realloc(p, 200); NO_TAIL(); }
REPORT_FN void report_usable_interior(char *p) { printf("%zu\n", malloc_usable_size(p + 16)); NO_TAIL(); }
REPORT_FN void report_free_interior(char *p) { free(p + 16); NO_TAIL(); }
REPORT_FN void *report_sampled_alloc(size_t n) { void *p = malloc(n); NO_TAIL(); return p; }
REPORT_FN void report_malloc_corrupt(void) { for (int i = 0; i < 1000; i++) sink = malloc(48); NO_TAIL(); }
REPORT_FN int report_touch_zero(volatile char *p) { int v = p[0]; NO_TAIL(); return v; }
REPORT_FN void report_write_far(volatile char *p, size_t i) { p[i] = 1; NO_TAIL(); }
static void cxx_delete_sized(void *p, size_t n);
REPORT_FN void report_delete_sized(void *p, size_t n) { cxx_delete_sized(p, n); NO_TAIL(); }

#if defined(__x86_64__)
/* call_with_bp(fn, arg, bp): fn(arg) from a frame whose CFA rule is rbp + 16
 * with rbp = bp, so that a stack walk through it reads at bp: a corrupt
 * stack, as a report must survive (report_walk_faults). */
__asm__(".text\n"
        ".globl call_with_bp\n"
        ".type call_with_bp,@function\n"
        "call_with_bp:\n"
        ".cfi_startproc\n"
        "push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "mov %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "mov %rdx, %rbp\n"
        "mov %rdi, %rax\n"
        "mov %rsi, %rdi\n"
        "call *%rax\n"
        "ud2\n"
        ".cfi_endproc\n"
        ".size call_with_bp, .-call_with_bp\n");
void call_with_bp(void (*fn)(void *), void *arg, uintptr_t bp);
static uintptr_t walk_bp;
static void free_twice_fn(void *p) { free(p); free(p); }
/* a thread on a stack of its own, under a no-access region: the corrupt
 * frame points 1 MiB into it */
static void *bad_stack_thread(void *p) {
    call_with_bp(free_twice_fn, p, walk_bp);
    return NULL;
}
static int report_walk_faults(void) {
    size_t stack = 1 << 20, above = 8 << 20;
    char *m = mmap(NULL, stack + above, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m, stack, PROT_READ | PROT_WRITE)) { printf("no stack\n"); return 3; }
    walk_bp = (uintptr_t)m + stack + (1 << 20);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstack(&a, m, stack);
    pthread_t t;
    void *p = malloc(40);
    if (pthread_create(&t, &a, bad_stack_thread, p)) { printf("no thread\n"); return 3; }
    pthread_join(t, NULL);
    return 0;
}
#else
static int report_walk_faults(void) { printf("x86-64 only\n"); return 3; }
#endif

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}
static void qsort_ptrs(void **v, size_t n) { qsort(v, n, sizeof *v, cmp_ptr); }

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(c, "sized_delete_wrong")) {      /* new(24), delete(p, 200): another class */
        void *p = cxx_new(24); sink = p;
        cxx_delete_sized(p, 200);
    } else if (!strcmp(c, "sized_delete_ok")) {  /* every size of each block's class passes */
        for (size_t n = 0; n <= 70000; n += (n < 4096 ? 1 : 97)) {
            void *p = cxx_new(n); sink = p;
            cxx_delete_sized(p, n);
        }
        puts("ok");
        return 0;
    } else if (!strcmp(c, "double_free")) {
        char *p = malloc(40); sink = p;
        free(p); free(p);
    } else if (!strcmp(c, "double_free_remote")) {
        char *p = alloc_in_thread(40);
        free(p); free(p);
    } else if (!strncmp(c, "reuse_", 6)) {
        /* a real double free of a block on a reused page is still reported
         * (the key confirmed on the page's lists, or trusted in another
         * thread): by its owner after a local free, after a remote free (the
         * page's remote list), after a remote free into a full page (the
         * heap's delayed list), by another thread, and by realloc */
        char *p = NULL;
        if (!strcmp(c, "reuse_other_thread")) {
            pthread_t t;
            pthread_create(&t, NULL, reused_in_thread_fn, NULL);
            pthread_join(t, (void **)&p);
        } else {
            p = reused_block();
        }
        if (!p) { printf("no block on reused memory\n"); return 3; }
        sink = p;
        if (!strcmp(c, "reuse_double_free") || !strcmp(c, "reuse_other_thread")) {
            free(p); free(p);
        } else if (!strcmp(c, "reuse_remote_then_owner")) {
            free_in_thread(p); free(p);
        } else if (!strcmp(c, "reuse_delayed_then_owner")) {
            /* p's page is full (its class's pages after it are too, but the
             * last two: hak_find_page moves exhausted pages to heap->full) */
            for (int i = 0; i < 8 * 65536 / 48; i++) sink = malloc(48);
            free_in_thread(p); free(p);
        } else if (!strcmp(c, "reuse_realloc_freed")) {
            free(p); sink = realloc(p, 200);
        } else {
            fprintf(stderr, "test_misuse: unknown case '%s'\n", c);
            return 2;
        }
    } else if (!strcmp(c, "written_after_free")) {
        /* a write after free over the block's key word: malloc stops before it
         * hands the block out (one block carved at a time from 4 KiB up) */
        char *keep = malloc(20000), *p = malloc(20000); sink = keep;
        free(p);
        memset(p, 0x41, 16);
        for (int i = 0; i < 4; i++) sink = malloc(20000);
    } else if (!strcmp(c, "overflow_into_free")) {
        /* an overflow past a block's usable size into the free block after it */
        char *a = malloc(20000), *b = malloc(20000), *keep = malloc(20000); sink = keep;
        if (b != a + malloc_usable_size(a)) { printf("blocks not adjacent\n"); return 3; }
        free(b);
        memset(a, 0x41, malloc_usable_size(a) + 16);
        for (int i = 0; i < 4; i++) sink = malloc(20000);
    } else if (!strcmp(c, "large_overflow") || !strcmp(c, "large_overflow_realloc") ||
               !strcmp(c, "large_overflow_remote")) {
        /* one byte past a large block's size: its canary (the usable size
         * is the size asked for) */
        char *p = malloc(100000); sink = p;
        if (malloc_usable_size(p) != 100000) { printf("usable %zu\n", malloc_usable_size(p)); return 3; }
        char *volatile end = p + 100000;   /* (no -Warray-bounds) */
        *end = 0x41;
        if (!strcmp(c, "large_overflow")) free(p);
        else if (!strcmp(c, "large_overflow_realloc")) sink = realloc(p, 300000);
        else free_in_thread(p);
    } else if (!strcmp(c, "large_underflow") || !strcmp(c, "large_underflow_prev")) {
        /* one byte before a block that starts its span: the canary at the
         * end of the span before (256 KiB blocks: a span of 5 slices, the
         * last 32 KiB unused), found at the block's free or at the free of
         * the block before */
        char *a = malloc(262144), *b = malloc(262144); sink = a;
        if (b != a + 5 * 65536) { printf("spans not adjacent\n"); return 3; }
        char *volatile before = b - 1;   /* (no -Warray-bounds) */
        *before = 0x41;
        if (!strcmp(c, "large_underflow")) free(b);
        else free(a);
    } else if (!strcmp(c, "large_sized_delete_wrong")) {   /* a large block knows its size */
        void *p = cxx_new(100000); sink = p;
        cxx_delete_sized(p, 100016);
    } else if (!strcmp(c, "large_ok")) {
        /* correct use of large blocks is never reported: every usable byte
         * written, sizes at and around each class's size, the largest
         * (2 MiB: no room for a canary), aligned blocks, realloc that keeps,
         * grows and shrinks, sized deletes, frees from another thread */
        static const size_t sizes[] = { 65537, 72 * 1024, 73736, 100000, 262144, 262145, 294904, 1048576,
                                        2097144, 2097145, 2097152 - 16, 2097152 };
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t n = sizes[i];
            char *p = malloc(n), *q = malloc(n);
            if (!p || !q || malloc_usable_size(p) < n) { printf("malloc %zu\n", n); return 1; }
            memset(p, 0x5a, malloc_usable_size(p));
            memset(q, 0x5b, malloc_usable_size(q));
            p = realloc(p, n - 1000);
            p = realloc(p, n + 5000);
            if (!p || p[0] != 0x5a || p[n - 1001] != 0x5a) { printf("realloc %zu\n", n); return 1; }
            memset(p, 0x5c, malloc_usable_size(p));
            p = realloc(p, malloc_usable_size(p));
            memset(p, 0x5d, malloc_usable_size(p));
            free(p);
            free_in_thread(q);
            void *d = cxx_new(n); sink = d;
            memset(d, 1, malloc_usable_size(d));
            cxx_delete_sized(d, n);
            for (size_t align = 4096; align <= 262144; align *= 4) {
                void *a = aligned_alloc(align, n);
                if (!a || (uintptr_t)a % align != 0 || malloc_usable_size(a) < n) { printf("aligned %zu\n", n); return 1; }
                memset(a, 0x5e, malloc_usable_size(a));
                free(a);
            }
            char *z = calloc(1, n);
            memset(z, 0x5f, malloc_usable_size(z));
            free(z);
        }
        puts("ok");
        return 0;
    } else if (!strcmp(c, "zero_read")) {       /* malloc(0)'s block faults when read */
        volatile char *p = malloc(0); sink = (void *)p;
        printf("SURVIVED %d\n", p[0]);
    } else if (!strcmp(c, "zero_write")) {
        char *p = calloc(0, 1); sink = p;
        ((volatile char *)p)[0] = 1;
    } else if (!strcmp(c, "zero_double_free")) {
        char *p = malloc(0); sink = p;
        free(p); free(p);
    } else if (!strcmp(c, "zero_ok")) {         /* zero-size blocks in correct use */
        enum { LIVE = 300000 };   /* more than the region has slots */
        void **z = malloc(LIVE * sizeof *z);
        for (int i = 0; i < LIVE; i++) {
            z[i] = malloc(0);
            if (!z[i]) { printf("malloc(0) %d: NULL\n", i); return 1; }
        }
        qsort_ptrs(z, LIVE);
        for (int i = 1; i < LIVE; i++)
            if (z[i] == z[i - 1]) { printf("malloc(0) twice %p\n", z[i]); return 1; }
        for (int i = 0; i < LIVE; i++) free(z[i]);
        free(z);
        char *p = malloc(0);
        if (malloc_usable_size(p) != 0) { printf("usable %zu\n", malloc_usable_size(p)); return 1; }
        p = realloc(p, 10);                   /* moves to an ordinary block */
        memset(p, 1, 10);
        free(p);
        void *a = NULL;
        if (posix_memalign(&a, 256, 0) || !a || (uintptr_t)a % 256) { printf("memalign(256, 0) %p\n", a); return 1; }
        free(a);
        a = aligned_alloc(4096, 0);            /* beyond the region's alignments: ordinary */
        if (!a || (uintptr_t)a % 4096) { printf("aligned_alloc(4096, 0) %p\n", a); return 1; }
        free(a);
        p = realloc(NULL, 0);
        if (!p) { printf("realloc(NULL, 0) NULL\n"); return 1; }
        free(p);
        free_in_thread(malloc(0));             /* a free from another thread */
        p = cxx_new(0);
        cxx_delete_sized(p, 0);
        puts("ok");
        return 0;
    } else if (!strcmp(c, "corrupt_list_double_free")) {
        /* a double free whose confirmation walks into a link the program
         * overwrote after a free: reported as what it is */
        char **a = malloc(48), **b = malloc(48), *keep = malloc(48); sink = keep;
        free(a); free(b);                 /* local_free: b -> a */
        *b = (char *)0x10;                /* write after free */
        free(a);
    } else if (!strcmp(c, "double_free_large")) {
        char *p = malloc(100000); sink = p;
        free(p); free(p);
    } else if (!strcmp(c, "double_free_medium")) {
        /* medium pages: local frees take the slow path's local branch */
        char *keep = malloc(20000), *p = malloc(20000); sink = keep;
        free(p); free(p);
    } else if (!strcmp(c, "interior_medium")) {
        char *p = malloc(20000); sink = p;
        free(p + 4096);
    } else if (!strcmp(c, "segment_header")) {
        /* the header of a small segment (its first 64 KiB, never a page) */
        char *p = malloc(40); sink = p;
        free((char *)((uintptr_t)p & ~(uintptr_t)((4 << 20) - 1)) + 256);
    } else if (!strcmp(c, "foreign_stack")) {
        char buf[64]; sink = buf;
        free(buf);
    } else if (!strcmp(c, "foreign_static")) {
        static char buf[64]; sink = buf;
        free(buf + 16);
    } else if (!strcmp(c, "interior")) {
        char *p = malloc(100); sink = p;
        free(p + 16);
    } else if (!strcmp(c, "interior_huge")) {
        char *p = malloc(16 << 20); sink = p;
        free(p + (8 << 20));
    } else if (!strcmp(c, "aligned_interior") || !strcmp(c, "aligned_before") ||
               !strcmp(c, "aligned_double_free") || !strcmp(c, "aligned_ok")) {
        /* an aligned block at an interior offset of its block: an alignment
         * up to 64 KiB takes a block of a class whose blocks are all aligned
         * (hak_aligned_plain), a larger one a block with room for an aligned
         * pointer -- here the process's first large block (a 144 KiB block
         * 64 KiB into a fresh large segment, not 128 KiB-aligned), handed
         * out at the interior pointer q */
        char *first = malloc(1000); sink = first;
        char *q = aligned_alloc(128 * 1024, 1000);
        if (!q || ((uintptr_t)q & (128 * 1024 - 1))) { printf("aligned_alloc failed\n"); return 3; }
        size_t usable = malloc_usable_size(q);
        if (usable < 1000 || usable >= 144 * 1024) { printf("not an interior pointer: usable %zu\n", usable); return 3; }
        memset(q, 0x5a, 1000);
        if (!strcmp(c, "aligned_interior")) free(q + 128);
        else if (!strcmp(c, "aligned_before")) free(q - 16);        /* the block's start or inside it */
        else if (!strcmp(c, "aligned_double_free")) { free(q); free(q); }
        else {
            /* every alignment, freed and reallocated through the checked path */
            void *keep[64];
            for (int i = 0; i < 64; i++) {
                keep[i] = aligned_alloc((size_t)32 << (i % 10), (size_t)(i * 37 + 1));
                if (!keep[i] || ((uintptr_t)keep[i] & (((size_t)32 << (i % 10)) - 1))) { printf("bad\n"); return 3; }
                memset(keep[i], i, (size_t)(i * 37 + 1));
            }
            for (int i = 0; i < 64; i += 2) keep[i] = realloc(keep[i], 5000);
            for (int i = 0; i < 64; i++) free(keep[i]);
            free(q);
            printf("ok\n");
            return 0;
        }
    } else if (!strcmp(c, "freed_key")) {
        /* what a freed block shows: its key word must not be an address in
         * hakmem's memory (the page descriptor's, before the fix) */
        uintptr_t *p = malloc(40), *keep = malloc(40); sink = keep;
        free(p);
        uintptr_t key = ((volatile uintptr_t *)p)[1], seg = (uintptr_t)p & ~(uintptr_t)((4 << 20) - 1);
        printf("%s key=%lx\n", key >= seg && key < seg + (4 << 20) ? "key_leaks" : "key_ok", (unsigned long)key);
        return 0;
    } else if (!strcmp(c, "realloc_foreign")) {
        char buf[64]; sink = buf;
        sink = realloc(buf, 100);
    } else if (!strcmp(c, "realloc_freed")) {
        char *p = malloc(64); sink = p;
        free(p);
        sink = realloc(p, 200);
    } else if (!strcmp(c, "usable_foreign")) {
        char buf[64]; sink = buf;
        printf("%zu\n", malloc_usable_size(buf));
    } else if (!strcmp(c, "usable_interior")) {
        /* malloc_usable_size's quick check (a carved block's start) fails:
         * the complete check reports the pointer */
        char *p = malloc(100), *keep = malloc(100); sink = keep;
        printf("%zu\n", malloc_usable_size(p + 16));
    } else if (!strcmp(c, "corrupt_freelist")) {
        /* use-after-free write: smash a free block's link, then allocate */
        char **p = malloc(48);
        free(p);
        *p = (char *)0x10;
        for (int i = 0; i < 1000; i++) sink = malloc(48);
        printf("no fault\n");
        return 3;
    } else if (!strcmp(c, "own_handler_outside")) {
        signal(SIGSEGV, on_segv);
        *(volatile int *)sink = 1;        /* sink is NULL: a fault outside hakmem */
        return 3;
    } else if (!strcmp(c, "own_handler_inside")) {
        signal(SIGSEGV, on_segv);
        char **p = malloc(48);
        free(p);
        *p = (char *)0x10;
        for (int i = 0; i < 1000; i++) sink = malloc(48);
        return 3;
    } else if (!strcmp(c, "thread_generations")) {
        /* heaps must be reused, not stranded: print how many were created */
        static void *blocks[64];
        for (int i = 0; i < 64; i++) blocks[i] = malloc(48);
        pthread_attr_init(&gen_attr);
        pthread_attr_setdetachstate(&gen_attr, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        pthread_create(&t, &gen_attr, generation, blocks);
        pthread_mutex_lock(&gen_mu);
        while (gen_left != -1) pthread_cond_wait(&gen_cv, &gen_mu);
        pthread_mutex_unlock(&gen_mu);
        usleep(100000);   /* let the last detached thread finish exiting */
        for (int i = 0; i < 64; i++) free(blocks[i]);
        typedef struct { uint64_t v[14]; } prefix_t;   /* hakmem_stats_t starts with 14 counters */
        static uint64_t st[4096];
        int (*get)(void *, size_t) = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "hakmem_stats_get");
        if (!get || get(st, sizeof st) != 0) { printf("no hakmem_stats_get\n"); return 3; }
        (void)sizeof(prefix_t);
        printf("heaps_created=%llu heaps_adopted=%llu\n", (unsigned long long)st[10], (unsigned long long)st[11]);
        return 0;
    } else if (!strcmp(c, "report_double_free")) {
        char *p = malloc(40); sink = p;
        report_free_twice(p);
    } else if (!strcmp(c, "report_malloc")) {   /* found by malloc: a write after free */
        char *keep = malloc(20000), *p = malloc(20000); sink = keep;
        free(p);
        memset(p, 0x41, 16);
        report_malloc_after_write(20000);
    } else if (!strcmp(c, "report_large")) {    /* a large block's canary, found by free */
        char *p = malloc(100000); sink = p;
        char *volatile end = p + 100000;
        *end = 0x41;
        report_free_large(p);
    } else if (!strcmp(c, "report_foreign")) {
        report_free_foreign();
    } else if (!strcmp(c, "report_realloc")) {
        char *p = malloc(64); sink = p;
        free(p);
        report_realloc_freed(p);
    } else if (!strcmp(c, "report_usable")) {
        char *p = malloc(100), *keep = malloc(100); sink = keep;
        report_usable_interior(p);
    } else if (!strcmp(c, "report_delete")) {
        void *p = cxx_new(24); sink = p;
        report_delete_sized(p, 200);
    } else if (!strcmp(c, "report_sampled")) {   /* HAKMEM_SAMPLE_BYTES=1: every block sampled */
        sink = malloc(1);                         /* (a thread's first allocation is never sampled) */
        char *p = report_sampled_alloc(100); sink = p;
        report_free_interior(p);
    } else if (!strcmp(c, "report_crash")) {     /* a smashed free list faults inside malloc */
        char **p = malloc(48);
        free(p);
        *p = (char *)0x10;
        report_malloc_corrupt();
        printf("no fault\n");
        return 3;
    } else if (!strcmp(c, "report_zero")) {
        volatile char *p = malloc(0); sink = (void *)p;
        printf("SURVIVED %d\n", report_touch_zero(p));
    } else if (!strcmp(c, "report_far")) {     /* 1 MiB past a block, past its segment's reach */
        volatile char *p = malloc(100); sink = (void *)p;
        report_write_far(p, 100 + ((size_t)1 << 20));
    } else if (!strcmp(c, "report_walk_faults")) {
        return report_walk_faults();
    } else if (!strcmp(c, "ok")) {
        for (int i = 0; i < 1000; i++) { sink = malloc((size_t)i * 7 + 1); free(sink); }
        printf("ok\n");
        return 0;
    } else {
        fprintf(stderr, "test_misuse: unknown case '%s'\n", c);
        return 2;
    }
    printf("SURVIVED\n");
    return 0;
}
