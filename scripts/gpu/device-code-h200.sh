#!/usr/bin/env bash
# Device-code pruning on a real GPU (one NVIDIA H200, cc 9.0, no network), in one device run:
#
#   bash scripts/gpu/device-code-h200.sh          # from the repo root; results under $OUT
#
# Needs (carry [".devcarry"]): .devcarry/gpuimg, .devcarry/gpuimg-selftest,
# .devcarry/expect-sm80.json (an image expectation whose device code is pruned for sm_80 only);
# and a python3 with torch (CUDA 13 wheels) on the machine.
#
#  a. Find the site-packages of the python3 that has torch; import torch once (--probe) to learn
#     which libtorch_cuda.so and libnccl.so.2 it maps; `gpuimg device-code list --json` each.
#  b. Two copies of that site-packages, under /tmp: `torch` and the top folder that holds
#     libnccl (`nvidia`) are real copies (hard links where the file system allows, else cp -a),
#     every other entry a symbolic link to the original. In each copy the two libraries are
#     pruned (`gpuimg device-code prune --for 9.0`, resp. `--for 8.0`) to a temporary file
#     which then replaces the copy's entry (a new file: the original, hard-linked or not, is
#     never written; its sha256 is checked at the end); both listed again and checked against
#     the original's listing (devcode_listing.py check-prune).
#  c. torch_ops.py with the original site-packages twice and with the 9.0 copy
#     (PYTHONPATH=copy), each with CUDA_MODULE_LOADING unset (lazy) and EAGER; every run must
#     map exactly the libraries it is meant to (ops_run_check.py, from /proc/self/maps);
#     compare_ops.py classifies each op against the original (its second run = the original's
#     own nondeterminism). The 9.0 copy must be identical / within nondeterminism, no errors.
#  d. Before running the 8.0 copy: $OUT/sm80-prediction.txt says per library whether a cc 9.0
#     GPU can still run it (from the pruned listing; devcode_listing.py predict). Then
#     torch_ops.py against it, lazy and eager: ops may fail (no kernel image), and must match
#     the original where they run; never other numbers. Errors are a failure only when both
#     libraries were predicted runnable; no error at all when libtorch_cuda.so was predicted
#     not runnable is a failure too (the pruning had no effect).
#  e. gpuimg-selftest --expect .devcarry/expect-sm80.json must refuse: exit 1, a device-code
#     check failed (its detail about the image's device code).
#  f. $OUT gets summary.md (tables), sm80-prediction.txt, log.txt and devcode.tar.gz (every
#     listing, log, summary and comparison; the .pt result files only with KEEP_PT=1). The
#     device runner brings back at most 8 files, so everything else is in the tarball.
#
# Knobs (environment): PYTHON (the python3 to use), GPUIMG, SELFTEST, EXPECT80, OUT,
# RUNS_BUDGET_S (no torch run starts after this many seconds; default 380), RUN_TIMEOUT_S
# (per torch run, default 150), KEEP_PT=1. Exit 0 when every expectation above holds, else 1.
set -eEuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/scripts/gpu
GPUIMG=${GPUIMG:-$ROOT/.devcarry/gpuimg}
SELFTEST=${SELFTEST:-$ROOT/.devcarry/gpuimg-selftest}
EXPECT80=${EXPECT80:-$ROOT/.devcarry/expect-sm80.json}
OUT=${OUT:-$PWD/device-code-out}
RUNS_BUDGET_S=${RUNS_BUDGET_S:-380}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-150}
KEEP_PT=${KEEP_PT:-0}
# Single GPU, but keep NVLink multicast off wherever NCCL / torch look.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
unset PYTHONPATH CUDA_MODULE_LOADING   # each run sets its own

mkdir -p "$OUT"
W=$(mktemp -d /tmp/gpuimg-devcode-results.XXXX)   # results; tarred into $OUT at the end
CW=""                                              # the site-packages copies
log=$OUT/log.txt
: > "$log"
: > "$W/failures.txt"
: > "$W/notes.txt"
: > "$W/t-libs.md"
: > "$W/t-runs.md"
: > "$W/t-cmp.md"
: > "$W/t-other.md"
T0=$(date +%s)
FINISHED=0

