#!/usr/bin/env python3
"""seeds.py -- write the hand-made seed inputs of hakmem's fuzzer into
tests/fuzz/corpus/ (seed-*; the other files there are regression inputs,
regress-*, and inputs libFuzzer found, lf-*).

    python3 tests/fuzz/seeds.py [DIR]

The encoding mirrors the interpreter (opcodes: the OP_* enum of
tests/fuzz/fuzz_internal.h; sizes: fz_size, alignments: fz_align in
tests/fuzz/fuzz_decode.c).  Every byte string is a valid input, so a
seed that no longer matches the interpreter still runs; it only exercises
something else.
"""
import os
import sys

OPS = ["malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
       "memalign", "valloc", "pvalloc", "new", "free", "usable", "check", "chain",
       "remote_free", "remote_alloc", "remote_realloc", "sync", "restart", "burst", "query"]
OP = {name: i for i, name in enumerate(OPS)}
KiB, MiB = 1024, 1024 * 1024


# ---- sizes (fz_size) ----
def tiny(n):            # 0..31
    assert 0 <= n < 32
    return [n]


def direct(n):          # 0..2048
    assert 0 <= n <= 2048
    return [0x20 | (n >> 8), n & 255]


def small(n):           # 0..8191
    assert 0 <= n < 8192
    return [0x40 | (n >> 8), n & 255]


def medium(n):          # 8 KiB..64 KiB, steps of 7
    x = (n - 8192) // 7
    assert 0 <= x < 8192
    return [0x60 | (x >> 8), x & 255]


def large(n):           # 64 KiB..2 MiB
    x = n - 64 * KiB
    assert 0 <= x < (1 << 21)
    return [0x80 | (x >> 16), (x >> 8) & 255, x & 255]


def cls(c, d=0):        # size class c's size + d, d in -2..2
    assert -2 <= d <= 2
    return [0xa0 | (d + 2), c]


SPECIAL = [4096, 8192, 16384, 65536 - 768, 65536, 128 * KiB, 256 * KiB, 512 * KiB, 1 * MiB,
           2 * MiB - 768, 2 * MiB, 2 * MiB + 4096, 4 * MiB - 768, 4 * MiB, 4 * MiB + 1, 3 * MiB]


def special(n, d=0):    # one of SPECIAL + d, d in -4..3
    assert -4 <= d <= 3
    return [0xa0 | (d + 28), SPECIAL.index(n)]


def huge(n):            # 2 MiB - 4 KiB .. 6 MiB, steps of 2
    x = (n - (2 * MiB - 4096)) // 2
    assert 0 <= x < (1 << 21)
    return [0xc0 | (x >> 16), (x >> 8) & 255, x & 255]


def enormous(i):        # index into fz_enormous (16 entries)
    return [0xe0 | i]


# ---- alignments (fz_align) ----
def al(k):              # 1 << k, k in 0..22
    assert 0 <= k <= 22
    return [k]


SPECIAL_ALIGN = [0, 2, 3, 4, 5, 6, 12, 20, 24, 33, 48, 100, 4097, 12288, 65535, 65537,
                 MiB + 1, 3 * MiB, 8 * MiB, 1 << 30, 1 << 40, (1 << 63), (1 << 63) + 1, (1 << 64) - 1]


def bad_al(a):
    return [184 + SPECIAL_ALIGN.index(a)]


def count(n):           # calloc / reallocarray count 0..31, or overflow pair 0..15
    return [n]


def overflow(j):
    return [240 + j]


class Seq:
    def __init__(self):
        self.b = []

    def op(self, name, *args):
        self.b.append(OP[name])
        for a in args:
            self.b.extend(a if isinstance(a, list) else [a])
        return self

    def bytes(self):
        return bytes(self.b)


