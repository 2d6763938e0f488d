#!/usr/bin/env bash
# suite_crash.sh -- the SIGSEGV/SIGBUS handler (src/hak_crash.c): a fault
# inside hakmem is reported (naming the function) and the process still dies
# by the signal; every other SIGSEGV/SIGBUS reaches what the program had
# installed before hakmem, with the kernel's semantics (default action,
# ignore, sa_mask, SA_NODEFER, SA_RESETHAND, SA_SIGINFO); a signal sent with
# kill()/raise()/pthread_kill() is never lost; the handler calls only
# async-signal-safe functions.  Each case of tests/test_crash.c runs in a
# subprocess.  Also: docs/options.md lists exactly the options of
# src/hak_options.c with their defaults.  And the harness itself: a program
# that blocks every signal and sleeps for ever (tests/hang_blocked.c) run by
# run_bin or expect_report with a 2 s limit gives a FAIL line naming its
# test within 10 s (tests/lib.sh's SIGKILL limit).
source "$(dirname "$0")/lib.sh"

# ---- the harness: a hang that ignores SIGTERM is a named FAIL, quickly ----
# harness_hang NAME HELPER: run lib.sh's HELPER on hang_blocked in a shell of
# its own (its FAIL line is the expected result, shown here with "# ")
harness_hang() {
    local name=$1 helper=$2 out rc t0=$EPOCHREALTIME el
    out=$(limit 30 bash -c 'source tests/lib.sh
        case $1 in
        run_bin) run_bin harness.blocked 2 "$2" ;;
        expect_report) EXPECT_LIMIT=2 expect_report harness.blocked 0 "never" "$2" ;;
        esac' _ "$helper" "$T/hang_blocked" 2>&1)
    rc=$?
    el=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    sed 's/^/# /' <<<"$out"
    # (rc is the helper's own status: 137 from run_bin on the killed program)
    if awk -v e="$el" 'BEGIN { exit !(e >= 30) }'; then
        fail "$name" "the $helper run itself was still there after 30 s"
    elif ! grep -q '^FAIL harness.blocked: timed out after 2s' <<<"$out"; then
        fail "$name" "no 'FAIL harness.blocked: timed out after 2s' line (exit $rc)"
    elif awk -v e="$el" 'BEGIN { exit !(e > 10) }'; then
        fail "$name" "reported after $el s, want at most 10"
    else
        pass "$name ($el s)"
    fi
}
if need harness "$T/hang_blocked"; then
    harness_hang harness.run_bin_kills_blocked_hang run_bin
    harness_hang harness.expect_report_kills_blocked_hang expect_report
fi

BIN=$T/test_crash
STA_SO=$ROOT/build/stats/libhakmem.so
need crash "$BIN" "$REL_SO" "$DBG_SO" "$STA_SO" || exit 1
SEGV=139 BUS=135 P='0x[0-9a-f]+'
REPORT='inside the allocator'

# check NAME WANT_STATUS OUTPUT STATUS PATTERN...: every PATTERN must match
# a line of OUTPUT (extended regex); a PATTERN "!re" must match none; "N*re"
# must match exactly N lines.
check() {
    local name=$1 want=$2 out=$3 rc=$4
    shift 4
    local pat n why=
    if ((rc != want)); then
        why="exit status $rc, want $want"
    fi
    for pat in "$@"; do
        [[ -n $why ]] && break
        if [[ $pat == '!'* ]]; then
            grep -Eq -- "${pat#!}" <<<"$out" && why="output has /${pat#!}/"
        elif [[ $pat =~ ^([0-9]+)\*(.*)$ ]]; then
            n=$(grep -Ec -- "${BASH_REMATCH[2]}" <<<"$out")
            ((n == BASH_REMATCH[1])) || why="/${BASH_REMATCH[2]}/ on $n lines, want ${BASH_REMATCH[1]}"
        else
            grep -Eq -- "$pat" <<<"$out" || why="output lacks /$pat/"
        fi
    done
    if [[ -n $why ]]; then
        fail "$name" "$why; output: $(head -c 400 <<<"$out" | tr '\n' '|')"
    else
        pass "$name"
    fi
}
# expect NAME SO CASE WANT_STATUS PATTERN... (environment: CRASH_ENV)
expect() {
    local name=$1 so=$2 case=$3 want=$4
    shift 4
    local out rc
    out=$(env ${CRASH_ENV:-} LD_PRELOAD="$so" timeout -k 5 30 "$BIN" "$case" 2>&1)
    rc=$?
    check "$name" "$want" "$out" "$rc" "$@"
}

# (a) a real fault inside hakmem: the report names the function, then the
# process dies by SIGSEGV as it would have without hakmem
for v in release debug stats; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO; [[ $v == stats ]] && so=$STA_SO
    # (the debug build's free-list checks may catch this one before it faults)
    [[ $v == debug ]] || expect crash.$v.fault_inside "$so" fault_inside $SEGV \
        "^hakmem: SIGSEGV inside the allocator \(in $v, near malloc\(\)\): fault address 0x10, " '!SURVIVED'
    # deep in the slow path: a function with no exported symbol
    expect crash.$v.fault_internal "$so" fault_internal $SEGV \
        "^hakmem: SIGSEGV inside the allocator \(in $v, near hak_[a-z0-9_.]+\(\)\): fault address 0x10, " '!SURVIVED'
