#!/usr/bin/env bash
# tests/run_tests.sh -- run every tests/suite_*.sh (sorted) and tally results.
#
# Protocol: a suite prints one line per test case
#     PASS <name> | FAIL <name>: <reason> | SKIP <name>: <reason>
# and anything else it likes.  A suite that times out, dies from a signal, or
# exits non-zero without printing a FAIL line adds one FAIL named after it.
# The last line is exactly "N passed, N failed" (", N skipped" when N > 0);
# the exit status is non-zero if anything failed.
#   TEST_SUITES="core programs"  run only suite_core.sh and suite_programs.sh
#   TEST_SUITE_TIMEOUT=secs      per-suite limit (default 1500)
set -u
cd "$(dirname "$0")/.." || exit 2
export LC_ALL=C

timeout_s=${TEST_SUITE_TIMEOUT:-1500}
pass=0 fail=0 skip=0
failed=()
t_all=$(date +%s.%N)

suites=()
for s in tests/suite_*.sh; do
    [[ -f $s ]] || continue
    name=$(basename "$s" .sh)
    if [[ -n ${TEST_SUITES:-} ]]; then
        [[ " $TEST_SUITES " == *" ${name#suite_} "* ]] || continue
    fi
    suites+=("$s")
done

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT

for s in "${suites[@]}"; do
    name=$(basename "$s" .sh)
    echo "=== $name"
    t0=$(date +%s.%N)
    timeout -k 15 "$timeout_s" bash "$s" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    t1=$(date +%s.%N)
    sp=$(grep -c '^PASS ' "$log")
    sf=$(grep -c '^FAIL ' "$log")
    ss=$(grep -c '^SKIP ' "$log")
    while IFS= read -r line; do
        failed+=("$line")
    done < <(grep '^FAIL ' "$log")
    extra=
    if ((rc == 124 || rc == 137)); then
        extra="FAIL $name: timed out after ${timeout_s}s"
    elif ((rc > 128)); then
        extra="FAIL $name: killed by signal $((rc - 128))"
    elif ((rc != 0 && sf == 0)); then
        extra="FAIL $name: exited with status $rc"
    fi
    if [[ -n $extra ]]; then
        echo "$extra"
        failed+=("$extra")
        sf=$((sf + 1))
    fi
    pass=$((pass + sp)) fail=$((fail + sf)) skip=$((skip + ss))
    printf -- '--- %s: %d passed, %d failed, %d skipped (%s s)\n' "$name" "$sp" "$sf" "$ss" \
        "$(elapsed "$t0" "$t1")"
done

echo "=== total time $(elapsed "$t_all" "$(date +%s.%N)") s"
if ((${#failed[@]})); then
    echo "=== failures:"
    printf '  %s\n' "${failed[@]}"
fi
summary="$pass passed, $fail failed"
((skip > 0)) && summary+=", $skip skipped"
echo "$summary"
((fail == 0))
