#!/usr/bin/env bash
# Benchmark (not run in CI), issue 38: the NVIDIA module of a node, per flavour, built by
# `gpuimg build` of a host profile (bookworm + bookworm-security, an H100, the flavour pinned),
# against the anchor of `dkms install` of the same source for the same kernel in an mmdebstrap
# chroot, in the same run:
# - gpuimg cold: an empty cache (downloads, build root, compile, layers);
# - gpuimg module-cold: downloads in the cache, the module's records removed (the compile again);
# - gpuimg cached: the same build again (the module from the cache);
# - reproducible: the module-cold and cached images have the same manifest digest, and the
#   module-cold build's modules equal the cold build's byte for byte (two cold compiles);
# - anchor: in a chroot mmdebstrap made with dkms, the kernel's headers and the source extracted
#   (`dpkg-deb -x`, so that no postinst compiles before the clock starts), the time of
#   `dkms install <name>/<version> -k <abi>` (compile, copy, depmod), both with the machine's
#   cores as jobs.
# The mirror is the build host's (its apt sources); contrib, non-free and non-free-firmware are
# named here. Prints the CPU model and, per flavour, the times; a flavour whose source does not
# compile against the kernel is reported as such for both tools.
# Needs root, mmdebstrap. Usage:
#   [GPUIMG=path/to/release/gpuimg] [BENCH_DIR=dir] bash scripts/bench-node-module.sh \
#       [FLAVOUR=KERNEL ...]   (default: proprietary=6.1 open=6.1)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${BENCH_DIR:-/var/tmp/gpuimg-bench-node}
G=${GPUIMG:-}
if [ -z "$G" ]; then
  cargo build --release --locked --bins -q
  G=$PWD/target/release/gpuimg
fi
command -v mmdebstrap > /dev/null || { echo "needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }
lscpu | grep -m1 'Model name'
echo "cores: $(nproc)"
rm -rf "$W"
mkdir -p "$W"
# The host's mirrors: the first `URIs:` (deb822) or `deb` line of each archive.
sources=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2> /dev/null || true)
mirror=$(printf '%s\n' "$sources" | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit} /^deb / && $2 !~ /security/ {print $2; exit}')
security=$(printf '%s\n' "$sources" | awk '/^URIs:/ && $2 ~ /security/ {print $2; exit} /^deb / && $2 ~ /security/ {print $2; exit}')
[ -n "$mirror" ] && [ -n "$security" ] || { echo "no bookworm and bookworm-security mirror in the host's apt sources" >&2; exit 2; }
COMPONENTS="main contrib non-free non-free-firmware"

secs() { # secs NAME CMD...: run, print its wall time, keep its output
  local name=$1; shift
  if /usr/bin/time -f %e -o "$W/$name.t" "$@" > "$W/$name.out" 2> "$W/$name.err"; then
    cat "$W/$name.t"
  else
    echo "failed: $(grep -m1 'error:' "$W/$name.err" || tail -1 "$W/$name.err")"
    return 1
  fi
}

