/* hak_heap.c -- process start-up, thread heaps, thread exit, adoption of
 * abandoned heaps, sweeping, and fork.
 *
 * Life of a heap: a thread's first malloc finds hak_tls.heap pointing at the
 * static empty heap, whose direct[] entries all lead to an empty page, so the
 * fast path falls through to hak_malloc_slow, which calls
 * hak_heap_for_thread().  That adopts an abandoned heap if there is one (one
 * CAS, no lock) or makes a new one.  At thread exit a pthread key destructor
 * collects the heap, frees its empty pages and marks it ABANDONED, with all
 * its live blocks still in place: remote frees keep landing in its pages, and
 * the next new thread adopts it whole, or another thread sweeps it.
 *
 * After that exit handler a thread never owns a heap again.  Destructors that
 * run later -- other pthread keys' in the same or a later round, the last of
 * glibc's PTHREAD_DESTRUCTOR_ITERATIONS rounds included, after which nothing
 * would abandon a heap again -- may still allocate: each such allocation
 * borrows an abandoned heap for its own duration (hak_malloc_late). */
#include "hak_internal.h"
#include "hak_purge.h"
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/single_threaded.h>

HAK_TLS hak_tls_t hak_tls = { .sample_left = 0, .heap = &hak_heap_empty, .tag = HAK_TAG_INVALID };
HAK_TLS bool hak_tls_exiting;
HAK_TLS bool hak_tls_moving;
HAK_TLS uint64_t hak_tls_thread_id;
static _Atomic uint64_t hak_next_thread_id;
/* the heap this thread gave up at exit: its late allocations borrow it first */
static HAK_TLS hak_heap_t *hak_tls_last;
/* the fallback exit handler is registered for this thread */
static HAK_TLS bool hak_tls_atexit;
hak_page_t hak_page_empty;
static void *hak_malloc_first(size_t size);
static void hak_heap_follow(hak_heap_t *owner);
hak_heap_t hak_heap_empty = { .direct = { [0 ... HAK_DIRECT_COUNT - 1] = &hak_page_empty },
                              .first_malloc = hak_malloc_first, .thread_heap = hak_heap_for_thread,
                              .follow = hak_heap_follow };
/* HAK_TEST_TAG_START (tests/lifecycle.mk): a test build starts the tag counter
 * near HAK_TAG_LAST, so that a few dozen threads run out of tags. */
#ifndef HAK_TEST_TAG_START
#define HAK_TEST_TAG_START HAK_TAG_FIRST
#endif
static _Atomic unsigned hak_next_tag = HAK_TEST_TAG_START;

static _Atomic size_t hak_abandoned_count;     /* heaps no thread owns: ABANDONED, or BUSY (swept, lent) */
static _Atomic size_t hak_forked_count;        /* FORKED heaps (a fork child's) */
static pthread_key_t hak_thread_key;
static bool hak_thread_key_ok;                /* pthread_key_create succeeded */
static _Atomic int hak_init_state;            /* 0 not yet, 1 running, 2 done */

/* glibc's registration of C++ thread_local destructors: the exit handler's
 * fallback when no pthread key can be had (weak: absent before glibc 2.18) */
extern int __cxa_thread_atexit_impl(void (*dtor)(void *), void *obj, void *dso_symbol) __attribute__((weak));

/* ---- metadata arena: heaps live here and are never freed ---- */
static pthread_mutex_t hak_meta_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *hak_meta_cur, *hak_meta_end;
/* each chunk starts with its link and size (on a page of their own): the
 * memory account looks at every chunk (hak_meta_account) */
typedef struct hak_meta_chunk_s { struct hak_meta_chunk_s *next; size_t size; } hak_meta_chunk_t;
static hak_meta_chunk_t *hak_meta_chunks;

static void *hak_meta_alloc(size_t size) {
    /* page-aligned: a heap's first page holds all a new thread touches
     * first (hak_heap_t); the rest of its last page stays untouched */
    size_t page = hak_os_page_size();
    size = hak_round_up(size, page);
    pthread_mutex_lock(&hak_meta_lock);
    hak_meta_cur = (uint8_t *)hak_round_up((uintptr_t)hak_meta_cur, page);
    if (hak_meta_cur > hak_meta_end) hak_meta_cur = hak_meta_end;
    if ((size_t)(hak_meta_end - hak_meta_cur) < size) {
        size_t chunk = size + page > ((size_t)256 << 10) ? size + page : ((size_t)256 << 10);
        uint8_t *p = hak_os_map(chunk);
        if (!p) { pthread_mutex_unlock(&hak_meta_lock); return NULL; }
        hak_meta_chunk_t *c = (hak_meta_chunk_t *)p;
        c->next = hak_meta_chunks;
        c->size = chunk;
        hak_meta_chunks = c;
        hak_meta_cur = p + page;             /* (the link's page) */
        hak_meta_end = p + chunk;
    }
    void *r = hak_meta_cur;
    hak_meta_cur += size;
    pthread_mutex_unlock(&hak_meta_lock);
    return r;
}

/* The metadata arena's chunks (heaps) in the memory account; returns the
 * bytes they map. */
