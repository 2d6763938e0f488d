#!/usr/bin/env bash
# suite_hostile.sh -- hakmem in hostile environments (issue 36): the purger,
# thread-churn, fork, sampling and hardened test programs again, each in
#   hostile.noproc.*    a mount namespace of its own with /proc unmounted
#   hostile.pidns.*     a PID namespace of its own whose /proc is the parent's
#                       (it names the program's pids and tids by other numbers)
#   hostile.seccomp.*   a seccomp filter that kills the process (SIGSYS) on
#                       open, openat and openat2, installed once start-up is
#                       over (build/tests/hostile_seccomp.so, preloaded after
#                       the allocator: the loader and every constructor,
#                       hakmem's included, have opened what they open)
#   hostile.sigblock.*  every blockable signal blocked (from before exec)
#   hostile.nofile.*    RLIMIT_NOFILE 4 (`ulimit -n 4`, descriptors above 2
#                       closed): the minimum a dynamically linked program
#                       starts with -- 0, 1 and 2 plus the one the loader
#                       opens each library with; at 3 it cannot load libc
#                       (hostile.nofile.minimum checks that)
# Each program runs under the release, debug and hardened libraries, and the
# first three also under glibc's malloc (.glibc: a proof that the
# environment itself lets the program pass; not under seccomp, where glibc's
# malloc opens files itself: /proc/sys/vm/overcommit_memory when it shrinks
# a thread's arena, /sys/devices/system/cpu/online when it counts arenas):
#   purger_exit      tests/test_purger_exit.c, HAKMEM_BACKGROUND_PURGE=1: a
#                    process whose main thread ends with pthread_exit, and a
#                    child forked from a thread, must exit once their
#                    threads have ended
#   purger_join      tests/test_purger_join.c, HAKMEM_BACKGROUND_PURGE=1: 600
#                    threads started and joined, idle or allocating (thread
#                    churn: a heap made for each, reclaimed from dead ones)
#   fork_signal      tests/test_fork_signal.c -s 1: fork from a SIGALRM
#                    handler that interrupts malloc, free, malloc_trim, fork
#                    (not in sigblock: SIGALRM blocked, its handler never
#                    runs and the test fails under any allocator)
#   stress_sampled   tests/test_stress.c -s 0.3 with HAKMEM_SAMPLE_BYTES=4096
#                    (release, debug): cross-thread frees, thread churn,
#                    realloc, fork, with sampled blocks; under the hardened
#                    library test_hardened's cross_thread, sampled
#                    (test_stress expects the freed block back at once, which
#                    the hardened quarantine never gives)
#   hardened         tests/test_hardened.c under the hardened library (its
#                    programs: quarantine, canaries, huge reuse, fork, ...);
#                    under seccomp one run per case without maps_bounded,
#                    which reads /proc/self/maps itself (far_writes was left
#                    out too: its children opened /dev/null, which the filter
#                    kills; they close stderr now, and the crash handler opens
#                    nothing under a seccomp filter)
# None of these programs opens a file or execs after start-up (but
# maps_bounded), so the filter kills only an open of hakmem's.
#   report           (seccomp only) tests/test_misuse.c double_free under
#                    each library, tests/test_guard.c overflow32 with every
#                    block guarded: the report ends by SIGABRT or SIGSEGV, not
#                    SIGSYS, and says its frames are not named (the crash
#                    handler and the reports open no file under a filter)
# An environment is first probed (build/tests/hostile --probe: /proc
# absent, pids differing from /proc's, signals blocked, the limit in force;
# an open after start-up dies by SIGSYS): a probe that finds it as wanted
# is a PASS line; an environment the kernel refuses (unshare, mount,
# prctl: EPERM in some containers, or not root) is one SKIP line with the
# reason, and its cases do not run.  Every program is under run_bin's
# SIGKILL limit, kept OUTSIDE the namespaces: the launcher dies with the
# limit's signal and the namespace's init, its child, gets SIGKILL with it
# (PR_SET_PDEATHSIG), which ends every process of the namespace
# (hostile.pidns.limit checks that with a program that blocks every
# signal).  81 s on 2 cores when everything passes; 180 s with the tree
# before issue 36's fixes (each hang waits out its deadline: 36 cases
# failed -- the purger kept a finished process alive without /proc and at
# ulimit -n 4, the second thread's heap or the hardened build's huge reuse
# opened a /proc file under seccomp, and fork_signal never ended under the
# hardened build without /proc).
#   HOSTILE_LIB_DIR=DIR   the three libraries from DIR/libhakmem.so,
#                         DIR/debug/..., DIR/hardened/... (another build's:
#                         what an older tree does here)
source "$(dirname "$0")/lib.sh"
if [[ -n ${HOSTILE_LIB_DIR:-} ]]; then
    REL_SO=$HOSTILE_LIB_DIR/libhakmem.so DBG_SO=$HOSTILE_LIB_DIR/debug/libhakmem.so
    HRD_SO=$HOSTILE_LIB_DIR/hardened/libhakmem.so
    echo "# libraries from $HOSTILE_LIB_DIR"
