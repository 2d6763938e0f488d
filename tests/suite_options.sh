#!/usr/bin/env bash
# suite_options.sh -- options as users write them (docs/options.md): every
# form of a boolean and a size, the warnings for bad values, the warning with
# the nearest name for an unknown HAKMEM_* name, the verbose listing's
# source column, a program's hakmem_conf (preloaded, linked, static) and the
# environment over it, hakmem_option_set/get (tests/test_options.c), a new
# user's first tries, and that option parsing calls no allocator.  Each run
# sets its own environment (lib.sh removed every other HAKMEM_* variable
# except HAKMEM_BACKGROUND_PURGE, a known one).
source "$(dirname "$0")/lib.sh"
OPT=$T/test_options
need options "$OPT" "$REL_SO" "$DBG_SO" || exit 1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# run ENV... -- CMD...: CMD with the environment given, under a limit; its
# stdout in $so, stderr in $se, status in $rc
run() {
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    limit 20 env "${envs[@]}" "$@" >"$W/out" 2>"$W/err"
    rc=$?
    so=$(<"$W/out") se=$(<"$W/err")
}
# verdict NAME: PASS when $why is empty, else FAIL with it
verdict() { if [[ -z $why ]]; then pass "$1"; else fail "$1" "${why:0:600}"; fi; }
# row NAME VALUE SOURCE: the listing's row of NAME in $se shows VALUE from SOURCE
row() { grep -Eq "^hakmem: +$1=$2 +$3 " <<<"$se"; }

