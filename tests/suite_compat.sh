#!/usr/bin/env bash
# suite_compat.sh -- hakmem where users put it, part 1 (part 2: suite_env.sh):
#   compat.static.*       a program linked with gcc -static and libhakmem.a:
#                         libc's own allocations (strdup, getline, stdio
#                         buffers, asprintf, open_memstream, qsort) are hakmem's
#                         and glibc's malloc.o is not linked in
#   compat.preload_libc.* the same checks under LD_PRELOAD
#   compat.glibc_api*     mallinfo, mallinfo2, malloc_trim, malloc_info,
#                         mallopt, malloc_stats (preloaded and static); and
#                         what glibc's own tst-malloc-thread-fail,
#                         tst-malloc-tcache-leak and
#                         tst-malloc-stats-cancellation rely on
#                         (tests/compat/glibc_api.c)
#   compat.<program>      real programs under LD_PRELOAD=build/libhakmem.so,
#                         stdout compared with a run on glibc's malloc: CPython
#                         regression tests, sqlite3, git, gcc, perl, xz -T2,
#                         zstd -T2, C++ new/delete (build/tests/test_cxx).
#                         HAKMEM_STATS=1 in the hakmem run: the program's stderr
#                         must hold hakmem's statistics (the preload took effect).
# Helpers are built by mk/compat.mk into build/compat/ (rebuilt if stale).
# Missing programs: tools/install-compat-deps.sh installs them; else SKIP.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
C=$ROOT/build/compat
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export TMPDIR=$W

build_compat compat "$W" || exit 1

# ---- static linking ----
run_bin compat.static 60 "$C/libc_internal_static" compat.static
for b in libc_internal_static glibc_api_static; do
    # glibc's allocator would bring main_arena/_int_malloc along with malloc.o
    clash=$(nm "$C/$b" 2>/dev/null | grep -Ew '(main_arena|_int_malloc|__libc_malloc|__malloc_arena_thread_freeres)' |
        awk '{print $3}' | tr '\n' ' ')
    if ! nm "$C/$b" 2>/dev/null | grep -qw hakmem_malloc; then
        fail "compat.static.$b.linked" "hakmem_malloc not in $b"
    elif [[ -n $clash ]]; then
        fail "compat.static.$b.no_glibc_malloc" "libc.a's malloc.o was linked in too ($clash)"
    else
        pass "compat.static.$b.no_glibc_malloc"
    fi
done
# heap profiles in a fully static program: a warning, sampling off, the
# program runs to its end (libgcc's unwinder aborted there before)
out=$(HAKMEM_SAMPLE_BYTES=4096 limit 30 "$C/libc_internal_static" compat.static_sampled 2>&1); rc=$?
if [[ $rc == 0 && $out == *"not available in a fully static program"* ]]; then
    pass compat.static.sampling_refused
else
    fail compat.static.sampling_refused "exit $rc: $(tail -2 <<<"$out")"
fi
# the same program without hakmem must fail its ownership checks (negative control)
out=$(limit 30 "$C/libc_internal" compat.control 2>&1)
if grep -q '^FAIL compat.control.strdup' <<<"$out"; then
    pass compat.static.control_fails_without_hakmem
else
    fail compat.static.control_fails_without_hakmem "libc_internal passed without hakmem: the checks prove nothing"
fi
run_bin compat.preload_libc 60 env LD_PRELOAD="$REL_SO" "$C/libc_internal" compat.preload_libc

# ---- glibc extension API ----
# (mallinfo2_uordblks_grows counts the bytes of pages given to size classes
# after 64 MiB of 64-byte blocks: a block guarded by guarded sampling, on by
# default at one per 64 MiB, lives on no such page and takes one page off)
run_bin compat.glibc_api 60 env HAKMEM_GUARD_SAMPLE=0 LD_PRELOAD="$REL_SO" "$C/glibc_api" compat.glibc_api
run_bin compat.glibc_api_static 60 env HAKMEM_GUARD_SAMPLE=0 "$C/glibc_api_static" compat.glibc_api_static
# stats_check NAME CMD...: malloc_stats() writes glibc's summary lines ("Arena
# 0:" first, "max mmap bytes" last), then hakmem's report, to stderr; nothing
# to stdout
stats_check() {
    local name=$1
    shift
    limit 30 "$@" >"$W/ms.out" 2>"$W/ms.err"
    local rc=$?
    if timed_out $rc; then
        fail "$name" "timed out after 30s"
    elif ((rc != 0)); then
        fail "$name" "exit status $rc"
    elif [[ -s $W/ms.out ]]; then
        fail "$name" "malloc_stats wrote to stdout: $(head -c 100 "$W/ms.out")"
    elif ! grep -q "^hakmem $HAK_VERSION statistics" "$W/ms.err" ||
        ! grep -q '^hakmem:   segments in use' "$W/ms.err"; then
        fail "$name" "stderr lacks hakmem's statistics: $(head -n 2 "$W/ms.err" | tr '\n' ' ')"
    elif [[ $(head -n 7 "$W/ms.err" | sed 's/= *[0-9]*$/=/' | tr '\n' '|') != \
        'Arena 0:|system bytes     =|in use bytes     =|Total (incl. mmap):|system bytes     =|in use bytes     =|max mmap regions =|' ]] ||
        ! sed -n 8p "$W/ms.err" | grep -Eq '^max mmap bytes   = +[0-9]+$' ||
        ! sed -n 9p "$W/ms.err" | grep -q "^hakmem $HAK_VERSION statistics"; then
        fail "$name" "stderr does not begin with glibc's summary lines, then hakmem's: $(head -n 9 "$W/ms.err" | tr '\n' '|')"
    else
        pass "$name"
    fi
}
HAK_VERSION=$(sed -n 's/^#define HAKMEM_VERSION_STRING "\(.*\)"/\1/p' include/hakmem.h)
stats_check compat.glibc_api.malloc_stats env LD_PRELOAD="$REL_SO" "$C/glibc_api" --stats
stats_check compat.glibc_api_static.malloc_stats "$C/glibc_api_static" --stats

