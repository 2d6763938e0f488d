/* fuzz_interp.c -- hakmem's fuzzer: one interpreter that turns input bytes into
 * a sequence of allocator operations and checks every result against a model.
 * Used by the libFuzzer target (fuzz_target.c) and by the replay driver
 * (fuzz_replay.c), in the sanitizer builds through the hakmem_* names
 * (tests/hak_prefix.h) and, in the plain build, through the standard names
 * under LD_PRELOAD.
 *
 * The input format (every byte string is a valid input) is in
 * fuzz_decode.c, the model in fuzz_model.c.
 *
 * The operations (one opcode byte, then their arguments): malloc, calloc,
 * realloc, reallocarray, posix_memalign, aligned_alloc, memalign, valloc,
 * pvalloc, C++ new (plain, array, nothrow, aligned; through hakmem's
 * operators under LD_PRELOAD, through the equivalent C calls in the prefix
 * builds), free (free, free_sized, free_aligned_sized, realloc(p, 0),
 * reallocarray(p, 0, n), the matching delete), malloc_usable_size (then the
 * program writes the whole usable size), a full contents check, realloc
 * chains, remote free (the block goes to one of two helper threads, which
 * checks and frees it), remote alloc and remote realloc (a helper allocates
 * or resizes and hands the block back), sync (wait for a helper's queue),
 * restart (a helper thread exits, leaving its heap abandoned with blocks
 * still live, and a new one starts; perhaps with a pthread key destructor
 * that frees one of the main thread's blocks and allocates, reallocs and
 * frees in up to 4 destructor rounds, before or after hakmem's own exit
 * handler), burst (up to 256 blocks of one size allocated by one thread,
 * freed by others in some order: full pages, remote and delayed frees) and
 * query (hakmem_collect, stats, mallinfo2, malloc_trim). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_internal.h"

const char *const fz_op_names[OP_COUNT] = {
    "malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "new", "free", "usable", "check", "chain",
    "remote_free", "remote_alloc", "remote_realloc", "sync", "restart", "burst", "query"
};
static unsigned long fz_counts[OP_COUNT];

static fz_block_t slots[FZ_SLOTS];
static size_t fz_live_bytes;
static uint64_t fz_seq;
static unsigned fz_restarts;

static uint64_t fz_new_seed(void) {
    uint64_t x = ++fz_seq * 0x9e3779b97f4a7c15ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    return (x ^ (x >> 32)) | 1;      /* never 0: 0 is calloc's zero */
}

/* keep a run's memory bounded: requests that would pass the budgets shrink */
static size_t fz_budget(size_t size) {
    if (size > FZ_KEEP_MAX) return size;     /* enormous: never kept */
    if (fz_live_bytes + size > FZ_LIVE_MAX ||
        atomic_load_explicit(&fz_fill_bytes, memory_order_relaxed) + size > FZ_FILL_MAX)
        return size & 0x3fff;
    return size;
}

/* the block b is about to go into slot s: it must not overlap any other */
static void fz_overlap(const fz_block_t *b, int self, const char *what) {
    uintptr_t lo = (uintptr_t)b->p, hi = lo + (b->usable ? b->usable : 1);
    for (int i = 0; i < FZ_SLOTS; i++) {
        const fz_block_t *o = &slots[i];
        if (i == self || !o->p) continue;
        uintptr_t olo = (uintptr_t)o->p, ohi = olo + (o->usable ? o->usable : 1);
        if (lo < ohi && olo < hi)
            fz_fail("%s: %p (usable %zu) overlaps slot %d's live block %p (usable %zu)", what, (void *)b->p,
                    b->usable, i, (void *)o->p, o->usable);
    }
}

static void slot_put(int s, const fz_block_t *b, const char *what) {
    fz_overlap(b, s, what);
    slots[s] = *b;
    fz_live_bytes += b->req;
}
static void slot_free(int s, unsigned how) {
    if (!slots[s].p) return;
    fz_live_bytes -= slots[s].req;
    blk_free(&slots[s], how);
}
/* take the block out of slot s (the caller passes it on) */
static fz_block_t slot_take(int s) {
    fz_block_t b = slots[s];
    if (b.p) fz_live_bytes -= b.req;
    slots[s].p = NULL;
    return b;
}

