/* test_purger_exit.c -- a process whose last thread of its own ends must
 * exit, background purger or not (issue 28).  Linux ends a process when its
 * last thread ends; a helper thread the allocator started and never ends
 * would keep it alive for ever.
 *
 * usage: test_purger_exit [-p PREFIX] [-t TEST]
 *   main_pthread_exit  main starts 8 threads that malloc and free (small to
 *                      huge blocks) and ends with pthread_exit; once those
 *                      threads end, the process must exit with status 0
 *   fork_from_thread   a thread other than main forks; the child's only
 *                      thread mallocs and frees, then returns from its start
 *                      routine: the child must exit with status 0
 * Meant for HAKMEM_BACKGROUND_PURGE=1 (tests/suite_hangs.sh); passes on any
 * allocator.  Each case runs in a child process with a deadline
 * (tests/deadline.h); a process that does not exit is killed and reported.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "deadline.h"

#define DEADLINE_S 10   /* a correct run takes well under a second */

/* malloc, write and free blocks of sizes that dirty pages of every kind
 * (small, medium, large, huge); returns 0, or -1 if a malloc failed */
static int churn(unsigned seed)
{
    static const size_t sizes[] = { 16, 100, 1000, 20000, 200000, 3u << 20, 9u << 20 };
    enum { N = sizeof sizes / sizeof sizes[0], REP = 8 };
    void *p[N * REP];
    for (int r = 0; r < REP; r++)
        for (int i = 0; i < N; i++) {
            size_t sz = sizes[i] + seed % 13;
            if (!(p[r * N + i] = malloc(sz)))
                return -1;
            memset(p[r * N + i], (int)seed, sz);
        }
    for (int i = 0; i < N * REP; i++)
        free(p[i]);
    return 0;
}

/* ---- main_pthread_exit ---- */

static void *worker(void *arg)
{
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);          /* mostly after main has ended */
    if (churn((unsigned)(uintptr_t)arg) != 0) {
        dl_reason("malloc failed");
        exit(1);
    }
    return NULL;
}

static void run_main_pthread_exit(void)
{
    for (uintptr_t i = 0; i < 8; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, (void *)i) != 0) {
            dl_reason("pthread_create failed");
            exit(1);
        }
        pthread_detach(t);
    }
    pthread_exit(NULL);            /* the process exits (0) with its last thread */
}

static void test_main_pthread_exit(void)
{
    dl_run(run_main_pthread_exit, DEADLINE_S,
           "the main thread ended with pthread_exit, the threads it started ended, the process stayed");
}

/* ---- fork_from_thread ---- */

static void *forking_thread(void *arg)
{
    pid_t pid = fork();
    if (pid < 0)
        return (void *)1;
    if (pid == 0) {
        /* the child: this thread is its only one; it ends by returning */
        if (churn(7) != 0)
            _exit(1);
        return NULL;
    }
    int st = 0;
    if (!dl_wait(pid, DEADLINE_S - 2, &st)) {
        dl_kill(pid);
        dl_reason("hung: the forked child still ran 8 s after its only thread returned (killed)");
        return (void *)2;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        dl_reason("the forked child did not exit with status 0");
        return (void *)3;
    }
    return NULL;
}

static void run_fork_from_thread(void)
{
    pthread_t t;
    void *r = (void *)1;
    if (pthread_create(&t, NULL, forking_thread, NULL) != 0 || pthread_join(t, &r) != 0)
        exit(1);
    exit((int)(uintptr_t)r);
}

static void test_fork_from_thread(void)
{
    dl_run(run_fork_from_thread, DEADLINE_S, "fork from a thread, the child's only thread returned");
}

int main(int argc, char **argv)
{
    if (chk_parse_options(argc, argv))
        return 2;
    RUN_TEST(main_pthread_exit);
    RUN_TEST(fork_from_thread);
    return check_exit_code();
}
