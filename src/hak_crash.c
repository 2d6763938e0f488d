/* hak_crash.c -- a short report when SIGSEGV or SIGBUS hits inside hakmem,
 * or hits the guarded region of guarded sampling (hak_guard.c).
 *
 * Installed by the library constructor (HAKMEM_CRASH_HANDLER=1, the default),
 * on top of whatever the program had installed before.  Costs nothing on the
 * fast paths and next to nothing at start-up.  The handler calls only
 * async-signal-safe functions (write, open, lseek, read, close, sigaction,
 * pthread_sigmask, raise, siglongjmp, prctl) and never allocates.  It opens
 * no file under a seccomp filter (prctl(PR_GET_SECCOMP), asked at each
 * report: a filter may kill on open); the frames then have no names.  Each report
 * ends with the stack of the faulting access, walked from the signal's
 * context, and a next step (hak_report_hooks.fault, hak_report.c).
 *  - A fault while a report walks a stack (hak_crash_walk_jmp set on this
 *    thread: a corrupt stack misread) jumps back to the report, which goes
 *    on without the rest of the stack.
 *
 *  - A fault (si_code > 0: the kernel raised it for an instruction) whose
 *    program counter lies in one of hakmem's functions prints which function,
 *    the faulting address and the first argument register; then the previous
 *    disposition is restored (the default one if it was SIG_IGN, as the
 *    kernel does for a fault) and the handler returns: the faulting
 *    instruction runs again and the signal goes where it would have gone
 *    without hakmem (core dump, or the program's handler).
 *  - A SIGSEGV fault at an address of the guarded region, whatever code made
 *    it, is explained by hak_crash_explain (hak_guard.c: heap overflow,
 *    underflow or use after free, with the block, the faulting access's
 *    stack and the block's, printed by hak_crash_print_stack, which names
 *    each frame's function from its file's symbol table and its address in
 *    the file); then as above, the fault runs again.  So are a SIGSEGV on a
 *    block of malloc(0) (hak_crash_zero_region) and one in a segment past
 *    its reach, where no page lies yet (hak_crash_unreached, hak_segment.c:
 *    a far write or read), each with the faulting access's stack and a
 *    next step.
 *  - Any other SIGSEGV/SIGBUS -- a fault in the program's own code, or a
 *    signal sent with kill(), raise(), pthread_kill() or sigqueue() (si_code
 *    <= 0: there is nothing to re-execute) -- gets the previous disposition's
 *    behaviour.  A handler is called as the kernel would call it: its
 *    sa_mask and the signal itself blocked (unless SA_NODEFER), reset to
 *    SIG_DFL first if SA_RESETHAND, with siginfo and context if SA_SIGINFO.
 *    SIG_DFL is restored, then a fault re-executes and a sent signal is
 *    raised again, so the process dies by it.  SIG_IGN ignores a sent
 *    signal; a fault kills (the kernel does not let a fault be ignored).
 *
 * A handler the program installs later simply replaces ours.
 *
 * Which code is hakmem's: the functions named hak_*, hakmem_*, the global
 * operators new and delete (_Znw*, _Zna*, _Zdl*, _Zda*), and the aliases of
 * these (malloc is hakmem_malloc, ...).  When the fault comes, the handler
 * reads the symbol table (.symtab, else .dynsym) of the file hakmem was
 * loaded from, with open/lseek/read into small stack buffers, and picks the
 * function whose address range holds the PC.  Reading it then rather than at
 * start-up keeps every process's start-up free of that work.  In
 * libhakmem.so all code is hakmem's, so the library's executable segment
 * decides and the symbols only name the function ("?" if they cannot be
 * read).  With libhakmem.a linked into a program only hakmem's own
 * functions count, not the whole executable. */
#include "hak_internal.h"
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#if __SIZEOF_POINTER__ == 8
#define HAK_ELFCLASS ELFCLASS64
#else
#define HAK_ELFCLASS ELFCLASS32
#endif