static void op_alloc(int s, fz_areq_t *r) {
    slot_free(s, 0);
    if (r->api == API_CALLOC || r->api == API_REALLOCARRAY_NULL) {
        size_t total;
        if (!__builtin_mul_overflow(r->n, r->size, &total) && fz_budget(total) != total)
            r->size = fz_budget(total) / (r->n ? r->n : 1);
    } else {
        r->size = fz_budget(r->size);
    }
    fz_tr("%s slot %d n %zu size %zu align %zu%s", fz_api_names[r->api], s, r->n, r->size, r->align,
          r->array ? " []" : "");
    fz_block_t b;
    if (blk_alloc(&b, r, fz_new_seed())) slot_put(s, &b, fz_api_names[r->api]);
}

static void op_realloc(int s, int api, size_t n, size_t size) {
    fz_block_t *b = &slots[s];
    size_t total;
    if (!__builtin_mul_overflow(n, size, &total)) {
        size_t old = b->p ? b->req : 0, t = total;
        fz_live_bytes -= old;
        t = fz_budget(total);
        fz_live_bytes += old;
        if (t != total) { size = api == API_REALLOCARRAY_NULL && n ? t / n : t; }
    }
    fz_tr("%s slot %d (%p size %zu) n %zu size %zu", api == API_REALLOCARRAY_NULL ? "reallocarray" : "realloc",
          s, (void *)b->p, b->p ? b->req : 0, n, size);
    if (!b->p) {
        fz_areq_t r = { .api = api, .n = n, .size = size };
        fz_block_t nb;
        if (blk_alloc(&nb, &r, fz_new_seed())) slot_put(s, &nb, fz_api_names[api]);
        return;
    }
    fz_block_t nb = slot_take(s);
    if (blk_realloc(&nb, api, n, size)) slot_put(s, &nb, api == API_REALLOC_NULL ? "realloc" : "reallocarray");
}

static void op_chain(int s) {
    unsigned steps = (fz_u8() & 15) + 1;
    for (unsigned i = 0; i < steps && !fz_read_done(); i++) {
        unsigned v = fz_u8(), m = v >> 6, x = v & 63;
        size_t old = slots[s].p ? slots[s].req : 64, nsz;
        switch (m) {
        case 0: nsz = old + old * (x + 1) / 16 + (x & 7); break;           /* grow up to 5x */
        case 1: nsz = old * x / 64; break;                                /* shrink */
        case 2: nsz = fz_class_size(x * 119 / 63) + (x & 1); break;       /* a class boundary */
        default: nsz = 2 * MiB + ((size_t)x - 32) * 64 * KiB; break;      /* around 2 MiB */
        }
        if (nsz > 8 * MiB) nsz %= 8 * MiB;
        op_realloc(s, API_REALLOC_NULL, 0, nsz);
    }
}

static void op_free(int s, unsigned how) {
    fz_tr("free slot %d (%p) how %u", s, (void *)slots[s].p, how);
    if (slots[s].p) { slot_free(s, how); return; }
    switch (how % 4) {                         /* the NULL forms */
    case 0: free(NULL); break;
    case 1: fz_api.free_sized(NULL, how); break;
    case 2: fz_api.free_aligned_sized(NULL, 64, how); break;
    case 3: fz_api.op_del[how & 1](NULL); fz_api.op_del_sized[how & 1](NULL, 0); break;
    }
}

