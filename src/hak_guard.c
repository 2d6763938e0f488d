/* hak_guard.c -- guarded sampling (HAKMEM_GUARD_SAMPLE, on by default): about
 * one allocation per N bytes gets a slot of its own in a reserved region,
 * placed so that the block ends where a no-access page begins.
 * docs/security.md, "Guarded sampling", says what it catches and what it
 * costs; docs/design.md why it is built so.
 *
 *  - The countdown of heap profiles decides (hak_profile.c, hak_sample_due):
 *    hak_profile_malloc asks hak_guard_alloc for the block, with the stack
 *    it took; no fast path changes.
 *  - One reservation (PROT_NONE) of HAK_GUARD_SLOTS slots, each a guard page
 *    and HAK_GUARD_PAGES data pages; the last slot is followed by one more
 *    guard page.  A block takes the pages from its start to its slot's end,
 *    made accessible with one mprotect; its start is the slot's end minus
 *    the size, rounded down to the alignment (16 at least).  The rest of the
 *    slot stays no-access: an overflow faults at once, an underflow past the
 *    block's first page too; the HAK_GUARD_WINDOW bytes before the block
 *    (fewer at its page's start) and the rounding after it hold a pattern
 *    checked at free (a whole page of it cost 5,000 instructions a block,
 *    callgrind; the window about 200).
 *  - The slots are a pool kept mapped: free makes the block's pages
 *    no-access again with one mprotect, their memory kept, and puts the
 *    slot at the tail of a FIFO of freed slots.  Allocation takes the
 *    oldest freed slot once more than HAK_GUARD_QUARANTINE are freed (a
 *    freed slot stays no-access for at least that many guarded frees), else
 *    a slot never used yet, else none.  So a guarded block costs two
 *    mprotect calls: no mmap or munmap, no page fault and no page zeroed by
 *    the kernel once its slot was used before (the block is zeroed here),
 *    and only the second takes access away (the TLB shootdown: making
 *    pages accessible needs none).  Before the pool: a fresh mapping over the slot at
 *    allocation and another at free, 14 to 18 us of CPU a block against 8 to
 *    11 now (docs/security.md, "Guarded sampling").
 *    The memory kept is that of the slots in use or freed since: at most
 *    the live guarded blocks plus HAK_GUARD_QUARANTINE + 1 slots (4 KiB
 *    each for a block up to 4 KiB); malloc_trim(0) gives it back
 *    (hak_guard_trim).  Taking access away in batches was measured too
 *    (16 freed slots, adjacent, one mprotect): 10 % less CPU a block, but
 *    a freed block could be read without a fault until its batch; not done.
 *  - Each slot keeps its block's address, size and the allocation's and the
 *    free's stacks (hak_unwind), which the SIGSEGV handler prints (through
 *    hak_crash_explain, hak_crash.c: no lock, no allocation) with the stack
 *    of the faulting access (hak_report_fault_stack, from the signal's
 *    context), and a report of misuse of the block (hak_report.c, through
 *    hak_guard_report).
 *  - free, malloc_usable_size and a sized delete reach this file through
 *    hak_guard_hooks (hak_free.c): the region map does not know the region,
 *    so a guarded block's free fails the fast path's first test, and the
 *    complete check asks here before it tries glibc. */
#include "hak_internal.h"
#include "hak_hardened.h"   /* hak_os_guard, hak_os_unguard */
#include <pthread.h>

#define HAK_GUARD_SLOTS      512    /* blocks live or quarantined at once */
#define HAK_GUARD_PAGES      4      /* data pages per slot: blocks up to 16 KiB (4 KiB pages) */
#define HAK_GUARD_QUARANTINE 32     /* freed slots that stay no-access, at least */
#define HAK_GUARD_DEPTH      16     /* frames kept per stack */
#define HAK_GUARD_PATTERN    0xbd   /* the slack around a block */
#define HAK_GUARD_WINDOW     256    /* bytes before a block that hold the pattern, at most */

enum { HAK_SLOT_UNUSED, HAK_SLOT_LIVE, HAK_SLOT_FREED };

typedef struct hak_guard_slot_s {
    _Atomic uint8_t state;
    uint8_t alloc_depth, free_depth;
    bool resident;                  /* its pages may hold memory (under the lock) */
    size_t dirty;                   /* bytes at its data's end counted resident (bytes_clean less them) */
    uintptr_t ptr;
    size_t size;
    long alloc_tid, free_tid;
    void *alloc_frames[HAK_GUARD_DEPTH], *free_frames[HAK_GUARD_DEPTH];
} hak_guard_slot_t;

