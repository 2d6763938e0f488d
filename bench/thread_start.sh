#!/usr/bin/env bash
# bench/thread_start.sh -- thread start-up under glibc and hakmem (issue 36,
# item 6; docs/benchmarks.md, "Thread start-up").  A benchmark, not a test:
# it prints a table and never fails on a slow figure.
#
# usage: bench/thread_start.sh [LIB]      (LIB: the hakmem to measure,
#                                          default build/libhakmem.so)
#   THREADS=4000  threads per run             REPS=5  repetitions (interleaved)
#   ENVS="normal noproc pidns seccomp sigblock nofile"
#   VARIANTS="alive serial alive+dead serial+dead"
#   LIMIT=300     seconds per run (SIGKILL 5 s later, outside any namespace)
#   BIN=build/bench/thread_start (make build/bench/thread_start)
#   OUT=build/bench/thread_start.out   where runs.txt and table.txt go
#
# Environments:
#   normal    nothing special
#   noproc    a private mount namespace with /proc unmounted (unshare --mount,
#             umount -l /proc; a tmpfs over it if that is refused)
#   pidns     a PID namespace whose /proc is the parent's (unshare --pid --fork,
#             without --mount-proc): thread ids and /proc's disagree
#   seccomp   a filter that kills the process on open/openat/openat2, made by
#             the program after start-up (prctl, raw BPF)
#   sigblock  every signal blocked before the threads start
#   nofile    RLIMIT_NOFILE 3 after start-up: no descriptor can be opened
# Variants: alive (each thread allocates, then waits until all N started),
# serial (each thread allocates, frees and ends before the next), and +dead:
# first one thread whose first allocation comes in the last key-destructor
# round, so that a dead thread's heap exists when the N start.
#
# Each repetition runs glibc and hakmem back to back, alternating which goes
# first.  A run counts only if its RESULT line names the allocator it was
# meant to measure (allocator=glibc with no preload, allocator=hakmem -- every
# sampled block claimed by hakmem_owns -- with it).  Per environment and
# variant: glibc's and hakmem's median seconds, the ratio, and the verdict
# against the target hakmem <= 1.5 x glibc.  Raw lines go to
# build/bench/thread_start.out/runs.txt, the table also to .../table.txt.
set -u
cd "$(dirname "$0")/.." || exit 2
export LC_ALL=C
unset LD_PRELOAD
for _v in $(compgen -e); do [[ $_v == HAKMEM_* ]] && unset "$_v"; done

SO=$(realpath "${1:-build/libhakmem.so}")
BIN=$(realpath "${BIN:-build/bench/thread_start}")
THREADS=${THREADS:-4000}
REPS=${REPS:-5}
ENVS=${ENVS:-"normal noproc pidns seccomp sigblock nofile"}
VARIANTS=${VARIANTS:-"alive serial alive+dead serial+dead"}
LIMIT=${LIMIT:-300}
OUT=${OUT:-build/bench/thread_start.out}
mkdir -p "$OUT"
RUNS=$OUT/runs.txt
TABLE=$OUT/table.txt
: >"$RUNS"
[[ -x $BIN ]] || { echo "missing $BIN (make build/bench/thread_start)" >&2; exit 2; }
[[ -f $SO ]] || { echo "missing $SO" >&2; exit 2; }

