#!/usr/bin/env bash
# Run each fuzz target (tests/it/fuzz; its seeds and regressions in tests/fuzz) for N seconds
# (default 60) from a fresh seed, one after the other, and print one line per target:
# iterations, seconds, crashes, and what became of the inputs. Failing inputs are saved under
# <target dir>/tmp/fuzz/crashes/<target>/; an input that killed the process (hang, memory cap)
# is reported from <target>.current. Once fixed, copy such an input into
# tests/fuzz/regressions/<target>/ so every test run replays it.
#   GPUIMG_FUZZ_SEED=S        repeat a run (each line prints its seed)
#   GPUIMG_FUZZ_TIMEOUT=S     seconds of CPU time one input may take (default 10)
#   GPUIMG_FUZZ_MEMORY_MB=M   heap cap of the fuzz process (default 1024)
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(profile tarball deb release packages require elf pypi pypi_pages wheel deflate kmod)
out="${CARGO_TARGET_DIR:-target}/tmp/fuzz"
cargo test --locked --test it --no-run >/dev/null 2>&1 || cargo test --locked --test it --no-run
failed=0
for t in "${targets[@]}"; do
    log=$(mktemp)
    rm -f "$out/$t.current"
    set +e
    GPUIMG_FUZZ_SECONDS=$secs cargo test --locked --test it -- --exact "fuzz::fuzz_$t" \
        --nocapture --test-threads=1 >"$log" 2>&1
    rc=$?
    set -e
    line=$(grep -oE "fuzz $t: [0-9]+ iterations.*" "$log" | tail -1 || true)
    if [ -n "$line" ]; then
        echo "$line"
    elif [ -f "$out/$t.current" ]; then
        mkdir -p "$out/crashes/$t"
        kept="$out/crashes/$t/died-$(sha256sum "$out/$t.current" | cut -c1-16)"
        mv "$out/$t.current" "$kept"
        why=$(grep -m1 -oE "fuzz [^:]*: (an input ran|resident memory|.*memory cap).*" "$log" ||
            tail -1 "$log")
        echo "fuzz $t: the process died (1 crash): ${why#fuzz *: }"
        echo "  input saved as $kept"
    else
        echo "fuzz $t: did not run:"
        tail -20 "$log"
    fi
    if [ "$rc" -ne 0 ]; then
        failed=1
        grep -oE "fuzz $t: (seed [0-9]+|iteration [0-9]+|/[^:]*): .*|^  input saved as .*" "$log" |
            head -40 || true
    fi
    rm -f "$log"
done
exit "$failed"