# ---- real programs ----
# compare NAME SECONDS FUNC: run FUNC DIR (a function exported to bash -c)
# once on glibc's malloc and once with everything under LD_PRELOAD=hakmem,
# HAKMEM_VERBOSE=1 and HAKMEM_STATS=1; FUNC writes its program's stderr to
# DIR/prog.err.  PASS if both succeed, stdout is identical and DIR/prog.err of
# the hakmem run holds hakmem's banner "hakmem VERSION (release build), ..."
# (printed when hakmem starts; the statistics at exit are not enough: xz
# closes its stderr before exiting).
compare() {
    local name=$1 limit=$2 fn=$3
    mkdir -p "$W/base" "$W/hak"
    timeout -k 5 "$limit" bash -c "$fn \"\$1\"" _ "$W/base" >"$W/base.out" 2>"$W/base.err"
    local rb=$?
    timeout -k 5 "$limit" env LD_PRELOAD="$REL_SO" HAKMEM_VERBOSE=1 HAKMEM_STATS=1 bash -c "$fn \"\$1\"" _ "$W/hak" \
        >"$W/hak.out" 2>"$W/hak.err"
    local rh=$?
    local perr=$W/hak/prog.err
    if timed_out $rb || timed_out $rh; then
        fail "$name" "timed out after ${limit}s ($(timed_out $rb && echo glibc-malloc run || echo under hakmem))"
    elif ((rb != 0)); then
        fail "$name" "baseline run (glibc malloc) exited $rb: $(tail -n 2 "$W/base.err" "$W/base/prog.err" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
    elif ((rh != 0)); then
        fail "$name" "under hakmem exited $rh: $(grep -hv '^hakmem' "$W/hak.err" "$perr" 2>/dev/null | tail -n 3 | tr '\n' ' ' | cut -c1-300)"
    elif ! grep -q "^hakmem $HAK_VERSION (release build)" "$perr" 2>/dev/null; then
        fail "$name" "hakmem not in effect: no hakmem banner in the program's stderr"
    elif ! cmp -s "$W/base.out" "$W/hak.out"; then
        fail "$name" "stdout differs from the glibc-malloc run: $(diff "$W/base.out" "$W/hak.out" | head -n 4 | tr '\n' ' ' | cut -c1-300)"
    elif [[ ! -s $W/base.out ]]; then
        fail "$name" "no output to compare"
    else
        pass "$name"
    fi
    rm -rf "$W/base" "$W/hak"
}
have() { command -v "$1" >/dev/null 2>&1; }

# deterministic text (Park-Miller LCG), $2 lines
gen_text() {
    awk -v seed="$1" -v n="$2" 'BEGIN { x = seed
        split("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu", w, " ")
        for (i = 0; i < n; i++) {
            x = (x * 16807) % 2147483647; k = 1 + x % 12
            x = (x * 16807) % 2147483647
            printf "%d %s %s %d\n", i, w[k], substr("abcdefghijklmnopqrstuvwxyz0123456789", 1 + x % 30, 1 + x % 7), x % 100000
        } }'
}
export -f gen_text

