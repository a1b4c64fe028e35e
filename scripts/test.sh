#!/usr/bin/env bash
# Run every test: installs the tools the tests need, then fmt, clippy and the test suite, and
# closes with one summary line ("N passed, M failed").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --locked --no-fail-fast --lib --bins --tests -- --test-threads=2 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$rc"
