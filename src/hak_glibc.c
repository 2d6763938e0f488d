/* hak_glibc.c -- the rest of glibc's malloc extension API: malloc_trim,
 * mallinfo, mallinfo2, malloc_stats, malloc_info, mallopt.  Each reports
 * hakmem's own figures; what has no meaning here is accepted and ignored
 * (mallopt) or fails as glibc documents (malloc_info with options != 0). */
#include "hak_purge.h"
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>

/* Return every purgeable byte: this thread's free pages (and its heap's
 * empty segments), exited threads' heaps, the free page slots of every other
 * thread's heap -- live ones too, under their slot locks -- both
 * process-wide caches (segments and huge blocks) and the freed slots of
 * guarded sampling. */
HAK_EXPORT int hakmem_collect(void) {
    uint64_t before = atomic_load_explicit(&hak_counters.madvise_calls, memory_order_relaxed) +
                      atomic_load_explicit(&hak_counters.munmap_calls, memory_order_relaxed);
    hak_heap_t *heap = hak_tls.heap;
    if (heap != &hak_heap_empty) hak_heap_collect(heap, true);
    hak_sweep_abandoned(true);
    hak_purge_all_heaps();
    hak_cache_trim();
    hak_guard_trim();
    uint64_t after = atomic_load_explicit(&hak_counters.madvise_calls, memory_order_relaxed) +
                     atomic_load_explicit(&hak_counters.munmap_calls, memory_order_relaxed);
    return after != before;
}

/* glibc's figures from the memory account (hak_account.c), as glibc
 * counts: arena the segments' bytes, uordblks the bytes of live blocks in
 * them (not whole pages: a thread's emptied pages are not "in use"),
 * hblks/hblkhd the huge blocks and everything else mapped, usmblks the peak
 * of mapped bytes.  The walk holds the cache lock and the mapping lock
 * while it reads the segments' headers (no mincore). */
static struct mallinfo2 hak_mallinfo2(void) {
    struct mallinfo2 mi;
    memset(&mi, 0, sizeof mi);
    hak_account_t a;
    memset(&a, 0, sizeof a);
    hak_account_segments(&a);
    size_t segs = atomic_load_explicit(&hak_counters.segments_in_use, memory_order_relaxed);
    size_t mapped = atomic_load_explicit(&hak_counters.bytes_mapped, memory_order_relaxed);
    size_t in_segments = a.mapped[HAK_PART_LIVE] - a.live_huge;
    mi.arena = segs * HAK_SEGMENT_SIZE;                 /* segment memory */
    mi.hblks = atomic_load_explicit(&hak_counters.huge_in_use, memory_order_relaxed);
    mi.hblkhd = mapped > mi.arena ? mapped - mi.arena : 0; /* huge + metadata mappings */
    mi.uordblks = in_segments < mi.arena ? in_segments : mi.arena; /* bytes in live blocks */
    mi.fordblks = mi.arena - mi.uordblks;
    mi.usmblks = atomic_load_explicit(&hak_counters.bytes_mapped_peak, memory_order_relaxed);
    mi.ordblks = 1;
    return mi;
}

