#!/usr/bin/env python3
"""Compare the results of two torch_ops.py runs, op by op.

    compare_ops.py A.pt B.pt [C.pt] [--json OUT.json] [--fail-on-error] [--factor 4] [--report-only]

A is a run of the original libraries, B the run under test, C (optional) a second run of the
original: how far A and C differ is the original's own run-to-run nondeterminism. Each op of B
is classified:

  identical               every result tensor bit-identical to A's
  within-nondeterminism   not identical, but A and C differ for this op too, and
                          max|A-B| <= factor * max|A-C| (factor 4 by default)
  DIFFERENT               anything else: other values, shape, dtype or set of results
  error                   B raised where A did not (B's error text is shown)
  both-error              A and B both raised (an op this machine cannot run at all)
  original-error          A raised, B did not (reported, not counted as a failure)

Exit status: 1 if any op is DIFFERENT (or, with --fail-on-error, in error); 0 otherwise, and
always 0 with --report-only; 2 if a file cannot be read.
"""

import argparse
import json
import math
import sys

CLASSES = ["identical", "within-nondeterminism", "DIFFERENT", "error", "both-error", "original-error"]


def load(path):
    import torch

    try:
        d = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # a torch without weights_only
        d = torch.load(path, map_location="cpu")
    if not isinstance(d, dict) or d.get("format") != 1:
        raise ValueError("%s is not a torch_ops.py result (format 1)" % path)
    return d


def parts_of(run, op):
    t = run["tensors"]
    return {k: v for k, v in t.items() if k == op or k.startswith(op + "/")}


def bit_identical(a, b):
    import torch

    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def max_abs_diff(a, b):
    """Largest |a-b| over elements that are not bit-identical; inf where NaN meets a number or
    infinities of other sign meet; None when shapes or dtypes differ."""
    import torch

    if a.dtype != b.dtype or a.shape != b.shape:
        return None
    if a.numel() == 0:
        return 0.0
    if a.dtype == torch.bool:
        return float((a != b).any().item())
    ad, bd = a.to(torch.float64), b.to(torch.float64)
    both_nan = torch.isnan(ad) & torch.isnan(bd)
    d = (ad - bd).abs()
    d = torch.where(both_nan | (ad == bd), torch.zeros_like(d), d)
    d = torch.where(torch.isnan(d), torch.full_like(d, math.inf), d)
    return float(d.max().item())


def op_diff(x, y, op):
    """(identical, max abs diff or None when not comparable, note)."""
    px, py = parts_of(x, op), parts_of(y, op)
    if set(px) != set(py):
        return False, None, "result parts differ: %s vs %s" % (sorted(px), sorted(py))
    identical, worst, notes = True, 0.0, []
    for k in sorted(px):
        a, b = px[k], py[k]
        if a.dtype != b.dtype or a.shape != b.shape:
            return False, None, "%s: %s%s vs %s%s" % (k, a.dtype, list(a.shape), b.dtype, list(b.shape))
        if bit_identical(a, b):
            continue
        identical = False
        d = max_abs_diff(a, b)
        notes.append("%s max|d|=%.3g" % (k, d))
        worst = max(worst, d)
    return identical, worst, "; ".join(notes)


def first_line(text):
    return (text or "").strip().splitlines()[0][:240] if text else ""


def classify(a, b, c, factor):
    rows = []
    order = list(a["ops"]) + [o for o in b["ops"] if o not in a["ops"]]
    for op in order:
        ea, eb = a["errors"].get(op), b["errors"].get(op)
        in_a, in_b = op in a["ops"], op in b["ops"]
        row = {"op": op, "class": None, "max_abs_diff": None, "orig_max_abs_diff": None, "note": "", "error": None}
        if not in_b:
            row.update({"class": "error", "error": "op missing from B"})
        elif not in_a:
            row.update({"class": "original-error", "note": "op missing from A"})
        elif ea and eb:
            row.update({"class": "both-error", "error": eb, "note": "A: " + first_line(ea)})
        elif eb:
            row.update({"class": "error", "error": eb})
        elif ea:
            row.update({"class": "original-error", "note": "A: " + first_line(ea)})
        else:
            same, d, note = op_diff(a, b, op)
            row["max_abs_diff"] = 0.0 if same else d
            row["note"] = note
            if c is not None and op in c["ops"] and not c["errors"].get(op):
                c_same, c_d, c_note = op_diff(a, c, op)
                row["orig_max_abs_diff"] = 0.0 if c_same else c_d
            if same:
                row["class"] = "identical"
            elif (
                d is not None
                and row["orig_max_abs_diff"] is not None
                and row["orig_max_abs_diff"] > 0
                and d <= factor * row["orig_max_abs_diff"]
            ):
                row["class"] = "within-nondeterminism"
            else:
                row["class"] = "DIFFERENT"
        rows.append(row)
    return rows


def fmt(v):
    if v is None:
        return "-"
    if v == 0:
        return "0"
    return "%.3g" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="a run of the original")
    ap.add_argument("b", help="the run under test")
    ap.add_argument("c", nargs="?", help="a second run of the original (its nondeterminism)")
    ap.add_argument("--json", help="write the comparison here")
    ap.add_argument("--factor", type=float, default=4.0)
    ap.add_argument("--fail-on-error", action="store_true", help="an op that errors in B only is a failure")
    ap.add_argument("--report-only", action="store_true", help="always exit 0 (e.g. original vs original)")
    args = ap.parse_args()
    try:
        a, b = load(args.a), load(args.b)
        c = load(args.c) if args.c else None
    except Exception as e:
        print("compare_ops.py: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 2

    rows = classify(a, b, c, args.factor)
    counts = {k: 0 for k in CLASSES}
    for r in rows:
        counts[r["class"]] += 1

    width = max([len(r["op"]) for r in rows] + [2])
    print("A=%s (%s)  B=%s (%s)%s" % (args.a, a.get("label"), args.b, b.get("label"),
                                     "  C=%s (%s)" % (args.c, c.get("label")) if c else ""))
    print("%-*s  %-21s  %-10s  %-10s  %s" % (width, "op", "class", "max|A-B|", "max|A-C|", "note / error"))
    for r in rows:
        tail = first_line(r["error"]) if r["error"] else r["note"]
        print("%-*s  %-21s  %-10s  %-10s  %s" % (width, r["op"], r["class"], fmt(r["max_abs_diff"]),
                                                 fmt(r["orig_max_abs_diff"]), tail))
    print("counts: " + ", ".join("%s %d" % (k, v) for k, v in counts.items() if v))

    failed = counts["DIFFERENT"] > 0 or (args.fail_on_error and counts["error"] > 0)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "a": args.a, "b": args.b, "c": args.c,
                    "labels": {"a": a.get("label"), "b": b.get("label"), "c": c.get("label") if c else None},
                    "factor": args.factor, "fail_on_error": args.fail_on_error,
                    "counts": counts, "failed": failed, "ops": rows,
                },
                f, indent=1,
            )
            f.write("\n")
    if args.report_only:
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
