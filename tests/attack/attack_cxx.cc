// attack_cxx.cc -- C++ allocation mismatches.
//   attack_cxx CASE SIZE
// CASE:
//   newarr_delete   new T[] of a type with a destructor, freed by delete
//   new_deletearr   new T, freed by delete[] (reads a count that is not there)
//   sized_delete    operator new(SIZE), operator delete(p, wrong size)
//   delete_malloc   malloc(SIZE), freed by delete
//   type_mismatch   new char, deleted as a 32-byte struct (sized delete)
//   aligned_mismatch  an over-aligned new, deleted with a wrong size
//   new_huge        new char[huge] must throw std::bad_alloc ("OK")
// Caught: the program stops before "SURVIVED"; new_huge: "OK" printed.
#include <cstddef>
#include <new>
#include "attack.h"

template <size_t N> struct Obj {
    char b[N];
    ~Obj() { attack_keep(this); }
};
struct Big {
    uint64_t a, b, c, d;
};
struct alignas(64) Aligned {
    char x[24];
};

static volatile size_t huge_count = SIZE_MAX / 2;

template <size_t N> static void mismatch(const char *c)
{
    if (!strcmp(c, "newarr_delete")) {
        Obj<8> *a = new Obj<8>[N / 8];
        attack_keep(a);
        delete a;                       // frees a, not the cookie before it
    } else if (!strcmp(c, "new_deletearr")) {
        Obj<N> *o = new Obj<N>;
        attack_keep(o);
        delete[] o;
    } else if (!strcmp(c, "sized_delete")) {
        void *p = ::operator new(N);
        attack_keep(p);
        ::operator delete(p, N == 8 ? 4096 : 8);
    } else if (!strcmp(c, "delete_malloc")) {
        Obj<N> *o = static_cast<Obj<N> *>(malloc(N));
        if (!o)
            attack_setup_failed("malloc");
        attack_keep(o);
        delete o;
    } else {
        attack_setup_failed("unknown case");
    }
}

int main(int argc, char **argv)
{
    attack_begin();
    if (argc < 2)
        attack_setup_failed("usage: attack_cxx CASE [SIZE]");
    const char *c = argv[1];
    if (!strcmp(c, "new_huge")) {
        try {
            char *p = new char[huge_count];
            attack_keep(p);
            attack_say("new returned %p\n", (void *)p);
        } catch (const std::bad_alloc &) {
            attack_say("OK\n");
            return 0;
        }
        attack_survived();
    } else if (!strcmp(c, "type_mismatch")) {
        Big *b = reinterpret_cast<Big *>(new char);
        attack_keep(b);
        delete b;
    } else if (!strcmp(c, "aligned_mismatch")) {
        Aligned *a = new Aligned;
        attack_keep(a);
        ::operator delete(a, sizeof(Aligned) + 4096, std::align_val_t(alignof(Aligned)));
    } else {
        size_t n = attack_size_arg(argc, argv, 2);
        if (n == 8)
            mismatch<8>(c);
        else if (n == 4096)
            mismatch<4096>(c);
        else if (n == 262144)
            mismatch<262144>(c);
        else
            attack_setup_failed("SIZE is 8, 4096 or 262144");
    }
    for (int i = 0; i < 16; i++)
        delete[] new char[64];
    attack_survived();
}
