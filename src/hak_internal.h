/* hak_internal.h -- internal interface shared by hakmem's source files, and
 * the inline fast paths of malloc and free. */
#ifndef HAK_INTERNAL_H
#define HAK_INTERNAL_H

#include "hak_types.h"
/* Test builds only (tests/os.mk): a smaller region map, so that ordinary mmap
 * results fall outside it, and a way to place the next hinted mapping. */
#ifdef HAK_TEST_ADDRESS_BITS
#undef HAK_ADDRESS_BITS
#define HAK_ADDRESS_BITS HAK_TEST_ADDRESS_BITS
void hak_os_test_hint(uintptr_t hint);          /* hak_os.c */
#endif
#include "hakmem.h"
#include <errno.h>
#include <string.h>
#include <unwind.h>

/* The hardened build exports checked memcpy, memmove and memset (and the
 * string copies: hak_memcheck.c).  hakmem's own copies -- and the ones gcc
 * emits for struct copies and loops -- must not take the check (they write
 * canaries, trailers and freed blocks): in the hardened build every file
 * but hak_memcheck.c calls them by other names, glibc's implementations
 * reached past the exported symbols (hak_copy.c). */
#if defined(HAK_HARDENED) && HAK_HARDENED && !defined(HAK_MEMCHECK_EXPORTS)
extern __typeof__(memcpy)  memcpy  __asm__("hak_raw_memcpy")  __attribute__((visibility("hidden")));
extern __typeof__(memmove) memmove __asm__("hak_raw_memmove") __attribute__((visibility("hidden")));
extern __typeof__(memset)  memset  __asm__("hak_raw_memset")  __attribute__((visibility("hidden")));
#endif

/* bytes of the canary after a large block (the large blocks' canaries, below) */
#if defined(HAK_HARDENED) && HAK_HARDENED
#define HAK_CANARY 0
#else
#define HAK_CANARY 8
#endif

#define hak_likely(x)   __builtin_expect(!!(x), 1)
#define hak_unlikely(x) __builtin_expect(!!(x), 0)
#define HAK_NOINLINE    __attribute__((noinline))
#define HAK_COLD        __attribute__((cold, noinline))
#define HAK_INLINE      static inline __attribute__((always_inline))
#define HAK_EXPORT      __attribute__((visibility("default")))

static inline size_t hak_round_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

#ifdef HAK_DEBUG
#define HAK_DEBUG_ENABLED 1
#else
#define HAK_DEBUG_ENABLED 0
#endif
/* The stats build (make stats) counts every allocation and free per class
 * on the fast paths; the release build counts only on slow paths. */
#ifdef HAK_STATS_FULL
#define HAK_STATS_FULL_ENABLED 1
#else
#define HAK_STATS_FULL_ENABLED 0
#endif

/* ---- globals (hak_heap.c, hak_segment.c) ---- */
/* The fast paths' per-thread state, one TLS object so that malloc finds
 * the countdown and the heap with one GOT load (docs/design.md, "Walk
 * through one malloc"): sample_left is the heap profiles' byte countdown
 * (HAK_SAMPLED below), heap the thread's heap (&hak_heap_empty until its
 * first malloc), tag its region-map tag (free's ownership test). */
typedef struct hak_tls_s {
    int64_t sample_left;
    hak_heap_t *heap;
    uint16_t tag;
} hak_tls_t;
extern HAK_TLS hak_tls_t hak_tls;
extern hak_heap_t hak_heap_empty;
extern hak_page_t hak_page_empty;
extern HAK_TLS bool hak_tls_exiting; /* key destructor ran */
extern HAK_TLS bool hak_tls_moving;  /* hak_realloc frees the block it moved (hak_page_retire) */
/* hidden: addressed PC-relative, not through the GOT (aarch64's linker does
 * not relax a GOT load as x86-64's does; free's fast path reads the map) */
extern _Atomic uint16_t hak_segmap[HAK_SEGMAP_ENTRIES] __attribute__((visibility("hidden")));

/* ---- size classes (hak_size.c) ---- */
size_t hak_class_size(unsigned cls);
HAK_INLINE unsigned hak_size_class(size_t size) {
    if (size <= 128) return size <= 16 ? 0 : (unsigned)((size - 1) >> 4);
    size_t s = size - 1;
    unsigned k = 63u - (unsigned)__builtin_clzl(s);       /* 7.. */
    return 8u + (k - 7u) * 8u + (unsigned)((s >> (k - 3)) & 7u);
}
hak_page_kind_t hak_class_kind(unsigned cls);
/* The last class of small and of medium pages: hak_class_kind(cls) is
 * HAK_PAGE_SMALL for cls <= HAK_CLASS_SMALL_LAST, a medium kind up to
 * HAK_CLASS_MEDIUM_LAST, HAK_PAGE_LARGE above (unit_blocktest checks it). */
#define HAK_CLASS_SMALL_LAST  55u    /* 8 KiB */
#define HAK_CLASS_MEDIUM_LAST 79u    /* 64 KiB */
/* hak_size_class of sizes in (HAK_DIRECT_MAX, HAK_MEDIUM_MAX]: the class of
 * size is hak_medium_class[(size - 1) >> 8] (hak_size.c) */
extern const uint8_t hak_medium_class[HAK_MEDIUM_MAX >> 8] __attribute__((visibility("hidden")));
unsigned hak_kind_shift(hak_page_kind_t kind);   /* log2 of the page size */
/* The classes heap->direct serves, 16 B .. HAK_DIRECT_MAX, and the last
 * direct[] index of each: hak_class_size(cls) >> 4 (hak_size.c) */
#define HAK_DIRECT_CLASSES 40u
extern const uint8_t hak_direct_hi[HAK_DIRECT_CLASSES] __attribute__((visibility("hidden")));