static hak_guard_slot_t hak_guard_slots[HAK_GUARD_SLOTS];
static uint16_t hak_guard_ring[HAK_GUARD_SLOTS];   /* freed slots, oldest first */
static unsigned hak_guard_head, hak_guard_count;
static unsigned hak_guard_fresh;                   /* slots never used: [fresh, HAK_GUARD_SLOTS) */
static uintptr_t hak_guard_base, hak_guard_end;   /* the reservation; 0: none yet */
static size_t hak_guard_page, hak_guard_stride;
static bool hak_guard_failed;                      /* the reservation failed: guarding is off */
static uintptr_t hak_guard_skip_lo, hak_guard_skip_hi;   /* frames left out of a free's stack */
static pthread_mutex_t hak_guard_lock = PTHREAD_MUTEX_INITIALIZER;
static HAK_TLS long hak_guard_tid;                 /* this thread's id (gettid is a system call) */

static bool hak_guard_free_hook(void *p);
static bool hak_guard_usable_hook(const void *p, const char *op, size_t *n);
static bool hak_guard_explain(const void *addr, const void *ctx);

static long hak_guard_thread(void) {
    if (hak_unlikely(!hak_guard_tid)) hak_guard_tid = hak_os_gettid();
    return hak_guard_tid;
}

bool hak_guard_owns(const void *p) {
    uintptr_t a = (uintptr_t)p;
    return a >= __atomic_load_n(&hak_guard_base, __ATOMIC_ACQUIRE) && a < hak_guard_end;
}

/* The memory account: the region (false: none reserved), and its live
 * blocks and their bytes. */
bool hak_guard_region(uintptr_t *base, size_t *size, uint64_t *live, uint64_t *blocks) {
    pthread_mutex_lock(&hak_guard_lock);
    bool any = hak_guard_base != 0;
    *base = hak_guard_base;
    *size = any ? hak_guard_end - hak_guard_base : 0;
    *live = *blocks = 0;
    for (unsigned i = 0; any && i < HAK_GUARD_SLOTS; i++)
        if (atomic_load_explicit(&hak_guard_slots[i].state, memory_order_relaxed) == HAK_SLOT_LIVE) {
            (*blocks)++;
            *live += hak_guard_slots[i].size;
        }
    pthread_mutex_unlock(&hak_guard_lock);
    return any;
}

/* ---- set-up (under the lock) ---- */

static void hak_guard_prepare(void) { pthread_mutex_lock(&hak_guard_lock); }
static void hak_guard_parent(void) { pthread_mutex_unlock(&hak_guard_lock); }
static void hak_guard_child(void) {
    pthread_mutex_init(&hak_guard_lock, NULL);
    hak_guard_tid = 0;   /* the child's one thread has an id of its own */
}

/* Guarding is on: the hooks of the layers below, before the first guarded
 * block (hak_profile.c, once). */
void hak_guard_enable(void) {
    hak_guard_hooks.free = hak_guard_free_hook;
    hak_guard_hooks.usable = hak_guard_usable_hook;
    hak_crash_explain = hak_guard_explain;
    hak_fork_hook_add(hak_guard_prepare, hak_guard_parent, hak_guard_child);
    /* a free's stack leaves out hakmem's frames: the whole library when it
     * is a shared object, else the sampling hooks' section (hak_profile.c) */
    if (!hak_self_text(&hak_guard_skip_lo, &hak_guard_skip_hi)) hak_guard_skip_lo = hak_guard_skip_hi = 0;
}

static bool hak_guard_reserve(void) {
    if (hak_guard_base) return true;
    if (hak_guard_failed) return false;
    size_t ps = hak_os_page_size();
    size_t stride = (HAK_GUARD_PAGES + 1) * ps, size = HAK_GUARD_SLOTS * stride + ps;
    void *r = hak_os_reserve_aligned(size, ps);
    if (r) hak_count_clean((int64_t)size);          /* no-access until a slot is committed */
    if (!r) {
        hak_guard_failed = true;
        hak_message("hakmem: warning: HAKMEM_GUARD_SAMPLE: cannot reserve %zu bytes; guarded sampling is off\n", size);
        return false;
    }
    hak_guard_page = ps;
    hak_guard_stride = stride;
    hak_guard_head = hak_guard_count = hak_guard_fresh = 0;
    hak_guard_end = (uintptr_t)r + size;
    __atomic_store_n(&hak_guard_base, (uintptr_t)r, __ATOMIC_RELEASE);
    return true;
}

