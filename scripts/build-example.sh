#!/usr/bin/env bash
# The main job: build the example image in profiles/ and show it. Installs nothing: building an
# image needs only gpuimg (no daemon, no image tools; those are the tests', scripts/test.sh).
# gpuimg is built with the release profile, the self-test it bakes in with its own profile
# (`selftest`: full LTO, small), and passed to the build by path.
set -euo pipefail
cd "$(dirname "$0")/.."
# The two compiles run side by side (the self-test's in a target directory of its own, since
# Cargo locks one per build): it takes the CPU the builder's compile leaves idle while rustc
# reads the root crate on one thread.
CARGO_TARGET_DIR=target/selftest-build \
  cargo build --profile selftest --locked -p gpuimg-selftest --bin gpuimg-selftest &
selftest=$!
cargo build --release --locked -p gpuimg --bin gpuimg
wait "$selftest"
./target/release/gpuimg build profiles/example.yaml -o out/example \
  --selftest-binary target/selftest-build/selftest/gpuimg-selftest
./target/release/gpuimg inspect out/example
