/* hak_types.h -- hakmem's data structures, and the design they carry.
 *
 * Glossary
 * --------
 * block     One allocation as the user sees it.  Blocks carry no header: the
 *           block's page is found from its address alone.
 * page      A run of memory holding blocks of one size class, with three
 *           free lists (see hak_page_t).  A page is 64 KiB (small: blocks
 *           <= 8 KiB, so 8 to 4,096 blocks a page), 256/512/1024 KiB (medium,
 *           <= 16/32/64 KiB: 16..28 blocks a page) or, for large blocks
 *           (<= 2 MiB), a span of 64 KiB slices of a large segment holding
 *           256 KiB of blocks (at least one).  Huge blocks get a page of
 *           their own inside a mapping of their own.
 * segment   A 4 MiB-aligned region of 4 MiB (the earlier hakmem called these
 *           SuperSlabs).  Its header holds the page descriptors (in a small
 *           segment the header has the first 64 KiB to itself, so small pages
 *           start on 64 KiB boundaries).  All pages of a segment have the
 *           same kind and belong to one heap.  Masking a block's address with
 *           ~(4 MiB - 1) gives its segment header.
 * heap      Per-thread allocation state: for every size class a queue of
 *           pages with free blocks, a queue of full pages, and the segments it
 *           owns.  A heap is reached through one initial-exec TLS pointer.
 *           Heaps are never unmapped: an exited thread's heap is abandoned and
 *           later adopted whole by a new thread (or swept by others).
 * public heap  A heap a program made with hakmem_heap_new (hak_heap_api.c,
 *           docs/heaps.md): no thread's default heap, used only by the thread
 *           that made it (pub_owner); destroyed or deleted whole.
 * size class  One of HAK_CLASS_COUNT block sizes.  16..128 step 16, then 8
 *           classes per power of two (12.5% apart) up to 2 MiB.
 * local free  A free by the thread that owns the block's heap: a push onto
 *           page->local_free, no atomics.
 * remote free A free from any other thread: a lock-free push onto
 *           page->xthread_free (or, when the page is full, onto the owning
 *           heap's xdelayed list so that the owner notices the page again).
 * region map  hak_segmap: 16 bits per 4 MiB of address space.  0: not hakmem's;
 *           1: a segment with no fast-path owner (huge, cached); 2..0x7fff: a
 *           segment owned by the heap with that tag; 0x8000|d: inside a huge
 *           mapping whose header is d segments lower.  free() compares the
 *           entry with the calling thread's heap tag: one load tells both
 *           "hakmem's pointer" and "a local free", before touching the block.
 * heap tag  A heap's 15-bit number in the region map (HAK_TAG_*).
 * purge     Returning committed free memory to the OS (madvise, or munmap
 *           of a cached huge block), as the decay decides (hak_purge.h).
 */
#ifndef HAK_TYPES_H
#define HAK_TYPES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <pthread.h>
#include "hak_arch.h"

/* ---- geometry ---- */
#define HAK_SEGMENT_SHIFT 22                        /* 4 MiB segments */
#define HAK_SEGMENT_SIZE  ((size_t)1 << HAK_SEGMENT_SHIFT)
#define HAK_SEGMENT_MASK  (HAK_SEGMENT_SIZE - 1)
/* page sizes per kind: hak_kind_shift() (hak_size.c) */
#define HAK_MAX_PAGES_PER_SEGMENT 64

#define HAK_SMALL_MAX   ((size_t)8 * 1024)          /* blocks <= 8 KiB: small pages */
#define HAK_MEDIUM_MAX  ((size_t)64 * 1024)         /* <= 64 KiB: medium pages */
#if defined(HAK_HARDENED) && HAK_HARDENED
/* the hardened build: pages lie in a segment's first MiB only
 * (HAK_HARDENED_USED, hak_hardened.h), where a block of 960 KiB fits after
 * the header's slice; the classes above it go unused */
