#!/usr/bin/env bash
# The main job: build the example image in profiles/ and show it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --locked --bins
./target/release/gpuimg build profiles/example.yaml -o out/example
./target/release/gpuimg inspect out/example