say() { printf '[%4ss] %s\n' "$(($(date +%s) - T0))" "$*" | tee -a "$log"; }
bad() { echo "$*" >> "$W/failures.txt"; say "FAILED: $*"; }
note() { echo "$*" >> "$W/notes.txt"; say "note: $*"; }
indent() { sed 's/^/    /' | tee -a "$log"; }
trap 'e=$?; if [ "$BASH_SUBSHELL" = 0 ]; then say "ABORTED: line $LINENO: \`$BASH_COMMAND\` exited $e"; fi' ERR

finish() {
  [ "$FINISHED" = 1 ] && return 0
  FINISHED=1
  set +eu
  trap - ERR
  local status=${1:-0}
  # The originals must be untouched (the copies may share their inodes).
  for i in "${!LIBNAME[@]}"; do
    if [ -n "${LIBSHA[i]:-}" ]; then
      local now
      now=$(sha256sum "${LIBPATH[i]}" | cut -d' ' -f1)
      if [ "$now" = "${LIBSHA[i]}" ]; then say "original ${LIBNAME[i]} unchanged (sha256 ${now:0:16}…)"
      else bad "the ORIGINAL ${LIBPATH[i]} changed during the run (sha256 ${LIBSHA[i]:0:16}… -> ${now:0:16}…)"; fi
    fi
  done
  [ "$status" != 0 ] && bad "the script stopped early (exit $status); later steps did not run"
  local nfail
  nfail=$(grep -c . "$W/failures.txt")
  {
    echo "# Device-code pruning on $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -1)"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ); $(($(date +%s) - T0)) s; gpuimg: $("$GPUIMG" --version 2>/dev/null | head -1);" \
         "python: ${PY:-none}; torch: ${TORCH_VERSION:-?}; site-packages: \`${SP:-none}\`; copies: ${COPY_METHOD:-none}"
    echo
    if [ "$nfail" = 0 ]; then echo "**Verdict: PASS** — every expectation of device-code-h200.sh held."
    else echo "**Verdict: FAIL** — $nfail expectation(s) failed:"; echo; sed 's/^/- /' "$W/failures.txt"; fi
    echo
    echo "## Libraries"
    echo
    echo "| library | listing | size (bytes) | sha256 |"
    echo "| --- | --- | --- | --- |"
    cat "$W/t-libs.md"
    echo
    echo "## Runs (torch_ops.py)"
    echo
    echo "| run | site-packages | CUDA_MODULE_LOADING | exit | seconds | ops ok | errors | CUDA init | libtorch_cuda.so mapped | libnccl mapped | libraries as meant |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    cat "$W/t-runs.md"
    echo
    echo "## Comparisons (compare_ops.py: B against A, C = the original's second run)"
    echo
    echo "| B | A | C | identical | within-nondeterminism | DIFFERENT | error | both-error | original-error | expectation | result |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    cat "$W/t-cmp.md"
    echo
    echo "## Prediction for the 8.0-only copy on this GPU (written before its runs)"
    echo
    echo '```'
    cat "$OUT/sm80-prediction.txt" 2>/dev/null || echo "(none written)"
    echo '```'
    echo
    echo "## Other checks"
    echo
    cat "$W/t-other.md"
    if [ -s "$W/notes.txt" ]; then echo; echo "## Notes"; echo; sed 's/^/- /' "$W/notes.txt"; fi
    echo
    echo "Everything else (listings, logs, per-run summaries, comparisons) is in devcode.tar.gz."
  } > "$W/summary.md"
  cp "$W/summary.md" "$OUT/summary.md"
  cp "$log" "$W/log.txt"
  local ex=()
  [ "$KEEP_PT" = 1 ] || ex=(--exclude='*.pt')
  tar -C "$W" "${ex[@]}" -czf "$OUT/devcode.tar.gz" .
  say "results: $OUT/summary.md, $OUT/devcode.tar.gz ($(du -h "$OUT/devcode.tar.gz" | cut -f1)); $nfail failure(s)"
  cp "$log" "$W/log.txt"
  [ -n "$CW" ] && rm -rf "$CW"
  if [ "$nfail" = 0 ]; then exit 0; else exit 1; fi
}
trap 'finish $?' EXIT

