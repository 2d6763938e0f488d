#!/usr/bin/env bash
# bench/callgrind.sh -- instructions per operation of random_mixed, per allocator.
#
# Runs build/bench/random_mixed under valgrind --tool=callgrind at two run
# lengths (N and 2N iterations); the difference is the cost of N operations
# (each one malloc or one free).  Two columns:
#   instr/op     all instructions per operation, the workload's loop and RNG
#                included (the same for every allocator);
#   alloc/pair   the allocator's instructions per free+malloc pair: the run's
#                instructions less the benchmark's own (the self cost of the
#                random_mixed binary's functions and of its PLT stub), per N/2.
# Instruction counts do not drift with machine load, so one run each is
# enough.  Each run must prove which allocator served it (the RESULT line).
#   usage: bench/callgrind.sh [N=1000000] [MODE=mixed]
#   PEERS="name=/path/lib.so ..." adds allocators (as make bench's PEERS)
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
ORDER=(hakmem mimalloc glibc jemalloc tcmalloc)
for peer in ${PEERS:-}; do
    name=${peer%%=*} lib=${peer#*=}
    [[ $name && $lib && $name != "$peer" ]] || { echo "callgrind.sh: PEERS entry '$peer' is not NAME=LIB" >&2; exit 2; }
    LIBS[$name]=$(realpath "$lib"); EXPECT[$name]=$(basename "$lib"); ORDER+=("$name")
done
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
[ -x "$BIN" ] || { echo "callgrind.sh: $BIN missing (run make bench-bins)" >&2; exit 1; }

count() { # alloc iterations -> "total benchmark-own" instruction counts; checks the allocator proof
    local alloc=$1 iters=$2 out prof
    prof=$(mktemp)
    out=$(env -u HAKMEM_PROFILE ${LIBS[$alloc]:+LD_PRELOAD=${LIBS[$alloc]}} \
          valgrind --tool=callgrind --callgrind-out-file="$prof" "$BIN" "$iters" 400 42 "$MODE" 2>&1)
    local result; result=$(grep '^RESULT' <<<"$out" || true)
    if ! grep -q "allocator=[^ ]*${EXPECT[$alloc]}" <<<"$result"; then
        rm -f "$prof"; echo "callgrind.sh: $alloc did not serve the run: ${result:-no RESULT line}" >&2; exit 1
    fi
    if [ "$alloc" = hakmem ] && ! grep -q 'hakmem_owned=1' <<<"$result"; then
        rm -f "$prof"; echo "callgrind.sh: hakmem_owned!=1: $result" >&2; exit 1
    fi
    # the benchmark's own code: functions from bench/'s sources (the binary's,
    # inlined ones included), and its PLT stubs (addresses in an unnamed object)
    callgrind_annotate --threshold=100 --auto=no "$prof" 2>/dev/null | awk '
        /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
        / (\/[^ ]*\/)?bench\/[a-z_]+\.[ch]:/ || /\?\?\?:0x[0-9a-f]+ \[\?\?\?\]/ { gsub(",", "", $1); own += $1 }
        END { print total, own }'
    rm -f "$prof"
}

printf '%-10s %12s %12s\n' allocator 'instr/op' 'alloc/pair'
for alloc in "${ORDER[@]}"; do
    if [ -n "${LIBS[$alloc]}" ] && [ ! -e "${LIBS[$alloc]}" ]; then
        printf '%-10s %s\n' "$alloc" "missing: ${LIBS[$alloc]}"; continue
    fi
    read -r ta oa < <(count "$alloc" "$N"); read -r tb ob < <(count "$alloc" $((2 * N)))
    awk -v ta="$ta" -v oa="$oa" -v tb="$tb" -v ob="$ob" -v n="$N" -v name="$alloc" \
        'BEGIN { printf "%-10s %12.2f %12.2f\n", name, (tb - ta) / n, ((tb - ob) - (ta - oa)) / (n / 2) }'
done
