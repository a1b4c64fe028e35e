#!/usr/bin/env bash
# RUSTC_WORKSPACE_WRAPPER of scripts/test.sh: the workspace's own crates are compiled by
# clippy-driver with warnings denied, so one compilation both lints them (what `cargo clippy
# -- -D warnings` checks) and builds the test binaries; dependencies are compiled by rustc as
# usual. Cargo calls it as `lint-rustc.sh RUSTC ARGS...`.
set -euo pipefail
driver="$(rustc --print sysroot)/bin/clippy-driver"
[ -x "$driver" ] || { echo "lint-rustc.sh: no clippy-driver at $driver (rustup component add clippy)" >&2; exit 2; }
case " $* " in
  *" --crate-name "*) exec "$driver" "$@" -D warnings ;;
  *) exec "$driver" "$@" ;;
esac
