/* hak_unwind.c -- the stack of a sampled allocation (heap profiles,
 * hak_profile.c; guarded sampling, hak_guard.c), fast and without the
 * dynamic loader's locks: docs/profiling.md, "Stacks".
 *
 * libgcc's _Unwind_Backtrace finds each frame's FDE and interprets its CFI
 * program every time: about 1,500 instructions a frame, 11,000 a sample on
 * random_large (callgrind), which made the unwinding nearly all of what a
 * sample costs.  On x86-64 the rule a frame's CFI gives at one address is
 * almost always "CFA = rsp or rbp + offset; return address at CFA - 8; rbp
 * unchanged or saved at CFA - 8k".  hak_unwind computes that rule once per
 * address -- the object from glibc's _dl_find_object, the FDE from the
 * object's .eh_frame_hdr search table, the CFI programs interpreted here --
 * and keeps it in a fixed table of 64-bit words, one per address, written
 * with one atomic store (no lock: a racing writer writes the same word).
 * A frame in the program, libc, the dynamic loader or hakmem then costs a
 * table lookup and two loads; a frame in an object that dlopen loaded also
 * costs its FDE's lookup and a checksum of its bytes (the rules of
 * unloaded code, below).  Anything else -- an expression, a signal frame,
 * a frame larger than 32 KiB, a register rule this walk does not model, an
 * address no FDE covers -- ends hakmem's walk, and the caller takes
 * libgcc's walk for that sample where that is safe (below), else keeps the
 * frames walked so far.  Other architectures take libgcc's walk only.
 * Nothing here allocates but hak_unwind_load.
 *
 * No lock of the loader's, ever, from an allocation (test loader.*):
 *  - _dl_find_object (glibc 2.35) reads the loader's list of objects
 *    without a lock; it is the only loader function hakmem's walk calls.
 *    The walk called dl_iterate_phdr before, for the loader's count of
 *    unloads: it takes the loader's write lock, and a program whose
 *    dl_iterate_phdr callback waits for a mutex of the program's while
 *    another thread allocates holding that mutex deadlocked (issue 36).
 *  - libgcc's walk finds its FDEs with _Unwind_Find_FDE, which calls
 *    dl_iterate_phdr unless libgcc was built against a glibc with
 *    _dl_find_object (GCC 12 and later then use that instead and have no
 *    dl_iterate_phdr left to call: Debian 12's libgcc_s imports
 *    _dl_find_object and no dl_iterate_phdr).  hak_unwind_load checks
 *    that: libgcc's walk is taken (hak_gcc_backtrace set) only when the
 *    object that defines it imports no dl_iterate_phdr, and _dl_find_object
 *    is there.  Its other lock, libgcc's own object_mutex, it takes only
 *    when a program registered unwind tables (__register_frame_info, JIT
 *    compilers), and it allocates under it: a walk whose innermost frame is
 *    libgcc's (an allocation of libgcc's own) never goes back into libgcc.
 *  - dlopen and dlsym of libgcc_s (hak_dlopen.c) and dlvsym of
 *    _dl_find_object run in the constructor only (hak_profile.c: before
 *    it, nothing is sampled), as do the check above and libgcc's first
 *    walk (its one-time set-up).
 * Without _dl_find_object (glibc before 2.35) samples have no stacks, and
 * a warning says so.
 *
 * libgcc's functions are weak references, not a link dependency: a program
 * that takes no heap profile does not map libgcc_s (96 KiB of RSS in a C
 * program that needs nothing else of it).  The constructor (hak_profile.c)
 * calls hak_unwind_load in every dynamically linked program: it looks up
 * _dl_find_object and the objects never unloaded -- all that hakmem's walk
 * needs, for misuse reports (hak_report.c) and guarded blocks (on by
 * default) -- and only with heap profiles on (or on an architecture
 * without hakmem's walk, when anything is sampled) libgcc's functions: the
 * ones linked in or already loaded (C++), else dlopen("libgcc_s.so.1")
 * (hak_dlopen.c).  A fully static program gets no stacks, and with
 * profiles asked for a warning. */
#include "hak_internal.h"
#include <dlfcn.h>   /* _dl_find_object, struct dl_find_object (glibc 2.35) */
#include <link.h>
#include <sys/auxv.h>

#pragma weak _Unwind_Backtrace
#pragma weak _Unwind_GetIP

