/* hak_purge.h -- purging and the caches (hak_purge.c), the part of the
 * segments layer that decides when free memory goes back to the OS.
 *
 * Free memory sits in three places: free page slots inside a heap's
 * segments, the process-wide cache of empty segments, and the process-wide
 * cache of freed huge mappings.  All three follow one rule, the decay
 * (docs/design.md, "Memory return"):
 *   - memory unused for the purge delay D (HAKMEM_PURGE_DELAY_MS) is purged;
 *   - a heap keeps at most max(floor, 5/4 demand) bytes committed, the
 *     caches max(floor, 2 demand), where the floor is
 *     HAKMEM_PURGE_BUDGET_KB and the demand is how much the pool held when
 *     the program last took memory from it, plus what it took again after
 *     the decay had purged it (a high-water mark that halves every D);
 *     beyond it the oldest memory is purged first;
 *   - huge memory in use and cached stays within the floor plus the peak
 *     of huge memory in use (hak_cache_huge_live);
 *   - the huge mapping freed last is spared by the demand limit until the
 *     next huge request (the grace: the demand has not seen it come back yet).
 * So the memory a program keeps reusing stays committed, and a program that
 * frees everything without reusing it is down to the floor at once.
 * Under the soft memory limit's pressure (hak_limit.c) the delay is 0:
 * everything freed is purged at once and neither cache keeps anything. */
#ifndef HAK_PURGE_H
#define HAK_PURGE_H

#include "hak_internal.h"
#include <sched.h>

/* ---- a heap's slot lock ----
 * A heap's segment lists and the purge state of its free page slots
 * (needs_purge, freed_at_ms, the purge counters) are written by the heap's
 * owner (or the sweeper that made it BUSY) with heap->slot_lock held, and
 * read by the background purger and malloc_trim with it held.  The fast
 * paths never take it; the owner takes it when a page slot is taken or given
 * back, which is rare next to allocations.  The purger only try-locks. */
static inline void hak_slots_wait(void) { sched_yield(); }
HAK_INLINE void hak_slots_lock(hak_heap_t *heap) {
    while (atomic_exchange_explicit(&heap->slot_lock, 1, memory_order_acquire)) {
        while (atomic_load_explicit(&heap->slot_lock, memory_order_relaxed)) hak_slots_wait();
    }
}
HAK_INLINE bool hak_slots_trylock(hak_heap_t *heap) {
    return !atomic_load_explicit(&heap->slot_lock, memory_order_relaxed) &&
           !atomic_exchange_explicit(&heap->slot_lock, 1, memory_order_acquire);
}
HAK_INLINE void hak_slots_unlock(hak_heap_t *heap) {
    atomic_store_explicit(&heap->slot_lock, 0, memory_order_release);
}

/* ---- what of a segment is not resident (hak_limit.c's estimate) ----
 * A slot counts as clean -- in seg->clean_kb and hak_counters.bytes_clean
 * -- from the segment's formatting until it is first taken, and again from
 * its purge until it is taken again; a span's slice also when its page gave
 * it back untouched.  Whole slots are counted (a taken slot as resident even
 * where its page has not carved yet); a small segment's slot 0, the header,
 * is always resident. */
HAK_INLINE uint32_t hak_slot_kb(const hak_segment_t *seg) {
    return (uint32_t)(((size_t)1 << seg->page_shift) >> 10);
}
/* every slot clean; and the hardened build's no-access rest past the slots
 * (HAK_HARDENED_USED), which is clean always */
HAK_INLINE uint32_t hak_segment_clean_full_kb(const hak_segment_t *seg) {
    return (uint32_t)((HAK_SEGMENT_SIZE - ((size_t)seg->first_page << seg->page_shift)) >> 10);
}
HAK_INLINE void hak_segment_clean(hak_segment_t *seg, int64_t kb) {
    seg->clean_kb = (uint32_t)((int64_t)seg->clean_kb + kb);
    hak_count_clean(kb * 1024);
}

/* ---- free page slots of a heap (slot lock held) ---- */
/* A slot was given back: it stays committed (dirty) until the decay purges
 * it; used: bytes from the slot's start its last tenure carved; decay:
 * apply the decay now (false when its segment is about to leave the heap
 * whole). */
void hak_purge_slot_freed(hak_heap_t *heap, hak_segment_t *seg, hak_page_t *page, size_t used,
                          uint64_t now, bool decay);
/* A free slot is taken, dirty or not: account for it and the demand. */
void hak_purge_slot_taken(hak_heap_t *heap, hak_segment_t *seg, hak_page_t *page, uint64_t now);
/* A segment joins the heap with the slots marked needs_purge dirty, or
 * leaves it (to the cache) with its dirty slots still marked. */
void hak_purge_segment_joined(hak_heap_t *heap, hak_segment_t *seg, uint64_t now);
void hak_purge_segment_left(hak_heap_t *heap, hak_segment_t *seg);
/* A medium or large page was kept at now (hak_segment_page_keep): the heap's decay
 * is due when it has been kept for the delay. */
void hak_purge_kept_due(hak_heap_t *heap, uint64_t now);
/* Kept pages empty for cut ms or more go back (hak_segment.c); returns when
 * the next of the others has been empty for delay ms (0: none). */
