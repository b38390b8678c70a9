#!/usr/bin/env python3
"""Ratio tables from dcomm-bench --vs mpi JSON files: dcomm's time over MPI's, per collective and size.

Each JSON file is one run (one placement, one world size). The table has one row per collective and one column per
size; a cell is dcomm's time over MPI's time from the same run (below 1: dcomm faster). With several files for the
same label (two runs), a cell shows both ratios, "a / b", so agreement is visible at a glance.

    ratio_table.py --label 'bound, 2 ranks' run1.json run2.json --time mean
"""
import argparse
import json
import sys
from collections import defaultdict


def human(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def ratios(path, stat):
    """{(collective, bytes): dcomm time / MPI time} from one run, `auto` (or the only dcomm row) per size."""
    try:
        with open(path) as f:
            results = json.load(f)["results"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"ratio_table: {path}: {e}")
    dcomm, mpi = {}, {}
    for r in results:
        if r.get("skipped"):
            continue
        key = (r["collective"], r["bytes"])
        if stat not in r["time_us"]:
            sys.exit(f"ratio_table: {path}: no time_us.{stat} (loop: dcomm-bench from session 28 on)")
        if r["library"] == "mpi":
            mpi[key] = r["time_us"][stat]
        else:
            dcomm[key] = r["time_us"][stat]
    return {k: dcomm[k] / mpi[k] for k in dcomm if k in mpi and mpi[k] > 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="dcomm-bench --vs mpi --json files of one configuration")
    ap.add_argument("--label", default="", help="a title line for the table")
    ap.add_argument("--time", default="mean", choices=["mean", "p50", "p99", "min", "max", "loop"],
                    help="loop: a call's share of the back-to-back loop, the work between calls counted")
    args = ap.parse_args()

    runs = [ratios(p, args.time) for p in args.json]
    cells = defaultdict(list)
    for run in runs:
        for key, value in run.items():
            cells[key].append(value)
    if not cells:
        sys.exit("ratio_table: no size has both a dcomm and an MPI row (run dcomm-bench with --vs mpi)")
    collectives = list(dict.fromkeys(k[0] for run in runs for k in run))
    sizes = sorted({k[1] for k in cells})
    if args.label:
        print(f"**{args.label}** (dcomm {args.time} time / MPI's, {len(runs)} run(s); below 1: dcomm faster)\n")
    print("| collective | " + " | ".join(human(s) for s in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for c in collectives:
        row = [" / ".join(f"{v:.2f}" for v in cells[(c, s)]) if (c, s) in cells else "" for s in sizes]
        print(f"| {c} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
