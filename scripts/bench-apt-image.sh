#!/usr/bin/env bash
# Benchmark for the apt client at image level: the package set of `mmdebstrap --variant=essential
# bookworm` built into a single-layer OCI image by gpuimg (`essential: true`, host mirror),
# side by side in one run with `mmdebstrap` + `umoci insert` into an OCI layout.
# Medians of N runs (hyperfine); prints the CPU model and the load. "warm" keeps gpuimg's
# downloaded .debs and indexes but gives every run a new SOURCE_DATE_EPOCH, so no layer is in
# the cache: every layer is unpacked and compressed again. Also the peak memory (maximum RSS)
# of one warm build.
# Usage: bash scripts/bench-apt-image.sh [RUNS]   (root; uses the host's apt sources)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
RUNS=${1:-5}
bash scripts/install-deps.sh
cargo build --release --locked --bins -q
G=$PWD/target/release/gpuimg
W=${BENCH_DIR:-/tmp/gpuimg-bench-apt}
rm -rf "$W"; mkdir -p "$W"
cat > "$W/p.yaml" <<YAML
name: essential
base:
  apt:
    mirror: host
    suite: bookworm
    essential: true
selftest: {enabled: false}
YAML
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
export SOURCE_DATE_EPOCH=0
"$G" build "$W/p.yaml" -o "$W/out" -q --cache "$W/cache"   # fill the download cache once
# Each warm run gets a SOURCE_DATE_EPOCH no run had before: every layer key is new.
echo 1000 > "$W/epoch"
hyperfine --style basic --runs "$RUNS" --export-json "$W/apt.json" \
  -n "gpuimg build, cold (empty cache)" --prepare "rm -rf $W/cold && sync" \
  "$G build $W/p.yaml -o $W/out-cold -q --cache $W/cold" \
  -n "gpuimg build, warm downloads, every layer written (new SOURCE_DATE_EPOCH)" \
  --prepare "echo \$((\$(cat $W/epoch) + 1)) > $W/epoch && sync" \
  "SOURCE_DATE_EPOCH=\$(cat $W/epoch) $G build $W/p.yaml -o $W/out -q --cache $W/cache" \
  -n "gpuimg rebuild, nothing changed" --prepare "sync" \
  "$G build $W/p.yaml -o $W/out -q --cache $W/cache" \
  -n "mmdebstrap + umoci insert" \
  --prepare "rm -rf $W/mm $W/umoci && umoci init --layout $W/umoci && umoci new --image $W/umoci:t && sync" \
  "mmdebstrap --quiet --variant=essential bookworm $W/mm && umoci insert --image $W/umoci:t $W/mm /"
python3 - "$W/apt.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
theirs = next(x["median"] for x in r if x["command"].startswith("mmdebstrap"))
print("\n| command | median s | speed-up vs mmdebstrap+umoci |\n|---|---|---|")
for x in r:
    print(f"| {x['command']} | {x['median']:.3f} | {theirs / x['median']:.1f}x |")
PY
ours=$("$G" inspect "$W/out" --json | python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))')
theirs=$(python3 - "$W/umoci" <<'PY'
import json, os, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "index.json")))
m = json.load(open(os.path.join(d, "blobs/sha256", idx["manifests"][0]["digest"][7:])))
print(sum(l["size"] for l in m["layers"]))
PY
)
pk=$("$G" build "$W/p.yaml" -o "$W/out" --cache "$W/cache" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["packages"])')
echo "compressed image layers: gpuimg $ours bytes, mmdebstrap+umoci $theirs bytes; gpuimg packages: $pk; mmdebstrap packages: $(dpkg-query --admindir="$W/mm/var/lib/dpkg" -W | wc -l)"
echo 999 > "$W/epoch"
/usr/bin/time -f "peak memory of one warm build: %M KB (%e s, %U s user, %S s system)" \
  env SOURCE_DATE_EPOCH=999 "$G" build "$W/p.yaml" -o "$W/out" -q --cache "$W/cache"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
