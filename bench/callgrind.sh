#!/usr/bin/env bash
# bench/callgrind.sh -- instructions per operation of random_mixed, per allocator.
#
# Runs build/bench/random_mixed under valgrind --tool=callgrind at two run
# lengths (N and 2N iterations) and reports (I(2N) - I(N)) / N: the cost of
# one operation (one malloc or one free, plus the workload's loop and RNG,
# which are the same for every allocator).  Instruction counts do not drift
# with machine load, so one run each is enough.  Each run must prove which
# allocator served it (the workload's RESULT line).
#   usage: bench/callgrind.sh [N=1000000] [MODE=mixed]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
MODE=${2:-mixed}
BIN=build/bench/random_mixed
LIBDIR=/usr/lib/x86_64-linux-gnu
declare -A LIBS=([hakmem]=$PWD/build/libhakmem.so [mimalloc]=$LIBDIR/libmimalloc.so.2
                 [glibc]="" [jemalloc]=$LIBDIR/libjemalloc.so.2 [tcmalloc]=$LIBDIR/libtcmalloc_minimal.so.4)
declare -A EXPECT=([hakmem]=libhakmem [mimalloc]=libmimalloc [glibc]=libc.so
                   [jemalloc]=libjemalloc [tcmalloc]=libtcmalloc)
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
[ -x "$BIN" ] || { echo "callgrind.sh: $BIN missing (run make bench-bins)" >&2; exit 1; }

count() { # alloc iterations -> instruction count; checks the allocator proof
    local alloc=$1 iters=$2 out
    out=$(env -u HAKMEM_PROFILE ${LIBS[$alloc]:+LD_PRELOAD=${LIBS[$alloc]}} \
          valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$iters" 400 42 "$MODE" 2>&1)
    local result; result=$(grep '^RESULT' <<<"$out" || true)
    if ! grep -q "allocator=[^ ]*${EXPECT[$alloc]}" <<<"$result"; then
        echo "callgrind.sh: $alloc did not serve the run: ${result:-no RESULT line}" >&2; exit 1
    fi
    if [ "$alloc" = hakmem ] && ! grep -q 'hakmem_owned=1' <<<"$result"; then
        echo "callgrind.sh: hakmem_owned!=1: $result" >&2; exit 1
    fi
    awk '/Collected/ {print $4}' <<<"$out"
}

printf '%-10s %14s\n' allocator 'instr/op'
for alloc in hakmem mimalloc glibc jemalloc tcmalloc; do
    if [ -n "${LIBS[$alloc]}" ] && [ ! -e "${LIBS[$alloc]}" ]; then
        printf '%-10s %14s\n' "$alloc" "missing: ${LIBS[$alloc]}"; continue
    fi
    a=$(count "$alloc" "$N"); b=$(count "$alloc" $((2 * N)))
    awk -v a="$a" -v b="$b" -v n="$N" -v name="$alloc" 'BEGIN { printf "%-10s %14.2f\n", name, (b - a) / n }'
done
