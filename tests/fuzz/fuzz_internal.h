/* fuzz_internal.h -- what the files of hakmem's fuzzer share; the drivers
 * (fuzz_target.c, fuzz_replay.c) see only fuzz_ops.h.
 *   fuzz_api.c      the entry points called: the standard names or the
 *                   hakmem_* ones, C++ operators, hakmem's extras
 *   fuzz_report.c   failure reports, the abort handler, the trace
 *   fuzz_model.c    the model: block contents, the outcomes allowed for a
 *                   request, checked allocation, free and realloc
 *   fuzz_helpers.c  the two helper threads (remote frees, allocations,
 *                   reallocs, thread exit)
 *   fuzz_decode.c   the input format: bytes into sizes, alignments, counts
 *   fuzz_interp.c   the interpreter: slots, one function per operation,
 *                   fz_run, fz_init */
#ifndef HAK_FUZZ_INTERNAL_H
#define HAK_FUZZ_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hakmem.h"
#include "fuzz_ops.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

#define FZ_SLOTS      64
#define FZ_HELPERS    2
#define FZ_QCAP       1024          /* helper queue entries */
#define FZ_KEEP_MAX   (16 * MiB)    /* larger successful blocks are freed at once */
#define FZ_ALIGN_SAFE (4 * MiB)     /* larger alignments may fail with ENOMEM */
#define FZ_LIVE_MAX   (32 * MiB)    /* live bytes in slots; larger requests shrink */
#define FZ_FILL_MAX   (48 * MiB)    /* bytes written per input; then requests shrink */
#define FZ_PENDING_MAX (32 * MiB)   /* bytes queued for one helper before a sync */
#define FZ_SAMPLE_MIN (64 * KiB)    /* blocks up to this size are checked in full */
#define FZ_MAX_RESTARTS 8           /* helper restarts per input */
#define FZ_BURST_MAX  256
#define FZ_CANARY     4242          /* errno before a call; no real errno value */

/* ------------------------------------------------- names (fuzz_api.c) -- */
typedef struct fz_api_s {
    int (*owns)(const void *);
    int (*collect)(void);
    int (*stats_get)(hakmem_stats_t *, size_t);
    int (*trim)(size_t);
    struct mallinfo2 (*mallinfo2)(void);
    void (*free_sized)(void *, size_t);
    void (*free_aligned_sized)(void *, size_t, size_t);
    /* C++ operators, [0] scalar, [1] array; nothrow_t is passed by reference */
    void *(*op_new[2])(size_t);
    void *(*op_new_nt[2])(size_t, const void *);
    void *(*op_new_al[2])(size_t, size_t);
    void *(*op_new_al_nt[2])(size_t, size_t, const void *);
    void (*op_del[2])(void *);
    void (*op_del_sized[2])(void *, size_t);
    void (*op_del_al[2])(void *, size_t);
    void (*op_del_sized_al[2])(void *, size_t, size_t);
    int cxx;                        /* 1: the operators are hakmem's own */
} fz_api_t;
extern fz_api_t fz_api;
void fz_resolve(void);

/* ----------------------------------------------------- operations ----- */
enum {
    OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_REALLOCARRAY, OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC,
    OP_MEMALIGN, OP_VALLOC, OP_PVALLOC, OP_NEW, OP_FREE, OP_USABLE, OP_CHECK, OP_CHAIN,
    OP_REMOTE_FREE, OP_REMOTE_ALLOC, OP_REMOTE_REALLOC, OP_SYNC, OP_RESTART, OP_BURST,
    OP_QUERY, OP_COUNT
};
extern const char *const fz_op_names[OP_COUNT];     /* fuzz_interp.c */

/* ------------------------------------------- reporting (fuzz_report.c) -- */
extern const uint8_t *fz_input;            /* the input being run, for --crash-file */
extern size_t fz_input_len;
extern _Atomic unsigned long fz_op_index;  /* read by the helpers' messages */
extern _Atomic int fz_op_code;
extern _Thread_local const char *fz_thread;

/* "fuzz: FAIL" with the input and operation, keep the input, abort */
__attribute__((noreturn, format(printf, 1, 2)))
void fz_fail(const char *fmt, ...);
/* one line of the trace (fz_set_trace) */
__attribute__((format(printf, 1, 2)))
void fz_tr(const char *fmt, ...);

/* ------------------------------------------------ model (fuzz_model.c) -- */
enum { ORIG_MALLOC, ORIG_ALIGNED, ORIG_NEW, ORIG_NEW_ALIGNED };

typedef struct fz_block_s {
    uint8_t *p;          /* NULL: no block */
    size_t req;          /* size asked for */
    size_t usable;       /* malloc_usable_size when allocated */
    size_t align;        /* alignment p must have (>= 16) */
    size_t ualign;       /* alignment the program passed (free_aligned_sized, delete) */
    size_t filled;       /* [0, filled) holds the pattern (req, or usable) */
    uint64_t seed;
    uint8_t origin, array;
} fz_block_t;

enum {
    API_MALLOC, API_CALLOC, API_POSIX_MEMALIGN, API_ALIGNED_ALLOC, API_MEMALIGN, API_VALLOC,
    API_PVALLOC, API_REALLOC_NULL, API_REALLOCARRAY_NULL, API_NEW, API_NEW_NT, API_NEW_AL,
    API_NEW_AL_NT, API_COUNT
};
extern const char *const fz_api_names[API_COUNT];

