#!/usr/bin/env bash
# tools/fastpath-count.sh -- instructions from malloc's and free's entry to
# their first `ret` (inclusive), as objdump disassembles the library: the
# fast-path lengths quoted in docs/design.md.  objdump may label an address
# with an alias (hakmem_malloc for malloc), so the address comes from nm.
#   tools/fastpath-count.sh                      build/libhakmem.so, host objdump
#   tools/fastpath-count.sh build/aarch64/libhakmem.so aarch64-linux-gnu-
set -eu
lib=${1:-build/libhakmem.so}
prefix=${2:-}
dis=$(mktemp)
trap 'rm -f "$dis"' EXIT
"${prefix}objdump" -d --no-show-raw-insn "$lib" >"$dis"
for fn in malloc free; do
    addr=$("${prefix}nm" -D --defined-only "$lib" | awk -v f="$fn" '$3 == f { sub(/^0+/, "", $1); print $1 }')
    n=$(awk -v a="$addr:" '
        $1 == a { on = 1 }
        on && /^$/ { exit }
        on && NF >= 2 { n++; if ($2 ~ /^ret/) { print n; exit } }' "$dis")
    echo "$fn ${n:-?}"
done
