#!/usr/bin/env bash
# suite_aarch64.sh -- hakmem cross-built for aarch64 (tests/aarch64.mk), each
# program run under qemu-aarch64-static (user-mode emulation: the guest's
# loads, stores and atomics are emulated with Arm's ordering rules on this
# host's cores, so weak ordering is only as weak as the host's; the threads
# are real host threads).  The same programs as the native suites:
#   a64.api.*         test_api: the allocation API's conformance (release,
#                     debug, static link), and with 16 KiB and 64 KiB OS pages
#                     (qemu -p: the guest's getauxval(AT_PAGESZ), sysconf and
#                     mmap granularity; test_api checks valloc/pvalloc against
#                     sysconf(_SC_PAGESIZE), so a 4 KiB assumption fails there)
#   a64.stress.*      test_stress with 8 threads (release, debug, static, 64 KiB pages)
#   a64.hardened*     test_hardened under the hardened build, and an overflow it reports
#   a64.cxx           test_cxx: every operator new/delete form
#   a64.compat.*      glibc_api (mallinfo, malloc_trim, malloc_stats ...),
#                     libc_internal_static (libc's own allocations, gcc -static)
#   a64.os.lowmap*    test_os --lowmap with a 2^36 region map (tests/os.mk's
#                     tests: nothing outside the map is handed out; ENOMEM
#                     when the map's space is taken), also with 64 KiB pages
#   a64.misuse.*      test_misuse: double/interior/foreign frees reported and
#                     SIGABRT; a fault inside hakmem reported by the crash
#                     handler (aarch64 registers); heaps adopted, not stranded
# SKIP when the cross compiler or qemu is missing.
source "$(dirname "$0")/lib.sh"
A=$ROOT/build/aarch64
AT=$A/tests
QEMU=${QEMU_AARCH64:-qemu-aarch64-static}
SYSROOT=${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
if ! command -v "$QEMU" >/dev/null 2>&1 || [[ ! -d $SYSROOT/lib ]]; then
    skip a64 "no $QEMU or no $SYSROOT (apt-get install qemu-user-static libc6-dev-arm64-cross)"
    exit 0
fi
if [[ ! -e $A/libhakmem.so ]] && ! command -v "${CROSS_aarch64:-aarch64-linux-gnu-}gcc" >/dev/null 2>&1; then
    skip a64 "no aarch64 cross compiler (apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)"
    exit 0
fi
REL=$A/libhakmem.so DBG=$A/debug/libhakmem.so
need a64 "$REL" "$DBG" "$AT/test_api" "$AT/test_stress" || exit 1

# "${q[@]}" [-p PAGESIZE] [-E VAR=VALUE]... PROGRAM ARGS...: run an aarch64 program
q=("$QEMU" -L "$SYSROOT")

# the library really is aarch64 code, the programs too
machines=$(readelf -h "$REL" "$AT/test_api" 2>&1 | sed -n 's/^ *Machine: *//p' | sort | uniq -c | tr -s ' ')
if [[ $machines == " 2 AArch64" ]]; then
    pass a64.build.is_aarch64
else
    fail a64.build.is_aarch64 "readelf says: ${machines:-nothing}"
fi

run_bin a64.api.glibc 60 "${q[@]}" "$AT/test_api" -p a64.api.glibc --expect-glibc
run_bin a64.api.preload 60 "${q[@]}" -E LD_PRELOAD="$REL" "$AT/test_api" -p a64.api.preload \
    --expect-hakmem --variant release
run_bin a64.api.preload_debug 60 "${q[@]}" -E LD_PRELOAD="$DBG" "$AT/test_api" -p a64.api.preload_debug \
    --expect-hakmem --variant debug
need a64.api.static "$AT/test_api_static" &&
    run_bin a64.api.static 60 "${q[@]}" "$AT/test_api_static" -p a64.api.static --expect-hakmem --variant release
for ps in 16384 65536; do
    k=$((ps / 1024))k
    run_bin a64.api.page$k 60 "${q[@]}" -p $ps -E LD_PRELOAD="$REL" "$AT/test_api" -p a64.api.page$k \
        --expect-hakmem --variant release
done
run_bin a64.stress.preload 60 "${q[@]}" -E LD_PRELOAD="$REL" "$AT/test_stress" -p a64.stress.preload \
    --expect-hakmem -j 8 -s 0.3
run_bin a64.stress.preload_debug 60 "${q[@]}" -E LD_PRELOAD="$DBG" "$AT/test_stress" -p a64.stress.preload_debug \
    --expect-hakmem -j 8 -s 0.1
need a64.stress.static "$AT/test_stress_static" &&
    run_bin a64.stress.static 60 "${q[@]}" "$AT/test_stress_static" -p a64.stress.static --expect-hakmem -j 8 -s 0.2
run_bin a64.stress.page64k 60 "${q[@]}" -p 65536 -E LD_PRELOAD="$REL" "$AT/test_stress" -p a64.stress.page64k \
    --expect-hakmem -j 8 -s 0.1

need a64.cxx "$AT/test_cxx" &&
    run_bin a64.cxx 60 "${q[@]}" -E LD_PRELOAD="$REL" "$AT/test_cxx" --expect-hakmem

# the hardened build's correct programs (canaries, zeroing, quarantine,
# guard pages: 4 KiB guest pages) and one overflow it must stop
need a64.hardened "$A/hardened/libhakmem.so" "$AT/test_hardened" && {
    run_bin a64.hardened 120 "${q[@]}" -E LD_PRELOAD="$A/hardened/libhakmem.so" "$AT/test_hardened" -p a64.hardened
    out=$(limit 60 "${q[@]}" -E LD_PRELOAD="$A/hardened/libhakmem.so" -E HAKMEM_CRASH_HANDLER=0 \
          "$AT/test_hardened" overflow_canary 2>&1)
    if [[ $out == *"heap overflow detected"* && $out != *SURVIVED* ]]; then pass a64.hardened.overflow
    else fail a64.hardened.overflow "not reported: $(head -c 200 <<<"$out")"; fi
}

# the region map: hakmem never hands out memory its map cannot describe
# (a 2^36 map, tests/aarch64.mk), with 4 KiB and 64 KiB pages
for v in lowmap lowmap_debug; do
    need a64.os.$v "$AT/os/test_os_$v" || continue
    run_bin a64.os.$v 60 "${q[@]}" "$AT/os/test_os_$v" -p a64.os.$v --lowmap
done
need a64.os.lowmap_page64k "$AT/os/test_os_lowmap" &&
    run_bin a64.os.lowmap_page64k 60 "${q[@]}" -p 65536 "$AT/os/test_os_lowmap" -p a64.os.lowmap_page64k --lowmap

C=$A/compat
# (HAKMEM_GUARD_SAMPLE=0: the page accounting of mallinfo2, as in suite_compat.sh)
need a64.compat.glibc_api "$C/glibc_api" &&
    run_bin a64.compat.glibc_api 60 "${q[@]}" -E HAKMEM_GUARD_SAMPLE=0 -E LD_PRELOAD="$REL" -E GLIBC_API_QEMU=1 "$C/glibc_api" a64.compat.glibc_api
need a64.compat.glibc_api_static "$C/glibc_api_static" &&
    run_bin a64.compat.glibc_api_static 60 "${q[@]}" -E HAKMEM_GUARD_SAMPLE=0 -E GLIBC_API_QEMU=1 "$C/glibc_api_static" a64.compat.glibc_api_static
need a64.compat.static "$C/libc_internal_static" &&
    run_bin a64.compat.static 60 "${q[@]}" "$C/libc_internal_static" a64.compat.static

# misuse: expect NAME SO CASE STATUS REGEX (as suite_misuse.sh)
BIN=$AT/test_misuse
[[ -e $BIN ]] || exit $SUITE_STATUS
expect() {
    local name=$1 so=$2 case=$3 want=$4 re=$5
    EXPECT_LIMIT=60 expect_report "$name" "$want" "$re" "$QEMU" -L "$SYSROOT" -E LD_PRELOAD="$so" "$BIN" "$case"
}
ABRT=134 SEGV=139 P='0x[0-9a-f]+'
for v in release debug; do
    so=$REL; [[ $v == debug ]] && so=$DBG
    expect a64.misuse.$v.double_free        "$so" double_free        $ABRT "^hakmem: free\(\): double free of $P"
    expect a64.misuse.$v.double_free_remote "$so" double_free_remote $ABRT "^hakmem: free\(\): double free of $P"
    expect a64.misuse.$v.interior           "$so" interior           $ABRT "^hakmem: free\(\): invalid pointer \(inside a block\) $P"
    expect a64.misuse.$v.interior_huge      "$so" interior_huge      $ABRT "^hakmem: free\(\): invalid pointer \(inside a huge block\) $P"
    expect a64.misuse.$v.foreign_stack      "$so" foreign_stack      $ABRT "^hakmem: free\(\): invalid pointer \(not allocated by hakmem\) $P"
    expect a64.misuse.$v.aligned_interior   "$so" aligned_interior   $ABRT "^hakmem: free\(\): invalid pointer \(inside a block\) $P"
    expect a64.misuse.$v.realloc_freed      "$so" realloc_freed      $ABRT "^hakmem: realloc\(\): pointer already freed $P"
done
# the crash handler reads aarch64's registers (src/arch/hak_arch_aarch64.h)
expect a64.crash.report "$REL" corrupt_freelist $SEGV \
    "^hakmem: SIGSEGV inside the allocator \(in release, near malloc\(\)\): fault address $P"
expect a64.crash.registers "$REL" corrupt_freelist $SEGV "^hakmem: aarch64 registers: pc $P \(library offset $P\), sp $P"
out=$(limit 60 "$QEMU" -L "$SYSROOT" -E LD_PRELOAD="$REL" "$BIN" thread_generations 2>&1)
timed_out $? && out="(timed out after 60s) $out"
created=$(sed -n 's/.*heaps_created=\([0-9]*\).*/\1/p' <<<"$out")
adopted=$(sed -n 's/.*heaps_adopted=\([0-9]*\).*/\1/p' <<<"$out")
if [[ -n $created && $created -le 4 && ${adopted:-0} -ge 190 ]]; then
    pass a64.heaps.thread_generations_reuse
else
    fail a64.heaps.thread_generations_reuse "created=${created:-?} adopted=${adopted:-?}: $(head -c 200 <<<"$out")"
fi
exit $SUITE_STATUS
