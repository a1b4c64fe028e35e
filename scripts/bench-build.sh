#!/usr/bin/env bash
# Benchmark for the image builder: pack a Debian root filesystem (mmdebstrap
# --variant=essential bookworm, ~145 MB) into a single-layer image, side by side in one run with
# `umoci insert` of the same tree (the gzip anchor), `tar | zstd -3 -T2 | sha256sum` (the zstd
# anchor) and `tar | pigz -p 2 | sha256sum`. Medians of N runs (hyperfine); prints the CPU model.
# Also: unchanged rebuild, output sizes, and peak memory (RSS) for a 1 GB layer.
# BASELINE=REV also builds gpuimg at that git revision (e.g. one with the previous compressor)
# and times it in the same run; BASELINE_BIN=PATH uses an already built binary instead.
# Usage: [GPUIMG=release binary] bash scripts/bench-build.sh [RUNS]   (needs root for mmdebstrap; results on stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
bash scripts/install-deps.sh
W=${BENCH_DIR:-/tmp/gpuimg-bench}
mkdir -p "$W"
OLD=${BASELINE_BIN:-}
# GPUIMG=PATH: an already built release binary (its gpuimg-selftest beside it).
if [ -n "${GPUIMG:-}" ]; then
  cp "$GPUIMG" "$W/gpuimg-current"
  cp "$(dirname "$GPUIMG")/gpuimg-selftest" "$W/gpuimg-selftest"
else
  cargo build --release --locked --bins -q
  cp target/release/gpuimg "$W/gpuimg-current"
  cp target/release/gpuimg-selftest "$W/gpuimg-selftest"   # found beside the binary
fi
G=$W/gpuimg-current
if [ -n "${BASELINE:-}" ] && [ -z "$OLD" ]; then
  # Same target directory: only the gpuimg crate itself is compiled twice. Both builds have
  # the same fingerprint, and cargo would take one for the other (their sources' mtimes are
  # older than the other's output): the crate's artifacts are cleaned before and after.
  rm -rf "$W/baseline-src" && mkdir -p "$W/baseline-src"
  git archive "$BASELINE" | tar -x -C "$W/baseline-src"
  cargo clean --release -p gpuimg -q
  cargo build --release --locked --bin gpuimg -q --manifest-path "$W/baseline-src/Cargo.toml" \
    --target-dir "$PWD/target"
  cp target/release/gpuimg "$W/gpuimg-baseline"
  cargo clean --release -p gpuimg -q
  OLD=$W/gpuimg-baseline
  if cmp -s "$G" "$OLD"; then echo "baseline and current binaries are identical" >&2; exit 1; fi
fi
if [ ! -d "$W/rootfs" ]; then
  mmdebstrap --variant=essential --quiet bookworm "$W/rootfs.tar"
  mkdir -p "$W/rootfs" && tar -C "$W/rootfs" -xf "$W/rootfs.tar"
fi
echo "tree: $(du -sm "$W/rootfs" | cut -f1) MB, $(find "$W/rootfs" | wc -l) entries; load: $(cut -d' ' -f1-3 /proc/loadavg)"
cat > "$W/p.yaml" <<YAML
name: bench
base:
  rootfs: ./rootfs
  allow-special-files: true   # mmdebstrap's /dev holds device nodes
YAML
export SOURCE_DATE_EPOCH=0
# Prepare steps end with sync, so that their deletions are not timed as the next run.
cold="rm -rf $W/cache $W/out && sync"
old=()
if [ -n "$OLD" ]; then
  old=(-n "baseline build (gzip, cold cache)" --prepare "$cold"
       "$OLD build $W/p.yaml -o $W/out -q --cache $W/cache"
       -n "baseline build (zstd, cold cache)" --prepare "$cold"
       "$OLD build $W/p.yaml -o $W/out -q --cache $W/cache --compression zstd")
fi
hyperfine --style basic --runs "$RUNS" --export-json "$W/build.json" \
  --setup "$G build $W/p.yaml -o $W/out-warm -q --cache $W/cache-warm" \
  -n "gpuimg build (gzip, cold cache)" --prepare "$cold" \
  "$G build $W/p.yaml -o $W/out -q --cache $W/cache" \
  -n "gpuimg build (zstd, cold cache)" --prepare "$cold" \
  "$G build $W/p.yaml -o $W/out -q --cache $W/cache --compression zstd" \
  "${old[@]}" \
  -n "gpuimg rebuild, nothing changed" --prepare "true" \
  "$G build $W/p.yaml -o $W/out-warm -q --cache $W/cache-warm" \
  -n "umoci insert (gzip)" \
  --prepare "rm -rf $W/umoci && umoci init --layout $W/umoci && umoci new --image $W/umoci:t && sync" \
  "umoci insert --image $W/umoci:t $W/rootfs /" \
  -n "tar | zstd -3 -T2 | sha256sum" --prepare "true" \
  "tar -C $W/rootfs -cf - . | zstd -q -3 -T2 | sha256sum" \
  -n "tar | pigz -p 2 | sha256sum" --prepare "true" \
  "tar -C $W/rootfs -cf - . | pigz -p 2 | sha256sum"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$W/build.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
med = {x["command"]: x["median"] for x in r}
umoci = med["umoci insert (gzip)"]
pipe = med["tar | zstd -3 -T2 | sha256sum"]
print("\n| command | median s | vs umoci insert | vs tar \\| zstd -3 -T2 |\n|---|---|---|---|")
for x in r:
    print(f"| {x['command']} | {x['median']:.3f} | {x['median']/umoci:.2f}x | {x['median']/pipe:.2f}x |")
old = med.get("baseline build (gzip, cold cache)")
if old:
    new = med["gpuimg build (gzip, cold cache)"]
    print(f"\ngzip: this build takes {new/old:.2f}x the baseline's time ({old/new:.2f}x faster)")
PY
# Sizes of the results (one build each, outside the timed runs).
layer_bytes() { "$G" inspect "$1" --json | python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))'; }
for c in gzip zstd; do
  for b in "$G" ${OLD:+"$OLD"}; do
    rm -rf "$W/cache-s" "$W/out-s"
    "$b" build "$W/p.yaml" -o "$W/out-s" -q --cache "$W/cache-s" --compression $c
    echo "$([ "$b" = "$G" ] && echo gpuimg || echo baseline) $c layer: $(layer_bytes "$W/out-s") bytes"
  done
done
rm -rf "$W/cache-s" "$W/out-s"
echo "umoci gzip layer: $(find "$W/umoci/blobs" -type f -size +1M -printf '%s\n' | sort -n | tail -1) bytes"
echo "tar | zstd -3 -T2: $(tar -C "$W/rootfs" -cf - . | zstd -q -3 -T2 | wc -c) bytes"
# Peak memory for a 1 GB layer.
mkdir -p "$W/big/data"
[ -f "$W/big/data/blob" ] || head -c 1073741824 /dev/urandom > "$W/big/data/blob"
printf 'name: big\nbase:\n  rootfs: ./big\n' > "$W/big.yaml"
for c in zstd gzip; do
  rm -rf "$W/cache-big" "$W/out-big"
  /usr/bin/time -f "peak RSS %M KB, %e s (1 GB layer, $c)" \
    "$G" build "$W/big.yaml" -o "$W/out-big" -q --cache "$W/cache-big" --compression $c
done
rm -rf "$W/cache-big" "$W/out-big"
