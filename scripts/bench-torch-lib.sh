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

# torch_build NAME EPOCH COMPRESSION: build into $W/out-NAME with the cache $W/cache, timed
# (the times also go to $W/times); the JSON goes to $W/NAME.json, and a line with the digest,
# layer count and size is printed.
torch_build() {
  rm -rf "$W/out-$1"
  sync
  timed "$1" env SOURCE_DATE_EPOCH="$2" "$G" build "$W/p.yaml" -o "$W/out-$1" --cache "$W/cache" \
    --compression "$3" --json -q > "$W/$1.json"
  python3 - "$W/$1.json" "$1" "$3" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
size = sum(l["size"] for l in j["layers"])
print(f"{sys.argv[2]}: {j['manifest_digest']} {len(j['layers'])} layers, {size:,} bytes ({sys.argv[3]})")
PY
}

# timed NAME COMMAND...: run COMMAND, print its wall/user/sys time and peak RSS, and append
# them to $W/times (NAME wall user sys rss).
timed() {
  local name=$1
  shift
  /usr/bin/time -f "$name %e %U %S %M" -a -o "$W/times" "$@"
  tail -n 1 "$W/times" | awk '{printf "%s: %s s wall, %s s user, %s s sys, peak RSS %s KB\n", $1, $2, $3, $4, $5}' >&2
}

# Before a cold run: dirty pages written back and the page cache dropped (as root), so each
# cold run starts from the same memory state whatever ran before it.
settle() {
  sync
  if [ -w /proc/sys/vm/drop_caches ]; then
    echo 3 > /proc/sys/vm/drop_caches
  fi
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

# torch_cold_vs_anchor COMPRESSION PACKER: ROUNDS rounds (default 1), each: gpuimg cold
# (empty cache), then downloads cached and every layer written again (a new SOURCE_DATE_EPOCH),
# then the same build unchanged (every layer reused), then the binary $BASELINE the same three
# ways when it is set, then issue 13's anchor: uv installing the same
# torch with an empty uv cache, then `tar --sort=name … | PACKER`. Each cold run and the
# anchor's install start from a settled page cache. Ends with the medians and ratios.
torch_cold_vs_anchor() {
  local rounds=${ROUNDS:-1} r torch g
  echo "page cache: $([ -w /proc/sys/vm/drop_caches ] && echo dropped before each cold run || echo 'not dropped (not root)')"
  : > "$W/times"
  ensure_uv
  export UV_CACHE_DIR="$W/uv-cache"
  for r in $(seq "$rounds"); do
    echo "round $r"
    rm -rf "$W/cache"
    settle
    torch_build cold 0 "$1"
    torch_build warm "$r" "$1"
    torch_build unchanged "$r" "$1"
    torch=$(torch_version "$W/out-cold")
    rm -rf "$W/out-cold" "$W/out-warm" "$W/out-unchanged" "$W/cache"
    if [ -n "${BASELINE:-}" ]; then
      g=$G
      G=$BASELINE
      settle
      torch_build baseline-cold 0 "$1"
      torch_build baseline-warm "$r" "$1"
      torch_build baseline-unchanged "$r" "$1"
      G=$g
      rm -rf "$W/out-baseline-cold" "$W/out-baseline-warm" "$W/out-baseline-unchanged" "$W/cache"
    fi
    rm -rf "$W/uvt" "$W/uv-cache"
    settle
    timed anchor-install bash -c "$(declare -f uv_target); uv_target '$W/uvt' '$torch'"
    sync
    timed anchor-pack bash -c \
      "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C '$W/uvt' -cf - . | $2 > '$W/uvt.tar.packed'"
    echo "anchor: $(stat -c %s "$W/uvt.tar.packed") bytes (one $1 layer, torch==$torch)"
    rm -rf "$W/uvt" "$W/uv-cache" "$W/uvt.tar.packed"
  done
  python3 - "$W/times" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, wall, user, sys_, rss = line.split()
    runs.setdefault(name, []).append((float(wall), float(user), float(sys_), int(rss)))
anchor = [a[0] + p[0] for a, p in zip(runs["anchor-install"], runs["anchor-pack"])]
runs["anchor"] = [(a, 0, 0, 0) for a in anchor]
med = {k: statistics.median(w for w, *_ in v) for k, v in runs.items()}
print(f"medians over {len(anchor)} round(s) (wall seconds, each round's values in brackets):")
for k, v in runs.items():
    each = ", ".join(f"{w:.2f}" for w, *_ in v)
    cpu = ""
    if k not in ("anchor",):
        cpu = f"  user {statistics.median(u for _, u, _, _ in v):.1f} / sys {statistics.median(s for _, _, s, _ in v):.1f} s, peak {max(r for *_, r in v) // 1024} MB"
    print(f"  {k:15} {med[k]:8.2f}  [{each}]  {med[k] / med['anchor']:.3f}x anchor{cpu}")
# The overlap: how close a build's wall time comes to its CPU time spread over the CPUs.
import os
n = os.cpu_count() or 1
for k in ("cold", "baseline-cold"):
    if k in runs:
        floor = statistics.median((u + s_) / n for _, u, s_, _ in runs[k])
        print(f"  {k}: (user + sys) / {n} CPUs = {floor:.2f} s; wall {med[k]:.2f} s = {med[k] / floor:.3f}x that")
PY
}