fi

H=$T/hostile
SEC=$T/hostile_seccomp.so
NOFILE=4
need hostile.bins "$H" "$SEC" "$T/test_purger_exit" "$T/test_purger_join" "$T/test_fork_signal" \
    "$T/test_stress" "$T/test_hardened" "$T/test_misuse" "$T/test_guard" "$T/hang_blocked" "$REL_SO" "$DBG_SO" "$HRD_SO" || exit 1

# the hardened programs but the one that opens a file (seccomp)
HARDENED_CASES=$(sed -n 's/^ *RUN_TEST(\([a-z_0-9]*\));.*/\1/p' tests/test_hardened.c | grep -vx -e maps_bounded)

# launcher options of an environment (seccomp: none, the helper is preloaded)
env_opts() {
    case $1 in
    noproc) OPTS=(--no-proc) ;;
    pidns) OPTS=(--pid-ns) ;;
    sigblock) OPTS=(--block-signals) ;;
    nofile) OPTS=(--nofile $NOFILE) ;;
    seccomp) OPTS=() ;;
    esac
}

# probe ENV: 0 when the environment is as wanted (PASS line), 1 otherwise
# (a SKIP line when the kernel refused it, else a FAIL line)
probe() {
    local e=$1 out rc
    env_opts "$e"
    if [[ $e == seccomp ]]; then
        out=$(limit 10 env LD_PRELOAD="$REL_SO $SEC" "$H" --probe-open 2>&1)
        rc=$?
        if ((rc == 128 + 31)); then
            pass "hostile.seccomp.probe (an open after start-up under hakmem: SIGSYS)"
            return 0
        fi
    else
        out=$(limit 10 "$H" "${OPTS[@]}" --probe 2>&1)
        rc=$?
        if ((rc == 0)); then
            pass "hostile.$e.probe ($(sed 's/^hostile: *//' <<<"$out" | tr -d '\n'))"
            return 0
        fi
    fi
    if ((rc == 77)); then
        skip "hostile.$e" "the kernel refused the environment: $(grep -m1 'cannot' <<<"$out")"
    else
        fail "hostile.$e.probe" "the environment is not as wanted (status $rc): $(head -c 300 <<<"$out")"
    fi
    return 1
}

# hrun ENV NAME VARIANT LIMIT [VAR=VALUE...] -- CMD...: CMD in ENV under
# VARIANT's library (glibc: none), run_bin'd as hostile.ENV.NAME.VARIANT
hrun() {
    local e=$1 name=hostile.$1.$2.$3 v=$3 secs=$4 so= pre envs=()
    shift 4
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    case $v in
    release) so=$REL_SO ;;
    debug) so=$DBG_SO ;;
    hardened) so=$HRD_SO ;;
    esac
    env_opts "$e"
    local wrap=("$H" "${OPTS[@]}" --)
    pre=$so
    if [[ $e == seccomp ]]; then
        wrap=()                      # (an exec under the filter could not load anything)
        pre=${so:+$so }$SEC
    fi
    run_bin "$name" "$secs" "${wrap[@]}" env "${envs[@]}" ${pre:+LD_PRELOAD="$pre"} "$@" -p "$name"
}