# ---- booleans: 1/0, yes/no, true/false, on/off, any case ----
why=
for o in VERBOSE STATS; do
    for pair in 1:1 0:0 yes:1 no:0 true:1 false:0 on:1 off:0 YES:1 No:0 TRUE:1 False:0 ON:1 oFf:0; do
        v=${pair%:*} want=${pair#*:}
        run HAKMEM_$o=$v LD_PRELOAD="$REL_SO" -- "$OPT" get ${o,,}
        [[ $rc == 0 && $so == "${o,,}=$want" && $se != *warning* ]] ||
            why+="HAKMEM_$o=$v: '$so' ${se:0:100}; "
    done
done
verdict options.bool_forms

# a bad boolean: named in a warning, the default stays
why=
for v in maybe 2 -1 yess "" "o n"; do
    run HAKMEM_STATS="$v" LD_PRELOAD="$REL_SO" -- "$OPT" get stats
    want="hakmem: warning: HAKMEM_STATS='$v' is not 1/0, yes/no, true/false or on/off; using 0"
    [[ $so == "stats=0" && $se == "$want" ]] || why+="HAKMEM_STATS='$v': '$so' '${se:0:160}'; "
done
run HAKMEM_CRASH_HANDLER=nope LD_PRELOAD="$REL_SO" -- "$OPT" get crash_handler
[[ $so == "crash_handler=1" && $se == *"HAKMEM_CRASH_HANDLER='nope' is not 1/0, yes/no, true/false or on/off; using 1" ]] ||
    why+="HAKMEM_CRASH_HANDLER=nope: '$so' '$se'"
verdict options.bool_bad

# ---- sizes: a number of bytes, or with k, m, g (kb, kib, any case) ----
why=
for pair in 4096:4096 0:0 512k:524288 512K:524288 512kb:524288 512KiB:524288 512kib:524288 \
            1m:1048576 1M:1048576 1MiB:1048576 3mb:3145728 1g:1073741824 2GiB:2147483648 \
            " 64k ":65536 +8k:8192 1024g:1099511627776; do
    v=${pair%:*} want=${pair#*:}
    run HAKMEM_SAMPLE_BYTES="$v" LD_PRELOAD="$REL_SO" -- "$OPT" get sample_bytes
    [[ $rc == 0 && $so == "sample_bytes=$want" && $se != *warning* ]] || why+="HAKMEM_SAMPLE_BYTES='$v': '$so' ${se:0:120}; "
done
verdict options.size_forms

# options counted in KiB or MiB: a plain number is in their unit, a suffixed
# one is converted
why=
for t in PURGE_BUDGET_KB:16m:16384 PURGE_BUDGET_KB:1k:1 PURGE_BUDGET_KB:512:512 PURGE_BUDGET_KB:-1:-1 \
         PURGE_BUDGET_KB:1g:1048576 HUGE_CACHE_MB:2g:2048 HUGE_CACHE_MB:1m:1 HUGE_CACHE_MB:64:64 \
         HUGE_CACHE_MB:1024KiB:1; do
    IFS=: read -r o v want <<<"$t"
    run HAKMEM_$o="$v" LD_PRELOAD="$REL_SO" -- "$OPT" get ${o,,}
    [[ $so == "${o,,}=$want" && $se != *warning* ]] || why+="HAKMEM_$o=$v: '$so' ${se:0:120}; "
done
verdict options.size_units

# a bad size: named in a warning with its range and unit, the default stays
why=
for t in SAMPLE_BYTES:12q:0:bytes SAMPLE_BYTES:k:0:bytes SAMPLE_BYTES:1.5m:0:bytes SAMPLE_BYTES:-1k:0:bytes \
         SAMPLE_BYTES:1025g:0:bytes SAMPLE_BYTES:1t:0:bytes SAMPLE_BYTES:4kk:0:bytes SAMPLE_BYTES:4kibs:0:bytes \
         HUGE_CACHE_MB:512k:1024:MiB PURGE_BUDGET_KB:1000b:4096:KiB PURGE_BUDGET_KB:1536:4096:KiB-ok; do
    IFS=: read -r o v dflt unit <<<"$t"
    run HAKMEM_$o="$v" LD_PRELOAD="$REL_SO" -- "$OPT" get ${o,,}
    if [[ $unit == KiB-ok ]]; then   # a plain number is fine
        [[ $so == "${o,,}=1536" && -z $se ]] || why+="HAKMEM_$o=$v: '$so' ${se:0:120}; "
        continue
    fi
    [[ $so == "${o,,}=$dflt" && $se =~ ^"hakmem: warning: HAKMEM_$o='$v' is not a size in ["-?[0-9]+", "[0-9]+"] $unit (a number, or one with k, m or g); using $dflt"$ ]] ||
        why+="HAKMEM_$o=$v: '$so' '${se:0:160}'; "
done
verdict options.size_bad

# an option that is a count or a time takes no unit
why=
for t in SEGMENT_CACHE:1k:128 PURGE_DELAY_MS:1k:250 PURGE_DELAY_MS:250ms:250; do
    IFS=: read -r o v dflt <<<"$t"
    run HAKMEM_$o="$v" LD_PRELOAD="$REL_SO" -- "$OPT" get ${o,,}
    [[ $so == "${o,,}=$dflt" && $se == "hakmem: warning: HAKMEM_$o='$v' is not a number in "*"; using $dflt" ]] ||
        why+="HAKMEM_$o=$v: '$so' '${se:0:160}'; "
done
verdict options.number_takes_no_unit

why=
for t in Lean:2 SPEED:0 " balanced":1; do
    run HAKMEM_PROFILE="${t%:*}" LD_PRELOAD="$REL_SO" -- "$OPT" get profile
    [[ $so == "profile=${t#*:}" && -z $se ]] || why+="HAKMEM_PROFILE='${t%:*}': '$so' '$se'; "
done
verdict options.profile_any_case

# ---- unknown names: one warning each, naming the nearest known option ----
run HAKMEM_PROFLE=lean LD_PRELOAD="$REL_SO" -- "$OPT" get profile
[[ $so == "profile=1" && $se == "hakmem: warning: unknown option HAKMEM_PROFLE ignored; did you mean HAKMEM_PROFILE?" ]] &&
    pass options.unknown_suggests || fail options.unknown_suggests "'$so' '$se'"

why=
for t in SAMPLE_BYTE:SAMPLE_BYTES stats:STATS PURGE_DELAY:PURGE_DELAY_MS GAURD_SAMPLE:GUARD_SAMPLE \
         VERBOS:VERBOSE HUGE_CACHE:HUGE_CACHE_MB PROFILE_AT_EIXT:PROFILE_AT_EXIT CRASHHANDLER:CRASH_HANDLER; do
    run HAKMEM_${t%:*}=1 LD_PRELOAD="$REL_SO" -- "$OPT"
    [[ $se == "hakmem: warning: unknown option HAKMEM_${t%:*} ignored; did you mean HAKMEM_${t#*:}?" ]] ||
        why+="HAKMEM_${t%:*}: '${se:0:160}'; "
done
# far from every name: still named, without "did you mean"
run HAKMEM_XYZZY_FROB=1 LD_PRELOAD="$REL_SO" -- "$OPT"
[[ $se =~ ^"hakmem: warning: unknown option HAKMEM_XYZZY_FROB ignored (the nearest is HAKMEM_"[A-Z_]+"; HAKMEM_VERBOSE=1 lists them all)"$ ]] ||
    why+="HAKMEM_XYZZY_FROB: '${se:0:160}'; "
verdict options.unknown_names

# one warning per unknown name, none for the others; a long name is cut
long=HAKMEM_$(printf 'Q%.0s' {1..300})
run HAKMEM_PROFLE=lean HAKMEM_STATZ=1 HAKMEM_STATS=1 "$long=1" HAKMEM_VERBOSE=0 LD_PRELOAD="$REL_SO" -- "$OPT"
n=$(grep -c '^hakmem: warning: unknown option' <<<"$se")
if [[ $n == 3 && $(grep -c 'HAKMEM_PROFLE' <<<"$se") == 1 && $(grep -c 'HAKMEM_STATZ ' <<<"$se") == 1 &&
      $se == *"unknown option HAKMEM_QQQQ"*"... ignored"* ]]; then
    pass options.unknown_once_each
else
    fail options.unknown_once_each "$n warnings: ${se:0:400}"
fi

# every name hakmem reads is known: the table's, HAKMEM_PROFILE and every
# getenv("HAKMEM_...") of src/ (a name read elsewhere must be added to
# hak_option_extra in src/hak_options.c)
names=$( { grep -Eo '^ *\{ *"HAKMEM_[A-Z_]+"' src/hak_options.c | grep -Eo 'HAKMEM_[A-Z_]+'
           grep -Eho 'getenv\("HAKMEM_[A-Z_]+"\)' src/*.c | grep -Eo 'HAKMEM_[A-Z_]+'
           echo HAKMEM_PROFILE; } | sort -u)
envs=()
for nm in $names; do
    case $nm in
        HAKMEM_PROFILE) envs+=("$nm=balanced") ;;
        HAKMEM_PROFILE_AT_EXIT | HAKMEM_*_FILE) envs+=("$nm=$W/never.%p") ;;
        HAKMEM_SAMPLE_BYTES | HAKMEM_GUARD_SAMPLE | HAKMEM_STATS | HAKMEM_LEAK_REPORT | HAKMEM_VERBOSE) envs+=("$nm=0") ;;
        HAKMEM_CRASH_HANDLER) envs+=("$nm=1") ;;
        *) envs+=("$nm=0") ;;
    esac
done
run "${envs[@]}" LD_PRELOAD="$REL_SO" -- "$OPT"
if (($(wc -w <<<"$names") >= 14)) && ! grep -q 'unknown option' <<<"$se"; then
    pass options.known_names_quiet
else
    fail options.known_names_quiet "names: $(tr '\n' ' ' <<<"$names"); stderr: ${se:0:300}"
fi

# ---- the listing's source column ----
why=
run HAKMEM_VERBOSE=yes HAKMEM_PROFILE=lean HAKMEM_SEGMENT_CACHE=7 LD_PRELOAD="$REL_SO" -- "$OPT"
[[ $se == "hakmem 0."*" (release build), profile lean (environment)"* ]] || why+="banner: ${se:0:80}; "
row HAKMEM_VERBOSE 1 environment || why+="verbose; "
row HAKMEM_SEGMENT_CACHE 7 environment || why+="segment_cache; "
row HAKMEM_PURGE_DELAY_MS 0 profile || why+="purge_delay_ms; "
row HAKMEM_HUGE_CACHE_MB 0 profile || why+="huge_cache_mb; "
row HAKMEM_STATS 0 default || why+="stats; "
row HAKMEM_CRASH_HANDLER 1 default || why+="crash_handler; "
grep -Eq '^hakmem: +option=value +source +meaning$' <<<"$se" || why+="no header; "
(($(grep -c '^hakmem:   HAKMEM_' <<<"$se") == $(grep -Ec '^ *\{ *"HAKMEM_' src/hak_options.c))) ||
    why+="not one row per option; "
[[ -n $why ]] && why+="listing: ${se:0:300}"
verdict options.listing_sources

why=
run HAKMEM_VERBOSE=1 LD_PRELOAD="$REL_SO" -- "$OPT"
[[ $se == *"profile balanced (default)"* ]] || why+="banner; "
row HAKMEM_PURGE_DELAY_MS 250 default || why+="purge_delay_ms; "
row HAKMEM_SAMPLE_BYTES 0 default || why+="sample_bytes; "
[[ -n $why ]] && why+="listing: ${se:0:300}"
verdict options.listing_defaults

# a value set at run time is announced under HAKMEM_VERBOSE
run HAKMEM_VERBOSE=1 LD_PRELOAD="$REL_SO" -- "$OPT" set purge_delay_ms 0
[[ $so == "set 0" && $se == *$'\n'"hakmem: HAKMEM_PURGE_DELAY_MS=0 (set at run time)"* ]] &&
    pass options.set_announced || fail options.set_announced "'$so' ${se: -200}"
run LD_PRELOAD="$REL_SO" -- "$OPT" set purge_delay_ms 0
[[ $so == "set 0" && -z $se ]] && pass options.set_quiet || fail options.set_quiet "'$so' '$se'"
run LD_PRELOAD="$REL_SO" -- "$OPT" set stats 1
[[ $so == "set -1 errno 1" ]] && pass options.set_refused_errno || fail options.set_refused_errno "'$so' (want EPERM, 1)"

# ---- hakmem_conf: a program's defaults, under the environment ----
# test_options_conf's: "verbose=yes, segment_cache=7,HUGE_CACHE_MB=1g,purge_lazy=on,profile=speed"
conf_rows() {   # the conf's values in the listing in $se
    why=
    [[ $se == "hakmem 0."*"build), profile speed (hakmem_conf)"* ]] || why+="banner; "
    row HAKMEM_VERBOSE 1 hakmem_conf || why+="verbose; "
    row HAKMEM_SEGMENT_CACHE 7 hakmem_conf || why+="segment_cache; "
    row HAKMEM_HUGE_CACHE_MB 1024 hakmem_conf || why+="huge_cache_mb; "
    row HAKMEM_PURGE_LAZY 1 hakmem_conf || why+="purge_lazy; "
    row HAKMEM_PURGE_DELAY_MS 1000 profile || why+="purge_delay_ms; "
    row HAKMEM_STATS 0 default || why+="stats; "
    grep -q warning <<<"$se" && why+="a warning; "
    [[ -n $why ]] && why+="listing: ${se:0:300}"
}
for b in conf linked static; do
    t=$b
    [[ $b == conf ]] && t=preloaded
    if need options.conf_$t "$T/test_options_$b"; then
        if [[ $b == conf ]]; then run LD_PRELOAD="$REL_SO" -- "$T/test_options_$b"
        else run -- "$T/test_options_$b"; fi
        conf_rows
        verdict options.conf_$t
    fi
done
if need options.conf_debug "$T/test_options_conf"; then
    run LD_PRELOAD="$DBG_SO" -- "$T/test_options_conf"
    conf_rows
    verdict options.conf_debug
fi

# the environment wins over the conf, and its profile over the conf's
for b in conf static; do
    t=$b
    [[ $b == conf ]] && t=preloaded
    if need options.conf_env_overrides_$t "$T/test_options_$b"; then
        pre=()
        [[ $b == conf ]] && pre=(LD_PRELOAD="$REL_SO")
        run "${pre[@]}" HAKMEM_SEGMENT_CACHE=9 HAKMEM_PROFILE=lean HAKMEM_PURGE_LAZY=off -- "$T/test_options_$b"
        why=
        [[ $se == *"profile lean (environment)"* ]] || why+="banner; "
        row HAKMEM_SEGMENT_CACHE 9 environment || why+="segment_cache; "
        row HAKMEM_PURGE_LAZY 0 environment || why+="purge_lazy; "
        row HAKMEM_PURGE_DELAY_MS 0 profile || why+="purge_delay_ms; "
        row HAKMEM_HUGE_CACHE_MB 1024 hakmem_conf || why+="huge_cache_mb; "
        row HAKMEM_VERBOSE 1 hakmem_conf || why+="verbose; "
        [[ -n $why ]] && why+="listing: ${se:0:300}"
        verdict options.conf_env_overrides_$t
    fi
done

# a conf with mistakes: each named, the good items still read
if need options.conf_bad "$T/test_options_conf_bad"; then
    run LD_PRELOAD="$REL_SO" -- "$T/test_options_conf_bad" get purge_delay_ms segment_cache stats profile sample_bytes
    why=
    [[ $so == $'purge_delay_ms=10\nsegment_cache=128\nstats=0\nprofile=1\nsample_bytes=0' ]] || why+="values: $(tr '\n' ' ' <<<"$so"); "
    for w in "hakmem_conf: profile='fast' is not speed, balanced or lean; using balanced" \
             "hakmem_conf: unknown option 'sample_byte' ignored; did you mean sample_bytes?" \
             "hakmem_conf: stats='maybe' is not 1/0, yes/no, true/false or on/off; using 0" \
             "hakmem_conf: 'nonsense' is not name=value; ignored" \
             "hakmem_conf: 'profile_at_exit' can be set only in the environment; ignored" \
             "hakmem_conf: segment_cache='5k' is not a number in [0, 1024]; using 128"; do
        grep -qxF "hakmem: warning: $w" <<<"$se" || why+="no '$w'; "
    done
    (($(grep -c . <<<"$se") == 6)) || why+="$(grep -c . <<<"$se") lines of warnings, want 6; "
    [[ -n $why ]] && why+="stderr: ${se:0:300}"
    verdict options.conf_bad
    # the environment's bad profile falls back to balanced here too
    run LD_PRELOAD="$REL_SO" HAKMEM_PROFILE=fast -- "$T/test_options_conf_bad" get profile
    [[ $so == profile=1 && $se == *"HAKMEM_PROFILE='fast' is not speed, balanced or lean; using balanced"* ]] &&
        pass options.conf_bad_env_profile || fail options.conf_bad_env_profile "'$so' ${se:0:200}"
fi
# the environment's bad profile falls back to the conf's, and says so
if need options.env_bad_profile_keeps_conf "$T/test_options_conf"; then
    run LD_PRELOAD="$REL_SO" HAKMEM_PROFILE=fastest -- "$T/test_options_conf" get profile
    [[ $so == profile=0 && $se == *"hakmem: warning: HAKMEM_PROFILE='fastest' is not speed, balanced or lean; using speed"* ]] &&
        pass options.env_bad_profile_keeps_conf || fail options.env_bad_profile_keeps_conf "'$so' ${se:0:200}"
fi

# ---- hakmem_option_set/get: preloaded, linked, static ----
run_bin options.api.preload 30 env HAKMEM_SEGMENT_CACHE=9 HAKMEM_PROFILE=speed LD_PRELOAD="$REL_SO" "$OPT" api -p options.api.preload --expect-hakmem
run_bin options.api.debug 30 env HAKMEM_SEGMENT_CACHE=9 HAKMEM_PROFILE=speed LD_PRELOAD="$DBG_SO" "$OPT" api -p options.api.debug --expect-hakmem
for b in linked static; do
    if need options.api.$b "$T/test_options_$b"; then
        run_bin options.api.$b 30 env HAKMEM_SEGMENT_CACHE=9 HAKMEM_PROFILE=speed HAKMEM_VERBOSE=0 "$T/test_options_$b" api -p options.api.$b --expect-hakmem
    fi
done

# ---- a new user's first tries (issue 38) ----
run HAKMEM_STATS=yes LD_PRELOAD="$REL_SO" -- "$OPT"
[[ $se == *"hakmem 0."*"statistics"* ]] && pass options.friction.stats_yes || fail options.friction.stats_yes "${se:0:200}"
run HAKMEM_VERBOSE=true LD_PRELOAD="$REL_SO" -- "$OPT"
[[ $se == "hakmem 0."*" (release build), profile balanced"* && $se != *warning* ]] &&
    pass options.friction.verbose_true || fail options.friction.verbose_true "${se:0:200}"
run HAKMEM_SAMPLE_BYTES=512k HAKMEM_PROFILE_AT_EXIT="$W/prof.%p" LD_PRELOAD="$REL_SO" -- "$OPT"
f=$(ls "$W"/prof.* 2>/dev/null | head -n 1)
[[ -z $se && -n $f ]] && head -n 1 "$f" | grep -q '@ heap_v2/524288$' &&
    pass options.friction.sample_512k || fail options.friction.sample_512k "stderr '${se:0:200}', profile '$(head -n 1 "$f" 2>/dev/null)'"
run HAKMEM_PROFLE=lean LD_PRELOAD="$REL_SO" -- "$OPT"
[[ $se == *"did you mean HAKMEM_PROFILE?"* ]] && pass options.friction.profle_warns || fail options.friction.profle_warns "'$se'"

# ---- option parsing allocates nothing and reads environ in place ----
why=
for o in "$ROOT/build/obj/hak_options.o" "$ROOT/build/debug/obj/hak_options.o"; do
    if [[ ! -f $o ]]; then why+="missing $o; "; continue; fi
    bad=$(nm -u "$o" | awk '{print $2}' | grep -Ex '(malloc|calloc|realloc|free|strdup|strndup|asprintf|vasprintf|getenv|secure_getenv|setenv|putenv|hak_malloc.*|hak_calloc.*|hak_meta_alloc|qsort|strtol|strtoul|strtoll|setlocale|hakmem_(malloc|calloc|realloc|free))')
    [[ -z $bad ]] || why+="$o calls $(tr '\n' ' ' <<<"$bad"); "
    nm -u "$o" | grep -qw environ || why+="$o does not read environ; "
done
verdict options.no_malloc
exit $SUITE_STATUS
