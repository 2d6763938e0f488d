#!/usr/bin/env bash
# suite_stats.sh -- the statistics report (issue 38): where it goes and what
# it says.
#   stats.account.{release,debug,hardened}.*  build/tests/test_stats: the
#                         memory account's parts add up to the mapped total,
#                         live bytes, the parts as pages are freed and
#                         trimmed, residency, the peak, hakmem_stats_print_cb,
#                         the walk while threads allocate and free
#   stats.closed_stderr   HAKMEM_STATS=1 ls: coreutils close stderr before the
#                         report; it goes to $TMPDIR/hakmem-stats.PID.txt
#   stats.closed_stderr_notice  ... and a line on the terminal (a pty made by
#                         script(1)) names that file
#   stats.closed_stderr_no_symlink  a symbolic link planted under that name
#                         is not followed: the report takes PID.1
#   stats.file            HAKMEM_STATS_FILE=DIR/s.%p.txt alone: the report
#                         (asked for by the variable) in DIR/s.PID.txt, stderr
#                         left alone
#   stats.file_unwritable a file that cannot be made: a warning, and the
#                         report on stderr
#   stats.launcher_file   tools/hakmem run --stats=FILE
#   stats.summary_first   the report's first line is the summary (live bytes
#                         and blocks, pages in use and their peak, resident
#                         and mapped, the process's RSS); the account's rows
#                         follow; no class table without HAKMEM_STATS_BY_CLASS
#   stats.classes_option  HAKMEM_STATS_BY_CLASS=1: the class table, no row of
#                         only zeros
#   stats.seccomp_no_proc under a seccomp filter that kills the process on
#                         open (tests/hostile.c's hostile_seccomp.so), the
#                         report at exit does not read /proc: the program
#                         ends with status 0 and the report says why RSS
#                         is missing
source "$(dirname "$0")/lib.sh"
BIN=$T/test_stats
need stats "$BIN" "$REL_SO" "$DBG_SO" "$HRD_SO" || exit 1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
VER=$(sed -n 's/^#define HAKMEM_VERSION_STRING "\(.*\)"/\1/p' include/hakmem.h)

for v in release debug hardened; do
    case $v in release) so=$REL_SO ;; debug) so=$DBG_SO ;; hardened) so=$HRD_SO ;; esac
    run_bin stats.account.$v 60 env LD_PRELOAD="$so" "$BIN" -p stats.account.$v
done

# ls closes stdout and stderr at exit (close_stdout), before hakmem's report
LS=$(command -v ls)
mkdir -p "$W/t1"
# (the environment after limit: timeout(1) is coreutils too, and would leave a report of its own)
out=$(limit 30 env TMPDIR="$W/t1" HAKMEM_STATS=1 LD_PRELOAD="$REL_SO" "$LS" / 2>&1 >/dev/null)
rc=$?
files=("$W"/t1/hakmem-stats.*.txt)
if ((rc != 0)); then
    fail stats.closed_stderr "ls exited $rc"
