#!/usr/bin/env bash
# Benchmark (not run in CI): a cold `gpuimg build --locked` of a set of small wheels, where the
# time is the index lookups (each locked wheel's URL from its project page) and the downloads,
# not the layer. Compares two gpuimg binaries side by side in one run, alternating, RUNS
# rounds each (default 5), each build with an empty cache; prints the CPU model, every time
# and the medians.
# Usage: GPUIMG_A=old/gpuimg GPUIMG_B=new/gpuimg [SET="..."] [RUNS=5] bash scripts/bench-wheel-lookups.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GPUIMG_A:?set GPUIMG_A and GPUIMG_B to the two binaries}" "${GPUIMG_B:?}"
SET=${SET:-requests flask jinja2 click itsdangerous werkzeug markupsafe blinker certifi idna urllib3 charset-normalizer six python-dateutil pytz attrs packaging pyyaml tomli typing-extensions}
RUNS=${RUNS:-5}
W=$(mktemp -d /tmp/bench-lookups.XXXXXX)
trap 'rm -rf "$W"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
# A root filesystem whose dpkg database names bookworm's Python (no apt in the measurement).
mkdir -p "$W/ctx/rootfs/var/lib/dpkg"
printf 'Package: libc6\nStatus: install ok installed\nVersion: 2.36-9+deb12u10\n\nPackage: python3\nStatus: install ok installed\nVersion: 3.11.2-1+b1\n\nPackage: python3.11\nStatus: install ok installed\nVersion: 3.11.2-6+deb12u6\n\nPackage: libpython3.11-stdlib\nStatus: install ok installed\nVersion: 3.11.2-6+deb12u6\n' \
  >"$W/ctx/rootfs/var/lib/dpkg/status"
pkgs=$(printf '"%s", ' $SET)
printf 'name: bench-lookups\nbase:\n  rootfs: ./rootfs\nselftest: {enabled: false}\npython:\n  packages: [%s]\n' \
  "${pkgs%, }" >"$W/ctx/p.yaml"
GPUIMG_CACHE=$W/lock-cache "$GPUIMG_B" lock "$W/ctx/p.yaml" 2>/dev/null
echo "wheels locked: $(grep -c '"kind": "wheel"' "$W/ctx/p.lock.json")"
for i in $(seq "$RUNS"); do
  for ab in A B; do
    bin=GPUIMG_$ab
    rm -rf "$W/cache" "$W/out"
    s=$(date +%s.%N)
    GPUIMG_CACHE=$W/cache "${!bin}" build --locked -q "$W/ctx/p.yaml" -o "$W/out"
    e=$(date +%s.%N)
    awk -v a="$s" -v b="$e" 'BEGIN{printf "%.3f\n", b-a}' >>"$W/$ab"
  done
done
for ab in A B; do
  echo "$ab: $(tr '\n' ' ' <"$W/$ab")median $(sort -n "$W/$ab" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}') s"
done