static struct sigaction hak_old_segv, hak_old_bus;
static uintptr_t hak_text_lo, hak_text_hi;   /* the executable segment holding hakmem */
static bool hak_text_all_ours;               /* libhakmem.so: all of that segment is hakmem */
static uintptr_t hak_bias;                   /* its load bias */
static char hak_path[512];                   /* its file */
static const char *hak_crash_variant;
bool (*hak_crash_explain)(const void *addr, const void *ctx);   /* hak_internal.h: registered by hak_guard.c */
HAK_TLS void *hak_crash_walk_jmp;   /* hak_internal.h: a report's stack walk (hak_report.c) */
static _Atomic uintptr_t hak_zero_lo, hak_zero_size;   /* hak_crash_zero_region */

void hak_crash_zero_region(uintptr_t base, size_t size) {
    atomic_store_explicit(&hak_zero_size, size, memory_order_relaxed);
    atomic_store_explicit(&hak_zero_lo, base, memory_order_release);
}

/* A fault on a block of malloc(0) (hak_zero.c), whoever's code made it. */
static bool hak_crash_zero(const void *addr, const void *ctx) {
    uintptr_t lo = atomic_load_explicit(&hak_zero_lo, memory_order_acquire);
    if (!lo || (uintptr_t)addr - lo >= atomic_load_explicit(&hak_zero_size, memory_order_relaxed)) return false;
    hak_message("hakmem: SIGSEGV: access to a block of size 0 (malloc(0), calloc(0, n), realloc(NULL, 0), "
                "new T[0], ...), which has no bytes: fault address %p, block %p\n",
                addr, (void *)((uintptr_t)addr & ~(uintptr_t)15));
    if (hak_report_hooks.fault) hak_report_hooks.fault(ctx, HAK_FAULT_ZERO);
    return true;
}

/* A fault in a segment past its reach (hak_segment.c, "reach"): no page has
 * lain there yet, so the access was meant for a block far from it -- an
 * index off by a great deal, or a pointer that is not one. */
bool (*hak_crash_unreached)(const void *addr, uintptr_t *seg, size_t *reach);   /* hak_internal.h */
static bool hak_crash_far(const void *addr, const void *ctx) {
    uintptr_t seg;
    size_t reach;
    bool (*unreached)(const void *, uintptr_t *, size_t *) = __atomic_load_n(&hak_crash_unreached, __ATOMIC_RELAXED);
    if (!unreached || !unreached(addr, &seg, &reach)) return false;
    hak_message("hakmem: SIGSEGV: access to %p, %zu KiB into hakmem's segment %p, past the first %zu KiB where its "
                "pages lie (no block lies there): a write or read far past or before a heap block, or a wild "
                "pointer\n", addr, (size_t)(((uintptr_t)addr - seg) >> 10), (void *)seg, reach >> 10);
    if (hak_report_hooks.fault) hak_report_hooks.fault(ctx, HAK_FAULT_FAR);
    return true;
}

/* ---- reading the symbol table (async-signal-safe) ---- */

