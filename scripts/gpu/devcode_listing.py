#!/usr/bin/env python3
"""Read `gpuimg device-code list --json` output: summarise, predict, check a prune.

    devcode_listing.py summary LIST.json
    devcode_listing.py predict --cc 9.0 LIST.json [--name NAME] [--json OUT]
    devcode_listing.py check-prune ORIG.json PRUNED.json --for 9.0 [--for 8.0 ...] [--json OUT]

The listing's shape: {"file", "understood", "reason", "containers": [{"offset", "size",
"entries": [{"kind": "cubin"|"ptx", "target": "sm_90"|"sm_90a"|"sm_100f"|"compute_90", "size"}]}]}.

Which entry a GPU of compute capability X.Y can run is the driver's rule (the same as
DeviceTarget::runs_on in src/expect/libraries.rs): a cubin sm_AB runs on major A, minor >= B;
sm_ABa only on exactly A.B; sm_ABf on major A, minor >= B; PTX compute_AB on A.B or newer
(compute_ABa / compute_ABf as their cubin counterparts).

predict: whether a GPU of that capability can still run the library's device code. Per fatbin
container: covered if at least one of its entries runs there. Verdict: runnable (every container
covered), partly (some), not-runnable (none), unknown (listing not understood / unreadable).
Exit 0 whatever the verdict; 2 on unreadable input.

check-prune: the pruned listing against the original's, for the capabilities pruned for: same
containers (offset and size); each container's entries a sub-multiset of the original's; every
kept entry runs on at least one of those capabilities; every container the original could run
on a capability still can. Exit 1 when a check fails, 2 on unreadable input.
"""

import argparse
import collections
import json
import re
import sys

TARGET = re.compile(r"^(sm|compute)_(\d{2,4})([af]?)$")


def parse_cc(s):
    m = re.match(r"^(\d+)\.(\d+)$", s)
    if not m:
        raise argparse.ArgumentTypeError("compute capability like 9.0, not %r" % s)
    return int(m.group(1)), int(m.group(2))


def parse_target(t):
    """(kind, major, minor, suffix) or None."""
    m = TARGET.match(t or "")
    if not m:
        return None
    digits = m.group(2)
    return m.group(1), int(digits[:-1]), int(digits[-1]), m.group(3)


def runs_on(entry, cc):
    p = parse_target(entry.get("target"))
    if p is None:
        return False
    prefix, major, minor, suffix = p
    ptx = entry.get("kind") == "ptx" or prefix == "compute"
    if suffix == "a":
        return cc == (major, minor)
    if suffix == "f" or not ptx:
        return cc[0] == major and cc[1] >= minor
    return cc >= (major, minor)


def load(path):
    with open(path) as f:
        d = json.load(f)
    if not isinstance(d, dict):
        raise ValueError("%s: not a JSON object" % path)
    return d


def target_counts(listing):
    c = collections.Counter()
    for cont in listing.get("containers") or []:
        for e in cont.get("entries") or []:
            c["%s %s" % (e.get("kind"), e.get("target"))] += 1
    return c


def summary_line(listing):
    conts = listing.get("containers") or []
    n = sum(len(c.get("entries") or []) for c in conts)
    size = sum(int(e.get("size") or 0) for c in conts for e in c.get("entries") or [])
    tc = target_counts(listing)
    top = ", ".join("%s x%d" % (k, v) for k, v in sorted(tc.items()))
    return "understood=%s%s; %d containers, %d entries, %.1f MiB of entries; %s" % (
        str(listing.get("understood")).lower(),
        " (%s)" % listing["reason"] if listing.get("reason") else "",
        len(conts),
        n,
        size / 1048576.0,
        top or "no entries",
    )


def predict(listing, cc):
    conts = listing.get("containers") or []
    if listing.get("understood") is not True:
        return {
            "verdict": "unknown",
            "why": "listing not understood: %s" % (listing.get("reason") or "no reason given"),
            "containers": len(conts),
            "covered": None,
            "empty": None,
            "covering_targets": [],
        }
    covered, empty, cover_targets = 0, 0, collections.Counter()
    for c in conts:
        entries = c.get("entries") or []
        if not entries:
            empty += 1
        good = [e for e in entries if runs_on(e, cc)]
        if good:
            covered += 1
        for e in good:
            cover_targets[e.get("target")] += 1
    if not conts:
        verdict = "not-runnable"
    elif covered == len(conts):
        verdict = "runnable"
    elif covered == 0:
        verdict = "not-runnable"
    else:
        verdict = "partly"
    return {
        "verdict": verdict,
        "why": "%d of %d fatbin containers keep code a cc %d.%d GPU can select (%d containers empty)"
        % (covered, len(conts), cc[0], cc[1], empty),
        "containers": len(conts),
        "covered": covered,
        "empty": empty,
        "covering_targets": sorted(cover_targets),
    }