/* _dl_find_object, looked up by hak_unwind_load (dlvsym, at start-up): a
 * reference to it would make the library need GLIBC_2.35 even when weak
 * (GNU ld marks the version needed, not weak), and not load at all on an
 * older glibc; there it stays NULL.  Not used at all with headers that lack
 * it. */
#ifdef DLFO_STRUCT_HAS_EH_DBASE
#define HAK_HAVE_DLFO 1
static int (*hak_dlfo)(void *, struct dl_find_object *);
#else
#define HAK_HAVE_DLFO 0
#endif

_Unwind_Reason_Code (*hak_gcc_backtrace)(_Unwind_Trace_Fn, void *);
_Unwind_Ptr (*hak_gcc_get_ip)(struct _Unwind_Context *);
static uintptr_t hak_gcc_lo, hak_gcc_hi;   /* the object that holds libgcc's walk */

/* hak_dlopen.c, in the shared library only */
const char *hak_dlopen_unwinder(void **backtrace, void **get_ip);
#pragma weak hak_dlopen_unwinder

/* The dynamic section: absent (NULL) in a fully static program, where
 * libgcc's unwinder finds no unwind tables of the program (no
 * PT_GNU_EH_FRAME) and aborts on its first walk. */
extern ElfW(Dyn) _DYNAMIC[] __attribute__((weak));   /* (link.h declares it without weak) */

/* bytes of a pointer in DW_EH_PE encoding enc (low nibble); 0: unsupported */
static unsigned hak_enc_size(uint8_t enc) {
    switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: return 8;
    case 0x03: case 0x0b: return 4;
    case 0x02: case 0x0a: return 2;
    default: return 0;
    }
}

/* An object: its mapping [lo, hi), its link map, its PT_GNU_EH_FRAME
 * (.eh_frame_hdr) and the FDE search table there: count pairs of datarel
 * sdata4 (the initial location, the FDE), sorted by location. */
typedef struct {
    uintptr_t lo, hi;
    struct link_map *map;
    const uint8_t *hdr, *table;
    uint32_t count;
    bool fixed;           /* never unloaded (hak_fixed) */
    const uint8_t *cie;   /* the last CIE met in the object, and its checksum (hak_fde_sum) */
    uint64_t cie_sum;
} hak_obj_t;

/* The object holding pc, lock-free; false: none, or no _dl_find_object.
 * No table (count 0) unless it has one this walk reads -- version 1, the
 * count as udata4, the table as datarel sdata4: what GNU ld, gold and lld
 * write, and the only table libgcc's own reader searches (else it scans
 * .eh_frame). */
static bool hak_obj_find(uintptr_t pc, hak_obj_t *o) {
#if HAK_HAVE_DLFO
    struct dl_find_object r;
    if (!hak_dlfo || hak_dlfo((void *)pc, &r) != 0) return false;
    o->lo = (uintptr_t)r.dlfo_map_start;
    o->hi = (uintptr_t)r.dlfo_map_end;
    o->map = r.dlfo_link_map;
    const uint8_t *hdr = r.dlfo_eh_frame;
    o->hdr = hdr;
    o->table = NULL;
    o->count = 0;
    o->fixed = false;
    o->cie = NULL;
    if (!o->map) return false;
    unsigned n = hdr && hdr[0] == 1 && hdr[2] == 0x03 && hdr[3] == 0x3b ? hak_enc_size(hdr[1]) : 0;
    if (n) {   /* (n: the size of eh_frame_ptr, skipped) */
        memcpy(&o->count, hdr + 4 + n, 4);
        o->table = hdr + 8 + n;
    }
    return true;
#else
    (void)pc; (void)o;
    return false;
#endif
}

/* Looks _dl_find_object up (start-up only: dlvsym takes the loader's lock);
 * whether it is there. */
static bool hak_dlfo_load(void) {
#if HAK_HAVE_DLFO
    hak_dlfo = (int (*)(void *, struct dl_find_object *))dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35");
    return hak_dlfo != NULL;
#else
    return false;
#endif
}

/* The objects that are never unloaded, found at start-up (hak_fixed_add):
 * the program (its entry point), the dynamic loader (its base), libc and
 * hakmem itself (the program, for the static library).  glibc unloads only
 * objects that dlopen loaded, never one loaded at the program's start, and
 * libhakmem.so is linked with -z nodelete.  The code at their addresses
 * never changes, so their rules need no seal (below). */
#define HAK_FIXED_MAX 4
static hak_obj_t hak_fixed[HAK_FIXED_MAX];
static unsigned hak_nfixed;

