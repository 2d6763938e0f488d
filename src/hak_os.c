/* hak_os.c -- the platform interface: every mmap, munmap, madvise and mremap
 * hakmem makes goes through here (and is counted), plus time and RSS. */
#include "hak_hardened.h"   /* hak_os_guard */
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>

static size_t hak_page_size_cached;

/* The OS page, from the kernel at run time: arm64 kernels use 4, 16 or
 * 64 KiB (HAK_ARCH_PAGE_MIN..MAX).  It sets the purge granularity and the
 * alignment of valloc/pvalloc and of a huge block's usable end.  A value
 * outside the architecture's range is not believed (the largest is used:
 * purging then keeps a little more, and nothing is purged that is in use). */
size_t hak_os_page_size(void) {
    /* Racing first calls compute the same value: relaxed atomics keep that
     * benign race visible as such to TSan. */
    size_t cached = __atomic_load_n(&hak_page_size_cached, __ATOMIC_RELAXED);
    if (hak_likely(cached != 0)) return cached;
    unsigned long ps = getauxval(AT_PAGESZ);
    if (ps == 0) {
        long sc = sysconf(_SC_PAGESIZE);
        ps = sc > 0 ? (unsigned long)sc : 0;
    }
    if (ps < HAK_ARCH_PAGE_MIN || ps > HAK_ARCH_PAGE_MAX || (ps & (ps - 1))) ps = HAK_ARCH_PAGE_MAX;
    __atomic_store_n(&hak_page_size_cached, (size_t)ps, __ATOMIC_RELAXED);
    return ps;
}

static void hak_os_mapped(int64_t delta) {
    hak_count_peak(&hak_counters.bytes_mapped, &hak_counters.bytes_mapped_peak, delta);
}

/* The mapping lock: every munmap and mremap of hakmem's runs with it held
 * shared, and the memory account (hak_account.c), which reads segment
 * headers and asks mincore about every mapping, holds it exclusively, so
 * that nothing it looks at is unmapped or moved under it.  Unmappers take
 * nothing else while they hold it; the account takes it after the cache
 * lock (hak_purge.c), as the fork handlers do.  Writers first: threads that
 * unmap one after the other must not keep a fork (whose prepare handler
 * takes it) or a report waiting for ever; a writer waits only while it
 * holds the cache lock, so an unmapper that holds the cache lock never
 * meets a waiting writer. */
#define HAK_MAPS_LOCK_INIT PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
static pthread_rwlock_t hak_maps_lock = HAK_MAPS_LOCK_INIT;
static void hak_maps_shared(void) { pthread_rwlock_rdlock(&hak_maps_lock); }
static void hak_maps_done(void) { pthread_rwlock_unlock(&hak_maps_lock); }
void hak_os_maps_hold(void) { pthread_rwlock_wrlock(&hak_maps_lock); }
void hak_os_maps_release(void) { pthread_rwlock_unlock(&hak_maps_lock); }
void hak_os_maps_unlock_after_fork(bool child) {
    if (child) {
        pthread_rwlock_t fresh = HAK_MAPS_LOCK_INIT;
        memcpy(&hak_maps_lock, &fresh, sizeof fresh);
    } else {
        pthread_rwlock_unlock(&hak_maps_lock);
    }
}

/* Overcommit: read-write mappings are made without MAP_NORESERVE, as glibc
 * makes them, so the kernel's policy (vm.overcommit_memory) decides: the
 * heuristic mode refuses one mapping larger than RAM + swap, the strict mode
 * accounts every one.  Only PROT_NONE reservations keep MAP_NORESERVE; they
 * are never accounted and hakmem never makes them writable in place (they
 * are mremap destinations, and a moved mapping keeps its own accounting). */
#define HAK_MAP_RW   (MAP_PRIVATE | MAP_ANONYMOUS)
#define HAK_MAP_NONE (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

/* Memory for hakmem's own metadata (heaps): never entered in the region map,
 * so it may lie anywhere. */
void *hak_os_map(size_t size) {
    int saved = errno;
    hak_count(mmap_calls);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, HAK_MAP_RW, -1, 0);
    errno = saved;
    if (p == MAP_FAILED) return NULL;
    hak_os_mapped((int64_t)size);
    atomic_fetch_add_explicit(&hak_counters.meta_bytes, size, memory_order_relaxed);   /* never unmapped */
    return p;
}

