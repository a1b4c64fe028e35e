#!/usr/bin/env bash
# Build the self-test crate (gpuimg-selftest, with the crates it uses) with Debian's
# rustc-web, the compiler the arm64 images' self-test is built with: the crate must stay within
# what that compiler and Cargo accept. Installs Debian's `rustc-web` and `cargo-web` (bookworm's
# security suite: rustc and cargo 1.96, at /usr/bin) when missing, and builds in a target
# directory of its own, so it never mixes with the workspace's rustup-built artifacts.
# Usage: [FULL=1] scripts/check-selftest-rustc-web.sh   (env TARGET_DIR overrides target/rustc-web)
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for p in rustc-web cargo-web; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# rustc-web and cargo-web install their compiler and Cargo as /usr/bin/rustc and /usr/bin/cargo;
# a rustup earlier in PATH would shadow them, so name them by path.
cargo=/usr/bin/cargo
# Only this compiler: nothing of a caller's toolchain (wrappers, flags).
unset RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER RUSTFLAGS CARGO_ENCODED_RUSTFLAGS \
  CARGO_BUILD_RUSTFLAGS CARGO_BUILD_TARGET CARGO_BUILD_RUSTC CARGO_BUILD_RUSTC_WRAPPER \
  RUSTUP_TOOLCHAIN CARGO
export RUSTC=/usr/bin/rustc
export RUSTDOC=/usr/bin/rustdoc
"$RUSTC" --version
"$cargo" --version
target=${TARGET_DIR:-target/rustc-web}
# The dependencies come from Cargo's cache when the workspace has been built; else fetched.
offline=(--offline)
"$cargo" fetch --locked --offline >/dev/null 2>&1 || offline=()
# The self-test binary as images carry it (its own profile). Its tests run in the workspace's
# suite; here it is the compiler that is checked. `FULL=1` also runs the three crates' tests.
CARGO_TARGET_DIR=$target "$cargo" build --locked "${offline[@]}" -p gpuimg-selftest --profile selftest
ls -l "$target/selftest/gpuimg-selftest"
if [ "${FULL:-0}" = 1 ]; then
  CARGO_TARGET_DIR=$target "$cargo" test --locked "${offline[@]}" -p gpuimg-selftest -p gpuimg-entry -p gpuimg-expect
fi
