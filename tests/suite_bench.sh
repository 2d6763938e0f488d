#!/bin/sh
# tests/suite_bench.sh -- tests of the benchmark suite (bench/).
# Prints one "PASS name" / "FAIL name: reason" / "SKIP name: reason" line per
# test case.  Covers: unit tests of bench/stats.py, a tiny smoke run of every
# workload binary under glibc and (when build/libhakmem.so exists) hakmem with
# the allocator proof checked (for hakmem including blocks sampled from the
# workload itself; interp_py runs Debian's python3 with PYTHONMALLOC=malloc),
# negative proof checks, and a tiny end-to-end run of
# bench/run.py (interleaving, strace counts, minor faults per op, CSV, chart),
# and PEERS (extra allocators by library path: tables, verdicts, proof, refusals).
# Takes well under a minute.
cd "$(dirname "$0")/.." || exit 1
# every program runs under a time limit that ends with SIGKILL (timeout -k);
# $PY carries one, so every python run has it
PY="timeout -k 5 60 /usr/bin/python3"
BIN=build/bench
HAKMEM=build/libhakmem.so
MIMALLOC=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
TMP=$(mktemp -d /tmp/suite_bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

main() {
# ---- 1. unit tests of bench/stats.py (one line per test) ----
$PY tests/test_bench_stats.py --pass-fail >"$TMP/unit.out" 2>"$TMP/unit.err"
cat "$TMP/unit.out"
if ! grep -q '^PASS ' "$TMP/unit.out" && ! grep -q '^FAIL ' "$TMP/unit.out"; then
    echo "FAIL bench_stats.load: $(tail -n 1 "$TMP/unit.err")"
fi

# ---- 2. workload binaries ----
NAMES="random_mixed larson prodcons thread_churn churn_mixed false_sharing realloc_growth large_blocks
       large_heap fragmentation"
missing=""
for n in $NAMES; do [ -x "$BIN/$n" ] || missing="$missing $BIN/$n"; done
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    if make -s $missing >"$TMP/make.out" 2>&1; then
        echo "PASS bench.build"
    else
        echo "FAIL bench.build: make$missing failed: $(tail -n 1 "$TMP/make.out")"
    fi
else
    echo "PASS bench.build"
fi

# name|binary and tiny arguments|extra fields the RESULT line must carry
SMOKE="random_mixed|random_mixed 20000 400 1 mixed|ws mallocs
random_256|random_mixed 20000 400 1 256|ws
random_large|random_mixed 4000 100 1 large|ws
larson_t2|larson 2 3 500 100|rounds threads_created
larson_t8|larson 8 2 200 50|rounds threads_created
larson_orig_t2|larson 2 1 5000 500 4141 8 1000 cpp 50|rounds threads_created millis
larson_orig_t2_rounds|larson 2 2 500 100 4141 8 1000 cpp|rounds threads_created
prodcons_t2|prodcons 2 5000|pairs
prodcons_t8|prodcons 8 5000|pairs
thread_churn_t2|thread_churn 2 40 20|allocs_per_thread
thread_churn_t8|thread_churn 8 40 20|allocs_per_thread
churn_mixed|churn_mixed 2 3 50|rounds blocks_per_thread mib_per_round
churn_mixed_t3|churn_mixed 3 2 40|rounds blocks_per_thread
false_sharing_t2|false_sharing 2 16 100|cache_line_shares shared_objects
false_sharing_t8|false_sharing 8 16 100|cache_line_shares shared_objects
realloc_growth|realloc_growth 5000|completed
large_blocks|large_blocks 10 4 1 65536 4194304|ws mib_allocated
large_heap|large_heap 10 16 1 65536 4194304|blocks reallocs live_mib_min live_mib_max
fragmentation|fragmentation 4 1 10|rss_after_free_kb rss_after_sleep_kb baseline_rss_kb
request_arena|request_arena 200 300 free|blocks
interp_py|/usr/bin/python3 bench/interp_py.py 2000 200|kept live"

# smoke NAME ALLOC PRELOAD "CMD" "FIELDS": run once, check exit, RESULT, proof, fields
smoke() {
    name=$1 alloc=$2 pre=$3 cmd=$4 fields=$5
    out="$TMP/$name.$alloc.out"
    # a command with an absolute path is an interpreter (interp_py): run as
    # it is, with PYTHONMALLOC=malloc as bench/run.py gives it
    if [ "${cmd#/}" != "$cmd" ]; then
        # shellcheck disable=SC2086
        PYTHONMALLOC=malloc LD_PRELOAD=$pre timeout -k 5 30 $cmd >"$out" 2>"$out.err"
    else
        # shellcheck disable=SC2086
        LD_PRELOAD=$pre timeout -k 5 30 $BIN/$cmd >"$out" 2>"$out.err"
    fi
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "FAIL bench.smoke.$name.$alloc: timed out after 30s"
        return
    fi
    if [ $rc -ne 0 ]; then
        echo "FAIL bench.smoke.$name.$alloc: exit status $rc: $(tail -n 1 "$out.err")"
        return
    fi
    if ! msg=$($PY bench/stats.py check "$alloc" "$out"); then
        echo "FAIL bench.smoke.$name.$alloc: $msg"
        return
    fi
    for f in $fields; do
        if ! grep -q "^RESULT .* $f=[0-9]" "$out"; then
            echo "FAIL bench.smoke.$name.$alloc: RESULT line lacks numeric $f"
            return
        fi
    done
    # hakmem's proof must cover blocks of the workload itself, not only the
    # fresh block bench_result() allocates
    if [ "$alloc" = hakmem ] && ! grep -q "^RESULT .* owned_samples=[1-9]" "$out"; then
        echo "FAIL bench.smoke.$name.$alloc: no workload block was sampled for the proof"
        return
    fi
    echo "PASS bench.smoke.$name.$alloc"
}

echo "$SMOKE" | while IFS='|' read -r name cmd fields; do
    smoke "$name" glibc "" "$cmd" "$fields"
    if [ -f "$HAKMEM" ]; then
        smoke "$name" hakmem "$PWD/$HAKMEM" "$cmd" "$fields"
    else
        echo "SKIP bench.smoke.$name.hakmem: $HAKMEM not built"
    fi
done

# every workload of bench/run.py has a smoke case above (request_arena_destroy
# has its own below)
missing=$($PY -c 'import sys; sys.path.insert(0, "bench"); import run
known = set(sys.argv[1].split()) | {"request_arena_destroy"}
print(" ".join(w["name"] for w in run.WORKLOADS if w["name"] not in known))' \
    "$(echo "$SMOKE" | cut -d'|' -f1 | tr '\n' ' ')" 2>&1)
if [ -z "$missing" ]; then
    echo "PASS bench.smoke.covers_every_workload"
else
    echo "FAIL bench.smoke.covers_every_workload: no smoke case for: $missing"
fi

# interp_py refuses to run without PYTHONMALLOC=malloc (pymalloc would serve
# the small objects, not the allocator under test)
if env -u PYTHONMALLOC LD_PRELOAD="$PWD/$HAKMEM" timeout -k 5 30 /usr/bin/python3 \
       bench/interp_py.py 200 20 >"$TMP/interp_nomalloc.out" 2>&1; then
    echo "FAIL bench.smoke.interp_py.needs_pythonmalloc: ran under pymalloc"
elif grep -q "PYTHONMALLOC=malloc" "$TMP/interp_nomalloc.out"; then
    echo "PASS bench.smoke.interp_py.needs_pythonmalloc"
else
    echo "FAIL bench.smoke.interp_py.needs_pythonmalloc: $(head -c 300 "$TMP/interp_nomalloc.out")"
fi

# ---- 3. proof checks, including the negative ones ----
for w in random_mixed churn_mixed large_heap interp_py; do
    G="$TMP/$w.glibc.out" t=bench.proof.rejects_glibc_as_hakmem
    [ $w = random_mixed ] || t=$t.$w
    if [ -s "$G" ]; then
        if msg=$($PY bench/stats.py check hakmem "$G"); then
            echo "FAIL $t: accepted a glibc run as hakmem: $msg"
        else
            echo "PASS $t"
        fi
    else
        echo "FAIL $t: no glibc output to check"
    fi
done
if [ -f "$MIMALLOC" ]; then
    LD_PRELOAD=$MIMALLOC timeout -k 5 30 $BIN/random_mixed 20000 400 1 >"$TMP/mi.out" 2>&1
    if $PY bench/stats.py check mimalloc "$TMP/mi.out" >/dev/null &&
       ! $PY bench/stats.py check glibc "$TMP/mi.out" >/dev/null &&
       ! $PY bench/stats.py check hakmem "$TMP/mi.out" >/dev/null; then
        echo "PASS bench.proof.mimalloc_preload_detected"
    else
        echo "FAIL bench.proof.mimalloc_preload_detected: $(head -c 300 "$TMP/mi.out")"
    fi
    # the interpreter's proof: Debian's python3 is not position-independent,
    # so the lookup of malloc must not stop at the executable's PLT stub
    PYTHONMALLOC=malloc LD_PRELOAD=$MIMALLOC timeout -k 5 30 /usr/bin/python3 \
        bench/interp_py.py 200 20 >"$TMP/mi_py.out" 2>&1
    if $PY bench/stats.py check mimalloc "$TMP/mi_py.out" >/dev/null &&
       ! $PY bench/stats.py check glibc "$TMP/mi_py.out" >/dev/null; then
        echo "PASS bench.proof.mimalloc_preload_detected.interp_py"
    else
        echo "FAIL bench.proof.mimalloc_preload_detected.interp_py: $(head -c 300 "$TMP/mi_py.out")"
    fi
else
    echo "SKIP bench.proof.mimalloc_preload_detected: $MIMALLOC not installed"
fi

# request_arena's heap mode: hakmem's and mimalloc's heap API, proven as
# each; an allocator without one is refused (exit 2), not measured as another
for pair in "hakmem|$PWD/$HAKMEM|api=hakmem_heap" "mimalloc|$MIMALLOC|api=mi_heap"; do
    IFS='|' read -r a lib want <<<"$pair"
    t=bench.smoke.request_arena_destroy.$a
    if [ ! -f "$lib" ]; then echo "SKIP $t: $lib missing"; continue; fi
    LD_PRELOAD=$lib timeout -k 5 30 $BIN/request_arena 200 300 destroy >"$TMP/ra.$a.out" 2>&1
    if msg=$($PY bench/stats.py check $a "$TMP/ra.$a.out") && grep -q "$want" "$TMP/ra.$a.out"; then
        echo "PASS $t"
    else
        echo "FAIL $t: $msg $(head -c 300 "$TMP/ra.$a.out")"
    fi
done
if timeout -k 5 30 $BIN/request_arena 200 300 destroy >"$TMP/ra.glibc.out" 2>&1; then
    echo "FAIL bench.smoke.request_arena_destroy.glibc_refused: ran without a heap API"
else
    echo "PASS bench.smoke.request_arena_destroy.glibc_refused"
fi

# The runner itself must abort (exit 3, "PROOF FAILED") when the "hakmem"
# library it preloads does not provide malloc (libm stands in for a broken build).
LIBM=/lib/x86_64-linux-gnu/libm.so.6
$PY bench/run.py --smoke --no-syscalls --allocators hakmem --hakmem-lib "$LIBM" \
    --workloads random_mixed --out-dir "$TMP/neg" >"$TMP/neg.out" 2>"$TMP/neg.err"
rc=$?
if [ $rc -eq 3 ] && grep -q "PROOF FAILED" "$TMP/neg.err"; then
    echo "PASS bench.runner.proof_failure_is_fatal"
else
    echo "FAIL bench.runner.proof_failure_is_fatal: exit $rc, stderr: $(head -c 300 "$TMP/neg.err")"
fi

# A/B of two hakmem builds: the candidate runs interleaved with hakmem and is
# proven as hakmem; a candidate that is not hakmem aborts the run (exit 3)
$PY bench/run.py --smoke --no-syscalls --allocators hakmem,candidate \
    --candidate-lib "$PWD/build/libhakmem.so" --workloads random_mixed --out-dir "$TMP/ab" \
    >"$TMP/ab.out" 2>"$TMP/ab.err"
rc=$?
order=$(grep -o '^\[ *[0-9]*/[0-9]*\] rep [0-9] random_mixed *[a-z]*' "$TMP/ab.out" | awk '{print $NF}' | tr '\n' ' ')
$PY bench/run.py --smoke --no-syscalls --allocators hakmem,candidate \
    --candidate-lib "$LIBM" --workloads random_mixed --out-dir "$TMP/abneg" >/dev/null 2>"$TMP/abneg.err"
rc2=$?
if [ $rc -eq 0 ] && [ "$order" = "hakmem candidate " ] && [ $rc2 -eq 3 ] && grep -q "PROOF FAILED" "$TMP/abneg.err"; then
    echo "PASS bench.runner.candidate_build"
else
    echo "FAIL bench.runner.candidate_build: exit $rc/$rc2, order '$order': $(head -c 300 "$TMP/ab.err" "$TMP/abneg.err")"
fi

# Verdicts (hakmem against the faster peer, the candidate against hakmem): a
# workload whose comparisons have none runs again, the compared allocators
# only, one batch of --reps at a time up to --until-verdict
if [ -f "$MIMALLOC" ]; then
    $PY bench/run.py --smoke --no-syscalls --reps 1 --until-verdict 3 \
        --allocators hakmem,candidate,glibc,mimalloc --candidate-lib "$PWD/build/libhakmem.so" \
        --workloads random_mixed --out-dir "$TMP/verdict" >"$TMP/verdict.out" 2>"$TMP/verdict.err"
    rc=$?
    again=$(grep -o '^\[again\] rep [0-9] random_mixed *[a-z]*' "$TMP/verdict.out" | awk '{print $NF}' | sort | uniq -c | awk '{print $2 ":" $1}' | tr '\n' ' ')
    peer=$(grep -o 'hakmem    vs [a-z]*' "$TMP/verdict.out" | awk '{print $3}')
    other=glibc; [ "$peer" = glibc ] && other=mimalloc
    if [ $rc -eq 0 ] && grep -q '^Verdicts (' "$TMP/verdict.out" &&
       grep -q "candidate vs hakmem *3 reps .* t  *\(level\|ahead\|behind\)$" "$TMP/verdict.out" &&
       [ -n "$peer" ] && echo "$again" | grep -q "candidate:2 .*hakmem:2 " &&
       echo "$again" | grep -q "$peer:2" && ! echo "$again" | grep -q "$other:" &&
       grep -q '| random_mixed | hakmem |' "$TMP/verdict/latest.md" &&
       head -1 "$TMP/verdict/latest.csv" | tr -d '\r' | grep -q ',verdict$'; then
        echo "PASS bench.runner.until_verdict"
    else
        echo "FAIL bench.runner.until_verdict: exit $rc, again '$again', peer '$peer': $(tail -n 3 "$TMP/verdict.err" "$TMP/verdict.out")"
    fi
else
    echo "SKIP bench.runner.until_verdict: $MIMALLOC not installed"
fi

# The runner gives a workload's environment (interp_py: PYTHONMALLOC=malloc)
# to its timed and its strace runs, and runs larson_orig_t2 time-bound
strace_opt=--no-syscalls; [ -x /usr/bin/strace ] && strace_opt=
allocs=glibc; [ -f "$HAKMEM" ] && allocs=hakmem,glibc
# shellcheck disable=SC2086
$PY bench/run.py --smoke $strace_opt --reps 1 --allocators $allocs \
    --workloads interp_py,larson_orig_t2 --out-dir "$TMP/newrows" >"$TMP/newrows.out" 2>"$TMP/newrows.err"
rc=$?
nrows=$(grep -c '^\[ *[0-9]*/[0-9]*\] rep 1 \(interp_py\|larson_orig_t2\) .* ops/s' "$TMP/newrows.out")
want=$(( $(echo $allocs | tr ',' ' ' | wc -w) * 2 ))
if [ $rc -ne 0 ]; then
    echo "FAIL bench.runner.interp_and_larson_orig: exit $rc: $(tail -n 3 "$TMP/newrows.err")"
elif [ "$nrows" -ne "$want" ]; then
    echo "FAIL bench.runner.interp_and_larson_orig: $nrows timed runs, want $want"
elif [ -z "$strace_opt" ] && [ "$(grep -c '^\[strace\] interp_py .*syscalls/op' "$TMP/newrows.out")" -ne $((want / 2)) ]; then
    echo "FAIL bench.runner.interp_and_larson_orig: interp_py's strace runs: $(grep '^\[strace\] interp_py' "$TMP/newrows.out")"
else
    echo "PASS bench.runner.interp_and_larson_orig"
fi
# one repetition: no verdicts, said in one line (not one "too few runs" per row)
if [ -f "$HAKMEM" ]; then
    nv=$(grep -c '^Verdicts' "$TMP/newrows.out")
    if [ "$nv" -eq 1 ] && grep -q '^Verdicts: none: 1 paired repetition, and a verdict needs 3' "$TMP/newrows.out" &&
       ! grep -q 'too few runs' "$TMP/newrows.out"; then
        echo "PASS bench.runner.no_verdicts_one_line"
    else
        echo "FAIL bench.runner.no_verdicts_one_line: $(grep -A3 '^Verdicts' "$TMP/newrows.out" | head -c 300)"
    fi
fi

# A missing library must be named and be fatal (exit 2) before anything runs.
$PY bench/run.py --smoke --no-syscalls --allocators hakmem,glibc \
    --hakmem-lib /nonexistent/libhakmem.so --out-dir "$TMP/miss" >"$TMP/miss.out" 2>"$TMP/miss.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "MISSING PEER: hakmem" "$TMP/miss.err" && ! grep -q '^\[' "$TMP/miss.out"; then
    echo "PASS bench.runner.missing_library_is_fatal"
else
    echo "FAIL bench.runner.missing_library_is_fatal: exit $rc, stderr: $(head -c 300 "$TMP/miss.err")"
fi

# PEERS (make bench PEERS="name=/path/lib.so ..." -> run.py --peers): any
# preloadable library joins every table, the CSV and the verdicts' choice of
# the faster peer, and must prove that malloc came from that very file.
# Debian's mimalloc copied under another name stands in for one built from source.
if [ -f "$MIMALLOC" ] && [ -f "$HAKMEM" ]; then
    mkdir -p "$TMP/peerlib" && cp "$MIMALLOC" "$TMP/peerlib/libmipeer.so"
    strace_opt=--no-syscalls; [ -x /usr/bin/strace ] && strace_opt=
    # shellcheck disable=SC2086
    timeout 120 $PY bench/run.py --smoke $strace_opt --reps 1 --allocators hakmem,glibc \
        --peers "mipeer=$TMP/peerlib/libmipeer.so" --workloads random_mixed,request_arena_destroy \
        --out-dir "$TMP/peers" >"$TMP/peers.out" 2>"$TMP/peers.err"
    rc=$?
    order=$(grep -o '^\[ *[0-9]*/[0-9]*\] rep [0-9] random_mixed *[a-z]*' "$TMP/peers.out" | awk '{print $NF}' | tr '\n' ' ')
    # the faster of glibc and mipeer by median, and hakmem's verdict_against
    check=$($PY -c 'import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["workload"] == "random_mixed"]
med = dict((r["allocator"], float(r["median_ops_per_sec"])) for r in rows)
h = [r for r in rows if r["allocator"] == "hakmem"][0]
best = max(("glibc", "mipeer"), key=lambda a: med[a])
print("ok" if sorted(med) == ["glibc", "hakmem", "mipeer"] and h["verdict_against"] == best
      else "rows %s, verdict against %s, faster peer %s" % (sorted(med), h["verdict_against"], best))
' "$TMP/peers/latest.csv" 2>&1)
    if [ $rc -ne 0 ]; then
        echo "FAIL bench.runner.peers: exit $rc: $(tail -n 3 "$TMP/peers.err")"
    elif [ "$order" != "hakmem glibc mipeer " ]; then
        echo "FAIL bench.runner.peers: runs of random_mixed: '$order'"
    elif [ "$check" != ok ]; then
        echo "FAIL bench.runner.peers: latest.csv: $check"
    elif ! grep -q "^random_mixed  *mipeer " "$TMP/peers.out" ||
         ! grep -q "^  mipeer " "$TMP/peers.out" ||
         ! grep -q '| random_mixed | mipeer |' "$TMP/peers/latest.md" ||
         ! grep -q "^Peers added with PEERS: mipeer = \`$TMP/peerlib/libmipeer.so\`" "$TMP/peers/latest.md"; then
        echo "FAIL bench.runner.peers: mipeer missing from the table, geometric means or latest.md"
    elif grep -q 'request_arena_destroy  *mipeer' "$TMP/peers.out"; then
        echo "FAIL bench.runner.peers: mipeer ran request_arena_destroy (hakmem and mimalloc only)"
    elif [ -z "$strace_opt" ] && ! grep -q '^\[strace\] random_mixed  *mipeer .*syscalls/op' "$TMP/peers.out"; then
        echo "FAIL bench.runner.peers: no proven strace run of mipeer"
    else
        echo "PASS bench.runner.peers"
    fi
else
    echo "SKIP bench.runner.peers: $MIMALLOC or $HAKMEM missing"
fi

# A PEERS entry whose file does not exist is named and fatal (exit 2) before
# anything runs; one that does not provide malloc fails its proof (exit 3)
timeout 60 $PY bench/run.py --smoke --no-syscalls --allocators glibc \
    --peers "ghost=/nonexistent/libghost.so" --out-dir "$TMP/pmiss" >"$TMP/pmiss.out" 2>"$TMP/pmiss.err"
rc=$?
timeout 60 $PY bench/run.py --smoke --no-syscalls --allocators glibc --peers "fake=$LIBM" \
    --workloads random_mixed --out-dir "$TMP/pneg" >/dev/null 2>"$TMP/pneg.err"
rc2=$?
if [ $rc -eq 2 ] && grep -q "MISSING PEER: ghost: /nonexistent/libghost.so not found (PEERS)" "$TMP/pmiss.err" &&
   ! grep -q '^\[' "$TMP/pmiss.out" && [ $rc2 -eq 3 ] &&
   grep -q "PROOF FAILED (timed run of random_mixed under fake): expected fake ($LIBM)" "$TMP/pneg.err"; then
    echo "PASS bench.runner.peers_refused"
else
    echo "FAIL bench.runner.peers_refused: exit $rc/$rc2: $(head -c 300 "$TMP/pmiss.err" "$TMP/pneg.err")"
fi

# make bench passes PEERS (and QUICK) on to the runner
cmd=$(make -n bench QUICK=1 PEERS=" a=/x/liba.so   b=/y/libb.so " 2>&1 | grep 'bench/run.py')
# (make runs the runner as /usr/bin/python3, BENCH_PY; $PY has a time limit in front)
if [ "$cmd" = "/usr/bin/python3 bench/run.py --quick --peers 'a=/x/liba.so b=/y/libb.so'" ]; then
    echo "PASS bench.make.peers"
else
    echo "FAIL bench.make.peers: make -n bench gives: $cmd"
fi

# ---- 4. tiny end-to-end run of the runner (interleaving, strace, CSV, chart) ----
if [ -f "$MIMALLOC" ] && [ -x /usr/bin/strace ]; then
    $PY bench/run.py --smoke --reps 2 --allocators glibc,mimalloc \
        --workloads random_mixed,false_sharing_t2,fragmentation,large_heap --out-dir "$TMP/e2e" \
        >"$TMP/e2e.out" 2>"$TMP/e2e.err"
    rc=$?
    csv="$TMP/e2e/latest.csv"
    order=$(grep '^\[ *[0-9]*/' "$TMP/e2e.out" | sed 's/^\[[^]]*\] rep [0-9]* *[^ ]* *\([^ ]*\).*/\1/' | head -4 | tr '\n' ' ')
    # minor faults per op of large_heap (every op writes >= 16 fresh pages in
    # the fill) and the ratio column, read back from the CSV by header name
    faults=$($PY -c 'import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["workload"] == "large_heap"]
print(" ".join("%s:%s:%s" % (r["allocator"], r["minflt_per_op"], r["faults_ratio_vs_mimalloc"])
               for r in rows))' "$csv" 2>&1)
    if [ $rc -ne 0 ]; then
        echo "FAIL bench.runner.end_to_end: exit $rc: $(tail -n 2 "$TMP/e2e.err")"
    elif [ "$(wc -l <"$csv")" -ne 9 ]; then
        echo "FAIL bench.runner.end_to_end: latest.csv has $(wc -l <"$csv") lines, want 9"
    elif [ "$order" != "glibc mimalloc glibc mimalloc " ]; then
        echo "FAIL bench.runner.end_to_end: runs not interleaved: $order"
    elif ! grep -q "syscalls_per_op" "$csv" || ! grep -q "cache_line_shares" "$csv"; then
        echo "FAIL bench.runner.end_to_end: latest.csv lacks syscall or cache-line columns"
    elif ! grep -q "minor faults/op" "$TMP/e2e.out" || ! grep -q "minor faults/op" "$TMP/e2e/latest.md" ||
         ! head -n 1 "$TMP/e2e/latest_runs.csv" | grep -q "rusage_minflt"; then
        echo "FAIL bench.runner.end_to_end: no minor-fault column in the table, latest.md or latest_runs.csv"
    elif ! awk -v f="$faults" 'BEGIN { n = split(f, a, " "); if (n != 2) exit 1
            for (i = 1; i <= n; i++) { split(a[i], v, ":"); if (!(v[2] >= 16 && v[3] > 0)) exit 1 } }'; then
        echo "FAIL bench.runner.end_to_end: large_heap minor faults/op not >= 16 with a ratio: $faults"
    elif ! grep -q "Geometric mean" "$TMP/e2e.out"; then
        echo "FAIL bench.runner.end_to_end: no geometric-mean section in the table"
    elif [ "$(head -c 4 "$TMP/e2e/latest.png" | od -An -c | tr -d ' ')" != "211PNG" ]; then
        echo "FAIL bench.runner.end_to_end: latest.png is not a PNG"
    elif [ "$(head -n 1 "$csv" | cut -d, -f1-3)" != "workload,allocator,version" ] ||
         ! grep -q "^random_mixed,mimalloc,$(dpkg-query -W -f='${Version}' libmimalloc2.0)," "$csv" ||
         [ "$(head -n 1 "$TMP/e2e/latest_runs.csv" | cut -d, -f1-3)" != "workload,allocator,version" ] ||
         ! grep -q "^false_sharing_t2,glibc,$(dpkg-query -W -f='${Version}' libc6)," "$TMP/e2e/latest_runs.csv"; then
        echo "FAIL bench.runner.end_to_end: no version column after the allocator's name in latest.csv / latest_runs.csv"
    elif ! grep -q "^random_mixed  *mimalloc $(dpkg-query -W -f='${Version}' libmimalloc2.0) " "$TMP/e2e.out"; then
        echo "FAIL bench.runner.end_to_end: the table does not name mimalloc's version"
    elif sed -n '/^=== results/,$p' "$TMP/e2e.out" | awk 'length($0) > 100 { bad = 1 } END { exit !bad }'; then
        echo "FAIL bench.runner.end_to_end: the summary on stdout has lines over 100 columns"
    else
        echo "PASS bench.runner.end_to_end"
    fi
else
    echo "SKIP bench.runner.end_to_end: mimalloc or strace not installed (sh bench/setup.sh)"
fi

# bench/checkcost.sh (docs/design.md, "What the misuse checks cost") edits a
# copy of the source to take the checks out; it must still find what it edits,
# build both variants, prove hakmem served them, and find the checks cost
# more than nothing (and less than a tenth: 4 instructions per free)
if command -v valgrind >/dev/null; then
    out=$(timeout -k 5 60 bench/checkcost.sh 20000 2>&1)
    cost=$(sed -n 's/.*cost +\([0-9.]*\) instr\/op.*/\1/p' <<<"$out")
    if [ -n "$cost" ] && awk -v c="$cost" 'BEGIN { exit !(c > 0.5 && c < 6) }'; then
        echo "PASS bench.checkcost"
    else
        echo "FAIL bench.checkcost: $(tail -c 300 <<<"$out")"
    fi
else
    echo "SKIP bench.checkcost: valgrind not installed"
fi
}

main | tee "$TMP/all.out"
# non-zero exit status as well when any case failed
! grep -q '^FAIL' "$TMP/all.out"
