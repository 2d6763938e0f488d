#!/usr/bin/env bash
# suite_os.sh -- the platform layer (tests/test_os.c, builds in tests/os.mk):
#   os.glibc / os.preload / os.preload_debug
#       glibc 2.36's memalign and aligned_alloc rules, posix_memalign's, and
#       the kernel's overcommit policy; the glibc run proves the tests sound
#   os.lowmap / os.lowmap_debug
#       hakmem compiled in with a 1 TiB region map: nothing beyond the map is
#       handed out or written to the map
#   os.canary
#       the mmap hint is independent of the stack canary: over 100 runs,
#       canary bits 8..19 equal address bits 30..41 at most twice (1/4096 a
#       run by chance), no XOR or difference of the two recurs more than 3
#       times, and the addresses vary
source "$(dirname "$0")/lib.sh"
BIN=$T/test_os
LOW=$T/os/test_os_lowmap
LOWD=$T/os/test_os_lowmap_debug

if need os.glibc "$BIN"; then
    run_bin os.glibc 60 "$BIN" -p os.glibc --expect-glibc
fi
if need os.preload "$BIN" "$REL_SO"; then
    run_bin os.preload 60 env LD_PRELOAD="$REL_SO" "$BIN" -p os.preload --expect-hakmem
fi
if need os.preload_debug "$BIN" "$DBG_SO"; then
    run_bin os.preload_debug 60 env LD_PRELOAD="$DBG_SO" "$BIN" -p os.preload_debug --expect-hakmem
fi
if need os.lowmap "$LOW"; then
    run_bin os.lowmap 60 "$LOW" -p os.lowmap --lowmap
fi
if need os.lowmap_debug "$LOWD"; then
    run_bin os.lowmap_debug 60 "$LOWD" -p os.lowmap_debug --lowmap
fi

# glibc's canary is AT_RANDOM bytes 0..7 with the low byte cleared; the old
# hint was 2 TiB + (AT_RANDOM bytes 0..2 mod 2^20) * 4 MiB, so address bits
# 30..41 were canary bits 8..19 with bit 41 flipped by the 2 TiB.  Any fixed
# relation shows as one XOR (or difference) of the two 12-bit fields in
# every run; independent fields give each value about 100/4096 times.
canary_test() {
    local runs=100 n=0 same=0 line cb ab owned rest x d
    local -A seen=() xors=() diffs=()
    for ((i = 0; i < runs; i++)); do
        line=$(LD_PRELOAD="$REL_SO" limit 20 "$BIN" --canary 2>&1)
        if [[ $line == SKIP* ]]; then
            skip os.canary "${line#SKIP }"
            return
        fi
        read -r _ cb _ ab _ owned rest <<<"$line"
        if ! [[ $cb =~ ^[0-9]+$ && $ab =~ ^[0-9]+$ && $owned == 1 ]]; then
            fail os.canary "run $i: unexpected output: $(head -c 200 <<<"$line")"
            return
        fi
        n=$((n + 1))
        ((cb == ab)) && same=$((same + 1))
        x=$((cb ^ ab)) d=$(((ab - cb) & 0xfff))
        xors[$x]=$((${xors[$x]:-0} + 1))
        diffs[$d]=$((${diffs[$d]:-0} + 1))
        seen[$ab]=1
    done
    local xmax=0 xval=0 dmax=0
    for x in "${!xors[@]}"; do ((xors[$x] > xmax)) && xmax=${xors[$x]} xval=$x; done
    for d in "${!diffs[@]}"; do ((diffs[$d] > dmax)) && dmax=${diffs[$d]}; done
    echo "# os.canary: $n runs: canary bits 8..19 == address bits 30..41 in $same;" \
         "most frequent XOR of the two $(printf '%#x' "$xval") in $xmax, most frequent" \
         "difference in $dmax; ${#seen[@]} distinct address values"
    if ((same > 2)); then
        fail os.canary "canary bits 8..19 equal heap address bits 30..41 in $same of $n runs (chance: 1/4096 a run)"
    elif ((xmax > 3 || dmax > 3)); then
        fail os.canary "address bits 30..41 follow canary bits 8..19: one XOR ($(printf '%#x' "$xval")) in $xmax of $n runs, one difference in $dmax (chance: at most 3)"
    elif ((${#seen[@]} < 50)); then
        fail os.canary "address bits 30..41 took only ${#seen[@]} values in $n runs"
    else
        pass os.canary
    fi
}
if need os.canary "$BIN" "$REL_SO"; then
    canary_test
fi
exit $SUITE_STATUS
