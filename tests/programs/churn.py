"""churn.py -- allocation-heavy, deterministic Python workload for suite_programs.sh.

Run with PYTHONMALLOC=malloc so every object goes through malloc.  Prints a
deterministic summary (compared between a run on glibc and one under
LD_PRELOAD=libhakmem.so).  With --expect-hakmem it also checks, via ctypes,
that hakmem_owns claims a malloc'd pointer and Python objects, and exits 3 if
not.
"""
import ctypes
import hashlib
import json
import sys


def lcg(seed):
    x = seed
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        yield x >> 33


def main():
    rnd = lcg(2024)
    h = hashlib.sha256()

    # dict / list / str churn
    table = {}
    for i in range(200000):
        k = "k%d" % (next(rnd) % 20000)
        if next(rnd) % 5 == 0:
            table.pop(k, None)
        else:
            table[k] = [i, str(i) * (1 + next(rnd) % 8), {"n": i % 97}]
    for k in sorted(table):
        h.update(k.encode())
        h.update(table[k][1].encode())
    print("dict entries:", len(table), "digest:", h.hexdigest()[:32])

    lists = [[j for j in range(next(rnd) % 500)] for _ in range(3000)]
    total = sum(len(x) for x in lists)
    lists.sort(key=len)
    print("lists:", len(lists), "elements:", total, "longest:", len(lists[-1]))

    s = []
    for i in range(50000):
        s.append(("%08x" % next(rnd)) * (1 + i % 5))
    joined = "|".join(s)
    print("string length:", len(joined), "sha:", hashlib.sha256(joined.encode()).hexdigest()[:32])

    # JSON round trip of a nested document
    doc = {"items": [{"id": i, "name": "item-%d" % i, "tags": ["t%d" % (i % 13)] * (i % 4),
                      "score": (i * 37) % 1000 / 10.0} for i in range(40000)],
           "meta": {"version": 3, "text": "x" * 100000}}
    text = json.dumps(doc, sort_keys=True)
    back = json.loads(text)
    assert back == doc, "json round trip changed the document"
    print("json bytes:", len(text), "sha:", hashlib.sha256(text.encode()).hexdigest()[:32])

    # big bytes objects (large-size path)
    blobs = [bytes([i % 251]) * (1 << (10 + i % 12)) for i in range(60)]
    print("blobs:", sum(len(b) for b in blobs))

    if "--expect-hakmem" in sys.argv:
        libc = ctypes.CDLL(None)
        try:
            owns = libc.hakmem_owns
        except AttributeError:
            print("hakmem_owns not found: preload did not take effect", file=sys.stderr)
            sys.exit(3)
        owns.restype = ctypes.c_int
        owns.argtypes = [ctypes.c_void_p]
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        p = libc.malloc(100)
        objs = [p, id(table), id(lists[-1]), id(joined), id(blobs[-1])]
        res = [owns(o) for o in objs]
        libc.free(p)
        if res != [1] * len(res):
            print("hakmem_owns results %s: objects not served by hakmem" % res, file=sys.stderr)
            sys.exit(3)
        print("hakmem served malloc and Python objects", file=sys.stderr)


if __name__ == "__main__":
    main()
