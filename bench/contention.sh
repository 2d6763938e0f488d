#!/usr/bin/env bash
# bench/contention.sh -- many threads on few cores: how often do hakmem's
# shared words contend?  Runs the multi-threaded workloads under hakmem with
# 2..64 threads pinned to the cores given (default: 0,1) and reads hakmem's
# own counters at exit (HAKMEM_STATS=1): remote frees, CAS retries in remote
# frees, heaps created and adopted.  A CAS retry is exactly one lost race on
# a page's remote-free list, so retries per remote free is the contention
# rate of the only per-operation shared write.  See docs/scaling.md.
#   usage: bench/contention.sh [CPUS=0,1] [THREADS="2 8 32 64"]
set -u
cd "$(dirname "$0")/.."
CPUS=${1:-0,1}
THREADS=${2:-2 8 32 64}
LIB=$PWD/build/libhakmem.so
printf '%-13s %7s %12s %12s %14s %12s %10s\n' workload threads ops/s remote_frees retries/remote heaps_new adopted
for w in larson prodcons thread_churn; do
    for t in $THREADS; do
        case $w in
            larson) args="$t 10 20000 1000" ;;
            prodcons) args="$t 400000" ;;
            thread_churn) args="$t 4000 100" ;;
        esac
        out=$(HAKMEM_STATS=1 LD_PRELOAD=$LIB taskset -c "$CPUS" build/bench/$w $args 2>&1)
        line=$(grep '^RESULT' <<<"$out")
        if ! grep -q 'allocator=[^ ]*libhakmem.*hakmem_owned=1' <<<"$line"; then
            echo "contention.sh: $w $t: hakmem did not serve the run" >&2; exit 1
        fi
        ops=$(sed -n 's/.* ops_per_sec=\([^ ]*\).*/\1/p' <<<"$line")
        stats=$(grep 'remote frees' <<<"$out")
        rf=$(sed -n 's/.*remote frees \([0-9]*\) (CAS retries \([0-9]*\)).*/\1/p' <<<"$stats")
        rt=$(sed -n 's/.*remote frees \([0-9]*\) (CAS retries \([0-9]*\)).*/\2/p' <<<"$stats")
        hc=$(sed -n 's/.*heaps created \([0-9]*\), adopted \([0-9]*\).*/\1/p' <<<"$stats")
        ha=$(sed -n 's/.*heaps created \([0-9]*\), adopted \([0-9]*\).*/\2/p' <<<"$stats")
        ratio=$(awk -v a="$rt" -v b="$rf" 'BEGIN { printf "%.2e", (b > 0 ? a / b : 0) }')
        printf '%-13s %7s %12.0f %12s %14s %12s %10s\n' "$w" "$t" "$ops" "$rf" "$ratio" "$hc" "$ha"
    done
done