# CPython's own regression tests (libpython3.11-testsuite), PYTHONMALLOC=malloc
# so every object is a malloc call.  Compared: the verbose per-test verdicts.
# HAKMEM_VERBOSE/STATS are dropped from the environment of the tests' own child
# pythons (some assert an empty stderr); the top process has already started.
PY_TESTS="test_dict test_list test_set test_deque test_heapq test_bisect test_unicode test_sort test_string test_collections test_ordered_dict"
prog_python() {
    cd "$1" && PYTHONMALLOC=malloc PYTHONHASHSEED=0 "$PY" -c '
import os, runpy, sys
os.environ.pop("HAKMEM_STATS", None); os.environ.pop("HAKMEM_VERBOSE", None)
sys.argv = ["test", "-v", "--timeout", "50"] + sys.argv[1:]
runpy.run_module("test", run_name="__main__", alter_sys=True)' $PY_TESTS >"$1/py.log" 2>"$1/prog.err"
    local rc=$?
    grep -E ' \.\.\. (ok|skipped.*|expected failure|FAIL|ERROR)$' "$1/py.log" | sort
    grep -E '^(Tests result|All [0-9]+ tests OK)' "$1/py.log"
    return $rc
}
export -f prog_python
export PY PY_TESTS
if "$PY" -c 'import test.test_dict' 2>/dev/null; then
    compare compat.python_regrtest 60 prog_python
else
    skip compat.python_regrtest "CPython's test package missing (run tools/install-compat-deps.sh)"
fi

prog_sqlite() {
    cat >"$1/w.sql" <<'SQL'
PRAGMA journal_mode = MEMORY;
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, s TEXT, v REAL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 150000)
INSERT INTO t SELECT x, (x * 7919) % 1000,
    printf('%08x-%s', (x * 2654435761) % 4294967296, substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 26, 1 + x % 13)),
    (x % 977) * 1.5 FROM c;
CREATE INDEX t_k ON t(k);
CREATE INDEX t_s ON t(s);
CREATE TABLE u AS SELECT k, count(*) AS n, sum(v) AS sv, group_concat(substr(s, 1, 2), '') AS g FROM t GROUP BY k;
SELECT count(*), sum(k), total(v) FROM t;
SELECT k, n, sv, length(g), substr(g, 1, 24) FROM u ORDER BY sv DESC, k LIMIT 15;
SELECT t.k, count(*), max(t.s) FROM t JOIN u ON t.k = u.k WHERE u.n > 149 GROUP BY t.k ORDER BY 2 DESC, 1 LIMIT 10;
SELECT s FROM t ORDER BY s LIMIT 5 OFFSET 1000;
UPDATE t SET s = s || '/' || s WHERE id % 3 = 0;
DELETE FROM t WHERE k < 100;
SELECT k, group_concat(id, ',') FROM (SELECT k, id FROM t WHERE id % 1013 = 0 ORDER BY id) GROUP BY k ORDER BY k LIMIT 10;
VACUUM;
SELECT count(*), sum(length(s)), max(s), min(s) FROM t;
PRAGMA integrity_check;
SQL
    sqlite3 "$1/db" <"$1/w.sql" 2>"$1/prog.err" || return 1
    sqlite3 "$1/db" .dump 2>>"$1/prog.err" | md5sum
}
export -f prog_sqlite
if have sqlite3; then compare compat.sqlite3 60 prog_sqlite; else skip compat.sqlite3 "sqlite3 not installed"; fi

