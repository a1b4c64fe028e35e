#!/usr/bin/env bash
# Run every test: installs the tools the tests need, then fmt, then the test suite, compiled
# once with clippy's lints denied (scripts/lint-rustc.sh: the lints `cargo clippy
# --all-targets -- -D warnings` checks, without a second compilation), and closes with one
# summary line ("N passed, M failed"). The compile's timings go to target/cargo-timings/
# (scripts/compile-floor.py reads them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --check
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/lint-rustc.sh" \
  cargo test --workspace --locked --no-fail-fast --timings --lib --bins --tests --examples -- --test-threads=2 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# The self-test crate also builds (and passes its tests) with Debian's rustc-web.
bash scripts/check-selftest-rustc-web.sh || rc=1
awk '/^test result:/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$rc"