static void hak_fixed_add(uintptr_t addr) {
    hak_obj_t o;
    if (!addr || hak_nfixed == HAK_FIXED_MAX || !hak_obj_find(addr, &o)) return;
    for (unsigned k = 0; k < hak_nfixed; k++)
        if (hak_fixed[k].lo == o.lo) return;
    o.fixed = true;
    hak_fixed[hak_nfixed++] = o;
}

/* Whether the object holding fn imports symbol name (an undefined symbol
 * of its dynamic symbol table); true when the table cannot be read -- the
 * answer that errs on the safe side.  Start-up only. */
static bool hak_object_imports(const void *fn, const char *name) {
    hak_obj_t o;
    if (!hak_obj_find((uintptr_t)fn, &o)) return true;
    uintptr_t base = o.map->l_addr;
    const ElfW(Sym) *sym = NULL;
    const char *str = NULL;
    size_t strsz = 0, count = 0;
    for (const ElfW(Dyn) *d = o.map->l_ld; d && d->d_tag != DT_NULL; d++) {
        /* the loader relocates these in place, unless the dynamic section
         * is read-only: then they are still the link-time addresses */
        uintptr_t v = d->d_un.d_ptr;
        if (base && v < base) v += base;
        switch (d->d_tag) {
        case DT_SYMTAB: sym = (const ElfW(Sym) *)v; break;
        case DT_STRTAB: str = (const char *)v; break;
        case DT_STRSZ: strsz = d->d_un.d_val; break;
        case DT_HASH: count = ((const uint32_t *)v)[1]; break;   /* nchain: every symbol */
        case DT_GNU_HASH: if (!count) count = ((const uint32_t *)v)[1]; break;
            /* symoffset: the symbols below it are the ones not hashed, the
             * undefined ones among them (the linker sorts them first) */
        }
    }
    if (!sym || !str || !count) return true;
    size_t len = strlen(name);
    for (size_t i = 1; i < count; i++)
        if (sym[i].st_shndx == SHN_UNDEF && sym[i].st_name + len < strsz &&
            !memcmp(str + sym[i].st_name, name, len + 1)) return true;
    return false;
}

static _Unwind_Reason_Code hak_gcc_warm_step(struct _Unwind_Context *ctx, void *arg) {
    (void)ctx; (void)arg;
    return _URC_END_OF_STACK;
}

const char *hak_unwind_load(int use) {
    if (!_DYNAMIC) return "not available in a fully static program";
#if !defined(__x86_64__)
    if (use == HAK_UNWIND_REPORTS) return "no stack walk of hakmem's own on this architecture";
    use = HAK_UNWIND_PROFILE;   /* libgcc's walk is the only one here */
#endif
    void *bt = NULL, *ip = NULL;
    if (use == HAK_UNWIND_PROFILE) {
        bt = (void *)_Unwind_Backtrace;
        ip = (void *)_Unwind_GetIP;
        if (!bt || !ip) {
            if (!hak_dlopen_unwinder) return "libhakmem.a linked without libgcc's unwinder";
            const char *why = hak_dlopen_unwinder(&bt, &ip);
            if (why) return why;
        }
        hak_gcc_get_ip = (_Unwind_Ptr (*)(struct _Unwind_Context *))ip;
    }
    if (hak_dlfo_load()) {
        hak_fixed_add(getauxval(AT_ENTRY));
        hak_fixed_add(getauxval(AT_BASE));
        hak_fixed_add((uintptr_t)getauxval);   /* (libc's) */
        hak_fixed_add((uintptr_t)hak_unwind);
    } else {
        if (use != HAK_UNWIND_REPORTS)
            hak_message("hakmem: warning: this glibc has no _dl_find_object (2.35 and later have it): "
                        "heap profile samples and guarded blocks are recorded without their stacks\n");
        return NULL;
    }
    if (use != HAK_UNWIND_PROFILE) return NULL;   /* hakmem's walk alone: libgcc_s not mapped */
    /* libgcc's walk only if it cannot take the loader's lock (above) */
    hak_obj_t o;
    if (hak_object_imports(bt, "dl_iterate_phdr") || !hak_obj_find((uintptr_t)bt, &o)) return NULL;
    hak_gcc_lo = o.lo;
    hak_gcc_hi = o.hi;
    /* its one-time set-up (pthread_once) here rather than in an allocation */
    ((_Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void *))bt)(hak_gcc_warm_step, NULL);
    __atomic_store_n(&hak_gcc_backtrace, (_Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void *))bt, __ATOMIC_RELEASE);
    return NULL;
}