def check_prune(orig, pruned, ccs):
    problems = []
    if orig.get("understood") is not True:
        problems.append("original listing not understood: %s" % orig.get("reason"))
    if pruned.get("understood") is not True:
        problems.append("pruned listing not understood: %s" % pruned.get("reason"))
    if problems:
        return problems, {}
    oc, pc = orig.get("containers") or [], pruned.get("containers") or []
    # Containers keep their start; a pruned one is shorter (its size field shrinks).
    okey = {c.get("offset"): c for c in oc}
    pkey = {c.get("offset"): c for c in pc}
    shrunk = sum(1 for k in set(okey) & set(pkey) if pkey[k].get("size") > okey[k].get("size"))
    if shrunk:
        problems.append("%d containers grew" % shrunk)
    if set(okey) != set(pkey):
        problems.append(
            "containers differ: %d original, %d pruned, %d only in the original, %d only in the pruned"
            % (len(oc), len(pc), len(set(okey) - set(pkey)), len(set(pkey) - set(okey)))
        )
    kept = dropped = 0
    lost = collections.Counter()
    foreign = collections.Counter()
    extra = 0
    for k in sorted(set(okey) & set(pkey), key=lambda k: k or 0):
        oe = okey[k].get("entries") or []
        pe = pkey[k].get("entries") or []
        ocount = collections.Counter((e.get("kind"), e.get("target"), e.get("size")) for e in oe)
        pcount = collections.Counter((e.get("kind"), e.get("target"), e.get("size")) for e in pe)
        if pcount - ocount:
            extra += 1
        kept += len(pe)
        dropped += max(0, len(oe) - len(pe))
        for e in pe:
            if not any(runs_on(e, cc) for cc in ccs):
                foreign[e.get("target")] += 1
        for cc in ccs:
            if any(runs_on(e, cc) for e in oe) and not any(runs_on(e, cc) for e in pe):
                lost["%d.%d" % cc] += 1
    if extra:
        problems.append("%d containers have entries the original does not" % extra)
    if foreign:
        problems.append(
            "kept entries no target capability can run: %s"
            % ", ".join("%s x%d" % (t, n) for t, n in sorted(foreign.items()))
        )
    if lost:
        problems.append(
            "containers that lost every entry a target capability could run: %s"
            % ", ".join("cc %s x%d" % (cc, n) for cc, n in sorted(lost.items()))
        )
    stats = {"entries_kept": kept, "entries_dropped": dropped, "containers": len(pc)}
    return problems, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary")
    s.add_argument("listing")
    p = sub.add_parser("predict")
    p.add_argument("listing")
    p.add_argument("--cc", type=parse_cc, required=True)
    p.add_argument("--name")
    p.add_argument("--json")
    c = sub.add_parser("check-prune")
    c.add_argument("orig")
    c.add_argument("pruned")
    c.add_argument("--for", dest="ccs", type=parse_cc, action="append", required=True)
    c.add_argument("--json")
    args = ap.parse_args()
    try:
        if args.cmd == "summary":
            print(summary_line(load(args.listing)))
            return 0
        if args.cmd == "predict":
            listing = load(args.listing)
            r = predict(listing, args.cc)
            r["name"] = args.name or listing.get("file") or args.listing
            r["cc"] = "%d.%d" % args.cc
            r["kept_targets"] = dict(sorted(target_counts(listing).items()))
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(r, f, indent=1)
                    f.write("\n")
            kept = ", ".join("%s x%d" % kv for kv in r["kept_targets"].items()) or "none"
            print("%s: %s on cc %s — %s; kept: %s" % (r["name"], r["verdict"].upper(), r["cc"], r["why"], kept))
            return 0
        orig, pruned = load(args.orig), load(args.pruned)
        problems, stats = check_prune(orig, pruned, args.ccs)
    except (OSError, ValueError) as e:
        print("devcode_listing.py: %s" % e, file=sys.stderr)
        return 2
    fors = " ".join("--for %d.%d" % cc for cc in args.ccs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"for": ["%d.%d" % cc for cc in args.ccs], "problems": problems, **stats}, f, indent=1)
            f.write("\n")
    if problems:
        for pr in problems:
            print("check-prune (%s): %s" % (fors, pr))
        return 1
    print("check-prune (%s): ok — %d containers, %d entries kept, %d dropped" % (
        fors, stats["containers"], stats["entries_kept"], stats["entries_dropped"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
