#!/usr/bin/env bash
# Run every test: installs the tools the tests need, then fmt, clippy and the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
cargo build --locked --bins
cargo test --locked --no-fail-fast -- --test-threads=2