#define HAK_LARGE_MAX   ((size_t)960 * 1024)
#else
#define HAK_LARGE_MAX   ((size_t)2 * 1024 * 1024)   /* <= 2 MiB: large pages (spans, 1+ blocks) */
#endif
/* Above HAK_LARGE_MAX a block is huge: a mapping of its own. */
/* Blocks a large page holds at most: its span holds 256 KiB of blocks of
 * more than 64 KiB, at least one (hak_segment.c) */
#define HAK_LARGE_BLOCKS 3

#define HAK_CLASS_COUNT 120                         /* classes 0..119, last is 2 MiB */
#define HAK_DIRECT_MAX  2048                        /* sizes served by heap->direct[] */
#define HAK_DIRECT_COUNT ((HAK_DIRECT_MAX >> 4) + 1)

#define HAK_MIN_ALIGN 16
/* Address space the region map covers: 47 bits on x86-64, 48 on aarch64
 * (HAK_ARCH_ADDRESS_BITS, src/arch/).  The kernel may hand out more (5-level
 * tables, a 52-bit arm64 space, an mmap hint taken up high): the OS layer
 * (hak_os.c) checks every mapping and never passes on memory the map cannot
 * describe, and hak_segmap_set refuses indices outside it. */
#define HAK_ADDRESS_BITS HAK_ARCH_ADDRESS_BITS
#define HAK_SEGMAP_ENTRIES ((size_t)1 << (HAK_ADDRESS_BITS - HAK_SEGMENT_SHIFT))
#define HAK_TAG_NONE   0       /* not hakmem's */
#define HAK_TAG_SHARED 1       /* hakmem's, always the slow path */
#define HAK_TAG_FIRST  2       /* first heap tag */
#define HAK_TAG_LAST   0x7fff  /* heaps beyond this get HAK_TAG_SHARED segments */
#define HAK_TAG_BACK   0x8000  /* | distance in segments to a huge header */
#define HAK_TAG_INVALID 0xffff /* a thread with no heap: matches no entry */
#define HAK_SLICE_SHIFT 16     /* segment page table granularity (64 KiB) */
/* an OS page never straddles a slice: purging and page-aligned blocks work
 * in whole OS pages of up to 64 KiB (arm64's largest) */
_Static_assert(HAK_ARCH_PAGE_MAX <= (1 << HAK_SLICE_SHIFT), "OS pages larger than a slice");

/* Page kinds: a small page holds 8..4,096 blocks of its class, a medium page
 * 16..28 (carved a block at a time, so a partly used page commits only the
 * blocks the class has used: hak_page_extend), a large page 256 KiB of
 * blocks (1..3), so that a class's partly used large page keeps little idle
 * memory.  All pages of a segment have one kind; a large segment's pages
 * are spans of its slices. */
typedef enum hak_page_kind_e {
    HAK_PAGE_SMALL = 0,     /* 64 KiB pages, blocks <= 8 KiB */
    HAK_PAGE_MEDIUM1 = 1,   /* 256 KiB pages, blocks <= 16 KiB */
    HAK_PAGE_MEDIUM2 = 2,   /* 512 KiB pages, blocks <= 32 KiB */
    HAK_PAGE_MEDIUM = 3,    /* 1 MiB pages, blocks <= 64 KiB */
    HAK_PAGE_LARGE = 4,     /* spans of 64 KiB slices, blocks <= 2 MiB */
    HAK_PAGE_HUGE = 5       /* a mapping of its own */
} hak_page_kind_t;
#define HAK_PAGE_KINDS 5   /* kinds that live in shared segments */

/* A free block: the first word links the free list; the second holds its
 * page's free_key while the block is free (double-free detection: malloc
 * clears the word, and every incarnation of every page has a key of its own,
 * a serial number mixed with a secret drawn at start-up, so a correct program
 * never holds the current key -- not even in uninitialized bytes an earlier
 * incarnation left -- and freed memory reveals no metadata address;
 * docs/design.md, "Misuse checks never accuse a correct program").  A block handed out by an aligned allocation at an
 * interior offset q keeps, in its first word (which lies before q), q encoded
 * with a second secret and the page's key (hak_aligned_mark): free() accepts
 * exactly q. */
typedef struct hak_block_s {
    struct hak_block_s *next;
    uintptr_t key;
} hak_block_t;

