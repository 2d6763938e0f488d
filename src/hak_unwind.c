/* hak_unwind.c -- the stack of a sampled allocation (heap profiles,
 * hak_profile.c), fast: docs/profiling.md, "Stacks".
 *
 * libgcc's _Unwind_Backtrace finds each frame's FDE and interprets its CFI
 * program every time: about 1,500 instructions a frame, 11,000 a sample on
 * random_large (callgrind), which made the unwinding nearly all of what a
 * sample costs.  On x86-64 the rule a frame's CFI gives at one address is
 * almost always "CFA = rsp or rbp + offset; return address at CFA - 8; rbp
 * unchanged or saved at CFA - 8k".  hak_unwind computes that rule once per
 * address (the FDE from libgcc's _Unwind_Find_FDE, the CFI program
 * interpreted here) and keeps it in a fixed table of 64-bit words, one per
 * address, written with one atomic store (no lock: a racing writer writes
 * the same word); a frame then costs a table lookup and two loads.  Anything
 * else -- an expression, a signal frame, a frame larger than 32 KiB, a
 * register rule this walk does not model -- makes hak_unwind fail, and the
 * caller takes libgcc's walk for that sample.  Other architectures always
 * take libgcc's walk.  Nothing here allocates but hak_unwind_load.
 * The table is keyed by address, so it is emptied when an object is unloaded
 * (hak_rules_check, below): another one loaded at its address has other
 * code there (test profile.reload).
 *
 * libgcc's functions are weak references, not a link dependency: a program
 * that takes no heap profile does not map libgcc_s (96 KiB of RSS in a C
 * program that needs nothing else of it).  With profiles on, the
 * constructor (hak_profile.c) calls hak_unwind_load: the functions linked
 * in or already loaded (C++), else dlopen("libgcc_s.so.1") (hak_dlopen.c).
 * A fully static program gets no heap profile, and a warning. */
#include "hak_internal.h"
#include <link.h>

struct dwarf_eh_bases { void *tbase, *dbase, *func; };
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);   /* libgcc */
#pragma weak _Unwind_Find_FDE
#pragma weak _Unwind_Backtrace
#pragma weak _Unwind_GetIP

_Unwind_Reason_Code (*hak_gcc_backtrace)(_Unwind_Trace_Fn, void *);
_Unwind_Ptr (*hak_gcc_get_ip)(struct _Unwind_Context *);
static const void *(*hak_gcc_find_fde)(void *pc, struct dwarf_eh_bases *bases);

/* hak_dlopen.c, in the shared library only */
const char *hak_dlopen_unwinder(void **backtrace, void **get_ip, void **find_fde);
#pragma weak hak_dlopen_unwinder

/* The dynamic section: absent (NULL) in a fully static program, where
 * libgcc's unwinder finds no unwind tables of the program (no
 * PT_GNU_EH_FRAME) and aborts on its first walk. */
extern ElfW(Dyn) _DYNAMIC[] __attribute__((weak));   /* (link.h declares it without weak) */

const char *hak_unwind_load(void) {
    if (!_DYNAMIC) return "not available in a fully static program";
    void *bt = (void *)_Unwind_Backtrace, *ip = (void *)_Unwind_GetIP, *fde = (void *)_Unwind_Find_FDE;
    if (!bt || !ip || !fde) {
        if (!hak_dlopen_unwinder) return "libhakmem.a linked without libgcc's unwinder";
        const char *why = hak_dlopen_unwinder(&bt, &ip, &fde);
        if (why) return why;
    }
    hak_gcc_find_fde = (const void *(*)(void *, struct dwarf_eh_bases *))fde;
    hak_gcc_get_ip = (_Unwind_Ptr (*)(struct _Unwind_Context *))ip;
    __atomic_store_n(&hak_gcc_backtrace, (_Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void *))bt, __ATOMIC_RELEASE);
    return NULL;
}

#if defined(__x86_64__)

/* A rule: bits 0..46 the address, bit 47 CFA from rbp (else rsp), bits
 * 48..59 the CFA offset / 8 (0: the outermost frame, no return address),
 * bits 60..63 k: rbp saved at CFA - 8k (0: unchanged). */
#define HAK_RULE_IP     (((uint64_t)1 << 47) - 1)
#define HAK_RULE_RBP    ((uint64_t)1 << 47)
#define HAK_RULES       4096           /* 32 KiB */
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
/* bytes of a pointer in DW_EH_PE encoding enc (low nibble); 0: unsupported */
static unsigned hak_enc_size(uint8_t enc) {
    switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: return 8;
    case 0x03: case 0x0b: return 4;
    case 0x02: case 0x0a: return 2;
    default: return 0;
    }
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