prog_git() {
    cd "$1" || return 1
    export HOME=$1 GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=hakmem GIT_AUTHOR_EMAIL=hakmem@example.org \
        GIT_COMMITTER_NAME=hakmem GIT_COMMITTER_EMAIL=hakmem@example.org \
        GIT_AUTHOR_DATE='2024-01-01T00:00:00Z' GIT_COMMITTER_DATE='2024-01-01T00:00:00Z'
    export GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_0=gc.auto GIT_CONFIG_VALUE_0=0 GIT_CONFIG_KEY_1=pack.threads GIT_CONFIG_VALUE_1=2
    {
        git init -q -b main repo && cd repo &&
        gen_text 7 60000 | awk '{ d = "d" ($1 % 37) "/e" ($1 % 5); f = d "/f" (int($1 / 185) % 8) ".txt"
                                  if (!(d in seen)) { system("mkdir -p " d); seen[d] = 1 }
                                  print >> f; close(f) }' &&
        git add -A && git commit -q -m 'generated tree' &&
        gen_text 11 3000 | awk '{ print >> ("d" ($1 % 7) "/extra" ($1 % 50)) }' &&
        sed -i 's/gamma/GAMMA/' d1/e1/*.txt && git rm -q -r d36 &&
        git add -A && GIT_COMMITTER_DATE='2024-01-02T00:00:00Z' git commit -q -m 'second' &&
        git gc -q && git fsck --full --strict &&
        git rev-parse HEAD 'HEAD^{tree}' && git log --stat --format='%H %an %s' | md5sum &&
        git diff --stat HEAD~1 HEAD | tail -n 1 && git ls-files | wc -l && git cat-file -p HEAD~1:d1/e1 | md5sum &&
        git count-objects -v | grep -E '^(count|in-pack|packs)'
    } 2>"$1/prog.err"
}
export -f prog_git
if have git; then compare compat.git 60 prog_git; else skip compat.git "git not installed"; fi

# gcc: a generated C program (many functions, a big switch), compiled -O2,
# run; the object file must also be byte-identical
prog_gcc() {
    cd "$1" || return 1
    awk 'BEGIN { n = 400
        print "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>"
        for (i = 0; i < n; i++)
            printf "static unsigned long f%d(unsigned long x) { char b[%d]; memset(b, (int)x, sizeof b); x ^= x << %d; x += b[%d] + %d; return x * %dUL; }\n", i, 8 + i % 64, 1 + i % 13, i % 8, i, 2 * i + 1
        print "static unsigned long dispatch(int k, unsigned long x) {\n  switch (k) {"
        for (i = 0; i < n; i++) printf "  case %d: return f%d(x);\n", i, i
        print "  default: return x;\n  }\n}"
        print "int main(void) {\n  unsigned long x = 1; char *s = malloc(1);\n  s[0] = 0;"
        printf "  for (int r = 0; r < 200000; r++) x = dispatch((int)(x %% %d), x + (unsigned long)r);\n", n
        print "  printf(\"%lu\\n\", x);\n  free(s);\n  return 0;\n}" }' >gen.c
    gcc -O2 -c gen.c -o gen.o 2>prog.err && gcc gen.o -o gen 2>>prog.err && ./gen && md5sum <gen.o
}
export -f prog_gcc
if have gcc; then compare compat.gcc 60 prog_gcc; else skip compat.gcc "gcc not installed"; fi

prog_perl() {
    PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 perl -e '
use strict; use warnings;
my (%h, %nest, %count);
my $x = 42;
for my $i (1 .. 200000) {
    $x = ($x * 16807) % 2147483647;
    my $k = sprintf("key%07d-%x", $x % 500000, $i % 97);
    $h{$k} .= chr(97 + $i % 26);
    $nest{$i % 311}{$x % 1009}++;
    push @{ $count{length($h{$k})} }, $i if $i % 5 == 0;
}
delete $h{$_} for grep { /-1[0-9a]$/ } keys %h;
my $sum = 0; $sum += length($h{$_}) for keys %h;
my @top = (sort { $h{$b} cmp $h{$a} or $a cmp $b } keys %h)[0 .. 9];
print scalar(keys %h), " $sum\n", join(",", @top), "\n";
print join(" ", map { scalar(keys %{ $nest{$_} }) } sort { $a <=> $b } keys %nest), "\n";
print join(" ", map { "$_:" . scalar(@{ $count{$_} }) } sort { $a <=> $b } keys %count), "\n";
my $s = join("", map { $_ x 3 } sort keys %h); print length($s), "\n";
' 2>"$1/prog.err"
}
export -f prog_perl
if have perl; then compare compat.perl 60 prog_perl; else skip compat.perl "perl not installed"; fi

# multi-threaded compressors: the compressed bytes must not depend on the
# allocator, and the round trip must restore the input
prog_xz() {
    gen_text 3 150000 >"$1/in" && xz -T2 -1 --block-size=1MiB -c "$1/in" >"$1/in.xz" 2>"$1/prog.err" &&
        xz -T2 -d -c "$1/in.xz" 2>>"$1/prog.err" | cmp - "$1/in" && md5sum <"$1/in.xz" && xz -l --robot "$1/in.xz" | grep '^totals' | cut -f2-5
}
prog_zstd() {
    gen_text 5 250000 >"$1/in" && zstd -q -T2 -5 --long=24 -c "$1/in" >"$1/in.zst" 2>"$1/prog.err" &&
        zstd -q -T2 -d --long=24 -c "$1/in.zst" 2>>"$1/prog.err" | cmp - "$1/in" && md5sum <"$1/in.zst"
}
export -f prog_xz prog_zstd
if have xz; then compare compat.xz_T2 60 prog_xz; else skip compat.xz_T2 "xz not installed"; fi
if have zstd; then compare compat.zstd_T2 60 prog_zstd; else skip compat.zstd_T2 "zstd not installed"; fi

# C++: every operator new/delete form (tests/test_cxx.cc, built by tests.mk)
# (under hakmem --expect-hakmem also demands that hakmem owns every block)
prog_cxx() {
    local expect=
    [[ ${LD_PRELOAD:-} == *libhakmem* ]] && expect=--expect-hakmem
    "$ROOT/build/tests/test_cxx" $expect 2>"$1/prog.err"
}
export -f prog_cxx
export ROOT
if [[ -x $ROOT/build/tests/test_cxx ]]; then
    compare compat.cxx_new_delete 60 prog_cxx
else
    skip compat.cxx_new_delete "build/tests/test_cxx not built (make test-bins)"
fi

exit $SUITE_STATUS
