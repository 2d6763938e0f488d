#!/usr/bin/env bash
# bench/interp_callgrind.sh -- where interp_py's instructions go, per allocator.
#
# Runs bench/interp_py.py (Debian's python3, PYTHONMALLOC=malloc) once under
# valgrind --tool=callgrind per allocator and prints, from the raw profile:
# the instructions of the whole process, the allocator's share (the self cost
# of every function in the preloaded library; a function valgrind cannot place
# in an object, [???], counts as the library's when the library exports that
# name: hakmem's malloc sits in its own section, hak_prof_text, which
# valgrind's reader does not attribute to libhakmem.so), and the allocator's
# top functions.  Each run must prove its allocator (interp_py's RESULT line).
#   usage: bench/interp_callgrind.sh [REQUESTS=20000] [ALLOCATORS="hakmem mimalloc"]
# Start-up (interpreter, imports; ~3 % at 20,000 requests) is included.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
ALLOCS=${2:-hakmem mimalloc}
LIBDIR=/usr/lib/x86_64-linux-gnu
declare -A LIBS=([hakmem]=$PWD/build/libhakmem.so [mimalloc]=$LIBDIR/libmimalloc.so.2
                 [jemalloc]=$LIBDIR/libjemalloc.so.2 [tcmalloc]=$LIBDIR/libtcmalloc_minimal.so.4)
# (no glibc: its allocator shares libc.so.6 with memcpy and the rest)
command -v valgrind >/dev/null || { echo "interp_callgrind.sh: valgrind is not installed" >&2; exit 1; }
OUT=$(mktemp -d /tmp/interp_callgrind.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

for a in $ALLOCS; do
    lib=${LIBS[$a]:?unknown allocator $a}
    [ -e "$lib" ] || { echo "interp_callgrind.sh: $a: $lib missing" >&2; exit 1; }
    PYTHONHASHSEED=0 PYTHONMALLOC=malloc LD_PRELOAD=$lib valgrind --tool=callgrind \
        --callgrind-out-file="$OUT/cg.$a" /usr/bin/python3 bench/interp_py.py "$N" \
        >"$OUT/$a.out" 2>"$OUT/$a.err"
    /usr/bin/python3 bench/stats.py check "$a" "$OUT/$a.out" >/dev/null || {
        echo "interp_callgrind.sh: $a did not serve the run: $(cat "$OUT/$a.out")" >&2; exit 1; }
    { nm --defined-only "$lib" 2>/dev/null || true; nm -D --defined-only "$lib"; } | awk '{print $3}' >"$OUT/$a.syms"
    /usr/bin/python3 - "$a" "$lib" "$N" "$OUT/$a.syms" "$OUT/cg.$a" <<'EOF'
import os, re, sys
name, lib, n, syms, raw = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
exported = set(open(syms).read().split())
libreal = os.path.realpath(lib)
# The raw profile (positions: line, events: Ir): "ob=", "fn=" name the
# current object and function ("(id) name" the first time, "(id)" after),
# "fl=/fi=/fe=" only change the file, a cost line "POS IR" adds to the
# current function's self cost unless it follows a "calls=" line (then it
# is the inclusive cost of that call); "cob=/cfn=" name a call's callee.
obs, fns = {}, {}
self_cost, calls = {}, {}
ob = fn = cfn = None
after_calls = False
total = None
for line in open(raw, errors="replace"):
    c = line[0]
    if c.isdigit() or c in "+-*":
        if after_calls:
            after_calls = False
            continue
        f = line.split()
        if len(f) > 1:
            key = (ob, fn)
            self_cost[key] = self_cost.get(key, 0) + int(f[1])
        continue
    after_calls = False
    m = re.match(r"(c?ob|c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
    if m:
        kind, i, nm = m.groups()
        table = obs if kind.endswith("ob") else fns
        if nm is not None:
            table[i] = nm if kind.endswith("ob") else re.sub(r"'\d+$", "", nm)
        if kind == "ob":
            ob = table[i]
        elif kind == "fn":
            fn = table[i]
        elif kind == "cfn":
            cfn = table[i]
    elif line.startswith("calls="):
        calls[cfn] = calls.get(cfn, 0) + int(line.split("=", 1)[1].split()[0])
        after_calls = True
    elif line.startswith("totals:"):
        total = int(line.split()[1])
objs, funcs = {}, {}
for (o, f), v in self_cost.items():
    # valgrind cannot place code outside .text (hakmem's hak_prof_text) in
    # an object: "???", counted as the library's when it defines the name
    if o == "???" and f in exported:
        o = lib
    base = os.path.basename(o or "???")
    objs[base] = objs.get(base, 0) + v
    if o and o != "???" and os.path.realpath(o) == libreal:
        funcs[f] = funcs.get(f, 0) + v
total = total or sum(self_cost.values())
alloc = sum(funcs.values())
print("%s: %d instructions in all (%.0f per request), allocator %s: %d = %.1f %% (%.0f per request)"
      % (name, total, total / n, os.path.basename(lib), alloc, 100.0 * alloc / total, alloc / n))
print("  by object: " + ", ".join("%s %.2f M (%.1f %%)" % (o, v / 1e6, 100.0 * v / total)
                                 for o, v in sorted(objs.items(), key=lambda x: -x[1])
                                 if v >= total / 1000))
print("  allocator's top functions (self instructions, % of all, calls, self per call):")
for f, v in sorted(funcs.items(), key=lambda x: -x[1])[:8]:
    k = calls.get(f, 0)
    print("    %-24s %12d  %5.2f %%  %10s  %s" % (f, v, 100.0 * v / total, k or "-",
                                               "%.1f" % (v / k) if k else "-"))
EOF
done
