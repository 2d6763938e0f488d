#!/usr/bin/env bash
# suite_hardened.sh -- the hardened build (make hardened; docs/security.md,
# "The hardened build"), each case under LD_PRELOAD=build/hardened/libhakmem.so
# with no HAKMEM_* option but its own:
#   hardened.<misuse>   one misuse per run (tests/test_hardened.c): hakmem's
#                       report and SIGABRT, or SIGSEGV for the guard pages
#   hardened.<test>     correct programs run clean (usable size and the zero
#                       byte after a block, the quarantine, realloc, calloc,
#                       aligned, cross-thread frees, fork, the mapping count)
#   hardened.memcheck.<case>  one bad copy per run (tests/test_memcheck.c):
#                       reported at the copy, before the write, naming it
#   hardened.memcheck.ok.<build>  correct copies run clean under every build
# and the release build is not hardened (hardened.release_unchanged,
# hardened.memcheck.release_unchanged).
source "$(dirname "$0")/lib.sh"
BIN=$T/test_hardened
need hardened "$BIN" "$HRD_SO" "$REL_SO" || exit 1

ABRT=134 SEGV=139 P='0x[0-9a-f]+'
# expect NAME CASE STATUS REGEX [ENV...]
expect() {
    local name=$1 case=$2 want=$3 re=$4
    shift 4
    expect_report "hardened.$name" "$want" "$re" env "$@" HAKMEM_CRASH_HANDLER=0 LD_PRELOAD="$HRD_SO" "$BIN" "$case"
}
expect overflow_canary   overflow_canary   $ABRT "^hakmem: free\(\): heap overflow detected \(the canary after the block was overwritten\) in block $P"
expect overflow_canary_short overflow_canary_short $ABRT "^hakmem: free\(\): heap overflow detected \(the canary after the block was overwritten\) in block $P"
expect overflow_canary_byte  overflow_canary_byte  $ABRT "^hakmem: free\(\): heap overflow detected \(the canary after the block was overwritten\) in block $P"
expect overflow_canary_long  overflow_canary_long  $ABRT "^hakmem: free\(\): heap overflow detected \(the canary after the block was overwritten\) in block $P"
expect overflow_past_canary  overflow_past_canary  $ABRT \
    "^hakmem: free\(\): quarantined block $P: bytes at offset 544 changed after free, or an overflow ran past the canary"
expect overflow_tail_large   overflow_tail_large   $ABRT "^hakmem: free\(\): heap overflow detected \(the slot past the canary was written\) in block $P"
expect overflow_tail_realloc overflow_tail_realloc $ABRT "^hakmem: realloc\(\): heap overflow detected \(the slot past the canary was written\) in block $P"
expect overflow_trailer  overflow_trailer  $ABRT "^hakmem: free\(\): heap overflow detected \(the size word after the block was overwritten\) in block $P"
expect overflow_realloc  overflow_realloc  $ABRT "^hakmem: realloc\(\): heap overflow detected .* in block $P"
expect underflow         underflow         $ABRT "^hakmem: free\(\): heap overflow detected .* in block $P"
expect underflow_large   underflow_large   $ABRT "^hakmem: free\(\): heap underflow detected \(the bytes before the block were overwritten\) in block $P"
expect write_after_free_reuse      write_after_free_reuse      $ABRT \
    "^hakmem: malloc\(\): write after free detected in the block it would return $P"
expect write_after_free_quarantine write_after_free_quarantine $ABRT \
    "^hakmem: (free|malloc)\(\): write after free detected in a quarantined block \((as it left the quarantine|by this allocation's probe of the quarantine)\) at $P"
expect write_after_free_far        write_after_free_far        $ABRT \
    "^hakmem: free\(\): write after free detected in a quarantined block \(as it left the quarantine\) at $P"
# every report names the block and its size, the stack of the call that
# found the misuse (the test's own function that made the call) and the
# next step (issue 37); the operation named is the one whose check found it
# (a malloc's probe of the quarantine, called by report_mallocs: not free)
full() { local n=$1 c=$2 first=$3 fn=$4 blk=$5; shift 5
         expect_full hardened.report.$n $ABRT "$first" "$fn" "$blk" env "$@" HAKMEM_CRASH_HANDLER=0 LD_PRELOAD="$HRD_SO" "$BIN" "$c"; }
full overflow report_overflow "^hakmem: free\(\): heap overflow detected" report_free_block \
    "^hakmem: the block: $P, a small block of size class 32 bytes$"
full probe report_probe "^hakmem: malloc\(\): write after free detected in a quarantined block \(by this allocation's probe of the quarantine\) at $P" \
    report_mallocs "^hakmem: the block: $P, a small block of size class 80 bytes$"
full quarantine report_quarantine "^hakmem: free\(\): write after free detected in a quarantined block \(as it left the quarantine\) at $P" \
    report_churn "^hakmem: the block: $P, a small block of size class 80 bytes$"
full reuse report_reuse "^hakmem: malloc\(\): write after free detected in the block it would return $P" \
    report_mallocs "^hakmem: the block: $P, a small block of size class 80 bytes$"
# a far write faults past the segment's first MiB, where no page lies: the
# crash handler's report (the faulting access's stack)
expect_full hardened.report.far $SEGV "^hakmem: SIGSEGV: access to $P, [0-9]+ KiB into hakmem's segment $P, past the first 1024 KiB" \
    report_write_far "where its pages lie \(no block lies there\)" env LD_PRELOAD="$HRD_SO" "$BIN" report_far