typedef struct fz_areq_s {
    int api;
    size_t n, size, align;   /* n: calloc / reallocarray count */
    int array;               /* new[] */
} fz_areq_t;

/* what a call may do */
#define FZ_OK     1
#define FZ_ENOMEM 2
#define FZ_EINVAL 4

/* how much of a block a check reads (pat_find in fuzz_model.c) */
enum { CHK_FULL, CHK_SAMPLED, CHK_MINIMAL };

extern size_t fz_page;
extern _Atomic size_t fz_fill_bytes;  /* written this input (helpers add too) */

/* the outcomes allowed for a request of total bytes aligned to align */
int fz_expect(size_t total, size_t align);
/* p aligned, hakmem's, malloc_usable_size >= req (stored in *usable) */
void fz_check_ptr(const char *what, const void *p, size_t req, size_t align, size_t *usable);
/* b's contents hold its pattern (depth: CHK_*) */
void blk_check(const fz_block_t *b, int depth, const char *when);
/* write the pattern of seed into [from, to) of p */
void pat_fill(uint8_t *p, size_t from, size_t to, uint64_t seed);
/* Allocate per r into b.  Returns true if b now holds a live block (false:
 * an allowed failure, or an enormous block that was checked and freed). */
bool blk_alloc(fz_block_t *b, const fz_areq_t *r, uint64_t seed);
/* Free b (checked first); how picks the entry point. */
void blk_free(fz_block_t *b, unsigned how);
/* realloc (api API_REALLOC_NULL) or reallocarray (API_REALLOCARRAY_NULL) of
 * the live block b.  Returns true if b holds a live block afterwards. */
bool blk_realloc(fz_block_t *b, int api, size_t n, size_t size);

/* -------------------------------------------- helpers (fuzz_helpers.c) -- */
enum { HR_FREE, HR_ALLOC, HR_REALLOC, HR_BURST_ALLOC, HR_EXIT };
typedef struct fz_hreq_s {
    int kind;
    unsigned how;
    fz_block_t b;
    fz_areq_t a;
    uint64_t seed;
    size_t size, count;
    int key;                /* HR_EXIT: -1, or which fz_keys[] destructor runs */
} fz_hreq_t;

/* Work for a helper's exit: a pthread key destructor frees b (a block of
 * the main thread's), then allocates per a, reallocs and frees, and re-arms
 * itself for up to rounds of glibc's destructor rounds.  fz_keys[0] is
 * created before hakmem's own key (so its destructor runs before hakmem's
 * exit handler in each round), fz_keys[1] after (it runs after: the
 * allocations of a thread past hakmem's exit handler). */
typedef struct fz_exit_s {
    fz_block_t b;
    fz_areq_t a;
    uint64_t seed;
    unsigned rounds, round, how;
    int key;
    const char *name;
} fz_exit_t;
/* TSan ends a thread's state in the last of glibc's 4 destructor rounds:
 * code running after that (hakmem's exit handler, re-armed by a late
 * allocation) crashes in TSan itself.  Under TSan the exit work runs in 2
 * rounds at most. */
#if defined(__SANITIZE_THREAD__)
#define FZ_EXIT_ROUNDS 2
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FZ_EXIT_ROUNDS 2
#endif
#endif
#ifndef FZ_EXIT_ROUNDS
#define FZ_EXIT_ROUNDS 4
#endif

typedef struct fz_helper_s {
    pthread_t tid;
    int id;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    unsigned head, tail;
    bool busy;
    fz_hreq_t q[FZ_QCAP];
    fz_block_t reply;       /* HR_ALLOC, HR_REALLOC */
    bool reply_live;
    size_t pending;         /* main thread's count of queued bytes */
    fz_exit_t exit_work;    /* HR_EXIT with a key */
} fz_helper_t;

extern fz_helper_t fz_helpers[FZ_HELPERS];
extern fz_block_t fz_burst[FZ_BURST_MAX];

/* the exit-work keys (one before hakmem's, one after), then the helpers */
void fz_helpers_start(void);
/* wait until h has done everything queued */
void h_wait(fz_helper_t *h);
void h_call(fz_helper_t *h, const fz_hreq_t *r);
/* the helper exits (r: HR_EXIT, perhaps with exit work), a new one starts */
void h_restart(fz_helper_t *h, const fz_hreq_t *r);
/* queue b for helper h to free */
void h_free(fz_helper_t *h, const fz_block_t *b, unsigned how);

/* ---------------------------------------------- input (fuzz_decode.c) -- */
void fz_read_start(const uint8_t *data, size_t size);
/* true once a read went past the end (it gave 0) */
bool fz_read_done(void);
uint8_t fz_u8(void);
unsigned fz_u16(void);
/* hakmem's size classes: 16..128 step 16, then 8 per power of two */
size_t fz_class_size(unsigned c);
size_t fz_size(void);
size_t fz_align(void);
/* calloc / reallocarray: count and element size from a byte and a size */
void fz_count_size(size_t *n, size_t *size);

#endif /* HAK_FUZZ_INTERNAL_H */