/* ---- options (hak_options.c) ---- */
typedef struct hak_options_s {
    long profile;            /* 0 speed, 1 balanced, 2 lean */
    long verbose;
    long stats;
    long purge_delay_ms;     /* the decay's delay: -1 never purge; 0 at once */
    long segment_cache;      /* empty segments kept mapped per process */
    long purge_budget_kb;    /* the decay's floor per pool; -1 unlimited */
    long crash_handler;      /* report SIGSEGV/SIGBUS inside hakmem */
    long huge_cache_mb;      /* freed huge mappings kept for reuse (hak_purge.c) */
    long background_purge;   /* the purger thread (hak_purge.c) */
    long purge_lazy;         /* purge with MADV_FREE instead of MADV_DONTNEED */
    long sample_bytes;       /* mean bytes between heap-profile samples; 0 off (hak_profile.c) */
    long leak_report;        /* print the live samples' stacks at exit */
    long guard_sample;       /* mean bytes between guarded blocks; 0 off (hak_guard.c) */
    long stats_by_class;     /* the report's per-class table (always in the stats build) */
    const char *stats_file;  /* where the report at exit goes ("": stderr); %p: the pid */
    long memory_limit;       /* the soft limit in bytes; 0 off; -1 the cgroup's (hak_limit.c) */
} hak_options_t;
extern hak_options_t hak_opt;
void hak_options_init(void);
void hak_options_print(void);
/* hakmem_option_set/get's work (hak_option_api.c calls them after start-up):
 * 0, or an errno value (ENOENT, EINVAL, EPERM) */
int hak_option_set(const char *name, const char *value);
int hak_option_get(const char *name, long *value);

/* ---- OS interface (hak_os.c) ---- */
void *hak_os_map(size_t size);                  /* fresh zeroed RW memory or NULL */
void *hak_os_map_aligned(size_t size, size_t align);
void *hak_os_reserve_aligned(size_t size, size_t align); /* PROT_NONE */
void  hak_os_unmap(void *p, size_t size);
void  hak_os_purge(void *p, size_t size);       /* madvise DONTNEED */
void  hak_os_purge_lazy(void *p, size_t size);  /* madvise FREE (DONTNEED where missing) */
bool  hak_os_commit(void *p, size_t size);      /* part of a reservation becomes RW */
void  hak_os_decommit(void *p, size_t size);    /* ... no-access again, its memory released */
bool  hak_os_hugepage(void *p, size_t size, bool on); /* madvise (NO)HUGEPAGE */
void *hak_os_remap(void *p, size_t old_size, size_t new_size, void *fixed_addr);
size_t hak_os_page_size(void);
uint64_t hak_os_now_ms(void);
uint64_t hak_os_rss_peak_bytes(void);
void hak_os_write_err(const char *s, size_t n);
int  hak_os_write_fd(int fd, const char *s, size_t n);   /* 0 or the errno */
bool hak_os_incore(const void *p, size_t size, unsigned char *vec);   /* mincore */
/* The mapping lock (hak_os.c): munmap and mremap hold it shared; the memory
 * account holds it (hold/release) while it reads every mapping's header. */
void hak_os_maps_hold(void);
void hak_os_maps_release(void);
void hak_os_maps_unlock_after_fork(bool child);   /* fork: held by hak_os_maps_hold before */
uint64_t hak_os_random(void);                   /* getrandom, else clocks and ASLR mixed */
long hak_os_gettid(void);

/* ---- whether a thread has ended: a robust mutex it holds (hak_alive.c) ---- */
#define HAK_ALIVE_FREE  0   /* nobody holds it (or nobody can tell) */
#define HAK_ALIVE_HELD  1   /* a live thread holds it */
#define HAK_ALIVE_ENDED 2   /* its holder ended without letting it go */
bool hak_alive_supported(void);                /* the kernel marks a thread's tokens when it ends */
bool hak_alive_claim(hak_alive_t *t);          /* the calling thread holds it from now on */
void hak_alive_release(hak_alive_t *t);        /* ... lets it go (its holder only) */
void hak_alive_reset(hak_alive_t *t);          /* nobody holds it (its holder ended or is not in this process) */
int  hak_alive_state(const hak_alive_t *t);    /* one load, no system call */

/* ---- process secrets (hak_secret.c) ---- */
extern _Atomic uint64_t hak_secrets[2];
uint64_t hak_secret_init(unsigned i);
HAK_INLINE uint64_t hak_secret(unsigned i) {
    uint64_t s = atomic_load_explicit(&hak_secrets[i], memory_order_relaxed);
    return hak_likely(s != 0) ? s : hak_secret_init(i);
}
/* A page's free_key, drawn afresh each time a page gets its class: a
 * process-wide serial number mixed with secret 0 by an injective map, so no
 * two incarnations of any pages share a key (a key an earlier incarnation
 * left in memory never matches), no key is 0 (malloc's mark of a live
 * block), and a freed block shows no address (hak_secret.c; docs/design.md,
 * "Misuse checks never accuse a correct program"). */
uintptr_t hak_page_new_key(void);
/* The mark an aligned block keeps in its block's first word: the pointer
 * handed out (q), encoded with secret 1 and the key of q's page (a page in
 * use: its owner marks it).  With the key, a mark that an earlier
 * incarnation of the page left in memory -- a public heap destroyed with its
 * aligned blocks live, its memory carved again for the next heap -- decodes
 * to no pointer of the current one, however a correct program moves it
 * around its own block (docs/design.md, "Misuse checks never accuse a
 * correct program"). */
HAK_INLINE uintptr_t hak_aligned_mark(const void *q, const hak_page_t *page) {
    return (((uintptr_t)q ^ hak_secret(1)) * 0xd6e8feb86659fd93u) ^ page->free_key;
}
/* The pointer a mark names, for a block of page. */
HAK_INLINE uintptr_t hak_aligned_unmark(uintptr_t mark, const hak_page_t *page) {
    return ((mark ^ page->free_key) * 0xcfee444d8b59a89bu) ^ hak_secret(1);   /* the multiplier's inverse mod 2^64 */
}

/* ---- errors and messages (hak_error.c) ---- */
/* A misuse: "hakmem: OP: WHAT P; aborting", then what the report hooks add
 * (the block, the stacks, the next step), then abort(). */
__attribute__((noreturn, cold)) void hak_fatal(const char *op, const char *what, const void *p);
void hak_message(const char *fmt, ...);         /* "hakmem: ..." to stderr, no malloc */
size_t hak_format(char *buf, size_t cap, const char *fmt, ...);   /* the same formats into buf */
size_t hak_vformat_to(char *buf, size_t cap, const char *fmt, __builtin_va_list ap);
/* The rest of a report, from the layer that walks stacks (hak_report.c
 * registers them at start-up; NULL before).  Both are async-signal-safe,
 * allocate nothing and end even when the walk fails.
 *   misuse: after hak_fatal's first line: the block p points to or into,
 *           the stack of op's call, the block's allocation stack when it
 *           was sampled or guarded, the next step;
 *   fault:  after a fault's first lines (hak_crash.c): the stack of the
 *           faulting access from the signal's context ctx, the next step
 *           for its kind (HAK_FAULT_*). */
