#!/usr/bin/env bash
# suite_limit.sh -- the soft memory limit (issue 38; src/hak_limit.c,
# tests/test_limit.c; docs/memory-return.md, "A soft memory limit").
#   limit.unit(_debug, _hardened)  the resident estimate, the hysteresis and
#                         "never fails an allocation" (HAKMEM_PURGE_DELAY_MS=-1:
#                         only the limit purges); limit.unit_balanced: the
#                         default profile (the hysteresis test skips)
#   limit.option_*        HAKMEM_MEMORY_LIMIT as users write it: bytes, k, m, g;
#                         bad values warn and leave the limit off; the verbose line
#   limit.cgroup_own      HAKMEM_MEMORY_LIMIT=cgroup in the suite's own cgroup:
#                         the limit this script finds in the cgroup files (walked
#                         here in shell), or the warning that there is none
#   limit.cgroup_unreadable  no cgroup file readable (a mount namespace with an
#                         empty /sys/fs/cgroup and /proc/self/cgroup hidden): a
#                         warning, the limit off (SKIP without unshare)
#   limit.cgroup_oom      in a child cgroup with a memory limit (v2 memory.max,
#                         else the v1 memory controller's limit_in_bytes; SKIP with
#                         the reason when neither can be made here): the churn
#                         program (test_limit --churn 40: 40 MiB live, ~100 MiB
#                         resident without the limit) is OOM-killed without
#                         HAKMEM_MEMORY_LIMIT and survives with =cgroup;
#                         limit.cgroup_read: the limit is read there at start-up
#                         and by hakmem_memory_limit_refresh()
#   LIMIT_SCAN=1          also the smallest cgroup limit (4 MiB steps) at which
#                         the churn program survives: hakmem without and with
#                         the soft limit, and glibc (the figures of
#                         docs/memory-return.md)
source "$(dirname "$0")/lib.sh"
BIN=$T/test_limit

run_unit() {
    local name=$1 so=$2
    shift 2
    need "$name" "$BIN" "$so" || return
    run_bin "$name" 60 env LD_PRELOAD="$so" "$@" "$BIN" -p "$name" --expect-hakmem
}
run_unit limit.unit "$REL_SO" HAKMEM_PURGE_DELAY_MS=-1
run_unit limit.unit_debug "$DBG_SO" HAKMEM_PURGE_DELAY_MS=-1
run_unit limit.unit_hardened "$HRD_SO" HAKMEM_PURGE_DELAY_MS=-1
run_unit limit.unit_balanced "$REL_SO"

# ---- the option ----

# option NAME VALUE WANT [WARN]: test_limit --print under HAKMEM_MEMORY_LIMIT=VALUE
# prints "limit WANT"; with WARN, stderr names the variable in a warning
option() {
    local name=$1 value=$2 want=$3 warn=${4:-} out
    need "$name" "$BIN" "$REL_SO" || return
    # (no purger: its thread's check of a limit as small as 12k warns, rightly,
    # that the live memory is larger -- not what this test is about)
    out=$(limit 20 env LD_PRELOAD="$REL_SO" HAKMEM_BACKGROUND_PURGE=0 HAKMEM_MEMORY_LIMIT="$value" "$BIN" --print 2>&1)
    if ! grep -qx "limit $want" <<<"$out"; then
        fail "$name" "HAKMEM_MEMORY_LIMIT='$value': want limit $want, got: $(head -c 300 <<<"$out")"
    elif [[ -n $warn ]] && ! grep -q "warning: HAKMEM_MEMORY_LIMIT='$value' is not a size" <<<"$out"; then
        fail "$name" "HAKMEM_MEMORY_LIMIT='$value': no warning: $(head -c 300 <<<"$out")"
    elif [[ -z $warn ]] && grep -q warning <<<"$out"; then
        fail "$name" "HAKMEM_MEMORY_LIMIT='$value': unexpected warning: $(head -c 300 <<<"$out")"
    else
        pass "$name"
    fi
}
option limit.option_bytes 1048576 1048576
option limit.option_k 12k 12288
option limit.option_K 12K 12288
option limit.option_m 48m 50331648
option limit.option_g 2G 2147483648
option limit.option_zero 0 0
option limit.option_bad_suffix 12x 0 warn
option limit.option_negative -5 0 warn
option limit.option_empty "" 0 warn
option limit.option_words "1 g" 0 warn
option limit.option_too_big 2000000000g 0 warn
if need limit.option_verbose "$BIN" "$REL_SO"; then
    out=$(limit 20 env LD_PRELOAD="$REL_SO" HAKMEM_VERBOSE=1 HAKMEM_MEMORY_LIMIT=48m "$BIN" --print 2>&1)
    if grep -q "HAKMEM_MEMORY_LIMIT=50331648" <<<"$out" &&
       grep -q "memory limit 50331648 bytes (HAKMEM_MEMORY_LIMIT): above 45298484 bytes resident" <<<"$out"; then
        pass limit.option_verbose
    else
        fail limit.option_verbose "verbose output lacks the limit: $(grep -i limit <<<"$out" | head -c 300)"
    fi