for e in noproc pidns seccomp sigblock nofile; do
    echo "# --- $e"
    probe "$e" || continue
    for v in glibc release debug hardened; do
        [[ $e == seccomp && $v == glibc ]] && continue
        hrun $e purger_exit $v 30 HAKMEM_BACKGROUND_PURGE=1 -- "$T/test_purger_exit"
        hrun $e purger_join $v 30 HAKMEM_BACKGROUND_PURGE=1 -- "$T/test_purger_join"
        # (single-threaded: no purger, as in suite_hangs.sh)
        [[ $e != sigblock ]] &&
            hrun $e fork_signal $v 30 HAKMEM_BACKGROUND_PURGE=0 -- "$T/test_fork_signal" -s 1
    done
    for v in release debug; do
        hrun $e stress_sampled $v 60 HAKMEM_SAMPLE_BYTES=4096 -- "$T/test_stress" -s 0.3 --expect-hakmem
    done
    hrun $e stress_sampled hardened 60 HAKMEM_SAMPLE_BYTES=4096 -- "$T/test_hardened" -t cross_thread
    if [[ $e == seccomp ]]; then
        for c in $HARDENED_CASES; do
            hrun $e hardened.$c hardened 30 -- "$T/test_hardened" -t $c
        done
        # a misuse report and a guarded block's fault under the filter end by
        # their own signal (SIGABRT, SIGSEGV), not by SIGSYS: a report opens
        # no file there (no /proc/self/maps, no symbol table) and says that
        # its frames are not named
        for v in release debug hardened; do
            case $v in release) so=$REL_SO ;; debug) so=$DBG_SO ;; hardened) so=$HRD_SO ;; esac
            expect_report hostile.seccomp.report.double_free.$v 134 'frames not named: a seccomp filter is on' \
                env LD_PRELOAD="$so $SEC" "$T/test_misuse" double_free
        done
        expect_report hostile.seccomp.report.guarded_overflow.release 139 'frames not named: a seccomp filter is on' \
            env HAKMEM_GUARD_SAMPLE=1 LD_PRELOAD="$REL_SO $SEC" "$T/test_guard" overflow32
    else
        hrun $e hardened hardened 60 -- "$T/test_hardened"
    fi
    case $e in
    nofile)
        # one descriptor fewer and nothing starts: NOFILE is the minimum
        out=$(limit 10 "$H" --nofile $((NOFILE - 1)) -- "$T/test_purger_exit" -t none 2>&1)
        rc=$?
        if ((rc == 127)) && grep -q 'cannot open shared object' <<<"$out"; then
            pass "hostile.nofile.minimum (ulimit -n $((NOFILE - 1)): the loader cannot open libc)"
        else
            fail hostile.nofile.minimum "ran at ulimit -n $((NOFILE - 1)) (status $rc): $(head -c 200 <<<"$out")"
        fi
        ;;
    pidns)
        # the limit outside the namespace ends all of it: a program that
        # blocks every signal, in a session of its own (out of reach of
        # timeout's signals to its process group, as deadline.h's children
        # are), is gone once the limit struck
        tag=hostile-$$-$RANDOM
        t0=$EPOCHREALTIME
        limit 2 "$H" --pid-ns -- setsid "$T/hang_blocked" "$tag" >/dev/null 2>&1
        rc=$?
        secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
        sleep 0.2
        if ! timed_out $rc; then
            fail hostile.pidns.limit "hang_blocked in a PID namespace ended with status $rc before its limit"
        elif pgrep -f "hang_blocked $tag" >/dev/null; then
            fail hostile.pidns.limit "hang_blocked outlived its limit in a PID namespace (status $rc)"
            kill -KILL $(pgrep -f "hang_blocked $tag") 2>/dev/null
        else
            pass "hostile.pidns.limit (the limit ended the namespace after ${secs} s)"
        fi
        ;;
    esac
done
exit $SUITE_STATUS
