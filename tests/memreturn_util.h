/* memreturn_util.h -- what the memory-return tests (test_memreturn.c,
 * test_large_spans.c) share: their headers, units and globals, the
 * environment a test runs under, pattern fills, a function run in a forked
 * child whose stderr comes back, and the double free every kept page must
 * still report.  Include it first (after _GNU_SOURCE). */
#ifndef HAK_TEST_MEMRETURN_UTIL_H
#define HAK_TEST_MEMRETURN_UTIL_H

#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"
#include "pattern.h"
#include "../include/hakmem.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* set by test_start */
static int expect_hakmem;
static hak_owns_fn_t owns;
static const char *only;

__attribute__((unused)) static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

__attribute__((unused)) static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    return s && *s ? atol(s) : dflt;
}

/* the settings under which the background purger gives an idle thread's
 * memory back within a test's wait: HAKMEM_BACKGROUND_PURGE=1, a purge
 * delay of 1..1000 ms, MADV_DONTNEED */
__attribute__((unused)) static int purger_testable(long delay)
{
    return env_long("HAKMEM_BACKGROUND_PURGE", 0) == 1 && delay > 0 && delay <= 1000 &&
           !env_long("HAKMEM_PURGE_LAZY", 0);
}

__attribute__((unused)) static int profile_is(const char *p)
{
    const char *s = getenv("HAKMEM_PROFILE");
    return strcmp(s && *s ? s : "balanced", p) == 0;
}

/* the purge delay of the profile the test runs under (HAKMEM_PURGE_DELAY_MS
 * or the profile's default) */
__attribute__((unused)) static long purge_delay(void)
{
    return env_long("HAKMEM_PURGE_DELAY_MS", profile_is("speed") ? 1000 : profile_is("lean") ? 0 : 250);
}

/* every byte of every page, so RSS counts the whole block */
__attribute__((unused)) static void fill(void *p, size_t n, uint64_t tag) { pat_fill(p, n, pat_seed(p, n, tag)); }
__attribute__((unused)) static int intact(const void *p, size_t n, uint64_t tag)
{
    return pat_check(p, n, pat_seed(p, n, tag)) == PAT_OK;
}

/* fn(arg) in a forked child; its stderr in err; returns the wait status */
__attribute__((unused)) static int in_child(void (*fn)(void *), void *arg, char *err, size_t errlen)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 2);
        close(pfd[0]);
        fn(arg);
        _exit(0);
    }
    close(pfd[1]);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < errlen && (k = read(pfd[0], err + got, errlen - 1 - got)) > 0)
        got += (size_t)k;
    err[got] = 0;
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

/* a block of *(size_t *)arg bytes, written, freed twice (its page empties
 * at the first free: kept, or cached) */
__attribute__((unused)) static void free_twice(void *arg)
{
    size_t size = *(size_t *)arg;
    char *p = malloc(size);
    memset(p, 1, size);
    free(p);
    free(p);
}

/* For each size: a double free aborts the child with a double-free report. */
__attribute__((unused)) static void check_double_free_reported(const size_t *sizes, size_t n)
{
    char err[4096];
    for (size_t i = 0; i < n; i++) {
        size_t s = sizes[i];
        int st = in_child(free_twice, &s, err, sizeof err);
        CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "double free of a %zu-byte block: status %#x", s, st);
        CHECKF(strstr(err, "double free") != NULL, "no double-free report for %zu bytes: %s", s, err);
    }
}

/* An idle thread's memory goes back: with the background purger, wait up
 * to 40 purge delays for RSS to fall to goal KiB; else call malloc_trim(0).
 * Returns the RSS then. */
__attribute__((unused)) static long rss_after_release(int purger, long delay, long goal)
{
    long after = rss_kib();
    if (purger) {
        for (int i = 0; i < 40 && after > goal; i++) {
            sleep_ms(delay);
            after = rss_kib();
        }
    } else {
        malloc_trim(0);
        after = rss_kib();
    }
    return after;
}

/* A thread that keeps pages for a test: it signals done when its blocks are
 * out (and again when they are freed), and waits for go. */
typedef struct keeper_s {
    sem_t go, done;
    int bad;
} keeper_t;

/* Start fn(k) after malloc_trim(0) and wait for its first done; returns the
 * RSS from before it started.  keeper_stop ends it. */
__attribute__((unused)) static long keeper_start(keeper_t *k, void *(*fn)(void *), pthread_t *tid)
{
    memset(k, 0, sizeof *k);
    sem_init(&k->go, 0, 0);
    sem_init(&k->done, 0, 0);
    malloc_trim(0);
    long base = rss_kib();
    CHECK(pthread_create(tid, NULL, fn, k) == 0);
    sem_wait(&k->done);
    return base;
}

__attribute__((unused)) static void keeper_stop(keeper_t *k, pthread_t tid)
{
    sem_post(&k->go);
    pthread_join(tid, NULL);
    sem_destroy(&k->go);
    sem_destroy(&k->done);
}

/* A test program's start: its arguments (-p PREFIX, --expect-hakmem, --only
 * NAME; 2 after printing the usage), then, with --expect-hakmem, the proof
 * that hakmem serves the allocations (1 after printing a FAIL line).  0:
 * run the tests, with RUN(name). */
__attribute__((unused)) static int test_start(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc)
            chk_prefix = argv[++i];
        else if (!strcmp(argv[i], "--expect-hakmem"))
            expect_hakmem = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-p PREFIX] [--expect-hakmem] [--only NAME]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    owns = hak_find_owns();
    if (expect_hakmem && !owns) {
        printf("FAIL %s.served: hakmem is not the allocator\n", chk_prefix);
        return 1;
    }
    return 0;
}

#define RUN(name)                                                             \
    do {                                                                      \
        if (!only || !strcmp(only, #name))                                    \
            RUN_TEST(name);                                                   \
    } while (0)

#endif /* HAK_TEST_MEMRETURN_UTIL_H */
