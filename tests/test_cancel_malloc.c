/* test_cancel_malloc.c -- no allocation function is a cancellation point
 * (issue 36).  POSIX names the functions at which a thread with deferred
 * cancellation (the default) may be cancelled; malloc, calloc, realloc and
 * free are not among them, so a program may hold a mutex across them with
 * no cleanup handler.  An allocator that calls one that is (glibc's open,
 * read, pread, close, ...) lets a pending pthread_cancel end the thread
 * inside malloc: it dies holding the program's mutex, and the block being
 * made is lost.  The hardened build did so until 2026-11-27: reusing a
 * cached huge block opened /proc/self/pagemap with glibc's open, pread and
 * close (hak_os_zero_touched, src/hak_os.c).
 *
 * usage: test_cancel_malloc [-p PREFIX] [-t TEST]
 *   huge_pending   main calls pthread_cancel on a worker thread (deferred
 *                  cancellation) before it starts; the worker then runs
 *                  ROUNDS rounds, each holding a mutex: malloc, realloc up
 *                  and down, calloc and free of huge blocks of 8 to 64 MiB
 *                  (sizes whose freed mappings the huge cache hands back to
 *                  the next request: the hardened build's reuse path), and
 *                  only after the last unlock reaches a cancellation point
 *                  (pthread_testcancel).  It must be cancelled there: every
 *                  round done, the mutex free, the blocks' bytes as written
 *                  (calloc's zero), and main's own huge malloc still works.
 * Passes on any allocator (glibc's malloc too).  The case runs in a child
 * process with a deadline (tests/deadline.h): an allocator left locked by
 * the cancelled thread makes main hang, and that is reported.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "deadline.h"

#define DEADLINE_S 30   /* a correct run takes well under a second */
#define ROUNDS 60
#define MiB ((size_t)1 << 20)

static pthread_mutex_t prog_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int cancel_sent;
/* the worker's progress, written by it alone (the cleanup handler copies
 * them when the cancellation acts) */
static volatile int rounds_done;
static const char *volatile doing = "starting";
static volatile int bad_bytes;                  /* a block did not read back as written */
static const char *volatile cancelled_in;       /* doing, when cancelled */
static volatile int cancelled_round = -1;
static volatile int cancelled_locked;           /* cancelled while holding prog_lock */
static volatile int holding;

static void on_cancel(void *arg)
{
    (void)arg;
    cancelled_in = doing;
    cancelled_round = rounds_done;
    cancelled_locked = holding;
}

/* write a few bytes at the start, the middle and the end of a block */
static void mark(unsigned char *p, size_t n, unsigned char v)
{
    memset(p, v, 64);
    memset(p + n / 2, v, 64);
    memset(p + n - 64, v, 64);
}

static int marked(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < 64; i++)
        if (p[i] != v || p[n / 2 + i] != v || p[n - 64 + i] != v)
            return 0;
    return 1;
}

static void *worker(void *arg)
{
    static const size_t sizes[] = { 8 * MiB, 24 * MiB, 64 * MiB, 16 * MiB, 40 * MiB };
    enum { NS = sizeof sizes / sizeof sizes[0] };
    (void)arg;
    pthread_cleanup_push(on_cancel, NULL);
    while (!atomic_load(&cancel_sent))          /* (sched_yield is no cancellation point) */
        sched_yield();
    for (int r = 0; r < ROUNDS; r++) {
        size_t a = sizes[r % NS] + (size_t)r * 4096, b = sizes[(r + 2) % NS] + 4096;
        pthread_mutex_lock(&prog_lock);
        holding = 1;
        doing = "malloc";
        unsigned char *p = malloc(a);
        if (!p) {
            bad_bytes++;
        } else {
            mark(p, a, (unsigned char)r);
            doing = "realloc";
            unsigned char *q = realloc(p, b);
            if (!q) {
                bad_bytes++;
                free(p);
            } else {
                size_t keep = a < b ? a : b;
                for (size_t i = 0; i < 64; i++)
                    if (q[i] != (unsigned char)r)
                        bad_bytes++;
                mark(q, b, (unsigned char)(r + 1));
                doing = "realloc (shrink)";
                p = realloc(q, keep / 2);
                if (!p) {
                    bad_bytes++;
                    p = q;
                } else {
                    for (size_t i = 0; i < 64; i++)
                        if (p[i] != (unsigned char)(r + 1))
                            bad_bytes++;
                }
                doing = "free";
                free(p);
            }
        }
        doing = "calloc";
        unsigned char *c = calloc(1, b);
        if (!c || !marked(c, b, 0))
            bad_bytes++;
        if (c)
            mark(c, b, 0xa5);
        doing = "free";
        free(c);
        rounds_done = r + 1;
        holding = 0;
        pthread_mutex_unlock(&prog_lock);
        doing = "between rounds";
    }
    doing = "pthread_testcancel";
    pthread_testcancel();
    doing = "past pthread_testcancel";
    pthread_cleanup_pop(0);
    return NULL;
}

static char reason[512];

static void run_huge_pending(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) {
        dl_reason("pthread_create failed");
        exit(1);
    }
    pthread_cancel(t);                          /* pending from the start */
    atomic_store(&cancel_sent, 1);
    void *res = NULL;
    pthread_join(t, &res);
    int lock_free = pthread_mutex_trylock(&prog_lock) == 0;
    unsigned char *p = malloc(32 * MiB);        /* the allocator still works */
    if (p) {
        mark(p, 32 * MiB, 7);
        free(p);
    }
    const char *in = cancelled_in ? cancelled_in : "(nowhere)";
    if (res != PTHREAD_CANCELED || strcmp(in, "pthread_testcancel") != 0 || rounds_done != ROUNDS ||
        !lock_free || cancelled_locked || bad_bytes || !p) {
        snprintf(reason, sizeof reason,
                 "the worker %s in %s in round %d of %d (%d done), %s; %d bad blocks; main's malloc %s",
                 res == PTHREAD_CANCELED ? "was cancelled" : "returned", in, cancelled_round + 1, ROUNDS,
                 rounds_done, lock_free ? "its mutex free" : "its mutex left locked",
                 bad_bytes, p ? "worked" : "failed");
        dl_reason(reason);
        exit(1);
    }
    exit(0);
}

static void test_huge_pending(void)
{
    dl_run(run_huge_pending, DEADLINE_S,
           "main joined a worker cancelled with allocations in progress, then called malloc");
}

int main(int argc, char **argv)
{
    if (chk_parse_options(argc, argv))
        return 2;
    RUN_TEST(huge_pending);
    return check_exit_code();
}
