#!/usr/bin/env bash
# suite_cancel.sh -- no allocation function is a cancellation point (issue
# 36): a thread with a pthread_cancel pending from the start holds a mutex
# across huge-block malloc, realloc, calloc and free (8-64 MiB: the huge
# cache's reuse path) and must be cancelled only at its pthread_testcancel,
# after its last unlock (tests/test_cancel_malloc.c):
#   cancel.<lib>.huge_pending   <lib>: release, debug and hardened, and glibc
#                               (glibc's malloc: proves the test sound)
# The hardened build was cancelled inside realloc until 2026-11-27: reusing
# a cached huge block read /proc/self/pagemap with glibc's open, pread and
# close (hak_os_zero_touched, src/hak_os.c).
source "$(dirname "$0")/lib.sh"

bin=$T/test_cancel_malloc
need cancel "$bin" "$REL_SO" "$DBG_SO" "$HRD_SO" || exit 1
run_bin cancel.glibc 60 "$bin" -p cancel.glibc
run_bin cancel.release 60 env LD_PRELOAD="$REL_SO" "$bin" -p cancel.release
run_bin cancel.debug 60 env LD_PRELOAD="$DBG_SO" "$bin" -p cancel.debug
run_bin cancel.hardened 60 env LD_PRELOAD="$HRD_SO" "$bin" -p cancel.hardened
exit $SUITE_STATUS
