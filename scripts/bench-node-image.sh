#!/usr/bin/env bash
# Benchmark (not run in CI), issue 39: the node image's size per layer against the anchor, in the
# same run. gpuimg builds a host profile (bookworm + bookworm-security, an H100, the proprietary
# flavour on the newest 6.1 cloud kernel); the anchor is mmdebstrap of the same package set (the
# kernel, the driver's user space, firmware, persistence daemon, systemd, udev, kmod, ifupdown,
# isc-dhcp-client, openssh-server, cloud-init) with the driver's module installed by apt through
# `nvidia-kernel-dkms` (maintainer scripts and DKMS run in that chroot: the compiler, headers and
# dkms stay in it, as they do on a node installed that way), no Recommends, as a directory then
# one `tar | gzip -6` layer. Prints the CPU model, gpuimg's layers (compressed and uncompressed)
# and the anchor's size, and both totals.
# Needs root, mmdebstrap, skopeo. Usage:
#   [GPUIMG=path/to/release/gpuimg] [BENCH_DIR=dir] bash scripts/bench-node-image.sh
set -euo pipefail
cd "$(dirname "$0")/.."
W=${BENCH_DIR:-/var/tmp/gpuimg-bench-node-image}
G=${GPUIMG:-}
if [ -z "$G" ]; then
  cargo build --release --locked --bins -q
  G=$PWD/target/release/gpuimg
fi
command -v mmdebstrap > /dev/null || { echo "needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }
lscpu | grep -m1 'Model name'
rm -rf "$W"
mkdir -p "$W"
sources=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2> /dev/null || true)
mirror=$(printf '%s\n' "$sources" | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit} /^deb / && $2 !~ /security/ {print $2; exit}')
security=$(printf '%s\n' "$sources" | awk '/^URIs:/ && $2 ~ /security/ {print $2; exit} /^deb / && $2 ~ /security/ {print $2; exit}')
[ -n "$mirror" ] && [ -n "$security" ] || { echo "no bookworm and bookworm-security mirror in the host's apt sources" >&2; exit 2; }
COMPONENTS="main contrib non-free non-free-firmware"
cat > "$W/node.yaml" <<EOF
kind: host
name: bench/node
base:
  apt:
    mirror: host
    suite: bookworm
    components: [main, contrib, non-free, non-free-firmware]
    repositories:
      - {url: host, suite: bookworm-security, components: [main, contrib, non-free, non-free-firmware]}
host:
  gpus: [H100]
  kernel: "6.1"
  kernel_module: proprietary
EOF
export GPUIMG_CACHE="$W/cache"
/usr/bin/time -f %e -o "$W/gpuimg.t" "$G" build "$W/node.yaml" -o "oci:$W/node" > "$W/gpuimg.out" 2> "$W/gpuimg.err"
echo "gpuimg build: $(cat "$W/gpuimg.t") s (cold)"
skopeo inspect --raw "oci:$W/node:latest" > "$W/manifest.json"
python3 - "$W/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
tc = tu = 0
print(f"{'layer':<14} {'compressed':>12} {'uncompressed':>14}")
for l in m["layers"]:
    a = l.get("annotations", {})
    c, u = l["size"], int(a.get("io.gpuimg.uncompressed-size", 0))
    tc += c; tu += u
    print(f"{a.get('io.gpuimg.component', '?'):<14} {c/1e6:>10.1f} MB {u/1e6:>12.1f} MB")
print(f"{'gpuimg total':<14} {tc/1e6:>10.1f} MB {tu/1e6:>12.1f} MB")
PY
# The resolved versions, so that the anchor installs the same ones.
"$G" resolve --json "$W/node.yaml" > "$W/resolve.json"
abi=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["kernel_abi"])' < "$W/resolve.json")
deb=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["source_version"])' < "$W/resolve.json")
pkgs="linux-image-$abi,linux-headers-$abi,nvidia-kernel-dkms=$deb,libcuda1=$deb,libnvidia-ptxjitcompiler1=$deb,libnvidia-ml1=$deb,libnvidia-cfg1=$deb,nvidia-smi=$deb,nvidia-alternative=$deb,nvidia-kernel-support=$deb,firmware-nvidia-gsp=$deb,nvidia-persistenced,systemd,systemd-sysv,udev,kmod,ifupdown,isc-dhcp-client,openssh-server,cloud-init"
/usr/bin/time -f %e -o "$W/mm.t" mmdebstrap --quiet --mode=root --format=directory --variant=apt \
  --components="${COMPONENTS// /,}" --aptopt='APT::Install-Recommends "false"' \
  --include="$pkgs" bookworm "$W/anchor" \
  "deb $mirror bookworm $COMPONENTS" "deb $security bookworm-security $COMPONENTS" 2> "$W/mm.err" ||
  { echo "mmdebstrap failed:"; tail -5 "$W/mm.err"; exit 1; }
echo "mmdebstrap (DKMS in the chroot): $(cat "$W/mm.t") s"
ls "$W/anchor/usr/lib/modules/$abi/updates/dkms/" 2> /dev/null | sed 's/^/  anchor module: /'
u=$(du -sb --exclude=proc --exclude=sys --exclude=dev "$W/anchor" | cut -f1)
c=$(tar -C "$W/anchor" --exclude=./proc --exclude=./sys --exclude=./dev -cf - . | gzip -6 | wc -c)
python3 -c 'import sys; c, u = int(sys.argv[1]), int(sys.argv[2]); print("%-14s %10.1f MB %12.1f MB" % ("anchor total", c / 1e6, u / 1e6))' "$c" "$u"
rm -rf "$W/anchor"
