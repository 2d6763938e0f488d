#!/usr/bin/env bash
# suite_envfaults.sh -- thread heaps and the background purger in hostile
# environments (issue 36; tests/test_env_faults.c), under the release, debug
# and hardened libraries:
#   envfaults.BUILD.pidns_reclaim         (fault 1) a PID namespace whose /proc is the
#   envfaults.BUILD.purger.pidns_reclaim  parent's: a thread whose namespace tid equals a
#                                         /proc tid of the process makes a heap while a
#                                         dead thread's heap is OWNED; only dead threads'
#                                         heaps are reclaimed, workers' blocks stay intact
#                                         (without and with HAKMEM_BACKGROUND_PURGE=1)
#   envfaults.BUILD.purger_atexit         (fault 6) the purger on, main's atexit handler
#                                         uses 3 MiB of stack, main calls pthread_exit:
#                                         5 processes end through the completed handler
#                                         (default 8 MiB thread stacks)
#   envfaults.BUILD.noproc_late           (fault 8) no /proc: 2,000 threads one after
#   envfaults.BUILD.purger.noproc_late    another, each with its first allocation in the
#                                         last key-destructor round: at most 12 heaps made,
#                                         at most 64 MiB more mapped
#   envfaults.BUILD.noproc_purger_exit    no /proc, the purger on, main calls pthread_exit:
#                                         the process ends within 20 s
# The namespaces are made by the test program itself (unshare(2), as root): a
# test whose namespace or mount is refused prints SKIP with the reason.  The
# program keeps every process it makes in its process group (and kills them
# when they outlive its own limits), so run_bin's SIGKILL limit, applied
# outside the namespaces, ends them all.
source "$(dirname "$0")/lib.sh"

BIN=$T/test_env_faults

# ef NAME SO PURGE TEST...: one run per TEST, named NAME.TEST
ef() {
    local name=$1 so=$2 purge=$3 t
    shift 3
    need "$name.setup" "$BIN" "$so" || return
    for t in "$@"; do
        run_bin "$name.$t" 60 env HAKMEM_BACKGROUND_PURGE="$purge" LD_PRELOAD="$so" "$BIN" -p "$name" -t "$t"
    done
}

for v in release debug hardened; do
    case $v in
        release) so=$REL_SO ;;
        debug) so=$DBG_SO ;;
        hardened) so=$HRD_SO ;;
    esac
    ef envfaults.$v "$so" 0 pidns_reclaim noproc_late
    ef envfaults.$v "$so" 1 purger_atexit noproc_purger_exit
    ef envfaults.$v.purger "$so" 1 pidns_reclaim noproc_late
done
exit $SUITE_STATUS
