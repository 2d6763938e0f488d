/* hak_alive.c -- whether a thread has ended, as the kernel tells it: a
 * token a thread holds while it lives (docs/design.md, "Whether a thread
 * has ended").
 *
 * A token is a robust pthread mutex that its thread locks and never waits
 * on.  glibc registers each thread's list of robust mutexes with the kernel
 * (set_robust_list) when the thread starts; when a thread ends for any
 * reason -- its function returned, pthread_exit, a plain SYS_exit, after
 * or before hakmem's exit handler -- the kernel walks that list and marks
 * every mutex the thread still held FUTEX_OWNER_DIED in the mutex word.  So
 * "has the holder ended?" is one load of that word: no file, no /proc, no
 * system call, the same answer in any PID namespace (the word holds the tid
 * as the holder's own namespace numbers it, and the kernel compares it in
 * that namespace), under any seccomp filter that let the thread start, and
 * immune to tid reuse (the kernel clears the tid when it marks the word).
 *
 * Every answer errs on "alive": a token whose holder cannot be known
 * (robust mutexes refused: glibc found set_robust_list unavailable, as
 * under a seccomp filter that denies it) is never reported ended, which
 * only keeps a heap unused or the purger away. */
#include "hak_internal.h"
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutexattr_t hak_alive_attr;
static _Atomic int hak_alive_ok;   /* 0 not yet known, 1 robust mutexes work, -1 refused */

/* The kernel will tell: glibc registered a robust list for this thread
 * (it does for every thread when the kernel accepted set_robust_list at
 * start-up; a seccomp filter may have refused it, and then glibc's robust
 * mutexes still lock but nobody marks them at a thread's end).  Asked once
 * (get_robust_list of the calling thread; a fork child inherits the
 * answer, and glibc registers the child's list again). */
bool hak_alive_supported(void) {
    int ok = atomic_load_explicit(&hak_alive_ok, memory_order_acquire);
    if (hak_likely(ok != 0)) return ok > 0;
    int saved = errno;
    void *head = NULL;
    size_t len = 0;
    pthread_mutexattr_t attr;
    bool good = syscall(SYS_get_robust_list, 0, &head, &len) == 0 && head != NULL &&
                pthread_mutexattr_init(&attr) == 0 && pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0;
    if (good) hak_alive_attr = attr;
    errno = saved;
    atomic_store_explicit(&hak_alive_ok, good ? 1 : -1, memory_order_release);
    return good;
}

/* The calling thread becomes the token's holder.  Whoever held it before
 * has ended or let it go (the caller's own state machine says so: a heap
 * taken by CAS, the forking thread in its child), so it is made afresh:
 * a token a fork child inherits names a thread of the parent. */
bool hak_alive_claim(hak_alive_t *t) {
    int saved = errno;
    bool ok = hak_alive_supported() && pthread_mutex_init(&t->m, &hak_alive_attr) == 0 &&
              pthread_mutex_trylock(&t->m) == 0;
    errno = saved;
    return ok;
}

/* The holder lets the token go (its exit handler): no longer alive here. */
void hak_alive_release(hak_alive_t *t) {
    int saved = errno;
    if (hak_alive_state(t) == HAK_ALIVE_HELD) pthread_mutex_unlock(&t->m);
    errno = saved;
}

/* A token nobody holds, for a holder that ended or will never run again
 * (a thread the fork left in the parent): no thread's robust list holds it,
 * so it is simply made afresh. */
void hak_alive_reset(hak_alive_t *t) {
    if (hak_alive_supported()) pthread_mutex_init(&t->m, &hak_alive_attr);
    else memset(t, 0, sizeof *t);
}

/* HAK_ALIVE_ENDED: the holder ended without letting it go; HAK_ALIVE_HELD:
 * a live thread holds it; HAK_ALIVE_FREE: nobody (or not known).  The word
 * may be read while hak_alive_reset's pthread_mutex_init rewrites it with
 * plain stores (a heap being given up, in state BUSY, which every reader
 * passes over whatever the word says): ThreadSanitizer is told not to
 * instrument the load. */
#if defined(__SANITIZE_THREAD__)
__attribute__((no_sanitize("thread"), noinline))
#endif
int hak_alive_state(const hak_alive_t *t) {
    unsigned w = (unsigned)__atomic_load_n(&t->m.__data.__lock, __ATOMIC_ACQUIRE);
    if (w & FUTEX_OWNER_DIED) return HAK_ALIVE_ENDED;
    return (w & FUTEX_TID_MASK) ? HAK_ALIVE_HELD : HAK_ALIVE_FREE;
}
