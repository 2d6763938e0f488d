/* test_fork_signal.c -- fork() from a signal handler must not hang, even
 * when the signal interrupts the allocator (issue 28).  POSIX lists fork
 * among the async-signal-safe functions (until POSIX.1-2024); glibc's
 * malloc copes with it.  An allocator whose fork handler takes its own locks
 * unconditionally deadlocks when the interrupted code already holds one.
 *
 * usage: test_fork_signal [-p PREFIX] [-t TEST] [-s SECONDS]
 *   huge_trim_fork   a single-threaded program; a SIGALRM handler (an
 *                    interval timer, every 0.5 ms) forks, the child _exits
 *                    at once, the handler waits for it; meanwhile the main
 *                    loop mallocs, writes and frees huge blocks (> 2 MiB),
 *                    calls malloc_trim(0) and forks itself, for SECONDS
 *                    (default 3); it must end, with every child reaped
 * The case runs in a child process with a deadline (tests/deadline.h).
 */
#define _GNU_SOURCE 1
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "check.h"
#include "deadline.h"

static double run_seconds = 3.0;
static volatile sig_atomic_t handler_forks, handler_errors;

static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid < 0) {
        handler_errors++;
    } else {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            handler_errors++;
        handler_forks++;
    }
    errno = saved;
}

static void run_huge_trim_fork(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { { 0, 500 }, { 0, 500 } };
    setitimer(ITIMER_REAL, &it, NULL);

    double end = dl_now() + run_seconds;
    unsigned long rounds = 0, own_forks = 0;
    int bad = 0;
    while (dl_now() < end) {
        size_t sz = ((size_t)3 << 20) + (rounds % 7) * ((size_t)1 << 20) + rounds % 4096;
        char *p = malloc(sz), *q = malloc(sz / 2);
        if (!p || !q) {
            bad = 1;
            break;
        }
        memset(p, 0x5a, 4096);
        p[sz - 1] = 1;
        q[sz / 2 - 1] = 2;
        free(p);
        if (rounds % 4 == 0)
            malloc_trim(0);
        free(q);
        if (rounds % 16 == 0) {
            pid_t pid = fork();
            if (pid == 0)
                _exit(0);
            if (pid > 0) {
                int st;
                while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                    ;
                own_forks++;
            } else {
                bad = 1;
            }
        }
        rounds++;
    }
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    fprintf(stderr, "# huge_trim_fork: %lu rounds, %lu forks in the loop, %d in the handler\n", rounds,
            own_forks, (int)handler_forks);
    if (bad || handler_errors || handler_forks == 0) {
        char why[160];
        snprintf(why, sizeof why, "malloc/fork failed (%d), %d handler errors, %d handler forks", bad,
                 (int)handler_errors, (int)handler_forks);
        dl_reason(why);
        exit(1);
    }
}

static void test_huge_trim_fork(void)
{
    dl_run(run_huge_trim_fork, (unsigned)run_seconds + 12,
           "fork in a SIGALRM handler while the main loop mallocs, frees, trims and forks");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (chk_common_option(argc, argv, &i))
            continue;
        if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            run_seconds = atof(argv[++i]);
            continue;
        }
        fprintf(stderr, "usage: %s [-p PREFIX] [-t TEST] [-s SECONDS]\n", argv[0]);
        return 2;
    }
    RUN_TEST(huge_trim_fork);
    return check_exit_code();
}