static bool hak_read_at(int fd, uint64_t off, void *buf, size_t n) {
    if (lseek(fd, (off_t)off, SEEK_SET) != (off_t)off) return false;
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

static bool hak_prefix(const char *s, const char *p) {
    while (*p) if (*s++ != *p++) return false;
    return true;
}
static bool hak_same(const char *a, const char *b) {
    while (*a && *a == *b) { a++; b++; }
    return *a == *b;
}
static bool hak_is_own_name(const char *s) {
    return hak_prefix(s, "hak_") || hak_prefix(s, "hakmem_") || hak_prefix(s, "_Znw") ||
           hak_prefix(s, "_Zna") || hak_prefix(s, "_Zdl") || hak_prefix(s, "_Zda");
}
/* Of aliases, report the standard name: malloc before hakmem_malloc. */
static int hak_name_rank(const char *s) {
    return hak_prefix(s, "hakmem_") ? 2 : hak_prefix(s, "__") ? 1 : 0;
}

#define HAK_NAME_MAX 80
#define HAK_CANDIDATES 6
typedef struct hak_cand_s {
    uintptr_t lo;
    uint32_t name_off;
    char name[HAK_NAME_MAX];
} hak_cand_t;
typedef struct hak_scan_s {
    hak_cand_t at_pc[HAK_CANDIDATES];      /* functions whose range holds the PC */
    hak_cand_t check[2];                   /* symbols at hak_crash_install, hakmem_build_variant */
    unsigned n_pc, n_check;
} hak_scan_t;

static void hak_cand_add(hak_cand_t *c, unsigned *n, unsigned max, uintptr_t lo, uint32_t name_off) {
    if (*n < max) { c[*n].lo = lo; c[*n].name_off = name_off; c[*n].name[0] = 0; (*n)++; }
}

/* ---- symbol tables (async-signal-safe: open, lseek, read) ---- */

/* An ELF file's function symbols: .symtab, else .dynsym, and their names. */
typedef struct hak_syms_s {
    int fd;
    ElfW(Ehdr) eh;
    ElfW(Shdr) sym, str;
} hak_syms_t;

/* May a report open files (a file's symbols, /proc/self/maps)?  Not under
 * a seccomp filter, which may kill the process on open (hostile.seccomp.*:
 * SIGSYS instead of the report's end and its re-raised fault): the report
 * then goes on without names.  Asked at each report, one system call (a
 * filter may come at any time).  A prctl that fails says nothing (qemu-user
 * answers EINVAL: a64.crash.report), as for the statistics' RSS. */
static bool hak_crash_may_open(void) {
    int saved = errno;
    long r = syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0);
    errno = saved;
    return r <= 0;
}

/* Open path's symbols; false (nothing left open) if it has none to read. */
static bool hak_syms_open(hak_syms_t *t, const char *path) {
    t->fd = -1;
    if (!hak_crash_may_open()) return false;
    t->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (t->fd < 0) return false;
    ElfW(Shdr) sh;
    bool have = false;
    if (hak_read_at(t->fd, 0, &t->eh, sizeof t->eh) && memcmp(t->eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        t->eh.e_ident[EI_CLASS] == HAK_ELFCLASS && t->eh.e_shentsize == sizeof(ElfW(Shdr))) {
        for (int pass = 0; pass < 2 && !have; pass++) {
            for (unsigned i = 0; i < t->eh.e_shnum && !have; i++) {
                if (!hak_read_at(t->fd, t->eh.e_shoff + (uint64_t)i * sizeof sh, &sh, sizeof sh)) break;
                if (sh.sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM)) { t->sym = sh; have = true; }
            }
        }
    }
    if (have && t->sym.sh_entsize == sizeof(ElfW(Sym)) && t->sym.sh_link < t->eh.e_shnum &&
        hak_read_at(t->fd, t->eh.e_shoff + (uint64_t)t->sym.sh_link * sizeof sh, &t->str, sizeof t->str))
        return true;
    close(t->fd);
    return false;
}

/* fn(arg, address, size, name offset) for each function the file defines,
 * its address the symbol's value plus bias; false on a read error. */
static bool hak_syms_each(const hak_syms_t *t, uintptr_t bias, void (*fn)(void *, uintptr_t, size_t, uint32_t),
                          void *arg) {
    ElfW(Sym) chunk[32];
    size_t count = t->sym.sh_size / sizeof(ElfW(Sym));
    for (size_t i = 0; i < count; i += 32) {
        size_t n = count - i < 32 ? count - i : 32;
        if (!hak_read_at(t->fd, t->sym.sh_offset + i * sizeof(ElfW(Sym)), chunk, n * sizeof(ElfW(Sym)))) return false;
        for (size_t j = 0; j < n; j++) {
            const ElfW(Sym) *y = &chunk[j];
            if ((y->st_info & 0xf) != STT_FUNC || y->st_shndx == SHN_UNDEF || y->st_size == 0) continue;
            fn(arg, bias + y->st_value, y->st_size, y->st_name);
        }
    }
    return true;
}

/* The name at offset off, at most HAK_NAME_MAX - 1 bytes, in out ("" if
 * off is out of range); false on a read error. */
static bool hak_syms_name(const hak_syms_t *t, uint32_t off, char *out) {
    out[0] = 0;
    if (off >= t->str.sh_size) return true;
    size_t n = t->str.sh_size - off;
    if (n > HAK_NAME_MAX - 1) n = HAK_NAME_MAX - 1;
    if (!hak_read_at(t->fd, t->str.sh_offset + off, out, n)) return false;
    out[n] = 0;
    return true;
}