expect huge_use_after_free huge_use_after_free $SEGV ""
expect huge_guard_reused huge_guard_reused $SEGV ""
expect double_free       double_free       $ABRT "^hakmem: free\(\): pointer already freed $P"
expect delete_malloc     delete_malloc     $ABRT "^hakmem: operator delete\(\): block not allocated by operator new $P"
expect sized_delete      sized_delete      $ABRT "^hakmem: operator delete\(\): size does not match the block \(sized delete\) $P"
expect huge_guard        huge_guard        $SEGV ""
expect segment_guard     segment_guard     $SEGV ""
# the release build has none of it: the same overflow runs on
out=$(limit 30 env LD_PRELOAD="$REL_SO" "$BIN" overflow_canary 2>&1)
[[ $? == 0 && $out == SURVIVED ]] && pass hardened.release_unchanged ||
    fail hardened.release_unchanged "the release build stopped the overflow: $(head -c 200 <<<"$out")"

# the checked copies (src/hak_memcheck.c): each bad copy reported before it writes
MC=$T/test_memcheck
if need hardened.memcheck "$MC"; then
    mc() {   # mc CASE REGEX
        expect_report "hardened.memcheck.$1" $ABRT "$2" env HAKMEM_CRASH_HANDLER=0 LD_PRELOAD="$HRD_SO" "$MC" "$1"
    }
    B="the 48-byte block $P; aborting"
    mc memcpy_over   "^hakmem: memcpy\(\): write of 49 bytes at $P overflows by 1 byte $B"
    mc memcpy_past   "^hakmem: memcpy\(\): write of 1 byte at $P starts 0 bytes past the end of $B"
    mc memcpy_under  "^hakmem: memcpy\(\): write of 1 byte at $P starts 1 byte before \(underflow\) $B"
    mc memmove_over  "^hakmem: memmove\(\): write of 9 bytes at $P overflows by 1 byte $B"
    mc memset_over   "^hakmem: memset\(\): write of 64 bytes at $P overflows by 16 bytes $B"
    mc mempcpy_over  "^hakmem: mempcpy\(\): write of 48 bytes at $P overflows by 1 byte $B"
    mc strcpy_over   "^hakmem: strcpy\(\): write of 49 bytes at $P overflows by 1 byte $B"
    mc stpcpy_over   "^hakmem: stpcpy\(\): write of 49 bytes at $P overflows by 1 byte $B"
    mc strncpy_over  "^hakmem: strncpy\(\): write of 49 bytes at $P overflows by 1 byte $B"
    mc strcat_over   "^hakmem: strcat\(\): write of 41 bytes at $P overflows by 1 byte $B"
    mc strncat_over  "^hakmem: strncat\(\): write of 41 bytes at $P overflows by 1 byte $B"
    mc huge_over     "^hakmem: memset\(\): write of 9 bytes at $P overflows by 1 byte the 4194304-byte block $P"
    mc aligned_over  "^hakmem: memset\(\): write of 4096 bytes at $P overflows by 3996 bytes the 100-byte block $P"
    mc freed         "^hakmem: memset\(\): write of 8 bytes at $P \(offset 0\) into the freed block $P"
    mc before_write  "^UNWRITTEN"
    # correct copies: none reported, under every build
    run_bin hardened.memcheck.ok.release 120 env LD_PRELOAD="$REL_SO" "$MC" -p hardened.memcheck.ok.release
    run_bin hardened.memcheck.ok.debug 120 env LD_PRELOAD="$DBG_SO" "$MC" -p hardened.memcheck.ok.debug
    run_bin hardened.memcheck.ok.hardened 120 env LD_PRELOAD="$HRD_SO" "$MC" -p hardened.memcheck.ok.hardened
    # the release build exports no checked copy: the bad one runs on
    out=$(limit 30 env LD_PRELOAD="$REL_SO" "$MC" memcpy_over 2>&1)
    [[ $? == 0 && $out == SURVIVED ]] && pass hardened.memcheck.release_unchanged ||
        fail hardened.memcheck.release_unchanged "the release build stopped the copy: $(head -c 200 <<<"$out")"
fi

run_bin hardened.programs 120 env LD_PRELOAD="$HRD_SO" "$BIN" -p hardened
# the allocation API's conformance and every operator new/delete form hold
# in this build too (a block aligned to 4 MiB or more crashed its free with
# SIGSEGV until 2026-11-26: hardened.programs's aligned_huge)
need hardened.api "$T/test_api" "$T/test_cxx" &&
    run_bin hardened.api 120 env LD_PRELOAD="$HRD_SO" "$T/test_api" -p hardened.api \
        --expect-hakmem --variant hardened
out=$(limit 60 env LD_PRELOAD="$HRD_SO" "$T/test_cxx" --expect-hakmem 2>&1)
[[ $? == 0 && $out == *"result: ok"* ]] && pass hardened.cxx ||
    fail hardened.cxx "$(tail -c 300 <<<"$out")"
# guarded sampling is off in this build, with a warning naming the option
# (a guarded block has no room for the trailer: every one was reported as
# an overflow)
run_bin hardened.programs.guard_sample 120 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$HRD_SO" "$BIN" -p hardened.guard_sample
out=$(limit 30 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$HRD_SO" "$BIN" overflow_canary 2>&1)
if grep -q '^hakmem: warning: HAKMEM_GUARD_SAMPLE=1 is not for the hardened build' <<<"$out" &&
   grep -q 'heap overflow detected' <<<"$out"; then pass hardened.guard_sample_warning
else fail hardened.guard_sample_warning "no warning, or the overflow not reported: $(head -c 300 <<<"$out")"; fi
run_bin hardened.programs.purger 120 env HAKMEM_BACKGROUND_PURGE=1 HAKMEM_PURGE_DELAY_MS=0 \
    LD_PRELOAD="$HRD_SO" "$BIN" -p hardened.purger
exit $SUITE_STATUS