void hak_os_unmap(void *p, size_t size) {
    if (size == 0) return;
    int saved = errno;
    hak_count(munmap_calls);
    hak_maps_shared();
    if (munmap(p, size) == 0) hak_os_mapped(-(int64_t)size);
    hak_maps_done();
    errno = saved;
}

/* The region map describes [0, 2^HAK_ADDRESS_BITS) (hak_types.h).
 * hak_os_map_aligned, hak_os_reserve_aligned and hak_os_remap hand out only
 * ranges that lie wholly inside it: every unit of a huge mapping gets an
 * entry.  Whatever the kernel returns is checked -- a hint is only a hint,
 * mmap(NULL) may return addresses above 2^47 (aarch64 with 48-bit virtual
 * addresses), and a test build shrinks the map. */
#define HAK_MAP_LIMIT ((uintptr_t)1 << HAK_ADDRESS_BITS)

static bool hak_os_describable(uintptr_t p, size_t size) {
    return p < HAK_MAP_LIMIT && size <= HAK_MAP_LIMIT - p;
}

/* 64 random bits, for the hint area and hakmem's secrets (hak_secret.c).  Never from AT_RANDOM: glibc builds the
 * stack canary (and pointer guard) from those bytes, and heap addresses are
 * no secret.  getrandom allocates nothing; if it fails (no syscall, seccomp,
 * entropy pool not ready), mix clocks and addresses that ASLR chose. */