typedef struct hak_func_scan_s {
    uintptr_t pc, self, pub;
    hak_scan_t s;
} hak_func_scan_t;

static void hak_func_step(void *arg, uintptr_t lo, size_t size, uint32_t name) {
    hak_func_scan_t *f = arg;
    if (f->pc >= lo && f->pc - lo < size) hak_cand_add(f->s.at_pc, &f->s.n_pc, HAK_CANDIDATES, lo, name);
    if (lo == f->self || lo == f->pub) hak_cand_add(f->s.check, &f->s.n_check, 2, lo, name);
}

/* Name the function of hakmem holding pc in out (HAK_NAME_MAX bytes).
 * Returns 1 if found, 0 if pc is in no function of hakmem, -1 if that
 * cannot be told: the symbols could not be read, do not belong to the loaded
 * file, or are only .dynsym (which lacks the internal functions). */
static int hak_func_at(uintptr_t pc, char *out) {
    hak_syms_t t;
    if (!hak_syms_open(&t, hak_path)) return -1;
    int result = -1;
    hak_func_scan_t f = { pc, (uintptr_t)&hak_crash_install, (uintptr_t)&hakmem_build_variant, { .n_pc = 0 } };
    hak_scan_t *s = &f.s;
    uintptr_t self = f.self, pub = f.pub;
    if (!hak_syms_each(&t, hak_bias, hak_func_step, &f)) goto out;
    /* the names, at most HAK_NAME_MAX - 1 bytes each */
    hak_cand_t *all[HAK_CANDIDATES + 2];
    unsigned n_all = 0;
    for (unsigned i = 0; i < s->n_pc; i++) all[n_all++] = &s->at_pc[i];
    for (unsigned i = 0; i < s->n_check; i++) all[n_all++] = &s->check[i];
    for (unsigned i = 0; i < n_all; i++)
        if (!hak_syms_name(&t, all[i]->name_off, all[i]->name)) goto out;
    /* this file is the one loaded: hak_crash_install (or, in a file with
     * only .dynsym, hakmem_build_variant) is where it is in memory */
    bool valid = false;
    for (unsigned i = 0; i < s->n_check; i++)
        valid |= (s->check[i].lo == self && hak_same(s->check[i].name, "hak_crash_install")) ||
                 (s->check[i].lo == pub && hak_same(s->check[i].name, "hakmem_build_variant"));
    if (!valid) goto out;
    /* hakmem's if one of the names is; then the best-known of its aliases */
    const char *best = NULL;
    result = 0;
    for (unsigned i = 0; i < s->n_pc; i++) {
        if (!hak_is_own_name(s->at_pc[i].name)) continue;
        for (unsigned k = 0; k < s->n_pc; k++)
            if (s->at_pc[k].lo == s->at_pc[i].lo && s->at_pc[k].name[0] &&
                (!best || hak_name_rank(s->at_pc[k].name) < hak_name_rank(best)))
                best = s->at_pc[k].name;
    }
    if (best) {
        size_t n = 0;
        while (best[n] && n < HAK_NAME_MAX - 1) { out[n] = best[n]; n++; }
        out[n] = 0;
        result = 1;
    } else if (t.sym.sh_type != SHT_SYMTAB) {
        result = -1;
    }
out:
    close(t.fd);
    return result;
}

typedef struct hak_frame_scan_s {
    uintptr_t at, lo;
    uint32_t name;
    bool found;
} hak_frame_scan_t;

static void hak_frame_step(void *arg, uintptr_t lo, size_t size, uint32_t name) {
    hak_frame_scan_t *f = arg;
    if (!f->found && f->at >= lo && f->at - lo < size) { f->lo = lo; f->name = name; f->found = true; }
}

/* The code at file offset off of file path: its address in the file's own
 * numbering (its load segment's, what addr2line and nm take) in *addr, and
 * the function that holds it, its name in out and the distance from its
 * start in *delta.  A return address (exact false) is looked up as the call
 * before it.  Returns 0: the file does not tell; 1: the address only; 2:
 * the function too. */