def seeds():
    out = {}

    s = Seq()   # every size range through malloc, checked and freed every way
    sizes = [tiny(0), tiny(1), tiny(16), tiny(17), direct(100), direct(2048), small(2049), small(8191),
             medium(8200), medium(65000), large(70000), large(2 * MiB - 1), cls(0), cls(7, 1), cls(8, -1),
             cls(63, 2), cls(119), special(65536), special(2 * MiB, 1), huge(2 * MiB + 5000)]
    for i, z in enumerate(sizes):
        s.op("malloc", i, z)
    for i in range(len(sizes)):
        s.op("usable", i).op("check", i)
    for i in range(len(sizes)):
        s.op("free", i, i % 6 | (8 if i & 1 else 0))
    out["seed-malloc-sizes"] = s

    s = Seq()   # calloc: zeroed blocks, recycled blocks, overflow
    for i, z in enumerate([direct(64), small(5000), medium(30000), large(300000), huge(3 * MiB)]):
        s.op("malloc", i, z).op("free", i, 0).op("calloc", i, count(3), z)
    for j in range(16):
        s.op("calloc", 10 + j, overflow(j), tiny(0))
    out["seed-calloc"] = s

    s = Seq()   # realloc across size kinds, to 0 and from NULL
    s.op("realloc", 0, tiny(8))
    for z in [direct(300), small(6000), medium(40000), large(1 * MiB), huge(3 * MiB), huge(5 * MiB),
              large(500000), medium(9000), direct(20), tiny(0)]:
        s.op("realloc", 0, z)
    s.op("realloc", 1, huge(2 * MiB + 100)).op("realloc", 1, special(2 * MiB)).op("realloc", 1, large(100000))
    s.op("malloc", 2, large(1 * MiB)).op("realloc", 2, large(1 * MiB + 300000))   # grows in place
    s.op("realloc", 3, enormous(0)).op("malloc", 3, direct(50)).op("realloc", 3, enormous(9))
    out["seed-realloc"] = s

    s = Seq()   # reallocarray, including overflow (the block must survive)
    s.op("reallocarray", 0, count(4), small(4000)).op("reallocarray", 0, count(2), medium(60000))
    for j in range(16):
        s.op("reallocarray", 0, overflow(j), tiny(0))
    s.op("malloc", 1, direct(100)).op("reallocarray", 1, count(0), direct(100))
    out["seed-reallocarray"] = s

    s = Seq()   # the aligned family, valid, non-power-of-two and extreme alignments
    slot = 0
    for name in ["posix_memalign", "aligned_alloc", "memalign"]:
        for a in [al(0), al(3), al(4), al(6), al(12), al(16), al(21), al(22), bad_al(0), bad_al(24),
                  bad_al(4097), bad_al(3 * MiB), bad_al(1 << 30), bad_al(1 << 40), bad_al(1 << 63),
                  bad_al((1 << 63) + 1), bad_al((1 << 64) - 1)]:
            s.op(name, slot % 64, a, [tiny(0), direct(100), medium(20000), huge(2 * MiB + 9)][slot % 4])
            slot += 1
    for i in range(64):
        s.op("free", i, 2)
    out["seed-aligned"] = s

    s = Seq()   # valloc, pvalloc
    for i, z in enumerate([tiny(0), tiny(1), special(4096), special(4096, 1), large(100000), huge(3 * MiB),
                           enormous(2), enormous(3)]):
        s.op("valloc", i, z).op("pvalloc", 10 + i, z).op("usable", 10 + i)
    out["seed-valloc"] = s

    s = Seq()   # C++ new in every form, deleted the matching way
    for k in range(8):
        s.op("new", k, k, 6 + k, [direct(24), small(3000), large(200000), huge(3 * MiB)][k % 4])
    s.op("new", 8, 6, 240, direct(10))       # aligned nothrow, alignment 2^40
    s.op("new", 9, 2, 0, enormous(0))        # nothrow, SIZE_MAX
    for k in range(10):
        s.op("free", k, 5 | (8 if k & 1 else 0))
    out["seed-new"] = s

    s = Seq()   # huge blocks: grow and shrink by mremap, calloc, aligned
    s.op("malloc", 0, huge(2 * MiB + 1)).op("realloc", 0, huge(5 * MiB + 10)).op("realloc", 0, huge(2 * MiB + 4096))
    s.op("calloc", 1, count(1), huge(4 * MiB)).op("memalign", 2, al(22), huge(3 * MiB))
    s.op("posix_memalign", 3, bad_al(1 << 30), direct(64)).op("usable", 0).op("usable", 2)
    s.op("realloc", 2, special(4 * MiB - 768)).op("check", 2).op("realloc", 1, tiny(5))
    out["seed-huge"] = s

    s = Seq()   # enormous sizes through every entry point: ENOMEM
    for i in range(16):
        s.op("malloc", i, enormous(i)).op("calloc", i, count(1), enormous(i))
        s.op("valloc", i, enormous(i)).op("memalign", i, al(6), enormous(i)).op("new", i, 2, 0, enormous(i))
    out["seed-enormous"] = s

    s = Seq()   # blocks passed between threads
    for i in range(8):
        s.op("malloc", i, [direct(40), small(900), medium(12000), large(100000)][i % 4])
        s.op("remote_free", i, i)                       # helper i&1, how i>>1
    for i in range(8):
        s.op("remote_alloc", 10 + i, i * 2 + (i & 1), al(6), [direct(200), small(7000), large(80000), huge(3 * MiB)][i % 4])
    for i in range(8):
        s.op("remote_realloc", 10 + i, i, [direct(300), medium(20000)][i % 2])
    s.op("sync", 2)
    for i in range(8):
        s.op("free", 10 + i, i)
    out["seed-remote"] = s

    s = Seq()   # a helper exits with live blocks; a new one adopts its heap
    for i in range(6):
        s.op("remote_alloc", i, 0, al(4), [direct(100), small(5000), large(300000)][i % 3])
    s.op("restart", 0)
    for i in range(3):
        s.op("free", i, 0)
    s.op("remote_alloc", 10, 0, al(4), direct(100)).op("restart", 0).op("restart", 1)
    for i in range(3, 6):
        s.op("remote_free", i, 1)
    s.op("query", 4)
    out["seed-restart"] = s

    s = Seq()   # a helper's pthread key destructor frees and allocates while it exits
    for i in range(4):
        s.op("malloc", i, [direct(100), small(5000), large(300000), huge(3 * MiB)][i])
    # restart helper h with exit work: slot, work byte, align, size
    EXIT_APIS = ["malloc", "calloc", "memalign", "posix_memalign", "realloc", "new", "valloc", "aligned_alloc"]

    def work(key, rounds, api, how):    # key 0: before hakmem's, 1: after; rounds 1..4
        return (key & 1) | ((rounds - 1) << 1) | (EXIT_APIS.index(api) << 3) | (how << 6)
    s.op("restart", 2, 0, work(0, 1, "malloc", 0), al(4), direct(64))
    s.op("restart", 3, 1, work(1, 2, "calloc", 1), al(4), small(3000))
    s.op("restart", 2, 2, work(1, 1, "memalign", 2), al(12), medium(20000))
    s.op("restart", 3, 3, work(0, 4, "new", 3), al(6), large(200000))
    s.op("restart", 2, 9, work(1, 4, "realloc", 0), al(6), direct(10))
    s.op("restart", 3, 9, work(1, 3, "aligned_alloc", 0), al(8), small(700))
    out["seed-exit"] = s

    s = Seq()   # bursts: full pages, remote and delayed frees, every order
    for mode in [0x00, 0x05, 0x1a, 0x2e, 0x3d, 0x47, 0x8c, 0xc9, 0xf2]:
        s.op("burst", 255, mode, [direct(48), small(4000), medium(20000)][mode % 3])
    out["seed-burst"] = s

    s = Seq()   # trimming and statistics with live blocks
    for i in range(6):
        s.op("malloc", i, [direct(100), medium(50000), large(1 * MiB), huge(3 * MiB)][i % 4])
    s.op("free", 1, 0).op("free", 2, 0)
    for q in range(5):
        s.op("query", q)
    out["seed-query"] = s

    s = Seq()   # realloc chains
    s.op("chain", 0, 15, *([0x3f] * 8 + [0x50] * 8))
    s.op("chain", 1, 15, *[0x80 | i for i in range(0, 64, 4)])
    s.op("chain", 2, 15, *[0xc0 | i for i in range(0, 64, 4)])
    s.op("chain", 3, 7, 0x10, 0x7f, 0x45, 0xbf, 0xe0, 0x01, 0x40, 0x9f)
    out["seed-chain"] = s

    s = Seq()   # the program writes the whole usable size, then reallocs
    for i, z in enumerate([tiny(1), direct(100), small(3000), medium(33000), large(600000), huge(2 * MiB + 7)]):
        s.op("memalign", i, al(5 + i), z).op("usable", i).op("realloc", i, cls(20 + i * 15)).op("usable", i)
    out["seed-usable"] = s
    return out


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(d, exist_ok=True)
    for name, seq in sorted(seeds().items()):
        with open(os.path.join(d, name), "wb") as f:
            f.write(seq.bytes())
        print(f"{name}: {len(seq.bytes())} bytes")


if __name__ == "__main__":
    main()