uint64_t hak_meta_account(hak_account_t *a) {
    uint64_t bytes = 0;
    pthread_mutex_lock(&hak_meta_lock);
    for (hak_meta_chunk_t *c = hak_meta_chunks; c; c = c->next) {
        hak_account_range(a, c, c->size, HAK_PART_META, 0);
        bytes += c->size;
    }
    pthread_mutex_unlock(&hak_meta_lock);
    return bytes;
}

/* ---- process start-up ---- */

static void hak_thread_done(void *value);

void hak_process_init(void) {
    if (hak_likely(atomic_load_explicit(&hak_init_state, memory_order_acquire) == 2)) return;
    int expected = 0;
    if (atomic_compare_exchange_strong(&hak_init_state, &expected, 1)) {
        hak_segment_hooks.collect = hak_heap_collect;   /* before any heap exists */
        hak_segment_hooks.sweep = hak_sweep_abandoned;
        hak_segment_init();
        hak_options_init();
        hak_foreign_init();
        /* HAK_TEST_NO_THREAD_KEY (tests/lifecycle.mk): a test build that
         * takes the fallback below */
#ifdef HAK_TEST_NO_THREAD_KEY
        int rc = EAGAIN;
#else
        int rc = pthread_key_create(&hak_thread_key, hak_thread_done);
#endif
        hak_thread_key_ok = rc == 0;
        if (rc != 0 && !__cxa_thread_atexit_impl)
            hak_message("hakmem: warning: pthread_key_create failed (error %d): the heaps of exited "
                        "threads will not be reused\n", rc);
        atomic_store_explicit(&hak_init_state, 2, memory_order_release);
    } else {
        while (atomic_load_explicit(&hak_init_state, memory_order_acquire) != 2) sched_yield();
    }
}

/* ---- thread heaps ---- */

/* The tag the fast free of a thread holding heap compares with the region
 * map.  Only HAK_TAG_FIRST..HAK_TAG_LAST name one heap's segments.  A heap
 * made after the tags ran out has HAK_TAG_SHARED segments, like huge blocks,
 * cached segments and every other such heap, so no tag can tell its blocks
 * from those: its thread gets HAK_TAG_INVALID, which matches no entry, and
 * every free it makes takes the slow path, which compares seg->heap (a local
 * free) or frees remotely (hak_free.c). */
static uint16_t hak_fast_tag(const hak_heap_t *heap) {
    return heap->tag >= HAK_TAG_FIRST && heap->tag <= HAK_TAG_LAST ? heap->tag : HAK_TAG_INVALID;
}

/* heap: fresh from hak_meta_alloc, so zero (heaps are never freed, their
 * memory never reused); not written over, so that a new thread touches
 * only the parts of its heap it uses */
static void hak_heap_init(hak_heap_t *heap) {
    for (size_t i = 0; i < HAK_DIRECT_COUNT; i++) heap->direct[i] = &hak_page_empty;
    atomic_store_explicit(&heap->state, HAK_HEAP_OWNED, memory_order_relaxed);
}

/* Take an abandoned heap into state (OWNED: a thread's; BUSY: lent to a
 * late allocation) with one CAS -- prefer first, if given -- or make a new
 * one.  A lent heap still counts as abandoned, as a swept one does. */
static bool hak_heap_take(hak_heap_t *h, int state) {
    int e = HAK_HEAP_ABANDONED;
    if (!atomic_compare_exchange_strong_explicit(&h->state, &e, state, memory_order_acquire, memory_order_relaxed))
        return false;
    if (state == HAK_HEAP_OWNED) atomic_fetch_sub_explicit(&hak_abandoned_count, 1, memory_order_relaxed);
    return true;
}

static void hak_fork_settle(void);

/* The abandoned heap a new thread takes: the one given up longest ago.  Its
 * previous owner's partners have had the longest time to free its blocks
 * (remote frees), so collecting it (hak_heap_collect, on the first refill)
 * gives the most memory back for reuse; the heap given up a moment ago
 * still holds nearly all its blocks, and a thread that took it would carve
 * fresh memory while those blocks came back into a heap nobody uses
 * (larson: heaps made, and RSS, grew with the rounds; docs/design.md,
 * "Threads").  Heaps are few (one per thread alive at once, plus the
 * abandoned ones), and a thread takes one once in its life. */
static hak_heap_t *hak_heap_oldest_abandoned(bool *busy) {
    hak_heap_t *best = NULL;
    uint64_t best_seq = UINT64_MAX;
    for (hak_heap_t *h = atomic_load_explicit(&hak_heaps_all, memory_order_acquire); h; h = h->next_all) {
        int st = atomic_load_explicit(&h->state, memory_order_relaxed);
        if (st == HAK_HEAP_BUSY) *busy = true;
        if (st != HAK_HEAP_ABANDONED) continue;
        uint64_t seq = atomic_load_explicit(&h->abandoned_seq, memory_order_relaxed);
        if (seq < best_seq) { best = h; best_seq = seq; }
    }
    return best;
}

static void hak_heap_abandon(hak_heap_t *heap);

