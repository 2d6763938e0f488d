#!/usr/bin/env bash
# tools/install-deps.sh -- install the Debian packages hakmem's build, tests
# and benchmarks need, but only those that are missing.
#   --quiet   print nothing when everything is already installed
# Installing needs root (apt-get); as another user it prints what is missing
# and carries on (exit 0) so `make test` can still run what it can.
set -euo pipefail

PACKAGES=(build-essential g++ clang libclang-rt-14-dev valgrind python3 strace
          libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 python3-matplotlib
          libpython3.11-testsuite sqlite3 git perl xz-utils zstd pkg-config
          gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
          qemu-user-static google-perftools binutils cmake)
# (gcc-aarch64 .. qemu-user-static: the aarch64 cross-build and its suite
# under qemu, tests/aarch64.mk; google-perftools: google-pprof for the heap
# profile tests, tests/profile.mk; cmake: the find_package(hakmem) consumer
# of tests/suite_env.sh.  README.md's "Run the tests" lists these packages:
# tests/suite_env.sh checks that the two lists agree)

quiet=0
[[ "${1:-}" == "--quiet" ]] && quiet=1

missing=()
for p in "${PACKAGES[@]}"; do
    # "install ok installed" only; a removed package leaves "deinstall ok config-files"
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} == 0)); then
    ((quiet)) || echo "install-deps: all packages present"
    exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: no apt-get here; install them by hand" >&2
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "install-deps: not root; run as root: apt-get install ${missing[*]}" >&2
        exit 0
    fi
else
    SUDO=()
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
