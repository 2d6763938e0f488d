#!/usr/bin/env bash
# suite_programs.sh -- real programs under LD_PRELOAD=build/libhakmem.so, each
# output compared with a run on the system allocator: python3 (PYTHONMALLOC=
# malloc, dict/list/str churn and a JSON round trip), sort and awk on a few MB
# of generated text, and the C++ program tests/test_cxx.cc.  Also proves the
# preload took effect (check_preload, LD_DEBUG=bindings, hakmem_owns via ctypes).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export TMPDIR=$W

if ! need programs.setup "$REL_SO" "$T/check_preload" "$T/test_cxx"; then
    exit 1
fi

# run_pair NAME SECONDS BASE_ARGS -- HAK_ARGS: run the command without and
# with hakmem preloaded (HAK_ARGS may add flags such as --expect-hakmem);
# PASS if both succeed with identical stdout.
run_pair() {
    local name=$1 limit=$2 so=${SO:-$REL_SO}
    shift 2
    local base=() hak=()
    while (($#)) && [[ $1 != -- ]]; do base+=("$1"); shift; done
    shift
    hak=("$@")
    timeout -k 5 "$limit" "${base[@]}" >"$W/base.out" 2>"$W/base.err"
    local rb=$?
    timeout -k 5 "$limit" env LD_PRELOAD="$so" "${hak[@]}" >"$W/hak.out" 2>"$W/hak.err"
    local rh=$?
    if ((rb != 0)); then
        fail "$name" "baseline run (no hakmem) exited $rb: $(tail -n 2 "$W/base.err" | tr '\n' ' ')"
    elif ((rh != 0)); then
        fail "$name" "under hakmem exited $rh: $(tail -n 3 "$W/hak.err" | tr '\n' ' ')"
    elif ! cmp -s "$W/base.out" "$W/hak.out"; then
        fail "$name" "output differs from the system-allocator run: $(diff "$W/base.out" "$W/hak.out" | head -n 4 | tr '\n' ' ')"
    else
        pass "$name"
    fi
    sed 's/^/# /' "$W/hak.err" | head -n 5
}

# bound NAME PROGRAM ARGS...: LD_DEBUG=bindings shows PROGRAM's malloc bound to libhakmem
bound() {
    local name=$1
    shift
    if LD_DEBUG=bindings LD_PRELOAD="$REL_SO" "$@" 2>&1 >/dev/null |
        grep -q "to $REL_SO .*symbol \`malloc'"; then
        pass "$name"
    else
        fail "$name" "LD_DEBUG=bindings: $1's malloc is not bound to $REL_SO"
    fi
}

# ---- the preload takes effect ----
out=$(LD_PRELOAD="$REL_SO" "$T/check_preload" release 2>&1) && pass programs.preload_release ||
    fail programs.preload_release "$out"
if [[ -e $DBG_SO ]]; then
    out=$(LD_PRELOAD="$DBG_SO" "$T/check_preload" debug 2>&1) && pass programs.preload_debug ||
        fail programs.preload_debug "$out"
fi
out=$("$T/check_preload" 2>&1) && fail programs.preload_baseline "hakmem present without preload: $out" ||
    pass programs.preload_baseline
bound programs.sort_bound_to_hakmem sort --version
bound programs.python_bound_to_hakmem "$PY" -c pass

# ---- python ----
run_pair programs.python 120 env PYTHONMALLOC=malloc "$PY" tests/programs/churn.py -- \
    env PYTHONMALLOC=malloc "$PY" tests/programs/churn.py --expect-hakmem

# ---- sort / awk on ~6 MB generated deterministically (Park-Miller LCG) ----
awk 'BEGIN { x = 12345
             for (i = 0; i < 300000; i++) {
                 x = (x * 16807) % 2147483647; w = ""
                 n = 3 + x % 12
                 for (j = 0; j < n; j++) { x = (x * 16807) % 2147483647; w = w sprintf("%c", 97 + x % 26) }
                 x = (x * 16807) % 2147483647
                 print w, x % 1000000, i
             } }' >"$W/input.txt"
run_pair programs.sort 120 sort "$W/input.txt" -- sort "$W/input.txt"
run_pair programs.sort_numeric_parallel 120 sort -S 32M --parallel=2 -k2,2n -k1,1 "$W/input.txt" -- \
    sort -S 32M --parallel=2 -k2,2n -k1,1 "$W/input.txt"
run_pair programs.sort_small_buffer 120 sort -S 1M -r "$W/input.txt" -- sort -S 1M -r "$W/input.txt"
AWK_PROG='{ n[$1]++; s[$1] = s[$1] substr($1, 1, 2) } END { for (k in n) print k, n[k], length(s[k]) }'
run_pair programs.awk 120 sh -c "awk '$AWK_PROG' '$W/input.txt' | sort" -- \
    sh -c "awk '$AWK_PROG' '$W/input.txt' | sort"

# ---- C++ ----
run_pair programs.cxx 60 "$T/test_cxx" -- "$T/test_cxx" --expect-hakmem
if [[ -e $DBG_SO ]]; then
    SO=$DBG_SO run_pair programs.cxx_debug 120 "$T/test_cxx" -- "$T/test_cxx" --expect-hakmem
fi
exit $SUITE_STATUS