enum {
    HAK_FAULT_ALLOCATOR,   /* the fault came from hakmem's code */
    HAK_FAULT_ZERO,        /* a touch of a block of malloc(0) */
    HAK_FAULT_FAR,         /* an access past a segment's reach: a far write or read */
};
typedef struct hak_report_hooks_s {
    void (*misuse)(const char *op, const void *p);
    void (*fault)(const void *ctx, int kind);
} hak_report_hooks_t;
extern hak_report_hooks_t hak_report_hooks;

void hak_crash_install(void);                  /* hak_crash.c */
/* The crash report's hook: guarded sampling (hak_guard.c) registers a
 * function that explains a fault at an address of its region (true: it did),
 * ctx the signal's context (ucontext_t); async-signal-safe. */
extern bool (*hak_crash_explain)(const void *addr, const void *ctx);
/* The other crash hook: the segments (hak_segment.c) register a function
 * that says whether addr lies in a segment past its reach (the part no page
 * has reached yet: no-access), and gives the segment and its reach;
 * async-signal-safe (no lock: a look at the region map and the header). */
extern bool (*hak_crash_unreached)(const void *addr, uintptr_t *seg, size_t *reach);
/* A report's stack walk sets it to its sigjmp_buf (hak_report.c): a fault
 * while it is set jumps there instead of being reported (a stack the walk
 * misread), and clears it. */
extern HAK_TLS void *hak_crash_walk_jmp;
/* The region of malloc(0)'s blocks (hak_zero.c tells it once reserved): a
 * fault there is reported as a touch of a zero-size block. */
void hak_crash_zero_region(uintptr_t base, size_t size);
/* Frames (at most 16) as hex addresses with their function (the file's
 * symbols), file and offset (/proc/self/maps), one line each on stderr;
 * async-signal-safe. */
void hak_crash_print_frames(void *const *frames, unsigned n);
/* The same, the first frame an exact address (a fault's pc) rather than a
 * return address when first_exact, the leading frames of hakmem's own
 * functions (by name) left out when skip_own; each line shows the file and
 * the address in it that addr2line -e FILE ADDRESS takes. */
void hak_crash_print_stack(void *const *frames, unsigned n, bool first_exact, bool skip_own);
/* hakmem's executable segment; true if all of it is hakmem's (the shared
 * library), false if hakmem is linked into the program. */
bool hak_self_text(uintptr_t *lo, uintptr_t *hi);
void hak_foreign_init(void);                   /* hak_foreign.c */
bool hak_foreign_free(void *p);                /* true: it was glibc's, freed there */
size_t hak_foreign_usable(const void *p);      /* glibc block's usable size, or 0 */

/* ---- stats (hak_stats.c) ---- */
typedef struct hak_counters_s {
    _Atomic uint64_t mmap_calls, munmap_calls, madvise_calls, mremap_calls, mprotect_calls;
    _Atomic uint64_t segments_in_use, segments_peak, huge_in_use, huge_peak;
    _Atomic uint64_t bytes_mapped, bytes_mapped_peak;
    /* bytes of those mappings known not to be resident: page slots never
     * touched or purged, purged cached segments, no-access reservations
     * (hak_limit.c: resident = mapped - clean) */
    _Atomic uint64_t bytes_clean;
    _Atomic uint64_t heaps_created, heaps_adopted, heaps_reclaimed, heaps_followed;
    _Atomic uint64_t class_pages[HAK_CLASS_COUNT], class_pages_peak[HAK_CLASS_COUNT];
    /* bytes of pages in use (their blocks' area) and of huge mappings in
     * use, and the peak: counted where class_pages are, and by
     * hak_cache_huge_live; huge alone too (malloc_stats' "max mmap bytes") */
    _Atomic uint64_t active_bytes, active_peak, huge_bytes, huge_bytes_peak;
    _Atomic uint64_t meta_bytes;   /* mapped by hak_os_map (metadata; never unmapped) */
} hak_counters_t;
extern hak_counters_t hak_counters;
#define hak_count(field) atomic_fetch_add_explicit(&hak_counters.field, 1, memory_order_relaxed)
/* a thread-private counter: a plain load and store, no lock prefix */
#define hak_stat_inc(field) atomic_store_explicit(&(field), \
        atomic_load_explicit(&(field), memory_order_relaxed) + 1, memory_order_relaxed)
typedef struct hak_heap_sums_s {
    uint64_t slow, cas_retries, refills[HAK_CLASS_COUNT], remote[HAK_CLASS_COUNT];
    uint64_t allocs[HAK_CLASS_COUNT + 1], frees[HAK_CLASS_COUNT + 1];   /* stats build */
} hak_heap_sums_t;
void hak_heap_stats_sum(hak_heap_sums_t *sums);  /* hak_heap.c */
void hak_stats_print_glibc(const char *head);    /* malloc_stats: head, then the report (hak_stats.c) */
/* cur += delta, and peak = max(peak, cur) */
static inline void hak_count_peak(_Atomic uint64_t *cur, _Atomic uint64_t *peak, int64_t delta) {
    uint64_t now = atomic_fetch_add_explicit(cur, (uint64_t)delta, memory_order_relaxed) + (uint64_t)delta;
    if (delta > 0) {
        uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
        while (now > p && !atomic_compare_exchange_weak_explicit(peak, &p, now, memory_order_relaxed,
                                                                memory_order_relaxed)) {}
    }
}
/* A page of class cls, of bytes of blocks, got its class (delta 1) or gave
 * it up (-1): the slow paths' count of pages in use. */
static inline void hak_count_page(unsigned cls, int delta, size_t bytes) {
    hak_count_peak(&hak_counters.class_pages[cls], &hak_counters.class_pages_peak[cls], delta);
    hak_count_peak(&hak_counters.active_bytes, &hak_counters.active_peak, delta * (int64_t)bytes);
}

/* ---- the memory account (hak_account.c): every mapped byte by what holds it ---- */
enum { HAK_PART_LIVE, HAK_PART_FREE, HAK_PART_EMPTY, HAK_PART_SEGCACHE, HAK_PART_HUGECACHE,
       HAK_PART_META, HAK_PART_RETURNED, HAK_PARTS };
typedef struct hak_account_s {
    uint64_t mapped[HAK_PARTS], resident[HAK_PARTS];
    uint64_t live_blocks, live_huge;          /* blocks live; bytes of them in huge blocks */
    uint64_t segments, huge, segments_cached, huge_cached;
    bool want_resident;                       /* ask mincore (else resident stays 0) */
    bool resident_ok;                         /* mincore answered every time (set it before) */
} hak_account_t;
void hak_account_segments(hak_account_t *a);  /* heaps' segments, huge blocks, both caches */
/* A mapping of size bytes at p of its own (metadata, a reserved region):
 * live bytes of it to live blocks, the rest to part. */
