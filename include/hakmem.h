/* hakmem.h -- public interface of the hakmem memory allocator.
 *
 * hakmem replaces the standard allocation entry points (malloc, free, calloc,
 * realloc, the aligned family, malloc_usable_size, C23 free_sized, C++ new and
 * delete) when it is preloaded (LD_PRELOAD=libhakmem.so) or linked
 * (libhakmem.a).  Programs need this header only for the hakmem_* extras below.
 *
 * Every standard entry point also exists under a hakmem_ prefix.  A build with
 * -DHAK_NO_OVERRIDE exports only the prefixed names; the sanitizer test builds
 * use that to run hakmem beside ASan/TSan's own malloc.
 */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAKMEM_VERSION_MAJOR 0
#define HAKMEM_VERSION_MINOR 1
#define HAKMEM_VERSION_PATCH 0
#define HAKMEM_VERSION_STRING "0.1.0"

/* ---- the standard family under hakmem's own names ---- */
void  *hakmem_malloc(size_t size);
void   hakmem_free(void *p);
void  *hakmem_calloc(size_t n, size_t size);
void  *hakmem_realloc(void *p, size_t size);
void  *hakmem_reallocarray(void *p, size_t n, size_t size);
int    hakmem_posix_memalign(void **out, size_t alignment, size_t size);
void  *hakmem_aligned_alloc(size_t alignment, size_t size);
void  *hakmem_memalign(size_t alignment, size_t size);
void  *hakmem_valloc(size_t size);
void  *hakmem_pvalloc(size_t size);
size_t hakmem_usable_size(const void *p);
void   hakmem_free_sized(void *p, size_t size);
void   hakmem_free_aligned_sized(void *p, size_t alignment, size_t size);

/* ---- hakmem extras ---- */

/* Version string, e.g. "0.1.0". */
const char *hakmem_version(void);

/* Build variant: "release", "debug" (make debug: internal consistency
 * checks), "stats" (make stats: every allocation and free counted) or
 * "hardened" (make hardened: canaries, zero on free, quarantine, guard
 * pages; docs/security.md). */
const char *hakmem_build_variant(void);

/* ---- options (docs/options.md) ----
 *
 * A program's own defaults: define this string in the program, e.g.
 *     const char *hakmem_conf = "sample_bytes=512k,stats=yes";
 * "name=value" items separated by commas; a name is an option's without
 * HAKMEM_ (any case, or with it), values are written as in the
 * environment.  Read once at start-up, after the profile's defaults and
 * before the environment, which overrides it.  hakmem reads it when the
 * program is linked with -lhakmem or libhakmem.a; under LD_PRELOAD the
 * program must export it (-Wl,--export-dynamic-symbol=hakmem_conf, or
 * -rdynamic).  hakmem only declares it (weak): the program defines it.
 * Declared with default visibility, so that a definition after this header
 * is exported also from a program built with -fvisibility=hidden. */
#if defined(__GNUC__)
extern const char *hakmem_conf __attribute__((visibility("default")));
#else
extern const char *hakmem_conf;
#endif

/* Set an option while the program runs: name as in hakmem_conf (e.g.
 * "purge_delay_ms" or "HAKMEM_PURGE_DELAY_MS"), value as in the
 * environment ("0", "on", "64m").  Only verbose, purge_delay_ms,
 * purge_budget_kb, segment_cache, huge_cache_mb and purge_lazy may change
 * at run time; they take effect at the next allocator call that uses them.
 * Returns 0, or -1 with errno ENOENT (no such option), EINVAL (name or
 * value NULL, or a bad value: the option keeps its value) or EPERM (an
 * option read only at start-up). */
int hakmem_option_set(const char *name, const char *value);
/* The value in effect of an option (any option; "profile": 0 speed, 1
 * balanced, 2 lean) into *value.  Returns 0, or -1 with errno ENOENT (no
 * such option) or EINVAL (name or value NULL). */