static void op_usable(int s) {
    fz_block_t *b = &slots[s];
    if (!b->p) {
        size_t u = malloc_usable_size(NULL);
        if (u != 0) fz_fail("malloc_usable_size(NULL) = %zu", u);
        return;
    }
    size_t u = malloc_usable_size(b->p);
    fz_tr("usable slot %d (%p size %zu) = %zu", s, (void *)b->p, b->req, u);
    if (u != b->usable)
        fz_fail("malloc_usable_size(%p) = %zu, was %zu when allocated (size %zu)", (void *)b->p, u, b->usable, b->req);
    if (u > b->filled) {   /* the program may use all of it */
        blk_check(b, CHK_SAMPLED, "before writing the usable size");
        pat_fill(b->p, b->filled, u, b->seed);
        atomic_fetch_add_explicit(&fz_fill_bytes, u - b->filled, memory_order_relaxed);
        b->filled = u;
    }
}

static void op_check(int s) {
    fz_block_t *b = &slots[s];
    fz_tr("check slot %d (%p)", s, (void *)b->p);
    if (!b->p) return;
    size_t u;
    fz_check_ptr("check", b->p, b->req, b->align, &u);
    blk_check(b, CHK_FULL, "check");
}

static void check_all(const char *when) {
    for (int i = 0; i < FZ_SLOTS; i++)
        if (slots[i].p) blk_check(&slots[i], CHK_SAMPLED, when);
}

static void op_remote_free(int s, unsigned hh) {
    fz_helper_t *h = &fz_helpers[hh & 1];
    fz_tr("remote_free slot %d (%p) helper %u how %u", s, (void *)slots[s].p, hh & 1, hh >> 1);
    if (!slots[s].p) return;
    fz_block_t b = slot_take(s);
    blk_check(&b, CHK_SAMPLED, "before handing to a helper");
    h_free(h, &b, hh >> 1);
}

static void op_remote_alloc(int s, unsigned hk) {
    static const int apis[] = { API_MALLOC, API_CALLOC, API_MEMALIGN, API_POSIX_MEMALIGN,
                                API_REALLOC_NULL, API_NEW, API_ALIGNED_ALLOC, API_VALLOC };
    fz_helper_t *h = &fz_helpers[hk & 1];
    fz_areq_t a = { .api = apis[(hk >> 1) & 7], .n = 1 };
    a.align = fz_align();
    a.size = fz_budget(fz_size());
    if (a.api == API_NEW && fz_expect(a.size, 16) != FZ_OK) a.api = API_NEW_NT;
    slot_free(s, 0);
    fz_tr("remote_alloc slot %d helper %u %s size %zu align %zu", s, hk & 1, fz_api_names[a.api], a.size, a.align);
    fz_hreq_t r = { .kind = HR_ALLOC, .a = a, .seed = fz_new_seed() };
    h_call(h, &r);
    if (!h->reply_live) return;
    fz_block_t b = h->reply;
    blk_check(&b, CHK_SAMPLED, "a helper's new block");
    size_t u;
    fz_check_ptr("remote_alloc", b.p, b.req, b.align, &u);
    if (u != b.usable) fz_fail("malloc_usable_size(%p) = %zu here, %zu in the helper", (void *)b.p, u, b.usable);
    slot_put(s, &b, "remote_alloc");
}

static void op_remote_realloc(int s, unsigned hh, size_t size) {
    fz_helper_t *h = &fz_helpers[hh & 1];
    size_t old = slots[s].p ? slots[s].req : 0;
    fz_live_bytes -= old;
    size = fz_budget(size);
    fz_live_bytes += old;
    fz_tr("remote_realloc slot %d (%p size %zu) helper %u size %zu", s, (void *)slots[s].p, old, hh & 1, size);
    fz_hreq_t r = { .kind = HR_ALLOC, .a = { .api = API_REALLOC_NULL, .size = size }, .seed = fz_new_seed() };
    if (slots[s].p) {
        r.kind = HR_REALLOC;
        r.b = slot_take(s);
        r.size = size;
    }
    h_call(h, &r);
    if (!h->reply_live) return;
    fz_block_t b = h->reply;
    blk_check(&b, CHK_SAMPLED, "a helper's realloc");
    slot_put(s, &b, "remote_realloc");
}