LIBNAME=()
LIBPATH=()
LIBREL=()
LIBSHA=()

say "# device-code-h200.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1 | indent || true
for f in "$GPUIMG" "$SELFTEST"; do
  [ -x "$f" ] || bad "missing executable $f (carry .devcarry)"
done
[ -f "$EXPECT80" ] || bad "missing $EXPECT80 (carry .devcarry)"
HAVE_GPUIMG=0
if [ -x "$GPUIMG" ]; then
  HAVE_GPUIMG=1
  say "gpuimg: $("$GPUIMG" --version 2>&1 | head -1)"
fi

# --- a. The python with torch, its libraries, their listings ------------------------------
PY=""
SP=""
cands=()
[ -n "${PYTHON:-}" ] && cands+=("$PYTHON")
cands+=(python3 /usr/local/bin/python3 /usr/bin/python3 /opt/conda/bin/python3)
for c in /opt/*/.venv/bin/python3 /opt/*/bin/python3; do [ -x "$c" ] && cands+=("$c"); done
for c in "${cands[@]}"; do
  p=$(command -v "$c" 2>/dev/null) || continue
  sp=$(env -u PYTHONPATH "$p" -c 'import importlib.util as u, os
s = u.find_spec("torch")
print(os.path.dirname(os.path.dirname(os.path.realpath(s.origin))) if s and s.origin else "")' 2>/dev/null) || continue
  if [ -n "$sp" ] && [ -f "$sp/torch/lib/libtorch_cuda.so" ]; then PY=$p; SP=$sp; break; fi
done
if [ -z "$PY" ]; then
  bad "no python3 with torch (and torch/lib/libtorch_cuda.so) found; tried: ${cands[*]}"
  exit 1
fi
say "python: $PY; site-packages: $SP"

say "probe: import torch with the original site-packages"
rc=0
env -u PYTHONPATH -u CUDA_MODULE_LOADING "$PY" "$HERE/torch_ops.py" --probe > "$W/probe-orig.json" 2> "$W/probe-orig.err" || rc=$?
[ "$rc" = 0 ] || { bad "probe (import torch) exited $rc: $(tail -3 "$W/probe-orig.err" | tr '\n' ' ')"; exit 1; }
pyget() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); v = eval(sys.argv[2]); print(v if v is not None else "")' "$@"; }
TORCH_VERSION=$(pyget "$W/probe-orig.json" 'd["torch_version"]')
lt=$(pyget "$W/probe-orig.json" '(d["libtorch_cuda"] or [""])[0]')
ln=$(pyget "$W/probe-orig.json" '(d["libnccl"] or [""])[0]')
say "torch $TORCH_VERSION maps: libtorch_cuda.so=${lt:-none}; libnccl=${ln:-none}"
if [ -z "$lt" ]; then
  lt=$SP/torch/lib/libtorch_cuda.so
  note "importing torch mapped no libtorch_cuda.so; using $lt"
fi
if [ -z "$ln" ]; then
  ln=$(find "$SP" \( -name 'libnccl.so.2' -o -name 'libnccl.so.2.*' \) \( -type f -o -type l \) 2>/dev/null | sort | head -1) || true
  if [ -n "$ln" ]; then note "importing torch mapped no libnccl; found $ln under site-packages"
  else bad "no libnccl.so.2 mapped by torch nor found under $SP"; fi