void hak_account_range(hak_account_t *a, const void *p, size_t size, unsigned part, uint64_t live);

/* bytes_clean += delta: part of a mapping is not resident (or is again) */
static inline void hak_count_clean(int64_t delta) {
    atomic_fetch_add_explicit(&hak_counters.bytes_clean, (uint64_t)delta, memory_order_relaxed);
}

/* ---- the soft memory limit (hak_limit.c) ----
 * Read on slow paths only (a page slot given back, a page retired, a huge
 * block cached), never by the fast paths. */
extern _Atomic int hak_limit_pressing;   /* 1 from above the high mark until below the low one */
HAK_INLINE bool hak_limit_pressed(void) {
    return atomic_load_explicit(&hak_limit_pressing, memory_order_relaxed) != 0;
}
void hak_limit_check(void);   /* memory may have grown (a page, a segment, a huge block): above the
                                 high mark, return every cached and empty page at once */
void hak_limit_relax(void);   /* memory went back: below the low mark the pressure ends */
void hak_limit_start(void);   /* the constructor: the option (the cgroup's file is read here) */
void hak_limit_stats_lines(void (*line)(void *arg, const char *text), void *arg);   /* the stats' line */
void hak_limit_fork_child(void);    /* hak_segment_unlock_after_fork */

/* ---- process and heap life cycle (hak_heap.c) ---- */
void hak_process_init(void);
hak_heap_t *hak_heap_for_thread(void);          /* make or adopt the calling thread's heap; NULL: no
                                                   memory; &hak_heap_empty after the thread's exit
                                                   handler ran (it never owns a heap again) */
void *hak_malloc_late(size_t size);             /* malloc for a thread whose exit handler ran
                                                   (hak_tls_exiting), from a borrowed heap */
hak_heap_t *hak_heap_borrow(void);              /* an abandoned heap in state BUSY, for a thread
                                                   whose exit handler ran (NULL: no memory) */
void hak_heap_give_back(hak_heap_t *heap);      /* ... abandoned again */
extern HAK_TLS uint64_t hak_tls_thread_id;      /* 0 until hak_thread_id() */
uint64_t hak_thread_id(void);                   /* this thread's id, never reused in the process */
/* Fork handlers of the layers above (heap profiles, public heaps): hakmem
 * registers one set with pthread_atfork and calls these from it, prepare in
 * reverse order of registration, parent and child in order, so that the
 * child's purger starts after every lock is free (hak_heap.c, "fork"). */
void hak_fork_hook_add(void (*prepare)(void), void (*parent)(void), void (*child)(void));
void hak_heap_collect(hak_heap_t *heap, bool force_purge);
size_t hak_sweep_abandoned(bool force_purge);
hak_heap_t *hak_heap_make(int state);          /* a fresh heap with a new tag, on the list of every heap */
extern _Atomic(hak_heap_t *) hak_heaps_all;   /* every heap, linked by next_all (hak_purge.c) */
hak_heap_t *hak_heap_list(void);                /* its first heap (hak_purge.c) */
uint64_t hak_meta_account(hak_account_t *a);   /* the heaps' arena in the account; its bytes */
void hak_heaps_lock_for_fork(void);
void hak_heaps_unlock_after_fork(bool child);

/* ---- pages (hak_page.c) ---- */
void *hak_malloc_slow(size_t size, hak_heap_t *heap);  /* size first: it is already in the first argument register */
/* the miss of a class up to 2 KiB: page is the class's current page (hak_page.c) */
void *hak_malloc_refill(size_t size, hak_heap_t *heap, hak_page_t *page);
void  hak_page_free_collect(hak_page_t *page);
void  hak_page_retire(hak_page_t *page);  /* heap: the page's segment's */
void  hak_queue_set_direct(hak_heap_t *heap, unsigned cls);
void  hak_queue_remove(hak_heap_t *heap, hak_page_t *page);
void  hak_page_unfull(hak_heap_t *heap, hak_page_t *page);
void  hak_page_check(const hak_page_t *page);   /* HAK_DEBUG consistency check */

/* A block of size bytes (aligned to align) on a page of its own, flagged
 * HAK_PAGE_SAMPLED: a heap profile's sample (hak_profile.c).  NULL: no memory. */
void *hak_page_sampled_alloc(hak_heap_t *heap, size_t size, size_t align);
bool  hak_page_reclass(hak_heap_t *heap, hak_page_t *page, unsigned cls);  /* grow in place; false: no room */
void  hak_page_sampled_again(hak_heap_t *heap, hak_page_t *page);   /* after hak_page_reclass */
/* The page layer calls no upper layer by name: heap profiles (hak_profile.c,
 * when sampling is on) register here, before the first sampled page exists,
 * the function every free of a sampled page's block calls (from any thread,
 * before the block is freed). */
extern void (*hak_sampled_freed)(void *p);

/* Guarded sampling (hak_guard.c, when HAKMEM_GUARD_SAMPLE is on) registers
 * here, before its first block, what free's complete check, malloc_usable_size
 * and a sized delete call for a pointer the region map does not know: each
 * returns false if p is not in the guarded region; free frees a guarded block,
 * usable gives its size in *n; misuse is reported there (fatal). */
typedef struct hak_guard_hooks_s {
    bool (*free)(void *p);
    bool (*usable)(const void *p, const char *op, size_t *n);
} hak_guard_hooks_t;
extern hak_guard_hooks_t hak_guard_hooks;

/* ---- free (hak_free.c): everything the inline fast free does not finish ---- */
void  hak_free_slow(void *p);                        /* region map: not this thread's */
void  hak_free_local_slow(hak_page_t *page, void *p); /* region map: this thread's */
/* a sized operator delete's size against p's block; fatal if no allocation
 * of n bytes (n-aligned: aligned) could have returned p (hak_free.c) */
void hak_check_delete_size(const void *p, size_t n, bool aligned);
void  hak_heap_process_delayed(hak_heap_t *heap);
hak_block_t *hak_block_in(hak_segment_t *seg, const void *p, const char *op, hak_page_t **page_out);
/* Is block b of page (in seg) free?  The one test behind every report of a
 * freed block (free, realloc, hakmem_heap_realloc, hak_block_in): its key,
 * confirmed on the page's lists when the caller owns the page
 * (hak_block_confirm_free, hak_free.c); false for a huge block.  op names the
 * operation in a report of a corrupted free list. */
