#!/usr/bin/env python3
"""Read a `cargo build --timings` report and print where the compile's time went: the total,
and the floor the dependencies alone set (when the last unit that is not one of this
workspace's packages finished). Usage: compile-floor.py [target/cargo-timings/cargo-timing.html]"""
import glob, json, os, re, sys

path = sys.argv[1] if len(sys.argv) > 1 else "target/cargo-timings/cargo-timing.html"
if os.path.isdir(path):
    path = max(glob.glob(os.path.join(path, "cargo-timing-*.html")), key=os.path.getmtime)
html = open(path, encoding="utf-8").read()
m = re.search(r"const UNIT_DATA = (\[.*?\n\]);", html, re.S)
if not m:
    sys.exit(f"{path}: no UNIT_DATA (not a cargo --timings report?)")
units = json.loads(m.group(1))
ours = {"gpuimg"} | {n for n in (u["name"] for u in units) if n.startswith("gpuimg-") or n.startswith("gpuimg_")}
end = lambda u: u["start"] + u["duration"]
total = max(map(end, units), default=0.0)
deps = [u for u in units if u["name"] not in ours]
floor = max(map(end, deps), default=0.0)
print(f"units: {len(units)} ({len(units) - len(deps)} of this workspace)")
print(f"total compile: {total:.1f} s; dependencies alone end at {floor:.1f} s; this workspace's own after them: {total - floor:.1f} s")
