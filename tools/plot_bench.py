#!/usr/bin/python3
"""Plots dcomm-bench results: bus bandwidth and latency against message size, one line per algorithm or library,
one row of panels per collective, into one PNG.

    dcomm-plot results.json [more.json ...] -o bench.png [--collectives all_reduce,broadcast]
    dcomm-plot results.json --markdown 8,2K,2M     # a Markdown table of the same rows, no plot

Installed as dcomm-plot next to dcomm-run and dcomm-bench; in the source tree it is tools/plot_bench.py.

Reads the JSON that `dcomm-bench --json` writes (docs/benchmark.md). Needs matplotlib (Debian: python3-matplotlib,
which is why this runs under /usr/bin/python3); draws with the Agg backend, so no display is needed.
"""
import argparse
import json
import sys
from collections import OrderedDict


PROG = "dcomm-plot"


def load_rows(paths):
    rows = []
    for path in paths:
        doc = read_results(path)
        world = doc.get("world_size")
        for r in doc["results"]:
            if r.get("skipped") is None and r["collective"] != "barrier" and r["bytes"] > 0:
                r["world_size"] = r.get("world_size", world)
                rows.append(r)
    return rows


def read_results(path):
    """One dcomm-bench --json document; a file that is missing or not such a document ends the program with one
    line that names it."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        sys.exit(f"{PROG}: error: cannot read {path}: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        sys.exit(f"{PROG}: error: {path} is not JSON ({e}); give the file dcomm-bench --json wrote")
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        sys.exit(f"{PROG}: error: {path} has no \"results\" list; give the file dcomm-bench --json wrote")
    return doc


def series(rows, collective, stat="mean"):
    """OrderedDict label -> sorted [(bytes, busbw, time_us[stat])] for one collective."""
    out = OrderedDict()
    for r in rows:
        if r["collective"] != collective:
            continue
        label = r["library"] if r["library"] != "dcomm" else "dcomm " + r["algorithm"]
        if r.get("op"):
            label += f" ({r['dtype']} {r['op']})"
        out.setdefault(label, []).append((r["bytes"], r["busbw_gbps"], r["time_us"][stat]))
    for points in out.values():
        points.sort()
    return out


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def markdown(rows, colls, sizes, stat):
    """Time (us) at each size, and busbw at the last, per collective and line; ratio dcomm/MPI there."""
    head = "| collective | library / algorithm | " + " | ".join(f"{human(s)} {stat} (us)" for s in sizes)
    head += f" | busbw at {human(sizes[-1])} (GB/s) | vs MPI at {human(sizes[-1])} |"
    out = [head, "|" + "---|" * (len(sizes) + 4)]
    for coll in colls:
        for label, points in series(rows, coll, stat).items():
            by_size = {p[0]: p for p in points}
            last = by_size.get(sizes[-1]) or (points[-1] if coll == "barrier" else None)
            cells = [f"{by_size[s][2]:.1f}" if s in by_size else "" for s in sizes]
            ratio = ""
            for r in rows:
                if r["collective"] == coll and r["bytes"] == sizes[-1] and r.get("vs_mpi") is not None and \
                        label.startswith("dcomm " + r["algorithm"]):
                    ratio = f"{r['vs_mpi']:.2f}"
            bw = f"{last[1]:.3f}" if last else ""
            out.append(f"| {coll} | {label} | " + " | ".join(cells) + f" | {bw} | {ratio} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", help="dcomm-bench --json output files")
    ap.add_argument("-o", "--output", help="PNG to write")
    ap.add_argument("--markdown", help="print a Markdown table at these sizes (e.g. 8,2K,2M) instead of plotting")
    ap.add_argument("--time", choices=["mean", "p50", "p99", "min", "max"], default="mean",
                    help="which time statistic to draw or tabulate (busbw always comes from the mean)")
    ap.add_argument("--collectives", help="comma-separated subset, in this order (default: all present)")
    args = ap.parse_args()
    if not args.output and not args.markdown:
        ap.error("give -o OUT.png or --markdown SIZES")
    rows = load_rows(args.json)
    if args.markdown:
        present = list(OrderedDict((r["collective"], None) for r in rows))
        colls = [c for c in (args.collectives.split(",") if args.collectives else present) if c in present]
        print(markdown(rows, colls, [parse_size(s) for s in args.markdown.split(",")], args.time))
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(f"{PROG}: error: matplotlib is missing (Debian: apt-get install python3-matplotlib)")

    present = list(OrderedDict((r["collective"], None) for r in rows))
    colls = args.collectives.split(",") if args.collectives else present
    colls = [c for c in colls if c in present]
    if not colls:
        sys.exit(f"{PROG}: error: no results to plot (every row skipped, or no such collective)")

    fig, axes = plt.subplots(len(colls), 2, figsize=(13, 3.6 * len(colls)), squeeze=False)
    for row_axes, coll in zip(axes, colls):
        bw_ax, lat_ax = row_axes
        for label, points in series(rows, coll, args.time).items():
            sizes = [p[0] for p in points]
            style = "--" if not label.startswith("dcomm") else "-"
            bw_ax.plot(sizes, [p[1] for p in points], style, marker="o", markersize=3, label=label)
            lat_ax.plot(sizes, [p[2] for p in points], style, marker="o", markersize=3, label=label)
        bw_ax.set_title(f"{coll}: bus bandwidth")
        bw_ax.set_ylabel("busbw (GB/s)")
        lat_ax.set_title(f"{coll}: time per call")
        lat_ax.set_ylabel(f"{args.time} time (us)")
        lat_ax.set_yscale("log")
        for ax in row_axes:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("size (bytes)")
            ax.grid(True, which="major", alpha=0.3)
        lat_ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(args.output, dpi=90)
    print(f"{PROG}: wrote {args.output} ({len(colls)} collectives, {len(rows)} rows)")


if __name__ == "__main__":
    main()