bench() { # bench FLAVOUR KERNEL
  local flavour=$1 kernel=$2 d="$W/$1"
  mkdir -p "$d"
  export GPUIMG_CACHE="$d/cache"
  cat > "$d/node.yaml" <<EOF
kind: host
name: bench/node-$flavour
base:
  apt:
    mirror: host
    suite: bookworm
    components: [main, contrib, non-free, non-free-firmware]
    repositories:
      - {url: host, suite: bookworm-security, components: [main, contrib, non-free, non-free-firmware]}
host:
  gpus: [H100]
  kernel: "$kernel"
  kernel_module: $flavour
EOF
  "$G" resolve --json "$d/node.yaml" > "$d/resolve.json" || { echo "$flavour: no resolution"; cat "$d/resolve.json"; return 0; }
  local abi source version driver
  abi=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["kernel_abi"])' < "$d/resolve.json")
  source=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["source"])' < "$d/resolve.json")
  version=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["source_version"])' < "$d/resolve.json")
  driver=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["driver"])' < "$d/resolve.json")
  echo "== $flavour: $source $version (driver $driver) for $abi"
  echo "gpuimg cold:         $(secs "$flavour-cold" "$G" build "$d/node.yaml" -o "oci:$d/cold" || true) s"
  if [ -f "$d/cold/index.json" ]; then
    rm -rf "$GPUIMG_CACHE/copies-v1"
    echo "gpuimg module-cold:  $(secs "$flavour-module-cold" "$G" build "$d/node.yaml" -o "oci:$d/module-cold") s"
    echo "gpuimg cached:       $(secs "$flavour-cached" "$G" build "$d/node.yaml" -o "oci:$d/cached") s"
    grep -q "from the cache" "$W/$flavour-cached.err" && echo "  (the cached build took the module from the cache)"
    local a b
    a=$(skopeo inspect --raw "oci:$d/module-cold:latest" | sha256sum | cut -c1-16)
    b=$(skopeo inspect --raw "oci:$d/cached:latest" | sha256sum | cut -c1-16)
    local c
    c=$(skopeo inspect --raw "oci:$d/cold:latest" | sha256sum | cut -c1-16)
    echo "  manifests: cold $c, module-cold $a, cached $b $([ "$a" = "$b" ] && [ "$a" = "$c" ] && echo '(all equal: two cold compiles gave the same bytes)' || echo '(DIFFER)')"
  else
    grep -m3 ' error: ' "$W/$flavour-cold.err" | sed 's/^/  | /' || tail -5 "$W/$flavour-cold.err" | sed 's/^/  | /'
  fi
  # The anchor: dkms in an mmdebstrap chroot.
  local name
  case $flavour in
    open) name=nvidia-current-open ;;
    *) name=nvidia-current ;;
  esac
  cat > "$d/hook.sh" <<EOF
set -e
root=\$1
chroot "\$root" sh -c 'cd /tmp && apt-get download -q $source=$version && dpkg-deb -x /tmp/${source}_*.deb /' > /dev/null
chroot "\$root" dkms add -m $name -v $driver > /dev/null
if /usr/bin/time -f %e -o /tmp/dkms.t chroot "\$root" dkms install -m $name -v $driver -k $abi > "$d/dkms.log" 2>&1; then
  echo "dkms install:        \$(cat /tmp/dkms.t) s" > "$d/anchor.txt"
else
  echo "dkms install:        failed (\$(cat /tmp/dkms.t) s): \$(grep -m1 'error:' "\$root/var/lib/dkms/$name/$driver/build/make.log" || tail -1 "$d/dkms.log")" > "$d/anchor.txt"
fi
EOF
  local mm_start mm_end
  mm_start=$(date +%s)
  mmdebstrap --quiet --mode=root --format=directory --variant=apt --components="${COMPONENTS// /,}" \
    --include="dkms,make,gcc,linux-headers-$abi" \
    --customize-hook="bash $d/hook.sh \"\$1\"" \
    bookworm "$d/chroot" \
    "deb $mirror bookworm $COMPONENTS" \
    "deb $security bookworm-security $COMPONENTS" 2> "$d/mmdebstrap.err" ||
    { echo "mmdebstrap failed:"; tail -5 "$d/mmdebstrap.err"; }
  mm_end=$(date +%s)
  cat "$d/anchor.txt" 2> /dev/null || echo "dkms install:        not run"
  echo "  (the chroot and the anchor took $((mm_end - mm_start)) s in all)"
  rm -rf "$d/chroot" "$d/cold" "$d/module-cold" "$d/cached"
}

if [ $# -eq 0 ]; then
  set -- proprietary=6.1 open=6.1
fi
for arg in "$@"; do
  bench "${arg%%=*}" "${arg#*=}"
done
