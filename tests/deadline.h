/* deadline.h -- run one test case in a child process with a deadline, for
 * tests of faults that hang (issue 28).  Include after check.h.
 *
 * dl_run(fn, seconds, how): fork; the child makes itself a process group,
 * calls fn() and exits 0 when it returns (fn may also end the child itself:
 * exit, pthread_exit of its main thread, ...).  The parent polls for the
 * child's end; a child still there after `seconds` is killed with SIGKILL,
 * with its whole process group (a signal the child blocks or ignores cannot
 * stop that), and the case fails naming `how` it hung.  A child that died
 * from a signal or exited non-zero fails the case too, with the reason it
 * gave with dl_reason() if it gave one.  Nothing here allocates in the
 * parent.
 */
#ifndef HAK_TEST_DEADLINE_H
#define HAK_TEST_DEADLINE_H

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int dl_reason_fd = -1;   /* the child's end of the reason pipe */

/* in the child (or its threads): the reason for the exit status it is about
 * to give, shown in the FAIL line */
__attribute__((unused)) static void dl_reason(const char *msg)
{
    if (dl_reason_fd >= 0 && write(dl_reason_fd, msg, strlen(msg)) < 0)
        return;
}

static double dl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* wait up to `seconds` for pid; returns 1 and its status when it ended, 0
 * when it is still running */
static int dl_wait(pid_t pid, double seconds, int *status)
{
    double end = dl_now() + seconds;
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            return 1;
        if (w < 0 && errno != EINTR)
            return 1;          /* not our child any more: nothing to wait for */
        if (dl_now() >= end)
            return 0;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

/* kill pid and its process group with SIGKILL and reap it */
static void dl_kill(pid_t pid)
{
    int st;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
}

static void dl_run(void (*fn)(void), unsigned seconds, const char *how)
{
    int fds[2];
    if (pipe(fds) != 0)
        fds[0] = fds[1] = -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECKF(pid >= 0, "fork failed: errno %d", errno);
    if (pid < 0)
        return;
    if (pid == 0) {
        setpgid(0, 0);
        if (fds[0] >= 0)
            close(fds[0]);
        dl_reason_fd = fds[1];
        fn();
        exit(0);
    }
    setpgid(pid, pid);   /* also from here: no race with the kill below */
    if (fds[1] >= 0)
        close(fds[1]);
    int st = 0, ended = dl_wait(pid, seconds, &st);
    if (!ended)
        dl_kill(pid);
    char why[256] = "";
    if (fds[0] >= 0) {   /* non-blocking: a leftover grandchild may hold the other end */
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        ssize_t n = read(fds[0], why, sizeof why - 1);
        why[n > 0 ? n : 0] = '\0';
        close(fds[0]);
    }
    if (!ended)
        chk_failf(__FILE__, __LINE__, "hung", "%s (still running after %u s, killed)", how, seconds);
    else if (WIFSIGNALED(st))
        chk_failf(__FILE__, __LINE__, "killed", "the test process died from signal %d (%s)%s%s",
                  WTERMSIG(st), strsignal(WTERMSIG(st)), why[0] ? ": " : "", why);
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        chk_failf(__FILE__, __LINE__, "exit status", "the test process exited with %d%s%s",
                  WEXITSTATUS(st), why[0] ? ": " : "", why);
}

#endif
