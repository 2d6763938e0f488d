/* test_loader_lock.c -- a sampled allocation never waits for the dynamic
 * loader's locks (issue 36).  A heap profile's sample (HAKMEM_SAMPLE_BYTES)
 * and a guarded block (HAKMEM_GUARD_SAMPLE) record the allocation's stack
 * inside malloc, and a guarded block's free records the free's.  A walk that
 * takes one of the loader's locks (dl_iterate_phdr takes its write lock;
 * dlopen, dlsym and dladdr its main lock) deadlocks with another thread that
 * holds that lock and waits for something the allocating thread holds: here
 * a mutex of the program's, as a registry of loaded modules might.
 *
 * usage: test_loader_lock [-p PREFIX] [-t TEST] [--expect-hakmem|--expect-glibc]
 *                         [--plugin PATH]
 *   mutex    thread A, for 1 s: lock the program's mutex M, malloc, calloc,
 *            realloc and free, unlock M; thread B meanwhile: dl_iterate_phdr
 *            over and over, its callback locking and unlocking M.  A walk
 *            that takes the loader's write lock while A holds M deadlocks
 *            with B's callback, which holds the write lock and waits for M.
 *   iterate  thread B stays inside a dl_iterate_phdr callback (the write lock
 *            held) until thread A has made 2,000 rounds of allocations and
 *            frees, and one more block (777 bytes, from site_keep) it keeps.
 *   dlopen   the same with thread B in the constructor of the plug-in PATH
 *            (tests/loader_plugin.c) it dlopens: the loader's main lock held.
 *            (Skipped without --plugin.)
 * With --expect-hakmem, "iterate" and "dlopen" also check that the kept block
 * was sampled with its stack, taken while B held the lock: with
 * HAKMEM_SAMPLE_BYTES set, a profile dump has a sample of 777 bytes (a few
 * more in the hardened build) whose stack holds a return address inside
 * site_keep; with HAKMEM_GUARD_SAMPLE set, the
 * block is guarded (its usable size is exactly 777).
 * Run with every allocation sampled (HAKMEM_SAMPLE_BYTES=1 or
 * HAKMEM_GUARD_SAMPLE=1, tests/suite_loader.sh).  Each case runs in a child
 * process with a deadline (tests/deadline.h): a deadlock is a FAIL line
 * ("hung"), not a hang of the suite.  Passes on glibc's malloc
 * (--expect-glibc), which proves the test sound.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "deadline.h"

#define DEADLINE_S 15      /* a correct run of a case takes about a second */
#define ROUNDS     2000    /* A's rounds while B holds a lock */
#define KEEP_SIZE  777     /* the kept block: a size no other allocation here has */

static const char *plugin_path;
static pthread_mutex_t prog_mutex = PTHREAD_MUTEX_INITIALIZER;   /* "M" */
static _Atomic int b_holds;     /* B is inside the callback / the constructor */
static _Atomic int a_done;      /* A has finished its allocations */
static void *kept;              /* A's kept block */

static void fail_child(const char *why)
{
    dl_reason(why);
    exit(1);
}

