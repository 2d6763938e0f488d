"""interp_py.py -- CPython under allocation stress (make bench row interp_py).

usage: PYTHONMALLOC=malloc [PYTHONHASHSEED=0] /usr/bin/python3 bench/interp_py.py [REQUESTS=200000]
       [LIVE=2000] [SEED=1]

Each "request" (one operation) builds and drops what a small web or ETL
service does per record: formatted strings (keys, a line, its split fields, a
join), a list of tokens, a list comprehension of ints and floats, a dict of a
dozen fields and a nested dict; a JSON-ish line is rebuilt from the dict
(without the floats: their repr alone took 14 % of the instructions).  One
request in 8 keeps its record in a window of LIVE records (the oldest is
dropped, so objects live for different lengths of time, as in a cache) and a
dict keyed by request id grows and shrinks with the window.  Every CPython
object (str, list, dict, tuple, int > 256, float) is a malloc/free under
PYTHONMALLOC=malloc, so the process's allocator serves all of it; the script
refuses to run without PYTHONMALLOC=malloc (pymalloc would serve the small
objects itself and the allocator under test would see almost nothing).

It prints the RESULT line every make bench workload prints (bench_common.h):
allocator= is the shared object that defines malloc (through ctypes, see
allocator_path), hakmem_owned= is hakmem_owns() on a fresh malloc'd block and
on objects of the workload itself (their addresses, sampled after the timed
part; -1 without a hakmem_owns symbol).  ops_per_sec = requests per second of the timed loop
(interpreter start-up excluded).
"""
import ctypes
import os
import sys
import time


def arg(i, default):
    return int(sys.argv[i]) if len(sys.argv) > i and sys.argv[i] else default


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


class LinkMap(ctypes.Structure):
    pass


LinkMap._fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p),
                    ("l_ld", ctypes.c_void_p), ("l_next", ctypes.POINTER(LinkMap)),
                    ("l_prev", ctypes.POINTER(LinkMap))]
RTLD_LAZY, RTLD_NOLOAD, RTLD_DI_LINKMAP = 0x1, 0x4, 2


def allocator_path(libc):
    """The file of the shared object whose malloc the interpreter calls.
    dlsym(RTLD_DEFAULT, "malloc") will not do here: Debian's /usr/bin/python3
    is not position-independent, so that lookup returns the executable's own
    PLT stub (the function's canonical address), and dladdr names the
    executable.  The dynamic linker binds the executable's malloc to the first
    object after it in the global scope (the link map: LD_PRELOAD libraries,
    then the dependencies) that defines malloc, so walk the link map and take
    the first object whose own dlsym of malloc lies inside itself."""
    libc.dlopen.restype = ctypes.c_void_p
    libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.dlsym.restype = ctypes.c_void_p
    libc.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    libc.dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    lm = ctypes.POINTER(LinkMap)()
    main = libc.dlopen(None, RTLD_LAZY)
    if not main or libc.dlinfo(main, RTLD_DI_LINKMAP, ctypes.byref(lm)) != 0:
        return "unknown"
    lm = lm.contents.l_next if lm else None  # skip the executable
    while lm:
        obj = lm.contents
        name = obj.l_name
        h = libc.dlopen(name, RTLD_LAZY | RTLD_NOLOAD) if name else None
        addr = libc.dlsym(h, b"malloc") if h else None
        info = DlInfo()
        if addr and libc.dladdr(addr, ctypes.byref(info)) and info.dli_fname and (
                os.path.realpath(info.dli_fname) == os.path.realpath(name)):
            path = info.dli_fname.decode(errors="replace")
            for ch in " \t=":
                path = path.replace(ch, "_")
            return path or "unknown"
        lm = obj.l_next
    return "unknown"


def peak_rss_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau"]


def request(i, x):
    """One request: build and (mostly) drop a record.  x is a 64-bit LCG state."""
    user = "user-%d-%s" % (x % 100003, WORDS[x % 19])
    path = "/api/v%d/%s/%s/items/%d" % (1 + x % 3, WORDS[(x >> 8) % 19], user, x % 9973)
    line = "%s GET %s HTTP/1.1 200 %d %.3f" % (user, path, x % 65536, (x % 1000) / 7.0)
    fields = line.split(" ")
    tokens = path.split("/")
    tokens.reverse()
    sizes = [len(t) * (x % 1000 + 1000) for t in tokens]  # ints > 256: malloc'd
    ratios = [s / 3.0 for s in sizes]                      # floats: malloc'd
    rec = {"id": i, "user": user, "path": path, "method": fields[1], "status": int(fields[4]),
           "bytes": int(fields[5]), "ms": float(fields[6]), "tokens": tokens,
           "sizes": sizes, "ratios": ratios, "tags": {w: len(w) * i for w in WORDS[: 3 + x % 8]},
           "note": "-".join(tokens) * (1 + x % 4)}
    out = "{" + ", ".join("%r: %r" % (k, v) for k, v in rec.items()
                          if k not in ("tags", "ratios")) + "}"  # (float repr is slow)
    rec["line"] = out.upper() if x & 1 else out
    return rec


def main():
    if os.environ.get("PYTHONMALLOC") != "malloc":
        print("interp_py.py: run with PYTHONMALLOC=malloc (else pymalloc serves small objects)",
              file=sys.stderr)
        return 2
    requests, live, seed = arg(1, 200000), max(1, arg(2, 2000)), arg(3, 1)
    window = [None] * live
    by_id = {}
    x = (seed * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
    kept = checksum = 0
    samples = []
    t0 = time.perf_counter()
    for i in range(requests):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        rec = request(i, x >> 16)
        checksum += len(rec["line"])
        if x >> 61 == 0:  # one in 8 is kept
            slot = kept % live
            old = window[slot]
            if old is not None:
                del by_id[old["id"]]
            window[slot] = rec
            by_id[i] = rec
            kept += 1
            if kept % 97 == 0 and len(samples) < 400:
                samples.append(rec)
    t1 = time.perf_counter()

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    owned, n_samples, n_foreign = -1, 0, 0
    try:
        owns = libc.hakmem_owns
    except AttributeError:
        owns = None
    if owns is not None:
        owns.restype = ctypes.c_int
        owns.argtypes = [ctypes.c_void_p]
        p = libc.malloc(48)
        ctypes.memset(p, 0x5A, 48)
        owned = 1 if owns(p) else 0
        libc.free(p)
        # objects of the workload, of several types and sizes (under pymalloc
        # the small ones would live in pymalloc's arenas and not be claimed)
        objs = []
        for rec in samples:
            objs += [rec, rec["user"], rec["line"], rec["tokens"], rec["sizes"][0],
                     rec["ratios"][0], rec["tags"]]
        objs += [window, by_id]
        for o in objs:
            n_samples += 1
            if not owns(id(o)):
                n_foreign += 1
        if n_foreign:
            owned = 0
    seconds = t1 - t0
    print("RESULT workload=interp_py threads=1 ops=%d seconds=%.6f ops_per_sec=%.1f "
          "allocator=%s hakmem_owned=%d owned_samples=%d foreign_samples=%d peak_rss_kb=%d "
          "kept=%d live=%d python=%s checksum=%d"
          % (requests, seconds, requests / seconds if seconds > 0 else 0.0,
             allocator_path(libc), owned, n_samples, n_foreign, peak_rss_kb(), kept,
             len(by_id), "%d.%d.%d" % sys.version_info[:3], checksum & 0xFFFF))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
