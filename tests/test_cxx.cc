// test_cxx.cc -- every form of operator new/delete plus container churn.
//
// usage: test_cxx [--expect-hakmem]
//
// stdout is a deterministic summary (suite_programs compares it between a run
// on the system allocator and one under LD_PRELOAD=libhakmem.so); problems go
// to stderr and make the exit status non-zero.  When hakmem is loaded, every
// pointer returned by an operator new form must be owned by hakmem;
// --expect-hakmem also fails the run if hakmem is not loaded at all.
// Build: -std=c++17 -fsized-deallocation -faligned-new -fno-allocation-dce.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

static int failures;
static int (*owns)(const void *);
static long owned_checked, owned_bad;
static int forms_used;

#define EXPECT(c)                                                             \
    do {                                                                      \
        if (!(c)) {                                                           \
            std::fprintf(stderr, "test_cxx: FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                       \
        }                                                                     \
    } while (0)

// keep the optimizer from eliding allocations or the writes into them
static inline void escape(const void *p) { asm volatile("" : : "r"(p) : "memory"); }

// check a block: alignment, ownership, and (raw memory only, n > 0) writability
static void got(void *p, size_t n, size_t align, const char *form)
{
    EXPECT(p != nullptr);
    if (!p)
        return;
    if ((reinterpret_cast<uintptr_t>(p) & (align - 1)) != 0) {
        std::fprintf(stderr, "test_cxx: FAIL %s returned %p, not %zu-aligned\n", form, p, align);
        failures++;
    }
    if (n)
        std::memset(p, 0xA5, n);
    escape(p);
    if (owns) {
        owned_checked++;
        if (owns(p) != 1) {
            owned_bad++;
            std::fprintf(stderr, "test_cxx: FAIL %s returned %p not owned by hakmem\n", form, p);
        }
    }
}

struct alignas(64) Line {
    unsigned char b[64];
    int v;
    Line() : v(7) { std::memset(b, 1, sizeof b); }
    ~Line() { v = 0; escape(this); }  // non-trivial: arrays carry a cookie
};

struct alignas(4096) PageObj {
    unsigned char b[100];
    PageObj() { std::memset(b, 2, sizeof b); }
    ~PageObj() { escape(this); }
};

struct Plain {
    long v[13];
    ~Plain() { escape(this); }
};

static void explicit_forms()
{
    const std::align_val_t a64{64}, a4k{4096}, a1m{1 << 20};
    for (size_t n : {1ul, 24ul, 100ul, 5000ul, 100000ul, 3ul << 20}) {
        void *p;
        p = ::operator new(n); got(p, n, 16, "new(n)"); ::operator delete(p);
        p = ::operator new(n); got(p, n, 16, "new(n)"); ::operator delete(p, n);
        p = ::operator new[](n); got(p, n, 16, "new[](n)"); ::operator delete[](p);
        p = ::operator new[](n); got(p, n, 16, "new[](n)"); ::operator delete[](p, n);
        p = ::operator new(n, std::nothrow); got(p, n, 16, "new(n, nothrow)");
        ::operator delete(p, std::nothrow);
        p = ::operator new[](n, std::nothrow); got(p, n, 16, "new[](n, nothrow)");
        ::operator delete[](p, std::nothrow);
        for (std::align_val_t a : {a64, a4k, a1m}) {
            size_t al = static_cast<size_t>(a);
            p = ::operator new(n, a); got(p, n, al, "new(n, align)"); ::operator delete(p, a);
            p = ::operator new(n, a); got(p, n, al, "new(n, align)"); ::operator delete(p, n, a);
            p = ::operator new[](n, a); got(p, n, al, "new[](n, align)"); ::operator delete[](p, a);
            p = ::operator new[](n, a); got(p, n, al, "new[](n, align)");
            ::operator delete[](p, n, a);
            p = ::operator new(n, a, std::nothrow); got(p, n, al, "new(n, align, nothrow)");
            ::operator delete(p, a, std::nothrow);
            p = ::operator new[](n, a, std::nothrow); got(p, n, al, "new[](n, align, nothrow)");
            ::operator delete[](p, a, std::nothrow);
        }
    }
    forms_used += 20;
}

static void expression_forms()
{
    int *i = new int(41); got(i, 0, alignof(int), "new int"); *i += 1;
    EXPECT(*i == 42); delete i;
    int *ia = new int[1000](); got(ia, 0, 16, "new int[]"); EXPECT(ia[999] == 0); delete[] ia;
    int *in = new (std::nothrow) int(3); got(in, 0, alignof(int), "new(nothrow) int"); EXPECT(*in == 3);
    delete in;
    Plain *pl = new Plain; got(pl, 0, 16, "new Plain"); delete pl;  // sized delete
    Plain *pla = new Plain[9]; escape(pla); delete[] pla;                    // sized delete[]
    Line *l = new Line; got(l, 0, 64, "new Line"); EXPECT(l->v == 7); delete l;         // aligned+sized
    Line *la = new Line[5];
    EXPECT((reinterpret_cast<uintptr_t>(la) & 63) == 0);
    EXPECT(la[4].v == 7);
    delete[] la;                                                             // aligned array
    Line *ln = new (std::nothrow) Line; got(ln, 0, 64, "new(nothrow) Line"); delete ln;
    Line *lna = new (std::nothrow) Line[3];
    EXPECT(lna && (reinterpret_cast<uintptr_t>(lna) & 63) == 0);
    delete[] lna;
    PageObj *po = new PageObj; got(po, 0, 4096, "new PageObj"); EXPECT(po->b[50] == 2); delete po;
    PageObj *pa = new PageObj[3];
    EXPECT((reinterpret_cast<uintptr_t>(pa) & 4095) == 0);
    EXPECT(pa[2].b[99] == 2);
    delete[] pa;
    PageObj *pn = new (std::nothrow) PageObj[2];
    EXPECT(pn && (reinterpret_cast<uintptr_t>(pn) & 4095) == 0);
    delete[] pn;
    auto up = std::make_unique<Line[]>(17);
    EXPECT((reinterpret_cast<uintptr_t>(up.get()) & 63) == 0);
    auto sp = std::make_shared<PageObj>();
    EXPECT((reinterpret_cast<uintptr_t>(sp.get()) & 4095) == 0);
    forms_used += 14;
}

static int handler_calls;
static void counting_handler()
{
    if (++handler_calls >= 2)
        std::set_new_handler(nullptr);  // next failure throws
}

static void failure_forms()
{
    volatile size_t huge = SIZE_MAX / 2;
    bool threw = false;
    try { void *p = ::operator new(huge); escape(p); ::operator delete(p); }
    catch (const std::bad_alloc &) { threw = true; }
    std::printf("new(huge) throws bad_alloc: %s\n", threw ? "yes" : "no");
    EXPECT(threw);

    threw = false;
    try { char *p = new char[huge]; escape(p); delete[] p; }
    catch (const std::bad_alloc &) { threw = true; }
    std::printf("new char[huge] throws bad_alloc: %s\n", threw ? "yes" : "no");
    EXPECT(threw);

    threw = false;
    try { void *p = ::operator new(huge, std::align_val_t{4096}); escape(p); ::operator delete(p); }
    catch (const std::bad_alloc &) { threw = true; }
    std::printf("aligned new(huge) throws bad_alloc: %s\n", threw ? "yes" : "no");
    EXPECT(threw);

    void *n1 = ::operator new(huge, std::nothrow);
    void *n2 = ::operator new[](huge, std::nothrow);
    void *n3 = ::operator new(huge, std::align_val_t{64}, std::nothrow);
    void *n4 = ::operator new[](huge, std::align_val_t{4096}, std::nothrow);
    char *n5 = new (std::nothrow) char[huge];
    std::printf("nothrow new(huge) returns nullptr: %s\n",
                !n1 && !n2 && !n3 && !n4 && !n5 ? "yes" : "no");
    EXPECT(!n1 && !n2 && !n3 && !n4 && !n5);

    // the new_handler must be called on failure, then bad_alloc once it is removed
    handler_calls = 0;
    threw = false;
    std::set_new_handler(counting_handler);
    try { void *p = ::operator new(huge); escape(p); ::operator delete(p); }
    catch (const std::bad_alloc &) { threw = true; }
    std::set_new_handler(nullptr);
    std::printf("new_handler called %d times, then bad_alloc: %s\n", handler_calls,
                threw ? "yes" : "no");
    EXPECT(handler_calls == 2 && threw);
    forms_used += 8;
}

static uint64_t fnv(const void *data, size_t n, uint64_t h = 1469598103934665603ull)
{
    const unsigned char *b = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void container_churn()
{
    uint64_t lcg = 42, h = 0;
    auto next = [&lcg]() { lcg = lcg * 6364136223846793005ull + 1442695040888963407ull; return lcg >> 33; };

    std::vector<std::vector<int>> vv;
    for (int round = 0; round < 200; round++) {
        std::vector<int> v;
        for (int i = 0; i < static_cast<int>(next() % 3000); i++)
            v.push_back(static_cast<int>(next() % 100000));
        std::sort(v.begin(), v.end());
        h = fnv(v.data(), v.size() * sizeof(int), h);
        vv.push_back(std::move(v));
        if (vv.size() > 20)
            vv.erase(vv.begin() + static_cast<long>(next() % vv.size()));
    }
    std::printf("vector churn hash: %016llx\n", static_cast<unsigned long long>(h));

    std::map<std::string, std::string> m;
    std::unordered_map<uint64_t, std::string> um;
    for (int i = 0; i < 40000; i++) {
        std::string k = "key-" + std::to_string(next() % 5000);
        std::string v(next() % 200, static_cast<char>('a' + i % 26));
        if (next() % 4 == 0)
            m.erase(k);
        else
            m[k] = v;
        um[next() % 3000] += v.substr(0, 3);
    }
    uint64_t mh = 0;
    size_t total = 0;
    for (const auto &kv : m) {
        mh = fnv(kv.first.data(), kv.first.size(), mh);
        mh = fnv(kv.second.data(), kv.second.size(), mh);
    }
    for (const auto &kv : um)
        total += kv.second.size();
    std::printf("map: %zu keys, hash %016llx; unordered_map: %zu keys, %zu chars\n", m.size(),
                static_cast<unsigned long long>(mh), um.size(), total);

    std::list<std::string> lst;
    std::deque<std::unique_ptr<Line>> dq;
    std::string big;
    for (int i = 0; i < 30000; i++) {
        lst.push_back(std::string(1 + next() % 64, 'x'));
        if (lst.size() > 500)
            lst.pop_front();
        dq.push_back(std::make_unique<Line>());
        if (dq.size() > 300)
            dq.pop_front();
        big += static_cast<char>('A' + next() % 26);
    }
    size_t lsum = 0;
    for (const auto &s : lst)
        lsum += s.size();
    bool aligned = std::all_of(dq.begin(), dq.end(), [](const std::unique_ptr<Line> &p) {
        return (reinterpret_cast<uintptr_t>(p.get()) & 63) == 0;
    });
    EXPECT(aligned);
    std::printf("list: %zu strings, %zu chars; deque of aligned objects ok: %s; string hash %016llx\n",
                lst.size(), lsum, aligned ? "yes" : "no",
                static_cast<unsigned long long>(fnv(big.data(), big.size())));
    forms_used += 1;
}

int main(int argc, char **argv)
{
    bool expect_hakmem = argc > 1 && std::strcmp(argv[1], "--expect-hakmem") == 0;
    owns = reinterpret_cast<int (*)(const void *)>(dlsym(RTLD_DEFAULT, "hakmem_owns"));
    explicit_forms();
    expression_forms();
    failure_forms();
    container_churn();
    std::printf("operator new/delete groups exercised: %d\n", forms_used);
    if (owns)
        std::fprintf(stderr, "test_cxx: hakmem owned %ld of %ld checked pointers\n",
                     owned_checked - owned_bad, owned_checked);
    if (expect_hakmem && (!owns || owned_checked == 0 || owned_bad)) {
        std::fprintf(stderr, "test_cxx: FAIL hakmem expected but %s\n",
                     owns ? "some pointers were not hakmem's" : "hakmem_owns is not present");
        failures++;
    }
    std::printf("result: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
