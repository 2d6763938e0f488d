/* hak_report.c -- the rest of a misuse report, after its first line: what
 * a user needs to act (docs/misuse.md, "Reading a report").
 *
 *   hakmem: free(): double free of 0x7f3a1c010040; aborting      (hak_fatal)
 *   hakmem: the block: 0x7f3a1c010040, a small block of size class 48 bytes
 *   hakmem: free() called by thread 4242 at:
 *   hakmem:   #0 0x55d0c4a011c9 drop_twice+0x19 (/srv/app+0x11c9)
 *   hakmem:   #1 ...
 *   hakmem: allocated by thread 4242 at:       (a guarded block, or a heap
 *   hakmem:   #0 ...                            profile's sample)
 *   hakmem: next: rerun with HAKMEM_GUARD_SAMPLE=1 ...
 *
 * and, for a fault (hak_crash.c, hak_guard.c), the stack of the faulting
 * access from the signal's context, its first frame the faulting
 * instruction.
 *
 * Everything here runs in a failing process, maybe in a signal handler,
 * maybe with a lock of hakmem's held: it allocates nothing, takes no lock
 * (a sample's look-up only tries one: hak_profile_sample_of), calls only
 * async-signal-safe functions, and ends:
 *  - the stacks come from hak_unwind_regs (hak_unwind.c): the cached unwind
 *    rules only, at most 32 frames, never libgcc's walk (which may take the
 *    loader's lock or allocate) and never the loader's lock;
 *  - a walk that misreads a corrupt stack and faults is caught by the crash
 *    handler (hak_crash_walk_jmp: sigsetjmp here, siglongjmp there) and the
 *    report goes on with the frames walked so far;
 *  - a report within a report on the same thread (a misuse found while
 *    reporting one, a fault in the report) prints its first line only.
 * Without a walk (x86-64: _dl_find_object, looked up at start-up in a
 * dynamically linked program; elsewhere libgcc's, loaded only when
 * something is sampled) a stack is empty and says why.  Under a seccomp
 * filter the frames are not named (hak_crash.c opens no file there).  The frames are printed by hak_crash_print_stack: each
 * with its function (the file's symbols), its file and the address in it
 * that addr2line takes. */
#include "hak_internal.h"
#include "hak_hardened.h"   /* HAK_HARDENED_ENABLED: the next step differs */
#include <setjmp.h>
#include <ucontext.h>

#define HAK_REPORT_DEPTH 32

static HAK_TLS bool hak_reporting;              /* a report is under way on this thread */
static uintptr_t hak_report_lo, hak_report_hi;   /* libhakmem.so's code: its frames are left out */

/* The stack from signal context ctx (its pc first), or with ctx NULL the
 * caller's; hakmem's own leading frames left out (libhakmem.so's by
 * address here; linked into the program, by name when printed).  A fault in the walk ends
 * it with the frames walked so far (*faulted says so). */
/* The walk itself under the crash handler's jump (-1: it faulted); apart
 * from the rest so that nothing else lives across sigsetjmp. */
static __attribute__((noinline)) int hak_report_walk_caught(void **frames, unsigned max, const void *ctx) {
    sigjmp_buf env;
    void *outer = hak_crash_walk_jmp;
    volatile int n = -1;
    if (sigsetjmp(env, 0) == 0) {
        hak_crash_walk_jmp = &env;
        if (ctx) {
            const ucontext_t *uc = ctx;
            n = hak_unwind_regs(frames, max, HAK_ARCH_UC_PC(uc), HAK_ARCH_UC_SP(uc), HAK_ARCH_UC_FP(uc));
        } else {
            n = hak_unwind_regs(frames, max, 0, 0, 0);
        }
    }
    hak_crash_walk_jmp = outer;
    return n;
}

static unsigned hak_report_walk(void **frames, unsigned max, const void *ctx, bool *faulted) {
    for (unsigned i = 0; i < max; i++) frames[i] = NULL;
    int n = hak_report_walk_caught(frames, max, ctx);
    unsigned got = 0;
    *faulted = n < 0;
    if (n >= 0) got = (unsigned)n;
    else while (got < max && frames[got]) got++;
    unsigned skip = 0;
    if (!ctx)
        while (skip < got && (uintptr_t)frames[skip] - hak_report_lo < hak_report_hi - hak_report_lo) skip++;
    for (unsigned i = skip; i < got; i++) frames[i - skip] = frames[i];
    return got - skip;
}

/* The stack of the call that found a misuse (ctx NULL) or of the faulting
 * access, under its heading. */
static void hak_report_stack(const char *op, const void *ctx) {
    void *frames[HAK_REPORT_DEPTH];
    bool faulted;
    unsigned n = hak_report_walk(frames, HAK_REPORT_DEPTH, ctx, &faulted);
    if (ctx) hak_message("hakmem: the bad access, by thread %ld, at:\n", hak_os_gettid());
    else hak_message("hakmem: %s called by thread %ld at:\n", op, hak_os_gettid());
    if (n || !faulted) hak_crash_print_stack(frames, n, ctx != NULL, ctx == NULL);
    if (faulted) hak_message("hakmem:   (the stack walk stopped here: it faulted on a corrupt stack)\n");
}