bool  hak_block_confirm_free(hak_segment_t *seg, hak_page_t *page, const hak_block_t *b, const char *op);
HAK_INLINE bool hak_block_is_free(hak_segment_t *seg, hak_page_t *page, const hak_block_t *b, const char *op) {
    return hak_unlikely(b->key == page->free_key) && hak_block_confirm_free(seg, page, b, op);
}

/* ---- the region map (hak_segmap.c) ---- */
void hak_segmap_set(const void *p, uint16_t v);
size_t hak_segmap_next(size_t i);   /* the first index >= i with an entry, or HAK_SEGMAP_ENTRIES */
hak_segment_t *hak_segment_of_checked(const void *p); /* NULL if not ours */
/* What a report says of the block p points to or into (hak_free.c): read
 * without a lock from any p; false if p is in no segment of hakmem's. */
typedef struct hak_block_info_s {
    const char *kind;      /* "small", "medium", "large" or "huge" */
    const void *block;     /* the block's start; NULL: p is in no block */
    size_t size;           /* its size class's bytes (huge: its bytes) */
    size_t asked;          /* a large block's size as allocated; 0 unknown */
    unsigned cls;          /* its size class */
    bool header, released; /* p is in a segment's header; in a page that holds no blocks */
} hak_block_info_t;
bool hak_block_info(const void *p, hak_block_info_t *out);

/* ---- segments (hak_segment.c; purging and the caches: hak_purge.c, hak_purge.h) ---- */
hak_page_t *hak_segment_page_alloc(hak_heap_t *heap, unsigned cls);
void hak_segment_page_free(hak_heap_t *heap, hak_page_t *page);
/* emptied medium and large pages kept on heap->kept (hak_segment.c, "kept pages") */
bool hak_segment_page_keep(hak_heap_t *heap, hak_page_t *page, unsigned max);
hak_page_t *hak_segment_kept_take(hak_heap_t *heap, unsigned cls);
void hak_segment_kept_release_all(hak_heap_t *heap);
void hak_segment_purge_due(hak_heap_t *heap, bool force);
void hak_segment_release_empty(hak_heap_t *heap);
void hak_segment_lock_for_fork(void);
void hak_segment_unlock_after_fork(bool child);
void  hak_segment_init(void);                   /* its crash hook (hak_process_init) */
void  hak_segment_set_slices(hak_segment_t *seg);
void  hak_segment_init_page(hak_segment_t *seg, hak_page_t *page, unsigned cls);
bool  hak_segment_span_grow(hak_heap_t *heap, hak_page_t *page, unsigned cls);  /* false: no room */
void  hak_queue_push_back(hak_heap_t *heap, hak_page_t *page);
void  hak_segment_move(hak_heap_t *from, hak_heap_t *to, hak_segment_t *seg); /* hakmem_heap_delete */

/* ---- malloc(0)'s blocks (hak_zero.c): 16-byte slots of a PROT_NONE region ---- */
void *hak_zero_alloc(size_t align);               /* NULL: none (the caller serves an ordinary block) */
bool  hak_zero_owns(const void *p);               /* inside the region */
bool  hak_zero_live(const void *p);               /* a live block of the region */
bool  hak_zero_free(const void *p, const char *op); /* false: not the region's; fatal: misuse */
bool  hak_zero_region(uintptr_t *base, size_t *size); /* the reservation (memory account) */

/* ---- huge blocks (hak_huge.c) ---- */
void *hak_huge_alloc(size_t size, size_t align, bool zero);
void  hak_huge_free(hak_segment_t *seg);
void *hak_huge_realloc(hak_segment_t *seg, void *p, size_t size);
/* Layers above that must hear of a huge block's free or move register
 * functions here (the segment layer never calls upwards by name):
 * - public heaps (hak_heap_api.c, when the first heap is made), for a block
 *   whose seg->heap is set: unlink takes it off its heap's list at free; a
 *   moving realloc holds the list's lock over the move (hold: the owner, lock
 *   held and block unlinked, or NULL; unhold: links the block's new header
 *   and unlocks);
 * - heap profiles (hak_profile.c, when sampling is on): freed drops a
 *   sampled block from the profile. */
typedef struct hak_huge_hooks_s {
    void (*unlink)(hak_segment_t *seg);
    hak_heap_t *(*hold)(hak_segment_t *seg);
    void (*unhold)(hak_heap_t *h, hak_segment_t *seg);
    void (*freed)(void *p);
} hak_huge_hooks_t;
extern hak_huge_hooks_t hak_huge_hooks;
/* The heap layer's functions that segment allocation calls (hak_segment.c):
 * collect the heap it allocates for, the first time a thread that took that
 * heap over needs new memory, and sweep abandoned heaps before it asks the
 * OS.  Set by hak_process_init (hak_heap.c), before any heap exists. */
typedef struct hak_segment_hooks_s {
    void (*collect)(hak_heap_t *heap, bool force_purge);
    size_t (*sweep)(bool force_purge);
} hak_segment_hooks_t;
extern hak_segment_hooks_t hak_segment_hooks;

/* ---- page lookup ---- */
HAK_INLINE hak_segment_t *hak_segment_of(const void *p) {
    return (hak_segment_t *)((uintptr_t)p & ~(uintptr_t)HAK_SEGMENT_MASK);
}
HAK_INLINE hak_page_t *hak_page_of(hak_segment_t *seg, const void *p) {
    return seg->slice_page[((uintptr_t)p >> HAK_SLICE_SHIFT) & (HAK_MAX_PAGES_PER_SEGMENT - 1)];
}
/* The region map entry for p (see HAK_TAG_*).  The index is masked, so an
 * address beyond 47 bits aliases an entry; the segment address is still
 * derived from p itself, so such a pointer faults rather than corrupts. */
HAK_INLINE uint16_t hak_segmap_get(const void *p) {
    uintptr_t idx = ((uintptr_t)p >> HAK_SEGMENT_SHIFT) & (HAK_SEGMAP_ENTRIES - 1);
    return atomic_load_explicit(&hak_segmap[idx], memory_order_relaxed);
}
/* The same with acquire, for a pointer nothing vouches for (the slow paths:
 * remote frees, misuse checks, hakmem_owns): the segment header written
 * before hak_segmap_set's release is then visible on Arm too (docs/design.md,
 * "Memory ordering").  A plain load on x86-64. */
