#!/usr/bin/env bash
# suite_core.sh -- test_api and test_stress against every way hakmem is used:
# glibc baseline (proves the tests are sound), LD_PRELOAD of the release and
# debug libraries, static link with libhakmem.a, and a lean-profile run that
# purges and unmaps eagerly; stress.preload.purger: with the background purger.
source "$(dirname "$0")/lib.sh"

if need api.glibc "$T/test_api"; then
    run_bin api.glibc 60 "$T/test_api" -p api.glibc --expect-glibc
fi
if need api.preload "$T/test_api" "$REL_SO"; then
    run_bin api.preload 60 env LD_PRELOAD="$REL_SO" "$T/test_api" -p api.preload \
        --expect-hakmem --variant release
fi
if need api.preload_debug "$T/test_api" "$DBG_SO"; then
    run_bin api.preload_debug 60 env LD_PRELOAD="$DBG_SO" "$T/test_api" -p api.preload_debug \
        --expect-hakmem --variant debug
fi
if need api.static "$T/test_api_static"; then
    run_bin api.static 60 "$T/test_api_static" -p api.static --expect-hakmem --variant release
fi

# the fast free's block test: exact for every class, offset and capacity
if need unit.blocktest "$T/unit_blocktest"; then
    run_bin unit.blocktest 60 "$T/unit_blocktest" -p unit.blocktest
fi

if need stress.glibc "$T/test_stress"; then
    run_bin stress.glibc 60 "$T/test_stress" -p stress.glibc -s 0.3
fi
if need stress.preload "$T/test_stress" "$REL_SO"; then
    run_bin stress.preload 60 env LD_PRELOAD="$REL_SO" "$T/test_stress" -p stress.preload \
        --expect-hakmem
fi
if need stress.preload_debug "$T/test_stress" "$DBG_SO"; then
    run_bin stress.preload_debug 60 env LD_PRELOAD="$DBG_SO" "$T/test_stress" \
        -p stress.preload_debug --expect-hakmem -s 0.3 -t 6
fi
# the same with the background purger at its default delay (suite_memreturn.sh
# runs it with a 1 ms delay: stress.purger*)
if need stress.preload.purger "$T/test_stress" "$REL_SO"; then
    run_bin stress.preload.purger 60 env HAKMEM_BACKGROUND_PURGE=1 LD_PRELOAD="$REL_SO" "$T/test_stress" \
        -p stress.preload.purger --expect-hakmem
fi
if need stress.static "$T/test_stress_static"; then
    run_bin stress.static 60 "$T/test_stress_static" -p stress.static --expect-hakmem
fi
if need stress.lean "$T/test_stress" "$REL_SO"; then
    run_bin stress.lean 60 env LD_PRELOAD="$REL_SO" HAKMEM_PROFILE=lean HAKMEM_PURGE_DELAY_MS=0 \
        HAKMEM_SEGMENT_CACHE=0 "$T/test_stress" -p stress.lean --expect-hakmem -s 0.5
fi
exit $SUITE_STATUS
