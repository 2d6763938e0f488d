/* check.h -- minimal test harness shared by the hakmem C tests.
 *
 * A test is a function `static void test_x(void)`.  RUN_TEST(x) runs it and
 * prints exactly one protocol line for it:
 *     PASS <prefix>.<x>
 *     FAIL <prefix>.<x>: <first failure> (+N more)
 *     SKIP <prefix>.<x>: <reason>
 * CHECK(cond) / CHECKF(cond, fmt, ...) record a failure (file:line and message)
 * and keep going; SKIP_TEST("why") marks the current test skipped and returns.
 * check_exit_code() is 0 when no test failed, 1 otherwise.
 *
 * Failures may be recorded from any thread (the stress test does), so the
 * bookkeeping is protected by a mutex.  Message formatting uses snprintf into
 * static buffers only, never the allocator under test.
 */
#ifndef HAK_TEST_CHECK_H
#define HAK_TEST_CHECK_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *chk_prefix = "test";
static const char *chk_name = "?";
static int chk_fail_count;      /* failures in the current test */
static int chk_total_failed;    /* failed tests so far */
static int chk_skipped;         /* current test skipped */
static char chk_first[512];
static char chk_skip_reason[256];
static pthread_mutex_t chk_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((format(printf, 4, 5), unused))
static void chk_failf(const char *file, int line, const char *expr, const char *fmt, ...)
{
    char msg[320];
    msg[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&chk_lock);
    if (chk_fail_count++ == 0) {
        const char *base = strrchr(file, '/');
        snprintf(chk_first, sizeof chk_first, "%s:%d: %s%s%s", base ? base + 1 : file, line,
                 expr, msg[0] ? " -- " : "", msg);
        /* protocol lines are single-line: strip newlines */
        for (char *c = chk_first; *c; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
    }
    pthread_mutex_unlock(&chk_lock);
}

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond))                                                          \
            chk_failf(__FILE__, __LINE__, #cond, NULL);                       \
    } while (0)

#define CHECKF(cond, ...)                                                     \
    do {                                                                      \
        if (!(cond))                                                          \
            chk_failf(__FILE__, __LINE__, #cond, __VA_ARGS__);                \
    } while (0)

/* number of failures recorded so far in the running test */
static inline int chk_failures(void)
{
    pthread_mutex_lock(&chk_lock);
    int n = chk_fail_count;
    pthread_mutex_unlock(&chk_lock);
    return n;
}

#define SKIP_TEST(reason)                                                     \
    do {                                                                      \
        chk_skipped = 1;                                                      \
        snprintf(chk_skip_reason, sizeof chk_skip_reason, "%s", (reason));    \
        return;                                                               \
    } while (0)

static inline void chk_report(void)
{
    if (chk_fail_count) {
        chk_total_failed++;
        if (chk_fail_count > 1)
            printf("FAIL %s.%s: %s (+%d more)\n", chk_prefix, chk_name, chk_first,
                   chk_fail_count - 1);
        else
            printf("FAIL %s.%s: %s\n", chk_prefix, chk_name, chk_first);
    } else if (chk_skipped) {
        printf("SKIP %s.%s: %s\n", chk_prefix, chk_name, chk_skip_reason);
    } else {
        printf("PASS %s.%s\n", chk_prefix, chk_name);
    }
    fflush(stdout);
}

static const char *chk_only;          /* -t NAME: run just that test */
static int chk_expect_hakmem = -1;    /* --expect-hakmem 1, --expect-glibc 0, else -1 */

/* The options every test program takes: -p PREFIX, -t TEST,
 * --expect-hakmem, --expect-glibc.  Returns 1 if argv[*i] was one (and
 * advances *i past its value). */
__attribute__((unused))
static int chk_common_option(int argc, char **argv, int *i)
{
    if (!strcmp(argv[*i], "-p") && *i + 1 < argc) chk_prefix = argv[++*i];
    else if (!strcmp(argv[*i], "-t") && *i + 1 < argc) chk_only = argv[++*i];
    else if (!strcmp(argv[*i], "--expect-hakmem")) chk_expect_hakmem = 1;
    else if (!strcmp(argv[*i], "--expect-glibc")) chk_expect_hakmem = 0;
    else return 0;
    return 1;
}

/* main's arguments for a test that takes only the common options: 0, or 2
 * after a usage message */
__attribute__((unused))
static int chk_parse_options(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!chk_common_option(argc, argv, &i)) {
            fprintf(stderr, "usage: %s [-p PREFIX] [-t TEST]\n", argv[0]);
            return 2;
        }
    return 0;
}

#define RUN_TEST(fn)                                                          \
    do {                                                                      \
        if (chk_only && strcmp(chk_only, #fn))                                \
            break;                                                            \
        chk_name = #fn;                                                       \
        chk_fail_count = 0;                                                   \
        chk_skipped = 0;                                                      \
        chk_first[0] = '\0';                                                  \
        test_##fn();                                                          \
        chk_report();                                                         \
    } while (0)

/* chk_fork(alarm_s): fork with stdio flushed (nothing buffered is printed
 * twice); a failed fork is recorded; the child gets alarm(alarm_s) so that a
 * deadlock ends it.  chk_wait(pid, what, k) waits for child number k and
 * records a death by signal or a non-zero exit. */
static inline pid_t chk_fork(unsigned alarm_s)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECKF(pid >= 0, "fork failed: errno %d", errno);
    if (pid == 0 && alarm_s)
        alarm(alarm_s);
    return pid;
}

static inline void chk_wait(pid_t pid, const char *what, long k)
{
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    CHECKF(w == pid, "%s: waitpid failed: errno %d", what, errno);
    if (w != pid)
        return;
    if (WIFSIGNALED(st))
        CHECKF(0, "%s %ld: child killed by signal %d (%s)", what, k, WTERMSIG(st),
               WTERMSIG(st) == SIGALRM ? "alarm: deadlocked or hung" : strsignal(WTERMSIG(st)));
    else
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %ld: child exited with %d", what, k,
               WEXITSTATUS(st));
}

/* In a child: write 32 bytes at `at` by memcpy (through a volatile pointer,
 * so the copy is not folded away), or one byte by a store, then exit 0 --
 * the attack of the far-write tests, whose status says whether it faulted. */
static inline void chk_far_write(char *at, int by_memcpy)
{
    static const char src[32] = "far away";
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;
    if (by_memcpy)
        copy(at, src, 32);
    else
        *(volatile char *)at = 'x';
    _exit(0);
}

/* hakmem's size classes (hak_size.c), up to 119 of them into out: 16..128
 * in steps of 16, then 8 classes per power of two up to 2 MiB. */
static inline size_t chk_class_sizes(size_t *out)
{
    size_t k = 0;
    for (size_t s = 16; s <= 128; s += 16)
        out[k++] = s;
    for (size_t base = 128; base < ((size_t)2 << 20); base *= 2)
        for (size_t j = 1; j <= 8; j++)
            out[k++] = base + j * (base / 8);
    return k;
}

/* The status of child pid (waitpid, retried on EINTR); 0 if it is gone. */
static inline int chk_status(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

static inline int check_exit_code(void) { return chk_total_failed ? 1 : 0; }

#endif /* HAK_TEST_CHECK_H */