elif [[ ${#files[@]} != 1 || ! -f ${files[0]} ]]; then
    fail stats.closed_stderr "no report in \$TMPDIR: $(ls "$W/t1" | tr '\n' ' ') (stderr: ${out:0:100})"
elif ! head -n 1 "${files[0]}" | grep -q "^hakmem $VER statistics" ||
    ! grep -q '^hakmem:   OS calls: mmap' "${files[0]}"; then
    fail stats.closed_stderr "${files[0]} holds no report: $(head -c 200 "${files[0]}")"
elif [[ -n $out ]]; then
    fail stats.closed_stderr "something reached the closed stderr: ${out:0:100}"
else
    pass stats.closed_stderr
fi

if command -v script >/dev/null 2>&1; then
    mkdir -p "$W/t2"
    out=$(TMPDIR=$W/t2 limit 30 script -qec "HAKMEM_STATS=1 LD_PRELOAD='$REL_SO' $LS / >/dev/null" /dev/null 2>&1)
    f=$(sed -n 's/^hakmem: stderr is closed: statistics written to \([^[:space:]]*\).*/\1/p' <<<"$out" | head -n 1)
    if [[ -n $f && -f $f && $f == "$W"/t2/hakmem-stats.*.txt ]] && grep -q '^hakmem:   OS calls' "$f"; then
        pass stats.closed_stderr_notice
    else
        fail stats.closed_stderr_notice "the terminal shows no notice naming the file: ${out:0:200}"
    fi
else
    skip stats.closed_stderr_notice "script(1) is not installed"
fi

# the pid is the shell's, which execs ls: the link has the report's name
mkdir -p "$W/t3"
TMPDIR=$W/t3 limit 30 bash -c \
    'ln -s "$TMPDIR/target" "$TMPDIR/hakmem-stats.$$.txt"; echo $$ >"$TMPDIR/pid"
     HAKMEM_STATS=1 LD_PRELOAD=$1 exec "$0" / >/dev/null' "$LS" "$REL_SO"
pid=$(cat "$W/t3/pid" 2>/dev/null)
if [[ -e $W/t3/target ]]; then
    fail stats.closed_stderr_no_symlink "the report followed a symbolic link"
elif [[ -z $pid || ! -f $W/t3/hakmem-stats.$pid.1.txt ]] || ! grep -q '^hakmem:   OS calls' "$W/t3/hakmem-stats.$pid.1.txt"; then
    fail stats.closed_stderr_no_symlink "no report in hakmem-stats.$pid.1.txt: $(ls "$W/t3" | tr '\n' ' ')"
else
    pass stats.closed_stderr_no_symlink
fi

# HAKMEM_STATS_FILE alone asks for the report, %p is the pid
mkdir -p "$W/t4"
err=$(limit 30 bash -c \
    'echo $$ >"$0/pid"; HAKMEM_STATS_FILE=$0/s.%p.txt LD_PRELOAD=$2 exec "$1" / >/dev/null' "$W/t4" "$LS" "$REL_SO" 2>&1)
pid=$(cat "$W/t4/pid" 2>/dev/null)
if [[ -z $pid || ! -f $W/t4/s.$pid.txt ]]; then
    fail stats.file "no s.$pid.txt: $(ls "$W/t4" | tr '\n' ' ')"
elif ! head -n 1 "$W/t4/s.$pid.txt" | grep -q "^hakmem $VER statistics"; then
    fail stats.file "s.$pid.txt holds no report: $(head -c 200 "$W/t4/s.$pid.txt")"
elif [[ -n $err ]]; then
    fail stats.file "stderr not left alone: ${err:0:100}"
else
    pass stats.file
fi

err=$(limit 30 env HAKMEM_STATS_FILE="$W/nodir/s.txt" LD_PRELOAD="$REL_SO" "$BIN" -t none 2>&1 >/dev/null)
if grep -q "^hakmem: warning: HAKMEM_STATS_FILE: cannot write '$W/nodir/s.txt'" <<<"$err" &&
    grep -q "^hakmem $VER statistics" <<<"$err"; then
    pass stats.file_unwritable
else
    fail stats.file_unwritable "no warning and report on stderr: ${err:0:200}"
fi

out=$(limit 30 tools/hakmem run --stats="$W/l.txt" -- "$LS" / 2>&1 >/dev/null)
if [[ -f $W/l.txt ]] && head -n 1 "$W/l.txt" | grep -q "^hakmem $VER statistics"; then
    pass stats.launcher_file
else
    fail stats.launcher_file "no report in the file: ${out:0:200}"
fi

err=$(limit 30 env HAKMEM_STATS=1 LD_PRELOAD="$REL_SO" "$BIN" -t none 2>&1 >/dev/null)
first=$(grep -m1 '^hakmem' <<<"$err")
re="^hakmem $VER statistics \(release build\): live [0-9.]+ [KMGT]?i?B in [0-9]+ blocks, pages in use [0-9.]+ [KMGT]?i?B \(peak [0-9.]+ [KMGT]?i?B\); hakmem resident [0-9.]+ [KMGT]?i?B of [0-9.]+ [KMGT]?i?B mapped; process RSS "
if ! grep -Eq "$re" <<<"$first"; then
    fail stats.summary_first "first line: ${first:0:200}"
elif ! grep -Eq '^hakmem:     (live blocks|free blocks in pages in use|empty pages kept|metadata|total) +[0-9]+ +[0-9]+$' <<<"$err"; then
    fail stats.summary_first "no account rows: $(head -n 4 <<<"$err" | tr '\n' '|')"
elif grep -Eq '^hakmem: +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+' <<<"$err"; then
    fail stats.summary_first "the class table without HAKMEM_STATS_BY_CLASS"
else
    pass stats.summary_first
fi

err=$(limit 30 env HAKMEM_STATS=1 HAKMEM_STATS_BY_CLASS=1 LD_PRELOAD="$REL_SO" "$BIN" -t live_bytes 2>&1 >/dev/null)
rows=$(grep -Ec '^hakmem: +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+$' <<<"$err")
zero=$(grep -Ec '^hakmem: +[0-9]+ +[0-9]+ +0 +0 +0 +0$' <<<"$err")
if ((rows >= 5 && zero == 0)); then
    pass stats.classes_option
else
    fail stats.classes_option "$rows class rows, $zero of them all zeros"
fi
SEC=$T/hostile_seccomp.so
if [[ -e $SEC ]]; then
    err=$(limit 30 env HAKMEM_STATS=1 LD_PRELOAD="$REL_SO $SEC" "$BIN" -t live_bytes 2>&1 >/dev/null)
    rc=$?
    if ((rc == 77)); then
        skip stats.seccomp_no_proc "the kernel refused the seccomp filter"
    elif ((rc != 0)); then
        fail stats.seccomp_no_proc "exit status $rc (159: killed by SIGSYS, an open under the filter): ${err:0:200}"
    elif ! grep -q "process RSS not read (a seccomp filter is on" <<<"$err"; then
        fail stats.seccomp_no_proc "the report does not say why RSS is missing: $(grep -m1 '^hakmem 0' <<<"$err")"
    else
        pass stats.seccomp_no_proc
    fi
else
    skip stats.seccomp_no_proc "no $SEC (make test-bins)"
fi
exit $SUITE_STATUS