fi
for name in libtorch_cuda libnccl; do
  if [ "$name" = libtorch_cuda ]; then p=$lt; else p=$ln; fi
  [ -n "$p" ] || continue
  real=$(realpath "$p")
  case "$real" in
    "$SP"/*) ;;
    *) bad "$name is $real, outside $SP: it cannot be pruned in a copy of site-packages"; continue ;;
  esac
  LIBNAME+=("$name")
  LIBPATH+=("$real")
  LIBREL+=("${real#"$SP"/}")
done

for i in "${!LIBNAME[@]}"; do
  n=${LIBNAME[i]}
  LIBSHA[i]=$(sha256sum "${LIBPATH[i]}" | cut -d' ' -f1)
  size=$(stat -c %s "${LIBPATH[i]}")
  say "$n: ${LIBREL[i]}, $size bytes, sha256 ${LIBSHA[i]:0:16}…"
  if [ "$HAVE_GPUIMG" = 1 ]; then
    t0=$(date +%s.%N)
    rc=0
    "$GPUIMG" device-code list --json "${LIBPATH[i]}" > "$W/list-orig-$n.json" 2> "$W/list-orig-$n.err" || rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    if [ "$rc" != 0 ]; then
      bad "gpuimg device-code list $n exited $rc: $(head -3 "$W/list-orig-$n.err" | tr '\n' ' ')"
      sum="list failed (exit $rc)"
    else
      sum=$("$PY" "$HERE/devcode_listing.py" summary "$W/list-orig-$n.json" 2>&1) || true
      grep -q 'understood=true' <<< "$sum" || bad "gpuimg does not understand the original $n: $sum (pruning is not exercised on it)"
    fi
    say "  list ($secs s): $sum"
    echo "| $n original (\`${LIBREL[i]}\`) | $sum | $size | \`${LIBSHA[i]:0:16}…\` |" >> "$W/t-libs.md"
  fi
done

# --- b. The pruned copies ---------------------------------------------------------------
dev() { stat -c %d "$1"; }
for d in /tmp /var/tmp; do
  if [ -d "$d" ] && [ "$(dev "$d")" = "$(dev "$SP")" ]; then CW=$(mktemp -d "$d/gpuimg-devcode-site.XXXX"); break; fi
done
[ -n "$CW" ] || CW=$(mktemp -d /tmp/gpuimg-devcode-site.XXXX)
COPY_METHOD=""
TOPS=" torch "
for r in "${LIBREL[@]}"; do
  case "$TOPS" in *" ${r%%/*} "*) ;; *) TOPS+="${r%%/*} " ;; esac
done

make_copy() { # DEST: the copy of site-packages (see the header)
  local dst=$1 e name method=hardlinks
  mkdir -p "$dst"
  for e in "$SP"/* "$SP"/.[!.]*; do
    [ -e "$e" ] || [ -L "$e" ] || continue
    name=${e##*/}
    case "$TOPS" in
      *" $name "*)
        if ! cp -al "$e" "$dst/$name" 2> /dev/null; then
          rm -rf "${dst:?}/$name"
          cp -a "$e" "$dst/$name" || { echo "failed (cp -a $e)"; return 0; }
          method=copies
        fi ;;
      *) ln -s "$e" "$dst/$name" ;;
    esac
  done
  echo "$method"
}

