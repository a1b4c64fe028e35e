#!/usr/bin/env bash
# The whole GPU session in one device run: the self-test checks (gpu-selftest.sh), then the
# entrypoints of images gpuimg built (gpu-images.sh), then the library checks with the
# cuda-runtime image and the host's torch (gpu-libraries.sh). Everything lands in
# $OUT/gpu.tar.gz.
# Prepare here first: bash scripts/gpu-prepare.sh; then run `bash .devcarry/bin/gpu-run.sh`
# on the device with carry [".devcarry"].
set -u
here=$(cd "$(dirname "$0")" && pwd)
res=$(mktemp -d /tmp/gpuimg-gpu-run.XXXX)
BIN=$here/gpuimg-selftest OUT=$res/selftest bash "$here/gpu-selftest.sh"; a=$?
IMAGES=$here/../images OUT=$res/images bash "$here/gpu-images.sh"; b=$?
c=0
if [ -d "$here/../images/cuda-runtime" ]; then
  IMAGE=$here/../images/cuda-runtime OUT=$res/libraries bash "$here/gpu-libraries.sh"; c=$?
fi
echo "gpu-selftest.sh exit $a; gpu-images.sh exit $b; gpu-libraries.sh exit $c" | tee "$res/exit.txt"
tar -C "$res" -czf "${OUT:-.}/gpu.tar.gz" .
exit $((a != 0 || b != 0 || c != 0))