/* Heaps whose thread ended without hakmem's exit handler: a thread whose
 * first allocation came in the last round of pthread key destructors got a
 * heap that no round was left to abandon.  Each thread holds its heap's
 * token (hak_alive.c) while it lives; the kernel marks it when the thread
 * ends, so such a heap is told by one load, with no file and no system
 * call.  A thread about to make a new heap looks at the OWNED ones and
 * abandons those whose owner ended, to be adopted like any other.
 *
 * The look costs a pass over the heaps, so it is not made at every new
 * heap: only once the heaps threads took (adopted or made) since the last
 * look are as many as the heaps it found held then (at least one): only
 * those takers can have ended unseen.  A pool that starts n threads one by
 * one looks log2(n) times, in all O(n); the heaps of ended threads waiting
 * unseen are at most as many as the live ones at the last look.  Returns
 * whether any heap was reclaimed. */
static _Atomic size_t hak_heaps_taken;   /* heaps threads took (adopted or made) */
static _Atomic size_t hak_reclaim_next;  /* ... at which the next look is due */
static bool hak_heap_reclaim_dead(void) {
    size_t taken = atomic_load_explicit(&hak_heaps_taken, memory_order_relaxed);
    if (taken < atomic_load_explicit(&hak_reclaim_next, memory_order_relaxed)) return false;
    size_t held = 0;
    bool any = false;
    for (hak_heap_t *h = atomic_load_explicit(&hak_heaps_all, memory_order_acquire); h; h = h->next_all) {
        if (h->pub_magic || atomic_load_explicit(&h->state, memory_order_acquire) != HAK_HEAP_OWNED) continue;
        if (hak_alive_state(&h->owner_alive) != HAK_ALIVE_ENDED) { held++; continue; }
        int e = HAK_HEAP_OWNED;
        if (!atomic_compare_exchange_strong_explicit(&h->state, &e, HAK_HEAP_BUSY, memory_order_acquire,
                                                     memory_order_relaxed))
            continue;
        /* abandoned and adopted again between the look and the CAS: its
         * new owner's token is held (or not yet claimed) */
        if (hak_alive_state(&h->owner_alive) != HAK_ALIVE_ENDED) {
            e = HAK_HEAP_BUSY;
            atomic_compare_exchange_strong_explicit(&h->state, &e, HAK_HEAP_OWNED, memory_order_release,
                                                    memory_order_relaxed);
            held++;
            continue;
        }
        hak_count(heaps_reclaimed);
        hak_heap_abandon(h);
        any = true;
    }
    atomic_store_explicit(&hak_reclaim_next, taken + (held > 1 ? held : 1), memory_order_relaxed);
    return any;
}

static hak_heap_t *hak_heap_acquire(int state, hak_heap_t *prefer) {
    hak_fork_settle();
    hak_heap_t *heap = prefer && hak_heap_take(prefer, state) ? prefer : NULL;
    /* A heap that is BUSY -- swept, or lent to one late allocation -- is
     * abandoned again a moment later: a scan that met one looks once more,
     * after a yield, before making a new heap.  A take that loses a race
     * looks again (bounded). */
    bool again = atomic_load_explicit(&hak_abandoned_count, memory_order_relaxed) > 0;
    for (int pass = 0, tries = 0; !heap && again && pass < 2; ) {
        bool busy = false;
        hak_heap_t *h = hak_heap_oldest_abandoned(&busy);
        if (h && hak_heap_take(h, state)) { heap = h; break; }
        if (h && ++tries < 8) continue;   /* another thread took it first */
        again = busy;
        if (++pass < 2 && again) sched_yield();
    }
    if (!heap && hak_heap_reclaim_dead()) {
        bool busy = false;
        hak_heap_t *h = hak_heap_oldest_abandoned(&busy);
        if (h && hak_heap_take(h, state)) heap = h;
    }
    if (heap) {
        if (state == HAK_HEAP_OWNED) hak_count(heaps_adopted);
        return heap;
    }
    return hak_heap_make(state);
}

/* A fresh heap in state, with a tag of its own, on the list of every heap
 * (also the public heaps' constructor: hak_heap_api.c). */
hak_heap_t *hak_heap_make(int state) {
    hak_heap_t *heap = hak_meta_alloc(sizeof *heap);
    if (!heap) return NULL;
    hak_heap_init(heap);
    atomic_store_explicit(&heap->state, state, memory_order_relaxed);
    unsigned tag = atomic_fetch_add_explicit(&hak_next_tag, 1, memory_order_relaxed);
    heap->tag = tag >= HAK_TAG_FIRST && tag <= HAK_TAG_LAST ? (uint16_t)tag : HAK_TAG_SHARED;
    hak_heap_t *head = atomic_load_explicit(&hak_heaps_all, memory_order_relaxed);
    do { heap->next_all = head; } while (!atomic_compare_exchange_weak_explicit(
                 &hak_heaps_all, &head, heap, memory_order_release, memory_order_relaxed));
    hak_count(heaps_created);
    if (state != HAK_HEAP_OWNED) atomic_fetch_add_explicit(&hak_abandoned_count, 1, memory_order_relaxed);
    return heap;
}

