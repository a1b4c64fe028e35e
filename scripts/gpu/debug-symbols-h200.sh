#!/usr/bin/env bash
# `strip: [debug-symbols]` (with `device-code` for cc 9.0) on a real GPU (one NVIDIA H200, no
# network), in one device run:
#
#   bash scripts/gpu/debug-symbols-h200.sh          # from the repo root; results under $OUT
#
# Needs (carry [".devcarry"]): .devcarry/gpuimg; a python3 with torch (CUDA wheels) and Triton.
#
#  a. The site-packages of the python3 that has torch; a copy of it under /tmp where `torch`,
#     `triton` and `nvidia` are hard links (else real copies) and every other entry a symbolic
#     link to the original.
#  b. In the copy, libtorch_cpu.so, libtorch_cuda.so, libtorch_python.so, libnccl.so.2 and
#     Triton's libtriton.so are replaced by `gpuimg device-code prune --for 9.0
#     --debug-symbols` of the original (pruned for cc 9.0, then their DWARF and full symbol
#     table cut: what a build with both classes puts in its image). A new file replaces each
#     entry, so the originals are never written; their sha256 is checked at the end.
#  c. torch_ops.py with the original site-packages twice (A, C) and with the copy (B) lazy and
#     eager (PYTHONPATH=copy); ops_run_check.py checks that B mapped the copy's libtorch_cuda
#     and libnccl; compare_ops.py classifies each op of B against A (C: the original's own
#     nondeterminism). Every op must be identical or within that nondeterminism, no errors.
#  d. A Triton kernel JIT-compiled and run from the copy (libtriton.so stripped): its result
#     must equal torch's.
#  e. $OUT gets summary.md and log.txt. Exit 0 when everything above holds, else 1.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/scripts/gpu
GPUIMG=${GPUIMG:-$ROOT/.devcarry/gpuimg}
OUT=${OUT:-$PWD/debug-symbols-out}
PY=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH CUDA_MODULE_LOADING
mkdir -p "$OUT"
W=$(mktemp -d /tmp/gpuimg-dbgsym-results.XXXX)
log=$OUT/log.txt
: > "$log"
fails=0
say() { echo "$*" | tee -a "$log"; }
bad() { say "FAILED: $*"; fails=$((fails + 1)); }
sum() { sha256sum "$1" | cut -c1-16; }

SP=$("$PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
say "site-packages: $SP; $("$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)')"
say "gpuimg: $("$GPUIMG" --version)"
CW=$(mktemp -d /tmp/gpuimg-dbgsym-site.XXXX)
for e in "$SP"/*; do
  name=${e##*/}
  case " torch triton nvidia " in
    *" $name "*) cp -al "$e" "$CW/$name" 2> /dev/null || { rm -rf "${CW:?}/$name"; cp -a "$e" "$CW/$name"; } ;;
    *) ln -s "$e" "$CW/$name" ;;
  esac
done
nccl=$(cd "$SP" && find nvidia -name 'libnccl.so.2' -type f | head -1)
LIBS=(torch/lib/libtorch_cpu.so torch/lib/libtorch_cuda.so torch/lib/libtorch_python.so "$nccl" triton/_C/libtriton.so)
declare -A ORIG=()
{
  echo "## Libraries (gpuimg device-code prune --for 9.0 --debug-symbols)"
  echo
  echo "| library | bytes before | bytes after | what was cut |"
  echo "|---|---:|---:|---|"
} > "$W/libs.md"
for rel in "${LIBS[@]}"; do
  src=$SP/$rel
  [ -f "$src" ] || { bad "$rel not found under $SP"; continue; }
  ORIG[$rel]=$(sum "$src")
  tmp=$(dirname "$CW/$rel")/.gpuimg-tmp
  rm -f "$tmp"
  if ! "$GPUIMG" device-code prune --for 9.0 --debug-symbols "$src" "$tmp" 2> "$W/prune.err"; then
    bad "prune $rel: $(head -2 "$W/prune.err" | tr '\n' ' ')"
    continue
  fi
  mv -f "$tmp" "$CW/$rel"
  cut=$(grep -o 'cut .*' "$W/prune.err" | head -1 || true)
  say "$rel: $(stat -c %s "$src") -> $(stat -c %s "$CW/$rel") bytes; ${cut:-nothing cut}"
  echo "| \`$rel\` | $(stat -c %s "$src") | $(stat -c %s "$CW/$rel") | ${cut:-nothing} |" >> "$W/libs.md"
