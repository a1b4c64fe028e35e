#!/usr/bin/env bash
# On the GPU host: the self-test's library and device-code checks (expectation format 2).
#   1. The cuda-runtime image (prepared by gpu-prepare.sh) run as the container toolkit would
#      (its root filesystem, the host's driver libraries and /dev/nvidia* bound in): its own
#      entrypoint with scripts/gpu-cuda-runtime-workload.py as the workload (the image's
#      libcudart counts devices and copies a buffer there and back; its NVRTC compiles a kernel
#      the driver runs); the self-test's JSON from inside the image, timed (quick x5, the first
#      on a dropped page cache).
#   2. Two negatives in that image: device code without sm_90 and a cudart version other than
#      the image's; each must refuse to start the workload, naming the coverage / the library.
#   3. The host's own Python environment (torch with NVIDIA's CUDA wheels): an expectation
#      written by `expect_from_site` for that set, checked at both levels, cold and warm, with
#      each library's load time (the cost of cuBLASLt and cuDNN for the quick level's budget).
# Results (summary.txt and JSON) under $OUT; exit non-zero if an expectation of this script fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$here/gpuimg-selftest}
EXPECT_FROM_SITE=${EXPECT_FROM_SITE:-$here/expect_from_site}
IMAGE=${IMAGE:-$here/../images/cuda-runtime}
OUT=${OUT:-$PWD/gpu-libraries-out}; mkdir -p "$OUT"
log=$OUT/libraries.txt; : > "$log"
failures=0
say() { echo "$*" | tee -a "$log"; }
bad() { say "FAILED: $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || say "  (could not drop the page cache)"; }

say "# gpu-libraries.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

# --- 1. The image, as the container toolkit runs it ---------------------------------------
root=$(mktemp -d /tmp/gpuimg-cuda-runtime.XXXX)
tar -C "$root" -xzf "$IMAGE/rootfs.tar.gz"
libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 / {print $NF; exit}')
libdir=$(dirname "$(readlink -f "$libcuda")")
dst=/usr/lib/x86_64-linux-gnu
mkdir -p "$root$dst" "$root/dev" "$root/proc" "$root/sys" "$root/tmp"
for lib in $(ls "$libdir"/libcuda.so.* "$libdir"/libnvidia-ml.so.* "$libdir"/libnvidia-ptxjitcompiler.so.* \
                "$libdir"/libnvidia-gpucomp.so.* "$libdir"/libnvidia-nvvm.so.* 2>/dev/null); do
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
mapfile -t entry < "$IMAGE/entrypoint"; mapfile -t envv < "$IMAGE/env"
say "image: $(du -sh --exclude=proc --exclude=sys "$root" 2>/dev/null | cut -f1) unpacked; entrypoint: ${entry[*]}"
workload=$(cat "$here/gpu-cuda-runtime-workload.py")
inside() { env -i "${envv[@]}" chroot "$root" "$@"; }

drop_caches
t0=$(now); inside "${entry[@]}" "$workload" > "$OUT/entrypoint.out" 2> "$OUT/entrypoint.err"; rc=$?; t1=$(now)
say "entrypoint + workload (cold page cache): exit $rc (want 0) in $(elapsed "$t0" "$t1") s"
sed 's/^/    /' "$OUT/entrypoint.out" | tee -a "$log"
grep -E '^(gpuimg-selftest|library |CHECK|library\[|functional)' "$OUT/entrypoint.err" | sed 's/^/    /' | tee -a "$log"
[ "$rc" = 0 ] || bad "the image's entrypoint with the workload"
grep -q "elements verified" "$OUT/entrypoint.out" || bad "NVRTC's kernel did not run"
grep -q "identical" "$OUT/entrypoint.out" || bad "the copy there and back"

for i in 1 2 3 4 5; do
  [ "$i" = 1 ] && drop_caches
  t0=$(now); inside /usr/local/bin/gpuimg-selftest --json > "$OUT/image-quick-$i.json" 2>/dev/null; rc=$?; t1=$(now)
  say "image self-test quick #$i$([ "$i" = 1 ] && echo ' (cold)'): exit $rc (want 0), $(elapsed "$t0" "$t1") s wall"
  [ "$rc" = 0 ] || bad "image self-test quick #$i"
done
python3 - "$OUT"/image-quick-*.json <<'P' | tee -a "$log"
import json, sys
for f in sys.argv[1:]:
    r = json.load(open(f))
    libs = ", ".join(f"{l['name']} {l.get('raw')} {l['ms']:.1f} ms" for l in r.get("libraries", []))
    checks = ", ".join(f"{c['name']}={c['status']}" for c in r["checks"] if c["name"].startswith(("library", "device-code")))
    print(f"  {f.rsplit('/', 1)[-1]}: {r['verdict']} duration_ms={r['duration_ms']} | {libs} | {checks}")
P

# --- 2. Negatives in the image ------------------------------------------------------------
cp "$root/etc/gpuimg/expect.json" "$OUT/image-expect.json"
negative() { # name, python edit of e, check that must fail
  local name=$1 edit=$2 want=$3
  python3 - "$OUT/image-expect.json" "$root/etc/gpuimg/expect.json" "$edit" <<'P'
import json, sys
e = json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(e, open(sys.argv[2], "w"), indent=1)
P
  inside "${entry[@]}" "print('SHOULD-NOT-RUN')" > "$OUT/$name.out" 2> "$OUT/$name.err"; local rc=$?
  say "negative $name: exit $rc (want 1); $(grep -E "^$want|not starting" "$OUT/$name.err" | tr -s ' ' | tr '\n' ' ')"
  { [ "$rc" = 1 ] && ! grep -q SHOULD-NOT-RUN "$OUT/$name.out" && grep -E "^$want" "$OUT/$name.err" | grep -q fail; } \
    || bad "negative $name"
  cp "$OUT/image-expect.json" "$root/etc/gpuimg/expect.json"
}
negative no-sm90 'e["device_code"] = {"targets": ["sm_80", "sm_86"], "source": "test: an Ampere-only build"}' 'device-code\[0\]'
negative other-cudart 'next(l for l in e["libraries"] if l["name"] == "cudart")["version"] = "12.6.77"' 'library\[cudart\]'

umount -l "$root/proc" "$root/sys" 2>/dev/null
for m in $(grep -o "$root[^ ]*" /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null; done
rm -rf "$root" 2>/dev/null

# --- 3. The host's own torch + CUDA wheels -----------------------------------------------
site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
arch=$(python3 -c 'import torch; print(",".join(torch.cuda.get_arch_list()))' 2>/dev/null)
tv=$(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null)
say "host python: torch $tv in $site; torch.cuda.get_arch_list(): $arch"
if [ -z "$site" ]; then bad "no torch on this host"; else
  "$EXPECT_FROM_SITE" "$site" --device-code "$arch" --device-code-source "torch.cuda.get_arch_list() of torch $tv" \
    > "$OUT/host-expect.json" 2> "$OUT/host-expect.err" || bad "expect_from_site"
  python3 - "$OUT/host-expect.json" <<'P' | tee -a "$log"
import json, sys
libs = json.load(open(sys.argv[1]))["libraries"]
for l in libs:
    print("  expect %-10s %-22s %-12s %-5s %s" % (l["name"], l["soname"], l["version"], l["level"], l["provider"]))
print("  %d libraries in the expectation" % len(libs))
P
  grep -q '"cudart"' "$OUT/host-expect.json" || bad "the host's expectation lists no cudart"
  for spec in full-cold:full:drop full-warm:full: quick-cold:quick:drop quick-warm-1:quick: quick-warm-2:quick: quick-warm-3:quick:; do
    IFS=: read -r name level drop <<< "$spec"
    [ -n "$drop" ] && drop_caches
    t0=$(now); "$BIN" --expect "$OUT/host-expect.json" --level "$level" --json > "$OUT/host-$name.json" 2>/dev/null; rc=$?; t1=$(now)
    say "host self-test $name: exit $rc (want 0), $(elapsed "$t0" "$t1") s wall"
    [ "$rc" = 0 ] || bad "host self-test $name"
  done
  python3 - "$OUT"/host-*-*.json <<'P' | tee -a "$log"
import json, sys
for f in sys.argv[1:]:
    r = json.load(open(f))
    libs = ", ".join(f"{l['name']} {l.get('raw') or l.get('error')} {l['ms']:.1f} ms" for l in r.get("libraries", []))
    bad = [f"{c['name']}={c['status']}" for c in r["checks"] if c["status"] not in ("pass", "skip")]
    print(f"  {f.rsplit('/', 1)[-1]}: {r['verdict']} duration_ms={r['duration_ms']} not-pass={bad}\n    {libs}")
P
  "$BIN" --expect "$OUT/host-expect.json" --level full > "$OUT/host-full.txt" 2>&1
fi
say "library failures: $failures"
exit $((failures > 0))
