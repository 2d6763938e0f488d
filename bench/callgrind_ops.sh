#!/usr/bin/env bash
# bench/callgrind_ops.sh -- instructions per call of malloc_usable_size and
# of an aligned allocation (posix_memalign + free), per allocator, with
# build/bench/size_ops under valgrind --tool=callgrind: (I(2N) - I(N)) / N,
# as bench/callgrind.sh does for random_mixed (the loop's own instructions,
# the same for every allocator, are included).
#   usage: bench/callgrind_ops.sh [N=200000] [LIB=build/libhakmem.so] [ALLOCATORS="hakmem mimalloc glibc"]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
HAKLIB=$(realpath "${2:-build/libhakmem.so}")
ALLOCATORS=${3:-"hakmem mimalloc glibc"}
BIN=build/bench/size_ops
LIBDIR=/usr/lib/x86_64-linux-gnu
declare -A LIBS=([hakmem]=$HAKLIB [mimalloc]=$LIBDIR/libmimalloc.so.2 [glibc]="")
declare -A EXPECT=([hakmem]=libhakmem [mimalloc]=libmimalloc [glibc]=libc.so)
command -v valgrind >/dev/null || { echo "callgrind_ops.sh: valgrind is not installed" >&2; exit 1; }
[ -x "$BIN" ] || { echo "callgrind_ops.sh: $BIN missing (make build/bench/size_ops)" >&2; exit 1; }

count() { # alloc iterations args... -> instruction count; checks the allocator proof
    local alloc=$1 iters=$2 out; shift 2
    out=$(env -u HAKMEM_PROFILE ${LIBS[$alloc]:+LD_PRELOAD=${LIBS[$alloc]}} \
          valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$1" "$iters" "${@:2}" 2>&1)
    local result; result=$(grep '^RESULT' <<<"$out" || true)
    if ! grep -q "allocator=[^ ]*${EXPECT[$alloc]}" <<<"$result"; then
        echo "callgrind_ops.sh: $alloc did not serve the run: ${result:-no RESULT line}" >&2; echo "$out" >&2; exit 1
    fi
    if [ "$alloc" = hakmem ] && ! grep -q 'hakmem_owned=1' <<<"$result"; then
        echo "callgrind_ops.sh: hakmem_owned!=1: $result" >&2; exit 1
    fi
    awk '/Collected/ {print $4}' <<<"$out"
}

CASES=("usable" "aligned 65536 65496 64" "aligned 65536 65536 64" "aligned 65536 65496 1"
       "aligned 4096 4096 64" "aligned 4096 4096 1" "aligned 64 100 64")
printf '%-26s' case; for a in $ALLOCATORS; do printf ' %10s' "$a"; done; echo
for c in "${CASES[@]}"; do
    read -r mode rest <<<"$c"
    printf '%-26s' "$c"
    for alloc in $ALLOCATORS; do
        # shellcheck disable=SC2086
        a=$(count "$alloc" "$N" $mode $rest); b=$(count "$alloc" $((2 * N)) $mode $rest)
        awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf " %10.2f", (b - a) / n }'
    done
    echo
done
