#!/usr/bin/env bash
# tests/attack/compare.sh -- the attack suite under several allocators, side
# by side (make attack): caught counts per family, one column per allocator.
#   compare.sh [name=/path/lib.so ...]
# Columns: hakmem (build/libhakmem.so), hakmem-hardened
# (build/hardened/libhakmem.so, made by make attack), glibc, the Debian peers that are
# installed (mimalloc, jemalloc, tcmalloc, scudo; missing ones are skipped
# with a note), then each name=/path/lib.so argument (make attack PEERS=...).
# ATTACK_CASES=1 also prints every case's result per allocator.
# Each allocator's run is tests/attack/run.sh, which proves in every case
# that the allocator named served it; its full output is kept in
# build/tests/attack/compare.<name>.txt.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${ATTACK_BIN:-$root/build/tests/attack}
deb=/usr/lib/x86_64-linux-gnu
names=(hakmem) libs=("$root/build/libhakmem.so")
# the hardened build (make hardened) when it is built
[[ -f $root/build/hardened/libhakmem.so ]] && names+=(hakmem-hardened) libs+=("$root/build/hardened/libhakmem.so")
names+=(glibc) libs+=(glibc)
for peer in "mimalloc=$deb/libmimalloc.so.2" "jemalloc=$deb/libjemalloc.so.2" \
            "tcmalloc=$deb/libtcmalloc_minimal.so.4" \
            "scudo=/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.scudo_standalone-x86_64.so" "$@"; do
    name=${peer%%=*} lib=${peer#*=}
    if [[ $name == "$peer" || -z $name ]]; then
        echo "compare.sh: '$peer' is not name=/path/lib.so" >&2
        exit 2
    elif [[ ! -f $lib ]]; then
        echo "# skipped $name: no $lib"
        continue
    fi
    names+=("$name") libs+=("$lib")
done

# two allocators at a time (a case that hangs costs its time limit)
for i in "${!names[@]}"; do
    bash "$here/run.sh" "${libs[$i]}" >"$out/compare.${names[$i]}.txt" 2>&1 &
    (( i % 2 )) && wait
done
wait

status=0
for n in "${names[@]}"; do
    f=$out/compare.$n.txt
    grep -m1 '^# allocator' "$f" | sed "s/^# allocator:/# $n:/"
    if grep -q '^summary.*errors [1-9]' "$f" || ! grep -q '^summary' "$f"; then
        echo "# $n: errors, see $f"
        status=1
    fi
done
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo

files=()
for n in "${names[@]}"; do files+=("$out/compare.$n.txt"); done
awk -v names="${names[*]}" -v cases="${ATTACK_CASES:-}" '
    BEGIN { na = split(names, nm, " ") }
    FNR == 1 { a++ }
    /^(#|summary)/ { next }
    {
        c = $1; f = c; sub(/\..*/, "", f)
        if (!(c in seen)) { seen[c] = 1; order[++nc] = c; fam[c] = f }
        if (!(f in fseen)) { fseen[f] = 1; forder[++nf] = f }
        if (a == 1) size[f]++
        res[c, a] = $2
        if ($2 == "caught" || $2 == "ok") { got[f, a]++; if (f != "legit") tot[a]++ }
    }
    END {
        if (cases) {
            printf "%-34s", "case"
            for (i = 1; i <= na; i++) printf " %9s", nm[i]
            printf "\n"
            for (k = 1; k <= nc; k++) {
                printf "%-34s", order[k]
                for (i = 1; i <= na; i++) printf " %9s", res[order[k], i]
                printf "\n"
            }
            printf "\n"
        }
        printf "%-15s %5s", "family", "cases"
        for (i = 1; i <= na; i++) printf " %9s", nm[i]
        printf "\n"
        for (k = 1; k <= nf; k++) {
            f = forder[k]
            if (f == "legit") continue
            printf "%-15s %5d", f, size[f]
            for (i = 1; i <= na; i++) printf " %9d", got[f, i]
            printf "\n"; all += size[f]
        }
        printf "%-15s %5d", "total caught", all
        for (i = 1; i <= na; i++) printf " %9d", tot[i]
        printf "\n%-15s %5d", "legit ok", size["legit"]
        for (i = 1; i <= na; i++) printf " %9d", got["legit", i]
        printf "\n"
    }' "${files[@]}"
exit $status
