#!/usr/bin/env bash
# Benchmark for component layers, side by side in one run: an apt image (Debian
# bookworm + python3 from the host's apt sources) built
#   - warm: downloads cached, no layer cached (unpack and compress everything);
#   - after adding xz-utils to a profile whose other layers are cached;
#   - unchanged (nothing to do), and the same for a rootfs tarball of the same packages;
# and the total compressed size of the split image against the same packages in one package
# layer (`layers:` putting every package into one component; `metadata` stays apart).
# Medians of N runs (hyperfine); prints the CPU model. Every prepare step ends with `sync`,
# so the deletions it makes (slow on a disk mounted with `discard`) are not timed as the run.
# Usage: bash scripts/bench-apt-layers.sh [RUNS]   (root; uses the host's apt sources)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
bash scripts/install-deps.sh
cargo build --release --locked --bins -q
G=$PWD/target/release/gpuimg
W=${BENCH_DIR:-/tmp/gpuimg-bench-layers}
rm -rf "$W"; mkdir -p "$W"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
PKGS="base-files, base-passwd, libc6, python3-minimal, ca-certificates"
profile() { # name packages [extra]
  printf 'name: %s\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [%s]\nselftest: {enabled: false}\n%s' \
    "$1" "$2" "${3:-}" > "$W/$1.yaml"
}
profile a "$PKGS"
profile b "$PKGS, xz-utils"
export SOURCE_DATE_EPOCH=0
"$G" build "$W/a.yaml" -o "$W/out-a" -q --cache "$W/cache"   # downloads once
# A rootfs tarball of the same packages (a's image unpacked), for the rootfs unchanged rebuild.
umoci unpack --rootless --image "$W/out-a:latest" "$W/bundle" >/dev/null
tar -C "$W/bundle/rootfs" -cf "$W/rootfs.tar" .
printf 'name: r\nbase:\n  rootfs: ./rootfs.tar\nselftest: {enabled: false}\n' > "$W/r.yaml"
"$G" build "$W/r.yaml" -o "$W/out-r" -q --cache "$W/cache"
# The xz run's cache: every download (b's 26 packages), a's layers, resolution, control
# fields and package sketches, and nothing of b's layers, resolution or xz-utils' sketch.
# Each run starts from exactly these files: the prepare step deletes what the previous run
# added and touches nothing else (a copy would change every file's identity, so the next
# build would re-verify all of it).
X="$W/cache-x"
"$G" build "$W/b.yaml" -o "$W/out-b" -q --cache "$X"
for b in layers-v2 blobs-v1 listings-v1 resolutions-v1 controls-v1 sketches-v1; do
  rm -rf "$X/$b" "$X/trust-v2/$b"
done
"$G" build "$W/a.yaml" -o "$W/out-ax" -q --cache "$X"
(cd "$X" && find . -type f | sort) > "$W/keep.txt"
echo "cd '$X' && find . -type f | sort | comm -13 '$W/keep.txt' - | xargs -r rm -f" > "$W/reset-x.sh"
layers="layers-v2 blobs-v1 listings-v1 trust-v2"
hyperfine --style basic --warmup 1 --runs "$RUNS" --export-json "$W/layers.json" \
  -n "warm build (downloads cached, no layers)" \
  --prepare "cd $W/cache && rm -rf $layers $W/out-a && sync" \
  "$G build $W/a.yaml -o $W/out-a -q --cache $W/cache" \
  -n "warm build, taking every package's sketch" \
  --prepare "cd $W/cache && rm -rf $layers sketches-v1 $W/out-a && sync" \
  "$G build $W/a.yaml -o $W/out-a -q --cache $W/cache" \
  -n "add xz-utils (other layers cached)" \
  --prepare "bash $W/reset-x.sh && sync" \
  "$G build $W/b.yaml -o $W/out-b -q --cache $X" \
  -n "unchanged rebuild (apt)" --prepare "sync" \
  "$G build $W/a.yaml -o $W/out-a -q --cache $W/cache" \
  -n "unchanged rebuild (rootfs tarball)" --prepare "sync" \
  "$G build $W/r.yaml -o $W/out-r -q --cache $W/cache"
python3 - "$W/layers.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
warm = r[0]["median"]
for x in r:
    print(f'{x["command"]:48} median {x["median"]:.3f} s  ({x["median"] / warm * 100:.1f} % of warm)')
PY
# Split vs one package layer: the same packages, compressed sizes summed over all layers.
GPUIMG_CACHE="$W/cache" "$G" lock "$W/a.yaml" -q
all=$(python3 -c "import json; l=json.load(open('$W/a.lock.json')); print(', '.join(a['name'] for a in l['artifacts']))")
profile one "$PKGS" "layers:
  all:
    deb: [$all]
"
for p in a one; do
  "$G" build "$W/$p.yaml" -o "$W/size-$p" --cache "$W/cache" --json -q > "$W/$p.json"
done
python3 - "$W/a.json" "$W/one.json" <<'PY'
import json, sys
split, one = (json.load(open(p)) for p in sys.argv[1:])
s = sum(l["size"] for l in split["layers"]); o = sum(l["size"] for l in one["layers"])
print("split:", ", ".join(f'{l["component"]} {l["size"]/1e6:.2f} MB' for l in split["layers"]))
print(f"split total {s/1e6:.3f} MB, one package layer {o/1e6:.3f} MB: {(s/o - 1) * 100:+.2f} %")
PY