static uintptr_t hak_guard_data_end(unsigned i) { return hak_guard_base + (uintptr_t)(i + 1) * hak_guard_stride; }
static uintptr_t hak_guard_page_of(uintptr_t a) { return a & ~(uintptr_t)(hak_guard_page - 1); }

/* ---- allocation ---- */

/* A guarded block of size bytes aligned to align, the allocation's stack in
 * frames; NULL if the block cannot be guarded (too large, too aligned, no
 * free slot, the kernel refused): the caller takes an ordinary one.  The
 * block is zeroed (calloc). */
void *hak_guard_alloc(size_t size, size_t align, void *const *frames, unsigned depth) {
    if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
    size_t want = size ? size : 1;
    pthread_mutex_lock(&hak_guard_lock);
    if (!hak_guard_reserve() || want > HAK_GUARD_PAGES * hak_guard_page || align > hak_guard_page) {
        pthread_mutex_unlock(&hak_guard_lock);
        return NULL;
    }
    /* the oldest freed slot past the quarantine, else a fresh one */
    bool recycled = hak_guard_count > HAK_GUARD_QUARANTINE;
    if (!recycled && hak_guard_fresh == HAK_GUARD_SLOTS) {
        pthread_mutex_unlock(&hak_guard_lock);
        return NULL;
    }
    unsigned i = recycled ? hak_guard_ring[hak_guard_head] : hak_guard_fresh;
    uintptr_t end = hak_guard_data_end(i);
    uintptr_t p = (end - want) & ~(uintptr_t)(align - 1), first = hak_guard_page_of(p);
    if (end - first > HAK_GUARD_PAGES * hak_guard_page || !hak_os_unguard((void *)first, end - first)) {
        pthread_mutex_unlock(&hak_guard_lock);
        return NULL;
    }
    if (recycled) {
        hak_guard_head = (hak_guard_head + 1) % HAK_GUARD_SLOTS;
        hak_guard_count--;
    } else {
        hak_guard_fresh++;
    }
    hak_guard_slot_t *s = &hak_guard_slots[i];
    /* the memory account (bytes_clean): the pages this block touches, less
     * those the slot already holds (a recycled slot keeps its memory) */
    if (end - first > s->dirty) {
        hak_count_clean(-(int64_t)(end - first - s->dirty));
        s->dirty = end - first;
    }
    s->ptr = p;
    s->size = size;
    s->alloc_tid = hak_guard_thread();
    s->alloc_depth = (uint8_t)(depth < HAK_GUARD_DEPTH ? depth : HAK_GUARD_DEPTH);
    memcpy(s->alloc_frames, frames, s->alloc_depth * sizeof(void *));
    s->free_depth = 0;
    s->free_tid = 0;
    s->resident = true;
    atomic_store_explicit(&s->state, HAK_SLOT_LIVE, memory_order_release);
    pthread_mutex_unlock(&hak_guard_lock);
    /* the pages keep an earlier block's bytes: zero, the pattern, zero,
     * the pattern */
    uintptr_t head = p - first < HAK_GUARD_WINDOW ? first : p - HAK_GUARD_WINDOW;
    memset((void *)first, 0, head - first);
    memset((void *)head, HAK_GUARD_PATTERN, p - head);
    memset((void *)p, 0, size);
    memset((void *)(p + size), HAK_GUARD_PATTERN, end - p - size);
    return (void *)p;
}

/* malloc_trim(0): the memory of the freed slots goes back (the slots stay
 * no-access). */