HAK_INLINE uint16_t hak_segmap_get_acquire(const void *p) {
    uintptr_t idx = ((uintptr_t)p >> HAK_SEGMENT_SHIFT) & (HAK_SEGMAP_ENTRIES - 1);
    return atomic_load_explicit(&hak_segmap[idx], memory_order_acquire);
}
/* The block test's constants (docs/design.md, "The carved-block test"):
 * magic = floor(2^64 / size) + 1, step = magic * size mod 2^64, and the
 * limit below which offset * magic falls exactly for the starts of the
 * first cap blocks. */
HAK_INLINE uint64_t hak_div_magic(size_t size) {
    uint64_t q = UINT64_MAX / size;
    if (UINT64_MAX - q * size == size - 1) q++;     /* q = floor(2^64 / size) */
    return q + 1;
}
HAK_INLINE uint64_t hak_block_limit(uint32_t cap, uint64_t step) {
    return cap == 0 ? 0 : (uint64_t)(cap - 1) * step + 1;
}
/* One multiply and one compare: is offset (from page->start, which for a
 * small page is the low 16 bits of the address) the start of a carved block,
 * on a small page without flags?  A variant of Lemire's
 * divisibility test whose bound also encodes the block count. */
HAK_INLINE bool hak_local_block(const hak_page_t *page, size_t offset) {
    return offset * page->local_magic < page->local_limit;
}
/* The same for a medium or large page, whose offset is p - start. */
HAK_INLINE bool hak_wide_block(const hak_page_t *page, const void *p) {
    return ((uintptr_t)p - (uintptr_t)page->start) * page->div_magic < page->wide_limit;
}
/* The same test against the carved blocks, for remote and slow frees (any
 * thread): true for the start of a carved block of a page without aligned
 * blocks that is not huge. */
HAK_INLINE bool hak_carved_block(const hak_page_t *page, size_t offset) {
    return offset * page->div_magic < atomic_load_explicit(&page->carved_limit, memory_order_relaxed);
}
/* The quick check: p is the start of a carved block of page (a page without
 * aligned blocks, not huge: carved_limit is 0 for those) that is not free. */
HAK_INLINE bool hak_free_quick(const hak_page_t *page, const void *p) {
    return hak_carved_block(page, (uintptr_t)p - (uintptr_t)page->start) &&
           ((const hak_block_t *)p)->key != page->free_key;
}

/* The page of p when p passes the quick check in a heap's segment (the
 * region map names a heap), else NULL: the common case of a remote free and
 * of malloc_usable_size and realloc. */
HAK_INLINE hak_page_t *hak_quick_page(const void *p) {
    uint16_t tag = hak_segmap_get_acquire(p);
    if (hak_likely(tag >= HAK_TAG_FIRST && tag <= HAK_TAG_LAST)) {
        hak_page_t *page = hak_page_of(hak_segment_of(p), p);
        if (hak_likely(hak_free_quick(page, p))) return page;
    }
    return NULL;
}

/* flags and capacity are written by the owner and read by remote
 * freers validating a pointer: relaxed atomics (plain moves on x86). */
#define HAK_RELAXED(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define HAK_SET_RELAXED(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)
/* What carved_limit, local_limit and wide_limit must be (hak_types.h), from
 * the page's capacity, flags and kind: set by hak_page_update_limit and
 * checked by hak_page_check.  A page with aligned blocks, a huge or a sampled
 * page has carved_limit 0: its frees all take the complete check (hak_block_in). */
typedef struct hak_limits_s { uint64_t carved, local, wide; } hak_limits_t;
HAK_INLINE hak_limits_t hak_page_limits(const hak_page_t *page) {
    uint8_t flags = HAK_RELAXED(page->flags);
    /* (a large page's blocks have canaries: hak_free_checked checks them) */
    uint64_t carved = (flags & (HAK_PAGE_HAS_ALIGNED | HAK_PAGE_IS_HUGE | HAK_PAGE_SAMPLED)) ||
                      (HAK_CANARY && page->kind == HAK_PAGE_LARGE) ? 0 :
                      hak_block_limit(HAK_RELAXED(page->capacity), page->div_step);
    bool fast = flags == 0, small = page->kind == HAK_PAGE_SMALL;
    return (hak_limits_t){ carved, fast && small ? carved : 0, fast && !small ? carved : 0 };
}
HAK_INLINE void hak_page_update_limit(hak_page_t *page) {
    hak_limits_t l = hak_page_limits(page);
    /* written only when it changes: remote freers read its line on every free */
    if (HAK_RELAXED(page->carved_limit) != l.carved) HAK_SET_RELAXED(page->carved_limit, l.carved);
    page->local_limit = l.local;
    if (page->wide_limit != l.wide) page->wide_limit = l.wide;   /* line 1: as carved_limit */
}
HAK_INLINE void hak_page_set_flags(hak_page_t *page, uint8_t flags) {
    HAK_SET_RELAXED(page->flags, flags);
    hak_page_update_limit(page);
}

/* ---- large blocks' canaries (docs/design.md, "Large blocks' canaries") ----
 * A block of a large page (above 64 KiB, up to 2 MiB) is followed by
 * HAK_CANARY bytes no correct program writes: malloc takes the class of
 * n + HAK_CANARY, records n in the page (large_req) and writes a word of
 * the block's address and a secret at the block's offset n, its low byte 0
 * (a string filling the block ends there).  malloc_usable_size says n.
 * Every free of such a block checks the word first, so an overflow is
 * reported before the block goes back: a large page's carved_limit is 0
 * (hak_page_limits), so its frees, local or remote, take the complete
 * check (hak_free_checked) and no other free pays for it.  The hardened
 * build has trailers of its own on every block, and no canary here. */
/* What a request of n bytes asks of the size classes: n, or for a large
 * block n and its canary. */
HAK_INLINE size_t hak_canary_need(size_t n) {
    return n > HAK_MEDIUM_MAX && n <= HAK_LARGE_MAX - HAK_CANARY ? n + HAK_CANARY : n;
}
HAK_INLINE bool hak_page_has_canary(const hak_page_t *page) { return HAK_CANARY && page->kind == HAK_PAGE_LARGE; }
HAK_INLINE unsigned hak_large_index(const hak_page_t *page, const void *block) {
    return (unsigned)((size_t)((const uint8_t *)block - page->start) / page->block_size);
}
HAK_INLINE uint64_t hak_large_canary(const void *block) {
    return ((((uintptr_t)block ^ hak_secret(1)) * 0x9e3779b97f4a7c15u) | 0x8000) & ~(uint64_t)0xff;
}
/* Has a block of n bytes of page room for its canary?  All but the
 * largest class's largest sizes (hak_canary_need) have. */