static uint64_t hak_os_mix(uint64_t x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t hak_os_random(void) {
    uint64_t r = 0;
    int saved = errno;
    /* the system call itself: glibc's getrandom() is a cancellation point */
    long n = syscall(SYS_getrandom, &r, sizeof r, GRND_NONBLOCK);
    errno = saved;
    if (n == (ssize_t)sizeof r) return r;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r = hak_os_mix(r ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = hak_os_mix(r ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec);
    r = hak_os_mix(r ^ (uintptr_t)&ts);                    /* stack: ASLR */
    r = hak_os_mix(r ^ (uintptr_t)&hak_page_size_cached);  /* this library: ASLR */
    return hak_os_mix(r ^ (uint64_t)getpid());
}

/* Aligned mappings first try one mmap at a hint just past the previous one:
 * the kernel honours a free hint, and the result is aligned without the two
 * trimming munmaps of the fallback.  The hint area starts at a random 4 MiB
 * boundary in [2 TiB, 6 TiB) (for a 47-bit space: 1/64 of the space plus up
 * to 1/32 of it), below the top-down mmap area and far above brk.  A hint
 * that was taken moves on 64 GiB (1/2048 of the space); past the map's end
 * the hints start again at 2 TiB. */
/* The hint area scales with the space the process really has, which may be
 * smaller than the map (arm64 kernels with 39- or 42-bit spaces; qemu): a
 * hint above the kernel's limit is ignored and costs an mmap and a munmap
 * on every segment.  The stack lies near the top of user space, and a
 * shared library's data near it, so the higher of the two addresses gives
 * the size (clamped to the map; at least 2^36). */
static unsigned hak_space_bits_cached;
static unsigned hak_os_space_bits(void) {
    unsigned b = hak_space_bits_cached;
    if (hak_unlikely(b == 0)) {
        uintptr_t top = (uintptr_t)__builtin_frame_address(0), lib = (uintptr_t)&hak_space_bits_cached;
        if (lib > top) top = lib;          /* a thread on a stack of its own making */
        b = top ? 64u - (unsigned)__builtin_clzl(top) : HAK_ADDRESS_BITS;
        if (b > HAK_ADDRESS_BITS) b = HAK_ADDRESS_BITS;
        if (b < 36) b = 36 < HAK_ADDRESS_BITS ? 36 : HAK_ADDRESS_BITS;
        hak_space_bits_cached = b;
    }
    return b;
}
#define HAK_HINT_BASE ((uintptr_t)1 << (hak_os_space_bits() - 6))
#define HAK_HINT_SPREAD_UNITS ((uint64_t)1 << (hak_os_space_bits() - 5 - HAK_SEGMENT_SHIFT))
#define HAK_HINT_SKIP ((uintptr_t)1 << (hak_os_space_bits() - 11))
#define HAK_HINT_TRIES 4           /* hints per call at most */
static _Atomic uintptr_t hak_hint_next;

#ifdef HAK_TEST_ADDRESS_BITS
void hak_os_test_hint(uintptr_t hint) { atomic_store_explicit(&hak_hint_next, hint, memory_order_relaxed); }
#endif

/* One try at the hint.  NULL with *again set: the hint was taken or lay
 * outside the map, try the next one; without: mmap itself failed. */
static void *hak_os_map_hinted(size_t size, size_t align, int prot, bool *again) {
    *again = false;
    uintptr_t hint = atomic_load_explicit(&hak_hint_next, memory_order_relaxed);
    if (hint == 0)
        hint = HAK_HINT_BASE + ((uintptr_t)(hak_os_random() % HAK_HINT_SPREAD_UNITS) << HAK_SEGMENT_SHIFT);
    hint = (hint + align - 1) & ~(uintptr_t)(align - 1);
    if (!hak_os_describable(hint, size)) {             /* past the end: start again */
        hint = (HAK_HINT_BASE + align - 1) & ~(uintptr_t)(align - 1);
        if (!hak_os_describable(hint, size)) return NULL;
    }
    hak_count(mmap_calls);
    void *p = mmap((void *)hint, size, prot, prot == PROT_NONE ? HAK_MAP_NONE : HAK_MAP_RW, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (((uintptr_t)p & (align - 1)) || !hak_os_describable((uintptr_t)p, size)) {
        hak_count(munmap_calls);                    /* the kernel put it elsewhere */
        munmap(p, size);
        atomic_store_explicit(&hak_hint_next, hint + HAK_HINT_SKIP, memory_order_relaxed);
        *again = true;
        return NULL;
    }
    atomic_store_explicit(&hak_hint_next, (uintptr_t)p + size, memory_order_relaxed);
    hak_os_mapped((int64_t)size);
    return p;
}

/* Map size bytes anywhere and keep the part aligned to align: NULL if that
 * part lies outside the map (everything is unmapped again). */
static void *hak_os_map_trimmed(size_t size, size_t align, int prot) {
    size_t total = size + align;
    int saved = errno;
    hak_count(mmap_calls);
    void *raw = mmap(NULL, total, prot, prot == PROT_NONE ? HAK_MAP_NONE : HAK_MAP_RW, -1, 0);
    errno = saved;
    if (raw == MAP_FAILED) return NULL;
    hak_os_mapped((int64_t)total);
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    if (!hak_os_describable(start, size)) {
        hak_os_unmap(raw, total);
        return NULL;
    }
    size_t head = start - (uintptr_t)raw, tail = total - head - size;
    if (head) hak_os_unmap(raw, head);
    if (tail) hak_os_unmap((void *)(start + size), tail);
    return (void *)start;
}

/* Map size bytes aligned to align (a power of two >= the OS page), inside
 * the region map: the hint; if it was taken, one mmap anywhere (trimmed to
 * the alignment: where the kernel's own choice lies inside the map, as on
 * x86-64, this costs what it did before); if that lies outside the map too,
 * a few more hints.  NULL if the kernel has no memory, or none that the map
 * can describe. */
static void *hak_os_map_aligned_prot(size_t size, size_t align, int prot) {
    if (size == 0 || size > HAK_MAP_LIMIT || align > HAK_MAP_LIMIT) return NULL;
    int saved = errno;
    bool again;
    void *p = hak_os_map_hinted(size, align, prot, &again);
    if (!p) p = hak_os_map_trimmed(size, align, prot);
    for (int i = 1; !p && again && i < HAK_HINT_TRIES; i++) p = hak_os_map_hinted(size, align, prot, &again);
    errno = saved;
    return p;
}

void *hak_os_map_aligned(size_t size, size_t align) {
    return hak_os_map_aligned_prot(size, align, PROT_READ | PROT_WRITE);
}

void *hak_os_reserve_aligned(size_t size, size_t align) {
    return hak_os_map_aligned_prot(size, align, PROT_NONE);
}

void hak_os_purge(void *p, size_t size) {
    if (size == 0) return;
    int saved = errno;
    hak_count(madvise_calls);
    (void)madvise(p, size, MADV_DONTNEED);
    errno = saved;
}

/* Make [p, p + size), part of a reservation (hak_os_reserve_aligned),
 * readable and writable: an anonymous mapping over it, made as glibc makes
 * them (no MAP_NORESERVE).  Its bytes were counted with the reservation.
 * False if the kernel refuses (the range stays reserved). */
bool hak_os_commit(void *p, size_t size) {
    int saved = errno;
    hak_count(mmap_calls);
    void *r = mmap(p, size, PROT_READ | PROT_WRITE, HAK_MAP_RW | MAP_FIXED, -1, 0);
    errno = saved;
    return r == p;
}

/* Make [p, p + size), part of a reservation, no-access again and give its
 * pages back: a fresh PROT_NONE mapping over it, as the reservation's. */
void hak_os_decommit(void *p, size_t size) {
    int saved = errno;
    hak_count(mmap_calls);
    (void)mmap(p, size, PROT_NONE, HAK_MAP_NONE | MAP_FIXED, -1, 0);
    errno = saved;
}

/* A guard: [p, p + size) (page-aligned) faults on any access (a segment's
 * part past its reach and the hardened build's guard pages, hak_segment.c;
 * huge blocks' guards, hak_huge.c; guarded sampling's slots, hak_guard.c);
 * unguard makes it readable and writable again.  mprotect, counted; false
 * if the kernel refused (ENOMEM at the map count limit, EPERM from a
 * seccomp filter): then nothing changed. */
static bool hak_os_protect(void *p, size_t size, int prot) {
    int saved = errno;
    hak_count(mprotect_calls);
    bool ok = mprotect(p, size, prot) == 0;
    errno = saved;
    return ok;
}
bool hak_os_guard(void *p, size_t size) { return hak_os_protect(p, size, PROT_NONE); }
bool hak_os_unguard(void *p, size_t size) { return hak_os_protect(p, size, PROT_READ | PROT_WRITE); }

/* Zero [p, p + size) (page-aligned, private anonymous memory, readable and
 * writable) without faulting in the pages its last owner never touched (the
 * hardened build's reused huge blocks, hak_huge.c).  mincore says which
 * pages are in memory: those runs are memset (clearing them costs less than
 * faulting in fresh ones); every other run -- never touched, or swapped
 * out -- is dropped with MADV_DONTNEED, after which it reads as zero (a
 * swapped-out page's copy in swap goes with it) and costs nothing until
 * written.  A page that moves in or out of memory between the two calls is
 * zero either way: a memset writes over whatever is there, MADV_DONTNEED
 * discards whatever is there.  A run the kernel will not drop (a locked
 * mapping: mlockall(MCL_FUTURE | MCL_ONFAULT)) is memset; if mincore fails
 * (a seccomp filter), the rest is dropped.  Cost: mincore about 2 ns a
 * resident page, 10-20 an untouched one, and a madvise (1-2 us) for each run
 * not in memory: malloc, a write and free of 64 MiB, reused, took about
 * 0.75 ms instead of 0.37 with pagemap where one page in 64 is written, 55 us
 * instead of 150 where one page is.  (Dropping the short resident runs
 * between such runs with them, one madvise for all, cost more: the faults
 * when the next owner writes them.)  Raw system calls only, and no file: an
 * allocation function reads no file, needs no /proc, and is no cancellation
 * point (this read /proc/self/pagemap with glibc's open, pread and close
 * until 2026-11-27: an openat per reuse, ENOENT or EPERM in a sandbox, and a
 * thread with a pending pthread_cancel died inside malloc or realloc,
 * holding its program's locks; issue 36, tests/suite_cancel.sh). */
static void hak_os_zero_run(uint8_t *p, size_t size, bool resident) {
    if (size == 0) return;
    if (!resident) {
        hak_count(madvise_calls);
        if (syscall(SYS_madvise, p, size, MADV_DONTNEED) == 0) return;
    }
    memset(p, 0, size);
}

void hak_os_zero_touched(void *p, size_t size) {
    size_t ps = hak_os_page_size(), pages = size / ps, i = 0;
    uint8_t *b = p;
    int saved = errno;
    unsigned char vec[4096];                           /* one byte a page: 16 MiB a call */
    while (i < pages) {
        size_t n = pages - i < sizeof vec ? pages - i : sizeof vec;
        if (syscall(SYS_mincore, b + i * ps, n * ps, vec) != 0) break;
        for (size_t j = 0; j < n;) {                   /* runs of pages alike */
            bool in = vec[j] & 1;
            size_t k = j + 1;
            while (k < n && (bool)(vec[k] & 1) == in) k++;
            hak_os_zero_run(b + (i + j) * ps, (k - j) * ps, in);
            j = k;
        }
        i += n;
    }
    hak_os_zero_run(b + i * ps, (pages - i) * ps, false);   /* mincore failed: the rest */
    memset(b + pages * ps, 0, size - pages * ps);            /* a part page (never from hak_huge.c) */
    errno = saved;
}

/* MADV_FREE: the kernel takes the pages only under memory pressure, and a
 * page written again before that costs no fault; RSS stays until then.
 * Falls back to MADV_DONTNEED where the kernel lacks it (before 4.5). */
void hak_os_purge_lazy(void *p, size_t size) {
    if (size == 0) return;
    int saved = errno;
    hak_count(madvise_calls);
#ifdef MADV_FREE
    if (madvise(p, size, MADV_FREE) != 0)
#endif
        (void)madvise(p, size, MADV_DONTNEED);
    errno = saved;
}

/* Ask for (or against) transparent huge pages on a range: MADV_HUGEPAGE or
 * MADV_NOHUGEPAGE.  Returns false if the kernel refused (no THP support). */
bool hak_os_hugepage(void *p, size_t size, bool on) {
    int saved = errno;
    hak_count(madvise_calls);
    int r = madvise(p, size, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    errno = saved;
    return r == 0;
}

/* Grow or shrink a mapping.  fixed_addr == NULL: only in place.  Otherwise
 * move the pages to fixed_addr (a reservation of new_size bytes).  NULL if
 * the kernel refuses, or if the result would reach past the region map (an
 * in-place growth over its end: the caller then moves the block). */
void *hak_os_remap(void *p, size_t old_size, size_t new_size, void *fixed_addr) {
    /* the result is [fixed_addr or p, + new_size): it must fit in the map */
    if (!hak_os_describable((uintptr_t)(fixed_addr ? fixed_addr : p), new_size)) return NULL;
    int saved = errno;
    hak_count(mremap_calls);
    hak_maps_shared();
    void *r = fixed_addr ? mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, fixed_addr)
                         : mremap(p, old_size, new_size, 0);
    if (r != MAP_FAILED) hak_os_mapped((int64_t)new_size - (int64_t)old_size);
    hak_maps_done();
    errno = saved;
    if (r == MAP_FAILED) return NULL;
    return r;
}

uint64_t hak_os_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t hak_os_rss_peak_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

/* Which OS pages of [p, p + size) (p page-aligned) are resident: one byte
 * each in vec, bit 0 (mincore, the raw system call).  False if the kernel
 * will not say (a seccomp filter, no such call). */
bool hak_os_incore(const void *p, size_t size, unsigned char *vec) {
    int saved = errno;
    long r = syscall(SYS_mincore, p, size, vec);
    errno = saved;
    return r == 0;
}

/* n bytes to fd (the raw system call, as hak_os_write_err): 0, or the errno
 * of the write that failed. */
int hak_os_write_fd(int fd, const char *s, size_t n) {
    int saved = errno, err = 0;
    while (n > 0) {
        long w = syscall(SYS_write, fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { err = w < 0 ? errno : EIO; break; }
        s += w; n -= (size_t)w;
    }
    errno = saved;
    return err;
}

/* The raw system call: glibc's write() is a cancellation point, and
 * no allocation function may be one; also async-signal-safe, for the crash report. */
void hak_os_write_err(const char *s, size_t n) {
    int saved = errno;
    while (n > 0) {
        long w = syscall(SYS_write, 2, s, n);
        if (w <= 0) break;
        s += w; n -= (size_t)w;
    }
    errno = saved;
}

/* The calling thread's kernel id (guarded sampling's reports). */
long hak_os_gettid(void) { return (long)syscall(SYS_gettid); }