/* May libgcc's walk run for a stack whose innermost frame (outside hakmem)
 * is at ip?  Not if libgcc is unsafe or absent, nor if ip is in libgcc's
 * object: an allocation of libgcc's own, maybe under its object_mutex
 * (when libgcc is linked into the program, any of the program's). */
static bool hak_gcc_may_walk(uintptr_t ip) {
    return hak_gcc_backtrace && ip - hak_gcc_lo >= hak_gcc_hi - hak_gcc_lo;
}

/* For the debug build's check of a complete walk of n frames against
 * libgcc's (hak_profile.c): may libgcc's walk run for it? */
bool hak_unwind_gcc_may_check(void *const *frames, int n) {
    return n > 0 && hak_gcc_may_walk((uintptr_t)frames[0]);
}

#if defined(__x86_64__)

/* A rule: bits 0..46 the address, bit 47 CFA from rbp (else rsp), bits
 * 48..59 the CFA offset / 8 (0: the outermost frame, no return address),
 * bits 60..63 k: rbp saved at CFA - 8k (0: unchanged). */
#define HAK_RULE_IP     (((uint64_t)1 << 47) - 1)
#define HAK_RULE_RBP    ((uint64_t)1 << 47)
#define HAK_RULES       4096           /* 32 KiB; as much for their seals, half for hints (below) */
static _Atomic uint64_t hak_rules[HAK_RULES];

static uint64_t hak_uleb(const uint8_t **p, const uint8_t *end) {
    uint64_t v = 0;
    unsigned shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
    }
    return v;
}
static int64_t hak_sleb(const uint8_t **p, const uint8_t *end) {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    while (*p < end) {
        b = *(*p)++;
        if (shift < 64) v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
        if (!(b & 0x80)) break;
    }
    if (shift < 64 && (b & 0x40)) v |= -((int64_t)1 << shift);
    return v;
}

/* The register state the walk models: CFA = reg (7 rsp, 6 rbp) + off; rbp
 * saved at CFA + rbp_off (0: unchanged); the return address (register 16)
 * at CFA + ra_off, or undefined (the outermost frame). */
typedef struct { int64_t cfa_off, rbp_off, ra_off; uint8_t cfa_reg; bool ra_undef; } hak_cfi_t;

/* Run the CFI program [p, end) up to pc (loc: the address it starts at).
 * false: something the walk does not model. */
static bool hak_cfi_run(const uint8_t *p, const uint8_t *end, uintptr_t *loc, uintptr_t pc,
                        uint64_t code_align, int64_t data_align, hak_cfi_t *st, const hak_cfi_t *init) {
    hak_cfi_t saved[4];
    unsigned depth = 0;
    while (p < end) {
        uint8_t op = *p++, low = op & 0x3f;
        uint64_t reg, delta = 0;
        int64_t off;
        switch (op & 0xc0) {
        case 0x40: delta = low; goto advance;
        case 0x80: reg = low; off = (int64_t)hak_uleb(&p, end) * data_align; goto offset;
        case 0xc0: reg = low; goto restore;
        }
        switch (op) {
        case 0x00: continue;                                              /* nop */
        case 0x02: if (end - p < 1) return false; delta = p[0]; p += 1; goto advance;
        case 0x03: if (end - p < 2) return false; delta = (uint64_t)p[0] | (uint64_t)p[1] << 8; p += 2; goto advance;
        case 0x04: if (end - p < 4) return false;
                   delta = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
                   p += 4; goto advance;
        case 0x05: reg = hak_uleb(&p, end); off = (int64_t)hak_uleb(&p, end) * data_align; goto offset;
        case 0x06: reg = hak_uleb(&p, end); goto restore;
        case 0x07: reg = hak_uleb(&p, end);                               /* undefined */
                   if (reg == 16) st->ra_undef = true;
                   else if (reg == 6) st->rbp_off = 0;
                   continue;
        case 0x08: reg = hak_uleb(&p, end); if (reg == 6) st->rbp_off = 0; continue;   /* same value */
        case 0x09: reg = hak_uleb(&p, end); (void)hak_uleb(&p, end);      /* register */
                   if (reg == 6 || reg == 16) return false;
                   continue;
        case 0x0a: if (depth == 4) return false; saved[depth++] = *st; continue;
        case 0x0b: if (depth == 0) return false; *st = saved[--depth]; continue;
        case 0x0c: st->cfa_reg = (uint8_t)hak_uleb(&p, end); st->cfa_off = (int64_t)hak_uleb(&p, end); continue;
        case 0x0d: st->cfa_reg = (uint8_t)hak_uleb(&p, end); continue;
        case 0x0e: st->cfa_off = (int64_t)hak_uleb(&p, end); continue;
        case 0x10: reg = hak_uleb(&p, end);                               /* expression */
                   if (reg == 6 || reg == 16) return false;
                   off = (int64_t)hak_uleb(&p, end);
                   if (off < 0 || off > end - p) return false;
                   p += off;
                   continue;
        case 0x11: reg = hak_uleb(&p, end); off = hak_sleb(&p, end) * data_align; goto offset;
        case 0x12: st->cfa_reg = (uint8_t)hak_uleb(&p, end); st->cfa_off = hak_sleb(&p, end) * data_align; continue;
        case 0x13: st->cfa_off = hak_sleb(&p, end) * data_align; continue;
        case 0x14: case 0x15:                                             /* val_offset */
                   reg = hak_uleb(&p, end); (void)hak_uleb(&p, end);
                   if (reg == 6 || reg == 16) return false;
                   continue;
        case 0x2e: (void)hak_uleb(&p, end); continue;                     /* GNU_args_size */
        case 0x2f: reg = hak_uleb(&p, end); off = -(int64_t)hak_uleb(&p, end) * data_align; goto offset;
        default: return false;   /* set_loc, def_cfa_expression, val_expression, vendor ops */
        }
    advance:
        if (*loc + delta * code_align > pc) return true;   /* the row that holds pc */
        *loc += delta * code_align;
        continue;
    offset:
        if (reg == 6) st->rbp_off = off;
        else if (reg == 16) { st->ra_off = off; st->ra_undef = false; }
        continue;
    restore:
        if (!init) return false;   /* (no restore in a CIE's own program) */
        if (reg == 6) st->rbp_off = init->rbp_off;
        else if (reg == 16) { st->ra_off = init->ra_off; st->ra_undef = init->ra_undef; }
        continue;
    }
    return true;
}