declare -A PRED=()
prune_copy() { # TAG CC: a copy pruned for CC
  local tag=$1 cc=$2 dst i n src to tmp rc sum chk
  dst=$CW/site-$tag
  local t0
  t0=$(date +%s)
  local method
  method=$(make_copy "$dst")
  case "$method" in failed*) bad "copy $tag: $method"; return 0 ;; esac
  COPY_METHOD="${COPY_METHOD:+$COPY_METHOD, }$tag: $(tr ' ' '+' <<< "$TOPS" | sed 's/^+//; s/+$//') as $method, the rest linked"
  say "copy $tag: $dst ($method for:$TOPS; $(($(date +%s) - t0)) s)"
  for i in "${!LIBNAME[@]}"; do
    n=${LIBNAME[i]}
    src=${LIBPATH[i]}
    to=$dst/${LIBREL[i]}
    tmp=$(dirname "$to")/.${to##*/}.gpuimg-prune-tmp
    rm -f "$tmp"
    rc=0
    "$GPUIMG" device-code prune --for "$cc" "$src" "$tmp" > "$W/prune-$tag-$n.out" 2> "$W/prune-$tag-$n.err" || rc=$?
    say "prune --for $cc $n: exit $rc: $(head -1 "$W/prune-$tag-$n.out")"
    grep -i warn "$W/prune-$tag-$n.err" | head -3 | indent || true
    if [ "$rc" != 0 ] || [ ! -f "$tmp" ]; then
      bad "gpuimg device-code prune --for $cc $n exited $rc (or wrote nothing): $(head -3 "$W/prune-$tag-$n.err" | tr '\n' ' ')"
      rm -f "$tmp"
      continue
    fi
    chmod --reference="$src" "$tmp" 2> /dev/null || true
    mv -f "$tmp" "$to"   # replaces the copy's entry; never writes through a hard link
    [ "$(stat -c %s "$src")" = "$(stat -c %s "$to")" ] || bad "$n pruned for $cc: size $(stat -c %s "$to") != original $(stat -c %s "$src")"
    if cmp -s "$src" "$to"; then bad "$n pruned for $cc is byte-identical to the original (nothing pruned)"; fi
    rc=0
    "$GPUIMG" device-code list --json "$to" > "$W/list-$tag-$n.json" 2> "$W/list-$tag-$n.err" || rc=$?
    if [ "$rc" != 0 ]; then
      bad "gpuimg device-code list of $n pruned for $cc exited $rc"
      sum="list failed (exit $rc)"
      chk="-"
    else
      sum=$("$PY" "$HERE/devcode_listing.py" summary "$W/list-$tag-$n.json" 2>&1) || true
      rc=0
      chk=$("$PY" "$HERE/devcode_listing.py" check-prune "$W/list-orig-$n.json" "$W/list-$tag-$n.json" --for "$cc" \
            --json "$W/check-prune-$tag-$n.json" 2>&1) || rc=$?
      [ "$rc" = 0 ] || bad "$n pruned for $cc: $(tr '\n' ' ' <<< "$chk")"
    fi
    say "  pruned list: $sum"
    say "  $chk"
    # NVIDIA's own listing, before and after, when cuobjdump was carried (independent of gpuimg).
    if [ -x "$ROOT/.devcarry/cuobjdump" ]; then
      for which in "orig:$src" "$tag:$to"; do
        f=${which#*:}; w=${which%%:*}
        [ -f "$W/cuobjdump-$w-$n.txt" ] && continue
        "$ROOT/.devcarry/cuobjdump" --list-elf --list-ptx "$f" 2>&1 \
          | sed -n 's/^\(ELF\|PTX\) file.*\.\(sm_[0-9a-z]*\)\.\(cubin\|ptx\)$/\1 \2/p' \
          | sort | uniq -c > "$W/cuobjdump-$w-$n.txt" || true
        say "  cuobjdump $w $n: $(tr -s ' \n' ' ' < "$W/cuobjdump-$w-$n.txt")"
        echo "- cuobjdump --list-elf --list-ptx, $n $w: $(tr -s ' \n' ' ' < "$W/cuobjdump-$w-$n.txt")" >> "$W/t-other.md"
      done
    fi
    echo "| $n pruned for $cc | $sum; $(tr '\n' ' ' <<< "$chk") | $(stat -c %s "$to") | \`$(sha256sum "$to" | cut -c1-16)…\` |" >> "$W/t-libs.md"
  done
}

P90=""
P80=""
if [ "$HAVE_GPUIMG" = 1 ] && [ "${#LIBNAME[@]}" -gt 0 ]; then
  prune_copy p90 9.0
  [ -d "$CW/site-p90" ] && P90=$CW/site-p90
  prune_copy p80 8.0
  [ -d "$CW/site-p80" ] && P80=$CW/site-p80
fi

# --- d (first half). The prediction for the 8.0-only copy, before it runs ------------------
P80_STRICT=0       # both libraries predicted runnable on this GPU: no op may fail
P80_TORCH_DEAD=0   # libtorch_cuda.so predicted not runnable: some op must fail
if [ -n "$P80" ]; then
  {
    echo "# Can an H200 (cc 9.0) still run each library of the copy pruned for 8.0 only?"
    echo "# From gpuimg device-code list --json of the pruned files, before any run. Per fatbin container:"
    echo "# runnable if it keeps sm_90, sm_90a, sm_90f or PTX compute_XY with XY <= 90 (the driver's rule);"
    echo "# RUNNABLE = every container, PARTLY = some, NOT-RUNNABLE = none, UNKNOWN = listing not understood."
  } > "$OUT/sm80-prediction.txt"
  all_runnable=1
  for i in "${!LIBNAME[@]}"; do
    n=${LIBNAME[i]}
    if [ -f "$W/list-p80-$n.json" ]; then
      "$PY" "$HERE/devcode_listing.py" predict --cc 9.0 --name "$n" --json "$W/prediction-p80-$n.json" \
        "$W/list-p80-$n.json" >> "$OUT/sm80-prediction.txt" 2>&1 || echo "$n: UNKNOWN (prediction failed)" >> "$OUT/sm80-prediction.txt"
      v=$(pyget "$W/prediction-p80-$n.json" 'd["verdict"]' 2> /dev/null) || v=unknown
    else
      echo "$n: UNKNOWN (no listing of the pruned file)" >> "$OUT/sm80-prediction.txt"
      v=unknown
    fi
    PRED[$n]=$v
    [ "$v" = runnable ] || all_runnable=0
    [ "$n" = libtorch_cuda ] && [ "$v" = not-runnable ] && P80_TORCH_DEAD=1
  done
  P80_STRICT=$all_runnable
  if [ "$P80_STRICT" = 1 ]; then
    echo "=> expected: every op runs and matches the original" >> "$OUT/sm80-prediction.txt"
  else
    echo "=> expected: ops that need the pruned kernels fail (e.g. 'no kernel image is available');" \
         "ops served by unpruned libraries (cuBLAS, cuDNN) may run and must then match the original; never other numbers" \
         >> "$OUT/sm80-prediction.txt"
  fi
  cp "$OUT/sm80-prediction.txt" "$W/"
  say "prediction for the 8.0-only copy on cc 9.0:"
  grep -v '^#' "$OUT/sm80-prediction.txt" | indent
fi

# --- e. The self-test must refuse an image whose device code is sm_80 only ---------------
if [ -x "$SELFTEST" ] && [ -f "$EXPECT80" ]; then
  rc=0
  timeout -k 5 120 "$SELFTEST" --expect "$EXPECT80" --report "$W/selftest-sm80.json" \
    > "$W/selftest-sm80.txt" 2> "$W/selftest-sm80.err" || rc=$?
  dc=$("$PY" - "$W/selftest-sm80.json" <<'PY' 2>&1
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no report: %s" % e); sys.exit()
fails = [c for c in r.get("checks", []) if c["name"].startswith("device-code") and c["status"] == "fail"]
others = [c["name"] for c in r.get("checks", []) if c["status"] == "fail" and not c["name"].startswith("device-code")]
print("verdict %s; device-code failed: %d (%s); other failed checks: %s" % (
    r.get("verdict"), len(fails), (fails[0].get("detail") or "")[:300] if fails else "-", ", ".join(others) or "none"))
PY
  ) || true
  say "gpuimg-selftest --expect expect-sm80.json: exit $rc (want 1); $dc"
  ok=1
  [ "$rc" = 1 ] || { ok=0; bad "gpuimg-selftest with the sm_80-only expectation exited $rc, expected 1 (a check failed)"; }
  if ! grep -q 'device-code failed: [1-9]' <<< "$dc"; then
    ok=0; bad "gpuimg-selftest did not fail a device-code check: $dc"
  elif ! grep -qi 'device code' <<< "$dc"; then
    ok=0; bad "gpuimg-selftest's device-code failure does not talk about device code: $dc"
  fi
  grep -i -m3 'device.code\|no kernel image' "$W/selftest-sm80.txt" "$W/selftest-sm80.err" | indent || true
  echo "- gpuimg-selftest --expect expect-sm80.json: exit $rc (want 1) — $dc — $([ "$ok" = 1 ] && echo ok || echo '**FAILED**')" >> "$W/t-other.md"
fi

# --- c/d. The torch runs ------------------------------------------------------------------
declare -A RUN_OK=()
run_ops() { # LABEL SITE(empty = the original) lazy|eager
  local label=$1 site=$2 mode=$3 rem t rc t0 secs check crc
  rem=$((RUNS_BUDGET_S - ($(date +%s) - T0)))
  if [ "$rem" -lt 40 ]; then
    note "$label not run: the time budget (RUNS_BUDGET_S=$RUNS_BUDGET_S) is spent"
    echo "| $label | ${site:+copy }\`${site:-original}\` | $mode | skipped | - | - | - | - | - | - | - |" >> "$W/t-runs.md"
    return 0
  fi
  t=$RUN_TIMEOUT_S
  [ "$rem" -lt "$t" ] && t=$rem
  local cmd=(env -u CUDA_MODULE_LOADING -u PYTHONPATH "CUDA_CACHE_PATH=$CW/nvcache-$label")
  [ "$mode" = eager ] && cmd+=(CUDA_MODULE_LOADING=EAGER)
  [ -n "$site" ] && cmd+=("PYTHONPATH=$site")
  say "run $label (${site:-original site-packages}, $mode, limit $t s)"
  t0=$(date +%s)
  rc=0
  timeout -k 10 "$t" "${cmd[@]}" "$PY" "$HERE/torch_ops.py" --label "$label" --pt "$W/ops-$label.pt" \
    --json "$W/ops-$label.json" > "$W/ops-$label.log" 2>&1 || rc=$?
  secs=$(($(date +%s) - t0))
  local want_t="" want_n="" i base
  for i in "${!LIBNAME[@]}"; do
    if [ -n "$site" ]; then base=$site/${LIBREL[i]}; else base=${LIBPATH[i]}; fi
    case ${LIBNAME[i]} in libtorch_cuda) want_t=$base ;; libnccl) want_n=$base ;; esac
  done
  [ -n "$want_t" ] || want_t=${site:-$SP}/torch/lib/libtorch_cuda.so
  crc=0
  check=$("$PY" "$HERE/ops_run_check.py" "$W/ops-$label.json" --torch "$want_t" --nccl "$want_n" --mode "$mode" 2>&1) || crc=$?
  say "  $label: exit $rc in $secs s; $(head -1 <<< "$check")"
  tail -n +2 <<< "$check" | head -12 | indent
  echo "| $label | ${site:+copy }\`${site:-original}\` | $([ "$mode" = eager ] && echo EAGER || echo 'unset (lazy)') | $rc | $secs | $(head -1 <<< "$check") |" >> "$W/t-runs.md"
  if [ "$crc" = 1 ]; then
    bad "$label DID NOT LOAD THE LIBRARIES IT WAS MEANT TO TEST: $(grep '^problem' <<< "$check" | tr '\n' ' ') — its results are not compared"
    return 0
  fi
  if [ "$rc" != 0 ] || [ ! -f "$W/ops-$label.pt" ]; then
    bad "$label: torch_ops.py exited $rc (124/137: timed out after $t s; 134/139: crashed); last lines: $(tail -2 "$W/ops-$label.log" | tr '\n' ' ')"
    return 0
  fi
  RUN_OK[$label]=1
}