void hak_guard_trim(void) {
    if (!__atomic_load_n(&hak_guard_base, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&hak_guard_lock);
    for (unsigned k = 0; k < hak_guard_count; k++) {
        hak_guard_slot_t *s = &hak_guard_slots[hak_guard_ring[(hak_guard_head + k) % HAK_GUARD_SLOTS]];
        if (!s->resident) continue;
        size_t n = HAK_GUARD_PAGES * hak_guard_page;
        hak_os_purge((void *)(hak_guard_data_end((unsigned)(s - hak_guard_slots)) - n), n);
        hak_count_clean((int64_t)s->dirty);
        s->dirty = 0;
        s->resident = false;
    }
    pthread_mutex_unlock(&hak_guard_lock);
}

/* ---- free, usable size ---- */

static void hak_guard_print_what(const char *what, const hak_guard_slot_t *s, uintptr_t addr);

/* The slot of a live block p (op names the operation in a report of misuse). */
static hak_guard_slot_t *hak_guard_live(const void *p, const char *op) {
    uintptr_t a = (uintptr_t)p, rel = a - hak_guard_base;
    unsigned i = (unsigned)(rel / hak_guard_stride);
    hak_guard_slot_t *s = i < HAK_GUARD_SLOTS ? &hak_guard_slots[i] : NULL;
    uint8_t state = s ? atomic_load_explicit(&s->state, memory_order_acquire) : HAK_SLOT_UNUSED;
    if (state == HAK_SLOT_FREED && s->ptr == a) {
        hak_guard_print_what("double free", s, a);
        hak_fatal(op, "double free of a guarded block", p);
    }
    if (state != HAK_SLOT_LIVE || s->ptr != a) hak_fatal(op, "invalid pointer (in the guarded region, not a live block)", p);
    return s;
}

/* The first byte of [q, end) that lost the pattern, or 0; eight bytes a
 * step. */
typedef uint64_t __attribute__((may_alias)) hak_word_t;
static uintptr_t hak_guard_slack_bad(uintptr_t q, uintptr_t end) {
    const uint64_t w = 0x0101010101010101ull * HAK_GUARD_PATTERN;
    for (; q < end && (q & 7); q++) if (*(const uint8_t *)q != HAK_GUARD_PATTERN) return q;
    while (q + 8 <= end && *(const hak_word_t *)q == w) q += 8;
    for (; q < end; q++) if (*(const uint8_t *)q != HAK_GUARD_PATTERN) return q;
    return 0;
}

/* Frees guarded block p: true; false if p is not in the guarded region. */
static bool hak_guard_free_hook(void *p) {
    if (!hak_guard_owns(p)) return false;
    hak_guard_slot_t *s = hak_guard_live(p, "free()");
    void *frames[HAK_GUARD_DEPTH];
    unsigned depth = hak_stack_capture(frames, HAK_GUARD_DEPTH, hak_guard_skip_lo, hak_guard_skip_hi);
    uintptr_t a = (uintptr_t)p, first = hak_guard_page_of(a), end = hak_guard_data_end((unsigned)(s - hak_guard_slots));
    /* the slack written at allocation: an underflow or overflow that stayed
     * on the block's pages */
    uintptr_t head = a - first < HAK_GUARD_WINDOW ? first : a - HAK_GUARD_WINDOW;
    uintptr_t under = hak_guard_slack_bad(head, a), over = hak_guard_slack_bad(a + s->size, end);
    hak_profile_free(p);   /* a heap profile's sample too: out of the profile */
    pthread_mutex_lock(&hak_guard_lock);
    if (atomic_load_explicit(&s->state, memory_order_relaxed) != HAK_SLOT_LIVE) {   /* lost a race with another free */
        pthread_mutex_unlock(&hak_guard_lock);
        hak_guard_live(p, "free()");
    }
    memcpy(s->free_frames, frames, depth * sizeof(void *));
    s->free_depth = (uint8_t)depth;
    s->free_tid = hak_guard_thread();
    atomic_store_explicit(&s->state, HAK_SLOT_FREED, memory_order_release);
    pthread_mutex_unlock(&hak_guard_lock);
    if (under || over) {
        hak_guard_print_what(over ? "heap overflow (found at free)" : "heap underflow (found at free)", s,
                             over ? over : under);
        hak_fatal("free()", over ? "heap overflow: the bytes after a guarded block were overwritten"
                                 : "heap underflow: the bytes before a guarded block were overwritten", p);
    }
    hak_os_guard((void *)first, end - first);   /* no-access from now on, the memory kept */
    pthread_mutex_lock(&hak_guard_lock);
    hak_guard_ring[(hak_guard_head + hak_guard_count) % HAK_GUARD_SLOTS] = (uint16_t)(s - hak_guard_slots);
    hak_guard_count++;
    pthread_mutex_unlock(&hak_guard_lock);
    return true;
}

/* realloc(p, size) of a live guarded block p that keeps it (size at most
 * its size and at least half of it, as an ordinary block is kept): its
 * size becomes size, the bytes after it the pattern (an overflow into them
 * is found at free).  False: not a guarded block, or one that moves. */
bool hak_guard_resize(void *p, size_t size) {
    if (!hak_guard_owns(p)) return false;
    hak_guard_slot_t *s = hak_guard_live(p, "realloc()");
    if (size > s->size || size < s->size / 2) return false;
    memset((uint8_t *)p + size, HAK_GUARD_PATTERN, s->size - size);
    s->size = size;
    return true;
}

/* The usable size of guarded block p (its requested size: the bytes after it
 * are the pattern): true; false if p is not in the guarded region. */
static bool hak_guard_usable_hook(const void *p, const char *op, size_t *n) {
    if (!hak_guard_owns(p)) return false;
    *n = hak_guard_live(p, op)->size;
    return true;
}

/* ---- the report (async-signal-safe: the SIGSEGV handler calls it) ---- */

static void hak_guard_print_stack(const char *what, long tid, void *const *frames, unsigned depth) {
    hak_message("hakmem: %s by thread %ld at:\n", what, tid);
    hak_crash_print_frames(frames, depth);
}

static void hak_guard_print_what(const char *what, const hak_guard_slot_t *s, uintptr_t addr) {
    hak_message("hakmem: %s at address %p: guarded block %p of %zu bytes (guarded sampling)\n",
                what, (void *)addr, (void *)s->ptr, s->size);
}

static void hak_guard_print_stacks(const hak_guard_slot_t *s) {
    hak_guard_print_stack("allocated", s->alloc_tid, s->alloc_frames, s->alloc_depth);
    if (atomic_load_explicit(&s->state, memory_order_acquire) == HAK_SLOT_FREED)
        hak_guard_print_stack("freed", s->free_tid, s->free_frames, s->free_depth);
}

/* The slot whose data pages hold a, or NULL */
static const hak_guard_slot_t *hak_guard_slot_at(uintptr_t a) {
    uintptr_t rel = a - hak_guard_base;
    unsigned i = (unsigned)(rel / hak_guard_stride);
    if (i >= HAK_GUARD_SLOTS || rel % hak_guard_stride < hak_guard_page) return NULL;
    return &hak_guard_slots[i];
}

/* A report of misuse (hak_report.c): the block, or its stacks. */
bool hak_guard_report(const void *p, int part) {
    if (!hak_guard_owns(p)) return false;
    const hak_guard_slot_t *s = hak_guard_slot_at((uintptr_t)p);
    uint8_t state = s ? atomic_load_explicit(&s->state, memory_order_acquire) : HAK_SLOT_UNUSED;
    if (state == HAK_SLOT_UNUSED) {
        if (part == 0) hak_message("hakmem: the block: none: %p is in the guarded region, in no block\n", p);
        return true;
    }
    if (part == 0)
        hak_message("hakmem: the block: guarded block %p of %zu bytes (guarded sampling), %s%s\n", (void *)s->ptr,
                    s->size, state == HAK_SLOT_FREED ? "freed" : "live",
                    (uintptr_t)p == s->ptr ? "" : "; the pointer is inside its slot");
    else hak_guard_print_stacks(s);
    return true;
}

/* A fault at addr: if it lies in the guarded region, say what happened and
 * return true.  An address in a guard page is an overflow of the block
 * before it (if that slot holds a block), else an underflow of the block
 * after it; in a slot's data pages, an underflow of its live block or a use
 * after free of its freed one.  Then the stack of the faulting access (ctx,
 * the signal's context), and the block's. */
static bool hak_guard_explain(const void *addr, const void *ctx) {
    if (!hak_guard_owns(addr)) return false;
    uintptr_t a = (uintptr_t)addr, rel = a - hak_guard_base;
    unsigned i = (unsigned)(rel / hak_guard_stride);
    bool in_guard = rel % hak_guard_stride < hak_guard_page;
    const hak_guard_slot_t *s = NULL;
    const char *what = "wild access (no block there)";
    if (in_guard && i > 0 && hak_guard_slots[i - 1].state != HAK_SLOT_UNUSED) {
        s = &hak_guard_slots[i - 1];
        what = s->state == HAK_SLOT_FREED ? "use after free (past the end of a freed block)" : "heap overflow";
    } else if (i < HAK_GUARD_SLOTS && hak_guard_slots[i].state != HAK_SLOT_UNUSED) {
        s = &hak_guard_slots[i];
        what = s->state == HAK_SLOT_FREED ? "use after free" : "heap underflow";
    }
    hak_message("hakmem: SIGSEGV in the guarded region: %s\n", what);
    if (s) hak_guard_print_what(what, s, a);
    else hak_message("hakmem: fault address %p\n", addr);
    if (ctx) hak_report_fault_stack(ctx);
    if (s) hak_guard_print_stacks(s);
    hak_report_next(s != NULL);
    return true;
}