HAK_EXPORT int hakmem_malloc_trim(size_t pad) { (void)pad; return hakmem_collect(); }
HAK_EXPORT struct mallinfo2 hakmem_mallinfo2(void) { return hak_mallinfo2(); }
HAK_EXPORT struct mallinfo hakmem_mallinfo(void) {
    struct mallinfo2 m = hak_mallinfo2();
    struct mallinfo r;
#define HAK_CLAMP(x) ((int)((x) > (size_t)__INT_MAX__ ? (size_t)__INT_MAX__ : (x)))
    r.arena = HAK_CLAMP(m.arena); r.ordblks = HAK_CLAMP(m.ordblks); r.smblks = HAK_CLAMP(m.smblks);
    r.hblks = HAK_CLAMP(m.hblks); r.hblkhd = HAK_CLAMP(m.hblkhd); r.usmblks = HAK_CLAMP(m.usmblks);
    r.fsmblks = HAK_CLAMP(m.fsmblks); r.uordblks = HAK_CLAMP(m.uordblks); r.fordblks = HAK_CLAMP(m.fordblks);
    r.keepcost = HAK_CLAMP(m.keepcost);
    return r;
}
/* glibc's summary first -- "Arena 0:", "system bytes", "in use bytes",
 * "Total (incl. mmap):", "max mmap regions", "max mmap bytes", the lines
 * programs and glibc's own tests (tst-malloc-stats-cancellation) look
 * for -- with hakmem's figures (as mallinfo's: arena 0 the segments, mmap
 * the huge blocks), then hakmem's report; all to stderr (a file of its own,
 * named on the terminal, if stderr is closed: hak_stats.c). */
HAK_EXPORT void hakmem_malloc_stats(void) {
    struct mallinfo2 m = hak_mallinfo2();
    size_t huge_live = atomic_load_explicit(&hak_counters.huge_bytes, memory_order_relaxed);
    char head[512];
    hak_format(head, sizeof head,
               "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
               "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
               "max mmap regions = %10zu\nmax mmap bytes   = %10zu\n",
               m.arena, m.uordblks, m.arena + huge_live, m.uordblks + huge_live,
               (size_t)atomic_load_explicit(&hak_counters.huge_peak, memory_order_relaxed),
               (size_t)atomic_load_explicit(&hak_counters.huge_bytes_peak, memory_order_relaxed));
    hak_stats_print_glibc(head);
}

/* (stdio's writes are cancellation points: disabled, as in every report of
 * hakmem's, hakmem_stats_print and hakmem_profile_dump) */
HAK_EXPORT int hakmem_malloc_info(int options, FILE *fp) {
    if (options != 0 || !fp) { errno = EINVAL; return -1; }
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    struct mallinfo2 m = hak_mallinfo2();
    fprintf(fp, "<malloc version=\"hakmem-%s\">\n<heap nr=\"0\">\n", HAKMEM_VERSION_STRING);
    fprintf(fp, "<total type=\"segments\" size=\"%zu\"/>\n<total type=\"live\" size=\"%zu\"/>\n",
            m.arena, m.uordblks);
    fprintf(fp, "<total type=\"huge\" count=\"%zu\" size=\"%zu\"/>\n</heap>\n</malloc>\n", m.hblks, m.hblkhd);
    pthread_setcancelstate(cancel, NULL);
    return 0;
}

/* glibc's parameters are accepted (1) and have no effect; unknown ones fail (0). */
HAK_EXPORT int hakmem_mallopt(int param, int value) {
    (void)value;
    switch (param) {
    case M_TRIM_THRESHOLD: case M_TOP_PAD: case M_MMAP_THRESHOLD: case M_MMAP_MAX:
    case M_CHECK_ACTION: case M_PERTURB: case M_ARENA_TEST: case M_ARENA_MAX: case M_MXFAST:
        return 1;
    default:
        return 0;
    }
}

#ifndef HAK_NO_OVERRIDE
extern __typeof__(hakmem_malloc_trim) malloc_trim __attribute__((alias("hakmem_malloc_trim"), visibility("default")));
extern __typeof__(hakmem_mallinfo2) mallinfo2 __attribute__((alias("hakmem_mallinfo2"), visibility("default")));
extern __typeof__(hakmem_mallinfo) mallinfo __attribute__((alias("hakmem_mallinfo"), visibility("default")));
extern __typeof__(hakmem_malloc_stats) malloc_stats __attribute__((alias("hakmem_malloc_stats"), visibility("default")));
extern __typeof__(hakmem_malloc_info) malloc_info __attribute__((alias("hakmem_malloc_info"), visibility("default")));
extern __typeof__(hakmem_mallopt) mallopt __attribute__((alias("hakmem_mallopt"), visibility("default")));
#endif
