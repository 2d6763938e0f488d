#!/usr/bin/env bash
# suite_reach.sh -- a segment's reach (issue 37; tests/test_reach.c): the part
# of a segment past the pages handed out stays no-access, so far writes fault.
#   reach.release.* / reach.debug.*   every test under the release and debug
#       libraries: far writes from a block of every class fault; a fresh small
#       segment is accessible in its first 256 KiB and its accessible part
#       doubles as pages come (one mapping, at most 5 mprotect calls filled);
#       threads that start and end pay no mprotect; mprotect refused (EPERM,
#       ENOMEM, or with mmap MAP_FIXED too, by a seccomp filter) and the map
#       count limit give working blocks or NULL with ENOMEM, never a crash
#   reach.guarded.*    the refusals with every block guarded
#       (HAKMEM_GUARD_SAMPLE=1: guarded sampling's mprotect calls refused too)
#   reach.hardened.*   the far writes (the hardened build's own layout: pages
#       in a segment's first MiB) and the refusals
#   reach.glibc.*      the refusals under glibc's malloc: the test itself is
#       sound (the others SKIP there)
# HAKMEM_GUARD_SAMPLE=0: guarded sampling's mprotect calls are not counted.
source "$(dirname "$0")/lib.sh"
BIN=$T/test_reach

if need reach.glibc "$BIN"; then
    run_bin reach.glibc 120 "$BIN" -p reach.glibc
fi
if need reach.release "$BIN" "$REL_SO"; then
    run_bin reach.release 120 env HAKMEM_GUARD_SAMPLE=0 LD_PRELOAD="$REL_SO" "$BIN" -p reach.release --expect-hakmem
fi
if need reach.debug "$BIN" "$DBG_SO"; then
    run_bin reach.debug 120 env HAKMEM_GUARD_SAMPLE=0 LD_PRELOAD="$DBG_SO" "$BIN" -p reach.debug --expect-hakmem
fi
if need reach.guarded "$BIN" "$REL_SO"; then
    for t in denied_eperm denied_enomem denied_both; do
        run_bin reach.guarded.$t 120 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO" "$BIN" -p reach.guarded -t $t --expect-hakmem
    done
fi
if need reach.hardened "$BIN" "$HRD_SO"; then
    for t in far_writes denied_eperm denied_enomem denied_both map_limit; do
        run_bin reach.hardened.$t 120 env LD_PRELOAD="$HRD_SO" "$BIN" -p reach.hardened -t $t --expect-hakmem
    done
fi
exit $SUITE_STATUS
