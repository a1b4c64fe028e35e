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
W=${BENCH_DIR:-/tmp/gpuimg-bench-reuse}
. scripts/bench-torch-lib.sh
torch_bench_setup
C="$W/cache"
torch_build cold 0 gzip
rm -rf "$C/fragments-v1" "$C/trust-v2/fragments-v1"
torch_build no-records 1 gzip
rm -rf "$C/layers-v2" "$C/trust-v2/layers-v2"
torch_build with-records 1 gzip
torch_build unchanged 1 gzip
a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifest_digest"])' "$W/no-records.json")
b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifest_digest"])' "$W/with-records.json")
[ "$a" = "$b" ] && echo "same digest with and without the records: $a" || { echo "DIGESTS DIFFER: $a $b"; exit 1; }
du -sb "$C/fragments-v1" | sed 's/^/block records: /'
# The anchor: uv with a warm cache (one untimed install first), then gzip -6 of its target.
ensure_uv
torch=$(torch_version "$W/out-cold")
export UV_CACHE_DIR="$W/uv-cache"
uv_target "$W/uvt-first" "$torch"
rm -rf "$W/uvt-first" "$W/uvt"
sync
/usr/bin/time -f "anchor uv install (warm uv cache): %e s" bash -c \
  "$(declare -f uv_target); uv_target '$W/uvt' '$torch'"
/usr/bin/time -f "anchor tar | gzip -6: %e s" bash -c \
  "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C '$W/uvt' -cf - . | gzip -6 > '$W/uvt.tar.gz'"
echo "anchor: $(stat -c %s "$W/uvt.tar.gz") bytes (one gzip layer, torch==$torch)"
