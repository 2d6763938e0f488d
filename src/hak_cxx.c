/* hak_cxx.c -- C++ operator new and delete in every form, served directly by
 * hakmem's fast paths (no detour through malloc).  Written in C with the
 * Itanium ABI's mangled names, so libhakmem needs no libstdc++.  On failure,
 * new calls the installed new_handler and retries, or throws std::bad_alloc
 * through libstdc++ (looked up weakly: only a C++ program calls operator new,
 * and a C++ program has libstdc++ loaded). */
#include "hak_hardened.h"
#include <stdlib.h>

#ifndef HAK_NO_OVERRIDE
typedef void (*hak_new_handler_t)(void);
extern hak_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* Returns NULL only for nothrow forms. */
static HAK_NOINLINE void *hak_new_fail(size_t size, size_t align, bool nothrow) {
    for (;;) {
        hak_new_handler_t h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
        if (!h) {
            if (nothrow) return NULL;
            if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
            hak_message("hakmem: operator new: out of memory for %zu bytes; aborting\n", size);
            abort();
        }
        h();
        void *p = HAK_HARDENED_ENABLED ?
                  hak_hardened_aligned(size, align > HAK_MIN_ALIGN ? align : HAK_MIN_ALIGN, false, HAK_HARDENED_BY_NEW) :
                  align > HAK_MIN_ALIGN ? hak_malloc_aligned(size, align, false) : hak_malloc_inline(size);
        if (p) return p;
    }
}

/* sampled for heap profiles as malloc is (HAK_SAMPLED; the aligned forms in
 * hak_malloc_aligned) */
static inline void *hak_new(size_t size, bool nothrow) {
    void *p = HAK_HARDENED_ENABLED ? hak_hardened_malloc(size, HAK_HARDENED_BY_NEW) : hak_malloc_sampled(size);
    if (hak_unlikely(!p)) return hak_new_fail(size, HAK_MIN_ALIGN, nothrow);
    return p;
}
static inline void *hak_new_aligned(size_t size, size_t align, bool nothrow) {
    void *p = HAK_HARDENED_ENABLED ? hak_hardened_aligned(size, align, false, HAK_HARDENED_BY_NEW) :
              hak_malloc_aligned(size, align, false);
    if (hak_unlikely(!p)) return hak_new_fail(size, align, nothrow);
    return p;
}

#define HAK_CXX HAK_EXPORT
/* new */
HAK_PROF_ENTRY HAK_CXX void *_Znwm(size_t n) { return hak_new(n, false); }
HAK_PROF_ENTRY HAK_CXX void *_Znam(size_t n) { return hak_new(n, false); }
HAK_PROF_ENTRY HAK_CXX void *_ZnwmRKSt9nothrow_t(size_t n, const void *t) { (void)t; return hak_new(n, true); }
HAK_PROF_ENTRY HAK_CXX void *_ZnamRKSt9nothrow_t(size_t n, const void *t) { (void)t; return hak_new(n, true); }
HAK_PROF_ENTRY HAK_CXX void *_ZnwmSt11align_val_t(size_t n, size_t a) { return hak_new_aligned(n, a, false); }
HAK_PROF_ENTRY HAK_CXX void *_ZnamSt11align_val_t(size_t n, size_t a) { return hak_new_aligned(n, a, false); }
HAK_PROF_ENTRY HAK_CXX void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t) { (void)t; return hak_new_aligned(n, a, true); }
HAK_PROF_ENTRY HAK_CXX void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t) { (void)t; return hak_new_aligned(n, a, true); }
/* delete (the hardened build: the block must come from new, a sized
 * delete's size must be the size allocated) */
#if HAK_HARDENED_ENABLED
#define hak_delete(p) hak_hardened_free(p, "operator delete()", false, 0, true)
#define hak_delete_sized(p, n) hak_hardened_free(p, "operator delete()", true, n, true)
#else
#define hak_delete(p) hak_free_inline(p)
#define hak_delete_sized(p, n) hak_free_sized_inline(p, n)
#endif
HAK_CXX void _ZdlPv(void *p) { hak_delete(p); }
HAK_CXX void _ZdaPv(void *p) { hak_delete(p); }
/* sized forms: the size is checked against the block (misuse: a delete
 * through the wrong type, new[] freed by a sized delete) */
static inline void hak_delete_sized_aligned(void *p, size_t n) {
    if (HAK_HARDENED_ENABLED) { hak_delete_sized(p, n); return; }
    if (hak_likely(p != NULL)) hak_check_delete_size(p, n, true);
    hak_free_inline(p);
}
HAK_CXX void _ZdlPvm(void *p, size_t n) { hak_delete_sized(p, n); }
HAK_CXX void _ZdaPvm(void *p, size_t n) { hak_delete_sized(p, n); }
HAK_CXX void _ZdlPvRKSt9nothrow_t(void *p, const void *t) { (void)t; hak_delete(p); }
HAK_CXX void _ZdaPvRKSt9nothrow_t(void *p, const void *t) { (void)t; hak_delete(p); }
HAK_CXX void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; hak_delete(p); }
HAK_CXX void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; hak_delete(p); }
HAK_CXX void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)a; hak_delete_sized_aligned(p, n); }
HAK_CXX void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)a; hak_delete_sized_aligned(p, n); }
HAK_CXX void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) { (void)a; (void)t; hak_delete(p); }
HAK_CXX void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) { (void)a; (void)t; hak_delete(p); }
#endif
