#!/usr/bin/env bash
# suite_memreturn.sh -- memory return (issue 12): the huge cache, the segment
# cache, the decay, the background purger, malloc_trim (tests/test_memreturn.c)
# under the settings each path needs, and the stress test while the purger
# purges every few milliseconds.
#   memreturn.glibc          the tests are sound (hakmem-only tests skip)
#   memreturn.balanced       the default profile; the floor, thread-churn,
#                            same-class slot and oldest-heap adoption checks
#                            run in processes of their own
#   memreturn.debug          the same on the debug build (consistency checks)
#   memreturn.trim           nothing purged on its own (delay -1, no floor):
#                            malloc_trim(0) reaches a live, idle thread's memory
#   memreturn.purger(_debug) HAKMEM_BACKGROUND_PURGE=1: an idle program's
#                            memory goes back; fork while the purger runs
#   memreturn.lazy           MADV_FREE: contents and calloc zeroing
#   memreturn.speed / lean   the other profiles
#   memreturn.speed_lazy     speed with MADV_FREE (malloc_trim still returns RSS)
#   large_spans.*            emptied large pages kept per class
#                            (tests/test_large_spans.c): placements repeat,
#                            malloc_trim and the purger give them back, double
#                            free, fork; balanced, debug, speed, lean, purger
#   memreturn.nocache        both caches off
#   stress.purger(_debug)    test_stress with a 1 ms delay and the purger
source "$(dirname "$0")/lib.sh"
BIN=$T/test_memreturn

if need memreturn.glibc "$BIN"; then
    run_bin memreturn.glibc 60 "$BIN" -p memreturn.glibc
fi

# run_in BIN NAME SO SECONDS [VAR=VALUE...] -- [the binary's arguments]
run_in() {
    local bin=$1 name=$2 so=$3 limit=$4
    shift 4
    local envs=()
    while (($#)) && [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    need "$name" "$bin" "$so" || return
    run_bin "$name" "$limit" env LD_PRELOAD="$so" "${envs[@]}" "$bin" -p "$name" --expect-hakmem "$@"
}
run_mr() { run_in "$BIN" "$@"; }

for t in free_all_floor thread_churn_reuse slot_same_class adopt_oldest; do
    run_mr memreturn.balanced_$t "$REL_SO" 60 -- --only $t
done
run_mr memreturn.balanced "$REL_SO" 60 --
run_mr memreturn.debug "$DBG_SO" 60 --
run_mr memreturn.trim "$REL_SO" 60 HAKMEM_PURGE_DELAY_MS=-1 HAKMEM_PURGE_BUDGET_KB=-1 -- --only trim_reaches_threads
run_mr memreturn.trim_contents "$REL_SO" 60 HAKMEM_PURGE_DELAY_MS=-1 --
run_mr memreturn.purger "$REL_SO" 60 HAKMEM_BACKGROUND_PURGE=1 HAKMEM_PURGE_DELAY_MS=100 HAKMEM_PURGE_BUDGET_KB=-1 --
run_mr memreturn.purger_debug "$DBG_SO" 60 HAKMEM_BACKGROUND_PURGE=1 HAKMEM_PURGE_DELAY_MS=5 --
run_mr memreturn.lazy "$REL_SO" 60 HAKMEM_PURGE_LAZY=1 HAKMEM_PURGE_DELAY_MS=5 --
run_mr memreturn.speed "$REL_SO" 60 HAKMEM_PROFILE=speed --
run_mr memreturn.speed_lazy "$REL_SO" 60 HAKMEM_PROFILE=speed HAKMEM_PURGE_LAZY=1 --
run_mr memreturn.lean "$REL_SO" 60 HAKMEM_PROFILE=lean --
run_mr memreturn.nocache "$REL_SO" 60 HAKMEM_SEGMENT_CACHE=0 HAKMEM_HUGE_CACHE_MB=0 --

LS=$T/test_large_spans
if need large_spans.glibc "$LS"; then
    run_bin large_spans.glibc 60 "$LS" -p large_spans.glibc
fi
run_ls() { run_in "$LS" "$@"; }
run_ls large_spans.balanced "$REL_SO" 60 --
run_ls large_spans.debug "$DBG_SO" 60 --
run_ls large_spans.speed "$REL_SO" 60 HAKMEM_PROFILE=speed --
run_ls large_spans.lean "$REL_SO" 60 HAKMEM_PROFILE=lean --
run_ls large_spans.purger "$REL_SO" 60 HAKMEM_BACKGROUND_PURGE=1 HAKMEM_PURGE_DELAY_MS=100 HAKMEM_PURGE_BUDGET_KB=-1 -- --only large_kept_purger

if need stress.purger "$T/test_stress" "$REL_SO"; then
    run_bin stress.purger 60 env LD_PRELOAD="$REL_SO" HAKMEM_BACKGROUND_PURGE=1 HAKMEM_PURGE_DELAY_MS=1 \
        "$T/test_stress" -p stress.purger --expect-hakmem -s 0.5
fi
if need stress.purger_debug "$T/test_stress" "$DBG_SO"; then
    run_bin stress.purger_debug 60 env LD_PRELOAD="$DBG_SO" HAKMEM_BACKGROUND_PURGE=1 HAKMEM_PURGE_DELAY_MS=1 \
        "$T/test_stress" -p stress.purger_debug --expect-hakmem -s 0.3 -t 6
fi
exit $SUITE_STATUS