static void pause_ms(long ms)
{
    struct timespec ts = { 0, ms * 1000 * 1000 };
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* the allocation sites, functions of their own (so that a stack names them) */
__attribute__((noinline)) void *site_keep(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");   /* not a tail call: site_keep stays on the stack */
    return p;
}
__attribute__((noinline)) static void site_round(unsigned i)
{
    char *p = malloc(16 + i % 200);
    char *q = calloc(1, 300 + i % 700);
    if (!p || !q)
        fail_child("malloc or calloc failed");
    p[0] = 1;
    char *r = realloc(p, 3000 + i % 5000);
    if (!r || r[0] != 1)
        fail_child("realloc failed or lost the contents");
    free(r);
    free(q);
}

/* ---- mutex: the program's mutex taken around allocations and in B's callback ---- */

static int lock_m_step(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info; (void)size; (void)arg;
    pthread_mutex_lock(&prog_mutex);
    pthread_mutex_unlock(&prog_mutex);
    return 0;   /* every object */
}

static void *iterate_until_done(void *arg)
{
    (void)arg;
    while (!atomic_load(&a_done))
        dl_iterate_phdr(lock_m_step, NULL);
    return NULL;
}

static void run_mutex(void)
{
    pthread_t b;
    if (pthread_create(&b, NULL, iterate_until_done, NULL) != 0)
        fail_child("pthread_create failed");
    double end = now_s() + 1.0;
    for (unsigned i = 0; now_s() < end; i++) {
        pthread_mutex_lock(&prog_mutex);
        site_round(i);
        pthread_mutex_unlock(&prog_mutex);
    }
    atomic_store(&a_done, 1);
    pthread_join(b, NULL);
}

static void test_mutex(void)
{
    dl_run(run_mutex, DEADLINE_S,
           "thread A allocating under the program's mutex M, thread B in dl_iterate_phdr whose callback takes M");
}

/* ---- iterate, dlopen: A allocates while B holds a lock of the loader's ---- */

static void *allocate_while_held(void *arg)
{
    (void)arg;
    while (!atomic_load(&b_holds))
        pause_ms(1);
    free(malloc(8));   /* the thread's first allocation (never sampled: it draws the first interval) */
    kept = site_keep(KEEP_SIZE);
    if (!kept)
        fail_child("malloc failed");
    for (unsigned i = 0; i < ROUNDS; i++)
        site_round(i);
    atomic_store(&a_done, 1);
    return NULL;
}

/* B's side: the lock is held here until A is done */
static void hold_until_done(void)
{
    atomic_store(&b_holds, 1);
    while (!atomic_load(&a_done))
        pause_ms(1);
}

static int hold_step(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info; (void)size; (void)arg;
    hold_until_done();
    return 1;
}

/* called by the plug-in's constructor (tests/loader_plugin.c) */
__attribute__((visibility("default"))) void loader_test_in_ctor(void)
{
    hold_until_done();
}

/* the kept block was sampled, with its stack (the sample was taken while B
 * held the lock) */
static void check_kept(void)
{
    if (chk_expect_hakmem != 1)
        return;
    if (getenv("HAKMEM_GUARD_SAMPLE") && malloc_usable_size(kept) != KEEP_SIZE)
        fail_child("HAKMEM_GUARD_SAMPLE: the kept block is not guarded (usable size not its size)");
    if (!getenv("HAKMEM_SAMPLE_BYTES"))
        return;
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hakmem_profile_dump");
    if (!dump)
        fail_child("hakmem_profile_dump not found (hakmem not preloaded?)");
    char path[] = "/tmp/test_loader_lock.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        fail_child("mkstemp failed");
    close(fd);
    if (dump(path) != 0) {
        unlink(path);
        fail_child("hakmem_profile_dump failed");
    }
    FILE *f = fopen(path, "r");
    unlink(path);
    if (!f)
        fail_child("cannot read the dump");
    char line[4096];
    int samples = 0, with_site = 0;
    uintptr_t lo = (uintptr_t)site_keep, hi = lo + 256;   /* site_keep is much shorter */
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "MAPPED_LIBRARIES:", 17))
            break;
        unsigned long size = 0;
        char *at = strstr(line, "] @");
        /* (the hardened build samples the block with its trailer: 8 bytes more) */
        if (!at || sscanf(line, " %*d: %lu", &size) != 1 || size < KEEP_SIZE || size > KEEP_SIZE + 32)
            continue;
        samples++;
        for (char *s = at + 3, *end; *s && *s != '\n'; s = end) {
            uintptr_t a = (uintptr_t)strtoull(s, &end, 16);
            if (end == s)
                break;
            if (a > lo && a < hi) {
                with_site++;
                break;
            }
        }
    }
    fclose(f);
    if (samples == 0)
        fail_child("HAKMEM_SAMPLE_BYTES: the kept block is not in the profile");
    if (with_site == 0)
        fail_child("HAKMEM_SAMPLE_BYTES: the kept block's sample has no frame in site_keep (no stack)");
}

static void run_held(void *(*b_fn)(void *))
{
    pthread_t a, b;
    if (pthread_create(&a, NULL, allocate_while_held, NULL) != 0 ||
        pthread_create(&b, NULL, b_fn, NULL) != 0)
        fail_child("pthread_create failed");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    check_kept();
    free(kept);
}

static void *iterate_holding(void *arg)
{
    (void)arg;
    dl_iterate_phdr(hold_step, NULL);
    return NULL;
}
static void run_iterate(void) { run_held(iterate_holding); }

static void test_iterate(void)
{
    dl_run(run_iterate, DEADLINE_S,
           "thread A allocating while thread B holds the loader's write lock (in a dl_iterate_phdr callback)");
}

static void *dlopen_holding(void *arg)
{
    (void)arg;
    void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fail_child(dlerror());
    dlclose(h);
    return NULL;
}
static void run_dlopen(void) { run_held(dlopen_holding); }

static void test_dlopen(void)
{
    if (!plugin_path)
        SKIP_TEST("no --plugin");
    dl_run(run_dlopen, DEADLINE_S,
           "thread A allocating while thread B holds the loader's lock (in a constructor run by dlopen)");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (chk_common_option(argc, argv, &i))
            continue;
        if (!strcmp(argv[i], "--plugin") && i + 1 < argc) {
            plugin_path = argv[++i];
            continue;
        }
        fprintf(stderr, "usage: %s [-p PREFIX] [-t TEST] [--expect-hakmem|--expect-glibc] [--plugin PATH]\n",
                argv[0]);
        return 2;
    }
    RUN_TEST(mutex);
    RUN_TEST(iterate);
    RUN_TEST(dlopen);
    return check_exit_code();
}
