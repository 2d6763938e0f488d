/* pattern.h -- fill / verify helpers and hakmem detection shared by the C tests.
 *
 * pat_fill writes a pattern derived from a 64-bit seed (callers derive the
 * seed from the block's address, size and owner); pat_check returns the
 * offset of the first byte that differs, or PAT_OK.  Word-at-a-time so
 * multi-MiB blocks stay cheap (also under valgrind).
 */
#ifndef HAK_TEST_PATTERN_H
#define HAK_TEST_PATTERN_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PAT_OK ((size_t)-1)

static inline uint64_t pat_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t pat_seed(const void *p, size_t size, uint64_t owner)
{
    return pat_mix((uint64_t)(uintptr_t)p ^ pat_mix(size + 0x9e3779b97f4a7c15ULL * (owner + 1)));
}

static inline uint64_t pat_word(uint64_t seed, size_t i)
{
    return (seed ^ (uint64_t)i) * 0x9e3779b97f4a7c15ULL + (uint64_t)i;
}

static inline void pat_fill(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = (unsigned char *)p;
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = pat_word(seed, i);
        __builtin_memcpy(b + i * 8, &w, 8);
    }
    if (n % 8) {
        uint64_t w = pat_word(seed, words);
        __builtin_memcpy(b + words * 8, &w, n % 8);
    }
}

static inline size_t pat_check(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = pat_word(seed, i), got;
        __builtin_memcpy(&got, b + i * 8, 8);
        if (got != w) {
            for (size_t k = 0; k < 8; k++)
                if (((got >> (8 * k)) & 0xff) != ((w >> (8 * k)) & 0xff))
                    return i * 8 + k;
        }
    }
    if (n % 8) {
        uint64_t w = pat_word(seed, words);
        for (size_t k = 0; k < n % 8; k++)
            if (b[words * 8 + k] != ((w >> (8 * k)) & 0xff))
                return words * 8 + k;
    }
    return PAT_OK;
}

/* offset of the first non-zero byte, or PAT_OK */
static inline size_t pat_check_zero(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        __builtin_memcpy(&w, b + i, 8);
        if (w)
            break;
    }
    for (; i < n; i++)
        if (b[i])
            return i;
    return PAT_OK;
}

/* ---- is hakmem the allocator? ----
 * Prefix builds (tests/hak_prefix.h) link hakmem_owns directly.  Otherwise
 * hakmem_owns is looked up at run time: a weak reference (static link) or
 * dlsym (LD_PRELOAD).  NULL means the allocator is not hakmem. */
typedef int (*hak_owns_fn_t)(const void *);
typedef const char *(*hak_str_fn_t)(void);

#ifdef HAK_PREFIX_BUILD
static inline hak_owns_fn_t hak_find_owns(void) { return hakmem_owns; }
static inline void *hak_find_symbol(const char *name)
{
    if (!strcmp(name, "hakmem_build_variant"))
        return (void *)hakmem_build_variant;
    if (!strcmp(name, "hakmem_version"))
        return (void *)hakmem_version;
    if (!strcmp(name, "free_sized"))
        return (void *)free_sized;          /* -> hakmem_free_sized */
    if (!strcmp(name, "free_aligned_sized"))
        return (void *)free_aligned_sized;  /* -> hakmem_free_aligned_sized */
    return NULL;
}
#else
#ifdef __cplusplus
extern "C" {
#endif
extern int hakmem_owns(const void *) __attribute__((weak));
extern const char *hakmem_build_variant(void) __attribute__((weak));
extern const char *hakmem_version(void) __attribute__((weak));
#ifdef __cplusplus
}
#endif
static inline void *hak_find_symbol(const char *name)
{
    void *s = NULL;
    if (!strcmp(name, "hakmem_owns"))
        s = (void *)hakmem_owns;
    else if (!strcmp(name, "hakmem_build_variant"))
        s = (void *)hakmem_build_variant;
    else if (!strcmp(name, "hakmem_version"))
        s = (void *)hakmem_version;
    if (!s)
        s = dlsym(RTLD_DEFAULT, name);
    return s;
}
static inline hak_owns_fn_t hak_find_owns(void)
{
    return (hak_owns_fn_t)hak_find_symbol("hakmem_owns");
}
#endif

#endif /* HAK_TEST_PATTERN_H */