static int hak_sym_at(const char *path, uintptr_t off, bool exact, char *out, uintptr_t *delta, uintptr_t *addr) {
    hak_syms_t t;
    if (!hak_syms_open(&t, path)) return 0;
    hak_frame_scan_t f = { 0, 0, 0, false };
    bool mapped = false;
    uintptr_t back = exact ? 0 : 1;
    ElfW(Phdr) ph;
    for (unsigned i = 0; t.eh.e_phentsize == sizeof ph && i < t.eh.e_phnum && !mapped; i++) {
        if (!hak_read_at(t.fd, t.eh.e_phoff + (uint64_t)i * sizeof ph, &ph, sizeof ph)) break;
        if (ph.p_type == PT_LOAD && off >= ph.p_offset + back && off - ph.p_offset <= ph.p_filesz) {
            f.at = off - ph.p_offset + ph.p_vaddr - back;   /* the load segment: the offset's address */
            mapped = true;
        }
    }
    int ok = 0;
    if (mapped) {
        *addr = f.at + back;
        ok = 1;
        if (hak_syms_each(&t, 0, hak_frame_step, &f) && f.found && hak_syms_name(&t, f.name, out) && out[0]) {
            *delta = f.at + back - f.lo;
            ok = 2;
        }
    }
    close(t.fd);
    return ok;
}

/* ---- frames with their file and offset (async-signal-safe) ---- */

#define HAK_FRAMES_MAX 16   /* (the handler may run on a small alternate stack) */
typedef struct hak_where_s {
    char file[HAK_NAME_MAX];
    uintptr_t off;
} hak_where_t;

static uintptr_t hak_hex(const char **s, const char *end) {
    uintptr_t v = 0;
    for (; *s < end; (*s)++) {
        char c = **s;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
        if (d == 16) break;
        v = v * 16 + d;
    }
    return v;
}

/* One line of /proc/self/maps, "lo-hi perms offset dev inode path": the
 * frames it holds get the path and their offset in the file. */
static void hak_maps_line(const char *s, const char *end, void *const *frames, unsigned n, hak_where_t *w) {
    uintptr_t lo = hak_hex(&s, end);
    if (s < end) s++;
    uintptr_t hi = hak_hex(&s, end);
    for (int field = 0; field < 2 && s < end; field++) {     /* perms, then the offset */
        while (s < end && *s == ' ') s++;
        if (field == 0) while (s < end && *s != ' ') s++;
    }
    uintptr_t off = hak_hex(&s, end);
    for (int field = 0; field < 2 && s < end; field++) {     /* dev, inode */
        while (s < end && *s == ' ') s++;
        while (s < end && *s != ' ') s++;
    }
    while (s < end && *s == ' ') s++;
    if (s == end) return;
    for (unsigned k = 0; k < n; k++) {
        uintptr_t a = (uintptr_t)frames[k];
        if (a < lo || a >= hi || w[k].file[0]) continue;
        size_t len = (size_t)(end - s) < HAK_NAME_MAX - 1 ? (size_t)(end - s) : HAK_NAME_MAX - 1;
        memcpy(w[k].file, s, len);
        w[k].file[len] = 0;
        w[k].off = a - lo + off;
    }
}

