# tests/lib.sh -- sourced by the tests/suite_*.sh scripts.
# Puts the shell in the repository root with a clean environment (no HAKMEM_*
# variables, no LD_PRELOAD) and provides helpers that keep the PASS/FAIL/SKIP
# protocol intact when a test binary crashes or hangs.

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$PWD
T=$ROOT/build/tests
REL_SO=$ROOT/build/libhakmem.so
DBG_SO=$ROOT/build/debug/libhakmem.so
export LC_ALL=C
unset LD_PRELOAD LD_LIBRARY_PATH MALLOC_CHECK_ MALLOC_PERTURB_ GLIBC_TUNABLES
for _v in $(compgen -e); do
    [[ $_v == HAKMEM_* ]] && unset "$_v"
done
unset _v
SUITE_STATUS=0

# run_bin NAME SECONDS CMD...: run a test binary, show its output; add a FAIL
# line if it timed out, died from a signal (naming the last test it reported),
# or exited non-zero without reporting a FAIL itself.  Returns its status.
run_bin() {
    local name=$1 limit=$2
    shift 2
    local out rc last
    out=$(mktemp)
    timeout -k 5 "$limit" "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
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

# expect_report NAME STATUS REGEX CMD...: a misuse case.  Runs CMD; passes
# when it exits with STATUS (134: SIGABRT), its output matches REGEX (the
# report) and it did not print SURVIVED (the program ran on after the misuse).
expect_report() {
    local name=$1 want=$2 re=$3 out rc
    shift 3
    out=$("$@" 2>&1)
    rc=$?
    if ((rc != want)); then
        fail "$name" "exit status $rc, want $want; output: $(head -c 300 <<<"$out")"
    elif ! grep -Eq -- "$re" <<<"$out"; then
        fail "$name" "output lacks /$re/: $(head -c 300 <<<"$out")"
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