done
expect crash.fault_outside "$REL_SO" fault_outside $SEGV "!$REPORT" '!SURVIVED'
expect crash.sigbus_fault  "$REL_SO" sigbus_fault  $BUS  "!$REPORT" '!SURVIVED'
CRASH_ENV=HAKMEM_CRASH_HANDLER=0 expect crash.handler_off "$REL_SO" fault_inside $SEGV '!hakmem:' '!SURVIVED'

# (b) SIGSEGV/SIGBUS sent by kill(), raise(), pthread_kill(): nothing to
# re-execute, so the handler must re-raise it under the default disposition
expect crash.kill_main         "$REL_SO" kill_main         $SEGV "!$REPORT" '!SURVIVED'
expect crash.raise_main        "$REL_SO" raise_main        $SEGV "!$REPORT" '!SURVIVED'
expect crash.sigbus_kill       "$REL_SO" sigbus_kill       $BUS  "!$REPORT" '!SURVIVED'
expect crash.pthread_kill_busy "$REL_SO" pthread_kill_busy $SEGV "!$REPORT" '!SURVIVED'
expect crash.kill_busy         "$REL_SO" kill_busy         $SEGV "!$REPORT" '!SURVIVED'
# the same with the PC certainly inside malloc (the handler called directly
# with a SI_USER siginfo and a context whose PC is in malloc)
expect crash.direct_inside     "$REL_SO" direct_inside     $SEGV "!$REPORT" '!SURVIVED'
expect crash.debug.direct_inside "$DBG_SO" direct_inside   $SEGV "!$REPORT" '!SURVIVED'

# (c)-(e) the program's own handler, installed before hakmem's
ON_TOP='^hakmem on top$'
expect crash.resethand_raise "$REL_SO" pre_resethand_raise $SEGV "$ON_TOP" '1*^handler called$' \
    '^calls=1 disposition default$' '!SURVIVED'
expect crash.resethand_fault "$REL_SO" pre_resethand_fault $SEGV "$ON_TOP" '1*^handler called$' '!SURVIVED'
expect crash.mask_raise "$REL_SO" pre_mask_raise 0 "$ON_TOP" \
    '^in handler: SIGUSR1 blocked=1$' '^in handler: SIGSEGV blocked=1$' \
    '^after: SIGUSR1 blocked=0$' '^after: SIGSEGV blocked=0$'
expect crash.mask_fault "$REL_SO" pre_mask_fault 0 "$ON_TOP" \
    '^in handler: SIGUSR1 blocked=1$' '^in handler: SIGSEGV blocked=1$' '^after: SIGUSR1 blocked=0$'
expect crash.mask_nodefer "$REL_SO" pre_mask_nodefer 0 "$ON_TOP" \
    '^in handler: SIGUSR1 blocked=1$' '^in handler: SIGSEGV blocked=0$' '^after: SIGUSR1 blocked=0$'
expect crash.siginfo "$REL_SO" pre_siginfo 0 "$ON_TOP" '^siginfo fault ok$' '^siginfo queue ok$'
# SIG_IGN: sent signals are ignored, a fault still kills (as the kernel does)
expect crash.ignored "$REL_SO" pre_ignored $SEGV "$ON_TOP" '^ignored$' '!SURVIVED'

# hakmem linked statically into the program: only hakmem's own functions
# count as "inside the allocator", not the whole executable
if need crash.static.build "$ROOT/build/libhakmem.a"; then
    SBIN=$T/crash/test_crash_static
    mkdir -p "$T/crash"
    if ${CC:-cc} -std=gnu11 -D_GNU_SOURCE -Iinclude -O2 -g -pthread tests/test_crash.c \
        -Wl,--whole-archive "$ROOT/build/libhakmem.a" -Wl,--no-whole-archive -o "$SBIN" -ldl \
        >"$T/crash/build.log" 2>&1; then
        pass crash.static.build
        for c in fault_outside fault_inside kill_main pre_resethand_raise; do
            out=$(timeout -k 5 30 "$SBIN" $c 2>&1); rc=$?
            case $c in
            fault_outside) check crash.static.$c $SEGV "$out" $rc "!$REPORT" '!SURVIVED' ;;
            fault_inside)  check crash.static.$c $SEGV "$out" $rc \
                               "^hakmem: SIGSEGV inside the allocator \(in release, near malloc\(\)\)" ;;
            kill_main)     check crash.static.$c $SEGV "$out" $rc "!$REPORT" '!SURVIVED' ;;
            pre_resethand_raise) check crash.static.$c $SEGV "$out" $rc "$ON_TOP" '1*^handler called$' \
                               '^calls=1 disposition default$' ;;
            esac
        done
    else
        fail crash.static.build "$(tail -n 3 "$T/crash/build.log" | tr '\n' ' ')"
    fi
