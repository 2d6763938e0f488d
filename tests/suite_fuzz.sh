#!/usr/bin/env bash
# suite_fuzz.sh -- hakmem's fuzzer (tests/fuzz/, tests/fuzz.mk, docs/build.md):
# one operation interpreter (tests/fuzz/fuzz_interp.c and the files of
# tests/fuzz/fuzz_internal.h) run over the committed
# corpus (tests/fuzz/corpus) plus pseudo-random inputs (fixed seeds), in:
#   fuzz.glibc           the plain build on glibc: proves the model sound
#   fuzz.preload         the plain build under LD_PRELOAD=libhakmem.so
#   fuzz.preload_debug   the same with the debug library (HAK_DEBUG checks)
#   fuzz.preload_hardened  the same with the hardened library
#   fuzz.asan            hakmem compiled in, ASan+UBSan, HAK_DEBUG=1
#   fuzz.tsan            hakmem compiled in, TSan (every report collected)
#   fuzz.libfuzzer       libFuzzer itself for FUZZ_TEST_SECONDS (default 25;
#                        its limit is FUZZ_TEST_SECONDS + 30)
#                        with a fixed -seed (SKIP when clang cannot build a
#                        libFuzzer program: install clang libclang-rt-14-dev)
# Each run adds <name>.clean: FAIL with the sanitizer's first report if it
# printed one.  A failing input is kept as build/tests/fuzz/crash-<name>
# (replay it: build/tests/fuzz/replay_asan --trace FILE).
source "$(dirname "$0")/lib.sh"
F=$T/fuzz
CORPUS=$ROOT/tests/fuzz/corpus
SECONDS_LIBFUZZER=${FUZZ_TEST_SECONDS:-25}

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=0:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=0:exitcode=66:second_deadlock_stack=1:history_size=4

# fz_run NAME SECONDS CMD...: run a replay or the fuzzer; PASS/FAIL NAME from
# its exit status and "fuzz: FAIL" line, then NAME.clean from the sanitizer
fz_run() {
    local name=$1 limit=$2
    shift 2
    local log rc first reports
    log=$(mktemp)
    rm -f "$F/crash-$name"
    FZ_CRASH_FILE=$F/crash-$name timeout -k 5 "$limit" "$@" >"$log" 2>&1
    rc=$?
    grep -E '^fuzz_replay: |^fuzz: [0-9]+ operations|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|DONE' "$log" |
        sed 's/^/# /'
    first=$(grep -m1 '^fuzz: FAIL' "$log")
    if ((rc == 0)) && [[ -z $first ]]; then
        pass "$name"
    elif [[ -n $first ]]; then
        fail "$name" "${first#fuzz: FAIL }$( [[ -e $F/crash-$name ]] && echo " (input kept as $F/crash-$name)")"
    elif ((rc == 124 || rc == 137)); then
        fail "$name" "timed out after ${limit}s"
    else
        local where
        where=$(grep -m1 '^fuzz: aborted in' "$log")
        fail "$name" "exit status $rc: $(grep -m1 -E 'ERROR|SUMMARY|runtime error|hakmem:' "$log")${where:+ (${where#fuzz: })}$( [[ -e $F/crash-$name ]] && echo " (input kept as $F/crash-$name)")"
    fi
    reports=$(grep -c '^SUMMARY: .*Sanitizer' "$log")
    first=$(grep -m1 -E '^SUMMARY: .*Sanitizer|runtime error:' "$log")
    if ((reports > 0)) || [[ -n $first ]]; then
        fail "$name.clean" "$reports sanitizer report(s); first: $first"
        awk '/^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|.*runtime error:|fuzz: FAIL)/ { on = 1 }
             on && n++ < 40 { print "# " $0 }' "$log"
    elif ((rc != 0)); then
        grep -v -E '^(#|INFO:|\[)' "$log" | tail -n 15 | sed 's/^/# /'
    else
        pass "$name.clean"
    fi
    rm -f "$log"
}

need fuzz.corpus "$CORPUS" || exit 1
ncorpus=$(find "$CORPUS" -type f | wc -l)
echo "# corpus: $ncorpus inputs in tests/fuzz/corpus"

if need fuzz.glibc "$F/replay"; then
    fz_run fuzz.glibc 60 "$F/replay" --random 100 --seed 11 "$CORPUS"
fi
if need fuzz.preload "$F/replay" "$REL_SO"; then
    fz_run fuzz.preload 60 env LD_PRELOAD="$REL_SO" "$F/replay" --expect-hakmem --random 200 --seed 12 "$CORPUS"
fi
if need fuzz.preload_debug "$F/replay" "$DBG_SO"; then
    fz_run fuzz.preload_debug 60 env LD_PRELOAD="$DBG_SO" "$F/replay" --expect-hakmem --random 100 --seed 13 "$CORPUS"
fi
# the hardened build: its stricter checks against the model (this corpus
# and seed found a crash and a false report in it, 2026-11-26)
if need fuzz.preload_hardened "$F/replay" "$HRD_SO"; then
    fz_run fuzz.preload_hardened 60 env LD_PRELOAD="$HRD_SO" "$F/replay" --expect-hakmem --random 200 --seed 16 "$CORPUS"
fi
if need fuzz.asan "$F/replay_asan"; then
    fz_run fuzz.asan 60 "$F/replay_asan" --expect-hakmem --random 100 --seed 14 "$CORPUS"
fi
if need fuzz.tsan "$F/replay_tsan"; then
    fz_run fuzz.tsan 60 "$F/replay_tsan" --expect-hakmem --random 30 --seed 15 "$CORPUS"
fi

# libFuzzer: the committed corpus read only, a scratch working corpus
probe=$(printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' |
        ${FUZZ_CC:-clang} -fsanitize=fuzzer -x c - -o /dev/null 2>&1)
probe_rc=$?
if ((probe_rc != 0)) || ! command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1; then
    skip fuzz.libfuzzer "${FUZZ_CC:-clang} cannot build a libFuzzer program (apt-get install clang libclang-rt-14-dev): $(head -n 1 <<<"$probe")"
elif need fuzz.libfuzzer "$F/fuzz_hakmem"; then
    work=$(mktemp -d "$F/work.XXXXXX")
    mkdir -p "$F/artifacts"
    fz_run fuzz.libfuzzer $((SECONDS_LIBFUZZER + 30)) "$F/fuzz_hakmem" -seed=1 \
        -max_total_time="$SECONDS_LIBFUZZER" -rss_limit_mb=3072 -timeout=30 -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="$F/artifacts/" "$work" "$CORPUS"
    rm -rf "$work"
fi
exit $SUITE_STATUS
