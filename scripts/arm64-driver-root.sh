#!/usr/bin/env bash
# Unpack an arm64 root holding glibc and Debian's NVIDIA driver libraries (`libcuda1`,
# `libnvidia-ml1` and what they load; bookworm's 535 branch, from `non-free`) into DIR, for
# running the arm64 self-test under `qemu-aarch64-static -L DIR` on an amd64 host with no GPU:
# the driver libraries load, and the driver says it has no device.
# The packages come with `apt-get download` from the host's Debian mirror (the first `URIs:` of
# /etc/apt/sources.list.d/debian.sources, or of /etc/apt/sources.list), read with apt state of
# its own under DIR.apt; nothing is registered with dpkg and the host's architectures are not
# changed. `libcuda.so.1` is a maintainer script's link in the package: made here.
# Usage: scripts/arm64-driver-root.sh DIR
set -euo pipefail
dir=${1:?usage: arm64-driver-root.sh DIR}
nv=usr/lib/aarch64-linux-gnu/nvidia/current
[ -e "$dir/$nv/libcuda.so.1" ] && [ -e "$dir/lib/ld-linux-aarch64.so.1" ] && exit 0
uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$uri" ] || uri=$(awk '$1 == "deb" && $2 !~ /^\[/ { print $2; exit } $1 == "deb" { print $3; exit }' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$uri" ] || { echo "error: no Debian mirror in the host's apt sources" >&2; exit 2; }
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
apt="$dir.apt"
mkdir -p "$apt/parts"
cat >"$apt/parts/debian.sources" <<EOF
Types: deb
URIs: $uri
Suites: $suite
Components: main non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
. "$(dirname "$0")/private-apt.sh"
private_apt "$apt" arm64 -- "$apt/parts"
apt-get "${apt_opts[@]}" -qq update
pkgs=(libc6 libgcc-s1 libcuda1 libnvidia-ml1 libnvidia-ptxjitcompiler1)
(cd "$apt/debs" && apt-get "${apt_opts[@]}" -qq download "${pkgs[@]/%/:arm64}")
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
for p in "${pkgs[@]}"; do
  dpkg -x "$(ls "$apt/debs/${p}_"*_arm64.deb | sort | tail -1)" "$dir.tmp"
done
cuda=$(cd "$dir.tmp/$nv" && ls libcuda.so.[0-9]*.* | sort | tail -1)
ln -sf "$cuda" "$dir.tmp/$nv/libcuda.so.1"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