/* A heap is given up -- by its thread (which let its token go first), or
 * for a thread that ended or was left in the parent by fork -- and from now
 * on any thread may adopt or sweep it.  Its token is made afresh before the
 * state says ABANDONED: the reclaim never sees an adopted heap with its
 * previous owner's "ended". */
static _Atomic uint64_t hak_abandon_seq;
static void hak_heap_abandon(hak_heap_t *heap) {
    hak_alive_reset(&heap->owner_alive);
    atomic_store_explicit(&heap->abandoned_seq,
                          atomic_fetch_add_explicit(&hak_abandon_seq, 1, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&heap->state, HAK_HEAP_ABANDONED, memory_order_release);
    atomic_fetch_add_explicit(&hak_abandoned_count, 1, memory_order_relaxed);
}

static void hak_thread_done_atexit(void *unused) { (void)unused; hak_thread_done(hak_tls.heap); }

/* Arrange for the exit handler to run when this thread ends: the key's
 * value, or, without a key (or if setting it fails), glibc's thread_local
 * destructor list. */
static void hak_thread_register(hak_heap_t *heap) {
    if (hak_thread_key_ok && pthread_setspecific(hak_thread_key, heap) == 0) return;
    if (!hak_tls_atexit && __cxa_thread_atexit_impl) {
        hak_tls_atexit = true;
        /* it allocates (from this thread's heap, already in place); the
         * object address names this library to the dynamic loader */
        __cxa_thread_atexit_impl(hak_thread_done_atexit, NULL, (void *)&hak_init_state);
    }
}

/* This thread takes heap, already OWNED by its CAS: its token, its TLS
 * (the heap before the tag: a free in a signal handler between the two
 * stores takes the slow path), its exit handler. */
static void hak_heap_own(hak_heap_t *heap) {
    hak_alive_claim(&heap->owner_alive);
    atomic_fetch_add_explicit(&hak_heaps_taken, 1, memory_order_relaxed);
    hak_tls.heap = heap;
    hak_tls.tag = hak_fast_tag(heap);
    hak_thread_register(heap);
}

hak_heap_t *hak_heap_for_thread(void) {
    hak_process_init();
    if (hak_tls.heap != &hak_heap_empty) return hak_tls.heap;
    /* After the exit handler nothing would abandon a heap again: such a
     * thread allocates through hak_malloc_late, and the callers that only
     * need a non-NULL answer (huge allocations, remote-free statistics) get
     * the empty heap. */
    if (hak_tls_exiting) return &hak_heap_empty;
    hak_heap_t *heap = hak_heap_acquire(HAK_HEAP_OWNED, NULL);
    if (!heap) return NULL;
    hak_heap_own(heap);
    return heap;
}

/* Following: a thread that keeps freeing the blocks of one abandoned heap
 * takes that heap and gives up its own, as if it had ended and started
 * again.  The case is a thread that hands its work to a successor and
 * exits (larson's chains, a pool that replaces a worker): the successor's
 * first operations come before its predecessor's exit handler abandons the
 * heap, so it adopts another heap or makes one, and then frees its
 * inherited blocks remotely into a heap nobody uses while it carves other
 * memory.  Counted here, on the remote-free path (hak_free.c, through the
 * empty heap's hook): HAK_FOLLOW_FREES consecutive remote frees into the
 * same ABANDONED heap -- a predecessor's working set, not a handful of
 * blocks left in a mailbox (churn_mixed's 63 lost 3-30 % at 16) -- and at
 * most once in a thread's life, so no thread moves back and forth.  The
 * heap given up is collected and abandoned as at thread exit, after this
 * thread's TLS names the new one (as at exit, where the TLS is reset first:
 * an allocation in a signal handler never uses a heap another thread may
 * have adopted); the heap taken is collected when it first needs new
 * memory, as any adopted heap.  Not for a thread without a heap (its first
 * heap comes from hak_heap_for_thread) or after its exit handler. */
#define HAK_FOLLOW_FREES 256
static HAK_TLS hak_heap_t *hak_tls_follow_target;
static HAK_TLS uint32_t hak_tls_follow_count;
static HAK_TLS bool hak_tls_followed;
static void hak_heap_follow(hak_heap_t *owner) {
    hak_heap_t *self = hak_tls.heap;
    if (hak_tls_followed || hak_tls_exiting || self == &hak_heap_empty || owner->pub_magic) return;
    if (owner != hak_tls_follow_target) {
        hak_tls_follow_target = owner;
        hak_tls_follow_count = 0;
    }
    if (++hak_tls_follow_count < HAK_FOLLOW_FREES || !hak_heap_take(owner, HAK_HEAP_OWNED)) return;
    hak_tls_followed = true;
    hak_count(heaps_adopted);
    hak_count(heaps_followed);
    hak_heap_collect(self, false);
    hak_heap_own(owner);
    hak_alive_release(&self->owner_alive);
    hak_heap_abandon(self);
}

/* malloc for a thread whose exit handler ran (hak_tls_exiting): borrow an
 * abandoned heap -- the one this thread gave up, if nobody took it -- in
 * state BUSY (no other thread adopts or sweeps it meanwhile), allocate from
 * it and abandon it again.  The block then lives in an abandoned heap like
 * any block an exited thread left behind.  Such destructors are rare; each
 * of their allocations pays a CAS and a store. */
hak_heap_t *hak_heap_borrow(void) {
    hak_process_init();
    return hak_heap_acquire(HAK_HEAP_BUSY, hak_tls_last);
}
void hak_heap_give_back(hak_heap_t *heap) {
    hak_tls_last = heap;
    atomic_store_explicit(&heap->state, HAK_HEAP_ABANDONED, memory_order_release);   /* still counted */
}

void *hak_malloc_late(size_t size) {
    hak_process_init();
    if (size > HAK_LARGE_MAX) return hak_huge_alloc(size, HAK_MIN_ALIGN, false);   /* no heap needed */
    hak_heap_t *heap = hak_heap_borrow();
    if (!heap) { errno = ENOMEM; return NULL; }
    void *p = hak_malloc_slow(size, heap);
    hak_heap_give_back(heap);
    return p;
}

/* A malloc by a thread that has no heap (the empty heap's first_malloc,
 * called by the pages layer's slow path): its first, or one after its
 * exit handler (hak_malloc_late). */
static void *hak_malloc_first(size_t size) {
    if (hak_unlikely(hak_tls_exiting)) return hak_malloc_late(size);
    hak_heap_t *heap = hak_heap_for_thread();
    if (!heap) { errno = ENOMEM; return NULL; }
    return hak_malloc_slow(size, heap);
}

/* This thread's id for public heaps' ownership: a count, so no two threads
 * of the process ever share one (kernel ids and pthread_t are reused). */
uint64_t hak_thread_id(void) {
    if (!hak_tls_thread_id)
        hak_tls_thread_id = atomic_fetch_add_explicit(&hak_next_thread_id, 1, memory_order_relaxed) + 1;
    return hak_tls_thread_id;
}

/* Collect every page of heap: apply delayed and remote frees, give empty
 * pages back to their segments, move full pages that gained space back. */
void hak_heap_collect(hak_heap_t *heap, bool force_purge) {
    hak_heap_process_delayed(heap);
    for (unsigned c = 0; c < HAK_CLASS_COUNT; c++) {
        hak_page_t *page = heap->queues[c].first;
        while (page) {
            hak_page_t *next = page->next;
            hak_page_free_collect(page);
            if (page->used == 0) {
                /* unlike hak_page_retire, collecting frees a class's only page too */
                hak_queue_remove(heap, page);
                hak_segment_page_free(heap, page);
            }
            page = next;
        }
    }
    /* Full pages gain space only through xdelayed, handled above, or through
     * remote frees that raced with the move (collected here). */
    hak_page_t *page = heap->full.first;
    while (page) {
        hak_page_t *next = page->next;
        uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
        if (tf & ~HAK_TF_NOTIFY) {
            hak_page_free_collect(page);
            if (page->used == 0) hak_page_retire(page);
            else if (page->free) hak_page_unfull(heap, page);
        }
        page = next;
    }
    hak_segment_kept_release_all(heap);   /* kept medium and large pages (hak_page_retire) */
    hak_segment_release_empty(heap);
    hak_segment_purge_due(heap, force_purge);
}

/* The exit handler (pthread key destructor, or the fallback): collect the
 * thread's heap and abandon it.  From here on the thread owns no heap: its
 * frees are remote frees, its mallocs borrow (hak_malloc_late). */
static void hak_thread_done(void *value) {
    hak_heap_t *heap = (hak_heap_t *)value;
    if (!heap || heap != hak_tls.heap) return;
    hak_tls_exiting = true;             /* before the collect: what it frees is for the next thread */
    hak_heap_collect(heap, false);
    hak_tls.heap = &hak_heap_empty;
    hak_tls.tag = HAK_TAG_INVALID;
    hak_tls_last = heap;
    hak_alive_release(&heap->owner_alive);   /* off this thread's robust list before the reset */
    hak_heap_abandon(heap);
    hak_purger_thread_ends();   /* the purger looks whether this was the program's last thread */
}

/* Collect the abandoned heaps nobody adopted, so their empty pages and
 * segments go back.  Returns how many were swept. */
size_t hak_sweep_abandoned(bool force_purge) {
    hak_fork_settle();
    if (atomic_load_explicit(&hak_abandoned_count, memory_order_relaxed) == 0) return 0;
    size_t n = 0;
    for (hak_heap_t *h = atomic_load_explicit(&hak_heaps_all, memory_order_acquire); h; h = h->next_all) {
        int e = HAK_HEAP_ABANDONED;
        if (atomic_compare_exchange_strong_explicit(&h->state, &e, HAK_HEAP_BUSY,
                                                    memory_order_acquire, memory_order_relaxed)) {
            hak_heap_collect(h, force_purge);
            atomic_store_explicit(&h->state, HAK_HEAP_ABANDONED, memory_order_release);
            n++;
        }
    }
    return n;
}


/* Sum the per-heap counters (a racy snapshot, as any statistics read). */
void hak_heap_stats_sum(hak_heap_sums_t *s) {
    memset(s, 0, sizeof *s);
    for (hak_heap_t *h = atomic_load_explicit(&hak_heaps_all, memory_order_acquire); h; h = h->next_all) {
        s->slow += atomic_load_explicit(&h->st_slow, memory_order_relaxed);
        s->cas_retries += atomic_load_explicit(&h->st_cas_retries, memory_order_relaxed);
        for (unsigned c = 0; c <= HAK_CLASS_COUNT; c++) {
            if (c < HAK_CLASS_COUNT) {
                s->refills[c] += atomic_load_explicit(&h->st_refills[c], memory_order_relaxed);
                s->remote[c] += atomic_load_explicit(&h->st_remote[c], memory_order_relaxed);
            }
            s->allocs[c] += atomic_load_explicit(&h->st_allocs[c], memory_order_relaxed);
            s->frees[c] += atomic_load_explicit(&h->st_frees[c], memory_order_relaxed);
        }
    }
}

/* ---- fork ----
 *
 * Every lock hakmem takes is held across fork: the stats snapshot's
 * (hak_stats.c), the fork settling lock and the metadata arena's (here), the
 * segment cache's (hak_segment.c).  All are leaves, none is on a
 * per-allocation path, and the child re-initialises them.
 *
 * In the child only the forking thread exists.  Its heap stays its own.
 * Every other heap a thread owned (or a sweeper or a late allocation held)
 * becomes FORKED: nobody would ever abandon it, and its pages would keep
 * their blocks and collect remote frees for nothing.  The first adoption or
 * sweep in the child settles them (hak_fork_settle): a heap whose lists are
 * consistent becomes ABANDONED, to be adopted or swept like any other; one
 * whose thread the fork caught in the middle of changing them becomes LOST
 * and is left alone, as every heap was before.  Settling is lazy so that a
 * child that only execs pays nothing but one pass over the heap list.
 *
 * What the check cannot see is a page its owner had just taken out of a
 * queue to put it in another (or to free it): a page in no queue, whose
 * segment may be in no list.  Such a page is harmless: its blocks are freed
 * as any others, and hak_queue_remove leaves a page that is in no queue
 * alone (hak_page.c), so freeing its last block releases its slot. */

static pthread_mutex_t hak_settle_lock = PTHREAD_MUTEX_INITIALIZER;

/* a free-list link of page: NULL or the start of a carved block */
static bool hak_fork_block_ok(const hak_page_t *page, const hak_block_t *b, uint32_t capacity) {
    if (!b) return true;
    uintptr_t off = (uintptr_t)b - (uintptr_t)page->start;
    return off < (uintptr_t)capacity * page->block_size && off % page->block_size == 0;
}
/* The head of a free list and its successor.  A push interrupted by the
 * fork shows at the head: the owner writes the block's link before the
 * head (the free paths do, in hak_internal.h and hak_free.c), so the link is
 * there; were a push ever compiled the other way round, the stale first
 * word of the block would fail this test. */
static bool hak_fork_list_ok(const hak_page_t *page, const hak_block_t *head, uint32_t capacity) {
    return hak_fork_block_ok(page, head, capacity) && (!head || hak_fork_block_ok(page, head->next, capacity));
}

/* A page of h's class queue (full: of its full queue) as the owner leaves it
 * between operations.  Each test catches an operation the fork may have
 * interrupted: a page moving to or from the full queue (IN_FULL, NOTIFY),
 * limits not yet updated, fresh blocks not yet counted in capacity, the
 * free list swapped in but local_free not yet cleared. */
static bool hak_fork_page_ok(const hak_heap_t *h, const hak_page_t *page, bool full) {
    const hak_segment_t *seg = hak_segment_of(page);
    uintptr_t at = (uintptr_t)page - (uintptr_t)seg->pages;
    if (seg->heap != h || seg->kind >= HAK_PAGE_KINDS || page->kind != seg->kind ||
        at % sizeof(hak_page_t) != 0 || at / sizeof(hak_page_t) >= seg->page_count ||
        at / sizeof(hak_page_t) < seg->first_page || !page->in_use)
        return false;
    if (page->class_idx >= HAK_CLASS_COUNT || hak_class_kind(page->class_idx) != page->kind ||
        page->block_size != hak_class_size(page->class_idx))
        return false;
    uint8_t flags = HAK_RELAXED(page->flags);
    uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
    if ((flags & HAK_PAGE_IS_HUGE) || full != ((flags & HAK_PAGE_IN_FULL) != 0) ||
        (!full && (tf & HAK_TF_NOTIFY)))
        return false;
    hak_limits_t l = hak_page_limits(page);
    if (HAK_RELAXED(page->carved_limit) != l.carved || page->local_limit != l.local ||
        page->wide_limit != l.wide || page->local_magic != page->div_magic || page->local_key != page->free_key)
        return false;
    uint32_t cap = HAK_RELAXED(page->capacity);
    return cap <= page->reserved && page->used <= cap &&
           hak_fork_list_ok(page, page->free, cap) && hak_fork_list_ok(page, page->local_free, cap) &&
           (page->free == NULL || page->free != page->local_free);
}

/* A queue: linked both ways, ending at last, every page as above. */
static bool hak_fork_queue_ok(const hak_heap_t *h, const hak_page_queue_t *q, int cls, size_t *budget) {
    const hak_page_t *prev = NULL;
    for (const hak_page_t *p = q->first; p; prev = p, p = p->next) {
        if (p->prev != prev || (*budget)-- == 0 || !hak_fork_page_ok(h, p, cls < 0) ||
            (cls >= 0 && p->class_idx != (unsigned)cls))
            return false;
    }
    return q->last == prev;
}

/* Whether everything an adopter or a sweeper of h walks is as its owner
 * leaves it between operations (read only). */
static bool hak_fork_heap_ok(const hak_heap_t *h) {
    /* a thread the fork left behind was inside the heap's free-slot
     * bookkeeping (hak_purge.c): the lock stays taken in the child forever */
    if (atomic_load_explicit(&h->slot_lock, memory_order_relaxed)) return false;
    /* bounds every walk: a list cut and rejoined by an operation in progress
     * could be a cycle */
    size_t budget = (size_t)atomic_load_explicit(&hak_counters.segments_in_use, memory_order_relaxed) *
                    HAK_MAX_PAGES_PER_SEGMENT + HAK_MAX_PAGES_PER_SEGMENT;
    for (unsigned c = 0; c < HAK_CLASS_COUNT; c++)
        if (!hak_fork_queue_ok(h, &h->queues[c], (int)c, &budget)) return false;
    if (!hak_fork_queue_ok(h, &h->full, -1, &budget)) return false;
    for (size_t i = 0; i < HAK_DIRECT_COUNT; i++) {
        const hak_page_t *first = i == 0 ? NULL : h->queues[hak_size_class(i << 4)].first;
        if (h->direct[i] != (first ? first : &hak_page_empty)) return false;
    }
    /* the segments with free slots, and the purge accounting they carry */
    uint64_t pending_k = 0;
    for (int k = 0; k < HAK_PAGE_KINDS; k++) {
        const hak_segment_t *prev = NULL;
        for (const hak_segment_t *seg = h->segs[k].first; seg; prev = seg, seg = seg->next) {
            if (budget-- == 0 || ((uintptr_t)seg & HAK_SEGMENT_MASK) != 0 || seg->prev != prev ||
                seg->heap != h || seg->kind != k || !seg->in_free_list || seg->page_count > HAK_MAX_PAGES_PER_SEGMENT)
                return false;
            unsigned used = 0, pending = 0;
            for (unsigned i = seg->first_page; i < seg->page_count; i++) {
                const hak_page_t *page = &seg->pages[i];
                if (page->in_use && page->needs_purge) return false;
                used += page->in_use;
                pending += page->needs_purge;
                if (page->needs_purge) pending_k += page->dirty_kb;   /* as hak_purge.c counts it */
            }
            if (used != seg->used_pages || used >= (unsigned)(seg->page_count - seg->first_page) ||
                pending != seg->purge_pending)
                return false;
        }
    }
    return (uint32_t)pending_k == h->purge_pending_bytes_k;
}

/* A fork may also catch a fast path between its push or pop and the used
 * count: a page whose used is one off.  That is harmless (a block nobody
 * holds keeps its page from retiring, or a page retires with only such a
 * block), but the debug build checks used on every refill.  It recounts:
 * used = capacity - |free| - |local_free| (remote frees still count as
 * used).  False if a list is not made of carved blocks. */
static bool hak_fork_recount(hak_heap_t *h) {
    for (unsigned c = 0; c <= HAK_CLASS_COUNT; c++) {
        for (hak_page_t *page = c < HAK_CLASS_COUNT ? h->queues[c].first : h->full.first; page; page = page->next) {
            uint32_t cap = HAK_RELAXED(page->capacity), n = 0;
            const hak_block_t *lists[2] = { page->free, page->local_free };
            for (int l = 0; l < 2; l++)
                for (const hak_block_t *b = lists[l]; b; b = b->next)
                    if (!hak_fork_block_ok(page, b, cap) || ++n > cap) return false;
            page->used = cap - n;
        }
    }
    return true;
}

/* In a fork child: decide, once, about the heaps the fork left without
 * their threads (see above). */
static void hak_fork_settle(void) {
    if (hak_likely(atomic_load_explicit(&hak_forked_count, memory_order_acquire) == 0)) return;
    pthread_mutex_lock(&hak_settle_lock);
    for (hak_heap_t *h = atomic_load_explicit(&hak_heaps_all, memory_order_acquire); h; h = h->next_all) {
        if (atomic_load_explicit(&h->state, memory_order_relaxed) != HAK_HEAP_FORKED) continue;
        if (hak_fork_heap_ok(h) && (!HAK_DEBUG_ENABLED || hak_fork_recount(h))) {
            hak_heap_abandon(h);
        } else {
            atomic_store_explicit(&h->state, HAK_HEAP_LOST, memory_order_relaxed);
            if (hak_opt.verbose)
                hak_message("hakmem: fork: a heap caught inside an operation by fork stays unused (%p)\n", (void *)h);
        }
    }
    atomic_store_explicit(&hak_forked_count, 0, memory_order_release);
    pthread_mutex_unlock(&hak_settle_lock);
}

/* The child's first step, single-threaded: mark the other threads' heaps
 * FORKED and count what is abandoned (the parent's counter may have been
 * caught between a state change and its update). */
static void hak_fork_child_heaps(void) {
    hak_heap_t *self = hak_tls.heap;
    size_t abandoned = 0, forked = 0;
    for (hak_heap_t *h = atomic_load_explicit(&hak_heaps_all, memory_order_relaxed); h; h = h->next_all) {
        int st = atomic_load_explicit(&h->state, memory_order_relaxed);
        /* public heaps, live or destroyed (a destroyed one waits on the
         * free list for hakmem_heap_new), are never a thread's heap: the
         * forking thread's still work, the others' are left alone */
        if (h == self || st == HAK_HEAP_LOST || h->pub_magic) continue;
        if (st == HAK_HEAP_ABANDONED) {
            abandoned++;
        } else {   /* OWNED, BUSY, FORKED (a fork before this child's parent settled) */
            atomic_store_explicit(&h->state, HAK_HEAP_FORKED, memory_order_relaxed);
            forked++;
        }
    }
    atomic_store_explicit(&hak_abandoned_count, abandoned, memory_order_relaxed);
    atomic_store_explicit(&hak_forked_count, forked, memory_order_release);
}

void hak_heaps_lock_for_fork(void) {
    pthread_mutex_lock(&hak_settle_lock);
    pthread_mutex_lock(&hak_meta_lock);
}
void hak_heaps_unlock_after_fork(bool child) {
    if (child) {
        pthread_mutex_init(&hak_meta_lock, NULL);
        pthread_mutex_init(&hak_settle_lock, NULL);
        hak_fork_child_heaps();
    } else {
        pthread_mutex_unlock(&hak_meta_lock);
        pthread_mutex_unlock(&hak_settle_lock);
    }
}

/* The fork handlers of the layers above, in order of registration. */
#define HAK_FORK_HOOKS 8
static struct { void (*prepare)(void), (*parent)(void), (*child)(void); } hak_fork_hooks[HAK_FORK_HOOKS];
static _Atomic unsigned hak_fork_hook_count;
void hak_fork_hook_add(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    unsigned i = atomic_load(&hak_fork_hook_count);
    if (i >= HAK_FORK_HOOKS) hak_fatal("fork", "too many fork hooks", NULL);
    hak_fork_hooks[i].prepare = prepare;
    hak_fork_hooks[i].parent = parent;
    hak_fork_hooks[i].child = child;
    atomic_store(&hak_fork_hook_count, i + 1);   /* (each registration runs once, under pthread_once or a constructor) */
}

/* A process that has only ever had one thread takes no lock at fork, as
 * glibc's malloc does not: the only thread that could hold one is the
 * forking thread itself, interrupted by a signal handler that forks, and
 * taking the lock again would hang it.  Parent and child go on from
 * exactly the state the fork saw; the interrupted operation completes in
 * both.  (A multi-threaded process that forks from a signal handler is
 * not supported, by glibc either: its own fork takes locks the
 * interrupted code may hold.  The background purger is a thread: with
 * it, every process is multi-threaded.) */
static bool hak_fork_locked;
static void hak_fork_prepare(void) {
    hak_fork_locked = !__libc_single_threaded;
    if (!hak_fork_locked) return;
    for (unsigned i = atomic_load(&hak_fork_hook_count); i-- > 0; ) hak_fork_hooks[i].prepare();
    hak_heaps_lock_for_fork();
    hak_segment_lock_for_fork();
}
static void hak_fork_parent(void) {
    if (!hak_fork_locked) return;
    hak_segment_unlock_after_fork(false);
    hak_heaps_unlock_after_fork(false);
    for (unsigned i = 0, n = atomic_load(&hak_fork_hook_count); i < n; i++) hak_fork_hooks[i].parent();
}
static void hak_fork_child(void) {
    /* the forking thread's heap: its token names the parent's thread, and
     * glibc gave the child an empty robust list; the child's thread holds it */
    hak_heap_t *self = hak_tls.heap;
    if (self != &hak_heap_empty) hak_alive_claim(&self->owner_alive);
    hak_purger_first_thread();
    if (!hak_fork_locked) return;
    hak_segment_unlock_after_fork(true);
    hak_heaps_unlock_after_fork(true);
    for (unsigned i = 0, n = atomic_load(&hak_fork_hook_count); i < n; i++) hak_fork_hooks[i].child();
    /* every lock is free again, hakmem's and glibc's (glibc resets its own
     * before the handlers run): the child's own purger */
    hak_purger_start();
}

__attribute__((constructor(101))) static void hak_constructor(void) {
    hak_process_init();
    pthread_atfork(hak_fork_prepare, hak_fork_parent, hak_fork_child);
    if (hak_opt.verbose) hak_options_print();
    hak_limit_start();    /* HAKMEM_MEMORY_LIMIT: here, where reading the cgroup's file is allowed */
    hak_crash_install();
    hak_purger_first_thread();
    hak_purger_start();   /* here, where no lock of hakmem's or libc's is held (hak_purge.c) */
}
