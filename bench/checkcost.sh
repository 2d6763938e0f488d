#!/usr/bin/env bash
# bench/checkcost.sh -- what the misuse checks cost, in instructions.
#
# Builds two libraries from this tree in a scratch directory: "checked" (the
# tree as it is) and "unchecked" (the same source with the interior-pointer
# and double-free checks taken out: the fast free tests only the page flags,
# no free key is written, cleared or checked when malloc pops a block, the
# slow paths skip the key tests).  Then
# runs each workload under callgrind with both and prints the difference.
# random_mixed is measured as instructions per operation, (I(2N) - I(N)) / N,
# like bench/callgrind.sh; the other workloads as whole-run totals.  Each run
# must prove that hakmem served it.  The unchecked build exists only here and
# only for this measurement.  See docs/design.md, "What the misuse checks cost".
#   usage: bench/checkcost.sh [N=500000] [all]     (all: every suite workload)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
ALL=${2:-}
command -v valgrind >/dev/null || { echo "checkcost.sh: valgrind is not installed" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for v in checked unchecked; do
    mkdir -p "$TMP/$v"
    cp -r src include Makefile mk bench tests "$TMP/$v/"
done
/usr/bin/python3 - "$TMP/unchecked" <<'PY'
import re, sys
root = sys.argv[1]
def edit(path, pairs):
    s = open(path).read()
    for old, new, regex in pairs:
        n = len(re.findall(old, s, flags=re.S)) if regex else s.count(old)
        if n == 0:
            sys.exit("checkcost.sh: %s no longer contains %r: update the script" % (path, old[:60]))
        s = re.sub(old, new, s, count=1, flags=re.S) if regex else s.replace(old, new, 1)
    open(path, "w").write(s)
edit(root + "/src/hak_internal.h", [
    (r"\(hak_local_block\(page, \(uint16_t\)\(uintptr_t\)p\) \|\|.*?b->key != page->local_key\)",
     "page->flags == 0)", True),
    ("            b->key = 0;\n", "", False),                       # malloc: no key to clear
    ("            b->key = page->local_key;\n", "", False),         # free: no key to write
    (" &&\n           ((const hak_block_t *)p)->key != page->free_key;", ";", False),   # the quick check
])
edit(root + "/src/hak_page.c", [
    ("    if (hak_unlikely(b->key != page->free_key)) hak_page_block_written(b);\n", "", False),
    ("    *list = b->next;\n    b->key = 0;\n", "    *list = b->next;\n", False),   # hak_page_pop: refills, medium
    # carving: each block's link and key in one 16-byte store (the key 0 here), the last block's key
    ("(uint64_t)(uintptr_t)(first + bsize), page->free_key }", "(uint64_t)(uintptr_t)(first + bsize), 0 }", False),
    ("        ((hak_block_t *)last)->key = page->free_key;\n", "", False),
])
edit(root + "/src/hak_free.c", [
    ('if (hak_block_is_free(seg, page, b, "free()")) hak_fatal("free()", "double free of", p);', "", False),
])
PY
for v in checked unchecked; do
    make -C "$TMP/$v" -j2 build/libhakmem.so bench-bins >/dev/null 2>&1 ||
        { echo "checkcost.sh: the $v build failed" >&2; exit 1; }
done
BIN=$TMP/checked/build/bench

count() { # variant workload args... -> instruction total (the run must prove hakmem)
    local v=$1 w=$2 out; shift 2
    out=$(env -u HAKMEM_PROFILE LD_PRELOAD="$TMP/$v/build/libhakmem.so" \
          valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN/$w" "$@" 2>&1)
    if ! grep -q '^RESULT.*allocator=[^ ]*libhakmem.*hakmem_owned=1' <<<"$out"; then
        echo "checkcost.sh: hakmem ($v) did not serve $w: $(grep '^RESULT' <<<"$out" || echo no RESULT)" >&2
        exit 1
    fi
    awk '/Collected/ {print $4}' <<<"$out"
}

echo "random_mixed (16-1040 B, WS 400), instructions per operation:"
for v in checked unchecked; do
    a=$(count $v random_mixed "$N" 400 42 mixed); b=$(count $v random_mixed $((2 * N)) 400 42 mixed)
    eval "per_$v=$(awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.3f", (b - a) / n }')"
done
awk -v c="$per_checked" -v u="$per_unchecked" 'BEGIN {
    printf "  checked %.3f  unchecked %.3f  cost %+.3f instr/op = %+.2f %%\n", c, u, c - u, (c - u) * 100 / u }'
[ "$ALL" = all ] || exit 0

echo "per workload (whole-run instruction totals):"
printf '  %-16s %14s %14s %8s\n' workload checked unchecked cost
while read -r name bin args; do
    # shellcheck disable=SC2086
    c=$(count checked "$bin" $args); u=$(count unchecked "$bin" $args)
    awk -v n="$name" -v c="$c" -v u="$u" 'BEGIN { printf "  %-16s %14d %14d %+7.2f%%\n", n, c, u, (c - u) * 100 / u }'
done <<'EOF'
random_mixed random_mixed 2000000 400 1 mixed
random_256 random_mixed 2000000 400 1 256
random_large random_mixed 500000 400 1 large
larson_t2 larson 2 20 25000 1000
larson_t8 larson 8 10 25000 1000
prodcons_t2 prodcons 2 500000
prodcons_t8 prodcons 8 500000
thread_churn_t2 thread_churn 2 1000 100
thread_churn_t8 thread_churn 8 1000 100
false_sharing_t2 false_sharing 2 64 30000
false_sharing_t8 false_sharing 8 64 30000
realloc_growth realloc_growth 500000
large_blocks large_blocks 100
fragmentation fragmentation 64 1 0
EOF
