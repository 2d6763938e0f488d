#!/usr/bin/env bash
# suite_programs.sh -- real programs under LD_PRELOAD=build/libhakmem.so, each
# output compared with a run on the system allocator: python3 (PYTHONMALLOC=
# malloc, dict/list/str churn and a JSON round trip), sort and awk on a few MB
# of generated text, and the C++ program tests/test_cxx.cc.  Also proves the
# preload took effect (check_preload, LD_DEBUG=bindings, hakmem_owns via ctypes).
# Python, sort and the C++ program run again under each profile and the
# options that change behaviour (programs.*.<setting>).
# The hardened build (make hardened) runs them too, and gcc, sqlite3, git
# and perl (programs.*.hardened).
# Under HAKMEM_BACKGROUND_PURGE=1 (issue 28): a Python child forked from a
# thread exits once its threads end (tests/programs/fork_thread_join.py,
# release and debug), and CPython's own ThreadJoinOnShutdown tests give the
# verdicts they give without hakmem.
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
    if timed_out $rb || timed_out $rh; then
        fail "$name" "timed out after ${limit}s ($(timed_out $rb && echo baseline run || echo under hakmem))"
    elif ((rb != 0)); then
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
    if LD_DEBUG=bindings LD_PRELOAD="$REL_SO" limit 30 "$@" 2>&1 >/dev/null |
        grep -q "to $REL_SO .*symbol \`malloc'"; then
        pass "$name"
    else
        fail "$name" "LD_DEBUG=bindings: $1's malloc is not bound to $REL_SO"
    fi
}

# ---- the preload takes effect ----
out=$(LD_PRELOAD="$REL_SO" limit 30 "$T/check_preload" release 2>&1) && pass programs.preload_release ||
    fail programs.preload_release "$out"
if [[ -e $DBG_SO ]]; then
    out=$(LD_PRELOAD="$DBG_SO" limit 30 "$T/check_preload" debug 2>&1) && pass programs.preload_debug ||
        fail programs.preload_debug "$out"
fi
out=$(limit 30 "$T/check_preload" 2>&1) && fail programs.preload_baseline "hakmem present without preload: $out" ||
    pass programs.preload_baseline
bound programs.sort_bound_to_hakmem sort --version
bound programs.python_bound_to_hakmem "$PY" -c pass

# ---- python ----
run_pair programs.python 60 env PYTHONMALLOC=malloc "$PY" tests/programs/churn.py -- \
    env PYTHONMALLOC=malloc "$PY" tests/programs/churn.py --expect-hakmem

# ---- python: fork from a thread, then exit, under the background purger ----
for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    [[ -e $so ]] || continue
    name=programs.python_fork_thread_join.purger_$v
    run_bin $name 30 env PYTHONMALLOC=malloc HAKMEM_BACKGROUND_PURGE=1 LD_PRELOAD="$so" \
        "$PY" tests/programs/fork_thread_join.py $name
done
# CPython's ThreadJoinOnShutdown tests (libpython3.11-testsuite, installed by
# tools/install-deps.sh): the per-test verdicts must be those of a run
# without hakmem; regrtest's own --timeout ends a hung test inside the limit
if "$PY" -c 'import test.test_threading' 2>/dev/null; then
    name=programs.cpython_join_on_shutdown.purger
    verdicts() {   # LOG: the verbose per-test verdict lines, sorted
        grep -E ' \.\.\. (ok|skipped.*|expected failure|FAIL|ERROR)$|Timeout \(' "$1" | sort
    }
    (cd "$W" && timeout -k 5 30 env PYTHONMALLOC=malloc "$PY" -m test test_threading -v --timeout 20 \
        -m ThreadJoinOnShutdown) >"$W/tj.base" 2>&1
    rb=$?
    (cd "$W" && timeout -k 5 30 env PYTHONMALLOC=malloc HAKMEM_BACKGROUND_PURGE=1 LD_PRELOAD="$REL_SO" \
        "$PY" -m test test_threading -v --timeout 20 -m ThreadJoinOnShutdown) >"$W/tj.hak" 2>&1
    rh=$?
    hung=$(grep -m1 'Timeout (' "$W/tj.hak" | grep -o '^test_[a-z0-9_]*')
    if ((rb != 0)); then
        fail $name "the run without hakmem failed ($rb): $(tail -n 2 "$W/tj.base" | tr '\n' ' ')"
    elif ((rh == 124 || rh == 137)); then
        fail $name "timed out after 30s"
    elif [[ -n $hung ]] || grep -q 'Timeout (' "$W/tj.hak"; then
        fail $name "$hung hung (stopped by regrtest's 20 s timeout)"
    elif ((rh != 0)); then
        fail $name "exited $rh: $(grep -E 'FAIL|ERROR' "$W/tj.hak" | head -n 2 | tr '\n' ' ')"
    elif [[ "$(verdicts "$W/tj.base")" != "$(verdicts "$W/tj.hak")" ]]; then
        fail $name "verdicts differ: $(diff <(verdicts "$W/tj.base") <(verdicts "$W/tj.hak") | grep '^[<>]' | head -n 3 | tr '\n' ' ')"
    else
        pass $name
    fi
else
    skip programs.cpython_join_on_shutdown.purger "CPython's test package missing (tools/install-deps.sh installs libpython3.11-testsuite)"
fi

# ---- sort / awk on ~6 MB generated deterministically (Park-Miller LCG) ----
awk 'BEGIN { x = 12345
             for (i = 0; i < 300000; i++) {
                 x = (x * 16807) % 2147483647; w = ""
                 n = 3 + x % 12
                 for (j = 0; j < n; j++) { x = (x * 16807) % 2147483647; w = w sprintf("%c", 97 + x % 26) }
                 x = (x * 16807) % 2147483647
                 print w, x % 1000000, i
             } }' >"$W/input.txt"
