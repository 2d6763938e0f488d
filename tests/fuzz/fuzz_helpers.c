/* fuzz_helpers.c -- the helper threads of hakmem's fuzzer (fuzz_internal.h).
 * Two persistent threads, each with a queue.  Frees are queued (the main
 * thread goes on: the helper checks and frees the block meanwhile); allocs,
 * reallocs and burst allocs are calls (the main thread waits for the
 * reply). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <stdlib.h>

#include "fuzz_internal.h"

static pthread_key_t fz_keys[2];
fz_helper_t fz_helpers[FZ_HELPERS];
fz_block_t fz_burst[FZ_BURST_MAX];

static void fz_exit_dtor(void *arg) {
    fz_exit_t *w = arg;
    fz_thread = w->name;
    if (w->b.p) blk_free(&w->b, w->how);
    fz_block_t nb;
    if (blk_alloc(&nb, &w->a, w->seed + 2 * w->round) &&
        blk_realloc(&nb, API_REALLOC_NULL, 0, nb.req / 2 + 24))
        blk_free(&nb, w->how + w->round);
    if (++w->round < w->rounds) pthread_setspecific(fz_keys[w->key], w);
}

static void *fz_helper_main(void *arg) {
    fz_helper_t *h = arg;
    static const char *const names[FZ_HELPERS] = { "helper 0", "helper 1" };
    static const char *const exiting[FZ_HELPERS] = { "exiting helper 0", "exiting helper 1" };
    fz_thread = names[h->id];
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->head == h->tail) pthread_cond_wait(&h->work, &h->mu);
        fz_hreq_t r = h->q[h->head % FZ_QCAP];
        h->head++;
        h->busy = true;
        pthread_mutex_unlock(&h->mu);
        switch (r.kind) {
        case HR_FREE: blk_free(&r.b, r.how); break;
        case HR_ALLOC: h->reply_live = blk_alloc(&h->reply, &r.a, r.seed); break;
        case HR_REALLOC:
            h->reply = r.b;
            h->reply_live = blk_realloc(&h->reply, r.a.api, r.a.n, r.size);
            break;
        case HR_BURST_ALLOC:
            for (size_t i = 0; i < r.count; i++)
                if (!blk_alloc(&fz_burst[i], &r.a, r.seed + 2 * i))
                    fz_fail("burst %s(%zu) #%zu failed", fz_api_names[r.a.api], r.a.size, i);
            break;
        case HR_EXIT:
            if (r.key >= 0) {
                h->exit_work = (fz_exit_t){ .b = r.b, .a = r.a, .seed = r.seed, .rounds = (unsigned)r.count,
                                            .how = r.how, .key = r.key, .name = exiting[h->id] };
                pthread_setspecific(fz_keys[r.key], &h->exit_work);
            }
            break;
        }
        pthread_mutex_lock(&h->mu);
        h->busy = false;
        pthread_cond_broadcast(&h->done);
        if (r.kind == HR_EXIT) break;
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void h_start(fz_helper_t *h) {
    int e = pthread_create(&h->tid, NULL, fz_helper_main, h);
    if (e) fz_fail("pthread_create: error %d", e);
}
static void h_push(fz_helper_t *h, const fz_hreq_t *r) {
    pthread_mutex_lock(&h->mu);
    while (h->tail - h->head == FZ_QCAP) pthread_cond_wait(&h->done, &h->mu);
    h->q[h->tail % FZ_QCAP] = *r;
    h->tail++;
    pthread_cond_signal(&h->work);
    pthread_mutex_unlock(&h->mu);
}
void h_wait(fz_helper_t *h) {
    pthread_mutex_lock(&h->mu);
    while (h->head != h->tail || h->busy) pthread_cond_wait(&h->done, &h->mu);
    pthread_mutex_unlock(&h->mu);
    h->pending = 0;
}
void h_call(fz_helper_t *h, const fz_hreq_t *r) { h_push(h, r); h_wait(h); }
void h_restart(fz_helper_t *h, const fz_hreq_t *r) {
    h_push(h, r);
    pthread_join(h->tid, NULL);
    h->pending = 0;
    h_start(h);
}
void h_free(fz_helper_t *h, const fz_block_t *b, unsigned how) {
    fz_hreq_t r = { .kind = HR_FREE, .how = how, .b = *b };
    h_push(h, &r);
    h->pending += b->req;
    if (h->pending > FZ_PENDING_MAX) h_wait(h);
}

void fz_helpers_start(void) {
    /* one key before hakmem's (in the prefix builds nothing has called
     * hakmem yet), one after */
    if (pthread_key_create(&fz_keys[0], fz_exit_dtor) != 0) fz_fail("pthread_key_create failed");
    free(malloc(1));
    if (pthread_key_create(&fz_keys[1], fz_exit_dtor) != 0) fz_fail("pthread_key_create failed");
    for (int i = 0; i < FZ_HELPERS; i++) {
        fz_helper_t *h = &fz_helpers[i];
        h->id = i;
        pthread_mutex_init(&h->mu, NULL);
        pthread_cond_init(&h->work, NULL);
        pthread_cond_init(&h->done, NULL);
        h_start(h);
    }
}