static void fz_shuffle(unsigned *ix, unsigned n, uint64_t x) {
    for (unsigned i = n; i > 1; i--) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned j = (unsigned)((x >> 33) % i), t = ix[i - 1];
        ix[i - 1] = ix[j];
        ix[j] = t;
    }
}

/* up to 256 blocks of one size: one thread allocates, the same or others
 * free them in some order */
static void op_burst(void) {
    unsigned count = fz_u8() + 1u, mode = fz_u8();
    size_t size = fz_size();
    if (size > 32 * KiB) size &= 32 * KiB - 1;
    unsigned by = mode & 3, fby = (mode >> 2) & 3, order = (mode >> 4) & 3;
    static const int apis[] = { API_MALLOC, API_CALLOC, API_MEMALIGN, API_NEW };
    fz_areq_t a = { .api = apis[mode >> 6], .n = 1, .size = size, .align = 64 };
    fz_tr("burst %u x %s(size %zu%s) by %u freed by %u order %u", count, fz_api_names[a.api], size,
          a.api == API_MEMALIGN ? ", align 64" : "", by, fby, order);
    uint64_t seed = fz_new_seed();
    if (by == 1 || by == 2) {
        fz_hreq_t r = { .kind = HR_BURST_ALLOC, .a = a, .seed = seed, .count = count };
        h_call(&fz_helpers[by - 1], &r);
    } else {
        for (unsigned i = 0; i < count; i++)
            if (!blk_alloc(&fz_burst[i], &a, seed + 2 * i))
                fz_fail("burst %s(%zu) #%u failed", fz_api_names[a.api], size, i);
    }
    /* no two of them, nor any of them and a live block, overlap */
    unsigned ix[FZ_BURST_MAX];
    for (unsigned i = 0; i < count; i++) {
        ix[i] = i;
        fz_overlap(&fz_burst[i], -1, "burst");
        size_t u;
        fz_check_ptr("burst", fz_burst[i].p, fz_burst[i].req, fz_burst[i].align, &u);
    }
    for (unsigned gap = count / 2; gap > 0; gap /= 2)          /* shell sort by address */
        for (unsigned i = gap; i < count; i++)
            for (unsigned j = i; j >= gap && fz_burst[ix[j - gap]].p > fz_burst[ix[j]].p; j -= gap) {
                unsigned t = ix[j]; ix[j] = ix[j - gap]; ix[j - gap] = t;
            }
    for (unsigned i = 1; i < count; i++) {
        const fz_block_t *x = &fz_burst[ix[i - 1]], *y = &fz_burst[ix[i]];
        if (x->p + (x->usable ? x->usable : 1) > y->p)
            fz_fail("burst: %p (usable %zu) overlaps %p", (void *)x->p, x->usable, (void *)y->p);
    }
    /* the freeing order */
    for (unsigned i = 0; i < count; i++) ix[i] = i;
    if (order == 1) for (unsigned i = 0; i < count; i++) ix[i] = count - 1 - i;
    if (order == 2) { unsigned k = 0; for (unsigned i = 0; i < count; i += 2) ix[k++] = i;
                      for (unsigned i = 1; i < count; i += 2) ix[k++] = i; }
    if (order == 3) fz_shuffle(ix, count, seed ^ mode);
    for (unsigned i = 0; i < count; i++) {
        fz_block_t *b = &fz_burst[ix[i]];
        unsigned who = fby == 3 ? (i & 1) * 2 : fby;      /* 0 main, 1/2 a helper */
        if (who == 0) blk_free(b, i);
        else h_free(&fz_helpers[who - 1], b, i);
    }
}

