#!/usr/bin/env bash
# suite_huge.sh -- a huge block's usable size (tests/test_huge_usable.c;
# docs/design.md, "Huge blocks"): the size asked rounded up to its last OS
# page, realloc in place within the mapping, aligned and calloc'ed huge
# blocks, a sized free beyond the usable size reported.  glibc first (the
# test's general bounds are sound), then LD_PRELOAD of the release, debug
# and hardened libraries.
source "$(dirname "$0")/lib.sh"
BIN=$T/test_huge_usable
need huge "$BIN" || exit 1

run_bin huge.glibc 60 "$BIN" -p huge.glibc --expect-glibc
for v in release:$REL_SO debug:$DBG_SO hardened:$HRD_SO; do
    name=huge.${v%%:*} so=${v#*:}
    need "$name" "$so" && run_bin "$name" 60 env LD_PRELOAD="$so" "$BIN" -p "$name" --expect-hakmem
done
exit $SUITE_STATUS
