/* tests/late_thread.h -- a thread whose first allocation comes in the last
 * round of pthread key destructors (test_heap_ends.c, test_env_faults.c):
 * the key's destructor re-arms the key until the last round, and only then
 * allocates, when no round is left to run hakmem's exit handler.  The
 * includer creates late_key with late_dtor; late_bad counts failed
 * allocations. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static pthread_key_t late_key;
static __thread int late_round;
static char late_sentinel;
static atomic_long late_bad;

static void late_dtor(void *v)
{
    (void)v;
    if (++late_round < PTHREAD_DESTRUCTOR_ITERATIONS) {
        pthread_setspecific(late_key, &late_sentinel);
        return;
    }
    char *volatile p = malloc(200);
    char *volatile q = malloc(5000);
    if (!p || !q)
        atomic_fetch_add(&late_bad, 1);
    else
        memset(q, 1, 5000);
    free(p);
    free(q);
}

static void *late_thread(void *arg)
{
    (void)arg;
    pthread_setspecific(late_key, &late_sentinel);   /* no allocation before the last round */
    return NULL;
}