# run ENV VARIANT ALLOC: one run; prints "seconds" or "FAIL:reason" / "NA:reason"
run() {
    local env=$1 variant=$2 alloc=$3 prefix=() args=() pre=() out rc line got
    args=(--threads "$THREADS" --mode "${variant%+dead}")
    [[ $variant == *+dead ]] && args+=(--dead-heap)
    case $env in
        noproc) prefix=(unshare --mount --propagation private -- sh -c \
                        'umount -l /proc 2>/dev/null || mount -t tmpfs none /proc || exit 77; exec "$@"' sh) ;;
        pidns) prefix=(unshare --pid --fork --) ;;
        seccomp | sigblock | nofile) args+=(--env "$env") ;;
    esac
    [[ $alloc == hakmem ]] && pre=(LD_PRELOAD="$SO")
    out=$(timeout -k 5 "$LIMIT" "${prefix[@]}" env "${pre[@]}" "$BIN" "${args[@]}" 2>&1)
    rc=$?
    printf '%s %s %s rc=%d %s\n' "$env" "$variant" "$alloc" "$rc" "$(tr '\n' ' ' <<<"$out")" >>"$RUNS"
    line=$(grep '^RESULT ' <<<"$out" | tail -n 1)
    if ((rc == 124 || rc == 137)); then echo "FAIL:timed out after ${LIMIT}s"; return; fi
    if ((rc == 77)) || { [[ -z $line ]] && grep -q 'unshare: ' <<<"$out"; }; then
        echo "NA:$(head -n 1 <<<"$out" | tr ' ' '_')"; return
    fi
    if ((rc > 128)); then echo "FAIL:killed_by_SIG$(kill -l $((rc - 128)) 2>/dev/null)"; return; fi
    if ((rc != 0)) || [[ -z $line ]]; then echo "FAIL:exit_status_$rc"; return; fi
    got=$(sed -n 's/.* allocator=\([^ ]*\).*/\1/p' <<<"$line")
    if [[ $got != "$alloc" ]]; then echo "FAIL:proof_says_$got"; return; fi
    sed -n 's/.* seconds=\([0-9.]*\) .*/\1/p' <<<"$line"
}

median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

{
    echo "# thread_start: $THREADS threads, $REPS interleaved repetitions, hakmem = $SO"
    echo "# $(uname -r), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
    printf '%-9s %-12s %10s %10s %7s  %s\n' environment variant glibc_s hakmem_s ratio verdict
} | tee "$TABLE"
for env in $ENVS; do
    for variant in $VARIANTS; do
        g=() h=() gbad='' hbad=''
        for ((r = 1; r <= REPS; r++)); do
            order="glibc hakmem"
            ((r % 2 == 0)) && order="hakmem glibc"
            for a in $order; do
                v=$(run "$env" "$variant" "$a")
                if [[ $v == FAIL:* || $v == NA:* ]]; then
                    [[ $a == glibc ]] && gbad=${gbad:-$v} || hbad=${hbad:-$v}
                else
                    [[ $a == glibc ]] && g+=("$v") || h+=("$v")
                fi
            done
            # an environment that cannot be made, or a run that fails, is not repeated
            [[ $gbad == NA:* || $hbad == NA:* || -n $hbad ]] && break
        done
        gm=$(echo "${g[*]:-}" | median)
        hm=$(echo "${h[*]:-}" | median)
        ratio=-
        [[ $gm != - && $hm != - ]] && ratio=$(awk -v a="$hm" -v b="$gm" 'BEGIN { printf "%.2f", a / b }')
        if [[ $gbad == NA:* || $hbad == NA:* ]]; then
            verdict="n/a: ${gbad#NA:}${hbad#NA:}"
        elif [[ -n $hbad ]]; then
            verdict="FAILED (hakmem: ${hbad#FAIL:}; ${#h[@]} good runs)"
        elif [[ -n $gbad ]]; then
            verdict="glibc failed (${gbad#FAIL:})"
        elif awk -v r="$ratio" 'BEGIN { exit !(r <= 1.5) }'; then
            verdict="ok (<= 1.5x; proof: glibc ${#g[@]}/$REPS, hakmem ${#h[@]}/$REPS)"
        else
            verdict="SLOW (> 1.5x; proof: glibc ${#g[@]}/$REPS, hakmem ${#h[@]}/$REPS)"
        fi
        printf '%-9s %-12s %10s %10s %7s  %s\n' "$env" "$variant" "$gm" "$hm" "$ratio" "$verdict" | tee -a "$TABLE"
    done
done
echo "# raw runs: $RUNS" | tee -a "$TABLE"
