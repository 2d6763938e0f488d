#!/usr/bin/env bash
# suite_loader.sh -- a sampled allocation (heap profiles, guarded sampling)
# never waits for the dynamic loader's locks (issue 36), with
# tests/test_loader_lock.c and its plug-in tests/loader_plugin.c
# (tests/loader.mk), every allocation sampled:
#   loader.<build>.profile.*   HAKMEM_SAMPLE_BYTES=1
#   loader.<build>.guard.*     HAKMEM_GUARD_SAMPLE=1 (not in the hardened
#                              build, which ignores it)
#   loader.glibc.*             glibc's malloc: the test is sound
# under the release, debug and hardened libraries.  Cases (the program's
# header says more): mutex (thread A allocates under the program's mutex M,
# thread B's dl_iterate_phdr callback takes M), iterate (A allocates while B
# sits in a dl_iterate_phdr callback: the loader's write lock), dlopen (the
# same with B in a constructor run by dlopen: the loader's main lock); the
# last two also check that A's kept block was sampled with its stack.  The
# walk through dl_iterate_phdr (hakmem before issue 36) hung mutex and
# iterate; each case runs in a child with a deadline of 15 s, so a hang is
# a FAIL line.
source "$(dirname "$0")/lib.sh"

BIN=$T/test_loader_lock
PLUGIN=$T/loader_plugin.so
need loader.bins "$BIN" "$PLUGIN" "$REL_SO" "$DBG_SO" "$HRD_SO" || exit 1

run_bin loader.glibc 60 "$BIN" -p loader.glibc --expect-glibc --plugin "$PLUGIN"
for v in release debug hardened; do
    so=$REL_SO
    [[ $v == debug ]] && so=$DBG_SO
    [[ $v == hardened ]] && so=$HRD_SO
    run_bin "loader.$v.profile" 60 env HAKMEM_SAMPLE_BYTES=1 LD_PRELOAD="$so" \
        "$BIN" -p "loader.$v.profile" --expect-hakmem --plugin "$PLUGIN"
    [[ $v == hardened ]] && continue
    run_bin "loader.$v.guard" 60 env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$so" \
        "$BIN" -p "loader.$v.guard" --expect-hakmem --plugin "$PLUGIN"
done
exit $SUITE_STATUS
