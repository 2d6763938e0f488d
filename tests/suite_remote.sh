#!/usr/bin/env bash
# suite_remote.sh -- remote frees (tests/test_remote.c; written for the
# batched remote frees of issue 39, measured and deleted: docs/experiments.md):
#   remote.{release,debug}(.purger).*  blocks another thread freed come back:
#                          after its exit (exit), in a fork child (fork: the
#                          forking thread's frees and another thread's), never
#                          into a public heap destroyed meanwhile (destroy); six
#                          threads freeing each other's blocks (mixed)
#   remote.misuse.{release,debug}.*  a double free of a block another thread
#                          freed is reported at once: freed twice by that
#                          thread, freed by its owner while that thread lives or
#                          after it exited, realloc'ed by its owner (SIGABRT and
#                          the report, never a program that runs on)
# (the hardened build's quarantine holds blocks back and reports with its own
# words: its suite covers it)
source "$(dirname "$0")/lib.sh"
BIN=$T/test_remote

for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    if need remote.$v "$BIN" "$so"; then
        run_bin remote.$v 60 env LD_PRELOAD="$so" "$BIN" -p remote.$v --expect-hakmem
        run_bin remote.$v.purger 60 env HAKMEM_BACKGROUND_PURGE=1 LD_PRELOAD="$so" "$BIN" -p remote.$v.purger --expect-hakmem
    fi
done

need remote.misuse "$BIN" "$REL_SO" "$DBG_SO" || exit 0
P='0x[0-9a-f]+'
for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    for c in twice_by_freer freer_then_owner sent_then_owner; do
        expect_report remote.misuse.$v.$c 134 "^hakmem: free\(\): double free of $P" \
            env LD_PRELOAD="$so" "$BIN" misuse $c
    done
    expect_report remote.misuse.$v.freer_then_realloc 134 "^hakmem: realloc\(\): pointer already freed $P" \
        env LD_PRELOAD="$so" "$BIN" misuse freer_then_realloc
done
