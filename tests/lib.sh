# tests/lib.sh -- sourced by the tests/suite_*.sh scripts.
# Puts the shell in the repository root with a clean environment (no HAKMEM_*
# variables but one, no LD_PRELOAD) and provides helpers that keep the
# PASS/FAIL/SKIP protocol intact when a test binary crashes or hangs.
#
# HAKMEM_BACKGROUND_PURGE is the one HAKMEM_* variable kept:
# `HAKMEM_BACKGROUND_PURGE=1 make test` runs every test program under the
# background purger (docs/build.md, "Running the tests").  A test whose
# verdict depends on the purger sets HAKMEM_BACKGROUND_PURGE=0 or =1 itself.
#
# Time limits: every program a suite runs is under a limit with SIGKILL as
# its last word (run_bin, expect_report and `limit` below: timeout -k 5, so
# a program that blocks or ignores SIGTERM is still killed 5 s later), and a
# program that runs out of time is reported as "FAIL <test name>: timed out
# after Ns".  Limits are at most 60 s, so a hang is reported within a
# minute; the one exception is fuzz.libfuzzer (suite_fuzz.sh), whose limit
# is FUZZ_TEST_SECONDS + 30 (55 s by default; more only when asked for a
# longer fuzzing run).  suite_bench.sh, which does not source this file,
# uses timeout -k 5 directly.  Each run_bin prints its time ("# NAME: 1.2 s
# (limit 60 s)"): the longest today, on a loaded 2-core machine, are
# lifecycle.*.fork_busy (17-27 s) and fuzz.libfuzzer.
# tests/run_tests.sh keeps a per-suite limit (TEST_SUITE_TIMEOUT) as a backstop.

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$PWD
T=$ROOT/build/tests
REL_SO=$ROOT/build/libhakmem.so
DBG_SO=$ROOT/build/debug/libhakmem.so
HRD_SO=$ROOT/build/hardened/libhakmem.so   # make hardened
export LC_ALL=C
unset LD_PRELOAD LD_LIBRARY_PATH MALLOC_CHECK_ MALLOC_PERTURB_ GLIBC_TUNABLES
for _v in $(compgen -e); do
    [[ $_v == HAKMEM_* && $_v != HAKMEM_BACKGROUND_PURGE ]] && unset "$_v"
done
unset _v
SUITE_STATUS=0

# run_bin NAME SECONDS CMD...: run a test binary, show its output and its
# time ("# NAME: 1.2 s (limit 60 s)"); add a FAIL
# line if it timed out, died from a signal (naming the last test it reported),
# or exited non-zero without reporting a FAIL itself.  Returns its status.
run_bin() {
    local name=$1 limit=$2
    shift 2
    local out rc last
    local t0=$EPOCHREALTIME
    out=$(mktemp)
    timeout -k 5 "$limit" "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
    awk -v n="$name" -v a="$t0" -v b="$EPOCHREALTIME" -v l="$limit" \
        'BEGIN { printf "# %s: %.1f s (limit %d s)\n", n, b - a, l }'
    last=$(grep -E '^(PASS|FAIL|SKIP) ' "$out" | tail -n 1 | cut -d' ' -f2 | tr -d ':')
    last=${last:+, after $last}
    if ((rc == 124 || rc == 137)); then
        echo "FAIL $name: timed out after ${limit}s${last}"
    elif ((rc > 128)); then
        echo "FAIL $name: crashed, signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))${last}"
    elif ((rc != 0)) && ! grep -q '^FAIL ' "$out"; then
        echo "FAIL $name: exited with status $rc${last}"
    fi
    rm -f "$out"
    ((rc == 0)) || SUITE_STATUS=1
    return $rc
}

# limit SECONDS CMD...: CMD under a time limit that ends with SIGKILL; its
# status is 124 or 137 when it ran out of time (timed_out tells)
limit() {
    local secs=$1
    shift
    timeout -k 5 "$secs" "$@"
}
timed_out() { (($1 == 124 || $1 == 137)); }