/* The rule at pc (packed as above) from its FDE, whose function starts at
 * func; 0: not modelled, or pc past the function's end. */
static uint64_t hak_rule_compute(uintptr_t pc, const uint8_t *fde, uintptr_t func) {
    uint32_t flen, cie_off;
    memcpy(&flen, fde, 4);
    memcpy(&cie_off, fde + 4, 4);
    if (flen == 0 || flen == 0xffffffffu || cie_off == 0) return 0;
    const uint8_t *fde_end = fde + 4 + flen, *cie = fde + 4 - cie_off;
    uint32_t clen;
    memcpy(&clen, cie, 4);
    if (clen == 0 || clen == 0xffffffffu) return 0;
    const uint8_t *p = cie + 8, *cie_end = cie + 4 + clen;
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    while (p < cie_end && *p) p++;
    if (p >= cie_end) return 0;
    p++;
    uint64_t code_align = hak_uleb(&p, cie_end);
    int64_t data_align = hak_sleb(&p, cie_end);
    uint64_t ra_reg = version == 1 ? *p++ : hak_uleb(&p, cie_end);
    if (ra_reg != 16) return 0;
    uint8_t fde_enc = 0;   /* DW_EH_PE_absptr */
    bool has_z = aug[0] == 'z';
    if (has_z) {
        uint64_t alen = hak_uleb(&p, cie_end);
        const uint8_t *a = p;
        for (const char *c = aug + 1; *c; c++) {
            if (*c == 'R') fde_enc = *a++;
            else if (*c == 'L') a++;
            else if (*c == 'P') { uint8_t e = *a++; unsigned n = hak_enc_size(e); if (!n) return 0; a += n; }
            else return 0;   /* 'S' (a signal frame) and anything unknown */
        }
        p += alen;
    } else if (aug[0]) return 0;
    unsigned n = hak_enc_size(fde_enc);
    if (!n) return 0;
    uint64_t range = 0;   /* pc_range: n bytes, little-endian */
    memcpy(&range, fde + 8 + n, n);
    if (pc - func >= range) return 0;   /* in no function: past the last FDE's */
    hak_cfi_t init = { 0, 0, 0, 0, false };
    uintptr_t loc = func;
    if (!hak_cfi_run(p, cie_end, &loc, UINTPTR_MAX, code_align, data_align, &init, NULL)) return 0;
    const uint8_t *q = fde + 8 + 2 * n;   /* past pc_begin and pc_range */
    if (has_z) { uint64_t alen = hak_uleb(&q, fde_end); q += alen; }
    hak_cfi_t st = init;
    loc = func;
    if (!hak_cfi_run(q, fde_end, &loc, pc, code_align, data_align, &st, &init)) return 0;
    uint64_t rule = pc & HAK_RULE_IP;
    if (pc != rule) return 0;
    if (st.ra_undef) return rule;            /* the outermost frame: offset 0 */
    if (st.ra_off != -8 || (st.cfa_reg != 7 && st.cfa_reg != 6)) return 0;
    if (st.cfa_off < 8 || st.cfa_off % 8 || st.cfa_off / 8 > 4095) return 0;
    if (st.rbp_off > 0 || st.rbp_off % 8 || -st.rbp_off / 8 > 15) return 0;
    return rule | (st.cfa_reg == 6 ? HAK_RULE_RBP : 0) | (uint64_t)(st.cfa_off / 8) << 48 |
           (uint64_t)(-st.rbp_off / 8) << 60;
}