/* page->flags: any bit set sends free() to its slow path. */
#define HAK_PAGE_IN_FULL     0x01  /* page sits in heap->full, not in its class queue */
#define HAK_PAGE_HAS_ALIGNED 0x02  /* some block was handed out at an interior offset */
#define HAK_PAGE_IS_HUGE     0x04  /* the single page of a huge mapping */
#define HAK_PAGE_SAMPLED     0x08  /* a page of one block, a heap profile's sample
                                      (hak_page_sampled_alloc): in no queue */

/* page->xthread_free packs three things in one word, so that a remote free
 * is one CAS and the owner takes the whole list with one:
 *  - bit 0, NOTIFY: the page is full and its owner asked to be told of the
 *    next remote free (that free goes to heap->xdelayed instead);
 *  - bits 4..47: the head of the list of remotely freed blocks (blocks are
 *    16-byte aligned and below 2^HAK_ADDRESS_BITS <= 2^48);
 *  - bits 48..63: how many blocks the list holds (at most a page's 4,096),
 *    so that the owner, collecting it, need not walk the list -- each link
 *    of which the freeing thread wrote last, a cache line to fetch from
 *    another core, one after the other (prodcons: docs/design.md). */
#define HAK_TF_NOTIFY ((uintptr_t)1)
#define HAK_TF_COUNT_SHIFT 48
#define HAK_TF_ONE ((uintptr_t)1 << HAK_TF_COUNT_SHIFT)       /* one block more on the list */
#define HAK_TF_LIST(tf) ((struct hak_block_s *)((tf) & (HAK_TF_ONE - 1) & ~HAK_TF_NOTIFY))
#define HAK_TF_COUNT(tf) ((uint32_t)((tf) >> HAK_TF_COUNT_SHIFT))
_Static_assert(HAK_ADDRESS_BITS <= HAK_TF_COUNT_SHIFT, "block addresses fit below xthread_free's count");

struct hak_heap_s;
struct hak_segment_s;

/* hak_page_t -- descriptor of one page, inside its segment's header.
 * Invariants (owner thread's view, between operations):
 *  - free, local_free are lists of blocks inside [start, start+capacity*block_size),
 *    each at a multiple of block_size from start; they are disjoint.
 *  - used = capacity - |free| - |local_free|.  Blocks freed remotely (on
 *    xthread_free, or on the heap's xdelayed list) still count as used until
 *    the owner collects them.
 *  - capacity <= reserved; blocks at index >= capacity were never handed out.
 *  - in_use == 0  <=>  the page is not assigned to a class (free slot in its
 *    segment); then it is in no queue.
 *  - IN_FULL set  <=>  the page is in heap->full; then free == local_free == NULL
 *    was true when it was moved there, and NOTIFY was set in xthread_free.
 *  - carved_limit == (capacity - 1) * div_step + 1 (0 if capacity == 0),
 *    kept by hak_page_update_limit: then for any offset o from start,
 *    o * div_magic (mod 2^64) < carved_limit  <=>  o is the start of one of
 *    the capacity carved blocks (checked for all classes, offsets within the
 *    segment and the header below start: docs/design.md).
 *  - local_limit == carved_limit for a small page without flags, else 0.  A
 *    small page starts on a 64 KiB boundary, so the fast free's offset is
 *    (uint16_t)p.  wide_limit == carved_limit for a medium or large page
 *    without flags, else 0: the fast free's second test, with p - start.
 *    Both 0 send every free of the page to the slow path.
 *  - Only the owning heap's thread touches anything but xthread_free.
 */
