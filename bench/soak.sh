#!/usr/bin/env bash
# bench/soak.sh -- `make soak`: the soak run under hakmem, once per profile.
#   SOAK_SECONDS (default 60) seconds per profile, SOAK_THREADS (default 2).
# Pass criteria (speed and balanced): RSS drift 0 and fewer than 1e-6
# syscalls (mmap/munmap/madvise/mremap) per operation.  lean is reported only.
# "program grew" counts the size classes in which the program itself held
# more live blocks in the second half than in the first (bench/soak.c): the
# soak keeps its demand constant, so it is 0 and any drift is the
# allocator's own.
set -u
cd "$(dirname "$0")/.."
SECS=${SOAK_SECONDS:-60}
THREADS=${SOAK_THREADS:-2}
status=0
for prof in speed balanced lean; do
    line=$(env HAKMEM_PROFILE=$prof LD_PRELOAD=$PWD/build/libhakmem.so \
           build/bench/soak "$SECS" "$THREADS" 1 2>/dev/null | grep '^RESULT')
    if ! grep -q 'allocator=[^ ]*libhakmem.*hakmem_owned=1' <<<"$line"; then
        echo "soak: $prof: hakmem did not serve the run: ${line:-no RESULT}"; status=1; continue
    fi
    get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
    drift=$(get rss_drift_pct) sys=$(get syscalls_per_op) ops=$(get ops_per_sec) bad=$(get verify_errors)
    verdict=ok
    if [ "$prof" != lean ]; then
        awk -v d="$drift" -v s="$sys" 'BEGIN { exit !(d == 0 && s >= 0 && s < 1e-6) }' || verdict=FAIL
    fi
    [ "$bad" = 0 ] || verdict=FAIL
    printf 'soak %-9s %4ss x%s threads: %12s ops/s  rss peak %s -> %s KiB  drift %s%% (program grew in %s classes)  syscalls/op %s  verify errors %s  %s\n' \
        "$prof" "$SECS" "$THREADS" "$ops" "$(get rss_first_half_peak_kb)" "$(get rss_second_half_peak_kb)" \
        "$drift" "$(get program_grew)" "$sys" "$bad" "$verdict"
    [ "$verdict" = ok ] || status=1
done
exit $status
