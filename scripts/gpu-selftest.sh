#!/usr/bin/env bash
# On-GPU test of gpuimg-selftest. Run on a host with an NVIDIA GPU and driver.
#
#   BIN=path/to/gpuimg-selftest OUT=results-dir bash scripts/gpu-selftest.sh
#
# Defaults: BIN is gpuimg-selftest beside this script (the .devcarry layout) or in
# target/release; OUT is $OUT (set by the device runner) or ./gpu-selftest-out.
# It: runs the self-test with an expectation matching this host (must pass), with three that
# must fail naming the right check (newer driver, another GPU, other module flavour); checks
# NVIDIA_REQUIRE_* handling; compares every reported GPU field with nvidia-smi; times both
# levels; runs the exec hand-off; and runs the self-test as an image entrypoint inside an
# unpacked root filesystem with the host's driver libraries and /dev/nvidia* bound in.
# Exits non-zero if any expectation of this script is not met; results land in $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  for c in "$here/gpuimg-selftest" "$here/../target/release/gpuimg-selftest"; do
    [ -x "$c" ] && BIN=$c && break
  done
fi
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "gpu-selftest.sh: no gpuimg-selftest binary (set BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
OUT=${OUT:-$PWD/gpu-selftest-out}
mkdir -p "$OUT"
log=$OUT/summary.txt
: > "$log"
failures=0
say() { echo "$*" | tee -a "$log"; }
bad() { say "FAILED: $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

say "# gpuimg-selftest on-GPU run, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "binary: $(stat -c %s "$BIN") bytes; $(file -b "$BIN" 2>/dev/null | cut -c1-80)"
say "kernel: $(uname -r)"
say "module: $(head -1 /proc/driver/nvidia/version 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader | tee -a "$log"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1

drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
major=${drv%%.*}
e=$OUT/expect
mkdir -p "$e"
# Matches this host (H200, open module, driver 580, CUDA 13.0); peak from the datasheet.
cat > "$e/match.json" <<J
{"format": 1, "image": "gpu-selftest-match", "kernel": ">=5.15", "driver": ">=$major,<$((major + 1))",
 "kernel_module": "open", "cuda_driver_floor": "12.4", "gpus": ["H200", "H100"], "compute_capabilities": ["9.0"],
 "min_gpus": 1, "bandwidth": {"peak_device_gbps": {"H200": 4800, "H100": 3350}}}
J
cat > "$e/newer-driver.json" <<J
{"format": 1, "driver": ">=$((major + 10))"}
J
cat > "$e/other-gpu.json" <<J
{"format": 1, "gpus": ["B200"], "compute_capabilities": ["10.0"]}
J
cat > "$e/proprietary.json" <<J
{"format": 1, "kernel_module": "proprietary"}
J
cat > "$e/warn.json" <<J
{"format": 1, "driver": ">=$((major + 10))", "on_failure": "warn"}
J

run() { # name expected-exit args...
  local name=$1 want=$2; shift 2
  local t0 t1 rc
  t0=$(now)
  "$BIN" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; rc=$?
  t1=$(now)
  say "$name: exit $rc (want $want), $(elapsed "$t0" "$t1") s wall"
  [ "$rc" = "$want" ] || bad "$name exited $rc, expected $want"
}

# 1. Expectations: one that must pass, three that must fail naming the right check.
run match-quick-cold 0 --expect "$e/match.json" --json --report "$OUT/match-quick-cold.json"
run match-quick 0 --expect "$e/match.json" --json
cp "$OUT/match-quick.out" "$OUT/match-quick.json"
"$BIN" --expect "$e/match.json" > "$OUT/match-quick.txt" 2>&1
for pair in newer-driver:driver other-gpu:gpu-model proprietary:kernel-module; do
  name=${pair%%:*}; check=${pair#*:}
  run "$name" 1 --expect "$e/$name.json" --json
  python3 - "$OUT/$name.out" "$check" <<'P' >> "$log" || bad "$name did not fail on $check"
import json, sys
r = json.load(open(sys.argv[1])); want = sys.argv[2]
failed = [c["name"] for c in r["checks"] if c["status"] == "fail"]
print(f"  failed checks: {failed}")
sys.exit(0 if failed and all(n.split("[")[0] == want for n in failed) else 1)
P
done

# 2. NVIDIA_REQUIRE_*: the real CUDA 13.0 image string passes; a newer CUDA fails; DISABLE skips.
real='cuda>=13.0'
for branch in 535 550 565 570 575; do
  for brand in unknown grid tesla nvidia quadro quadrortx nvidiartx vapps vpc vcs vws cloudgaming; do
    real="$real brand=$brand,driver>=$branch,driver<$((branch + 1))"
  done
done
NVIDIA_REQUIRE_CUDA="$real" run require-real 0 --expect "$e/match.json" --json
NVIDIA_REQUIRE_CUDA="cuda>=13.9 brand=tesla,driver>=535,driver<536" run require-newer 1 --expect "$e/match.json" --json
NVIDIA_DISABLE_REQUIRE=true NVIDIA_REQUIRE_CUDA="cuda>=99.0" run require-disabled 0 --expect "$e/match.json" --json

# 3. Every reported field against nvidia-smi.
nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,pcie.link.width.current,ecc.mode.current,mig.mode.current,temperature.gpu,power.draw,power.limit,driver_version \
  --format=csv,noheader,nounits > "$OUT/nvidia-smi-query.csv"
python3 - "$OUT/match-quick.json" "$OUT/nvidia-smi-query.csv" <<'P' >> "$log" || bad "fields differ from nvidia-smi"
import csv, json, sys
r = json.load(open(sys.argv[1]))
rows = list(csv.reader(open(sys.argv[2]), skipinitialspace=True))
ok = True
def same(field, mine, theirs, tol=None):
    global ok
    if tol is None:
        good = str(mine).strip().lower() == str(theirs).strip().lower()
    else:
        try: good = abs(float(mine) - float(theirs)) <= tol
        except ValueError: good = False
    ok &= good
    print(f"  {field:<22} selftest={mine!s:<44} nvidia-smi={theirs!s:<44} {'ok' if good else 'DIFFERS'}")
for row, g in zip(rows, r["gpus"]):
    (idx, name, uuid, cc, mem, gmax, wmax, gcur, wcur, ecc, mig, temp, pw, plim, drv) = row
    p, e = g["pcie"], g["ecc"]
    same("index", g["index"], idx); same("name", g["name"], name); same("uuid", g["uuid"], uuid)
    same("compute_capability", g["compute_capability"], cc)
    same("memory_total_mib", g["memory_total_mib"], mem)
    same("pcie max gen", p["max_gen"], gmax); same("pcie max width", p["max_width"], wmax)
    same("pcie current gen", p["current_gen"], gcur, tol=3); same("pcie current width", p["current_width"], wcur)
    same("ecc enabled", {True: "enabled", False: "disabled", None: "[n/a]"}[e["enabled"]], ecc)
    same("mig enabled", {True: "enabled", False: "disabled", None: "[n/a]"}[g["mig_enabled"]], mig)
    same("temperature_c", g["temperature_c"], temp, tol=3)
    same("power_w", g["power_w"], pw, tol=0.15 * float(plim))  # a live reading: taken at different instants
    same("power_limit_w", g["power_limit_w"], plim, tol=1)
    same("driver_version", r["driver_version"], drv)
print(f"  cuda_driver_version    selftest={r['cuda_driver_version']}")
sys.exit(0 if ok and len(rows) == len(r["gpus"]) else 1)
P
nvidia-smi -q | grep -i -A3 -E 'CUDA Version|Remapped|Retired|Throttle|Event Reasons' > "$OUT/nvidia-smi-q-extract.txt" 2>&1 || true

# 4. Timings: quick x5, full x3 (bandwidth figures recorded from the JSON).
for i in 1 2 3 4 5; do run "quick-$i" 0 --expect "$e/match.json" --level quick --json; done
for i in 1 2 3; do run "full-$i" 0 --expect "$e/match.json" --level full --json; done
python3 - "$OUT"/full-*.out <<'P' >> "$log"
import json, sys
for f in sys.argv[1:]:
    r = json.load(open(f))
    for d in r["cuda_devices"]:
        bw = d.get("bandwidth") or d.get("bandwidth_error")
        print(f"  {f.split('/')[-1]}: duration_ms={r['duration_ms']} kernel_ms={d.get('kernel_ms'):.1f} bandwidth={bw}")
    print("  checks: " + ", ".join(f"{c['name']}={c['status']}" for c in r["checks"] if "band" in c["name"] or "pcie" in c["name"]))
P
"$BIN" --expect "$e/match.json" --level full > "$OUT/full.txt" 2>&1

# 4b. Baseline, when PyTorch is at hand: pinned copies and a device copy timed with CUDA events.
if python3 -c 'import torch' 2>/dev/null; then
  python3 - <<'P' >> "$log" 2>&1 || say "  (baseline failed)"
import statistics, torch
def med(fn, n=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3): fn()
    torch.cuda.synchronize(); t = []
    for _ in range(n):
        s.record(); fn(); e.record(); e.synchronize(); t.append(s.elapsed_time(e) / 1000)
    return statistics.median(t)
N = 1 << 30
h = torch.empty(N, dtype=torch.uint8, pin_memory=True); a = torch.empty(N, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
print(f"  baseline (torch, 1 GiB, median of 20): h2d {N / med(lambda: a.copy_(h, non_blocking=True)) / 1e9:.1f} GB/s, "
      f"d2h {N / med(lambda: h.copy_(a, non_blocking=True)) / 1e9:.1f} GB/s, d2d {2 * N / med(lambda: b.copy_(a)) / 1e12:.2f} TB/s (2N/t)")
P
  t0=$(now); python3 -c 'import torch; torch.cuda.is_available()'; t1=$(now)
  say "  python -c 'import torch; torch.cuda.is_available()': $(elapsed "$t0" "$t1") s"
fi

# 5. Exec hand-off: arguments and exit code pass through; warn execs after a failure; abort does not.
"$BIN" --expect "$e/match.json" -- sh -c 'echo "child pid $$ args: $*"; exit 7' sh a 'b c' > "$OUT/exec.out" 2> "$OUT/exec.err"; rc=$?
say "exec-pass: exit $rc (want 7), stdout: $(cat "$OUT/exec.out")"
[ "$rc" = 7 ] && grep -q 'args: a b c' "$OUT/exec.out" || bad "exec hand-off after a pass"
"$BIN" --expect "$e/warn.json" -- sh -c 'exit 5' > /dev/null 2> "$OUT/exec-warn.err"; rc=$?
say "exec-warn: exit $rc (want 5)"; [ "$rc" = 5 ] || bad "exec after a failure with on-failure: warn"
"$BIN" --expect "$e/newer-driver.json" -- sh -c 'echo SHOULD-NOT-RUN' > "$OUT/exec-abort.out" 2>&1; rc=$?
say "exec-abort: exit $rc (want 1)"; { [ "$rc" = 1 ] && ! grep -q SHOULD-NOT-RUN "$OUT/exec-abort.out"; } || bad "abort must not exec"

# 6. As an image entrypoint: an unpacked root filesystem holding only the binary, its glibc,
#    /bin/sh and /etc/gpuimg/expect.json; the host's driver libraries and /dev/nvidia* bound in
#    (what the container toolkit does), /proc and /sys mounted.
root=$(mktemp -d /tmp/gpuimg-rootfs.XXXXXX)
ROOTFS_TAR=${ROOTFS_TAR:-}
if [ -n "$ROOTFS_TAR" ] && [ -f "$ROOTFS_TAR" ]; then
  tar -C "$root" -xf "$ROOTFS_TAR"
  say "rootfs: unpacked $ROOTFS_TAR"
else
  mkdir -p "$root/usr/local/bin" "$root/etc/gpuimg" "$root/bin"
  cp "$BIN" "$root/usr/local/bin/gpuimg-selftest"
  cp "$e/match.json" "$root/etc/gpuimg/expect.json"
  cp "$(readlink -f /bin/sh)" "$root/bin/sh"
  say "rootfs: hand-assembled (binary, glibc, sh, expect.json)"
fi
# The toolkit's job: the host's compute + utility driver libraries and device nodes.
libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 / {print $NF; exit}')
[ -n "$libcuda" ] || libcuda=$(find / -xdev -name 'libcuda.so.1' 2>/dev/null | head -1)
libdir=$(dirname "$(readlink -f "$libcuda")")
say "driver libraries from: $libdir"
dst=/usr/lib/x86_64-linux-gnu
mkdir -p "$root$dst" "$root/dev" "$root/proc" "$root/sys" "$root/tmp"
drvlibs=$(ls "$libdir"/libcuda.so.* "$libdir"/libnvidia-ml.so.* "$libdir"/libnvidia-ptxjitcompiler.so.* \
               "$libdir"/libnvidia-gpucomp.so.* "$libdir"/libnvidia-nvvm.so.* 2>/dev/null)
for lib in $drvlibs; do   # same layout as the host: symlinks stay symlinks, files are bound
  base=$(basename "$lib")
  if [ -L "$lib" ]; then ln -sf "$(readlink "$lib")" "$root$dst/$base"
  else touch "$root$dst/$base"; mount --bind "$lib" "$root$dst/$base"; fi
done
mkdir -p "$root/etc"; echo "$dst" > "$root/etc/ld.so.conf"
# glibc pieces the binary, sh and the driver libraries need.
for lib in $(ldd "$BIN" "$(readlink -f /bin/sh)" $drvlibs 2>/dev/null | awk '/=> \// {print $3} /^\t\// {print $1}' | sort -u); do
  [ -e "$root$dst/$(basename "$lib")" ] && continue
  mkdir -p "$root$(dirname "$lib")"; [ -e "$root$lib" ] || cp -L "$lib" "$root$lib"
done
ldconfig -r "$root" 2>/dev/null || true
for d in /dev/nvidia*; do
  if [ -c "$d" ]; then touch "$root$d"; mount --bind "$d" "$root$d";
  elif [ -d "$d" ]; then mkdir -p "$root$d"; mount --rbind "$d" "$root$d"; fi
done
mount -t proc proc "$root/proc"; mount --rbind /sys "$root/sys"
say "rootfs size: $(du -sh --exclude=proc --exclude=sys "$root" 2>/dev/null | cut -f1); driver libs: $(ls "$root$dst" | tr '\n' ' ')"
t0=$(now)
chroot "$root" /usr/local/bin/gpuimg-selftest -- /bin/sh -c 'echo "workload started as pid $$"; exit 3' > "$OUT/entrypoint.out" 2> "$OUT/entrypoint.err"; rc=$?
t1=$(now)
say "entrypoint: exit $rc (want 3 from the workload), $(elapsed "$t0" "$t1") s; stdout: $(cat "$OUT/entrypoint.out")"
[ "$rc" = 3 ] || { bad "entrypoint in the unpacked rootfs"; chroot "$root" /usr/local/bin/gpuimg-selftest --json > "$OUT/entrypoint-debug.json" 2>&1; }
umount -l "$root/proc" "$root/sys" 2>/dev/null
for m in $(grep -o "$root[^ ]*" /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null; done
rm -rf "$root" 2>/dev/null

say "failures: $failures"
exit $((failures > 0))
