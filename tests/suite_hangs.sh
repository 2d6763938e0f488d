#!/usr/bin/env bash
# suite_hangs.sh -- correct programs that must not hang or linger under
# hakmem (issue 28), each under the release, debug and hardened libraries and, to
# prove the test sound, on glibc's malloc:
#   hangs.purger_join.*   HAKMEM_BACKGROUND_PURGE=1: 600 threads started, then
#                         joined (tests/test_purger_join.c): glibc frees their
#                         TLS under its stack-cache lock, which starting the
#                         purger's thread takes too
#   hangs.purger_exit.*   HAKMEM_BACKGROUND_PURGE=1: a process whose main
#                         thread ends with pthread_exit, a child forked from a
#                         thread that returns: each must exit once its own
#                         threads ended (tests/test_purger_exit.c)
#   hangs.fork_signal.*   fork() in a signal handler while the interrupted
#                         main loop is inside malloc, free, malloc_trim or
#                         fork (tests/test_fork_signal.c)
# Every case runs in a child process with a deadline of its own and every
# program under run_bin's SIGKILL limit (30 s here): a hang is a FAIL line.
# (The CPython join-on-shutdown checks are in suite_programs.sh.)
source "$(dirname "$0")/lib.sh"

for t in purger_join purger_exit fork_signal; do
    bin=$T/test_$t
    # (fork_signal is about a single-threaded program: no purger thread,
    # even under HAKMEM_BACKGROUND_PURGE=1 make test)
    env=(HAKMEM_BACKGROUND_PURGE=0)
    [[ $t == purger_* ]] && env=(HAKMEM_BACKGROUND_PURGE=1)
    need "hangs.$t" "$bin" "$REL_SO" "$DBG_SO" "$HRD_SO" || continue
    run_bin "hangs.$t.glibc" 30 env "${env[@]}" "$bin" -p "hangs.$t.glibc"
    run_bin "hangs.$t.release" 30 env "${env[@]}" LD_PRELOAD="$REL_SO" "$bin" -p "hangs.$t.release"
    run_bin "hangs.$t.debug" 30 env "${env[@]}" LD_PRELOAD="$DBG_SO" "$bin" -p "hangs.$t.debug"
    # (hardened: fork_signal never ended before 2026-11-26 -- zeroing every
    # page of a reused huge block left a resident set that made each fork
    # outlast the 0.5 ms timer; hak_os_zero_touched)
    run_bin "hangs.$t.hardened" 30 env "${env[@]}" LD_PRELOAD="$HRD_SO" "$bin" -p "hangs.$t.hardened"
done
exit $SUITE_STATUS
