#!/usr/bin/env bash
# Push benchmark (not run in CI): profiles/pytorch-h200.yaml built into an OCI layout, then
# pushed to a loopback registry (Debian's docker-registry, the reference implementation,
# distribution 2.8, filesystem storage) by `gpuimg push` and by
# `skopeo copy oci:… docker://…` of the same layout, side by side in the same run: ROUNDS
# rounds, each tool into a freshly emptied registry, medians and their ratio. Then the second
# push of the same image (every blob already there) by each, and a whole second
# `gpuimg build -o registry:…` (warm cache: no layer written, nothing uploaded).
# Neither side attaches an SBOM here (skopeo has none to attach).
# Usage: bash scripts/bench-push.sh   (needs the host's Python index and apt mirror for the
# first build; GPUIMG=path skips the release build; ROUNDS=3 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
W=${BENCH_DIR:-/tmp/gpuimg-bench-push}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-5077}
mkdir -p "$W"
if [ -z "${GPUIMG:-}" ]; then
  cargo build --release --locked --bins -q
  GPUIMG=$PWD/target/release/gpuimg
fi
G=$GPUIMG
export SOURCE_DATE_EPOCH=0
if [ ! -f "$W/layout/index.json" ]; then
  /usr/bin/time -f "first build: %e s" "$G" build profiles/pytorch-h200.yaml -o "oci:$W/layout:bench" \
    -q --cache "$W/cache" --force
fi
"$G" inspect "oci:$W/layout:bench" --json | python3 -c 'import json,sys
d=json.load(sys.stdin); print("image: %d layers, %d bytes compressed" % (len(d["layers"]), d["image_size"]))'

REG_PID=
stop_registry() { if [ -n "$REG_PID" ]; then kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; REG_PID=; fi; }
trap stop_registry EXIT
fresh_registry() {
  stop_registry
  rm -rf "$W/reg-data"
  cat > "$W/reg.yml" <<YML
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $W/reg-data}}
http: {addr: 127.0.0.1:$PORT}
YML
  docker-registry serve "$W/reg.yml" > "$W/reg.log" 2>&1 &
  REG_PID=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/v2/" >/dev/null && return; sleep 0.1; done
  echo "the registry did not start" >&2; exit 1
}
secs() { local s; s=$(date +%s.%N); "$@" >/dev/null; python3 -c "import time; print('%.3f' % (time.time() - $s))"; }
g_push() { rm -rf "$W/pcache"; "$G" push "oci:$W/layout:bench" "registry:127.0.0.1:$PORT/torch:bench" -q --cache "$W/pcache"; }
s_push() { skopeo copy -q --dest-tls-verify=false "oci:$W/layout:bench" "docker://127.0.0.1:$PORT/torch:bench"; }
g=(); s=()
for i in $(seq "$ROUNDS"); do
  fresh_registry; sync; g+=("$(secs g_push)")
  fresh_registry; sync; s+=("$(secs s_push)")
  echo "round $i: gpuimg push ${g[-1]} s, skopeo copy ${s[-1]} s"
done
python3 - "${g[*]}" "${s[*]}" <<'PY'
import statistics, sys
g = [float(x) for x in sys.argv[1].split()]; s = [float(x) for x in sys.argv[2].split()]
mg, ms = statistics.median(g), statistics.median(s)
print("first push, median of %d: gpuimg %.2f s, skopeo %.2f s, ratio %.2f" % (len(g), mg, ms, mg / ms))
PY
# Second pushes: the registry holds the image (pushed by gpuimg in the last round above).
fresh_registry; g_push
g2=(); s2=()
for i in $(seq 5); do
  g2+=("$(secs "$G" push "oci:$W/layout:bench" "registry:127.0.0.1:$PORT/torch:bench" -q --cache "$W/pcache")")
  s2+=("$(secs s_push)")
done
python3 - "${g2[*]}" "${s2[*]}" <<'PY'
import statistics, sys
g = [float(x) for x in sys.argv[1].split()]; s = [float(x) for x in sys.argv[2].split()]
print("second push, median of %d: gpuimg %.3f s, skopeo %.3f s" % (len(g), statistics.median(g), statistics.median(s)))
PY
# A whole second build to the registry: warm cache, every layer and blob reused.
"$G" build profiles/pytorch-h200.yaml -o "registry:127.0.0.1:$PORT/torch:bench" -q --cache "$W/cache" >/dev/null
b=$(secs "$G" build profiles/pytorch-h200.yaml -o "registry:127.0.0.1:$PORT/torch:bench" -q --cache "$W/cache" --json)
"$G" build profiles/pytorch-h200.yaml -o "registry:127.0.0.1:$PORT/torch:bench" -q --cache "$W/cache" --json \
  | python3 -c 'import json,sys; p=json.load(sys.stdin)["push"]; print("second build -o registry: push phase %.3f s, %d uploaded, %d already there" % (p["seconds"], p["blobs_uploaded"], p["blobs_existing"]))'
echo "second build -o registry: whole command $b s"
