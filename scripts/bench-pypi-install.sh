#!/usr/bin/env bash
# Benchmark for Python packages: download + install of one wheel set into an image layer,
# gpuimg (`lock` + `build --locked`, a python-packages layer) against
# `uv pip install --target` + tar|gzip of the target, side by side in one run:
#   cold: empty caches (resolution, download, install, layer);
#   warm: populated caches, no network (`gpuimg --offline`, `uv --offline`), the layer made
#         again; gpuimg's install (unpack) and layer write (tar+gzip) reported apart.
# The set: SET (default "numpy pandas requests"), for CPython 3.11 / glibc 2.36 / x86_64
# (Debian bookworm's), from the index the host's configuration names (pip's default when
# none). uv comes from `pip install uv` into a venv here. Prints a markdown table for
# BENCHMARKS.md. RUNS (default 3) warm runs each; medians.
set -euo pipefail
cd "$(dirname "$0")/.."
SET=${SET:-numpy pandas requests}
RUNS=${RUNS:-3}
for tool in python3 tar gzip; do
  command -v "$tool" >/dev/null || { echo "error: \`$tool\` is not installed" >&2; exit 2; }
done
W=$(mktemp -d /tmp/bench-pypi.XXXXXX)
trap 'rm -rf "$W"' EXIT
cargo build --release --bin gpuimg >/dev/null 2>&1 || { echo "error: cargo build failed" >&2; exit 2; }
GPUIMG=$PWD/target/release/gpuimg

python3 -m venv "$W/venv" >/dev/null
"$W/venv/bin/pip" install --quiet uv
UV=$W/venv/bin/uv

# A root filesystem whose dpkg database names bookworm's Python: the image's interpreter
# comes from there (no apt download in the measurement).
mkdir -p "$W/ctx/rootfs/var/lib/dpkg"
cat >"$W/ctx/rootfs/var/lib/dpkg/status" <<'STATUS'
Package: libc6
Status: install ok installed
Version: 2.36-9+deb12u10

Package: python3
Status: install ok installed
Version: 3.11.2-1+b1

Package: python3.11
Status: install ok installed
Version: 3.11.2-6+deb12u6

Package: libpython3.11-stdlib
Status: install ok installed
Version: 3.11.2-6+deb12u6
STATUS
pkgs=$(printf '"%s", ' $SET); pkgs=${pkgs%, }
cat >"$W/ctx/p.yaml" <<YAML
name: bench-pypi
base:
  rootfs: ./rootfs
selftest: {enabled: false}
python:
  packages: [$pkgs]
YAML

now() { date +%s.%N; }
fmt() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
# Seconds of a progress line: `... in 1.53s ...`.
secs() { grep -m1 "$1" | sed -n 's/.* in \([0-9.]*\)s.*/\1/p'; }

# Cold: lock (resolve) + build (fetch, install, layer) from empty caches.
t0=$(now)
GPUIMG_CACHE=$W/g-cache "$GPUIMG" lock "$W/ctx/p.yaml" 2>"$W/g-lock.log"
GPUIMG_CACHE=$W/g-cache "$GPUIMG" build --locked "$W/ctx/p.yaml" -o "$W/g-out" 2>"$W/g-cold.log"
t1=$(now)
g_cold=$(fmt "$t0" "$t1")
g_wheels=$(grep -c '"kind": "wheel"' "$W/ctx/p.lock.json" || true)
g_layer=$(grep -m1 'python-packages ' "$W/g-cold.log" | sed -n 's/.*→ \([0-9.]* [kMG]*B\).*/\1/p')

t0=$(now)
UV_CACHE_DIR=$W/uv-cache "$UV" pip install --quiet --target "$W/uv-t0" \
  --python-platform x86_64-manylinux_2_36 --python-version 3.11 $SET
tar --sort=name --numeric-owner --mtime=@0 -C "$W/uv-t0" -c . | gzip -n -6 >"$W/uv-layer.tar.gz"
t1=$(now)
uv_cold=$(fmt "$t0" "$t1")
uv_dists=$(ls -d "$W/uv-t0"/*.dist-info | wc -l)
uv_layer=$(stat -c %s "$W/uv-layer.tar.gz")

# Warm: caches populated, the layer made again (its blob and record removed), offline.
: >"$W/g-warm" ; : >"$W/g-unpack" ; : >"$W/g-write" ; : >"$W/uv-warm" ; : >"$W/uv-install"
for i in $(seq "$RUNS"); do
  rm -rf "$W/g-cache/layers-v2" "$W/g-out-$i"
  t0=$(now)
  GPUIMG_CACHE=$W/g-cache "$GPUIMG" build --locked --offline "$W/ctx/p.yaml" -o "$W/g-out-$i" 2>"$W/g-warm.log"
  t1=$(now)
  fmt "$t0" "$t1" >>"$W/g-warm"; echo >>"$W/g-warm"
  secs 'unpack wheels' <"$W/g-warm.log" >>"$W/g-unpack"
  secs 'python-packages ' <"$W/g-warm.log" >>"$W/g-write"
  rm -rf "$W/uv-t$i"
  t0=$(now)
  UV_CACHE_DIR=$W/uv-cache "$UV" --offline pip install --quiet --target "$W/uv-t$i" \
    --python-platform x86_64-manylinux_2_36 --python-version 3.11 $SET
  t1=$(now)
  tar --sort=name --numeric-owner --mtime=@0 -C "$W/uv-t$i" -c . | gzip -n -6 >"$W/uv-layer.tar.gz"
  t2=$(now)
  fmt "$t0" "$t2" >>"$W/uv-warm"; echo >>"$W/uv-warm"
  fmt "$t0" "$t1" >>"$W/uv-install"; echo >>"$W/uv-install"
done
m() { grep -v '^$' "$1" | median; }

echo "Set: \`$SET\` ($g_wheels wheels locked; uv installed $uv_dists distributions), $($UV --version), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); warm: median of $RUNS."
echo
echo "| run | gpuimg | uv + tar\\|gzip |"
echo "|---|---|---|"
echo "| cold: resolve + download + install + gzip layer, s | $g_cold | $uv_cold |"
echo "| warm (offline): install + gzip layer, s | $(m "$W/g-warm") | $(m "$W/uv-warm") |"
echo "| warm: install (unpack) alone, s | $(m "$W/g-unpack") | $(m "$W/uv-install") |"
echo "| warm: layer write (tar + sha256 + gzip), s | $(m "$W/g-write") | |"
echo "| gzip'd layer | $g_layer | $uv_layer bytes |"