typedef struct hak_page_s {
    /* line 0 -- the owner's: written by malloc and free */
    hak_block_t *free;               /* blocks malloc pops */
    hak_block_t *local_free;         /* blocks the owner freed */
    uint32_t used;                   /* see the invariants above */
    _Atomic uint32_t capacity;       /* blocks carved out so far; read by validation (any thread) */
    _Atomic uint8_t flags;           /* HAK_PAGE_*; read by validation (relaxed) */
    uint8_t  in_use;
    uint8_t  rotated;                /* a direct class's dry page sent once to its queue's back
                                        (hak_find_page); cleared when its collected frees make it
                                        the first page again, and when the slot gets a class */
    uint64_t local_limit;            /* see above; 0 sends every free to the slow path (owner only) */
    uint64_t local_magic;            /* == div_magic, here so that the fast free's block test
                                        reads no line but this one */
    uintptr_t local_key;             /* == free_key, here for the fast free */
    struct hak_page_s *next;         /* class queue or full queue */
    /* line 1 -- read-mostly: set when the page gets its class, read by the
     * owner's free and by remote freers (which thus never read line 0, the
     * line the owner keeps writing) */
    _Alignas(64) uint8_t *start;     /* first block */
    uint64_t div_magic;              /* floor(2^64 / block_size) + 1 */
    _Atomic uint64_t carved_limit;   /* (capacity - 1) * div_step + 1, or 0 for a page with
                                        aligned blocks, a huge or a sampled page: the quick
                                        block test of remote and slow frees */
    size_t   block_size;
    uint64_t wide_limit;             /* local_limit's counterpart for medium and large pages,
                                        tested with p - start (owner only) */
    struct hak_page_s *prev;         /* queue link (owner only, slow paths) */
    uintptr_t free_key;              /* what a free block of this page holds in its key word:
                                        new each time the page gets its class
                                        (hak_page_new_key), so freed memory shows no address */
    uint32_t reserved;               /* blocks that fit */
    uint8_t  class_idx;
    uint8_t  kind;                   /* hak_page_kind_t */
    /* line 2 -- written by remote freers */
    _Alignas(64) _Atomic(uintptr_t) xthread_free; /* remote frees (lock-free stack) | HAK_TF_NOTIFY */
    uint64_t div_step;               /* div_magic * block_size mod 2^64 (owner, slow paths) */
    size_t   area;                   /* reserved * block_size: valid offsets from start (huge:
                                        the rest of the mapping, block_size the usable size) */
    uint64_t freed_at_ms;            /* when the slot was freed (purge delay) */
    uint8_t  needs_purge;            /* slot free and memory not yet returned */
    uint32_t dirty_kb;               /* KiB from the slot's start that may be committed
                                        (hak_purge.c; meaningful while needs_purge) */
    uint8_t  span;                   /* large segments: slices in the span this descriptor
                                        heads (in use or free) */
    uint32_t large_req[HAK_LARGE_BLOCKS]; /* a large page's blocks: the size each was
                                        allocated with; its canary follows (hak_large_seal) */
} __attribute__((aligned(64))) hak_page_t;  /* three cache lines, by writer */
_Static_assert(__builtin_offsetof(hak_page_t, start) == 64, "line 0 is the owner's");
_Static_assert(__builtin_offsetof(hak_page_t, xthread_free) == 128, "line 1 holds 64 bytes");
_Static_assert(sizeof(hak_page_t) == 192, "three cache lines");

/* hak_segment_t -- header at the start of every 4 MiB-aligned segment.
 * Invariants:
 *  - (uintptr_t)seg % HAK_SEGMENT_SIZE == 0 and hak_segmap says so.
 *  - heap is the owner of every page; it changes only while the segment has
 *    no page in use (cached and handed to another heap).  The region map
 *    holds heap->tag for it (HAK_TAG_SHARED while cached).
 *  - slice_page[i] is the page covering bytes [i*64K, (i+1)*64K).
 *  - used_pages == number of pages with in_use; page_count = 1 << (22 - page_shift).
 *  - A large segment has page_shift 16 and 64 descriptors, one per slice:
 *    a page (in use or free) is a span of slices headed by its first
 *    slice's descriptor (span = its length); slice_page[] of every slice of
 *    the span points to the head; free_slices counts the slices of free
 *    spans; each slice's own descriptor keeps its purge state.
 *  - A small segment never hands out slot 0 (first_page == 1): the header
 *    lives in its first 64 KiB, so every small page starts on a 64 KiB
 *    boundary and a local free finds a block's offset as the low 16 bits of
 *    its address.  In slot 0 a medium page starts a block's slack after
 *    the header, so that its blocks end at the slot's end, and a large
 *    page at its span's second slice: every block of a page that is not
 *    huge is then aligned to the largest power of two (up to 64 KiB) that
 *    divides its block size (hak_segment_init_page, hak_aligned_plain).
 *  - A huge segment has one page; its mapping is map_size bytes long, a
 *    whole number of 4 MiB units.  A cached (freed) one has it not in use. */
