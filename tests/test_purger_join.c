/* test_purger_join.c -- pthread_join of many threads must not hang with the
 * background purger on (issue 28).
 *
 * usage: test_purger_join [-p PREFIX] [-t TEST]
 *   join_idle    600 threads that allocate nothing are started, then all
 *                joined.  glibc frees a joined thread's TLS vector (a block
 *                malloc'ed by the creating thread) with free() while it
 *                holds its stack-cache lock; a free that starts the purger
 *                thread there calls pthread_create, which takes that lock.
 *   join_alloc   the same with threads that malloc blocks of several sizes
 *                (small to huge) and write them; main frees them after the
 *                joins.  (Threads that also free blocks themselves start the
 *                purger from their own frees, outside glibc's lock, before
 *                any join: that variant cannot fail today, so it is not here.)
 * Meant for HAKMEM_BACKGROUND_PURGE=1 (tests/suite_hangs.sh); passes on any
 * allocator.  Each case runs in a child process with a deadline
 * (tests/deadline.h): a hang is a FAIL, not a stalled test.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "deadline.h"

#define NTHREADS 600
#define DEADLINE_S 10   /* a correct run takes well under a second */

static void *idle_thread(void *arg)
{
    return arg;
}

static const size_t sizes[] = { 24, 200, 3000, 40000, 300000, 3u << 20 };
#define NSIZES (sizeof sizes / sizeof sizes[0])
static void *blocks[NTHREADS][NSIZES];

static void *alloc_thread(void *arg)
{
    uintptr_t k = (uintptr_t)arg;
    for (size_t i = 0; i < NSIZES; i++) {
        blocks[k][i] = malloc(sizes[i] + k % 7);
        if (!blocks[k][i])
            return (void *)1;
        memset(blocks[k][i], (int)k, sizes[i] < 64 ? sizes[i] : 64);
    }
    return NULL;
}

/* start all, then join all; exit 1 on any error (the parent reports it) */
static void start_and_join(void *(*fn)(void *))
{
    static pthread_t t[NTHREADS];
    for (uintptr_t i = 0; i < NTHREADS; i++) {
        int rc = pthread_create(&t[i], NULL, fn, (void *)i);
        if (rc) {
            dl_reason("pthread_create failed");
            exit(1);
        }
    }
    int bad = 0;
    for (int i = 0; i < NTHREADS; i++) {
        void *r = (void *)1;
        if (pthread_join(t[i], &r) != 0 || (fn == alloc_thread && r != NULL))
            bad++;
    }
    if (bad) {
        dl_reason("threads failed to join or to allocate");
        exit(1);
    }
    for (int i = 0; i < NTHREADS; i++)
        for (size_t j = 0; j < NSIZES; j++)
            free(blocks[i][j]);
}

static void run_idle(void) { start_and_join(idle_thread); }
static void run_alloc(void) { start_and_join(alloc_thread); }

static void test_join_idle(void)
{
    dl_run(run_idle, DEADLINE_S, "starting and joining 600 threads that allocate nothing");
}

static void test_join_alloc(void)
{
    dl_run(run_alloc, DEADLINE_S, "starting and joining 600 threads that malloc");
}

int main(int argc, char **argv)
{
    if (chk_parse_options(argc, argv))
        return 2;
    RUN_TEST(join_idle);
    RUN_TEST(join_alloc);
    return check_exit_code();
}
