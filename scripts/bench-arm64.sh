#!/usr/bin/env bash
# Benchmark (not run in CI), issue 37:
# 1. A PyTorch image for GH200 (`platform: linux/arm64`, torch 2.11.0, whose aarch64 wheel
#    carries CUDA 13.0, with the NVIDIA wheels it requires and the arm64 self-test from
#    scripts/build-selftest-arm64.sh), built cold (empty cache: downloads, apt, every layer) and
#    warm (the same build again: every layer reused); the size of each layer; `import torch`
#    under qemu-aarch64-static (qemu registered with binfmt_misc for the run and
#    removed after; the image unpacked with umoci and its Python run in it with chroot): its
#    version, the CUDA it was built for and a CPU tensor operation.
# 2. Two platforms in one index against two single-platform builds, each from an empty cache:
#    python3, numpy and pyyaml for linux/amd64 and linux/arm64.
# Prints the CPU model, times and sizes. Needs root (binfmt_misc, chroot), umoci, qemu-user-static.
# Usage: [GPUIMG=path/to/release/gpuimg] [BENCH_DIR=dir] bash scripts/bench-arm64.sh
set -euo pipefail
cd "$(dirname "$0")/.."
W=${BENCH_DIR:-/tmp/gpuimg-bench-arm64}
G=${GPUIMG:-}
if [ -z "$G" ]; then
  cargo build --release --locked --bins -q
  G=$PWD/target/release/gpuimg
fi
ARM=$(bash scripts/build-selftest-arm64.sh | tail -1)
ARM=$(realpath "$ARM")
lscpu | grep -m1 'Model name'
nproc
rm -rf "$W"
mkdir -p "$W"
secs() { /usr/bin/time -f %e -o "$W/t" "$@" > "$W/out.json" 2> "$W/err.txt" || { cat "$W/err.txt" >&2; exit 1; }; cat "$W/t"; }

cat > "$W/gh200.yaml" <<EOF
name: bench/gh200-torch
platform: linux/arm64
base:
  apt:
    mirror: host
    suite: bookworm
    packages: [base-files, base-passwd, libc6, libstdc++6, python3]
host: {gpus: [GH200]}
stack: {pytorch: "2.11.0"}
python: {packages: []}
selftest:
  binary: {linux/arm64: $ARM}
EOF
export GPUIMG_CACHE=$W/cache
echo "GH200 torch 2.11.0 (arm64) cold: $(secs "$G" build "$W/gh200.yaml" -o "oci:$W/gh200:v1" --json) s"
python3 - "$W/out.json" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
print(f"  image {v['image_size'] / 1e9:.2f} GB, {len(v['layers'])} layers")
for l in v["layers"]:
    print(f"  {l['component']:>22} {l['size'] / 1e6:9.1f} MB compressed {l['uncompressed_size'] / 1e6:9.1f} MB")
EOF
echo "GH200 torch 2.11.0 (arm64) warm: $(secs "$G" build "$W/gh200.yaml" -o "oci:$W/gh200:v1" --json) s"
python3 -c "import json; v=json.load(open('$W/out.json')); print('  reused', v['cached_layers'], 'of', len(v['layers']), 'layers')"

# `import torch` under qemu: binfmt_misc registered for this run only.
mounted=0; added=0
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc; mounted=1; fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:'"$(command -v qemu-aarch64-static)"':F' > /proc/sys/fs/binfmt_misc/register
  added=1
fi
undo() {
  [ $added = 1 ] && echo -1 > /proc/sys/fs/binfmt_misc/qemu-aarch64 || true
  [ $mounted = 1 ] && umount /proc/sys/fs/binfmt_misc || true
}
trap undo EXIT
# The image's root file system, unpacked once (podman's vfs store would copy it per layer), and
# its Python run in it; binfmt_misc starts the aarch64 programs under qemu.
umoci unpack --image "$W/gh200:v1" "$W/bundle" > /dev/null
rm -rf "$W/gh200" "$W/cache"
start=$(date +%s.%N)
R=$W/bundle/rootfs
mkdir -p "$R/dev" "$R/proc" "$R/sys"
# A mount namespace of its own: /dev, /proc and /sys for Python, gone when it exits.
unshare -m --propagation private sh -c 'mount --rbind /dev "$1/dev" && mount -t proc proc "$1/proc" && mount -t sysfs sys "$1/sys" && exec chroot "$1" /usr/bin/python3 -c "$2"' sh "$R" \
  'import os, torch; print(os.uname().machine, "torch", torch.__version__, "built for CUDA", torch.version.cuda, "sum", torch.arange(10.0).sum().item())'
echo "  import torch and a CPU tensor operation under qemu: $(python3 -c "import time; print(f'{time.time() - $start:.1f}')") s"
rm -rf "$W/bundle"

cat > "$W/two.yaml" <<'EOF'
name: bench/two
platforms: [linux/amd64, linux/arm64]
base:
  apt:
    mirror: host
    suite: bookworm
    packages: [base-files, base-passwd, libc6, python3]
python: {packages: ["numpy>=2,<2.4", "pyyaml>=6"]}
selftest: {enabled: false}
EOF
export GPUIMG_CACHE=$W/cache-two
echo "two platforms, one index, cold: $(secs "$G" build "$W/two.yaml" -o "oci:$W/two:v1" --json) s"
python3 -c "import json; v=json.load(open('$W/out.json')); print('  index', v['manifest_digest'], [(p['platform'], round(p['image_size']/1e6,1)) for p in v['platforms']], 'MB')"
total=0
for p in linux/amd64 linux/arm64; do
  export GPUIMG_CACHE=$W/cache-${p#linux/}
  t=$(secs "$G" build "$W/two.yaml" --platform "$p" -o "oci:$W/one-${p#linux/}:v1" --json)
  echo "one platform ($p) cold: $t s"
  total=$(python3 -c "print($total + $t)")
done
echo "two single-platform builds: $total s"