void hak_crash_print_stack(void *const *frames, unsigned n, bool first_exact, bool skip_own) {
    hak_where_t w[HAK_FRAMES_MAX];
    if (n > HAK_FRAMES_MAX) n = HAK_FRAMES_MAX;
    for (unsigned k = 0; k < n; k++) w[k].file[0] = 0;
    bool may_open = hak_crash_may_open();
    int fd = may_open ? open("/proc/self/maps", O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        char buf[1024];
        size_t have = 0;
        for (;;) {
            ssize_t r = read(fd, buf + have, sizeof buf - have);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            have += (size_t)r;
            size_t start = 0;
            for (size_t e = 0; e < have; e++)
                if (buf[e] == '\n') { hak_maps_line(buf + start, buf + e, frames, n, w); start = e + 1; }
            if (start == 0 && have == sizeof buf) start = have;   /* a line longer than the buffer: dropped */
            memmove(buf, buf + start, have - start);
            have -= start;
        }
        close(fd);
    }
    if (n == 0) hak_message("hakmem:   (no stack: hakmem's walk needs glibc's _dl_find_object (2.35 and later) "
                            "and a dynamically linked program; on other architectures than x86-64 libgcc's "
                            "unwinder, loaded only while something is sampled)\n");
    if (n && !may_open)
        hak_message("hakmem:   (frames not named: a seccomp filter is on, and naming them opens their files "
                    "and /proc/self/maps; the addresses are this run's)\n");
    /* each frame's file and its address there (addr2line -e FILE ADDRESS);
     * with skip_own, the leading frames named as hakmem's functions left
     * out (hakmem linked into the program) */
    for (unsigned k = 0, shown = 0; k < n; k++) {
        char name[HAK_NAME_MAX];
        uintptr_t delta = 0, addr = w[k].off;
        int got = w[k].file[0] ? hak_sym_at(w[k].file, w[k].off, first_exact && k == 0, name, &delta, &addr) : 0;
        if (skip_own && shown == 0 && got == 2 && hak_is_own_name(name) && k + 1 < n) continue;
        if (!w[k].file[0]) hak_message("hakmem:   #%u %p\n", shown, frames[k]);
        else if (got == 2)
            hak_message("hakmem:   #%u %p %s+%p (%s+%p)\n", shown, frames[k], name, (void *)delta, w[k].file, (void *)addr);
        else hak_message("hakmem:   #%u %p (%s+%p)\n", shown, frames[k], w[k].file, (void *)addr);
        shown++;
    }
}
void hak_crash_print_frames(void *const *frames, unsigned n) { hak_crash_print_stack(frames, n, false, false); }



/* ---- the handler ---- */

