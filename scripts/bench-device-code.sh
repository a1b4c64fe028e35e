#!/usr/bin/env bash
# Size benchmark for `strip: [device-code]` (not run in CI): profiles/pytorch-h200.yaml built
# with every strip class and unused-libraries, then the same plus device-code (pruned for the
# profile's H100/H200, cc 9.0), side by side with the same torch installed by uv into a
# directory and packed as one gzip layer (`tar --sort=name | pigz -6`), in the same run.
# Prints the CPU model, each image's layer bytes, the ratios to the anchor, and
# `gpuimg inspect --sizes` of the pruned image (entries and bytes zeroed per library).
# Usage: bash scripts/bench-device-code.sh   (needs the host's Python index; GPUIMG=path skips
# the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
W=${BENCH_DIR:-/tmp/gpuimg-bench-device-code}
mkdir -p "$W"
if [ -z "${GPUIMG:-}" ]; then
  cargo build --release --locked --bins -q
  GPUIMG=$PWD/target/release/gpuimg
fi
G=$GPUIMG
ALL="docs, man, locales, headers, static-libs, debug-symbols, build-files, python-caches, tests, type-stubs, other-gpu-backends, unused-libraries"
blob_bytes() { "$G" inspect "$1" --json | python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))'; }
sed "s/^strip: .*/strip: [$ALL]/" profiles/pytorch-h200.yaml > "$W/all.yaml"
sed "s/^strip: .*/strip: [$ALL, device-code]/" profiles/pytorch-h200.yaml > "$W/all-dc.yaml"
export SOURCE_DATE_EPOCH=0
declare -A size
for v in all all-dc; do
  rm -rf "$W/out-$v"
  /usr/bin/time -f "$v: %e s, peak RSS %M KB" "$G" build "$W/$v.yaml" -o "$W/out-$v" -q --cache "$W/cache"
  size[$v]=$(blob_bytes "$W/out-$v")
  echo "$v: ${size[$v]} bytes of layers (gzip)"
done
# The same image with zstd layers (`--compression zstd`), for the zstd rows below.
rm -rf "$W/out-all-dc-zstd"
"$G" build "$W/all-dc.yaml" -o "$W/out-all-dc-zstd" -q --cache "$W/cache" --compression zstd
size[all-dc-zstd]=$(blob_bytes "$W/out-all-dc-zstd")
echo "all-dc-zstd: ${size[all-dc-zstd]} bytes of layers (zstd)"
"$G" inspect --sizes "$W/out-all-dc"
if ! command -v uv >/dev/null; then
  python3 -m venv "$W/uv-venv" && "$W/uv-venv/bin/pip" install -q uv
  export PATH="$W/uv-venv/bin:$PATH"
fi
torch=$("$G" inspect --files --json "$W/out-all" | python3 -c 'import json, re, sys
print(next(m.group(1) for f in json.load(sys.stdin)["files"]
           for m in [re.search(r"/torch-([^/]+)\.dist-info$", f["path"])] if m))')
rm -rf "$W/uvt"
/usr/bin/time -f "uv install: %e s" uv pip install -q --target "$W/uvt" --python-platform x86_64-manylinux_2_36 \
  --python-version 3.11 "torch==$torch"
/usr/bin/time -f "tar | pigz -6: %e s" bash -c \
  "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C '$W/uvt' -cf - . | pigz -p 2 -6 > '$W/uvt.tar.gz'"
anchor=$(stat -c %s "$W/uvt.tar.gz")
echo "uv anchor: $anchor bytes (one gzip layer, torch==$torch)"
for v in all all-dc all-dc-zstd; do
  python3 -c "print('$v / anchor: %.3f' % (${size[$v]} / $anchor))"
done
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$W/uvt" -cf - . | zstd -q -3 -T2 > "$W/uvt.tar.zst"
anchor_zst=$(stat -c %s "$W/uvt.tar.zst")
echo "uv anchor, zstd -3: $anchor_zst bytes"
python3 -c "print('all-dc-zstd / zstd anchor: %.3f' % (${size[all-dc-zstd]} / $anchor_zst))"
# The second comparison: NVIDIA's nvidia/cuda:12.4.1-runtime-ubuntu22.04 (about 1.4 GB
# compressed, as a user measured it on a registry in 2024; not pullable here) plus the pip
# torch of that CUDA line (torch 2.6.0, whose default wheels are cu124), packed as above.
rm -rf "$W/uvt124"
uv pip install -q --target "$W/uvt124" --python-platform x86_64-manylinux_2_36 \
  --python-version 3.11 "torch==2.6.0"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$W/uvt124" -cf - . \
  | pigz -p 2 -6 > "$W/uvt124.tar.gz"
t124=$(stat -c %s "$W/uvt124.tar.gz")
echo "pip torch 2.6.0 (cu124) as one gzip layer: $t124 bytes"
python3 -c "print('all-dc / (1.4e9 + torch cu124): %.3f' % (${size[all-dc]} / (1.4e9 + $t124)))"
python3 -c "print('all-dc-zstd / (1.4e9 + torch cu124): %.3f' % (${size[all-dc-zstd]} / (1.4e9 + $t124)))"
