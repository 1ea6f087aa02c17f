#!/usr/bin/env bash
# Builds the .deb with CPack from a Release build directory and checks it on a
# clean Debian root: a minimal bookworm (debootstrap --variant=minbase, kept
# as a tarball in the build directory and unpacked fresh each run) where apt
# installs the package with the dependencies it declares, then the binary
# runs, the man page is found, and both systemd units pass
# `systemd-analyze verify` (with systemd and man-db installed there) and
# their sandboxing is rated by `systemd-analyze security --offline`.
#   scripts/check_package.sh [BUILD_DIR]   (default build/; needs root and
#                                           the Debian mirror)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tessera_install_packages debootstrap dpkg-dev help2man
build=${1:-build}
# The package installs under /usr, and its units name /usr/bin/tessera.
tessera_configure "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr
cmake --build "$build" -j "$(nproc)" --target tessera man_page
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/tessera_*_*.deb | head -1)
version=$(dpkg-deb -f "$deb" Version)

base="$build/bookworm-minbase.tar"
if [ ! -f "$base" ]; then
  tmp=$(mktemp -d)
  debootstrap --variant=minbase bookworm "$tmp" http://deb.debian.org/debian >/dev/null
  tar -C "$tmp" -cf "$base" .
  rm -rf "$tmp"
fi
root=$(mktemp -d)
cleanup() {
  umount "$root/proc" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
tar -C "$root" -xf "$base"
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/"
in_root() { chroot "$root" env DEBIAN_FRONTEND=noninteractive "$@"; }
# apt's own chatter goes to a log, shown when it fails.
log="$build/check_package.log"
quietly() { "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "failed: $*" >&2; exit 1; }; }
quietly in_root apt-get update -qq
quietly in_root apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$deb")"
echo "installed $(basename "$deb") with its dependencies on a clean bookworm root"
got=$(in_root tessera --version)
[ "$got" = "tessera $version" ] || { echo "tessera --version says '$got', the package is $version" >&2; exit 1; }
in_root tessera devices >/dev/null
quietly in_root apt-get install -y -qq --no-install-recommends systemd man-db
in_root man -w tessera
for unit in tessera-worker.service tessera-serve.service; do
  in_root systemd-analyze verify "/usr/lib/systemd/system/$unit"
  echo "$unit: systemd-analyze verify passed; $(in_root systemd-analyze security --offline=yes \
    "/usr/lib/systemd/system/$unit" 2>&1 | grep -o 'Overall exposure level.*')"
done
for f in /etc/default/tessera-worker /etc/default/tessera-serve; do
  in_root dpkg-query -W -f='${Conffiles}\n' tessera | grep -q "$f" || { echo "$f is not a conffile" >&2; exit 1; }
done
quietly in_root apt-get remove -y -qq tessera
[ ! -e "$root/usr/bin/tessera" ] || { echo "removing the package left /usr/bin/tessera" >&2; exit 1; }
echo "the package installs, runs, verifies and removes cleanly"
