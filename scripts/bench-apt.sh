#!/usr/bin/env bash
# Benchmark for the apt client: gpuimg's native apt client vs `mmdebstrap --variant=essential` +
# `umoci insert`, same package set (Essential: yes of bookworm), same host mirror.
# Prints a markdown table for BENCHMARKS.md. Needs root, mmdebstrap, umoci (Debian packages).
# Mirror: the host's own apt sources (nothing here names a public mirror).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
for tool in mmdebstrap umoci tar gzip dpkg-query; do
  command -v "$tool" >/dev/null || { echo "error: \`$tool\` is not installed (apt-get install $tool)" >&2; exit 2; }
done
SOURCES=${SOURCES:-/etc/apt/sources.list.d/debian.sources}
[ -f "$SOURCES" ] || SOURCES=/etc/apt/sources.list
W=$(mktemp -d /tmp/bench-apt.XXXXXX)
trap 'rm -rf "$W"' EXIT

# The driver is a test of the root package's one test binary (tests/it/apt_bench.rs).
bin=$(cargo test --release -p gpuimg --test it --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*\/it-[^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "error: could not build the benchmark driver" >&2; exit 2; }

now() { date +%s.%N; }
run_ours() { # $1 = dest
  GPUIMG_BENCH_CACHE="$W/cache" GPUIMG_BENCH_DEST="$1" "$bin" --ignored --nocapture --test-threads 1 \
    --exact apt_bench::bench_essential_install >"$1.log" 2>&1 || { cat "$1.log" >&2; exit 1; }
}
size_gz() { tar --sort=name --numeric-owner --mtime=@0 -C "$1" -c . | gzip -n -6 | wc -c; }

t0=$(now); run_ours "$W/cold"; t1=$(now)
run_ours "$W/warm"; t2=$(now)
run_ours "$W/warm2"; t3=$(now)
ours_pkgs=$(grep -c '^PKG ' "$W/warm.log")
ours_size=$(size_gz "$W/warm")

t4=$(now)
mmdebstrap --quiet --variant=essential --format=directory bookworm "$W/mm" "$SOURCES"
umoci init --layout "$W/oci" >/dev/null
umoci new --image "$W/oci:bench" >/dev/null
umoci insert --image "$W/oci:bench" "$W/mm" / >/dev/null
t5=$(now)
mm_pkgs=$(dpkg-query --admindir="$W/mm/var/lib/dpkg" -W -f '${Package}\n' | wc -l)
mm_layer=$(find "$W/oci/blobs/sha256" -type f -size +1M -printf '%s\n' | sort -n | tail -1)

diff <(grep '^PKG ' "$W/warm.log" | awk '{print $2}' | sort) \
     <(dpkg-query --admindir="$W/mm/var/lib/dpkg" -W -f '${Package}\n' | sort) >"$W/setdiff" || true

fmt() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
echo "| run | packages | wall s | gzip'd rootfs layer bytes |"
echo "|---|---|---|---|"
echo "| gpuimg apt, cold cache (resolve+fetch+unpack) | $ours_pkgs | $(fmt "$t0" "$t1") | $ours_size |"
echo "| gpuimg apt, warm cache | $ours_pkgs | $(fmt "$t1" "$t2") | |"
echo "| gpuimg apt, warm cache (again) | $ours_pkgs | $(fmt "$t2" "$t3") | |"
echo "| mmdebstrap --variant=essential + umoci insert | $mm_pkgs | $(fmt "$t4" "$t5") | $mm_layer |"
echo
echo "Package-set difference (< gpuimg only, > mmdebstrap only):"
echo '```'
cat "$W/setdiff"
echo '```'
grep -ho 'BENCH.*' "$W/cold.log" "$W/warm.log" | sed 's/^/    /'