/* ---- the FDE of an address, without libgcc and without a lock ----
 *
 * The object from _dl_find_object (hak_obj_find), the FDE from the object's
 * search table: entry `hint` if it is pc's (the one found last time for
 * this address: hak_rule_hints), else a binary search.  Also the entry's
 * index and the function's start. */
static const uint8_t *hak_fde_find(const hak_obj_t *o, uintptr_t pc, uint32_t hint, uint32_t *at,
                                   uintptr_t *func) {
    const uint8_t *t = o->table;
    uintptr_t base = (uintptr_t)o->hdr;
    int32_t loc, off;
    size_t i = hint;
    if (!o->count) return NULL;
    if (i < o->count) {
        memcpy(&loc, t + 8 * i, 4);
        if (base + (uintptr_t)(intptr_t)loc <= pc) {
            if (i + 1 == o->count) goto found;
            memcpy(&loc, t + 8 * i + 8, 4);
            if (base + (uintptr_t)(intptr_t)loc > pc) goto found;
        }
    }
    size_t lo = 0, hi = o->count;   /* the last entry at or below pc */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        memcpy(&loc, t + 8 * mid, 4);
        if (base + (uintptr_t)(intptr_t)loc <= pc) lo = mid;
        else hi = mid;
    }
    i = lo;
found:
    memcpy(&loc, t + 8 * i, 4);
    memcpy(&off, t + 8 * i + 4, 4);
    *func = base + (uintptr_t)(intptr_t)loc;
    *at = (uint32_t)i;
    if (*func > pc) return NULL;   /* before the first function */
    return o->hdr + off;
}

static inline uint64_t hak_mix(uint64_t h, uint64_t w) {
    h ^= w * 0x87c37b91114253d5ull;
    return ((h << 31) | (h >> 33)) * 0x4cf5ad432745937full;
}
static inline __attribute__((always_inline)) uint64_t hak_sum_bytes(uint64_t h, const uint8_t *p, size_t n) {
    uint64_t a, b;
    for (; n >= 16; p += 16, n -= 16) {
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        h = hak_mix(hak_mix(h, a), b);
    }
    if (n >= 8) {
        memcpy(&a, p, 8);
        h = hak_mix(h, a);
        p += 8;
        n -= 8;
    }
    if (!n) return h;   /* (entries are padded to 8 bytes: usually no tail) */
    a = 0;
    for (size_t k = 0; k < n; k++) a |= (uint64_t)p[k] << (8 * k);
    return hak_mix(h, a);
}

/* A checksum of all a rule is computed from: the FDE and its CIE, their
 * bytes and addresses, and the function's start; 0: an FDE this walk does
 * not read.  The CIE's part is kept in the object's entry for the next
 * frame of the walk (an object usually has one or two CIEs). */
static uint64_t hak_fde_sum(hak_obj_t *o, const uint8_t *fde, uintptr_t func) {
    uint32_t flen, cie_off, clen;
    memcpy(&flen, fde, 4);
    memcpy(&cie_off, fde + 4, 4);
    if (flen < 8 || flen > 65536 || cie_off == 0) return 0;
    const uint8_t *cie = fde + 4 - cie_off;
    if (cie != o->cie) {
        memcpy(&clen, cie, 4);
        if (clen < 8 || clen > 65536) return 0;
        o->cie_sum = hak_sum_bytes((uintptr_t)cie, cie, 4 + (size_t)clen);
        o->cie = cie;
    }
    uint64_t h = hak_mix(hak_mix(o->cie_sum, (uintptr_t)fde), func);
    return hak_sum_bytes(h, fde, 4 + (size_t)flen);
}

