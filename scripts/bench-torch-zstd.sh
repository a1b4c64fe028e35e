#!/usr/bin/env bash
# Benchmark (not run in CI): profiles/pytorch-h200.yaml with zstd layers against issue 13's zstd
# anchor, side by side in one run: gpuimg cold (empty cache: downloads, apt, unzip, every layer
# compressed), then downloads cached and every layer written again (a new SOURCE_DATE_EPOCH);
# the anchor: uv installing the same torch with an empty uv cache (`uv pip install --target …
# --python-platform x86_64-manylinux_2_36 --python-version 3.11 torch==V`), then
# `tar --sort=name … | zstd -3 -T2`. Prints the CPU model, times, peak RSS and sizes.
# Usage: [GPUIMG=path/to/release/gpuimg] [BENCH_DIR=dir] bash scripts/bench-torch-zstd.sh
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
W=${BENCH_DIR:-/tmp/gpuimg-bench-zstd}
G=${GPUIMG:-}
if [ -z "$G" ]; then
  cargo build --release --locked --bins -q
  G=$PWD/target/release/gpuimg
fi
rm -rf "$W"
mkdir -p "$W"
cp profiles/pytorch-h200.yaml "$W/p.yaml"
run() { # name epoch
  rm -rf "$W/out-$1"
  sync
  /usr/bin/time -f "$1: %e s wall, %U s user, %S s sys, peak RSS %M KB" \
    env SOURCE_DATE_EPOCH="$2" "$G" build "$W/p.yaml" -o "$W/out-$1" --cache "$W/cache" \
    --compression zstd --json -q > "$W/$1.json"
  python3 - "$W/$1.json" "$1" <<'EOF2'
import json, sys
layers = json.load(open(sys.argv[1]))["layers"]
print(f"{sys.argv[2]}: {len(layers)} layers, {sum(l['size'] for l in layers):,} bytes (zstd)")
EOF2
}
run cold 0
run warm 1
torch=$("$G" inspect --files --json "$W/out-cold" | python3 -c 'import json, re, sys
print(next(m.group(1) for f in json.load(sys.stdin)["files"]
           for m in [re.search(r"/torch-([^/]+)\.dist-info$", f["path"])] if m))')
rm -rf "$W/out-cold" "$W/out-warm" "$W/cache"
if ! command -v uv >/dev/null; then
  python3 -m venv "$W/uv-venv" && "$W/uv-venv/bin/pip" install -q uv
  export PATH="$W/uv-venv/bin:$PATH"
fi
export UV_CACHE_DIR="$W/uv-cache"
sync
/usr/bin/time -f "anchor uv install (empty uv cache): %e s" uv pip install -q --target "$W/uvt" \
  --python-platform x86_64-manylinux_2_36 --python-version 3.11 "torch==$torch"
sync
/usr/bin/time -f "anchor tar | zstd -3 -T2: %e s" bash -c \
  "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C '$W/uvt' -cf - . | zstd -q -3 -T2 > '$W/uvt.tar.zst'"
echo "anchor: $(stat -c %s "$W/uvt.tar.zst") bytes (one zstd layer, torch==$torch)"
rm -rf "$W/uvt" "$W/uv-cache"
