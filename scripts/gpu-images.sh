#!/usr/bin/env bash
# On the GPU host: run the entrypoint of each image gpuimg built (prepared by gpu-prepare.sh)
# the way the container toolkit would: the image's root filesystem unpacked, the host's driver
# libraries and /dev/nvidia* bound in, /proc and /sys mounted, the image's Env as environment.
# Checks the exit code and output each image must give on this host. Results under $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
IMAGES=${IMAGES:-$here/../images}
OUT=${OUT:-$PWD/gpu-images-out}; mkdir -p "$OUT"
log=$OUT/images.txt; : > "$log"
failures=0
say() { echo "$*" | tee -a "$log"; }
libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 / {print $NF; exit}')
libdir=$(dirname "$(readlink -f "$libcuda")")
drvlibs=$(ls "$libdir"/libcuda.so.* "$libdir"/libnvidia-ml.so.* "$libdir"/libnvidia-ptxjitcompiler.so.* \
             "$libdir"/libnvidia-gpucomp.so.* "$libdir"/libnvidia-nvvm.so.* 2>/dev/null)
for img in "$IMAGES"/*/; do
  name=$(basename "$img")
  root=$(mktemp -d "/tmp/gpuimg-image-$name.XXXX")
  tar -C "$root" -xzf "$img/rootfs.tar.gz"
  dst=/usr/lib/x86_64-linux-gnu
  mkdir -p "$root$dst" "$root/dev" "$root/proc" "$root/sys" "$root/tmp"
  for lib in $drvlibs; do
    base=$(basename "$lib")
    if [ -L "$lib" ]; then ln -sf "$(readlink "$lib")" "$root$dst/$base"
    else touch "$root$dst/$base"; mount --bind "$lib" "$root$dst/$base"; fi
  done
  ldconfig -r "$root" 2>/dev/null || true   # the toolkit's update-ldcache hook
  for d in /dev/nvidia*; do
    if [ -c "$d" ]; then touch "$root$d"; mount --bind "$d" "$root$d";
    elif [ -d "$d" ]; then mkdir -p "$root$d"; mount --rbind "$d" "$root$d"; fi
  done
  mount -t proc proc "$root/proc"; mount --rbind /sys "$root/sys"
  mapfile -t argv < "$img/argv"; mapfile -t envv < "$img/env"
  want=$(sed -n 1p "$img/expect"); text=$(sed -n 2p "$img/expect")
  t0=$(date +%s.%N)
  env -i "${envv[@]}" chroot "$root" "${argv[@]}" > "$OUT/$name.out" 2> "$OUT/$name.err"; rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  say "$name: ${argv[*]} -> exit $rc (want $want) in $secs s; stdout: $(head -c 200 "$OUT/$name.out")"
  sed 's/^/    /' "$OUT/$name.err" | head -20 | tee -a "$log"
  if [ "$rc" != "$want" ] || { [ -n "$text" ] && ! grep -qF "$text" "$OUT/$name.out"; } \
     || { [ -z "$text" ] && [ -s "$OUT/$name.out" ]; }; then
    say "FAILED: $name"; failures=$((failures + 1))
  fi
  # The verdict as JSON too, from the image's own expectation.
  env -i "${envv[@]}" chroot "$root" /usr/local/bin/gpuimg-selftest --json > "$OUT/$name.selftest.json" 2>/dev/null
  umount -l "$root/proc" "$root/sys" 2>/dev/null
  for m in $(grep -o "$root[^ ]*" /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null; done
  rm -rf "$root" 2>/dev/null
done
say "image failures: $failures"
exit $((failures > 0))