typedef struct hak_segment_s {
    hak_page_t *slice_page[HAK_MAX_PAGES_PER_SEGMENT]; /* 64 KiB slice -> its page */
    struct hak_heap_s *heap;
    uint8_t  page_shift;
    uint8_t  kind;                   /* hak_page_kind_t */
    uint16_t page_count;
    uint16_t used_pages;
    uint8_t  first_page;             /* first slot handed out: 1 for small segments, whose
                                        slot 0 holds the header; else 0 */
    uint16_t purge_pending;          /* free pages whose memory is still committed */
    size_t   map_size;               /* bytes mapped (huge: whole mapping) */
    struct hak_segment_s *next, *prev; /* heap's list of segments with free pages */
    bool     in_free_list;
    uint8_t  free_slices;            /* large segments: slices in free spans */
    uint32_t clean_kb;               /* KiB of its slots counted in hak_counters.bytes_clean:
                                        never touched since formatted, or purged (hak_purge.h) */
    uint32_t reach;                  /* the segment's bytes from its start that are
                                        accessible (whole slices, 256 KiB at least; 0: fresh,
                                        all accessible until its first page sets it; the
                                        hardened build: its first MiB); the rest is no-access
                                        until a page first lies there (hak_segment_open; a far
                                        write faults); kept while cached, whatever kind it is
                                        formatted for next */
    hak_page_t pages[];              /* page_count descriptors */
} hak_segment_t;

typedef struct hak_page_queue_s {
    hak_page_t *first, *last;
} hak_page_queue_t;

typedef struct hak_segment_list_s {
    hak_segment_t *first;
} hak_segment_list_t;

/* heap->state */
#define HAK_HEAP_OWNED     0
#define HAK_HEAP_ABANDONED 1
#define HAK_HEAP_BUSY      2   /* abandoned, being swept by another thread */
/* ... and in a fork child (hak_heap.c, "fork") */
#define HAK_HEAP_FORKED    3   /* its thread did not survive the fork; not yet checked (hak_fork_settle) */
#define HAK_HEAP_LOST      4   /* ... and caught inside an operation: never adopted, swept or purged */

/* hak_heap_t -- per-thread allocation state.
 * Invariants:
 *  - direct[i] is the first page of the queue of class hak_direct_class[i],
 *    or &hak_page_empty when that queue is empty.
 *  - queues[c] holds only in-use pages of class c without IN_FULL; full holds
 *    exactly the pages with IN_FULL.
 *  - Only the thread whose hak_tls.heap points here (or a sweeper that moved
 *    state from ABANDONED to BUSY) touches anything but xdelayed.
 *  - Heaps are never freed: remote freers may hold a heap pointer at any time. */
/* A token a thread holds while it lives: a robust mutex (hak_alive.c) */
typedef struct hak_alive_s { pthread_mutex_t m; } hak_alive_t;

