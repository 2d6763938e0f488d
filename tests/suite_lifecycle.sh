#!/usr/bin/env bash
# suite_lifecycle.sh -- heap life cycle (tests/test_lifecycle.c) under the
# release and debug libraries and the test builds of tests/lifecycle.mk:
#   lifecycle.tag.*       heaps beyond the last region-map tag (HAK_TEST_TAG_START build),
#                         release flags and debug consistency checks
#   lifecycle.release.*   thread exit with allocations in the last key-destructor round;
#   lifecycle.debug.*     fork: the stats lock, adoption of the other threads' heaps, a fork
#                         chain's heaps and RSS, forks while threads allocate
#   lifecycle.nokey.*     the thread-exit path when pthread_key_create fails
#   lifecycle.ends.*      heaps at the ends of threads and across fork (tests/test_heap_ends.c):
#                         a first allocation in the last key-destructor round, public heaps
#                         used from key destructors, destroyed public heaps across fork;
#                         release and debug, each with and without the background purger
#   lifecycle.*.purger.*  the thread-exit and fork tests again with
#                         HAKMEM_BACKGROUND_PURGE=1 (issue 28)
# Each test of test_lifecycle runs as a program of its own, under a limit
# of 60 s.
source "$(dirname "$0")/lib.sh"

LC=$T/lifecycle
BIN=$T/test_lifecycle

# lc NAME SO [VAR=VALUE...] -- [-s SCALE] TEST...: one run per TEST, named NAME.TEST
lc() {
    local name=$1 so=$2 envs=() args=() t
    shift 2
    while (($#)) && [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    [[ ${1:-} == -s ]] && { args=(-s "$2"); shift 2; }
    need "$name.setup" "$BIN" "$so" || return
    for t in "$@"; do
        # (fork_busy takes 24-31 s alone on 2 cores -- three threads filling
        # blocks while the main thread forks 60 times -- and passed 60 s once
        # under make -j2 test with the background purger: it gets 150)
        local limit=60
        [[ $t == fork_busy ]] && limit=150
        run_bin "$name.$t" $limit env "${envs[@]}" LD_PRELOAD="$so" "$BIN" -p "$name" "${args[@]}" "$t"
    done
}

lc lifecycle.tag.release "$LC/tag/libhakmem.so" -- -s 3 tag_overflow
lc lifecycle.tag.debug "$LC/tagdbg/libhakmem.so" -- -s 2 tag_overflow
lc lifecycle.release "$REL_SO" -- late_dtor fork_stats fork_adopt fork_chain fork_busy follow
lc lifecycle.debug "$DBG_SO" -- late_dtor fork_adopt fork_chain fork_busy follow
lc lifecycle.nokey "$LC/nokey/libhakmem.so" -- late_dtor fork_adopt
# the same thread-exit and fork tests with the background purger running
P=HAKMEM_BACKGROUND_PURGE=1
lc lifecycle.release.purger "$REL_SO" $P -- late_dtor fork_stats fork_adopt fork_chain fork_busy
lc lifecycle.debug.purger "$DBG_SO" $P -- late_dtor fork_adopt fork_chain fork_busy
lc lifecycle.nokey.purger "$LC/nokey/libhakmem.so" $P -- late_dtor fork_adopt
ENDS=$T/test_heap_ends
for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    need lifecycle.ends.$v.setup "$ENDS" "$so" || continue
    for purge in 0 1; do
        name=lifecycle.ends.$v; ((purge)) && name+=.purger
        for t in first_late dtor_heaps fork_dead_pub; do
            run_bin $name.$t 60 env HAKMEM_BACKGROUND_PURGE=$purge LD_PRELOAD="$so" "$ENDS" -p $name -t $t
        done
    done
done
exit $SUITE_STATUS
