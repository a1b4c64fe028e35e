#!/usr/bin/env bash
# Benchmark (not run in CI): a framework bump at PyTorch scale. profiles/pytorch-h200.yaml with
# `stack.pytorch` pinned to 2.14.0, then to 2.14.1: the two releases pin the same CUDA, cuDNN,
# NCCL and triton wheels (cuda-toolkit 13.0.3, nvidia-cudnn-cu13 9.24.0.43, nvidia-nccl-cu13
# 2.30.7), so the bump must write the `framework` layer (and what gpuimg generates: the
# self-test's expectation, the SBOM, metadata) and take every other layer from the cache. Side by side in one run and one cache:
#   1. 2.14.0, empty cache (downloads, apt, every layer compressed)
#   2. 2.14.1: the bump (torch's new wheel downloaded, its layer written)
#   3. 2.14.1 unchanged
#   4. 2.14.1 with a new SOURCE_DATE_EPOCH: every layer written again (what the bump saves)
# Prints the CPU model, each run's time, the layers written vs taken from the cache, and fails
# when a layer other than framework/expect/sbom/metadata differs between 1 and 2.
# Usage: [GPUIMG=path/to/release/gpuimg] [BENCH_DIR=dir] bash scripts/bench-framework-bump.sh
set -euo pipefail
cd "$(dirname "$0")/.."
W=${BENCH_DIR:-/tmp/gpuimg-bench-bump}
. scripts/bench-torch-lib.sh
torch_bench_setup
cp "$W/p.yaml" "$W/pytorch-h200.yaml"
pin() { sed "s/^  pytorch: .*/  pytorch: \"$1\"/" "$W/pytorch-h200.yaml" > "$W/p.yaml"; }
pin 2.14.0
torch_build old 0 gzip
pin 2.14.1
torch_build bump 0 gzip
torch_build unchanged 0 gzip
torch_build all-again 1 gzip
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
old, bump = (json.load(open(f"{w}/{n}.json")) for n in ("old", "bump"))
by = lambda j: {l["component"]: l for l in j["layers"]}
a, b = by(old), by(bump)
print(f"{'layer':<16} {'2.14.0':>15} {'2.14.1':>15}  same")
changed = []
for c in b:
    same = c in a and a[c]["digest"] == b[c]["digest"]
    if not same:
        changed.append(c)
    print(f"{c:<16} {a.get(c, {}).get('size', 0):>15,} {b[c]['size']:>15,}  {'yes' if same else 'WRITTEN'}")
print(f"bump: {len(b)} layers, {bump['cached_layers']} from the cache, written: {', '.join(changed)}")
for n in ("unchanged", "all-again"):
    j = json.load(open(f"{w}/{n}.json"))
    print(f"{n}: {j['cached_layers']} of {len(j['layers'])} layers from the cache")
extra = [c for c in changed if c not in ("framework", "expect", "sbom", "metadata")]
if extra:
    sys.exit(f"layers other than framework/expect/sbom/metadata were written: {extra}")
PY
