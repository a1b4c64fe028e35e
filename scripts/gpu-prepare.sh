#!/usr/bin/env bash
# Here (no GPU): build the release binaries and the images the GPU run checks, and lay them
# out under .devcarry/ for the device runner (carry [".devcarry"]):
#   .devcarry/bin/{gpuimg,gpuimg-selftest}  .devcarry/images/<name>/{rootfs.tar.gz,argv,env,expect}
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bins -q
D=.devcarry
rm -rf "$D/images" "$D/bin"; mkdir -p "$D/images" "$D/bin"
cp target/release/gpuimg target/release/gpuimg-selftest scripts/gpu-run.sh scripts/gpu-selftest.sh \
   scripts/gpu-images.sh "$D/bin/"
# name:profile:expected-exit:expected-output
for spec in "example:profiles/example.yaml:0:hello from gpuimg" \
            "cuda-h200:profiles/cuda-h200.yaml:0:workload: hello from a CUDA 12.4 image" \
            "cuda-b200:profiles/cuda-b200.yaml:1:"; do
  IFS=: read -r name profile want text <<< "$spec"
  out=$D/images/$name; mkdir -p "$out"
  ./target/release/gpuimg build "$profile" -o "out/$name" -q
  rm -rf "/tmp/gpuimg-unpack-$name"
  umoci unpack --image "out/$name:latest" "/tmp/gpuimg-unpack-$name" > /dev/null
  tar -C "/tmp/gpuimg-unpack-$name/rootfs" -czf "$out/rootfs.tar.gz" .
  ./target/release/gpuimg inspect "out/$name" --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["config"]
open(sys.argv[1], "w").write("\n".join(c.get("Entrypoint", []) + c.get("Cmd", [])) + "\n")
open(sys.argv[2], "w").write("\n".join(c.get("Env", [])) + "\n")' "$out/argv" "$out/env"
  printf '%s\n%s\n' "$want" "$text" > "$out/expect"
done
du -sh "$D"