# need NAME FILE...: print "FAIL NAME: missing FILE" and return 1 if a file is absent
need() {
    local name=$1 f
    shift
    for f in "$@"; do
        if [[ ! -e $f ]]; then
            echo "FAIL $name: missing $f (run make test-bins)"
            SUITE_STATUS=1
            return 1
        fi
    done
}

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; SUITE_STATUS=1; }
skip() { echo "SKIP $1: $2"; }

# report_ran NAME STATUS REGEX SECS RC OUT: the checks every misuse case
# shares -- not timed out, exit status STATUS, the output matches REGEX;
# prints the FAIL line and returns 1 when one fails.
report_ran() {
    local name=$1 want=$2 re=$3 secs=$4 rc=$5 out=$6
    if timed_out "$rc"; then
        fail "$name" "timed out after ${secs}s"
    elif ((rc != want)); then
        fail "$name" "exit status $rc, want $want; output: $(head -c 400 <<<"$out")"
    elif ! grep -Eq -- "$re" <<<"$out"; then
        fail "$name" "output lacks /$re/: $(head -c 400 <<<"$out")"
    else
        return 0
    fi
    return 1
}

# expect_report NAME STATUS REGEX CMD...: a misuse case.  Runs CMD (under a
# limit of EXPECT_LIMIT seconds, default 30); passes when it exits with
# STATUS (134: SIGABRT), its output matches REGEX (the report) and it did not
# print SURVIVED (the program ran on after the misuse).
expect_report() {
    local name=$1 want=$2 re=$3 out rc secs=${EXPECT_LIMIT:-30}
    shift 3
    out=$(limit "$secs" "$@" 2>&1)
    rc=$?
    report_ran "$name" "$want" "$re" "$secs" "$rc" "$out" || return 0
    if grep -q SURVIVED <<<"$out"; then
        fail "$name" "program ran on after the misuse"
    else
        pass "$name"
    fi
}

# expect_full NAME STATUS FIRST FUNC BLOCK CMD...: a misuse case whose
# report is whole (issue 37).  Runs CMD as expect_report does; passes when
# it exits with STATUS, a line matches FIRST (what was found, by which
# call), the stack of the call that found it -- or of the faulting access
# -- names FUNC (the test's own function that made the call: one of
# "#N 0x... FUNC+0x... (FILE+0x...)"), a line matches BLOCK (the block and
# its size), a "hakmem: next: " line follows, and it did not print SURVIVED.
expect_full() {
    local name=$1 want=$2 first=$3 func=$4 block=$5 out rc stack secs=${EXPECT_LIMIT:-30}
    shift 5
    out=$(limit "$secs" "$@" 2>&1)
    rc=$?
    report_ran "$name" "$want" "$first" "$secs" "$rc" "$out" || return 0
    stack=$(awk '/^hakmem: .* called by thread [0-9]+ at:$|^hakmem: the bad access, by thread [0-9]+, at:$/ { on = 1; next }
                 on && /^hakmem:   / { print; next }
                 on { exit }' <<<"$out")
    if ! grep -Eq "^hakmem:   #[0-9]+ 0x[0-9a-f]+ $func\+0x[0-9a-f]+ \(" <<<"$stack"; then
        fail "$name" "the stack of the call does not name $func: $(head -c 900 <<<"$out")"
    elif ! grep -Eq -- "$block" <<<"$out"; then
        fail "$name" "output lacks the block /$block/: $(head -c 400 <<<"$out")"
    elif ! grep -q "^hakmem: next: " <<<"$out"; then
        fail "$name" "no next-step line: $(tail -c 400 <<<"$out")"
    elif grep -q SURVIVED <<<"$out"; then
        fail "$name" "program ran on after the misuse"
    else
        pass "$name"
    fi
}

# build_compat PREFIX WORKDIR: the helper programs of mk/compat.mk (skipped
# when up to date); on failure print "FAIL PREFIX.build" and return 1
build_compat() {
    local prefix=$1 work=$2
    need "$prefix.setup" "$REL_SO" "$ROOT/build/libhakmem.a" || return 1
    if ! make --no-print-directory -s -f mk/compat.mk compat-bins >"$work/make.log" 2>&1; then
        fail "$prefix.build" "make -f mk/compat.mk compat-bins failed: $(tail -n 3 "$work/make.log" | tr '\n' ' ')"
        return 1
    fi
}
