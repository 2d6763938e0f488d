#!/usr/bin/env bash
# suite_guard.sh -- guarded sampling (HAKMEM_GUARD_SAMPLE, src/hak_guard.c;
# docs/security.md, "Guarded sampling"), with tests/test_guard.c:
#   guard.*                  correct programs run clean with every allocation
#                            guarded (=1), at a moderate rate (=4096), and with
#                            heap profiles on as well (HAKMEM_SAMPLE_BYTES);
#                            the core and C++ tests too (=1)
#   guard.report.*           each misuse ends the process as it must (SIGSEGV,
#                            or abort when found at free) with a report naming
#                            it ("heap overflow", "heap underflow", "use after
#                            free", "double free"), the block's size and the
#                            stacks: the allocation's frame in site_alloc,
#                            the free's in site_free (file+offset, checked
#                            against nm; site_alloc also named)
#   guard.zero_first         a guarded block of 0 bytes (the first malloc)
#                            grows by realloc
#   guard.sized_delete_*     a sized delete of a guarded block passes its exact
#                            size, and only that
#   guard.off                with the option unset the same overflow is not
#                            caught (the cases can fail)
#   guard.maps               the mappings stay bounded under a heavy loop
#                            with a small N
#   guard.bad_value          a bad value is named in a warning
source "$(dirname "$0")/lib.sh"

BIN=$T/test_guard
need guard.bins "$BIN" "$REL_SO" || exit 1
SEGV=139 ABRT=134

run_bin guard.every 60 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$BIN" correct -p guard.every
run_bin guard.rate 60 env HAKMEM_GUARD_SAMPLE=4096 LD_PRELOAD="$REL_SO" "$BIN" correct -p guard.rate
run_bin guard.with_profile 60 env HAKMEM_GUARD_SAMPLE=2048 HAKMEM_SAMPLE_BYTES=4096 LD_PRELOAD="$REL_SO" \
    "$BIN" correct -p guard.with_profile
need guard.debug "$DBG_SO" &&
    run_bin guard.every_debug 60 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$DBG_SO" "$BIN" correct -p guard.every_debug
if [[ -x $T/test_api ]]; then
    run_bin guard.api 60 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$T/test_api" -p guard.api --expect-hakmem
fi
if [[ -x $T/test_cxx ]]; then
    run_bin guard.cxx 60 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$T/test_cxx" --expect-hakmem &&
        pass guard.cxx
fi
if [[ -x $T/test_stress ]]; then
    run_bin guard.stress 60 env HAKMEM_GUARD_SAMPLE=8192 LD_PRELOAD="$REL_SO" "$T/test_stress" -p guard.stress -s 0.3 --expect-hakmem
fi

expect_report guard.zero_first 0 "^zero: usable 0, ok$" env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$BIN" zero

# a sized delete of a guarded block must pass the size it was allocated with
if [[ -x $T/test_misuse ]]; then
    expect_report guard.sized_delete_ok 0 "^ok$" env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$T/test_misuse" sized_delete_ok
    expect_report guard.sized_delete_wrong $ABRT "size does not match the block" \
        env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$T/test_misuse" sized_delete_wrong
fi

