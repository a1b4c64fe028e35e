#!/usr/bin/env bash
# Size benchmark for stripping (not run in CI): profiles/pytorch-h200.yaml built twice by gpuimg
# (the profile's own `strip: [docs, man, locales]`, then every implemented class plus
# `unused-libraries`), side by side with the same torch installed by uv into a directory and
# packed as one gzip layer (`tar --sort=name | pigz -6`), in the same run; then the small
# profiles/cuda-runtime.yaml with every class. Prints the CPU model, each image's size,
# `gpuimg inspect --sizes` (bytes removed per class, duplicates stored once) and
# `gpuimg inspect --unused` of the unstripped image.
# Usage: bash scripts/bench-strip.sh   (results on stdout; needs the host's Python index)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
W=${BENCH_DIR:-/tmp/gpuimg-bench-strip}
mkdir -p "$W"
cargo build --release --locked --bins -q
G=$PWD/target/release/gpuimg
ALL="docs, man, locales, headers, static-libs, debug-symbols, build-files, python-caches, tests, type-stubs, other-gpu-backends, unused-libraries"
blob_bytes() { "$G" inspect "$1" --json | python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))'; }
for p in pytorch-h200 cuda-runtime; do
  sed "s/^strip: .*/strip: [$ALL]/" "profiles/$p.yaml" > "$W/$p-all.yaml"
  cp "profiles/$p.yaml" "$W/$p.yaml"
done
export SOURCE_DATE_EPOCH=0
for v in pytorch-h200 pytorch-h200-all cuda-runtime-all; do
  rm -rf "$W/out-$v"
  /usr/bin/time -f "$v: %e s, peak RSS %M KB" "$G" build "$W/$v.yaml" -o "$W/out-$v" -q --cache "$W/cache"
  echo "$v: $(blob_bytes "$W/out-$v") bytes of layers (gzip)"
done
"$G" inspect --unused "$W/out-pytorch-h200"
"$G" inspect --sizes "$W/out-pytorch-h200-all"
"$G" inspect --sizes "$W/out-cuda-runtime-all"
# The anchor: the same torch by uv into a directory, one layer.
if ! command -v uv >/dev/null; then
  python3 -m venv "$W/uv-venv" && "$W/uv-venv/bin/pip" install -q uv
  export PATH="$W/uv-venv/bin:$PATH"
fi
torch=$("$G" inspect --files --json "$W/out-pytorch-h200" | python3 -c 'import json, re, sys
print(next(m.group(1) for f in json.load(sys.stdin)["files"]
           for m in [re.search(r"/torch-([^/]+)\.dist-info$", f["path"])] if m))')
rm -rf "$W/uvt"
/usr/bin/time -f "uv install: %e s" uv pip install -q --target "$W/uvt" --python-platform x86_64-manylinux_2_36 \
  --python-version 3.11 "torch==$torch"
echo "uv target: $(du -sb "$W/uvt" | cut -f1) bytes on disk"
/usr/bin/time -f "tar | pigz -6: %e s" bash -c \
  "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C '$W/uvt' -cf - . | pigz -p 2 -6 > '$W/uvt.tar.gz'"
echo "uv anchor: $(stat -c %s "$W/uvt.tar.gz") bytes (one gzip layer, torch==$torch)"
