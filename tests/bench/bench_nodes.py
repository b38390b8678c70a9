#!/usr/bin/env python3
"""scripts/bench-nodes.py end to end, on tiny sizes (a check that it works, not a measurement).

usage: bench_nodes.py CASE MPI        (MPI: "mpi" when dcomm-bench was built with MPI, else "nompi")
  run        2 nodes x 2 ranks over a 1gbit-shaped switch, all_reduce 4-16 KiB, --algo ring,auto (and --vs mpi under
             mpirun with MPI): exit 0, every size has a ring, an auto and an MPI row, the node bus bandwidth, link
             fraction and speedup follow from dcomm-bench's own numbers, and no namespace of the run is left.
  interrupt  SIGTERM, then (another run) SIGINT, while the collectives run: the script exits 128 + the signal,
             and every namespace it made and every process that ran in them is gone.
Without root or namespace support: 77 (skipped). As root, it also checks that a non-root user gets 77.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "bench-nodes.py")
BUILD = os.environ["DCOMM_BUILD_DIR"]


def fail(what, text=""):
    sys.exit(f"FAIL: {what}\n{text}")


def namespaces():
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


def tag_of(text):
    m = re.search(r"namespaces dcomm-bn-n0-(\d+)", text)
    return m.group(1) if m else None


def close(a, b):
    return abs(a - b) <= 1e-6 + 1e-3 * abs(b)


def case_run(mpi):
    with tempfile.TemporaryDirectory() as d:
        out_json = os.path.join(d, "nodes.json")
        args = [sys.executable, SCRIPT, "--build", BUILD, "--rate", "1gbit", "--json", out_json,
                "--algo", "ring,auto"] + ([] if mpi else ["--no-mpi"]) + \
               ["--", "all_reduce", "-b", "4K", "-e", "16K", "-n", "2", "-w", "1"]
        p = subprocess.run(args, capture_output=True, text=True, timeout=180)
        text = p.stdout + p.stderr
        if p.returncode == SKIP:
            print(text)
            return SKIP
        if p.returncode != 0:
            fail(f"exit {p.returncode}", text)
        for needle in ["# bench-nodes: 2 nodes x 2 ranks", "# link: 1gbit per node port", "node busbw", "# cpu: "]:
            if needle not in text:
                fail(f"the output lacks '{needle}'", text)
        # Every node sent something across its link, and more than the rows alone needed (setup: the probe).
        wire = re.search(r"# wire: sent per node ([0-9.]+) MB, ([0-9.]+) MB over the run, the busiest ([0-9.]+)x", text)
        if not wire or min(float(wire.group(1)), float(wire.group(2))) <= 0 or float(wire.group(3)) < 1.0:
            fail("the wire line is missing or counts nothing", text)
        tag = tag_of(text)
        if tag is None or any(n.endswith(f"-{tag}") for n in namespaces()):
            fail(f"namespaces of run {tag} are left: {namespaces()}", text)
        doc = json.load(open(out_json))
        meta = doc["bench_nodes"]
        if (meta["nodes"], meta["ranks_per_node"], meta["launcher"]) != (2, 2, "mpirun" if mpi else "dcomm-run"):
            fail(f"bench_nodes: {meta}")
        if doc["dcomm_bench"]["world_size"] != 4:
            fail("dcomm-bench did not run 4 ranks", text)
        rows = doc["rows"]
        for size in (4096, 8192, 16384):
            kinds = {(r["library"], r["algorithm"]) for r in rows if r["bytes"] == size}
            want = {("dcomm", "ring"), ("dcomm", "auto")} | ({("mpi", "-")} if mpi else set())
            if kinds != want:
                fail(f"size {size}: rows {sorted(kinds)}, expected {sorted(want)}", text)
        mpi_us = {r["bytes"]: r["time_us"]["mean"] for r in rows if r["library"] == "mpi"}
        for r in rows:
            # 2 nodes: an all_reduce must move 2(N-1)/N = 1 x its size across each node's link, each way.
            if not close(r["node_busbw_gbps"], r["algbw_gbps"]) or \
                    not close(r["link_fraction"], r["node_busbw_gbps"] / 0.125):
                fail(f"node busbw or link fraction off: {r}")
            if r["wrong"] != 0:
                fail(f"wrong elements: {r}")
            if mpi and r["library"] == "dcomm" and not close(r["speedup"], mpi_us[r["bytes"]] / r["time_us"]["mean"]):
                fail(f"speedup off: {r}")
        print(f"bench-nodes ran {len(rows)} rows across 2 namespaces and left nothing behind")
    return 0


def interrupted(sig):
    before = namespaces()
    p = subprocess.Popen([sys.executable, "-u", SCRIPT, "--build", BUILD, "--rate", "100mbit", "--no-mpi", "--",
                          "all_reduce", "-b", "1M", "-e", "64M", "-n", "50"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = ""
    deadline = time.monotonic() + 120
    while "size(B)" not in text:  # the table header: dcomm-bench runs in every namespace
        line = p.stdout.readline()
        if not line or time.monotonic() > deadline:
            p.kill()
            fail(f"bench-nodes ended or stalled before the collectives began (exit {p.wait()})", text)
        text += line
    tag = tag_of(text)
    made = sorted(namespaces() - before)
    inside = [int(x) for ns in made for x in
              subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()]
    if len(made) != 3 or not all(n.endswith(f"-{tag}") for n in made) or len(inside) < 4:
        p.kill()
        fail(f"expected 3 namespaces of run {tag} with the ranks inside, found {made} holding {inside}", text)
    p.send_signal(sig)
    rest, _ = p.communicate(timeout=60)
    text += rest
    if p.returncode != 128 + sig:
        fail(f"after {sig.name}: exit {p.returncode}, expected {128 + sig}", text)
    if "bench-nodes: stopped" not in text:
        fail("no line says the run stopped", text)
    left = [n for n in namespaces() if n.endswith(f"-{tag}")]
    alive = [pid for pid in inside if os.path.exists(f"/proc/{pid}")]
    if left or alive:
        fail(f"after {sig.name}: namespaces {left} and processes {alive} are left", text)
    print(f"{sig.name}: exit {p.returncode}, {len(made)} namespaces and {len(inside)} processes removed")


def case_interrupt():
    interrupted(signal.SIGTERM)
    interrupted(signal.SIGINT)
    return 0


def check_non_root_skips():
    if shutil.which("setpriv") is None or not os.path.exists("/usr/bin/python3"):
        return
    with tempfile.TemporaryDirectory() as d:  # a copy the unprivileged user can read, wherever the tree is
        os.chmod(d, 0o755)
        for name in ("bench-nodes.py", "netns_nodes.py"):
            shutil.copy(os.path.join(os.path.dirname(SCRIPT), name), d)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                            os.path.join(d, "bench-nodes.py")], capture_output=True, text=True, timeout=60, cwd=d)
    if p.returncode != SKIP or "skipped: network namespaces need root" not in p.stdout:
        fail(f"as a non-root user: exit {p.returncode}, expected 77 with a reason", p.stdout + p.stderr)


def main():
    case, mpi = sys.argv[1], sys.argv[2] == "mpi"
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("skipped: network namespaces need root and iproute2")
        return SKIP
    if case == "run":
        check_non_root_skips()
        return case_run(mpi)
    return case_interrupt()


if __name__ == "__main__":
    sys.exit(main())