uint64_t hak_segment_kept_release_locked(hak_heap_t *heap, uint64_t now, uint64_t cut, uint64_t delay);
/* After slots were freed without it: apply the decay if the heap holds more
 * dirty memory than it may keep. */
void hak_purge_heap_check(hak_heap_t *heap, uint64_t now);
/* Apply the decay to the heap's free slots: HAK_PURGE_AGE purges what has
 * been unused for the delay, HAK_PURGE_DECAY also what exceeds the demand,
 * HAK_PURGE_ALL everything. */
typedef enum { HAK_PURGE_AGE = 0, HAK_PURGE_DECAY = 1, HAK_PURGE_ALL = 2 } hak_purge_mode_t;
void hak_purge_heap_locked(hak_heap_t *heap, uint64_t now, hak_purge_mode_t mode);
/* Is the heap leaving its thread (the thread's exit handler, or a sweep of
 * an abandoned heap)?  What it frees then is likely to serve the next
 * thread: only age purges it, and the segment cache credits it. */
bool hak_heap_leaving(hak_heap_t *heap);

/* ---- the process-wide caches ---- */
/* How a cached segment comes back (hak_cache_segment_take). */
typedef enum hak_cached_state_e {
    HAK_CACHED_CLEAN = 0,    /* purged or fresh: initialise its header */
    HAK_CACHED_SAME = 1,     /* dirty, of the kind asked for: its slot descriptors
                                still say which slots are dirty */
    HAK_CACHED_OTHER = 2     /* dirty, of another kind */
} hak_cached_state_t;
hak_segment_t *hak_cache_segment_take(hak_page_kind_t kind, hak_cached_state_t *state);
bool hak_cache_segment_any(void);      /* a racy look: is any segment cached? */
/* Keep an empty segment (region map already HAK_TAG_SHARED); leaving: it
 * comes from a heap leaving its thread (hak_heap_leaving).  False: the cache
 * is full or disabled and the caller unmaps it. */
bool hak_cache_segment_put(hak_segment_t *seg, bool leaving);

/* Huge mappings: the smallest cached one that holds need bytes (aligned to
 * align), else the largest ones, up to max, until they hold need together;
 * each piece's dirty: how many of its first bytes may be non-zero. */
typedef struct hak_piece_s { hak_segment_t *seg; size_t size, dirty; } hak_piece_t;
size_t hak_cache_huge_take(size_t need, size_t align, hak_piece_t *out, size_t max);
/* The cached mapping that starts at addr (false: none is cached there). */
bool hak_cache_huge_take_at(void *addr, hak_piece_t *out);
/* Keep a freed huge mapping of size bytes (its header says it is free, its
 * region-map entries stay); freed: the program gave it up (a free, a
 * shrinking realloc), not a piece left over from a take; false: the caller
 * unmaps it. */
bool hak_cache_huge_put(hak_segment_t *seg, size_t size, size_t dirty, bool freed);
/* Bytes of huge mappings in use grew or shrank by delta (hak_huge.c). */
void hak_cache_huge_live(int64_t delta);

/* The memory account's view of the caches (hak_account.c): each entry,
 * then `then`, under the cache lock. */
void hak_cache_account(void (*each)(void *arg, hak_segment_t *seg, size_t size, size_t dirty, bool huge),
                       void (*then)(void *arg), void *arg);

/* ---- trim, background purger, fork ---- */
size_t hak_cache_trim(void);           /* empty both caches; bytes released */
void   hak_purge_all_heaps(void);      /* purge every heap's free slots (malloc_trim) */
void   hak_purger_kick(void);          /* something became dirty: wake the purger */
void   hak_purger_start(void);         /* start-up and fork child: the purger, if the options want it */
void   hak_purger_thread_ends(void);   /* a thread's exit handler: the purger looks for live threads */
void   hak_purger_first_thread(void);  /* the caller is the process's first thread (constructor, fork child) */
/* the caches' counters (the statistics report): each line to line */
void   hak_purge_stats_lines(void (*line)(void *arg, const char *text), void *arg);

/* how memory goes back: MADV_DONTNEED, or MADV_FREE (HAKMEM_PURGE_LAZY) */
void hak_purge_range(void *p, size_t size);

/* ---- helpers the caches need from the segment and huge code ---- */
/* The bytes a segment's header takes with page_count descriptors (the
 * hardened build puts a guard page after it: HAK_HARDENED_HEADER). */
static inline size_t hak_segment_header_size(unsigned page_count) {
    return hak_round_up(sizeof(hak_segment_t) + page_count * sizeof(hak_page_t), 256);
}
size_t hak_segment_header_bytes(const hak_segment_t *seg);                  /* hak_segment.c */
uint8_t *hak_segment_page_area(hak_segment_t *seg, hak_page_t *page, size_t *size);
void hak_huge_release(hak_segment_t *seg, size_t size);                    /* hak_huge.c: unmap */
void hak_huge_cached_header(hak_segment_t *seg, size_t size);              /* hak_huge.c: joined */

#endif /* HAK_PURGE_H */
