#!/usr/bin/env bash
# Benchmark (not run in CI): profiles/pytorch-h200.yaml with gzip layers against issue 13's gzip
# anchor, side by side in one run: gpuimg cold (empty cache: downloads, apt, unzip, every layer
# compressed), then downloads cached and every layer written again (a new SOURCE_DATE_EPOCH,
# the gzip blocks of the cold build found again); the anchor: uv installing the same torch with
# an empty uv cache (`uv pip install --target … --python-platform x86_64-manylinux_2_36
# --python-version 3.11 torch==V`), then `tar --sort=name … | gzip -6`. Prints the CPU model,
# times, peak RSS and sizes.
# Usage: [ROUNDS=n] [BASELINE=path/to/another/gpuimg] [GPUIMG=path/to/release/gpuimg] [BENCH_DIR=dir] bash scripts/bench-torch-gzip.sh
# ROUNDS repeats cold, warm (and BASELINE's cold) and the anchor, then prints the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${BENCH_DIR:-/tmp/gpuimg-bench-gzip}
. scripts/bench-torch-lib.sh
torch_bench_setup
torch_cold_vs_anchor gzip "gzip -6"