static void op_query(unsigned q) {
    fz_tr("query %u", q % 5);
    switch (q % 5) {
    case 0:
        fz_api.collect();
        check_all("after hakmem_collect");
        break;
    case 1:
        if (fz_api.stats_get) {
            hakmem_stats_t st;
            if (fz_api.stats_get(&st, sizeof st) != 0) fz_fail("hakmem_stats_get failed");
            if (fz_api.stats_get(NULL, sizeof st) != -1) fz_fail("hakmem_stats_get(NULL) != -1");
        }
        break;
    case 2:
        if (fz_api.mallinfo2) {
            struct mallinfo2 mi = fz_api.mallinfo2();
            if (fz_api.owns && mi.uordblks > mi.arena)
                fz_fail("mallinfo2: uordblks %zu > arena %zu", mi.uordblks, mi.arena);
        }
        break;
    case 3:
        fz_api.trim(0);
        check_all("after malloc_trim");
        break;
    case 4:   /* let the helpers catch up, then purge with their frees done */
        for (int i = 0; i < FZ_HELPERS; i++) h_wait(&fz_helpers[i]);
        fz_api.collect();
        check_all("after the helpers and hakmem_collect");
        break;
    }
}

static void fz_op(unsigned op) {
    int s;
    fz_areq_t r = { .n = 1 };
    switch (op) {
    case OP_MALLOC: s = fz_u8() % FZ_SLOTS; r.api = API_MALLOC; r.size = fz_size(); op_alloc(s, &r); break;
    case OP_CALLOC:
        s = fz_u8() % FZ_SLOTS; r.api = API_CALLOC; fz_count_size(&r.n, &r.size); op_alloc(s, &r); break;
    case OP_REALLOC: s = fz_u8() % FZ_SLOTS; op_realloc(s, API_REALLOC_NULL, 0, fz_size()); break;
    case OP_REALLOCARRAY: {
        s = fz_u8() % FZ_SLOTS;
        size_t n, size;
        fz_count_size(&n, &size);
        op_realloc(s, API_REALLOCARRAY_NULL, n, size);
        break;
    }
    case OP_POSIX_MEMALIGN: case OP_ALIGNED_ALLOC: case OP_MEMALIGN:
        s = fz_u8() % FZ_SLOTS;
        r.api = op == OP_POSIX_MEMALIGN ? API_POSIX_MEMALIGN : op == OP_ALIGNED_ALLOC ? API_ALIGNED_ALLOC : API_MEMALIGN;
        r.align = fz_align();
        r.size = fz_size();
        op_alloc(s, &r);
        break;
    case OP_VALLOC: case OP_PVALLOC:
        s = fz_u8() % FZ_SLOTS; r.api = op == OP_VALLOC ? API_VALLOC : API_PVALLOC; r.size = fz_size();
        op_alloc(s, &r);
        break;
    case OP_NEW: {
        s = fz_u8() % FZ_SLOTS;
        unsigned k = fz_u8(), ab = fz_u8();
        r.size = fz_size();
        r.array = k & 1;
        bool aligned = k & 4, nothrow = k & 2;
        /* C++ alignments are powers of two; the table's last three are extreme */
        static const size_t extreme[] = { (size_t)1 << 30, (size_t)1 << 40, SIZE_MAX / 2 + 1 };
        r.align = ab < 230 ? (size_t)1 << (ab % 23) : extreme[(ab - 230) % 3];
        int allow = fz_expect(r.size, aligned ? r.align : 16);
        if (allow != FZ_OK) nothrow = true;    /* a throwing new must not fail here */
        r.api = aligned ? (nothrow ? API_NEW_AL_NT : API_NEW_AL) : (nothrow ? API_NEW_NT : API_NEW);
        op_alloc(s, &r);
        break;
    }
    case OP_FREE: s = fz_u8() % FZ_SLOTS; op_free(s, fz_u8()); break;
    case OP_USABLE: op_usable(fz_u8() % FZ_SLOTS); break;
    case OP_CHECK: op_check(fz_u8() % FZ_SLOTS); break;
    case OP_CHAIN: op_chain(fz_u8() % FZ_SLOTS); break;
    case OP_REMOTE_FREE: s = fz_u8() % FZ_SLOTS; op_remote_free(s, fz_u8()); break;
    case OP_REMOTE_ALLOC: s = fz_u8() % FZ_SLOTS; op_remote_alloc(s, fz_u8()); break;
    case OP_REMOTE_REALLOC: {
        s = fz_u8() % FZ_SLOTS;
        unsigned hh = fz_u8();
        op_remote_realloc(s, hh, fz_size());
        break;
    }
    case OP_SYNC: {
        unsigned h = fz_u8();
        fz_tr("sync %u", h & 3);
        for (int i = 0; i < FZ_HELPERS; i++)
            if ((h & 2) || (unsigned)i == (h & 1)) h_wait(&fz_helpers[i]);
        break;
    }
    case OP_RESTART: {
        unsigned hb = fz_u8();
        fz_helper_t *h = &fz_helpers[hb & 1];
        fz_hreq_t r = { .kind = HR_EXIT, .key = -1 };
        /* with exit work: slot, work byte (bit 0 key, 1-2 rounds, 3-5 api, 6-7 how), align, size */
        if (hb & 2) {
            static const int apis[] = { API_MALLOC, API_CALLOC, API_MEMALIGN, API_POSIX_MEMALIGN,
                                        API_REALLOC_NULL, API_NEW, API_VALLOC, API_ALIGNED_ALLOC };
            s = fz_u8() % FZ_SLOTS;
            unsigned w = fz_u8();
            r.key = (int)(w & 1);
            r.count = ((w >> 1) & 3) % FZ_EXIT_ROUNDS + 1;
            r.how = w >> 6;
            r.a = (fz_areq_t){ .api = apis[(w >> 3) & 7], .n = 1 };
            r.a.align = fz_align();
            r.a.size = fz_budget(fz_size());
            if (r.a.api == API_NEW && fz_expect(r.a.size, 16) != FZ_OK) r.a.api = API_NEW_NT;
            r.seed = fz_new_seed();
            if (slots[s].p) {
                r.b = slot_take(s);
                blk_check(&r.b, CHK_SAMPLED, "before handing to an exiting helper");
            }
        }
        fz_tr("restart %u, exit work: key %d, %zu rounds, %s(size %zu, align %zu), frees %p", hb & 1, r.key,
              r.count, r.key >= 0 ? fz_api_names[r.a.api] : "-", r.a.size, r.a.align, (void *)r.b.p);
        if (fz_restarts++ < FZ_MAX_RESTARTS) {
            h_restart(h, &r);
        } else {
            if (r.b.p) h_free(h, &r.b, r.how);
            h_wait(h);
        }
        break;
    }
    case OP_BURST: op_burst(); break;
    case OP_QUERY: op_query(fz_u8()); break;
    }
}

