#!/usr/bin/env bash
# suite_heaps.sh -- first-class heaps (tests/test_heaps.c, docs/heaps.md):
#   heaps.release.*, heaps.debug.*   every function under the release and the
#                                    debug library (contents, plain and cross-thread
#                                    frees, stats and visits counted exactly,
#                                    destroy, delete, the process-wide visit, huge
#                                    blocks: in the heap, its visit and stats, realloc
#                                    small <-> huge, destroy, delete)
#   heaps.{release,debug}.purger.*   the same with HAKMEM_BACKGROUND_PURGE=1
#   heaps.misuse.*                   one misuse per subprocess: hakmem's report and
#                                    SIGABRT, never a program that runs on
source "$(dirname "$0")/lib.sh"
BIN=$T/test_heaps

if need heaps.release "$BIN" "$REL_SO"; then
    run_bin heaps.release 60 env LD_PRELOAD="$REL_SO" "$BIN" -p heaps.release
fi
if need heaps.debug "$BIN" "$DBG_SO"; then
    run_bin heaps.debug 60 env LD_PRELOAD="$DBG_SO" "$BIN" -p heaps.debug
fi
# the same with the background purger running (issue 28)
if need heaps.release.purger "$BIN" "$REL_SO" "$DBG_SO"; then
    run_bin heaps.release.purger 60 env HAKMEM_BACKGROUND_PURGE=1 LD_PRELOAD="$REL_SO" "$BIN" -p heaps.release.purger
    run_bin heaps.debug.purger 60 env HAKMEM_BACKGROUND_PURGE=1 LD_PRELOAD="$DBG_SO" "$BIN" -p heaps.debug.purger
fi

# expect NAME SO CASE REGEX [VAR=VALUE...]: SIGABRT and the report
expect() {
    local name=$1 so=$2 case=$3 re=$4
    shift 4
    expect_report "$name" 134 "$re" env "$@" LD_PRELOAD="$so" "$BIN" misuse "$case"
}
P='0x[0-9a-f]+'
STALE="double free or stale pointer \(its page was already released\) $P|invalid pointer \(not allocated by hakmem\) $P"
need heaps.misuse "$BIN" "$REL_SO" "$DBG_SO" || exit 1
for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    m=heaps.misuse.$v
    expect $m.null            "$so" heap_null            "^hakmem: hakmem_heap_malloc\(\): NULL heap"
    expect $m.null_destroy    "$so" heap_null_destroy    "^hakmem: hakmem_heap_destroy\(\): NULL heap"
    expect $m.destroyed       "$so" heap_destroyed       "^hakmem: hakmem_heap_malloc\(\): heap already destroyed or deleted $P"
    expect $m.destroyed_twice "$so" heap_destroyed_twice "^hakmem: hakmem_heap_destroy\(\): heap already destroyed or deleted $P"
    expect $m.deleted_visit   "$so" heap_deleted_visit   "^hakmem: hakmem_heap_visit\(\): heap already destroyed or deleted $P"
    expect $m.not_a_heap      "$so" heap_not_a_heap      "^hakmem: hakmem_heap_malloc\(\): invalid heap \(not made by hakmem_heap_new\) $P"
    expect $m.other_thread    "$so" heap_other_thread    "^hakmem: hakmem_heap_malloc\(\): heap used from a thread that does not own it $P"
    expect $m.destroyed_block "$so" heap_destroyed_block "^hakmem: free\(\): ($STALE)"
    expect $m.destroyed_block_owner "$so" heap_destroyed_block_owner "^hakmem: free\(\): ($STALE)"
    expect $m.destroyed_realloc "$so" heap_destroyed_realloc "^hakmem: realloc\(\): ($STALE)"
    expect $m.realloc_freed   "$so" heap_realloc_freed   "^hakmem: hakmem_heap_realloc\(\): pointer already freed $P"
    expect $m.double_free     "$so" heap_double_free     "^hakmem: free\(\): double free of $P"
    # huge blocks: destroy gives the mapping to the huge cache (its page not
    # in use) or, with no cache, back to the OS (no longer hakmem's)
    for cache in 1024 0; do
        hm="$m.huge_cache$cache"
        expect $hm.destroyed_block "$so" heap_destroyed_huge "^hakmem: free\(\): ($STALE)" HAKMEM_HUGE_CACHE_MB=$cache
        expect $hm.destroyed_block_remote "$so" heap_destroyed_huge_remote "^hakmem: free\(\): ($STALE)" HAKMEM_HUGE_CACHE_MB=$cache
        expect $hm.destroyed_realloc "$so" heap_destroyed_huge_realloc "^hakmem: realloc\(\): ($STALE)" HAKMEM_HUGE_CACHE_MB=$cache
        expect $hm.double_free "$so" heap_huge_double_free "^hakmem: free\(\): ($STALE)" HAKMEM_HUGE_CACHE_MB=$cache
    done
done
exit $SUITE_STATUS
