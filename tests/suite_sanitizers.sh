#!/usr/bin/env bash
# suite_sanitizers.sh -- hakmem built with -DHAK_NO_OVERRIDE and sanitizers,
# driven through hakmem_* names (tests/hak_prefix.h):
#   asan.api, asan.stress   ASan + UBSan (halt_on_error=1)
#   tsan.stress             TSan (every report collected, fork children stay
#                           single-threaded: TSan cannot start threads there;
#                           so HAKMEM_BACKGROUND_PURGE=0, the purger is a thread)
#   tsan.stress.purger      the same with HAKMEM_BACKGROUND_PURGE=1 and TSan's
#                           die_after_fork=0 (the children start the purger)
# Besides the tests' own PASS/FAIL lines, each run adds <name>.clean: FAIL
# with the sanitizer's first SUMMARY line if it reported anything (a crash or
# timeout without a report is reported by run_bin).
source "$(dirname "$0")/lib.sh"

# san_run NAME SECONDS CMD...: run_bin, then the sanitizer verdict
san_run() {
    local name=$1 limit=$2
    shift 2
    local log rc
    log=$(mktemp)
    run_bin "$name" "$limit" "$@" >"$log" 2>&1
    rc=$?
    local reports first
    reports=$(grep -c '^SUMMARY: .*Sanitizer' "$log")
    first=$(grep -m1 -E '^SUMMARY: .*Sanitizer|runtime error:' "$log")
    if ((reports > 0)) || [[ -n $first ]]; then
        # the sanitizer verdict below replaces run_bin's generic exit-status line
        grep -E '^(PASS|FAIL|SKIP) ' "$log" | grep -v "^FAIL $name: exited with status"
        fail "$name.clean" "$reports sanitizer report(s); first: $first"
        # the first report in full, for the log
        awk '/^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|.*runtime error:)/ { on = 1 }
             on && n++ < 40 { print "# " $0 }' "$log"
    else
        grep -E '^(PASS|FAIL|SKIP) ' "$log"
        pass "$name.clean"
    fi
    rm -f "$log"
}

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=0:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=0:exitcode=66:second_deadlock_stack=1:history_size=4

if need asan.api "$T/asan/test_api"; then
    san_run asan.api 60 "$T/asan/test_api" -p asan.api --expect-hakmem
fi
if need asan.stress "$T/asan/test_stress"; then
    san_run asan.stress 60 "$T/asan/test_stress" -p asan.stress --expect-hakmem -s 0.4 -t 6
fi
if need tsan.stress "$T/tsan/test_stress"; then
    # the purger off: its thread would be a thread started in a fork child
    san_run tsan.stress 60 env HAKMEM_BACKGROUND_PURGE=0 "$T/tsan/test_stress" -p tsan.stress \
        --expect-hakmem -s 0.2 -t 8 --fork-no-threads
    # the purger on; TSan lets a fork child start it (die_after_fork=0)
    TSAN_OPTIONS=$TSAN_OPTIONS:die_after_fork=0 san_run tsan.stress.purger 60 env HAKMEM_BACKGROUND_PURGE=1 \
        "$T/tsan/test_stress" -p tsan.stress.purger --expect-hakmem -s 0.2 -t 8 --fork-no-threads
fi
exit $SUITE_STATUS
