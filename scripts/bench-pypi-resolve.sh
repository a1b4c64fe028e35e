#!/usr/bin/env bash
# Python resolution benchmark, side by side with uv in one run: `torch` (newest) for the
# bookworm image (CPython 3.11, glibc 2.36, x86_64), warm (both caches populated, no network
# revalidation: gpuimg offline, `uv --offline`). gpuimg runs as the ignored test driver
# crates/pypi/tests/it/bench.rs (release build), uv as `uv pip compile --python-platform
# x86_64-manylinux_2_36 --python-version 3.11`, installed here with `pip install uv` into a
# venv. The index is this host's: `PIP_INDEX_URL` if set, else pip's own default (asked of
# `python3 -m pip`); TLS through the host's trust store. Also prints both pin sets' diff.
# Usage: scripts/bench-pypi-resolve.sh [runs] [requirement...]   (default: 15 torch)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-15}
shift || true
reqs=${*:-torch}
work=${GPUIMG_BENCH_WORK:-$(mktemp -d)}
mkdir -p "$work"

index=${PIP_INDEX_URL:-$(python3 -I -c 'from pip._internal.models.index import PyPI; print(PyPI.simple_url)')}

if [ ! -x "$work/venv/bin/uv" ]; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install --quiet uv
fi
uv="$work/venv/bin/uv"

cargo test --release -p gpuimg-pypi --test it --no-run --quiet 2>/dev/null
bin=$(cargo test --release -p gpuimg-pypi --test it --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)

printf '%s\n' $reqs > "$work/requirements.in"
export GPUIMG_BENCH_CACHE="$work/gpuimg-cache" GPUIMG_BENCH_INDEX="$index" GPUIMG_BENCH_REQS="$reqs"
export UV_CACHE_DIR="$work/uv-cache"
uvc=("$uv" pip compile --quiet --python-platform x86_64-manylinux_2_36 --python-version 3.11
     --index-url "$index" --no-header --no-annotate "$work/requirements.in")

# Populate both caches (online), then keep the pin sets.
"${uvc[@]}" > "$work/uv.txt"
"$bin" --ignored --exact bench::bench_resolve --nocapture > "$work/gpuimg.out"
grep '^PIN ' "$work/gpuimg.out" | awk '{print $2}' | sort > "$work/gpuimg.txt"
grep -v '^#' "$work/uv.txt" | sed 's/ *;.*//' | sort > "$work/uv.sorted"
echo "## pins: $(wc -l < "$work/gpuimg.txt") from gpuimg, $(wc -l < "$work/uv.sorted") from uv"
diff "$work/uv.sorted" "$work/gpuimg.txt" && echo "identical pin sets"

echo "## warm resolution of: $reqs ($(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs)"
GPUIMG_BENCH_OFFLINE=1 hyperfine --style basic --warmup 2 --runs "$runs" \
  --export-json "$work/hyperfine.json" \
  -n "gpuimg (offline)" "$bin --ignored --exact bench::bench_resolve --quiet" \
  -n "uv pip compile --offline" "${uvc[*]} --offline"
python3 - "$work/hyperfine.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    t = sorted(r["times"]); m = t[len(t) // 2]
    print(f"{r['command']:<28} median {m:.3f} s  (min {t[0]:.3f}, max {t[-1]:.3f})")
PY
