#!/bin/sh
# tools/install-compat-deps.sh -- install the Debian packages that
# tests/suite_compat.sh and tests/suite_env.sh use, but only those missing.
#   --quiet   print nothing when everything is already installed
# Needs root (or password-less sudo) to install; otherwise it names what is
# missing and exits 0, and the suites SKIP the tests that need it.
set -eu

PACKAGES="libpython3.11-testsuite sqlite3 git perl xz-utils zstd g++ gcc pkg-config cmake"

quiet=0
[ "${1:-}" = "--quiet" ] && quiet=1

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    [ "$quiet" -eq 1 ] || echo "install-compat-deps: all packages present"
    exit 0
fi

echo "install-compat-deps: missing:$missing"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-compat-deps: no apt-get here; install them by hand" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "install-compat-deps: not root; run as root: apt-get install$missing" >&2
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
echo "install-compat-deps: installed$missing"