int hakmem_option_get(const char *name, long *value);

/* Write the live sampled blocks (HAKMEM_SAMPLE_BYTES > 0) as a heap profile
 * that pprof reads (gperftools' text format, heap_v2) to path; "%p" in path
 * stands for the pid.  Returns 0, or -1 with errno set.  docs/profiling.md */
int hakmem_profile_dump(const char *path);

/* 1 if p points into memory that hakmem manages (a live or free block, or a
 * huge mapping), 0 otherwise.  Cheap: one lookup in the region map.  The
 * benchmark workloads use it to prove that hakmem served their allocations. */
int hakmem_owns(const void *p);

/* Process-wide statistics.  Counters are kept off the fast path (slow paths and
 * OS calls), so reading them costs nothing in the hot loop. */

/* Where hakmem's memory is (the memory account, docs/profiling.md): every
 * byte hakmem has mapped from the OS is in exactly one of these parts. */
typedef struct hakmem_memory_s {
    uint64_t live;           /* live blocks, at their block size (what malloc_usable_size
                                says, but a large block's whole slot) */
    uint64_t free;           /* free blocks, and blocks not yet carved, in pages with a live block */
    uint64_t empty;          /* empty pages kept: pages with no live block still formatted for
                                their size class, and free page slots not yet purged */
    uint64_t segment_cache;  /* empty 4 MiB segments kept for reuse (a purged one: its first page) */
    uint64_t huge_cache;     /* freed huge blocks kept for reuse (what they may hold committed) */
    uint64_t metadata;       /* segment and huge-block headers (and a huge block's alignment
                                padding), heaps, other bookkeeping */
    uint64_t returned;       /* returned to the system (purged), never touched, or reserved
                                address space without access */
} hakmem_memory_t;
#define HAKMEM_STATS_CLASSES 128
typedef struct hakmem_class_stats_s {
    size_t block_size;       /* 0 for unused entries */
    uint64_t pages_in_use;   /* pages currently owned by heaps for this class */
    uint64_t pages_peak;     /* highest pages_in_use seen */
    uint64_t refills;        /* slow-path page refills (a new or recycled page) */
    uint64_t remote_frees;   /* frees from a thread other than the owner */
    uint64_t allocations;    /* stats build only (make stats); 0 in release */
    uint64_t frees;          /* stats build only; includes remote frees */
} hakmem_class_stats_t;

typedef struct hakmem_stats_s {
    uint64_t mmap_calls, munmap_calls, madvise_calls, mremap_calls;
    uint64_t segments_in_use, segments_peak;  /* 4 MiB segments mapped (excl. huge) */
    uint64_t huge_in_use, huge_peak;          /* huge blocks (own mapping) */
    uint64_t bytes_mapped, bytes_mapped_peak; /* address space mapped from the OS */
    uint64_t heaps_created, heaps_adopted;    /* thread heaps made fresh / reused */
    uint64_t slow_allocs;                     /* allocations that left the fast path */
    uint64_t remote_frees;                    /* all remote frees */
    uint64_t remote_free_retries;             /* CAS retries in remote frees: contention */
    uint64_t rss_peak_bytes;                  /* from getrusage (ru_maxrss) */
    uint64_t huge_allocations, huge_frees;    /* stats build only */
    int full_counters;                        /* 1 in the stats build: allocations/frees are counted */
    hakmem_class_stats_t classes[HAKMEM_STATS_CLASSES];
    /* ---- the memory account (every build; since 0.1.0 of issue 38: fields are only
     * ever added here, at the end).  Computed by hakmem_stats_get itself: a walk
     * of hakmem's segments and mincore(2), nothing counted on the fast paths.
     * With other threads allocating meanwhile it is a moment's approximation. */
    uint64_t live_bytes;        /* bytes in live blocks (== mapped.live) */
    uint64_t live_blocks;       /* live blocks */
    uint64_t active_bytes;      /* pages in use (the bytes their blocks take) and huge blocks'
                                   mappings, counted on the slow paths */
    uint64_t active_peak_bytes; /* the highest active_bytes: a bound on live_bytes' peak */
    hakmem_memory_t mapped;     /* the parts add up to bytes_mapped (with nothing else running) */
    hakmem_memory_t resident;   /* the resident bytes of each part (mincore); of a page in
                                   use, its live blocks are taken to be resident first */
    uint64_t resident_bytes;    /* the sum of resident: hakmem's resident memory */
    int32_t resident_known;     /* 1; 0 if mincore failed (resident is then all 0) */
    int32_t process_rss_errno;  /* 0, or why /proc/self/statm could not be read; -1: not
                                   tried, a seccomp filter is on (it might kill an open) */
    uint64_t process_rss_bytes; /* the whole process's RSS (/proc/self/statm); 0 if unknown */
    uint64_t segments_cached;   /* segments in the segment cache */
    uint64_t huge_cached;       /* mappings in the huge cache */
    uint64_t huge_bytes_peak;   /* the most bytes of huge mappings in use at once */
    uint64_t mprotect_calls;    /* mprotect calls: a segment's reach, guarded sampling, the
                                   hardened build's guards (the OS calls line) */
} hakmem_stats_t;