static void hak_crash_set(int sig, void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

/* Call the program's handler as the kernel would have. */
static void hak_crash_call(int sig, siginfo_t *si, void *ctx, struct sigaction *saved, int saved_errno) {
    struct sigaction old = *saved;
    sigset_t mask = old.sa_mask, prev;
    if (!(old.sa_flags & SA_NODEFER)) sigaddset(&mask, sig);
    if (old.sa_flags & SA_RESETHAND) {
        saved->sa_handler = SIG_DFL;      /* (should our handler ever be reinstated) */
        saved->sa_flags = 0;
        hak_crash_set(sig, SIG_DFL);
    }
    pthread_sigmask(SIG_BLOCK, &mask, &prev);
    errno = saved_errno;
    if (old.sa_flags & SA_SIGINFO) old.sa_sigaction(sig, si, ctx);
    else old.sa_handler(sig);
    saved_errno = errno;
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    errno = saved_errno;
}

/* A fault at pc: report it if pc is in hakmem's code.  Returns true then. */
static bool hak_crash_report(int sig, const siginfo_t *si, const void *ctx) {
    const ucontext_t *uc = (const ucontext_t *)ctx;          /* src/arch/ */
    uintptr_t pc = HAK_ARCH_UC_PC(uc), arg = HAK_ARCH_UC_ARG0(uc), sp = HAK_ARCH_UC_SP(uc);
    if (pc < hak_text_lo || pc >= hak_text_hi) return false;
    char name[HAK_NAME_MAX] = "?";
    int found = hak_func_at(pc, name);
    if (found == 0 || (found < 0 && !hak_text_all_ours)) return false;
    hak_message("hakmem: %s inside the allocator (in %s, near %s()): fault address %p, first argument register %p\n",
                sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", hak_crash_variant, name, si->si_addr, (void *)arg);
    hak_message("hakmem: %s registers: pc %p (library offset %p), sp %p\n", HAK_ARCH_NAME,
                (void *)pc, (void *)(pc - hak_bias), (void *)sp);
    hak_message("hakmem: this usually means heap corruption: a write past a block, or a use after free\n");
    if (hak_report_hooks.fault) hak_report_hooks.fault(ctx, HAK_FAULT_ALLOCATOR);
    return true;
}

static void hak_crash_handler(int sig, siginfo_t *si, void *ctx) {
    int saved_errno = errno;
    /* a fault in a report's stack walk (a stack it misread) ends the walk:
     * back to the report, which goes on without the rest of the stack */
    void *walk = hak_crash_walk_jmp;
    if (walk && si && si->si_code > 0) {
        hak_crash_walk_jmp = NULL;
        siglongjmp(*(sigjmp_buf *)walk, 1);
    }
    struct sigaction *old = sig == SIGBUS ? &hak_old_bus : &hak_old_segv;
    /* A fault has an instruction that raises it again when re-executed;
     * kill(), raise(), sigqueue() (si_code <= 0) and an asynchronous
     * machine-check report do not. */
    bool fault = si && si->si_code > 0;
#ifdef BUS_MCEERR_AO
    if (sig == SIGBUS && fault && si->si_code == BUS_MCEERR_AO) fault = false;
#endif
    /* a fault in the guarded region (hak_guard.c), whoever's code made it;
     * else one in hakmem's code */
    bool guarded = fault && sig == SIGSEGV &&
                   (hak_crash_zero(si->si_addr, ctx) || (hak_crash_explain && hak_crash_explain(si->si_addr, ctx)) ||
                    hak_crash_far(si->si_addr, ctx));
    if (guarded || (fault && ctx && hak_crash_report(sig, si, ctx))) {
        /* the previous disposition gets the re-executed fault */
        if (old->sa_handler == SIG_IGN) hak_crash_set(sig, SIG_DFL);
        else sigaction(sig, old, NULL);
    } else if (old->sa_handler == SIG_IGN) {
        if (fault) hak_crash_set(sig, SIG_DFL);   /* a fault cannot be ignored */
    } else if (old->sa_handler == SIG_DFL) {
        hak_crash_set(sig, SIG_DFL);
        if (!fault) {                              /* nothing re-executes: raise it again */
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, sig);
            pthread_sigmask(SIG_UNBLOCK, &set, NULL);
            raise(sig);
        }
    } else {
        hak_crash_call(sig, si, ctx, old, saved_errno);
        return;
    }
    errno = saved_errno;
}

/* ---- installing it ---- */

static int hak_find_self(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size; (void)arg;
    uintptr_t pc = (uintptr_t)&hak_find_self;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (pc < lo || pc >= hi) continue;
        hak_text_lo = lo; hak_text_hi = hi;
        hak_bias = info->dlpi_addr;
        /* the main program, with hakmem linked in, has no name */
        const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : NULL;
        hak_text_all_ours = name != NULL;
        if (!name) name = "/proc/self/exe";
        size_t n = 0, len = strlen(name);
        if (name[0] != '/' && getcwd(hak_path, sizeof hak_path - 1)) {   /* the program may chdir */
            n = strlen(hak_path);
            if (n + 1 + len < sizeof hak_path) hak_path[n++] = '/';
            else n = 0;
        }
        if (n + len < sizeof hak_path) {
            memcpy(hak_path + n, name, len + 1);
        } else {
            hak_path[0] = 0;
        }
        return 1;
    }
    return 0;
}

bool hak_self_text(uintptr_t *lo, uintptr_t *hi) {
    if (!hak_text_hi) dl_iterate_phdr(hak_find_self, NULL);
    *lo = hak_text_lo;
    *hi = hak_text_hi;
    return hak_text_hi && hak_text_all_ours;
}

void hak_crash_install(void) {
    if (!hak_opt.crash_handler) return;
    dl_iterate_phdr(hak_find_self, NULL);
    if (!hak_text_hi) return;
    hak_crash_variant = hakmem_build_variant();
    static const int sigs[2] = { SIGSEGV, SIGBUS };
    for (int i = 0; i < 2; i++) {
        struct sigaction *old = sigs[i] == SIGSEGV ? &hak_old_segv : &hak_old_bus;
        struct sigaction sa;
        if (sigaction(sigs[i], NULL, old) != 0) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = hak_crash_handler;
        /* SA_NODEFER and an empty mask: the program's handler is then called
         * with exactly the mask it asked for; SA_RESTART if it asked for it */
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | (old->sa_flags & SA_RESTART);
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}