have() { [ -n "$1" ] && [ -n "${RUN_OK[$1]:-}" ]; }

compare() { # B A C EXPECTATION(strict|errors-ok|report) [extra flags]
  local b=$1 a=$2 c=$3 how=$4 rc flags=() args res
  if ! have "$a" || ! have "$b"; then
    echo "| $b | $a | ${c:--} | - | - | - | - | - | - | $how | not compared (a run is missing or invalid) |" >> "$W/t-cmp.md"
    [ "$how" = report ] || bad "$b not compared with $a: a run is missing or invalid"
    return 0
  fi
  have "$c" || c=""
  case $how in
    strict) flags=(--fail-on-error) ;;
    report) flags=(--report-only) ;;
  esac
  args=("$W/ops-$a.pt" "$W/ops-$b.pt")
  [ -n "$c" ] && args+=("$W/ops-$c.pt")
  rc=0
  "$PY" "$HERE/compare_ops.py" "${args[@]}" "${flags[@]}" --json "$W/compare-$b-vs-$a.json" > "$W/compare-$b-vs-$a.txt" 2>&1 || rc=$?
  local counts
  counts=$("$PY" - "$W/compare-$b-vs-$a.json" <<'PY' 2> /dev/null
import json, sys
c = json.load(open(sys.argv[1]))["counts"]
print(" | ".join(str(c.get(k, 0)) for k in ["identical", "within-nondeterminism", "DIFFERENT", "error", "both-error", "original-error"]))
PY
  ) || counts="? | ? | ? | ? | ? | ?"
  if [ "$rc" = 0 ]; then res=ok; elif [ "$rc" = 1 ]; then res="**FAILED**"; else res="compare_ops exit $rc"; fi
  say "compare $b vs $a${c:+ (C=$c)}: $(grep '^counts' "$W/compare-$b-vs-$a.txt" || echo "exit $rc")"
  grep -E '  (DIFFERENT|error|within-nondeterminism) ' "$W/compare-$b-vs-$a.txt" | head -20 | indent || true
  echo "| $b | $a | ${c:--} | $counts | $how | $res |" >> "$W/t-cmp.md"
  if [ "$rc" != 0 ]; then
    bad "$b against $a: $(grep '^counts' "$W/compare-$b-vs-$a.txt" || echo "compare_ops.py exit $rc") (expectation: $how)"
  fi
}