/* Fill the first size bytes of *out (pass sizeof *out: a program built
 * against an older, smaller hakmem_stats_t stays safe when the library adds
 * fields at the end).  Returns 0, or -1 if out is NULL. */
int  hakmem_stats_get(hakmem_stats_t *out, size_t size);
/* Print the report (a summary line, where the memory is, the counters; the
 * per-class table in the stats build or with HAKMEM_STATS_BY_CLASS=1) to the
 * file HAKMEM_STATS_FILE names, else to stderr.  With stderr closed it goes
 * to a file of its own, $TMPDIR/hakmem-stats.PID.txt (/tmp without TMPDIR),
 * and a one-line notice on the terminal (/dev/tty) names it.
 * docs/profiling.md, "Statistics". */
void hakmem_stats_print(void);
/* The same report, a line at a time (each ends with a newline), to write:
 * for programs that route their own output (jemalloc's malloc_stats_print).
 * No lock of hakmem's is held while write runs; nothing goes to stderr. */
void hakmem_stats_print_cb(void (*write)(void *arg, const char *text), void *arg);

/* Return free memory to the OS now (what malloc_trim(0) does): the free
 * pages of every thread's heap (live threads' too), exited threads' heaps,
 * the segment cache and the huge-block cache.  Returns
 * 1 if hakmem made any madvise or munmap call anywhere in the process while
 * it ran (the counters compared are process-wide: another thread's purge,
 * huge free or mapping trim meanwhile counts too), 0 otherwise.  So 0 means
 * this call released nothing; 1 does not prove that it did. */
int hakmem_collect(void);

/* The soft memory limit (HAKMEM_MEMORY_LIMIT; docs/memory-return.md, "A
 * soft memory limit").  Above 90 % of the limit hakmem returns every
 * cached and empty page at once and then every page a free empties, until
 * its resident memory is below 80 %.  No allocation fails because of it. */
typedef struct hakmem_memory_limit_s {
    size_t limit;          /* bytes; 0: no limit */
    size_t high, low;      /* 90 % and 80 % of it: the pressure starts above high, ends below low */
    size_t resident;       /* hakmem's estimate of the memory it holds resident (mapped, less
                              page slots never touched or purged) */
    int pressing;          /* 1 while the pressure lasts */
    uint64_t pressures;    /* times the pressure started */
    uint64_t returns;      /* times every free page and cached block went back at once */
} hakmem_memory_limit_t;
/* Set the limit in bytes (0: none), from any thread, at any time; above
 * the high mark the memory goes back at once.  Returns 0. */
