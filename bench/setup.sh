#!/bin/sh
# bench/setup.sh -- make sure the benchmark's peers and tools are installed.
# Checks each Debian package with `dpkg -s`; if any is missing and we are root,
# runs `apt-get update` once and installs them; if not root, fails loudly
# naming the missing packages.  Exit status 0 = everything present.
PKGS="libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 python3-matplotlib strace"
missing=""
for p in $PKGS; do
    if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "bench/setup.sh: missing packages:$missing" >&2
if [ "$(id -u)" != 0 ]; then
    echo "bench/setup.sh: not root; install them with: apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2 || { echo "bench/setup.sh: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
apt-get install -y -q $missing >&2 || {
    echo "bench/setup.sh: apt-get install failed for:$missing" >&2
    exit 1
}
echo "bench/setup.sh: installed:$missing" >&2
