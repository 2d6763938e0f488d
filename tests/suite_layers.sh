#!/usr/bin/env bash
# suite_layers.sh -- the order of layers (issue 24): tools/layer-check.py with
# the one table tools/layers.tsv, on the objects of the release build (and of
# the debug, stats and hardened builds when they are there):
#   layers.table                 every source file has one layer
#   layers.no_new_upward_calls   no call into a higher layer but the listed ones
#   layers.exceptions_current    every listed upward call still exists
#   layers.hook_tables           every function-pointer variable is named
#   layers.design_picture        docs/design.md's picture is the table's
# and that the check fails when it should (layers.selftest.*): a fake upward
# call linked into a scratch copy of the objects, and modified copies of the
# table and of docs/design.md.
source "$(dirname "$0")/lib.sh"

CHECK=(/usr/bin/python3 tools/layer-check.py)
dirs=()
if need layers.objects build/obj/hak_alloc.o; then
    dirs+=(build/obj)
    for d in build/debug/obj build/stats/obj build/hardened/obj; do
        [[ -e $d/hak_alloc.o ]] && dirs+=("$d")
    done
    echo "objects: ${dirs[*]}"
    run_bin layers.check 60 "${CHECK[@]}" "${dirs[@]}"
else
    exit $SUITE_STATUS
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# expect_fail NAME WANT CMD...: the check must exit 1 and print the FAIL line WANT
expect_fail() {
    local name=$1 want=$2 out rc
    shift 2
    out=$(timeout -k 5 60 "$@" 2>&1)
    rc=$?
    if ((rc != 1)); then
        fail "$name" "the check exited with $rc, want 1: $(head -c 300 <<<"$out")"
    elif ! grep -q "^FAIL $want:" <<<"$out"; then
        fail "$name" "no FAIL $want line: $(head -c 300 <<<"$out")"
    else
        grep -E '^  [^ ]' <<<"$out" | head -n 3
        pass "$name"
    fi
}

# a new upward call in the objects: hak_segmap.o (segments) calling
# hak_heap_for_thread (heaps), linked in with ld -r
mkdir -p "$scratch/obj"
cp build/obj/*.o "$scratch/obj/"
printf 'void *hak_heap_for_thread(void);\nvoid *hak_layers_fake(void) { return hak_heap_for_thread(); }\n' \
    >"$scratch/fake.c"
if cc -c -O2 "$scratch/fake.c" -o "$scratch/fake.o" &&
    ld -r -o "$scratch/obj/hak_segmap.o" build/obj/hak_segmap.o "$scratch/fake.o"; then
    expect_fail layers.selftest.fake_upward_call layers.no_new_upward_calls \
        "${CHECK[@]}" "$scratch/obj"
else
    fail layers.selftest.fake_upward_call "could not build the scratch object"
fi

# a real call made upward by the table: hak_page.c moved below the segments
# (it calls hak_segment_page_alloc, among others); with a known upward call
# listed, dropping its row would do the same
sed $'s/^layer\tpages\thak_page.c/layer\tplatform\thak_page.c/' tools/layers.tsv >"$scratch/no_exception.tsv"
expect_fail layers.selftest.unlisted_call layers.no_new_upward_calls \
    "${CHECK[@]}" --table "$scratch/no_exception.tsv" build/obj

# an exception that does not exist: the list must shrink
{ cat tools/layers.tsv; printf 'upward\thak_os.c\thak_malloc_slow\tfake\n'; } >"$scratch/stale.tsv"
expect_fail layers.selftest.stale_exception layers.exceptions_current \
    "${CHECK[@]}" --table "$scratch/stale.tsv" build/obj

# a hook table the table does not name
grep -v $'^hook\thak_sampled_freed\t' tools/layers.tsv >"$scratch/no_hook.tsv"
expect_fail layers.selftest.unnamed_hook layers.hook_tables \
    "${CHECK[@]}" --table "$scratch/no_hook.tsv" build/obj

# a file moved to another layer in the table (hak_segmap.c from segments
# into support: no upward call follows), not in docs/design.md
sed $'s/^layer\tsegments\thak_segmap.c/layer\tsupport\thak_segmap.c/' tools/layers.tsv \
    >"$scratch/moved.tsv"
if cmp -s tools/layers.tsv "$scratch/moved.tsv"; then
    fail layers.selftest.picture "no hak_segmap.c row in the segments layer to move"
else
    expect_fail layers.selftest.picture layers.design_picture \
        "${CHECK[@]}" --table "$scratch/moved.tsv" build/obj
fi

# an edited picture in a copy of docs/design.md
sed 's/^ segments        hak_segment.c/ segments        hak_segmentX.c/' docs/design.md >"$scratch/design.md"
expect_fail layers.selftest.edited_doc layers.design_picture \
    "${CHECK[@]}" --doc "$scratch/design.md" build/obj

exit $SUITE_STATUS
