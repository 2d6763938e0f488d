/* fuzz_api.c -- the entry points hakmem's fuzzer calls (fuzz_internal.h).
 * In the prefix builds (tests/hak_prefix.h is force-included) malloc & co
 * are macros for the hakmem_* names and hakmem is linked in.  In the plain
 * build they are the standard names and hakmem's extras are looked up with
 * dlsym (present when hakmem is preloaded). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>

#include "fuzz_internal.h"

#ifdef HAK_PREFIX_BUILD
int hakmem_malloc_trim(size_t pad);
struct mallinfo2 hakmem_mallinfo2(void);
#endif

fz_api_t fz_api;

/* fallbacks: what hakmem's operators do, through the C entry points */
#define FZ_UNUSED __attribute__((unused))
static FZ_UNUSED void fb_free_sized(void *p, size_t n) { (void)n; free(p); }
static FZ_UNUSED void fb_free_aligned_sized(void *p, size_t a, size_t n) { (void)a; (void)n; free(p); }
static FZ_UNUSED void *fb_new(size_t n) { return malloc(n); }
static FZ_UNUSED void *fb_new_nt(size_t n, const void *t) { (void)t; return malloc(n); }
static FZ_UNUSED void *fb_new_al(size_t n, size_t a) { return memalign(a, n); }
static FZ_UNUSED void *fb_new_al_nt(size_t n, size_t a, const void *t) { (void)t; return memalign(a, n); }
static FZ_UNUSED void fb_del(void *p) { free(p); }
static FZ_UNUSED void fb_del_sized(void *p, size_t n) { fz_api.free_sized(p, n); }
static FZ_UNUSED void fb_del_al(void *p, size_t a) { (void)a; free(p); }
static FZ_UNUSED void fb_del_sized_al(void *p, size_t n, size_t a) { fz_api.free_aligned_sized(p, a, n); }
static FZ_UNUSED int fb_collect(void) { return malloc_trim(0); }

#ifndef HAK_PREFIX_BUILD
static void *fz_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }
#define FZ_SYM(field, name, fallback) \
    do { void *s_ = fz_sym(name); fz_api.field = s_ ? (__typeof__(fz_api.field))s_ : (fallback); } while (0)
#endif

void fz_resolve(void) {
#ifdef HAK_PREFIX_BUILD
    fz_api.owns = hakmem_owns;
    fz_api.collect = hakmem_collect;
    fz_api.stats_get = hakmem_stats_get;
    fz_api.trim = hakmem_malloc_trim;
    fz_api.mallinfo2 = hakmem_mallinfo2;
    fz_api.free_sized = hakmem_free_sized;
    fz_api.free_aligned_sized = hakmem_free_aligned_sized;
    for (int i = 0; i < 2; i++) {
        fz_api.op_new[i] = fb_new; fz_api.op_new_nt[i] = fb_new_nt;
        fz_api.op_new_al[i] = fb_new_al; fz_api.op_new_al_nt[i] = fb_new_al_nt;
        fz_api.op_del[i] = fb_del; fz_api.op_del_sized[i] = fb_del_sized;
        fz_api.op_del_al[i] = fb_del_al; fz_api.op_del_sized_al[i] = fb_del_sized_al;
    }
#else
    fz_api.owns = (int (*)(const void *))fz_sym("hakmem_owns");
    fz_api.stats_get = (int (*)(hakmem_stats_t *, size_t))fz_sym("hakmem_stats_get");
    FZ_SYM(collect, "hakmem_collect", fb_collect);
    FZ_SYM(trim, "malloc_trim", malloc_trim);
    fz_api.mallinfo2 = (struct mallinfo2 (*)(void))fz_sym("mallinfo2");
    FZ_SYM(free_sized, "free_sized", fb_free_sized);
    FZ_SYM(free_aligned_sized, "free_aligned_sized", fb_free_aligned_sized);
    FZ_SYM(op_new[0], "_Znwm", fb_new);
    FZ_SYM(op_new[1], "_Znam", fb_new);
    FZ_SYM(op_new_nt[0], "_ZnwmRKSt9nothrow_t", fb_new_nt);
    FZ_SYM(op_new_nt[1], "_ZnamRKSt9nothrow_t", fb_new_nt);
    FZ_SYM(op_new_al[0], "_ZnwmSt11align_val_t", fb_new_al);
    FZ_SYM(op_new_al[1], "_ZnamSt11align_val_t", fb_new_al);
    FZ_SYM(op_new_al_nt[0], "_ZnwmSt11align_val_tRKSt9nothrow_t", fb_new_al_nt);
    FZ_SYM(op_new_al_nt[1], "_ZnamSt11align_val_tRKSt9nothrow_t", fb_new_al_nt);
    FZ_SYM(op_del[0], "_ZdlPv", fb_del);
    FZ_SYM(op_del[1], "_ZdaPv", fb_del);
    FZ_SYM(op_del_sized[0], "_ZdlPvm", fb_del_sized);
    FZ_SYM(op_del_sized[1], "_ZdaPvm", fb_del_sized);
    FZ_SYM(op_del_al[0], "_ZdlPvSt11align_val_t", fb_del_al);
    FZ_SYM(op_del_al[1], "_ZdaPvSt11align_val_t", fb_del_al);
    FZ_SYM(op_del_sized_al[0], "_ZdlPvmSt11align_val_t", fb_del_sized_al);
    FZ_SYM(op_del_sized_al[1], "_ZdaPvmSt11align_val_t", fb_del_sized_al);
    fz_api.cxx = fz_api.op_new[0] != fb_new;
#endif
}

int fz_hakmem_serves(void) {
    if (!fz_api.owns) return 0;
    void *p = malloc(100);
    int r = p && fz_api.owns(p);
    free(p);
    return r;
}
