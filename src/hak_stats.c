/* hak_stats.c -- the statistics report, an entry point: hakmem_stats_get()
 * copies the process-wide counters (kept off the fast path: OS calls,
 * segments, page refills, remote frees) and sums the heaps' own;
 * hakmem_stats_print() and HAKMEM_STATS=1 (at exit) print them.  The
 * counters are defined here and counted by every layer (data, no calls). */
#include "hak_purge.h"
#include <pthread.h>
#include <stdlib.h>

hak_counters_t hak_counters;

#define HAK_LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static void hak_stats_fill(hakmem_stats_t *out);

/* Guards the static snapshot below.  A leaf lock (nothing else is taken
 * under it), held across fork by the atfork handlers (hak_heap.c): a child
 * forked while another thread is inside hakmem_stats_get or malloc_stats
 * finds it free. */
static pthread_mutex_t hak_stats_lock = PTHREAD_MUTEX_INITIALIZER;

static void hak_stats_prepare(void) { pthread_mutex_lock(&hak_stats_lock); }
static void hak_stats_parent(void) { pthread_mutex_unlock(&hak_stats_lock); }
static void hak_stats_child(void) { pthread_mutex_init(&hak_stats_lock, NULL); }

/* The lock is held across fork from its first use on (hak_fork_hook_add). */
static pthread_once_t hak_stats_once = PTHREAD_ONCE_INIT;
static void hak_stats_init(void) { hak_fork_hook_add(hak_stats_prepare, hak_stats_parent, hak_stats_child); }

HAK_EXPORT int hakmem_stats_get(hakmem_stats_t *out, size_t size) {
    if (!out) return -1;
    static hakmem_stats_t snapshot;       /* big; callers are rare */
    pthread_once(&hak_stats_once, hak_stats_init);
    pthread_mutex_lock(&hak_stats_lock);
    hak_stats_fill(&snapshot);
    memcpy(out, &snapshot, size < sizeof snapshot ? size : sizeof snapshot);
    pthread_mutex_unlock(&hak_stats_lock);
    return 0;
}

static void hak_stats_fill(hakmem_stats_t *out) {
    memset(out, 0, sizeof *out);
    const hak_counters_t *c = &hak_counters;
    out->mmap_calls = HAK_LOAD(c->mmap_calls);
    out->munmap_calls = HAK_LOAD(c->munmap_calls);
    out->madvise_calls = HAK_LOAD(c->madvise_calls);
    out->mremap_calls = HAK_LOAD(c->mremap_calls);
    out->segments_in_use = HAK_LOAD(c->segments_in_use);
    out->segments_peak = HAK_LOAD(c->segments_peak);
    out->huge_in_use = HAK_LOAD(c->huge_in_use);
    out->huge_peak = HAK_LOAD(c->huge_peak);
    out->bytes_mapped = HAK_LOAD(c->bytes_mapped);
    out->bytes_mapped_peak = HAK_LOAD(c->bytes_mapped_peak);
    out->heaps_created = HAK_LOAD(c->heaps_created);
    out->heaps_adopted = HAK_LOAD(c->heaps_adopted);
    static hak_heap_sums_t sums;   /* too big for some stacks; callers are rare */
    hak_heap_stats_sum(&sums);
    out->slow_allocs = sums.slow;
    out->remote_free_retries = sums.cas_retries;
    out->full_counters = HAK_STATS_FULL_ENABLED;
    out->huge_allocations = sums.allocs[HAK_CLASS_COUNT];
    out->huge_frees = sums.frees[HAK_CLASS_COUNT];
    out->rss_peak_bytes = hak_os_rss_peak_bytes();
    for (unsigned i = 0; i < HAK_CLASS_COUNT && i < HAKMEM_STATS_CLASSES; i++) {
        hakmem_class_stats_t *k = &out->classes[i];
        k->block_size = hak_class_size(i);
        k->pages_in_use = HAK_LOAD(c->class_pages[i]);
        k->pages_peak = HAK_LOAD(c->class_pages_peak[i]);
        k->refills = sums.refills[i];
        k->remote_frees = sums.remote[i];
        k->allocations = sums.allocs[i];
        k->frees = sums.frees[i];
        out->remote_frees += sums.remote[i];
    }
}

static void hak_stats_write(void);

/* The report is a series of write(2)s, cancellation points, and takes locks
 * (hak_stats_lock, the cache's): cancellation is disabled throughout, so
 * that no thread is cancelled holding one (malloc_stats too). */
HAK_EXPORT void hakmem_stats_print(void) {
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    hak_stats_write();
    pthread_setcancelstate(cancel, NULL);
}

static void hak_stats_write(void) {
    hakmem_stats_t s;
    hakmem_stats_get(&s, sizeof s);
    hak_message("hakmem %s statistics (%s build)\n", HAKMEM_VERSION_STRING, hakmem_build_variant());
    if (!s.full_counters)
        hak_message("hakmem:   (allocations and frees per class are counted by the stats build: make stats)\n");
    hak_message("hakmem:   class  block_size  pages  pages_peak  refills  remote_frees  allocations        frees\n");
    for (unsigned i = 0; i < HAK_CLASS_COUNT; i++) {
        const hakmem_class_stats_t *k = &s.classes[i];
        if (k->pages_peak == 0 && k->refills == 0 && k->remote_frees == 0 && k->allocations == 0) continue;
        hak_message("hakmem:   %5u  %10zu  %5lu  %10lu  %7lu  %12lu  %11lu  %11lu\n", i, k->block_size,
                    (unsigned long)k->pages_in_use, (unsigned long)k->pages_peak,
                    (unsigned long)k->refills, (unsigned long)k->remote_frees,
                    (unsigned long)k->allocations, (unsigned long)k->frees);
    }
    if (s.full_counters)
        hak_message("hakmem:   huge blocks: %lu allocations, %lu frees\n",
                    (unsigned long)s.huge_allocations, (unsigned long)s.huge_frees);
    hak_message("hakmem:   segments in use %lu (peak %lu), huge blocks %lu (peak %lu)\n",
                (unsigned long)s.segments_in_use, (unsigned long)s.segments_peak,
                (unsigned long)s.huge_in_use, (unsigned long)s.huge_peak);
    hak_message("hakmem:   heaps created %lu, adopted %lu, reclaimed from ended threads %lu; slow allocations %lu; "
                "remote frees %lu (CAS retries %lu)\n",
                (unsigned long)s.heaps_created, (unsigned long)s.heaps_adopted,
                (unsigned long)atomic_load_explicit(&hak_counters.heaps_reclaimed, memory_order_relaxed),
                (unsigned long)s.slow_allocs, (unsigned long)s.remote_frees,
                (unsigned long)s.remote_free_retries);
    hak_message("hakmem:   OS calls: mmap %lu, munmap %lu, madvise %lu, mremap %lu\n",
                (unsigned long)s.mmap_calls, (unsigned long)s.munmap_calls,
                (unsigned long)s.madvise_calls, (unsigned long)s.mremap_calls);
    hak_message("hakmem:   mapped %lu KiB (peak %lu KiB), peak RSS %lu KiB\n",
                (unsigned long)(s.bytes_mapped >> 10), (unsigned long)(s.bytes_mapped_peak >> 10),
                (unsigned long)(s.rss_peak_bytes >> 10));
    hak_purge_stats_print();
}

static void hak_stats_at_exit(void) { hakmem_stats_print(); }

/* After hak_heap.c's constructor (101): options are read. */
__attribute__((constructor(102))) static void hak_stats_constructor(void) {
    if (hak_opt.stats) atexit(hak_stats_at_exit);
}