/* ---- the rules of unloaded code ----
 *
 * A rule holds as long as the code at its address does.  That code changes
 * only when its object is unloaded (dlclose; a new object is mapped only
 * where none is), and then another object may be loaded at the same
 * address (the kernel hands out the freed range first): a rule cached for
 * the old code would walk the new code's frames with the old frame size,
 * and read a wrong return address (seen: every sample taken in the
 * reloaded object lost its caller; test profile.reload loads two builds of
 * one plug-in that differ only in a frame's size, at the same address --
 * with their link maps at the same address too).
 *
 * The walk used to compare the loader's count of unloads (dlpi_subs) with
 * the count the table was built under, and emptied the table when it moved
 * -- but no counter of the loader's can be read without its lock:
 * dl_iterate_phdr takes its write lock, inside malloc (issue 36, above).
 * _dl_find_object tells the object at an address, lock-free, but not
 * whether it is the one a rule was computed for: a reloaded object can get
 * the same range, the same link map and the same .eh_frame_hdr address.
 * So:
 *  - The objects that are never unloaded (hak_fixed: the program, libc,
 *    the dynamic loader, hakmem) keep their rules for good, as before: a
 *    frame there is a range check, a table lookup and two loads -- nearly
 *    every frame of most programs' samples.
 *  - Any other object's rule is sealed with a checksum of the FDE and CIE
 *    it was computed from (hak_fde_sum: their bytes, their addresses, the
 *    function's start), and a walk uses it only if the FDE that the object
 *    at that address has now gives the same checksum: the code's CFI is
 *    what changes with it.  Such a frame pays the FDE's lookup
 *    (_dl_find_object once per object met, the table entry cached with the
 *    rule, hak_rule_hints, else a binary search) and the checksum of some
 *    40 to 100 bytes; the CFI programs still run once per address.
 *
 * The seal is a second word beside the rule, hak_rule_seal(checksum, rule),
 * each written with one relaxed atomic store: a racing reader may see a
 * rule with the seal of another writer, and takes it only if that seal is
 * the one of this rule and of the FDE it looked up now -- so of a rule
 * computed from those same bytes (up to a 64-bit checksum's collision).
 * An object cannot be unloaded during a walk through its frames: its code
 * is on the walking thread's stack. */
static _Atomic uint64_t hak_rule_seals[HAK_RULES];

static _Atomic uint32_t hak_rule_hints[HAK_RULES];   /* the FDE's index in its table: a hint */

static uint64_t hak_rule_seal(uint64_t sum, uint64_t rule) {
    uint64_t h = hak_mix(sum, rule);
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

/* hak_rule's part beyond an object never unloaded and its cached rule r
 * (slot i): the FDE's lookup, the seal, the computation. */
__attribute__((noinline)) static uint64_t hak_rule_sealed(uintptr_t pc, hak_obj_t *o, size_t i, uint64_t r) {
    bool cached = r != 0 && (r & HAK_RULE_IP) == pc;
    uint32_t at;
    uintptr_t func;
    const uint8_t *fde = hak_fde_find(o, pc, atomic_load_explicit(&hak_rule_hints[i], memory_order_relaxed),
                                      &at, &func);
    if (!fde) return 0;
    uint64_t sum = 0;
    if (!o->fixed) {
        sum = hak_fde_sum(o, fde, func);
        if (!sum) return 0;
        if (hak_likely(cached && atomic_load_explicit(&hak_rule_seals[i], memory_order_relaxed) ==
                                 hak_rule_seal(sum, r))) return r;
    }
    r = hak_rule_compute(pc, fde, func);
    if (r) {
        atomic_store_explicit(&hak_rules[i], r, memory_order_relaxed);
        atomic_store_explicit(&hak_rule_seals[i], hak_rule_seal(sum, r), memory_order_relaxed);
        atomic_store_explicit(&hak_rule_hints[i], at, memory_order_relaxed);
    }
    return r;
}

/* The rule at pc, in object o; 0: not modelled. */
static inline uint64_t hak_rule(uintptr_t pc, hak_obj_t *o) {
    size_t i = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 52) & (HAK_RULES - 1);
    uint64_t r = atomic_load_explicit(&hak_rules[i], memory_order_relaxed);
    if (hak_likely(r != 0 && (r & HAK_RULE_IP) == pc && o->fixed)) return r;   /* never unloaded: for good */
    return hak_rule_sealed(pc, o, i, r);
}

