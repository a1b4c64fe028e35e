#!/usr/bin/env python3
"""Check one torch_ops.py run's summary: did it load the libraries it was meant to, in the mode
it was meant to?

    ops_run_check.py SUMMARY.json --torch PATH --nccl PATH --mode lazy|eager

PATH is the library file the run must have mapped (compared after realpath with every path
/proc/self/maps showed for libtorch_cuda.so / libnccl.so*; exactly that one, no other copy);
--nccl '' skips the NCCL check. --mode lazy means CUDA_MODULE_LOADING was unset (the default,
lazy), eager that it was EAGER.

Prints one line of markdown table cells (`ops ok | errors | init | libtorch_cuda | libnccl |
verified`), then one line per problem and the distinct first lines of the op errors with their
counts. Exit 0 when verified, 1 when the run loaded other libraries or ran in another mode, 2
when the summary cannot be read.
"""

import argparse
import collections
import json
import os
import sys


def short(p, n=70):
    return p if len(p) <= n else "…" + p[-(n - 1):]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("--torch", required=True)
    ap.add_argument("--nccl", default="")
    ap.add_argument("--mode", choices=["lazy", "eager"], required=True)
    args = ap.parse_args()
    try:
        with open(args.summary) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        print("- | - | - | - | - | NO SUMMARY")
        print("cannot read %s: %s" % (args.summary, e))
        return 2

    problems = []
    real = os.path.realpath
    lt = s.get("libtorch_cuda") or []
    ln = s.get("libnccl") or []
    want_lt = real(args.torch)
    if [real(p) for p in lt] != [want_lt]:
        problems.append("libtorch_cuda.so mapped: %s; expected exactly %s" % (lt or "none", want_lt))
    if args.nccl:
        want_ln = real(args.nccl)
        if [real(p) for p in ln] != [want_ln]:
            problems.append("libnccl mapped: %s; expected exactly %s" % (ln or "none", want_ln))
    env = s.get("environment") or {}
    mode = env.get("CUDA_MODULE_LOADING") if env else None
    if env:
        if args.mode == "lazy" and mode not in (None, ""):
            problems.append("CUDA_MODULE_LOADING=%s, expected unset (lazy)" % mode)
        if args.mode == "eager" and mode != "EAGER":
            problems.append("CUDA_MODULE_LOADING=%s, expected EAGER" % mode)
    ops = s.get("ops") or {}
    ok = sum(1 for r in ops.values() if r.get("ok"))
    err = sum(1 for r in ops.values() if not r.get("ok"))
    finished = s.get("finished")
    init = s.get("cuda_init") or "-"
    init_cell = "ok" if init == "ok" else "ERROR"
    if not finished:
        cur = s.get("current")
        problems.append("run did not finish%s" % (" (was in op %s)" % cur if cur else ""))
    cells = [
        str(ok),
        str(err),
        "%s (%.1f s)" % (init_cell, s.get("cuda_init_seconds") or 0),
        "`%s`" % short(",".join(lt) or "none"),
        "`%s`" % short(",".join(ln) or "none"),
        "yes" if not [p for p in problems if "mapped" in p or "CUDA_MODULE_LOADING" in p] else "**NO**",
    ]
    print(" | ".join(cells))
    for p in problems:
        print("problem: " + p)
    if init != "ok":
        print("cuda init: " + init.splitlines()[0][:300])
    firsts = collections.Counter(
        (r.get("error") or "").strip().splitlines()[0][:200] for r in ops.values() if not r.get("ok") and r.get("error")
    )
    for line, n in firsts.most_common():
        print("error x%d: %s" % (n, line))
    wrong = [p for p in problems if "mapped" in p or "CUDA_MODULE_LOADING" in p]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