done

run_ops() { # LABEL [env...]
  local label=$1
  shift
  env "$@" timeout -k 10 240 "$PY" "$HERE/torch_ops.py" --label "$label" --pt "$W/$label.pt" \
    --json "$W/$label.json" > "$W/$label.log" 2>&1 || bad "$label: torch_ops.py exited $? ($(tail -1 "$W/$label.log"))"
}
run_ops A
run_ops C
run_ops B PYTHONPATH="$CW"
run_ops B-eager PYTHONPATH="$CW" CUDA_MODULE_LOADING=EAGER
{
  echo
  echo "## torch_ops.py runs (B: the stripped copy; A, C: the original)"
  echo
  echo "| run | ops ok \| errors \| init \| libtorch_cuda \| libnccl \| verified |"
  echo "|---|---|"
} > "$W/runs.md"
for r in B:lazy B-eager:eager; do
  label=${r%%:*}
  mode=${r#*:}
  if check=$("$PY" "$HERE/ops_run_check.py" "$W/$label.json" --torch "$CW/torch/lib/libtorch_cuda.so" \
      --nccl "$CW/$nccl" --mode "$mode" 2>&1); then :; else bad "$label did not run on the copy: $check"; fi
  echo "| $label | $(head -1 <<< "$check") |" >> "$W/runs.md"
  if cmp=$("$PY" "$HERE/compare_ops.py" "$W/A.pt" "$W/$label.pt" "$W/C.pt" --fail-on-error 2>&1); then :; else
    bad "$label against the original: $(tail -3 <<< "$cmp" | tr '\n' ' ')"
  fi
  { echo; echo "### $label against A"; echo; echo '```'; echo "$cmp"; echo '```'; } >> "$W/runs.md"
done

# d. A Triton kernel, compiled by the copy's (stripped) libtriton.so.
cat > "$W/triton_add.py" <<'PY'
import torch, triton, triton.language as tl
@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) * 2 + tl.load(y + i, mask=m), mask=m)
g = torch.Generator(device="cuda").manual_seed(1)
x = torch.rand(1 << 20, device="cuda", generator=g)
y = torch.rand(1 << 20, device="cuda", generator=g)
out = torch.empty_like(x)
add[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libtriton.so" in l]
print("libtriton mapped:", sorted(set(maps)))
print("equal:", torch.equal(out, x * 2 + y))
PY
if tri=$(PYTHONPATH="$CW" TRITON_CACHE_DIR="$W/triton-cache" timeout 300 "$PY" "$W/triton_add.py" 2>&1); then :; else bad "the Triton kernel: $(tail -3 <<< "$tri" | tr '\n' ' ')"; fi
say "triton: $tri"
grep -q "equal: True" <<< "$tri" || bad "the Triton kernel's result differs from torch's"
grep -q "$CW/triton/_C/libtriton.so" <<< "$tri" || bad "the Triton run did not map the copy's libtriton.so"

for rel in "${!ORIG[@]}"; do
  [ "$(sum "$SP/$rel")" = "${ORIG[$rel]}" ] || bad "the original $rel changed"
done
{
  echo "# strip: [debug-symbols] + device-code for 9.0 on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo
  echo "Verdict: $([ "$fails" = 0 ] && echo PASS || echo "FAIL ($fails)")"
  echo
  cat "$W/libs.md" "$W/runs.md"
  echo
  echo "## Triton"
  echo
  echo '```'
  echo "$tri"
  echo '```'
} > "$OUT/summary.md"
rm -rf "$CW"
say "verdict: $([ "$fails" = 0 ] && echo PASS || echo "FAIL ($fails)")"
[ "$fails" = 0 ]
