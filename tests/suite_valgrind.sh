#!/usr/bin/env bash
# suite_valgrind.sh -- test_api and a short test_stress (hakmem built -O1 -g
# -DHAK_NO_OVERRIDE, called through hakmem_* names) under valgrind memcheck:
# invalid reads/writes and uses of uninitialised values inside hakmem fail the
# run.  Valgrind keeps its own malloc; hakmem's memory comes from mmap.
source "$(dirname "$0")/lib.sh"

# vg_run NAME SECONDS BINARY ARGS...: the binary's PASS/FAIL lines plus
# NAME.memcheck_clean
vg_run() {
    local name=$1 limit=$2
    shift 2
    local log rc errs
    log=$(mktemp)
    run_bin "$name" "$limit" valgrind -q --error-exitcode=97 --leak-check=no --track-origins=yes \
        "$@" >"$log" 2>&1
    rc=$?
    errs=$(grep -cE '^==[0-9]+== (Invalid|Conditional|Use of uninit|Syscall param|Mismatched|Source and destination|Process terminating)' "$log")
    if ((errs > 0 || rc == 97)); then
        grep -E '^(PASS|FAIL|SKIP) ' "$log" | grep -v "^FAIL $name: exited with status"
        fail "$name.memcheck_clean" "$errs memcheck error(s); first: $(grep -m1 -E '^==[0-9]+== [A-Z]' "$log")"
        grep -E '^==[0-9]+==' "$log" | head -n 30 | sed 's/^/# /'
    else
        grep -E '^(PASS|FAIL|SKIP) ' "$log"
        pass "$name.memcheck_clean"
    fi
    rm -f "$log"
}

if ! command -v valgrind >/dev/null 2>&1; then
    skip valgrind "valgrind not installed (tools/install-deps.sh)"
    exit 0
fi
if need valgrind.api "$T/vg/test_api"; then
    vg_run valgrind.api 60 "$T/vg/test_api" -p valgrind.api --expect-hakmem --quick
fi
if need valgrind.stress "$T/vg/test_stress"; then
    vg_run valgrind.stress 60 "$T/vg/test_stress" -p valgrind.stress --expect-hakmem -s 0.05 -t 4 -j 3
fi
exit $SUITE_STATUS