fi

# (f) the handler reaches only async-signal-safe functions: follow every
# direct call and jump from hak_crash_handler through hakmem's own code and
# list the functions it calls outside hakmem (through the PLT)
# (syscall: the raw system call, no lock and no cancellation point: hakmem's
# messages use it, hak_os_write_err; siglongjmp, async-signal-safe since
# POSIX.1-2008 TC2: a fault in a report's own stack walk jumps back to the
# report, out of code of hakmem's that holds no lock -- hak_report.c)
SAFE='syscall write open read lseek close sigaction pthread_sigmask sigprocmask raise kill getpid gettid tgkill siglongjmp sigemptyset
      sigaddset sigdelset sigfillset sigismember abort _exit __errno_location
      memset memcpy memmove memcmp memchr strlen strnlen strcmp strncmp strchr strcpy strncpy'
callees() {   # callees SO: the external functions reachable from the handler
    objdump -d --no-show-raw-insn "$1" | awk '
        /^[0-9a-f]+ <[^>]+>:$/ { f = $2; gsub(/[<>:]/, "", f); defined[f] = 1; next }
        $2 ~ /^(call|j[a-z]*)$/ && $4 ~ /^</ {
            t = $4; gsub(/[<>]/, "", t); sub(/\+0x[0-9a-f]+$/, "", t)
            if (t != f) edge[f] = edge[f] " " t
        }
        END {
            todo[1] = "hak_crash_handler"; n = 1; seen["hak_crash_handler"] = 1
            for (i = 1; i <= n; i++) {
                k = split(edge[todo[i]], ts, " ")
                for (j = 1; j <= k; j++) {
                    t = ts[j]; b = t; sub(/@plt$/, "", b)
                    if (b in defined) t = b; else if (t !~ /@plt$/) t = t "@plt"
                    if (t in seen) continue
                    seen[t] = 1
                    if (t ~ /@plt$/) print b; else todo[++n] = t
                }
            }
            if (!defined["hak_crash_handler"]) print "(no hak_crash_handler)"
        }' | sort -u
}
for v in release debug; do
    so=$REL_SO; [[ $v == debug ]] && so=$DBG_SO
    if ! command -v objdump >/dev/null; then skip crash.$v.signal_safe "no objdump"; continue; fi
    ext=$(callees "$so")
    bad=$(comm -23 <(tr ' ' '\n' <<<"$ext" | sed '/^$/d' | sort -u) <(tr -s ' \n' '\n' <<<"$SAFE" | sed '/^$/d' | sort -u))
    if [[ -z $ext ]]; then
        fail crash.$v.signal_safe "found no callees of hak_crash_handler in $so"
    elif [[ -n $bad ]]; then
        fail crash.$v.signal_safe "the handler can call $(tr '\n' ' ' <<<"$bad")"
    else
        pass crash.$v.signal_safe
    fi
done
for o in "$ROOT/build/obj/hak_crash.o" "$ROOT/build/debug/obj/hak_crash.o"; do
    if need crash.no_dladdr "$o"; then
        if nm -u "$o" | grep -qw dladdr; then fail crash.no_dladdr "$o references dladdr"; else pass crash.no_dladdr; fi
    fi
done

# docs/options.md documents exactly the options of src/hak_options.c, with
# the same defaults per profile (speed, balanced, lean); a text option
# (hak_option_texts: HAKMEM_STATS_FILE) is "unset" by default
table=$({ grep -Eo '\{ *"HAKMEM_[A-Z_]+", *&[a-z_.]+, *\{[^}]*\}' src/hak_options.c |
          sed -E 's/\{ *"([A-Z_]+)".*\{ *([^,}]+), *([^,}]+), *([^,}]+) *\}/\1 \2 \3 \4/'
          grep -Eo '\{ *"HAKMEM_[A-Z_]+", *&hak_opt\.[a-z_]+, *hak_[a-z_]+_buf' src/hak_options.c |
          sed -E 's/\{ *"([A-Z_]+)".*/\1 unset unset unset/'; } | sort)
doc=$(awk -F'|' '
    /^## / { sect = $0 }
    $2 ~ /^ `HAKMEM_[A-Z_]+` $/ {
        n = $2; gsub(/[ `]/, "", n)
        for (i = 3; i <= 5; i++) { v[i] = $i; gsub(/ /, "", v[i]) }
        if (sect ~ /Profiles/) print n, v[3], v[4], v[5]
        else if (n != "HAKMEM_PROFILE") print n, v[3], v[3], v[3]
    }' docs/options.md | sort)
if [[ -z $table ]]; then
    fail docs.options_table "could not read the option table of src/hak_options.c"
elif [[ $table != "$doc" ]]; then
    fail docs.options_table "src/hak_options.c and docs/options.md differ: $(diff <(echo "$table") <(echo "$doc") | grep '^[<>]' | tr '\n' ' ')"
else
    pass docs.options_table
fi
exit $SUITE_STATUS
