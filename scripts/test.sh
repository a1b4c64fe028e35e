#!/usr/bin/env bash
# Run every test: fmt, then the test suite, compiled once with clippy's lints denied
# (scripts/lint-rustc.sh: the lints `cargo clippy --all-targets -- -D warnings` checks, without a
# second compilation), then the self-test crate built with Debian's rustc-web; closes with one
# summary line ("N passed, M failed"). The compile's timings go to target/cargo-timings/
# (scripts/compile-floor.py reads them).
#
# The compile needs none of the tools the tests use, so installing them (scripts/install-deps.sh,
# mostly waiting on the network and dpkg), the rustc-web check and the arm64 self-test's build
# (at the lowest CPU priority: they take what the compile leaves idle) run beside it; the suite starts once both are done.
# libtest takes tests in name order; the longest (a real PyTorch stack built three times: a third
# of the suite's CPU, and it needs none of the tools) would start last and run alone at the end,
# so it starts as soon as the compile is done, in a process of its own beside the suite, which
# skips it. `== <phase> at N s` lines on stderr say where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
phase() { echo "== ${1} at $((SECONDS - start)) s" >&2; }
command -v cc >/dev/null || bash scripts/install-deps.sh  # no C compiler: nothing can link yet
side=$(mktemp)
log=$(mktemp)
long_log=$(mktemp)
trap 'rm -f "$log" "$side" "$long_log"' EXIT
( bash scripts/install-deps.sh && nice -n 19 bash scripts/check-selftest-rustc-web.sh &&
  nice -n 19 bash scripts/build-selftest-arm64.sh ) >"$side" 2>&1 &
side_pid=$!
cargo fmt --check
export RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/lint-rustc.sh"
targets=(--workspace --locked --no-fail-fast --lib --bins --tests --examples)
set +e
cargo test "${targets[@]}" --timings --no-run 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
phase "compiled"
long=strip_classes::unused_libraries_of_the_real_pytorch_stack_are_what_inspect_previews
long_pid=
if [ "$rc" = 0 ]; then
  # The root package's `it` binary, as the compile above made it (the same selection: no rebuild).
  it=$(cargo test "${targets[@]}" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, os, sys
root = os.path.abspath("Cargo.toml")
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("manifest_path") == root \
            and m["target"]["name"] == "it" and m.get("executable"):
        print(m["executable"])')
  # It needs none of the tools: it starts before the side job is waited for.
  "$it" --exact "$long" >"$long_log" 2>&1 &
  long_pid=$!
fi
wait "$side_pid"
side_rc=$?
cat "$side"
phase "tools installed, rustc-web builds done"
if [ "$rc" = 0 ]; then
  cargo test "${targets[@]}" -- --test-threads=2 --exact --skip "$long" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  phase "suite done"
  wait "$long_pid" || rc=1
  phase "$long done"
  tee -a "$log" <"$long_log"
  grep -q "^test result: ok. 1 passed" "$long_log" || { echo "$long did not run and pass" >&2; rc=1; }
fi
set -e
[ "$side_rc" = 0 ] || { echo "tools or a rustc-web build failed (above)" >&2; rc=1; }
awk '/^test result:/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$rc"