void fz_run(const uint8_t *data, size_t size) {
    fz_read_start(data, size);
    fz_input = data;
    fz_input_len = size;
    fz_seq = 0;
    fz_restarts = 0;
    atomic_store(&fz_fill_bytes, 0);
    atomic_store(&fz_op_index, 0);
    for (;;) {
        unsigned b = fz_u8();
        if (fz_read_done()) break;
        unsigned op = b % OP_COUNT;
        atomic_store(&fz_op_code, (int)op);
        fz_counts[op]++;
        fz_op(op);
        atomic_fetch_add(&fz_op_index, 1);
    }
    atomic_store(&fz_op_code, -1);
    for (int i = 0; i < FZ_SLOTS; i++) slot_free(i, 0);
    for (int i = 0; i < FZ_HELPERS; i++) h_wait(&fz_helpers[i]);
    if (fz_live_bytes != 0) fz_fail("model: %zu live bytes after cleanup", fz_live_bytes);
    fz_input = NULL;
}

void fz_init(void) {
    long ps = sysconf(_SC_PAGESIZE);
    fz_page = ps > 0 ? (size_t)ps : 4096;
    fz_resolve();
    fz_helpers_start();
}

void fz_print_counts(void) {
    unsigned long total = 0;
    for (int i = 0; i < OP_COUNT; i++) total += fz_counts[i];
    fprintf(stderr, "fuzz: %lu operations:", total);
    for (int i = 0; i < OP_COUNT; i++) fprintf(stderr, " %s %lu", fz_op_names[i], fz_counts[i]);
    fprintf(stderr, "\n");
}
