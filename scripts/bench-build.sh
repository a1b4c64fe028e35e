#!/usr/bin/env bash
# Benchmark for the image builder: pack a Debian root filesystem (mmdebstrap
# --variant=essential bookworm, ~140 MB) into a single-layer image, side by side in one run with
# `umoci insert` of the same tree and with `tar | pigz -p 2 | sha256sum` (the floor). Medians of
# N runs (hyperfine). Also: unchanged rebuild, and peak memory (RSS) for a 1 GB layer.
# Usage: bash scripts/bench-build.sh [RUNS]   (needs root for mmdebstrap; results on stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
bash scripts/install-deps.sh
cargo build --release --locked --bins -q
G=$PWD/target/release/gpuimg
W=${BENCH_DIR:-/tmp/gpuimg-bench}
mkdir -p "$W"
if [ ! -d "$W/rootfs" ]; then
  mmdebstrap --variant=essential --quiet bookworm "$W/rootfs.tar"
  mkdir -p "$W/rootfs" && tar -C "$W/rootfs" -xf "$W/rootfs.tar"
fi
echo "tree: $(du -sm "$W/rootfs" | cut -f1) MB, $(find "$W/rootfs" | wc -l) entries"
cat > "$W/p.yaml" <<YAML
name: bench
base:
  rootfs: ./rootfs
  allow-special-files: true   # mmdebstrap's /dev holds device nodes
YAML
export SOURCE_DATE_EPOCH=0
cold="rm -rf $W/cache $W/out"
hyperfine --style basic --runs "$RUNS" --export-json "$W/build.json" \
  --setup "$G build $W/p.yaml -o $W/out-warm -q --cache $W/cache-warm" \
  -n "gpuimg build (gzip, cold cache)" --prepare "$cold" \
  "$G build $W/p.yaml -o $W/out -q --cache $W/cache" \
  -n "gpuimg build (zstd, cold cache)" --prepare "$cold" \
  "$G build $W/p.yaml -o $W/out -q --cache $W/cache --compression zstd" \
  -n "gpuimg rebuild, nothing changed" --prepare "true" \
  "$G build $W/p.yaml -o $W/out-warm -q --cache $W/cache-warm" \
  -n "umoci insert (gzip)" \
  --prepare "rm -rf $W/umoci && umoci init --layout $W/umoci && umoci new --image $W/umoci:t" \
  "umoci insert --image $W/umoci:t $W/rootfs /" \
  -n "tar | pigz -p 2 | sha256sum (floor)" --prepare "true" \
  "tar -C $W/rootfs -cf - . | pigz -p 2 | sha256sum"
python3 - "$W/build.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
base = {x["command"]: x["median"] for x in r}
umoci = base["umoci insert (gzip)"]
print(f"\n| command | median s | vs umoci |\n|---|---|---|")
for x in r:
    print(f"| {x['command']} | {x['median']:.3f} | {x['median']/umoci:.2f}x |")
PY
# Sizes of the results.
echo "gpuimg gzip layer: $($G inspect $W/out-warm --json | python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))') bytes"
# Peak memory for a 1 GB layer.
mkdir -p "$W/big/data"
[ -f "$W/big/data/blob" ] || head -c 1073741824 /dev/urandom > "$W/big/data/blob"
printf 'name: big\nbase:\n  rootfs: ./big\n' > "$W/big.yaml"
rm -rf "$W/cache-big"
/usr/bin/time -f "peak RSS %M KB, %e s (1 GB layer, zstd)" "$G" build "$W/big.yaml" -o "$W/out-big" -q --cache "$W/cache-big" --compression zstd
rm -rf "$W/cache-big"
/usr/bin/time -f "peak RSS %M KB, %e s (1 GB layer, gzip)" "$G" build "$W/big.yaml" -o "$W/out-big" -q --cache "$W/cache-big"