typedef struct hak_heap_s {
    hak_page_t *direct[HAK_DIRECT_COUNT];
    hak_page_queue_t queues[HAK_CLASS_COUNT];
    hak_page_queue_t full;
    _Atomic(hak_block_t *) xdelayed;       /* remote frees into full pages */
    _Atomic int state;
    struct hak_heap_s *next_all;           /* global list of every heap */
    _Atomic uint64_t abandoned_seq;        /* when its thread gave it up (a global count):
                                              adoption takes the oldest (hak_heap.c) */
    hak_alive_t owner_alive;               /* held by the owning thread while OWNED by a thread
                                              (hak_alive.c): a heap whose thread ended without
                                              hakmem's exit handler is reclaimed by it */
    hak_segment_list_t segs[HAK_PAGE_KINDS]; /* segments with a free page slot */
    uint64_t purge_due_ms;                 /* earliest time a pending purge is due (0: none) */
    uint16_t tag;                          /* region map tag of its segments */
    uint32_t purge_pending_bytes_k;        /* KiB in free page slots not yet purged */
    uint32_t kept_count;                   /* pages on kept[] (the owner peeks without the lock) */
    /* statistics, written only by the owner (relaxed, no lock prefix; a
     * thread that only frees gets a heap on its first remote free) and summed
     * over all heaps by hakmem_stats_get(); the per-class arrays are at the
     * end */
    _Atomic uint64_t st_slow;                      /* allocations that searched for a page */
    _Atomic uint64_t st_cas_retries;               /* failed CASes in this thread's remote frees */
    uint32_t pages_retired;
    /* purging (hak_purge.h): the slot lock, and the demand of the heap's free
     * page slots (hak_purge.c), written with the slot lock held */
    _Atomic int slot_lock;
    uint64_t demand_bytes, demand_at_ms, regret_bytes, regret_at_ms;
    /* large classes that cycle (hak_page_retire, hak_find_page): the owner's
     * count of requests for a page of a large class, the count when a page
     * of each class last emptied, and a bit per class that keeps its pages
     * (cleared under slot_lock when a kept page goes back unused) */
    uint32_t large_seq;
    uint32_t large_unclaimed;              /* large pages kept since the last large request */
    uint64_t large_cycling[(HAK_CLASS_COUNT + 63) / 64];
    /* public heaps (hakmem_heap_new, hak_heap_api.c, docs/heaps.md): a heap
     * no thread has as its default.  pub_owner is the id of the thread that
     * made it (hak_thread_id; 0 once destroyed or deleted): only that thread
     * may use it -- before or after hakmem's exit handler -- and its own
     * plain frees of the heap's blocks go the remote way (the region map
     * holds the public heap's tag, not the thread's).  pub_magic says live or
     * destroyed, and is 0 for every thread heap; pub_next links destroyed
     * heaps kept for reuse (their tag with them).  State stays
     * HAK_HEAP_OWNED: nobody adopts or sweeps a public heap. */
    uint64_t pub_owner;
    struct hak_heap_s *pub_next;
    uint32_t pub_magic;
    struct hak_segment_s *pub_huge;        /* its huge blocks (seg->next/prev), under hak_pub_huge_lock */
    /* Set in the static empty heap only (hak_heap.c), the one a thread
     * without a heap passes down: the pages layer reaches the heap layer
     * through them (the layers' hook, tools/layers.tsv).  first_malloc: a
     * malloc by a thread with no heap (it gets one, or borrows one after
     * its exit handler); thread_heap: the calling thread's heap, made on
     * demand (hak_heap_for_thread). */
    void *(*first_malloc)(size_t size);
    struct hak_heap_s *(*thread_heap)(void);
    void (*follow)(struct hak_heap_s *owner);
    /* The arrays a class at a time, last: a heap is page-aligned
     * (hak_heap_make), and a new thread's first allocations touch only the
     * page of everything above and the entries of the classes they use
     * (docs/design.md, "Thread start and end"). */
    _Atomic uint64_t st_refills[HAK_CLASS_COUNT];  /* fresh pages taken per class (first: the
                                                      small classes' entries share the first page) */
    hak_page_t *kept[HAK_CLASS_COUNT];     /* per medium or large class, its emptied pages kept formatted,
                                              in no queue, linked by next (hak_page_retire,
                                              hak_segment.c): written under slot_lock */
    uint32_t large_freed_seq[HAK_CLASS_COUNT]; /* (see large_seq) */
    _Atomic uint64_t st_remote[HAK_CLASS_COUNT];   /* remote frees this thread made */
    _Atomic uint64_t st_allocs[HAK_CLASS_COUNT + 1]; /* stats build only; [HAK_CLASS_COUNT]: huge */
    _Atomic uint64_t st_frees[HAK_CLASS_COUNT + 1];
} hak_heap_t;

#endif /* HAK_TYPES_H */