run_pair programs.sort 60 sort "$W/input.txt" -- sort "$W/input.txt"
run_pair programs.sort_numeric_parallel 60 sort -S 32M --parallel=2 -k2,2n -k1,1 "$W/input.txt" -- \
    sort -S 32M --parallel=2 -k2,2n -k1,1 "$W/input.txt"
run_pair programs.sort_small_buffer 60 sort -S 1M -r "$W/input.txt" -- sort -S 1M -r "$W/input.txt"
AWK_PROG='{ n[$1]++; s[$1] = s[$1] substr($1, 1, 2) } END { for (k in n) print k, n[k], length(s[k]) }'
run_pair programs.awk 60 sh -c "awk '$AWK_PROG' '$W/input.txt' | sort" -- \
    sh -c "awk '$AWK_PROG' '$W/input.txt' | sort"

# ---- C++ ----
run_pair programs.cxx 60 "$T/test_cxx" -- "$T/test_cxx" --expect-hakmem
if [[ -e $DBG_SO ]]; then
    SO=$DBG_SO run_pair programs.cxx_debug 60 "$T/test_cxx" -- "$T/test_cxx" --expect-hakmem
fi

# ---- the hardened build (make hardened): the same programs, and a
# compiler, SQLite, git and perl, each output compared with the system
# allocator's ----
if need programs.hardened.setup "$HRD_SO"; then
    out=$(LD_PRELOAD="$HRD_SO" limit 30 "$T/check_preload" hardened 2>&1) && pass programs.preload_hardened ||
        fail programs.preload_hardened "$out"
    SO=$HRD_SO run_pair programs.python.hardened 60 env PYTHONMALLOC=malloc "$PY" tests/programs/churn.py -- \
        env PYTHONMALLOC=malloc "$PY" tests/programs/churn.py --expect-hakmem
    SO=$HRD_SO run_pair programs.sort.hardened 60 sort -S 1M -r "$W/input.txt" -- sort -S 1M -r "$W/input.txt"
    SO=$HRD_SO run_pair programs.sort_numeric_parallel.hardened 60 sort -S 32M --parallel=2 -k2,2n -k1,1 "$W/input.txt" -- \
        sort -S 32M --parallel=2 -k2,2n -k1,1 "$W/input.txt"
    SO=$HRD_SO run_pair programs.awk.hardened 60 sh -c "awk '$AWK_PROG' '$W/input.txt' | sort" -- \
        sh -c "awk '$AWK_PROG' '$W/input.txt' | sort"
    SO=$HRD_SO run_pair programs.cxx.hardened 60 "$T/test_cxx" -- "$T/test_cxx" --expect-hakmem
    SO=$HRD_SO run_pair programs.gcc.hardened 120 gcc -O2 -S -o - -Iinclude -Isrc src/hak_page.c -- \
        gcc -O2 -S -o - -Iinclude -Isrc src/hak_page.c
    SQL="create table t(a integer primary key, b text); with recursive c(x) as (select 1 union all select x + 1 from c
         where x < 50000) insert into t select x, printf('%08d-%s', x * 7919 % 100003, hex(x)) from c;
         create index tb on t(b); select count(*), sum(length(b)), min(b), max(b) from t;"
    SO=$HRD_SO run_pair programs.sqlite.hardened 60 sqlite3 :memory: "$SQL" -- sqlite3 :memory: "$SQL"
    SO=$HRD_SO run_pair programs.git.hardened 60 git log --stat -n 200 --format=%H%n%s -- \
        git log --stat -n 200 --format=%H%n%s
    PERL='my %h; $h{$_ x 3} = [split //, $_ x 5] for 1 .. 60000; my $n = 0; $n += @{$h{$_}} for keys %h; print "$n\n"'
    SO=$HRD_SO run_pair programs.perl.hardened 60 perl -e "$PERL" -- perl -e "$PERL"
fi

# ---- the same programs under every profile and the options that change
# behaviour (docs/options.md): each setting is named in the test ----
SETTINGS=(
    "HAKMEM_PROFILE=speed"
    "HAKMEM_PROFILE=lean"
    "HAKMEM_BACKGROUND_PURGE=1 HAKMEM_PURGE_DELAY_MS=5"
    "HAKMEM_PROFILE=speed HAKMEM_BACKGROUND_PURGE=1"
    "HAKMEM_PURGE_DELAY_MS=-1 HAKMEM_PURGE_BUDGET_KB=-1"
    "HAKMEM_PURGE_LAZY=1 HAKMEM_PURGE_DELAY_MS=0"
    "HAKMEM_SAMPLE_BYTES=65536 HAKMEM_LEAK_REPORT=1"
    "HAKMEM_STATS=1 HAKMEM_VERBOSE=1 HAKMEM_CRASH_HANDLER=0"
)
for set in "${SETTINGS[@]}"; do
    read -r -a kv <<<"$set"
    tag=$(tr 'A-Z= ' 'a-z__' <<<"${set//HAKMEM_/}")
    run_pair programs.python.$tag 60 env PYTHONMALLOC=malloc "$PY" tests/programs/churn.py -- \
        env "${kv[@]}" PYTHONMALLOC=malloc "$PY" tests/programs/churn.py --expect-hakmem
    run_pair programs.sort.$tag 60 sort -S 1M -r "$W/input.txt" -- env "${kv[@]}" sort -S 1M -r "$W/input.txt"
    run_pair programs.cxx.$tag 60 "$T/test_cxx" -- env "${kv[@]}" "$T/test_cxx" --expect-hakmem
done
exit $SUITE_STATUS