# In the order that matters most if the time budget runs out.
run_ops orig-lazy-1 "" lazy
[ -n "$P90" ] && run_ops p90-lazy "$P90" lazy
run_ops orig-lazy-2 "" lazy
[ -n "$P80" ] && run_ops p80-lazy "$P80" lazy
run_ops orig-eager-1 "" eager
[ -n "$P90" ] && run_ops p90-eager "$P90" eager
run_ops orig-eager-2 "" eager
[ -n "$P80" ] && run_ops p80-eager "$P80" eager

say "comparisons"
compare orig-lazy-2 orig-lazy-1 "" report
compare orig-eager-2 orig-eager-1 "" report
compare orig-eager-1 orig-lazy-1 orig-lazy-2 report
if [ -n "$P90" ]; then
  compare p90-lazy orig-lazy-1 orig-lazy-2 strict
  compare p90-eager orig-eager-1 orig-eager-2 strict
fi
if [ -n "$P80" ]; then
  how=errors-ok
  [ "$P80_STRICT" = 1 ] && how=strict
  for m in lazy eager; do
    compare "p80-$m" "orig-$m-1" "orig-$m-2" "$how"
    if have "p80-$m" && [ "$P80_TORCH_DEAD" = 1 ]; then
      nerr=$(pyget "$W/ops-p80-$m.json" 'sum(1 for r in d["ops"].values() if not r["ok"])') || nerr=0
      [ "${nerr:-0}" -gt 0 ] || bad "p80-$m: no op failed although libtorch_cuda.so pruned for 8.0 keeps nothing cc 9.0 can run (was it pruned?)"
      # Errors other than the expected kind are worth a look (not a failure by themselves).
      odd=$(pyget "$W/ops-p80-$m.json" '"; ".join(sorted({(r["error"] or "").splitlines()[0][:120] for r in d["ops"].values() if not r["ok"] and not any(k in (r["error"] or "") for k in ("no kernel image", "NoKernelImage", "CUDA error", "NCCL", "nccl", "CUDA driver error", "cuDNN", "CUBLAS", "process group"))}))') || odd=""
      [ -z "$odd" ] || note "p80-$m: errors not of the 'no kernel image' / CUDA / NCCL kind: $odd"
    fi
  done
fi

say "done in $(($(date +%s) - T0)) s"
