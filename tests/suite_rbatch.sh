#!/usr/bin/env bash
# suite_rbatch.sh -- batched remote frees (tests/test_rbatch.c; src/hak_free.c,
# hak_rbatch_t; docs/design.md, "Remote frees in batches"):
#   rbatch.{release,debug}(.purger).*  a batch is never lost: at its thread's
#                          exit (exit), in a fork child (fork: the forking
#                          thread's batch and another thread's), nor kept for
#                          a public heap that is then destroyed (destroy); six
#                          threads freeing each other's blocks get every block
#                          back (mixed)
#   rbatch.misuse.{release,debug}.*  a double free of a block waiting in a
#                          batch is reported at once: freed twice by the same
#                          thread, freed by its owner while the batch is open or
#                          sent but not yet applied, realloc'ed by its owner
#                          (SIGABRT and the report, never a program that runs on)
# (the hardened build's quarantine holds blocks back and reports with its own
# words: its suite covers it)
source "$(dirname "$0")/lib.sh"
BIN=$T/test_rbatch

for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    if need rbatch.$v "$BIN" "$so"; then
        run_bin rbatch.$v 60 env LD_PRELOAD="$so" "$BIN" -p rbatch.$v --expect-hakmem
        run_bin rbatch.$v.purger 60 env HAKMEM_BACKGROUND_PURGE=1 LD_PRELOAD="$so" "$BIN" -p rbatch.$v.purger --expect-hakmem
    fi
done

need rbatch.misuse "$BIN" "$REL_SO" "$DBG_SO" || exit 0
P='0x[0-9a-f]+'
for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    for c in twice_by_freer freer_then_owner sent_then_owner; do
        expect_report rbatch.misuse.$v.$c 134 "^hakmem: free\(\): double free of $P" \
            env LD_PRELOAD="$so" "$BIN" misuse $c
    done
    expect_report rbatch.misuse.$v.freer_then_realloc 134 "^hakmem: realloc\(\): pointer already freed $P" \
        env LD_PRELOAD="$so" "$BIN" misuse freer_then_realloc
done
