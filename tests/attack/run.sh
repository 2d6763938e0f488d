#!/usr/bin/env bash
# tests/attack/run.sh -- run every attack case of tests/attack/cases.tsv under
# one allocator and print one line per case:
#     <case> caught|missed|error  <how the program ended>
# then "summary: ...".  Each case runs in a subprocess under a time limit
# (ATTACK_TIMEOUT seconds, default 10; SIGKILL 2 s later).
#   run.sh LIB.so [GLOB]   under LD_PRELOAD=LIB.so (an absolute path)
#   run.sh glibc [GLOB]    under the C library's malloc
# GLOB picks cases by name (a shell pattern, e.g. 'double_free.*').
# ATTACK_BIN is the directory of the programs (default build/tests/attack).
# ATTACK_ENV="VAR=value ..." sets options for every case after the HAKMEM_*
# variables of the caller are cleared, e.g. ATTACK_ENV=HAKMEM_GUARD_SAMPLE=1
# runs the suite with every allocation guarded (docs/security.md, "Guarded
# sampling").
#
# Proof of the allocator: every program prints the file mapped at malloc's
# address ("ALLOCATOR <path>", found in /proc/self/maps); a case whose path is
# not LIB.so (or libc for glibc) is an error, not a result.  The header line
# names the path seen.  Exit status: 0, or 1 when a case was an error.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${ATTACK_BIN:-$root/build/tests/attack}
limit=${ATTACK_TIMEOUT:-10}
lib=${1:?usage: run.sh LIB.so|glibc [GLOB]}
glob=${2:-*}
export LC_ALL=C
unset LD_PRELOAD MALLOC_CHECK_ MALLOC_PERTURB_ GLIBC_TUNABLES
# no HAKMEM_* options but HAKMEM_BACKGROUND_PURGE (kept as tests/lib.sh keeps it)
for v in $(compgen -e); do [[ $v == HAKMEM_* && $v != HAKMEM_BACKGROUND_PURGE ]] && unset "$v"; done
export LIBC_FATAL_STDERR_=1   # glibc's reports on stderr, not the terminal
ulimit -c 0

if [[ $lib == glibc ]]; then
    preload=() want='/libc[.-][^/]*$'
else
    [[ -f $lib ]] || { echo "run.sh: no such library: $lib" >&2; exit 2; }
    lib=$(realpath "$lib")
    preload=(LD_PRELOAD="$lib") want="^$(sed 's/[].[^$*\\]/\\&/g' <<<"$lib")\$"
fi

caught=0 missed=0 ok=0 broken=0 errors=0 total=0 served=
while IFS=$'\t' read -r name kind cmd _; do
    [[ -z $name || $name == \#* ]] && continue
    # shellcheck disable=SC2053
    [[ $name == $glob ]] || continue
    read -r prog args <<<"$cmd"
    # shellcheck disable=SC2086
    out=$(timeout -k 2 "$limit" env "${preload[@]}" ${ATTACK_ENV:-} "$bin/$prog" $args 2>&1 </dev/null)
    rc=$?
    path=$(sed -n 's/^ALLOCATOR //p' <<<"$out" | head -n 1)
    path=$(realpath -q "$path" || echo "$path")
    if ((rc == 124 || rc == 137)); then
        how="timed out after ${limit}s"
    elif ((rc > 128)); then
        how="signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))"
    else
        how="exit $rc"
    fi
    if ! grep -Eq -- "$want" <<<"$path"; then
        result=error how="served by '${path:-nothing}', not $lib; $how"
    elif grep -q '^SETUP-FAILED' <<<"$out"; then
        result=error how=$(grep -m1 '^SETUP-FAILED' <<<"$out")
    elif [[ $kind == ok ]]; then
        if ((rc == 0)) && grep -qx OK <<<"$out"; then result=caught; else result=missed; fi
    elif ((rc == 124 || rc == 137)) || grep -qx SURVIVED <<<"$out"; then
        result=missed
    else
        result=caught
    fi
    [[ -z $served && $result != error ]] && served=$path && echo "# allocator: $lib, served by $served"
    total=$((total + 1))
    case $result:$name in
        caught:legit.*) ok=$((ok + 1)) ;;
        missed:legit.*) broken=$((broken + 1)) ;;
        caught:*) caught=$((caught + 1)) ;;
        missed:*) missed=$((missed + 1)) ;;
        *) errors=$((errors + 1)) ;;
    esac
    [[ $name == legit.* ]] && result=${result/caught/ok} && result=${result/missed/broken}
    printf '%-34s %-6s %s\n' "$name" "$result" "$how"
done <"$here/cases.tsv"
attacks=$((caught + missed))
echo "summary: $lib: caught $caught of $attacks attacks; legit programs ok $ok of $((ok + broken)); errors $errors"
((errors == 0))
