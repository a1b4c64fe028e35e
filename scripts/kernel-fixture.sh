#!/usr/bin/env bash
# Unpack one real Debian kernel into DIR for the kernel-module checks' tests (`gpuimg-kmod`):
# the current ABI of SUITE's cloud kernel (default: the build host's suite) (`linux-image-cloud-amd64` →
# `linux-image-<abi>`), its `linux-headers-<abi>` (which holds `Module.symvers`) and
# `linux-headers-<version>-common`, fetched with `apt-get download` from the host's Debian mirror
# (the first `URIs:` of /etc/apt/sources.list.d/*.sources, or of /etc/apt/sources.list) with apt
# state of its own under DIR.apt, unpacked with `dpkg -x`: nothing is registered with dpkg.
# Writes DIR/abi (the ABI, one line) and DIR/root (the unpacked packages); a DIR already made is
# used as it is (delete it to take a newer kernel).
# Usage: scripts/kernel-fixture.sh DIR [SUITE]
set -euo pipefail
dir=${1:?usage: kernel-fixture.sh DIR [SUITE]}
[ -s "$dir/abi" ] && [ -d "$dir/root" ] && exit 0
mkdir -p "$(dirname "$dir")"
dir="$(cd "$(dirname "$dir")" && pwd)/$(basename "$dir")"
uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$uri" ] || uri=$(awk '$1 == "deb" && $2 !~ /^\[/ { print $2; exit } $1 == "deb" { print $3; exit }' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$uri" ] || { echo "error: no Debian mirror in the host's apt sources" >&2; exit 2; }
suite=${2:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}
apt="$dir.apt"
mkdir -p "$apt/parts"
cat >"$apt/parts/debian.sources" <<EOF
Types: deb
URIs: $uri
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
. "$(dirname "$0")/private-apt.sh"
private_apt "$apt" amd64 -- "$apt/parts"
apt-get "${apt_opts[@]}" -qq update
# The metapackage's dependency names the ABI's image package (`linux-image-<abi>`, signed or
# `-unsigned`).
image=$(apt-cache "${apt_opts[@]}" depends linux-image-cloud-amd64 |
  awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[ -n "$image" ] || { echo "error: cannot tell which kernel linux-image-cloud-amd64 installs" >&2; exit 1; }
abi=${image#linux-image-}
abi=${abi%-unsigned}
common=$(apt-cache "${apt_opts[@]}" depends "linux-headers-$abi" |
  awk '/Depends: linux-headers-.*-common/ { print $2; exit }')
[ -n "$common" ] || { echo "error: linux-headers-$abi names no -common package" >&2; exit 1; }
pkgs=("$image" "linux-headers-$abi" "$common")
(cd "$apt/debs" && apt-get "${apt_opts[@]}" -qq download "${pkgs[@]}")
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp/root"
for p in "${pkgs[@]}"; do
  dpkg -x "$(ls "$apt/debs/${p}_"*.deb | sort | tail -1)" "$dir.tmp/root"
done
echo "$abi" >"$dir.tmp/abi"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
