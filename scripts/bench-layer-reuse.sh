#!/usr/bin/env bash
# Benchmark (not run in CI): profiles/pytorch-h200.yaml with gzip layers, downloads cached and
# every layer written again, with and without the gzip block records of earlier builds
# (`fragments-v1/`: compressed blocks of large files found again), side by side in one run with
# the anchor: uv installing the same torch from a warm uv cache, then `tar --sort=name | gzip -6`.
#   1. cold: empty cache (downloads, apt, wheels, every layer compressed), SOURCE_DATE_EPOCH=0
#   2. every layer written, no block records (`fragments-v1/` removed first), epoch 1
#   3. every layer written, with the records (`layers-v2/` removed so no layer is a hit), epoch 1:
#      its manifest digest must equal run 2's (reused blocks never change the bytes)
#   4. unchanged rebuild
# Prints the CPU model, each run's time and peak RSS, the digests and the image size.
# Usage: [GPUIMG=path/to/release/gpuimg] [BENCH_DIR=dir] bash scripts/bench-layer-reuse.sh
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
W=${BENCH_DIR:-/tmp/gpuimg-bench-reuse}
G=${GPUIMG:-}
if [ -z "$G" ]; then
  cargo build --release --locked --bins -q
  G=$PWD/target/release/gpuimg
fi
rm -rf "$W"
mkdir -p "$W"
cp profiles/pytorch-h200.yaml "$W/p.yaml"
C="$W/cache"
run() { # name epoch
  rm -rf "$W/out-$1"
  sync
  /usr/bin/time -f "$1: %e s wall, %U s user, %S s sys, peak RSS %M KB" \
    env SOURCE_DATE_EPOCH="$2" "$G" build "$W/p.yaml" -o "$W/out-$1" --cache "$C" \
    --compression gzip --json -q > "$W/$1.json"
  python3 - "$W/$1.json" "$1" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
size = sum(l["size"] for l in j["layers"])
print(f"{sys.argv[2]}: {j['manifest_digest']} {len(j['layers'])} layers, {size:,} bytes (gzip)")
EOF
}
run cold 0
rm -rf "$C/fragments-v1" "$C/trust-v2/fragments-v1"
run no-records 1
rm -rf "$C/layers-v2" "$C/trust-v2/layers-v2"
run with-records 1
run unchanged 1
a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifest_digest"])' "$W/no-records.json")
b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifest_digest"])' "$W/with-records.json")
[ "$a" = "$b" ] && echo "same digest with and without the records: $a" || { echo "DIGESTS DIFFER: $a $b"; exit 1; }
du -sb "$C/fragments-v1" | sed 's/^/block records: /'
# The anchor: uv with a warm cache (one untimed install first), then gzip -6 of its target.
if ! command -v uv >/dev/null; then
  python3 -m venv "$W/uv-venv" && "$W/uv-venv/bin/pip" install -q uv
  export PATH="$W/uv-venv/bin:$PATH"
fi
torch=$("$G" inspect --files --json "$W/out-cold" | python3 -c 'import json, re, sys
print(next(m.group(1) for f in json.load(sys.stdin)["files"]
           for m in [re.search(r"/torch-([^/]+)\.dist-info$", f["path"])] if m))')
export UV_CACHE_DIR="$W/uv-cache"
uvi() { uv pip install -q --target "$1" --python-platform x86_64-manylinux_2_36 --python-version 3.11 "torch==$torch"; }
uvi "$W/uvt-first"
rm -rf "$W/uvt-first" "$W/uvt"
sync
/usr/bin/time -f "anchor uv install (warm uv cache): %e s" bash -c "$(declare -f uvi); torch=$torch; uvi '$W/uvt'"
/usr/bin/time -f "anchor tar | gzip -6: %e s" bash -c \
  "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C '$W/uvt' -cf - . | gzip -6 > '$W/uvt.tar.gz'"
echo "anchor: $(stat -c %s "$W/uvt.tar.gz") bytes (one gzip layer, torch==$torch)"