/* The rule at pc (packed as above), or 0: not modelled. */
static uint64_t hak_rule_compute(uintptr_t pc) {
    struct dwarf_eh_bases bases;
    const uint8_t *fde = hak_gcc_find_fde ? hak_gcc_find_fde((void *)pc, &bases) : NULL;
    if (!fde) return 0;
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
    hak_cfi_t init = { 0, 0, 0, 0, false };
    uintptr_t loc = (uintptr_t)bases.func;
    if (!hak_cfi_run(p, cie_end, &loc, UINTPTR_MAX, code_align, data_align, &init, NULL)) return 0;
    unsigned n = hak_enc_size(fde_enc);
    if (!n) return 0;
    const uint8_t *q = fde + 8 + 2 * n;   /* past pc_begin and pc_range */
    if (has_z) { uint64_t alen = hak_uleb(&q, fde_end); q += alen; }
    hak_cfi_t st = init;
    loc = (uintptr_t)bases.func;
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

/* ---- invalidation: the rules of unloaded code ----
 *
 * A rule holds as long as the code at its address does.  That code changes
 * only when its object is unloaded (dlclose; a new object is mapped only where
 * none is), and then another object may be loaded at the same address (the
 * kernel hands out the freed range first): the rule cached for the old code
 * would walk the new code's frames with the old frame size, and read a
 * wrong return address (seen: every sample taken in the reloaded object
 * lost its caller).  The loader counts unloads, dlpi_subs of
 * dl_iterate_phdr (libgcc keeps its own FDE cache valid with it), so each
 * walk compares it with the count the table was built under and empties the
 * table when it moved.  Unloads are rare; the comparison costs one
 * dl_iterate_phdr visiting one object (its callback stops there: every
 * object carries the counters), on the sampled path only.
 *
 * No counter of the loader's can be read without its lock: dl_iterate_phdr
 * takes dl_load_write_lock (recursive).  Why that cannot deadlock here:
 *  - The same thread may hold it (an allocation inside dlopen or dlclose, or
 *    inside another dl_iterate_phdr's callback): it is recursive.
 *  - glibc takes its loader locks in the order dl_load_lock, dl_load_tls_lock,
 *    dl_load_write_lock; an allocation under either of the first two (dlopen
 *    allocates under both, pthread_create's TLS setup under the second) then
 *    takes the third, the same order.
 *  - A thread holding it waits for nothing of hakmem's that a sampling
 *    thread holds: a walk runs before its sample takes any lock of hakmem's
 *    (hak_profile_malloc takes hak_prof_lock only to insert, after the walk),
 *    and no lock of hakmem's is held across a malloc that could be sampled.
 *    dlclose frees under the write lock; free never walks.
 * What remains is the program's own: a dl_iterate_phdr callback that waits
 * for a lock of the program's while another thread allocates holding that
 * lock -- the hazard every walk through libgcc's dl_iterate_phdr fallback
 * (a C++ exception on a glibc without _dl_find_object) has too. */
static _Atomic unsigned long long hak_rules_subs;   /* unloads when the table was last emptied */

static int hak_subs_step(struct dl_phdr_info *info, size_t size, void *arg) {
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long *)arg = info->dlpi_subs;
    return 1;   /* one object is enough */
}

static void hak_rules_check(void) {
    unsigned long long subs = 0;
    dl_iterate_phdr(hak_subs_step, &subs);
    if (hak_likely(subs == atomic_load_explicit(&hak_rules_subs, memory_order_acquire))) return;
    /* empty first, then publish: a walk that sees the new count sees the
     * empty table (racing walks that saw the old count empty it too) */
    for (size_t i = 0; i < HAK_RULES; i++) atomic_store_explicit(&hak_rules[i], 0, memory_order_relaxed);
    atomic_store_explicit(&hak_rules_subs, subs, memory_order_release);
}

static uint64_t hak_rule(uintptr_t pc) {
    size_t i = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 52) & (HAK_RULES - 1);
    uint64_t r = atomic_load_explicit(&hak_rules[i], memory_order_relaxed);
    if (hak_likely(r != 0 && (r & HAK_RULE_IP) == pc)) return r;
    r = hak_rule_compute(pc);
    if (r) atomic_store_explicit(&hak_rules[i], r, memory_order_relaxed);
    return r;
}

/* The return addresses of the calling stack, the leading ones in [lo, hi)
 * (hakmem's hook functions) left out; -1: a frame this walk does not model
 * (the caller then takes libgcc's walk). */
__attribute__((section("hak_prof_text"), noinline))
int hak_unwind(void **frames, unsigned max, uintptr_t lo, uintptr_t hi) {
    hak_rules_check();
    uintptr_t ip, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
    unsigned n = 0;
    for (unsigned step = 0; step < 256 && n < max; step++) {
        uint64_t r = hak_rule(step == 0 ? ip : ip - 1);   /* a return address: its call's rule */
        if (!r) return -1;
        uint64_t off = (r >> 48) & 4095, k = r >> 60;
        if (off == 0) break;                               /* the outermost frame */
        uintptr_t cfa = ((r & HAK_RULE_RBP) ? bp : sp) + off * 8;
        if (cfa <= sp || cfa - sp > ((uintptr_t)1 << 24)) return -1;   /* not a plausible stack */
        ip = ((const uintptr_t *)cfa)[-1];
        if (k) bp = *(const uintptr_t *)(cfa - 8 * k);
        sp = cfa;
        if (ip == 0) break;
        if (n == 0 && ip >= lo && ip < hi) continue;      /* hakmem's own frames */
        frames[n++] = (void *)ip;
    }
    return (int)n;
}

#else

int hak_unwind(void **frames, unsigned max, uintptr_t lo, uintptr_t hi) { return -1; }

#endif
