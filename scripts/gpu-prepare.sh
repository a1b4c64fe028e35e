#!/usr/bin/env bash
# Here (no GPU): build the release binaries and the images the GPU run checks, and lay them
# out under .devcarry/ for the device runner (carry [".devcarry"]):
#   .devcarry/bin/{gpuimg-selftest,expect_from_site,gpu-*.sh,…}
#   .devcarry/images/<name>/{rootfs.tar.gz,argv,entrypoint,env,expect}
# ONLY="cuda-runtime" prepares only the images named (the carry is at most 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bins -q
cargo build --release --locked --example expect_from_site -q
D=.devcarry
rm -rf "$D/images" "$D/bin"; mkdir -p "$D/images" "$D/bin"
cp target/release/gpuimg-selftest target/release/examples/expect_from_site scripts/gpu-run.sh \
   scripts/gpu-selftest.sh scripts/gpu-images.sh scripts/gpu-libraries.sh \
   scripts/gpu-cuda-runtime-workload.py "$D/bin/"
# name:profile:expected-exit:expected-output
for spec in "example:profiles/example.yaml:0:hello from gpuimg" \
            "cuda-h200:profiles/cuda-h200.yaml:0:workload: hello from a CUDA 12.4 image" \
            "cuda-b200:profiles/cuda-b200.yaml:1:" \
            "cuda-runtime:profiles/cuda-runtime.yaml:0:workload: hello from the CUDA runtime image" \
            "cuda-apt:profiles/cuda-apt.yaml:0:workload: copied 1048576 bytes to the GPU and back, equal"; do
  IFS=: read -r name profile want text <<< "$spec"
  case " ${ONLY:-$name} " in *" $name "*) ;; *) continue ;; esac
  out=$D/images/$name; mkdir -p "$out"
  ./target/release/gpuimg build "$profile" -o "out/$name" -q
  rm -rf "/tmp/gpuimg-unpack-$name"
  umoci unpack --image "out/$name:latest" "/tmp/gpuimg-unpack-$name" > /dev/null
  if [ "$name" = cuda-apt ]; then
    # Its workload: a small C program that uses the image's libcudart (Debian's) by SONAME.
    gcc -O2 -Wall -o "/tmp/gpuimg-unpack-$name/rootfs/usr/local/bin/cudart-copy" \
      scripts/gpu/cudart_copy.c
  fi
  tar -C "/tmp/gpuimg-unpack-$name/rootfs" -czf "$out/rootfs.tar.gz" .
  ./target/release/gpuimg inspect "out/$name" --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["config"]
open(sys.argv[1], "w").write("\n".join(c.get("Entrypoint", []) + c.get("Cmd", [])) + "\n")
open(sys.argv[2], "w").write("\n".join(c.get("Env", [])) + "\n")
open(sys.argv[3], "w").write("\n".join(c.get("Entrypoint", [])) + "\n")' "$out/argv" "$out/env" "$out/entrypoint"
  if [ "$name" = cuda-apt ]; then
    { cat "$out/entrypoint"; echo /usr/local/bin/cudart-copy; } > "$out/argv"
  fi
  printf '%s\n%s\n' "$want" "$text" > "$out/expect"
done
du -sh "$D"
