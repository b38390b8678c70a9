#!/usr/bin/env python3
"""tools/plot_bench.py (installed as dcomm-plot) on the committed results: a PNG and a Markdown table come out;
a missing input gives one line. Skips (77) without
matplotlib."""
import os
import subprocess
import sys
import tempfile

SRC = os.environ["DCOMM_SOURCE_DIR"]
TOOL = os.path.join(SRC, "tools", "plot_bench.py")
DATA = os.path.join(SRC, "docs", "bench", "results-2rank-host.json")

with tempfile.TemporaryDirectory() as d:
    png = os.path.join(d, "out.png")
    p = subprocess.run([TOOL, DATA, "-o", png, "--collectives", "all_reduce,sendrecv"], capture_output=True,
                       text=True, timeout=120)
    if "matplotlib is missing" in p.stderr:
        print("skip: no matplotlib")
        sys.exit(77)
    if p.returncode != 0 or not os.path.exists(png):
        sys.exit(f"FAIL: plot_bench.py exited {p.returncode}: {p.stdout}{p.stderr}")
    with open(png, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            sys.exit("FAIL: not a PNG")
    p = subprocess.run([TOOL, DATA, "--markdown", "8,2M", "--time", "p50"], capture_output=True, text=True,
                       timeout=60)
    lines = p.stdout.splitlines()
    if p.returncode != 0 or not lines[0].startswith("| collective |") or not any("| mpi" in l for l in lines):
        sys.exit(f"FAIL: markdown table: {p.stdout}{p.stderr}")
    # A missing or wrong input file: one line naming it, no traceback.
    for bad, want in ((os.path.join(d, "nope.json"), "cannot read"), (png, "is not JSON")):
        p = subprocess.run([TOOL, bad, "--markdown", "8"], capture_output=True, text=True, timeout=60)
        err = p.stderr.strip()
        if p.returncode == 0 or "Traceback" in err or len(err.splitlines()) != 1 or want not in err or bad not in err:
            sys.exit(f"FAIL: {bad}: want one line with '{want}', got exit {p.returncode}: {p.stderr}")
print("ok")