HAK_INLINE bool hak_large_has_room(const hak_page_t *page, size_t n) { return n + HAK_CANARY <= page->block_size; }
/* block, of a large page, now holds n bytes: its size, and its canary */
HAK_INLINE void hak_large_seal(hak_page_t *page, void *block, size_t n) {
    uint64_t c = hak_large_canary(block);
    page->large_req[hak_large_index(page, block)] = (uint32_t)n;
    if (hak_large_has_room(page, n)) memcpy((uint8_t *)block + n, &c, sizeof c);
}
/* The end of a large page's span of slices.  When its blocks leave room
 * there, the span's last 16 bytes hold a canary too (hak_segment_init_page):
 * an underflow of the next span's first block runs into it. */
HAK_INLINE uint8_t *hak_span_end(const hak_page_t *page) {
    hak_segment_t *seg = hak_segment_of(page);
    return (uint8_t *)seg + (((size_t)(page - seg->pages) + page->span) << HAK_SLICE_SHIFT);
}
HAK_INLINE bool hak_span_has_canary(const hak_page_t *page) {
    return hak_page_has_canary(page) && (size_t)(hak_span_end(page) - (page->start + page->area)) >= 16;
}
/* The span canary's two words.  The second, just before the next span's
 * first block, is small: where delete[] of a block new allocated reads an
 * element count, it runs a bounded loop of destructors before the free that
 * is reported, not one of 2^60. */
HAK_INLINE void hak_span_canary(const uint8_t *e, uint64_t c[2]) {
    c[0] = hak_large_canary(e - 16);
    c[1] = (hak_large_canary(e - 8) >> 40) | 1;
}
HAK_INLINE void hak_span_seal(const hak_page_t *page) {
    uint8_t *e = hak_span_end(page);
    uint64_t c[2];
    hak_span_canary(e, c);
    memcpy(e - 16, c, sizeof c);
}
/* block's canary (and its span's) intact, or reported (op names the
 * caller; hak_free.c) */
void hak_large_check(const hak_page_t *page, const void *block, const char *op);
/* The bytes a live block of a page that is not huge holds from p (its
 * start, or an aligned pointer inside it): what malloc_usable_size says. */
HAK_INLINE size_t hak_block_usable(const hak_page_t *page, const void *block, const void *p) {
    size_t end = hak_page_has_canary(page) ? page->large_req[hak_large_index(page, block)] : page->block_size;
    return end - (size_t)((const uint8_t *)p - (const uint8_t *)block);
}
/* The most bytes the block could hold from p: what realloc may keep in place. */
HAK_INLINE size_t hak_block_room(const hak_page_t *page, const void *block, const void *p) {
    return page->block_size - (size_t)((const uint8_t *)p - (const uint8_t *)block) -
           (hak_page_has_canary(page) ? HAK_CANARY : 0);
}
/* realloc keeps a block that holds usable bytes and could hold room at
 * size bytes: when size fits and uses at least half of it, or is the same */
HAK_INLINE bool hak_realloc_keeps(size_t size, size_t usable, size_t room) {
    return (size <= room && size >= room / 2) || size == usable;
}
/* realloc keeps p, of block, at size bytes (hak_realloc_keeps) */
HAK_INLINE void hak_block_resize(hak_page_t *page, void *block, const void *p, size_t size) {
    if (hak_page_has_canary(page)) hak_large_seal(page, block, (size_t)((const uint8_t *)p - (uint8_t *)block) + size);
}

/* ---- the fast paths ---- */

/* malloc from a heap: one table load, one free-list pop (the public heaps'
 * hakmem_heap_malloc uses it too).  *slot: the block's size when the pop
 * served it, else left alone (for the hardened layer: hak_hardened.c; the
 * other callers pass a variable they never read, and the store goes). */
HAK_INLINE void *hak_heap_malloc_slot(hak_heap_t *heap, size_t size, size_t *slot) {
    if (hak_likely(size <= HAK_DIRECT_MAX)) {
        hak_page_t *page = heap->direct[(size + 15) >> 4];
        hak_block_t *b = page->free;
        if (hak_likely(b != NULL)) {
            page->free = b->next;
            b->key = 0;
            page->used++;
            if (HAK_STATS_FULL_ENABLED) hak_stat_inc(heap->st_allocs[page->class_idx]);
            *slot = page->block_size;
            return b;
        }
        return hak_malloc_refill(size, heap, page);
    }
    return hak_malloc_slow(size, heap);
}
HAK_INLINE void *hak_heap_malloc_inline(hak_heap_t *heap, size_t size) {
    size_t unused;
    return hak_heap_malloc_slot(heap, size, &unused);
}

/* malloc: one TLS load, then the above. */
HAK_INLINE void *hak_malloc_inline(size_t size) { return hak_heap_malloc_inline(hak_tls.heap, size); }

/* free: one region-map load says "hakmem's, and this thread's heap"; the
 * page comes from the segment's slice table; then the misuse checks (block
 * boundary, not already free) and a local push.  Everything else -- remote
 * frees, full pages, aligned blocks, huge blocks, misuse -- is the slow path. */
HAK_INLINE void hak_free_common(void *p, bool sized, size_t n) {
    uintptr_t unit = ((uintptr_t)p >> HAK_SEGMENT_SHIFT) & (HAK_SEGMAP_ENTRIES - 1);
    if (hak_likely(atomic_load_explicit(&hak_segmap[unit], memory_order_relaxed) == hak_tls.tag)) {
        hak_segment_t *seg = (hak_segment_t *)(unit << HAK_SEGMENT_SHIFT);
        hak_page_t *page = hak_page_of(seg, p);
        hak_block_t *b = (hak_block_t *)p;
        if (hak_likely((hak_local_block(page, (uint16_t)(uintptr_t)p) ||    /* small page */
                        hak_wide_block(page, p)) &&                          /* medium, large */
                       b->key != page->local_key)) {
            /* operator delete's size: of the block's class (reported there) */
            if (sized && hak_unlikely(hak_size_class(n) != page->class_idx)) hak_check_delete_size(p, n, false);
            if (HAK_STATS_FULL_ENABLED) hak_stat_inc(hak_tls.heap->st_frees[page->class_idx]);
            b->next = page->local_free;
            b->key = page->local_key;
            page->local_free = b;
            if (hak_unlikely(--page->used == 0)) hak_page_retire(page);
            return;
        }
        if (sized) hak_check_delete_size(p, n, false);
        hak_free_local_slow(page, p);   /* this thread's page with flags, or misuse */
        return;
    }
    if (sized && p != NULL) hak_check_delete_size(p, n, false);
    hak_free_slow(p);
}
HAK_INLINE void hak_free_inline(void *p) { hak_free_common(p, false, 0); }
/* a sized operator delete's free: the same, and the size checked */
HAK_INLINE void hak_free_sized_inline(void *p, size_t n) { hak_free_common(p, true, n); }

