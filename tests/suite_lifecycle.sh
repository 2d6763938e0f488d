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
source "$(dirname "$0")/lib.sh"

LC=$T/lifecycle
BIN=$T/test_lifecycle

if need lifecycle.tag.setup "$BIN" "$LC/tag/libhakmem.so"; then
    run_bin lifecycle.tag.release 300 env LD_PRELOAD="$LC/tag/libhakmem.so" "$BIN" \
        -p lifecycle.tag.release -s 3 tag_overflow
fi
if need lifecycle.tagdbg.setup "$BIN" "$LC/tagdbg/libhakmem.so"; then
    run_bin lifecycle.tag.debug 300 env LD_PRELOAD="$LC/tagdbg/libhakmem.so" "$BIN" \
        -p lifecycle.tag.debug -s 2 tag_overflow
fi
if need lifecycle.release.setup "$BIN" "$REL_SO"; then
    run_bin lifecycle.release 600 env LD_PRELOAD="$REL_SO" "$BIN" -p lifecycle.release \
        late_dtor fork_stats fork_adopt fork_chain fork_busy
fi
if need lifecycle.debug.setup "$BIN" "$DBG_SO"; then
    run_bin lifecycle.debug 600 env LD_PRELOAD="$DBG_SO" "$BIN" -p lifecycle.debug \
        late_dtor fork_adopt fork_chain fork_busy
fi
if need lifecycle.nokey.setup "$BIN" "$LC/nokey/libhakmem.so"; then
    run_bin lifecycle.nokey 300 env LD_PRELOAD="$LC/nokey/libhakmem.so" "$BIN" -p lifecycle.nokey \
        late_dtor fork_adopt
fi
ENDS=$T/test_heap_ends
for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    need lifecycle.ends.$v.setup "$ENDS" "$so" || continue
    for purge in 0 1; do
        name=lifecycle.ends.$v; ((purge)) && name+=.purger
        run_bin $name 60 env HAKMEM_BACKGROUND_PURGE=$purge LD_PRELOAD="$so" "$ENDS" -p $name \
            first_late dtor_heaps fork_dead_pub
    done
done
exit $SUITE_STATUS