/* The next step: one line. */
void hak_report_next(bool guarded) {
    if (guarded)
        hak_message("hakmem: next: the stacks above show the bad access, the allocation and the free; "
                    "addr2line -f -i -e FILE ADDRESS gives a frame's source line (FILE+ADDRESS in parentheses)\n");
    else if (HAK_HARDENED_ENABLED)
        hak_message("hakmem: next: rerun under the release build with HAKMEM_GUARD_SAMPLE=1 (hakmem run, "
                    "that variable set): a block up to 16 KiB then faults at the bad access itself, reported "
                    "with its allocation and free stacks; addr2line -f -i -e FILE ADDRESS gives a frame's "
                    "source line (FILE+ADDRESS in parentheses)\n");
    else
        hak_message("hakmem: next: rerun with HAKMEM_GUARD_SAMPLE=1 (a block up to 16 KiB then faults at the "
                    "bad access itself, reported with its allocation and free stacks) or with hakmem run "
                    "--hardened (every block checked); addr2line -f -i -e FILE ADDRESS gives a frame's source "
                    "line (FILE+ADDRESS in parentheses)\n");
}

/* The block p points to or into; true if it is a guarded block (whose
 * stacks hak_guard_report prints). */
static bool hak_report_block(const void *p) {
    if (hak_guard_report(p, 0)) return true;
    if (hak_zero_owns(p)) {
        hak_message("hakmem: the block: %p, a block of malloc(0) (0 bytes: no byte of it may be touched)\n",
                    (void *)((uintptr_t)p & ~(uintptr_t)15));
        return false;
    }
    hak_block_info_t b;
    if (!p) {
        hak_message("hakmem: the block: none (a NULL pointer)\n");
    } else if (!hak_block_info(p, &b)) {
        hak_message("hakmem: the block: none: %p is not in hakmem's memory (no size known: glibc's block, "
                    "the stack, static data, hakmem's own metadata, or a wild pointer)\n", p);
    } else if (b.header) {
        hak_message("hakmem: the block: none: %p is in a %s segment's header\n", p, b.kind);
    } else if (b.released) {
        hak_message("hakmem: the block: none now: %p is in a %s page that holds no blocks (its blocks were "
                    "all freed and the page given back)\n", p, b.kind);
    } else if (!b.block) {
        hak_message("hakmem: the block: none: %p is in a %s page, outside its blocks\n", p, b.kind);
    } else if (b.size && b.asked) {
        hak_message("hakmem: the block: %p, a %s block of %zu bytes (size class %zu bytes)%s\n",
                    b.block, b.kind, b.asked, b.size, b.block == p ? "" : "; the pointer is inside it");
    } else {
        hak_message("hakmem: the block: %p, a %s block of %s%zu bytes%s\n", b.block, b.kind,
                    b.cls ? "size class " : "", b.size, b.block == p ? "" : "; the pointer is inside it");
    }
    return false;
}

/* hak_report_hooks.misuse */
static void hak_report_misuse(const char *op, const void *p) {
    if (hak_reporting) return;
    hak_reporting = 1;
    bool guarded = hak_report_block(p);
    hak_report_stack(op, NULL);
    if (guarded) {
        hak_guard_report(p, 1);
    } else {
        /* a heap profile's sample: its allocation stack (the block's start,
         * or p itself for a pointer in no block) */
        hak_block_info_t b;
        const void *at = hak_block_info(p, &b) && b.block ? b.block : p;
        void *frames[HAK_REPORT_DEPTH];
        unsigned depth;
        size_t size;
        if (p && hak_profile_sample_of(at, frames, HAK_REPORT_DEPTH, &depth, &size)) {
            hak_message("hakmem: allocated (%zu bytes, a heap profile's sample) at:\n", size);
            hak_crash_print_stack(frames, depth, false, true);
        }
    }
    hak_report_next(guarded);
    hak_reporting = 0;
}

/* The faulting access's stack (hak_guard.c's explanation, and below). */
void hak_report_fault_stack(const void *ctx) { hak_report_stack(NULL, ctx); }

/* hak_report_hooks.fault: a fault in hakmem's code, on a block of
 * malloc(0), or in a segment past its reach (hak_crash.c) */
static void hak_report_fault(const void *ctx, int kind) {
    if (!ctx || hak_reporting) return;
    hak_reporting = 1;   /* (a program's own handler may go on after the fault: cleared below) */
    hak_report_fault_stack(ctx);
    if (kind == HAK_FAULT_ALLOCATOR) hak_report_next(false);
    else if (kind == HAK_FAULT_ZERO)
        hak_message("hakmem: next: the first frame above touched a block of size 0; give the block the bytes "
                    "the program uses (addr2line -f -i -e FILE ADDRESS gives a frame's source line)\n");
    else   /* HAK_FAULT_FAR; the hardened build checks the copies already */
        hak_message("hakmem: next: the first frame above made the bad access: look for an index or a length far "
                    "out of bounds there (addr2line -f -i -e FILE ADDRESS gives a frame's source line)%s\n",
                    HAK_HARDENED_ENABLED ? "" : "; hakmem run --hardened checks every copy (memcpy, memset, "
                                                "strcpy, ...) against the block it writes to");
    hak_reporting = 0;
}

void hak_report_enable(void) {
    /* libhakmem.so's code: a report's stack leaves out its leading frames
     * (linked into the program, hakmem's frames stay: they are named) */
    if (!hak_self_text(&hak_report_lo, &hak_report_hi)) hak_report_lo = hak_report_hi = 0;
    hak_report_hooks.fault = hak_report_fault;
    hak_report_hooks.misuse = hak_report_misuse;
}
