/* hak_os.c -- the platform interface: every mmap, munmap, madvise and mremap
 * hakmem makes goes through here (and is counted), plus time and RSS. */
#include "hak_internal.h"
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/random.h>

static size_t hak_page_size_cached;

size_t hak_os_page_size(void) {
    if (hak_unlikely(hak_page_size_cached == 0)) {
        long ps = sysconf(_SC_PAGESIZE);
        hak_page_size_cached = ps > 0 ? (size_t)ps : 4096;
    }
    return hak_page_size_cached;
}

static void hak_os_mapped(int64_t delta) {
    hak_count_peak(&hak_counters.bytes_mapped, &hak_counters.bytes_mapped_peak, delta);
}

void *hak_os_map(size_t size) {
    int saved = errno;
    hak_count(mmap_calls);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    errno = saved;
    if (p == MAP_FAILED) return NULL;
    hak_os_mapped((int64_t)size);
    return p;
}

void hak_os_unmap(void *p, size_t size) {
    if (size == 0) return;
    int saved = errno;
    hak_count(munmap_calls);
    if (munmap(p, size) == 0) hak_os_mapped(-(int64_t)size);
    errno = saved;
}

/* Map size bytes aligned to align (a power of two >= the OS page): map more,
 * then unmap the unaligned head and the tail. */
/* Aligned mappings first try one mmap at a hint just past the previous one:
 * the kernel honours a free hint, and the result is aligned without the two
 * trimming munmaps of the fallback.  The hint area starts at a random
 * 4 MiB-aligned address between 2 and 6 TiB (AT_RANDOM), below the
 * top-down mmap area and far above brk. */
static _Atomic uintptr_t hak_hint_next;

static void *hak_os_map_hinted(size_t size, size_t align, int prot) {
    uintptr_t hint = atomic_load_explicit(&hak_hint_next, memory_order_relaxed);
    if (hint == 0) {
        const uint8_t *r = (const uint8_t *)getauxval(AT_RANDOM);
        uintptr_t rnd = 0;
        if (r) memcpy(&rnd, r, sizeof rnd);
        hint = ((uintptr_t)2 << 40) + ((rnd % ((uintptr_t)1 << 20)) << 22);   /* 2..6 TiB */
    }
    hint = (hint + align - 1) & ~(uintptr_t)(align - 1);
    if (hint + size < hint || ((hint + size) >> HAK_ADDRESS_BITS)) return NULL;
    hak_count(mmap_calls);
    void *p = mmap((void *)hint, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if ((uintptr_t)p & (align - 1)) {            /* hint taken by something else */
        hak_count(munmap_calls);
        munmap(p, size);
        atomic_store_explicit(&hak_hint_next, hint + ((uintptr_t)64 << 30), memory_order_relaxed);
        return NULL;
    }
    atomic_store_explicit(&hak_hint_next, (uintptr_t)p + size, memory_order_relaxed);
    hak_os_mapped((int64_t)size);
    return p;
}

static void *hak_os_map_aligned_prot(size_t size, size_t align, int prot) {
    size_t total = size + align;
    if (total < size) return NULL;
    int saved = errno;
    void *hinted = hak_os_map_hinted(size, align, prot);
    errno = saved;
    if (hinted) return hinted;
    hak_count(mmap_calls);
    void *raw = mmap(NULL, total, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    errno = saved;
    if (raw == MAP_FAILED) return NULL;
    hak_os_mapped((int64_t)total);
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)raw, tail = total - head - size;
    if (head) hak_os_unmap(raw, head);
    if (tail) hak_os_unmap((void *)(start + size), tail);
    return (void *)start;
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

/* Grow or shrink a mapping.  fixed_addr == NULL: only in place.  Otherwise
 * move the pages to fixed_addr (a reservation of new_size bytes). */
void *hak_os_remap(void *p, size_t old_size, size_t new_size, void *fixed_addr) {
    int saved = errno;
    hak_count(mremap_calls);
    void *r = fixed_addr ? mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, fixed_addr)
                         : mremap(p, old_size, new_size, 0);
    errno = saved;
    if (r == MAP_FAILED) return NULL;
    hak_os_mapped((int64_t)new_size - (int64_t)old_size);
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

size_t hak_os_rss_bytes(void) {
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *s = buf;
    while (*s && *s != ' ') s++;          /* skip total size */
    size_t pages = 0;
    while (*s == ' ') s++;
    while (*s >= '0' && *s <= '9') pages = pages * 10 + (size_t)(*s++ - '0');
    return pages * hak_os_page_size();
}

void hak_os_write_err(const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w; n -= (size_t)w;
    }
}

/* Fill buf with n random bytes from the kernel (getrandom: no file, no
 * allocation).  False if the kernel gives none. */
bool hak_os_random(void *buf, size_t n) {
    int saved = errno;
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, GRND_NONBLOCK);
        if (r <= 0) { if (r < 0 && errno == EINTR) continue; errno = saved; return false; }
        p += r; n -= (size_t)r;
    }
    errno = saved;
    return true;
}