/* ---- heap profiles (hak_profile.c) ---- */
void *hak_profile_malloc(size_t size, size_t align, bool zero);   /* the countdown went negative */
void  hak_profile_resized(void *q, size_t size);   /* realloc resized a huge block; countdown negative */
/* The sampling hook of malloc, calloc, realloc, the aligned allocations and
 * operator new: a per-thread byte
 * countdown; when it goes negative the allocation is sampled (or, with
 * sampling off, the countdown is set out of reach once per thread).  The
 * functions that use it live in the section hak_prof_text, which the stack
 * capture skips.  Modular arithmetic: a size of 2^63 or more must not
 * overflow a signed subtraction. */
#define HAK_PROF_ENTRY __attribute__((section("hak_prof_text")))
#define HAK_SAMPLED(size) \
    hak_unlikely((hak_tls.sample_left = (int64_t)((uint64_t)hak_tls.sample_left - (uint64_t)(size))) < 0)
/* malloc with the sampling hook: malloc, realloc's new block, operator new.
 * *slot: as hak_heap_malloc_slot's (the hardened layer's) */
HAK_INLINE void *hak_malloc_sampled_slot(size_t size, size_t *slot) {
    if (HAK_SAMPLED(size)) return hak_profile_malloc(size, HAK_MIN_ALIGN, false);
    return hak_heap_malloc_slot(hak_tls.heap, size, slot);
}
HAK_INLINE void *hak_malloc_sampled(size_t size) {
    size_t unused;
    return hak_malloc_sampled_slot(size, &unused);
}
void  hak_profile_free(void *p);                    /* a sampled block moves (hak_realloc) */
void  hak_profile_resize(void *p, size_t size);     /* realloc kept sampled block p in place */
bool  hak_profile_grown(void *p, size_t size, bool sampled);   /* realloc grew p in place, countdown
                                                                  negative: true if p is now sampled */
/* The calling stack (at most 32 frames), its leading frames in [lo, hi) left
 * out (lo == hi: the sampling hooks' section); 0 frames before the unwinder
 * is loaded (hak_profile.c). */
unsigned hak_stack_capture(void **frames, unsigned max, uintptr_t lo, uintptr_t hi);

/* ---- guarded sampling (hak_guard.c) ---- */
void  hak_guard_enable(void);                   /* registers its hooks (hak_profile.c's constructor) */
/* A block on a slot of its own ending at a no-access page, zeroed; NULL: it
 * cannot be guarded (too large, too aligned, no free slot) */
void *hak_guard_alloc(size_t size, size_t align, void *const *frames, unsigned depth);
bool  hak_guard_owns(const void *p);            /* p lies in the guarded region */
/* the region, its live blocks and their bytes (the memory account); false: none */
bool  hak_guard_region(uintptr_t *base, size_t *size, uint64_t *live, uint64_t *blocks);
void  hak_guard_trim(void);                     /* malloc_trim: the freed slots' memory goes back */
bool  hak_guard_resize(void *p, size_t size);   /* realloc keeps guarded block p (false: not one, or it moves) */

/* The calling stack's return addresses, leading ones in [lo, hi) left out;
 * -1: not walkable by the cached rules (hak_unwind.c), use libgcc's walk. */
int   hak_unwind(void **frames, unsigned max, uintptr_t lo, uintptr_t hi);
/* A report's stack (hak_unwind.c): from registers pc, sp, bp (pc first), or
 * with pc 0 the caller's; the cached rules only, no lock; the frames walked
 * until one the rules do not model. */
int   hak_unwind_regs(void **frames, unsigned max, uintptr_t pc, uintptr_t sp, uintptr_t bp);

/* ---- misuse reports (hak_report.c) ---- */
void  hak_report_enable(void);                  /* registers hak_report_hooks (hak_profile.c's constructor) */
/* The stack of the faulting access from signal context ctx, under "hakmem:
 * the bad access, by thread T, at:"; async-signal-safe (hak_guard.c) */
void  hak_report_fault_stack(const void *ctx);
/* The next-step line: guarded (the report has the block's stacks) or not */
void  hak_report_next(bool guarded);
/* Guarded sampling's part of a report on p (hak_guard.c): false if p is not
 * in the guarded region; else part 0 prints the block, part 1 its
 * allocation's and free's stacks. */
bool  hak_guard_report(const void *p, int part);
/* A heap profile's sample at p: its allocation stack in frames (at most
 * max), its depth in *depth, its size in *size; false if p is no sample or
 * the table is busy (hak_profile.c; never waits) */
bool  hak_profile_sample_of(const void *p, void **frames, unsigned max, unsigned *depth, size_t *size);
/* The stack walk's start-up (hak_unwind_load, the constructor only: it
 * may take the loader's lock): _dl_find_object for hakmem's own walk, for
 * every use; libgcc's unwinder only for heap profiles (and, on an
 * architecture without hakmem's walk, for guarded sampling): libgcc_s is
 * no link dependency, so a program that takes no profile does not map it.
 * Returns why the walk cannot run, or NULL; the pointers are NULL until
 * libgcc's is loaded. */
enum { HAK_UNWIND_REPORTS, HAK_UNWIND_GUARD, HAK_UNWIND_PROFILE };
const char *hak_unwind_load(int use);
extern _Unwind_Reason_Code (*hak_gcc_backtrace)(_Unwind_Trace_Fn, void *);
extern _Unwind_Ptr (*hak_gcc_get_ip)(struct _Unwind_Context *);
void *hak_calloc_total(size_t total);               /* calloc, unsampled (hak_alloc_plain.c) */

/* Usable size of a live block, or 0 when p is NULL; fatal for foreign p. */
size_t hak_usable_size(const void *p);              /* hak_free.c */
void *hak_malloc_aligned(size_t size, size_t align, bool zero);   /* sampled */
void *hak_aligned_plain(size_t size, size_t align, bool zero);    /* unsampled (hak_alloc_plain.c) */
void *hak_realloc(void *p, size_t size);

#endif /* HAK_INTERNAL_H */