fi

# ---- the cgroup's limit, found here in shell ----

# mount_of TYPE [OPTION]: the mount point and root ("MNT ROOT") of the first
# mount of file-system TYPE (whose super options include OPTION)
mount_of() {
    awk -v t="$1" -v o="${2:-}" '{
        for (i = 7; i <= NF && $i != "-"; i++) {}
        if ($(i + 1) != t) next
        if (o != "" && ("," $(i + 3) ",") !~ ("," o ",")) next
        print $5, $4; exit
    }' /proc/self/mountinfo
}
# cg_path v2|v1: the process's cgroup path in that hierarchy
cg_path() {
    if [[ $1 == v2 ]]; then
        awk -F: '$1 == "0" && $2 == "" { print $3; exit }' /proc/self/cgroup
    else
        awk -F: '("," $2 ",") ~ /,memory,/ { print $3; exit }' /proc/self/cgroup
    fi
}
# cg_dir v2|v1: the directory of the process's cgroup (empty if none)
cg_dir() {
    local m mnt root path
    m=$(mount_of "$([[ $1 == v2 ]] && echo cgroup2 || echo cgroup)" "$([[ $1 == v1 ]] && echo memory)")
    [[ -n $m ]] || return
    read -r mnt root <<<"$m"
    path=$(cg_path "$1")
    [[ -n $path ]] || return
    [[ $root == / ]] && root=
    [[ -z $root || $path == "$root" || $path == "$root"/* ]] || return
    echo "$mnt${path#"$root"}"
}
# cg_expect: the limit hakmem should find: "BYTES", "none", or "unreadable"
cg_expect() {
    local v f d mnt best= any= file
    for v in v2 v1; do
        d=$(cg_dir $v)
        [[ -n $d ]] || continue
        mnt=$(mount_of "$([[ $v == v2 ]] && echo cgroup2 || echo cgroup)" "$([[ $v == v1 ]] && echo memory)")
        mnt=${mnt%% *}
        file=$([[ $v == v2 ]] && echo memory.max || echo memory.limit_in_bytes)
        while :; do
            d=${d%/}
            if [[ -r $d/$file ]] && f=$(<"$d/$file") && [[ -n $f ]]; then
                any=1
                if [[ $f =~ ^[0-9]+$ ]] && ((f < (1 << 62))); then
                    [[ -z $best ]] || ((f < best)) && best=$f
                fi
            fi
            [[ ${#d} -le ${#mnt} ]] && break
            d=${d%/*}
            [[ ${#d} -lt ${#mnt} ]] && break
        done
        [[ -n $any ]] && break
    done
    if [[ -z $any ]]; then echo unreadable; elif [[ -z $best ]]; then echo none; else echo "$best"; fi
}

if need limit.cgroup_own "$BIN" "$REL_SO"; then
    want=$(cg_expect)
    out=$(limit 20 env LD_PRELOAD="$REL_SO" HAKMEM_MEMORY_LIMIT=cgroup "$BIN" --print 2>&1)
    case $want in
    none) re="sets no memory limit"; lim=0 ;;
    unreadable) re="no cgroup memory limit file could be read"; lim=0 ;;
    *) re=; lim=$want ;;
    esac
    echo "# limit.cgroup_own: this script finds '$want' for $(cat /proc/self/cgroup | tr '\n' ' ')"
    if ! grep -qx "limit $lim" <<<"$out"; then
        fail limit.cgroup_own "want limit $lim ($want), got: $(head -c 300 <<<"$out")"
    elif [[ -n $re ]] && ! grep -q "warning: HAKMEM_MEMORY_LIMIT=cgroup: .*$re" <<<"$out"; then
        fail limit.cgroup_own "no warning /$re/: $(head -c 300 <<<"$out")"
    elif [[ -z $re ]] && grep -q warning <<<"$out"; then
        fail limit.cgroup_own "unexpected warning: $(head -c 300 <<<"$out")"
    else
        pass limit.cgroup_own
    fi
fi

if need limit.cgroup_unreadable "$BIN" "$REL_SO"; then
    # a private mount namespace: an empty tmpfs over /sys/fs/cgroup, and
    # /proc/self/cgroup bound over by an empty file
    empty=$(mktemp)
    out=$(limit 20 unshare -m bash -c '
        mount --make-rprivate / 2>/dev/null
        mount -t tmpfs none /sys/fs/cgroup || exit 77
        mount --bind "$1" /proc/$$/cgroup || exit 77
        exec env LD_PRELOAD="$2" HAKMEM_MEMORY_LIMIT=cgroup "$3" --print' _ "$empty" "$REL_SO" "$BIN" 2>&1)
    rc=$?
    rm -f "$empty"
    if ((rc == 77)) || grep -q "unshare failed\|Operation not permitted" <<<"$out"; then
        skip limit.cgroup_unreadable "no private mount namespace here: $(head -c 200 <<<"$out")"
    elif grep -qx "limit 0" <<<"$out" &&
         grep -q "warning: HAKMEM_MEMORY_LIMIT=cgroup: no cgroup memory limit file could be read" <<<"$out"; then
        pass limit.cgroup_unreadable
    else
        fail limit.cgroup_unreadable "rc $rc: $(head -c 300 <<<"$out")"
    fi
fi

# ---- the OOM kill: a child cgroup with a memory limit ----

CG= CG_KIND= CG_WHY=
# cg_make MIB: a child cgroup of the suite's own with a limit of MIB MiB
# (memory and swap): sets CG (its directory) and CG_KIND (v2 or v1); on
# failure CG_WHY says why
cg_make() {
    local mib=$1 d c bytes=$(($1 << 20))
    CG= CG_WHY=
    if ((EUID != 0)); then CG_WHY="not root"; return 1; fi
    d=$(cg_dir v2)
    d=${d%/}
    # (a child only where the memory controller reaches children: the
    # suite's cgroup's configuration is left alone)
    if [[ -n $d && -w $d ]] && grep -qw memory "$d/cgroup.subtree_control" 2>/dev/null; then
        c=$d/hakmem-limit-$$-$mib
        if mkdir "$c" 2>/dev/null; then
            if [[ -e $c/memory.max ]] && echo "$bytes" >"$c/memory.max" 2>/dev/null; then
                [[ -e $c/memory.swap.max ]] && echo 0 >"$c/memory.swap.max"
                CG=$c CG_KIND=v2
                return 0
            fi
            rmdir "$c"
        fi
        CG_WHY="cgroup v2 ($d): no memory controller for a child (controllers: $(cat "$d/cgroup.controllers" 2>/dev/null | tr '\n' ' '); subtree_control: $(cat "$d/cgroup.subtree_control" 2>/dev/null | tr '\n' ' '))"
    elif [[ -n $d && -w $d ]]; then
        CG_WHY="cgroup v2 ($d): the memory controller does not reach its children (controllers: $(cat "$d/cgroup.controllers" 2>/dev/null | tr '\n' ' '); subtree_control: $(cat "$d/cgroup.subtree_control" 2>/dev/null | tr '\n' ' '))"
    else
        CG_WHY="no writable cgroup v2 hierarchy${d:+ ($d)}"
    fi
    d=$(cg_dir v1)
    d=${d%/}
    if [[ -n $d && -w $d ]]; then
        c=$d/hakmem-limit-$$-$mib
        if mkdir "$c" 2>/dev/null; then
            if echo "$bytes" >"$c/memory.limit_in_bytes" 2>/dev/null; then
                [[ -e $c/memory.memsw.limit_in_bytes ]] && echo "$bytes" >"$c/memory.memsw.limit_in_bytes"
                CG=$c CG_KIND=v1
                return 0
            fi
            rmdir "$c"
        fi
        CG_WHY+="; cgroup v1 memory ($d): cannot make a limited child"
    else
        CG_WHY+="; no writable cgroup v1 memory hierarchy${d:+ ($d)}"
    fi
    return 1
}
cg_drop() { [[ -n $CG ]] && rmdir "$CG" 2>/dev/null; CG=; }
trap cg_drop EXIT
# cg_oom_kills: OOM kills in CG so far
cg_oom_kills() {
    if [[ $CG_KIND == v2 ]]; then awk '$1 == "oom_kill" { print $2 }' "$CG/memory.events"
    else awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control"; fi
}
cg_peak_kib() {
    local f=$CG/memory.max_usage_in_bytes
    [[ $CG_KIND == v2 ]] && f=$CG/memory.peak
    [[ -r $f ]] && echo $(($(<"$f") >> 10)) || echo "?"
}
# cg_run SECONDS CMD...: CMD in CG (its output in CG_OUT, status in CG_RC)
cg_run() {
    local secs=$1
    shift
    CG_OUT=$(limit "$secs" bash -c 'echo $$ >"$1/cgroup.procs" || exit 99; shift; exec "$@"' _ "$CG" "$@" 2>&1)
    CG_RC=$?
}

CHURN_MIB=40
if need limit.cgroup_oom "$BIN" "$REL_SO"; then
    mib=72
    if ! cg_make $mib; then
        skip limit.cgroup_oom "$CG_WHY"
        skip limit.cgroup_read "$CG_WHY"
    else
        echo "# limit.cgroup_oom: cgroup $CG_KIND $CG, limit $mib MiB; the churn program holds $CHURN_MIB MiB live"
        # without the soft limit: killed
        cg_run 30 env LD_PRELOAD="$REL_SO" "$BIN" --churn $CHURN_MIB
        kills=$(cg_oom_kills)
        echo "# without HAKMEM_MEMORY_LIMIT: status $CG_RC, OOM kills ${kills:-?}, cgroup peak $(cg_peak_kib) KiB; $(grep peak_rss <<<"$CG_OUT")"
        control_ok=0
        if grep -q SURVIVED <<<"$CG_OUT"; then
            fail limit.cgroup_oom "the control run (no soft limit) survived $mib MiB: the test shows nothing ($CG_OUT)"
        elif ((CG_RC != 137)) || [[ ${kills:-0} -lt 1 ]]; then
            fail limit.cgroup_oom "the control run ended with status $CG_RC, OOM kills ${kills:-?}: $(head -c 300 <<<"$CG_OUT")"
        else
            control_ok=1
        fi
        cg_drop
        cg_make $mib
        # with it: survives
        cg_run 30 env LD_PRELOAD="$REL_SO" HAKMEM_MEMORY_LIMIT=cgroup "$BIN" --churn $CHURN_MIB
        kills=$(cg_oom_kills)
        echo "# HAKMEM_MEMORY_LIMIT=cgroup: status $CG_RC, OOM kills ${kills:-?}, cgroup peak $(cg_peak_kib) KiB; $(grep peak_rss <<<"$CG_OUT")"
        if ((control_ok)); then
            if ((CG_RC == 0)) && grep -q SURVIVED <<<"$CG_OUT" && grep -q "limit $((mib << 20)) " <<<"$CG_OUT" &&
               [[ ${kills:-0} -eq 0 ]]; then
                pass limit.cgroup_oom
            else
                fail limit.cgroup_oom "with HAKMEM_MEMORY_LIMIT=cgroup: status $CG_RC, OOM kills ${kills:-?}: $(head -c 300 <<<"$CG_OUT")"
            fi
        fi
        # the limit read in there, at start-up and by refresh
        cg_run 20 env LD_PRELOAD="$REL_SO" HAKMEM_MEMORY_LIMIT=cgroup "$BIN" --cgroup-expect $((mib << 20)) -p limit
        echo "$CG_OUT"
        grep -q '^FAIL ' <<<"$CG_OUT" && SUITE_STATUS=1
        grep -q '^PASS \|^FAIL ' <<<"$CG_OUT" || fail limit.cgroup_read "status $CG_RC: $(head -c 300 <<<"$CG_OUT")"
        cg_drop
    fi
fi

# ---- LIMIT_SCAN=1: the smallest cgroup limit each survives ----
scan() {
    local label=$1 mib
    shift
    for ((mib = 36; mib <= 160; mib += 4)); do
        cg_make $mib || { echo "# scan: $CG_WHY"; return; }
        cg_run 30 "$@" "$BIN" --churn $CHURN_MIB
        local peak
        peak=$(cg_peak_kib)
        cg_drop
        if grep -q SURVIVED <<<"$CG_OUT"; then
            echo "# scan $label: survives from $mib MiB (killed at $((mib - 4)) MiB), cgroup peak $peak KiB; $(grep peak_rss <<<"$CG_OUT")"
            return
        fi
    done
    echo "# scan $label: killed up to 160 MiB"
}
if [[ ${LIMIT_SCAN:-0} == 1 ]]; then
    scan "hakmem, no soft limit" env LD_PRELOAD="$REL_SO"
    scan "hakmem, HAKMEM_MEMORY_LIMIT=cgroup" env LD_PRELOAD="$REL_SO" HAKMEM_MEMORY_LIMIT=cgroup
    scan "hakmem speed profile, no soft limit" env LD_PRELOAD="$REL_SO" HAKMEM_PROFILE=speed
    scan "hakmem speed profile, HAKMEM_MEMORY_LIMIT=cgroup" env LD_PRELOAD="$REL_SO" HAKMEM_PROFILE=speed HAKMEM_MEMORY_LIMIT=cgroup
    scan "glibc" env
fi
exit $SUITE_STATUS
