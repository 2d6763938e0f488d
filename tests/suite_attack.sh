#!/usr/bin/env bash
# suite_attack.sh -- the attack suite (tests/attack/) under the release, the
# debug and the hardened build (make hardened): each case must end as tests/attack/expected.tsv says
# (caught or missed; ok for the legit programs).  A case that now ends
# otherwise FAILs, an improvement as much as a regression: record it in
# expected.tsv.  One line per case and build: attack.<build>.<case>.
source "$(dirname "$0")/lib.sh"
A=$ROOT/tests/attack
need attack "$REL_SO" "$DBG_SO" "$HRD_SO" "$T/attack/attack_free" "$T/attack/attack_cxx" || exit 1

for v in release debug hardened; do
    so=$REL_SO col=2
    [[ $v == debug ]] && so=$DBG_SO col=3
    [[ $v == hardened ]] && so=$HRD_SO col=4
    out=$(ATTACK_BIN=$T/attack limit 300 bash "$A/run.sh" "$so" 2>&1)
    rc=$?
    if timed_out $rc; then
        fail attack.$v "tests/attack/run.sh timed out after 300s"
        continue
    fi
    # case, expected; then the results, so every case of either side shows
    awk -F'\t' -v c=$col '!/^#/ {print $1 "\t" $c}' "$A/expected.tsv" >"$T/attack/expected.$v"
    grep -Ev '^(#|summary)' <<<"$out" >"$T/attack/got.$v"
    awk -v v=$v '
        FNR == NR { want[$1] = $2; next }
        {
            name = $1; got = $2; how = $0
            sub(/^[^ ]+ +[^ ]+ +/, "", how)
            if (!(name in want))
                printf "FAIL attack.%s.%s: %s (%s), not in tests/attack/expected.tsv\n", v, name, got, how
            else if (got != want[name])
                printf "FAIL attack.%s.%s: %s (%s), expected %s\n", v, name, got, how, want[name]
            else
                printf "PASS attack.%s.%s\n", v, name
            seen[name] = 1
        }
        END {
            for (n in want)
                if (!(n in seen))
                    printf "FAIL attack.%s.%s: expected %s, but run.sh did not run it\n", v, n, want[n]
        }' FS='\t' "$T/attack/expected.$v" FS=' ' "$T/attack/got.$v"
    grep -m1 '^summary' <<<"$out" | sed 's/^/# /'
done | tee "$T/attack/suite.log"
grep -q '^FAIL ' "$T/attack/suite.log" && exit 1
exit 0
