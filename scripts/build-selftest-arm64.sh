#!/usr/bin/env bash
# Build the arm64 (aarch64, glibc) self-test from this repository's sources, on an amd64 build
# host, with Debian's compiler: `rustc-web`, `cargo-web` and `libstd-rust-web-dev` for amd64 and
# arm64 at exactly equal versions, with the LLVM library they use, fetched with `apt-get
# download` from the host's own apt sources into a cache directory and unpacked there with
# `dpkg -x`. Nothing is registered with dpkg and the host's architectures are not changed: apt
# reads its indexes for amd64 and arm64 into the cache directory, not the host's state. The
# linker is `zig cc` (aarch64 glibc 2.17 target) from the `ziglang` wheel of the host's Python
# index, unpacked into the same cache; no cross gcc is installed. The self-test stays a
# glibc-dynamic binary (it `dlopen`s libcuda), built with `[profile.selftest]`.
#
# Usage: scripts/build-selftest-arm64.sh [OUT]   (default target/arm64/gpuimg-selftest)
# Env: GPUIMG_ARM64_TOOLCHAIN (the cache directory; default target/arm64-toolchain), TARGET_DIR
# (Cargo's; default target/rustc-web, shared with scripts/check-selftest-rustc-web.sh).
# The binary is what `selftest.binary` names for a `linux/arm64` platform.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/arm64/gpuimg-selftest}
cache=${GPUIMG_ARM64_TOOLCHAIN:-target/arm64-toolchain}
mkdir -p "$cache/zig"
cache=$(cd "$cache" && pwd)

# A toolchain unpacked before is used as it is (delete the cache to take a newer rustc-web):
# apt and the network are needed only the first time.
root=$(ls -d "$cache"/root-* 2>/dev/null | grep -v '\.tmp$' | sort -V | tail -1 || true)
if [ -z "$root" ]; then
  . scripts/private-apt.sh
  private_apt "$cache" amd64 arm64
  apt-get "${apt_opts[@]}" -qq update
  v=$(apt-cache "${apt_opts[@]}" policy rustc-web | awk '/Candidate:/ { print $2 }')
  [ -n "$v" ] && [ "$v" != "(none)" ] || {
    echo "error: the host's apt sources offer no rustc-web (Debian bookworm-security has it): add that suite" >&2
    exit 2
  }
  std_runtime=$(apt-cache "${apt_opts[@]}" depends "libstd-rust-web-dev=$v" | awk '/Depends: libstd-rust-web-/ { print $2; exit }')
  llvm=$(apt-cache "${apt_opts[@]}" depends "$std_runtime=$v" | awk '/Depends: libllvm/ { print $2; exit }')
  [ -n "$std_runtime" ] && [ -n "$llvm" ] || { echo "error: cannot tell which libraries rustc-web $v uses" >&2; exit 1; }
  pkgs=(
    "rustc-web:amd64=$v" "cargo-web:amd64=$v" "libstd-rust-web-dev:amd64=$v" "$std_runtime:amd64=$v"
    "libstd-rust-web-dev:arm64=$v" "$std_runtime:arm64=$v" "$llvm:amd64"
  )
  (cd "$cache/debs" && apt-get "${apt_opts[@]}" -qq download "${pkgs[@]}")
  root="$cache/root-$v"
  rm -rf "$root.tmp"
  mkdir -p "$root.tmp"
  for p in "${pkgs[@]}"; do
    name=${p%%:*}
    arch=${p#*:}
    arch=${arch%%=*}
    dpkg -x "$(ls "$cache/debs/${name}_"*"_${arch}.deb" | sort | tail -1)" "$root.tmp"
  done
  mv "$root.tmp" "$root"
fi

# zig from its wheel: a self-contained compiler driver that links against glibc 2.17 stubs.
# Pinned by hash: it is code from the index that this script runs.
zig_pin="ziglang==0.17.1 --hash=sha256:ea6cc5d87b033cf0aedfbc8f9549a908cae6c50ac31f1698188fa48a74524b54"
zig="$cache/zig/ziglang"
if [ ! -x "$zig/zig" ]; then
  echo "$zig_pin" >"$cache/zig/requirements.txt"
  python3 -m pip download -q --no-deps --only-binary :all: --require-hashes \
    -d "$cache/zig/wheel" -r "$cache/zig/requirements.txt"
  python3 -m zipfile -e "$(ls "$cache"/zig/wheel/ziglang-0.17.1-*.whl)" "$cache/zig"
  chmod +x "$zig/zig"
fi
linker="$cache/zig-cc-aarch64"
cat >"$linker" <<EOF
#!/bin/sh
exec "$zig/zig" cc -target aarch64-linux-gnu.2.17 "\$@"
EOF
chmod +x "$linker"

# Only this compiler: nothing of a caller's toolchain (a test run under rustup's Cargo passes
# its wrappers, flags and library path down).
unset RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER RUSTFLAGS CARGO_ENCODED_RUSTFLAGS \
  CARGO_BUILD_RUSTFLAGS CARGO_BUILD_TARGET CARGO_BUILD_RUSTC CARGO_BUILD_RUSTC_WRAPPER \
  RUSTUP_TOOLCHAIN CARGO
lib="$root/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$lib"
export RUSTC="$root/usr/bin/rustc"
export RUSTDOC="$root/usr/bin/rustdoc"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="$linker"
export ZIG_GLOBAL_CACHE_DIR="$cache/zig/cache" ZIG_LOCAL_CACHE_DIR="$cache/zig/cache"
"$RUSTC" --version
offline=(--offline)
"$root/usr/bin/cargo" fetch --locked --offline >/dev/null 2>&1 || offline=()
# The target directory of scripts/check-selftest-rustc-web.sh: the same compiler version reuses
# its host-side builds (the proc macros).
target=${TARGET_DIR:-target/rustc-web}
CARGO_TARGET_DIR=$target "$root/usr/bin/cargo" build --locked "${offline[@]}" \
  -p gpuimg-selftest --bin gpuimg-selftest --profile selftest --target aarch64-unknown-linux-gnu
mkdir -p "$(dirname "$out")"
cp "$target/aarch64-unknown-linux-gnu/selftest/gpuimg-selftest" "$out"
echo "$out"
