#!/usr/bin/env bash
# Cold `import torch` under podman (not run in CI): profiles/pytorch-h200.yaml built as it is
# and with `python.compile: true` (deterministic .pyc for the image's Python written into the
# wheel layers), each run ROUNDS times in a fresh container (`podman run --rm`, so no .pyc
# written by an earlier run survives), timing `import torch` and a CPU matmul inside the
# container with time.perf_counter. The first run of each also pays the page cache; the median
# is reported beside it. Prints the CPU model and both images' sizes.
# Usage: bash scripts/bench-torch-import.sh   (GPUIMG=path skips the release build; the
# build cache is $W/cache, shared with scripts/bench-push.sh when BENCH_DIR points there)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
W=${BENCH_DIR:-/tmp/gpuimg-bench-import}
ROUNDS=${ROUNDS:-5}
mkdir -p "$W"
if [ -z "${GPUIMG:-}" ]; then
  cargo build --release --locked --bins -q
  GPUIMG=$PWD/target/release/gpuimg
fi
G=$GPUIMG
export SOURCE_DATE_EPOCH=0
cp profiles/pytorch-h200.yaml "$W/plain.yaml"
sed 's/^  packages: \[\]$/  packages: []\n  compile: true/' profiles/pytorch-h200.yaml > "$W/compiled.yaml"
grep -q '^  compile: true' "$W/compiled.yaml" || { echo "could not set python.compile" >&2; exit 1; }
printf '[containers]\ndefault_ulimits = []\npids_limit = 0\n[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "none"\n' > "$W/containers.conf"
export CONTAINERS_CONF=$W/containers.conf
P=(podman --root "$W/storage" --runroot "$W/runroot" --storage-driver overlay --runtime runc)
for v in plain compiled; do
  /usr/bin/time -f "$v build: %e s" "$G" build "$W/$v.yaml" -o "oci:$W/out-$v:bench" -q --cache "$W/cache" --force
  "$G" inspect "oci:$W/out-$v:bench" --json | python3 -c 'import json,sys
d=json.load(sys.stdin); print("'$v' image: %d bytes compressed, %d unpacked" % (d["image_size"], d["uncompressed_size"]))'
  "${P[@]}" rmi -f "localhost/bench-$v" >/dev/null 2>&1 || true
  start=$(date +%s.%N)
  # `pull -q` prints the image's ID (its config digest): the tag goes to exactly that image.
  img=$("${P[@]}" pull -q "oci:$W/out-$v:bench" | tail -1)
  python3 -c "import time; print('$v podman pull: %.2f s' % (time.time() - $start))"
  "${P[@]}" tag "$img" "localhost/bench-$v"
  "${P[@]}" run --rm --network none --entrypoint python3 "localhost/bench-$v" -c \
    "import glob; print('$v: %d .pyc under torch/' % len(glob.glob('/usr/local/lib/python3.11/dist-packages/torch/**/*.pyc', recursive=True)))"
done
for v in plain compiled; do
  t=()
  for i in $(seq "$ROUNDS"); do
    t+=("$("${P[@]}" run --rm --network none --entrypoint python3 "localhost/bench-$v" -c '
import time
t = time.perf_counter()
import warnings
warnings.simplefilter("ignore")
import torch
i = time.perf_counter() - t
(torch.randn(256, 256) @ torch.randn(256, 256)).sum().item()
print("%.3f" % i)' 2>/dev/null | tail -1)")
  done
  python3 - "$v" "${t[*]}" <<'PY'
import statistics, sys
v = sys.argv[1]; t = [float(x) for x in sys.argv[2].split()]
print("%s: import torch, first run %.2f s, median of %d %.2f s (runs: %s)" % (v, t[0], len(t), statistics.median(t), " ".join("%.2f" % x for x in t)))
PY
done
