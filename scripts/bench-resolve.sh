#!/usr/bin/env bash
# Resolver benchmark: every example profile (whole process, median of N runs) and the
# full matrix (every catalog GPU x every PyTorch release x every Python version, all answers).
# Usage: scripts/bench-resolve.sh [runs]   (builds the release binary first; prints the CPU model)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
runs=${1:-15}
cargo build --release --quiet --bin gpuimg
bin=target/release/gpuimg
export XDG_CONFIG_HOME=$(mktemp -d)   # no user overlays

ms() { echo $(( ($2 - $1) / 1000 )); }   # ns -> us
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "## examples (whole process: start, load catalog, parse profile, resolve, print; median of $runs)"
for p in tests/resolve_examples/*.yaml; do
  times=()
  for _ in $(seq "$runs"); do
    t0=$(date +%s%N); "$bin" resolve "$p" --json >/dev/null || true; t1=$(date +%s%N)
    times+=("$(ms "$t0" "$t1")")
  done
  rc=0; "$bin" resolve "$p" --json >/dev/null || rc=$?
  med=$(printf '%s\n' "${times[@]}" | median)
  printf '%-40s exit %d  %6.2f ms\n' "$p" "$rc" "$(echo "$med / 1000" | bc -l)"
done

for flags in "" "--hints"; do
  echo "## matrix ${flags:-(answers and explanations)} (one process; median of 5)"
  times=()
  for _ in 1 2 3 4 5; do
    t0=$(date +%s%N); "$bin" catalog matrix $flags >/dev/null 2>/tmp/bench-matrix.err; t1=$(date +%s%N)
    times+=("$(ms "$t0" "$t1")")
  done
  med=$(printf '%s\n' "${times[@]}" | median)
  printf '%s in %.1f ms\n' "$(cat /tmp/bench-matrix.err)" "$(echo "$med / 1000" | bc -l)"
done
