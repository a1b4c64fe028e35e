# Shared by the PyTorch-image benchmarks (scripts/bench-layer-reuse.sh, bench-torch-gzip.sh,
# scripts/bench-torch-zstd.sh); sourced, not run. Expects W (the work directory) and sets G.

# Print the CPU model; set G to $GPUIMG or a fresh release build; start W empty with the
# profile under test at $W/p.yaml.
torch_bench_setup() {
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
  G=${GPUIMG:-}
  if [ -z "$G" ]; then
    cargo build --release --locked --bins -q
    G=$PWD/target/release/gpuimg
  fi
  rm -rf "$W"
  mkdir -p "$W"
  cp profiles/pytorch-h200.yaml "$W/p.yaml"
}

# torch_build NAME EPOCH COMPRESSION: build into $W/out-NAME with the cache $W/cache, timed;
# the JSON goes to $W/NAME.json, and a line with the digest, layer count and size is printed.
torch_build() {
  rm -rf "$W/out-$1"
  sync
  /usr/bin/time -f "$1: %e s wall, %U s user, %S s sys, peak RSS %M KB" \
    env SOURCE_DATE_EPOCH="$2" "$G" build "$W/p.yaml" -o "$W/out-$1" --cache "$W/cache" \
    --compression "$3" --json -q > "$W/$1.json"
  python3 - "$W/$1.json" "$1" "$3" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
size = sum(l["size"] for l in j["layers"])
print(f"{sys.argv[2]}: {j['manifest_digest']} {len(j['layers'])} layers, {size:,} bytes ({sys.argv[3]})")
PY
}

# The torch version in the image at $1; uv on the PATH (installed into $W when missing).
torch_version() {
  "$G" inspect --files --json "$1" | python3 -c 'import json, re, sys
print(next(m.group(1) for f in json.load(sys.stdin)["files"]
           for m in [re.search(r"/torch-([^/]+)\.dist-info$", f["path"])] if m))'
}
ensure_uv() {
  if ! command -v uv >/dev/null; then
    python3 -m venv "$W/uv-venv" && "$W/uv-venv/bin/pip" install -q uv
    export PATH="$W/uv-venv/bin:$PATH"
  fi
}

# uv_target DIR VERSION: uv installs torch==VERSION for the image's platform into DIR.
uv_target() {
  uv pip install -q --target "$1" --python-platform x86_64-manylinux_2_36 --python-version 3.11 \
    "torch==$2"
}

# torch_cold_vs_anchor COMPRESSION PACKER: gpuimg cold (empty cache), then downloads cached and
# every layer written again (a new SOURCE_DATE_EPOCH), then issue 13's anchor in the same run:
# uv installing the same torch with an empty uv cache, then `tar --sort=name … | PACKER`.
torch_cold_vs_anchor() {
  torch_build cold 0 "$1"
  torch_build warm 1 "$1"
  local torch
  torch=$(torch_version "$W/out-cold")
  rm -rf "$W/out-cold" "$W/out-warm" "$W/cache"
  ensure_uv
  export UV_CACHE_DIR="$W/uv-cache"
  sync
  /usr/bin/time -f "anchor uv install (empty uv cache): %e s" bash -c \
    "$(declare -f uv_target); uv_target '$W/uvt' '$torch'"
  sync
  /usr/bin/time -f "anchor tar | $2: %e s" bash -c \
    "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C '$W/uvt' -cf - . | $2 > '$W/uvt.tar.packed'"
  echo "anchor: $(stat -c %s "$W/uvt.tar.packed") bytes (one $1 layer, torch==$torch)"
  rm -rf "$W/uvt" "$W/uv-cache"
}