int hakmem_memory_limit_set(size_t bytes);
/* Read the limit of the process's cgroup again (v2 memory.max, else v1
 * memory.limit_in_bytes, the smallest up to the root) and make it the
 * limit (none if the cgroup has none).  Returns 0, or -1 with errno set
 * (ENOENT) and the limit unchanged if no such file could be read.  Reads
 * files: not from a signal handler. */
int hakmem_memory_limit_refresh(void);
/* Fill the first size bytes of *out (pass sizeof *out).  Returns 0, or -1
 * if out is NULL. */
int hakmem_memory_limit_get(hakmem_memory_limit_t *out, size_t size);

/* ---- first-class heaps (docs/heaps.md) ----
 *
 * A heap serves blocks that share one lifetime and can be freed all at once.
 * It belongs to the thread that made it: only that thread may allocate from
 * it, destroy, delete, visit it or read its stats; any other use, a NULL
 * heap and a destroyed one are reported and abort.  Its blocks are ordinary
 * hakmem blocks: free, realloc and malloc_usable_size take them from any
 * thread.  Any size: a block above HAKMEM_HEAP_MAX_SIZE (the largest size
 * class) is a huge block with a mapping of its own, and it belongs to the
 * heap like every other block. */
typedef struct hakmem_heap_s hakmem_heap_t;
#define HAKMEM_HEAP_MAX_SIZE ((size_t)2 << 20)   /* largest block served from the heap's pages */

/* A new empty heap owned by the calling thread; NULL (errno ENOMEM) if
 * memory is short. */
hakmem_heap_t *hakmem_heap_new(void);
void *hakmem_heap_malloc(hakmem_heap_t *heap, size_t size);
void *hakmem_heap_calloc(hakmem_heap_t *heap, size_t n, size_t size);
/* p: any block (or NULL); the result is heap's (p itself when it is heap's
 * and the size still fits). */
void *hakmem_heap_realloc(hakmem_heap_t *heap, void *p, size_t size);
void *hakmem_heap_aligned_alloc(hakmem_heap_t *heap, size_t alignment, size_t size);
/* Free every block of the heap at once, in time proportional to its pages.
 * A block of it that is freed (or realloc'ed, or asked its size) later, by
 * any thread, is a use after free: hakmem reports it while the memory has
 * not been handed out again (docs/heaps.md says when that is). */
void hakmem_heap_destroy(hakmem_heap_t *heap);
/* Give the heap up; its live blocks move to the calling thread's default
 * heap and stay valid. */
void hakmem_heap_delete(hakmem_heap_t *heap);

/* Called for each live block: the pointer the allocation returned and its
 * usable size.  Return 0 to go on; anything else stops the walk, and the
 * walk returns it.  The callback must not allocate or free. */
typedef int (*hakmem_visit_fn)(void *block, size_t usable_size, void *arg);
/* Every live block of heap (owner thread only); remote frees that race with
 * the walk may show their block as live.  Returns 0 or the callback's stop value. */
int hakmem_heap_visit(hakmem_heap_t *heap, hakmem_visit_fn fn, void *arg);
/* Every live block of the process: every thread's heap (exited threads'
 * too), every public heap, every huge block.  Needs quiescence: no other
 * thread may allocate or free while it runs. */
int hakmem_visit(hakmem_visit_fn fn, void *arg);

typedef struct hakmem_heap_stats_s {
    uint64_t blocks_in_use;   /* live blocks (as hakmem_heap_visit counts them) */
    uint64_t bytes_in_use;    /* the sum of their usable sizes */
    uint64_t pages;           /* pages the heap holds */
    uint64_t page_bytes;      /* bytes those pages hold blocks in */
} hakmem_heap_stats_t;
/* Fill the first size bytes of *out (pass sizeof *out), as hakmem_stats_get.
 * Returns 0, or -1 if out is NULL. */
int hakmem_heap_stats(hakmem_heap_t *heap, hakmem_heap_stats_t *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* HAKMEM_H */