# [lo, hi) of function $1 in the test binary, in hex, from nm -S
range() { nm -S "$BIN" | awk -v f="$1" '$4 == f { printf "%s %s\n", $1, $2 }'; }
# has_frame OUT FUNC: a report line "(…/test_guard+0xOFF)" with OFF inside FUNC
has_frame() {
    local lo len
    read -r lo len < <(range "$2")
    [[ -n $lo ]] || return 1
    local off
    for off in $(grep -oE "test_guard\+0x[0-9a-f]+\)" <<<"$1" | tr -d ')' | sed 's/.*+0x//'); do
        # a return address: after the call, at most at the function's end
        ((16#$off > 16#$lo && 16#$off <= 16#$lo + 16#$len)) && return 0
    done
    return 1
}
# report NAME CASE STATUS WHAT FREE AT: CASE dies with STATUS, its report says
# WHAT and has the allocation's frame (and the free's when FREE is 1), the
# block's size, the stack of the faulting access or of the call that found
# the misuse naming AT, and the next step
report() {
    local name=guard.report.$1 out rc at
    out=$(limit 30 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$BIN" "$2" 2>&1)
    rc=$?
    at=$(awk '/^hakmem: .* called by thread [0-9]+ at:$|^hakmem: the bad access, by thread [0-9]+, at:$/ { on = 1; next }
              on && /^hakmem:   / { print; next }
              on { exit }' <<<"$out")
    if (($3 != rc)); then fail "$name" "exit status $rc, want $3: $(head -c 400 <<<"$out")"
    elif grep -q SURVIVED <<<"$out"; then fail "$name" "the program ran on"
    elif ! grep -q "hakmem: $4" <<<"$out"; then fail "$name" "no '$4' in: $(head -c 400 <<<"$out")"
    elif ! grep -Eq "guarded block 0x[0-9a-f]+ of [0-9]+ bytes" <<<"$out"; then fail "$name" "no block and size: $(head -c 400 <<<"$out")"
    elif ! grep -q "allocated by thread" <<<"$out" || ! has_frame "$(sed -n '/allocated by/,/freed by/p' <<<"$out")" site_alloc; then
        fail "$name" "the allocation's stack lacks site_alloc: $(head -c 600 <<<"$out")"
    elif (($5)) && ! has_frame "$(sed -n '/freed by/,$p' <<<"$out")" site_free; then
        fail "$name" "the free's stack lacks site_free: $(head -c 600 <<<"$out")"
    elif ! grep -Eq "^hakmem:   #[0-9]+ 0x[0-9a-f]+ site_alloc\+0x[0-9a-f]+ \(" <<<"$out"; then
        fail "$name" "site_alloc not named in the stack: $(head -c 600 <<<"$out")"
    elif ! grep -Eq "^hakmem:   #[0-9]+ 0x[0-9a-f]+ $6\+0x[0-9a-f]+ \(" <<<"$at"; then
        fail "$name" "the stack of the bad access or of the call lacks $6: $(head -c 900 <<<"$out")"
    elif ! grep -q "^hakmem: next: " <<<"$out"; then
        fail "$name" "no next step: $(tail -c 300 <<<"$out")"
    else
        pass "$name"
    fi
}
report overflow32 overflow32 $SEGV "heap overflow at" 0 site_touch
report overflow24 overflow24 $ABRT "heap overflow (found at free)" 1 site_free
report overflow24_far overflow24_far $SEGV "heap overflow at" 0 site_touch
report underflow underflow $ABRT "heap underflow (found at free)" 1 site_free
report underflow_far underflow_far $SEGV "heap underflow at" 0 site_touch
report uaf uaf $SEGV "use after free at" 1 site_read
report uaf_thread uaf_thread $SEGV "use after free at" 1 site_touch
report double_free double_free $ABRT "double free at" 1 site_free

# the next step's addr2line on the faulting frame's FILE+ADDRESS names the
# line of the bad access (site_touch's write)
out=$(limit 30 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$BIN" uaf_thread 2>&1)
where=$(grep -oE "^hakmem:   #0 0x[0-9a-f]+ site_touch\+0x[0-9a-f]+ \([^)]*\)" <<<"$out" | sed 's/.*(\(.*\))$/\1/')
line=$(grep -n '((volatile char \*)p)\[off\] = 1;' tests/test_guard.c | cut -d: -f1)
if [[ -z $where ]]; then fail guard.report.addr2line "no site_touch frame: $(head -c 400 <<<"$out")"
elif a2l=$(addr2line -f -i -e "${where%+0x*}" "0x${where##*+0x}") && grep -q "test_guard.c:$line\b" <<<"$a2l"; then
    pass guard.report.addr2line
else fail guard.report.addr2line "addr2line -e ${where%+0x*} 0x${where##*+0x}: $a2l (want test_guard.c:$line)"; fi

# turned off the same overflow is not caught: the cases can fail
out=$(limit 30 env HAKMEM_GUARD_SAMPLE=0 LD_PRELOAD="$REL_SO" "$BIN" overflow32 2>&1)
if grep -q SURVIVED <<<"$out" && ! grep -q "guarded" <<<"$out"; then pass guard.off
else fail guard.off "overflow32 with HAKMEM_GUARD_SAMPLE=0: $(head -c 300 <<<"$out")"; fi

# on by default, at one block per 64 MiB: 4 GB in 4000-byte blocks guard
# about 60 (Poisson: fewer than 20 or more than 140 once in 10^9 runs);
# none with HAKMEM_GUARD_SAMPLE=0
for g in default 0; do
    set_env=()
    [[ $g == 0 ]] && set_env=(HAKMEM_GUARD_SAMPLE=0)
    out=$(limit 60 env "${set_env[@]}" LD_PRELOAD="$REL_SO" "$BIN" count 1000000 4000 2>&1)
    k=$(sed -n 's/^guarded: \([0-9]*\) of .*/\1/p' <<<"$out")
    if [[ -z $k ]]; then fail guard.$g.count "no count: $(head -c 300 <<<"$out")"
    elif [[ $g == default ]] && ((k >= 20 && k <= 140)); then pass "guard.default.count ($k of 1,000,000 blocks of 4000 bytes)"
    elif [[ $g == 0 ]] && ((k == 0)); then pass "guard.0.count (none)"
    else fail guard.$g.count "$k guarded of 1,000,000"; fi
done

# the mappings stay bounded: at most two more per slot (512) and a few
for n in 1 4096; do
    out=$(limit 60 env HAKMEM_GUARD_SAMPLE=$n LD_PRELOAD="$REL_SO" "$BIN" maps 1000000 2>&1)
    echo "# HAKMEM_GUARD_SAMPLE=$n: $out"
    read -r before max < <(sed -n 's/^maps: before \([0-9]*\), max \([0-9]*\).*/\1 \2/p' <<<"$out")
    if [[ -z $max ]]; then fail guard.maps.$n "no count: $(head -c 300 <<<"$out")"
    elif ((max > before + 2 * 512 + 16)); then fail guard.maps.$n "$max mappings, $before before"
    else pass "guard.maps.$n ($before before, at most $max)"; fi
done

out=$(limit 30 env HAKMEM_GUARD_SAMPLE=lots LD_PRELOAD="$REL_SO" "$BIN" correct -t realloc 2>&1)
if grep -q "warning: HAKMEM_GUARD_SAMPLE='lots'" <<<"$out"; then pass guard.bad_value
else fail guard.bad_value "no warning naming HAKMEM_GUARD_SAMPLE: $(head -c 300 <<<"$out")"; fi

exit $SUITE_STATUS