/* The walk from ip, sp and bp (ip an exact address, the next ones return
 * addresses), the leading frames in [lo, hi) (hakmem's hook functions) left
 * out.  A frame this walk does not model ends it: with partial (a report),
 * the frames walked so far; else -1 if the caller may take libgcc's walk
 * instead (hak_gcc_may_walk), else the frames walked so far. */
__attribute__((always_inline)) static inline int hak_unwind_from(void **frames, unsigned max, uintptr_t lo,
                                                                  uintptr_t hi, uintptr_t ip, uintptr_t sp,
                                                                  uintptr_t bp, bool partial) {
    unsigned n = 0;
    hak_obj_t found, *obj = &found;   /* the last frame's object */
    found.lo = found.hi = 0;
    for (unsigned step = 0; step < 256 && n < max; step++) {
        uintptr_t pc = step == 0 ? ip : ip - 1;   /* a return address: its call's rule */
        if (pc - obj->lo >= obj->hi - obj->lo) {
            unsigned k = 0;
            while (k < hak_nfixed && pc - hak_fixed[k].lo >= hak_fixed[k].hi - hak_fixed[k].lo) k++;
            if (k < hak_nfixed) obj = &hak_fixed[k];
            else if (!hak_obj_find(pc, obj = &found)) goto stop;
        }
        uint64_t r = hak_rule(pc, obj);
        if (!r) goto stop;
        uint64_t off = (r >> 48) & 4095, k = r >> 60;
        if (off == 0) break;                               /* the outermost frame */
        uintptr_t cfa = ((r & HAK_RULE_RBP) ? bp : sp) + off * 8;
        if (cfa <= sp || cfa - sp > ((uintptr_t)1 << 24)) goto stop;   /* not a plausible stack */
        ip = ((const uintptr_t *)cfa)[-1];
        if (k) bp = *(const uintptr_t *)(cfa - 8 * k);
        sp = cfa;
        if (ip == 0) break;
        if (n == 0 && ip >= lo && ip < hi) continue;      /* hakmem's own frames */
        frames[n++] = (void *)ip;
    }
    return (int)n;
stop:
    if (partial) return (int)n;
    return hak_gcc_may_walk(n ? (uintptr_t)frames[0] : ip) ? -1 : (int)n;
}

/* The return addresses of the calling stack, the leading ones in [lo, hi)
 * (hakmem's hook functions) left out.  A frame this walk does not model
 * ends it: -1 if the caller may take libgcc's walk instead
 * (hak_gcc_may_walk), else the frames walked so far. */
__attribute__((section("hak_prof_text"), noinline))
int hak_unwind(void **frames, unsigned max, uintptr_t lo, uintptr_t hi) {
    uintptr_t ip, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
    return hak_unwind_from(frames, max, lo, hi, ip, sp, bp, false);
}

/* A report's stack (hak_report.c): from pc, sp and bp (a signal's context),
 * pc first; with pc 0, the caller's, its return address first.  The same
 * rules and the same lock-free lookup as hak_unwind (_dl_find_object,
 * async-signal-safe), never libgcc's walk and never dl_iterate_phdr: a
 * report may come from inside an allocation or a signal handler.  The
 * frames walked until one the rules do not model (a partial stack); a
 * frame misread on a corrupt stack faults, and the report catches that
 * (hak_crash_walk_jmp). */
__attribute__((noinline))
int hak_unwind_regs(void **frames, unsigned max, uintptr_t pc, uintptr_t sp, uintptr_t bp) {
    if (!pc) {
        uintptr_t ip;
        __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
        return hak_unwind_from(frames, max, 0, 0, ip, sp, bp, true);
    }
    if (max == 0) return 0;
    frames[0] = (void *)pc;
    return 1 + hak_unwind_from(frames + 1, max - 1, 0, 0, pc, sp, bp, true);
}

#else

/* libgcc's walk where it is safe (hak_unwind_load), else no stack */
int hak_unwind(void **frames, unsigned max, uintptr_t lo, uintptr_t hi) { return hak_gcc_backtrace ? -1 : 0; }
/* a report's stack: the faulting pc alone (libgcc's walk is not for
 * reports: it may take locks) */
int hak_unwind_regs(void **frames, unsigned max, uintptr_t pc, uintptr_t sp, uintptr_t bp) {
    (void)sp; (void)bp;
    if (!pc || max == 0) return 0;
    frames[0] = (void *)pc;
    return 1;
}

#endif
