#!/usr/bin/env python3
"""dcomm-bench across pretend nodes: network namespaces on this machine joined through a (shaped) switch.

usage: scripts/bench-nodes.py [--nodes N] [--ranks-per-node R] [--rate RATE] [--delay TIME] [--mtu BYTES]
                              [--algo LIST] [--launcher mpirun|dcomm-run] [--no-mpi] [--build DIR]
                              [--json FILE] [--log-dir DIR] [--timeout S] [-- DCOMM_BENCH_ARGS...]
       scripts/bench-nodes.py --clean

It creates N network namespaces ("nodes", each with its own hostname) behind a bridge in a switch namespace
(scripts/netns_nodes.py), optionally shapes each node's port with tc (--rate, --delay), runs R ranks per node of
`dcomm-bench --vs mpi` (dcomm and OpenMPI on the same processes), and prints per size dcomm's and MPI's mean time,
their ratio, and the bus bandwidth counted on the inter-node link; and the bytes each node's interface sent over
the run against what the rows needed (`wire:`), and the machine's CPU time (`cpu:`). Everything it creates is removed afterwards,
also on failure, Ctrl-C or SIGTERM; `--clean` removes what a run killed with SIGKILL left. Without root, iproute2
or namespace support it says why and exits 77. docs/benchmark.md ("Across nodes") explains how to read the output.
"""
import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_nodes  # noqa: E402

SKIP = 77
PORT = 29500  # the store's; each node namespace has its own port space: a fixed port cannot collide
STOP_GRACE_S = 10
DEFAULT_BENCH = ["all_reduce", "-b", "64K", "-e", "64M"]


class Interrupted(Exception):
    def __init__(self, why, code=1):
        super().__init__(why)
        self.code = code


def on_signal(signum, _frame):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a second Ctrl-C must not cut the cleanup short
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signal.Signals(signum).name, 128 + signum)


def parse_args(argv):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(prog="bench-nodes.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=2, help="namespaces to make (default 2)")
    p.add_argument("--ranks-per-node", type=int, default=2, help="ranks in each (default 2)")
    p.add_argument("--rate", help="tc rate of every node's port, both directions (e.g. 10gbit)")
    p.add_argument("--delay", help="one-way delay added on every node's egress (e.g. 20us; needs sch_netem)")
    p.add_argument("--burst", default="256kb", help="tbf burst with --rate (default 256kb)")
    p.add_argument("--mtu", type=int, help="MTU of the links (default: the kernel's, 1500)")
    p.add_argument("--algo", default="ring,auto",
                   help="dcomm algorithms, comma-separated names, auto or all (default ring,auto)")
    p.add_argument("--launcher", choices=["mpirun", "dcomm-run"],
                   help="mpirun across the nodes (default with MPI: OpenMPI gets its shared memory on a node), "
                        "or dcomm-run in each node (default with --no-mpi; MPI then joins as singletons, TCP only)")
    p.add_argument("--no-mpi", action="store_true", help="dcomm only (no --vs mpi)")
    p.add_argument("--build", default=os.path.join(repo, "build"), help="dcomm's build folder (default ./build)")
    p.add_argument("--json", help="write the results (the node rows and dcomm-bench's own JSON) here")
    p.add_argument("--log-dir", help="keep every process's output here (default: a temporary folder, kept on failure)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds the whole run may take (default 3600)")
    p.add_argument("--clean", action="store_true", help="remove namespaces left by killed runs (of this script or the namespace tests), exit")
    p.add_argument("bench", nargs=argparse.REMAINDER, help="after --: dcomm-bench's arguments "
                   f"(default: {' '.join(DEFAULT_BENCH)})")
    a = p.parse_args(argv)
    a.bench = [x for x in a.bench if x != "--"] or list(DEFAULT_BENCH)
    for flag in ("--json", "--csv", "--algo", "--vs"):
        if flag in a.bench:
            p.error(f"{flag} belongs to this script, not after --")
    if a.nodes < 2 or a.nodes > 200 or a.ranks_per_node < 1:
        p.error("--nodes must be 2..200 and --ranks-per-node at least 1")
    a.launcher = a.launcher or ("dcomm-run" if a.no_mpi else "mpirun")
    return a


def rate_gbytes(rate):
    """A tc rate ("10gbit", "1.5Gbit", "100mbit", "125mbps") in GB/s (10^9 bytes/s), or None."""
    m = re.fullmatch(r"([0-9.]+)\s*([kmgt]?)(bit|bps)", (rate or "").strip().lower())
    if not m:
        return None
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    return value / (8 if m.group(3) == "bit" else 1) / 1e9


def node_factor(collective, nodes, ranks_per_node):
    """The bytes that must cross one node's link (each way), as a multiple of the size S (see docs/benchmark.md)."""
    n = nodes
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "all_to_all": ranks_per_node * (n - 1) / n, "broadcast": 1.0, "reduce": 1.0,
            "gather": (n - 1) / n, "scatter": (n - 1) / n}.get(collective)


class Run:
    """The processes of one run: their output goes to log files, the first one's also to the terminal."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.procs = []
        self.threads = []
        self.hidden = []  # launchers whose output went to their log only

    def start(self, name, cmd, env, show):
        if not show:
            self.hidden.append(name)
        log = open(os.path.join(self.log_dir, f"{name}.log"), "w")
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        t = threading.Thread(target=self._pump, args=(p, log, show), daemon=True)
        t.start()
        self.procs.append((name, p))
        self.threads.append(t)

    @staticmethod
    def _pump(p, log, show):
        for line in p.stdout:
            log.write(line)
            if show:
                print(re.sub(r"^\[rank 0\]: ", "", line), end="", flush=True)
        log.close()

    def wait(self, deadline):
        failed = []
        for name, p in self.procs:
            try:
                rc = p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise Interrupted(f"the run took longer than --timeout; {name} still running", 1)
            if rc != 0:
                failed.append(f"{name} exited {rc}")
        for t in self.threads:
            t.join(timeout=5)
        return failed

    def stop(self):
        """SIGTERM (launchers stop their ranks), then SIGKILL after a grace period."""
        live = [p for _, p in self.procs if p.poll() is None]
        for p in live:
            p.terminate()
        end = time.monotonic() + STOP_GRACE_S
        for p in live:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def forwarded_env():
    """The variables every rank gets: dcomm's and UCX's settings from the caller's environment."""
    return sorted(k for k in os.environ if k.startswith(("DCOMM_", "UCX_")))


def launch_mpirun(run, nodes, a, bench_cmd, tmp, oversubscribed):
    hostfile = os.path.join(tmp, "hostfile")
    with open(hostfile, "w") as f:
        f.writelines(f"{addr} slots={a.ranks_per_node}\n" for addr in nodes.addrs)
    # mpirun (in node 0) starts orted on the other addresses through this "remote shell": it enters the node's
    # namespace and hostname and runs the command line mpirun gave it, as ssh's remote shell would.
    agent = os.path.join(tmp, "netns-rsh")
    cases = "".join(f"  {addr}) ns={ns}; name={host} ;;\n"
                    for addr, ns, host in zip(nodes.addrs, nodes.ns, nodes.hostnames))
    with open(agent, "w") as f:
        f.write("#!/bin/sh\n# mpirun's launch agent for bench-nodes.py: AGENT HOST COMMAND...\nhost=$1; shift\n"
                f'case "$host" in\n{cases}  *) echo "netns-rsh: no node has address $host" >&2; exit 255 ;;\nesac\n'
                "exec ip netns exec \"$ns\" unshare --uts sh -c 'hostname \"$0\" && exec sh -c \"$*\"' "
                "\"$name\" \"$@\"\n")
    os.chmod(agent, 0o755)
    subnet = nodes.addrs[0].rsplit(".", 1)[0] + ".0/24"
    env = dict(os.environ, MASTER_ADDR=nodes.addrs[0], MASTER_PORT=str(PORT))
    cmd = nodes.prefix(0) + [
        "mpirun", "-np", str(a.nodes * a.ranks_per_node), "--hostfile", hostfile,
        "--map-by", f"ppr:{a.ranks_per_node}:node", "--bind-to", "none",
        "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", subnet,
        "--mca", "btl_tcp_if_include", subnet]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if oversubscribed:
        cmd += ["--mca", "mpi_yield_when_idle", "1"]
    for name in ["MASTER_ADDR", "MASTER_PORT"] + forwarded_env():
        cmd += ["-x", name]  # by name: the store secret stays off the command line
    run.start("mpirun", cmd + bench_cmd, env, show=True)


def launch_dcomm_run(run, nodes, a, bench_cmd):
    for i in range(a.nodes):
        cmd = nodes.dcomm_run(i, os.path.join(a.build, "tools", "dcomm-run"), a.ranks_per_node, bench_cmd)
        run.start(f"node{i}", cmd, dict(os.environ), show=i == 0)


def node_rows(doc, a):
    """dcomm-bench's rows with the inter-node bus bandwidth, MPI's time and the ratio beside each dcomm row."""
    mpi = {(r["collective"], r["dtype"], r["op"], r["bytes"]): r for r in doc["results"]
           if r["library"] == "mpi" and not r.get("skipped")}
    link = rate_gbytes(a.rate)
    rows = []
    for r in doc["results"]:
        if r.get("skipped"):
            rows.append(dict(r, node_busbw_gbps=None, link_fraction=None, mpi_us=None, speedup=None))
            continue
        f = node_factor(r["collective"], a.nodes, a.ranks_per_node)
        nbw = r["algbw_gbps"] * f if f is not None else None
        m = mpi.get((r["collective"], r["dtype"], r["op"], r["bytes"])) if r["library"] == "dcomm" else None
        rows.append(dict(r, node_busbw_gbps=nbw, link_fraction=nbw / link if nbw is not None and link else None,
                         mpi_us=m["time_us"]["mean"] if m else None,
                         speedup=m["time_us"]["mean"] / r["time_us"]["mean"] if m and r["time_us"]["mean"] else None))
    return rows


def cpu_times():
    """The machine's CPU time so far from /proc/stat's first line: (busy, niced, idle) in clock ticks. Niced time
    is apart: other work at nice 19 (builds) yields the cores to the run, which is not."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (f + [0] * 8)[:8]
    return user + system + irq + softirq + steal, nice, idle + iowait


def cpu_line(before, after):
    busy, nice, idle = (b - a for a, b in zip(before, after))
    total = max(1, busy + nice + idle)
    return (f"cpu: {100 * busy / total:.0f}% busy, {100 * idle / total:.0f}% idle, {100 * nice / total:.0f}% niced "
            f"over the run, all {os.cpu_count()} cores (busy counts ranks polling while they wait; niced is other "
            "work at low priority, which yields the cores to the run)")


def wire_line(nodes, doc, a):
    """What crossed the links during the whole run (setup, warm-up, every row, MPI's too), against what the rows'
    collectives needed at least: 1.0x for algorithms that cross each link only with what must cross it, more for
    one that crosses it more (a flat ring over 2 nodes x 2 ranks: 1.5x), a little more for TCP/IP headers."""
    sent = [nodes.link_bytes(i)[0] for i in range(a.nodes)]
    args = doc["arguments"]
    needed = sum(r["bytes"] * node_factor(r["collective"], a.nodes, a.ranks_per_node) * (args["iters"] + args["warmup"])
                 for r in doc["results"] if not r.get("skipped") and node_factor(r["collective"], a.nodes,
                                                                                a.ranks_per_node) is not None)
    ratio = f"{max(sent) / needed:.2f}x" if needed else "-"
    return (f"wire: sent per node {', '.join(f'{b / 1e6:.1f} MB' for b in sent)} over the run, the busiest "
            f"{ratio} of what its rows must cross (warm-up and timed calls; 1.5x is a flat ring over 2x2)")


def cell(v, width, spec, suffix=""):
    return ("-" if v is None else format(v, spec) + suffix).rjust(width)


def print_rows(rows, header):
    print()
    for line in header:
        print(f"# {line}")
    print(f"# {'collective':<15}{'size(B)':>11} {'lib':>6} {'algo':<24}{'time(us)':>11}{'node busbw':>12}"
          f"{'% link':>8}{'mpi(us)':>11}{'dcomm/mpi':>10}{'speedup':>9}")
    for r in rows:
        algo = r["algorithm"] if not r["chosen_algorithm"] else f"auto:{r['chosen_algorithm']}"
        start = f"  {r['collective']:<15}{r['bytes']:>11} {r['library']:>6} {algo:<24}"
        if r.get("skipped"):
            print(start + f"skipped: {r['skipped']}")
            continue
        frac = r["link_fraction"]
        print(start + cell(r["time_us"]["mean"], 11, ".2f") + cell(r["node_busbw_gbps"], 12, ".3f") +
              cell(frac * 100 if frac is not None else None, 8, ".0f", "%") + cell(r["mpi_us"], 11, ".2f") +
              cell(r["vs_mpi"], 10, ".2f") + cell(r["speedup"], 9, ".2f", "x"))


def clean():
    stale = netns_nodes.leftovers()
    for name in stale:
        for pid in subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split():
            os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", name])
    print(f"removed {len(stale)} namespace(s) left by killed runs" + (f": {', '.join(stale)}" if stale else ""))
    return 0


def header_lines(a, nodes, oversubscribed):
    ranks = a.nodes * a.ranks_per_node
    lines = [f"bench-nodes: {a.nodes} nodes x {a.ranks_per_node} ranks ({ranks} ranks, {os.cpu_count()} cores"
             f"{', OVERSUBSCRIBED: times are not meaningful' if oversubscribed else ''}), launcher {a.launcher}"
             f"{'' if a.no_mpi else ', dcomm-bench --vs mpi'}",
             f"nodes: {', '.join(f'{h} {ad}' for h, ad in zip(nodes.hostnames, nodes.addrs))} "
             f"(namespaces {nodes.ns[0]}, ...; switch {nodes.switch}); MTU {a.mtu or 'default'}",
             f"link: {nodes.shaping}"]
    if a.launcher == "dcomm-run" and not a.no_mpi:
        lines.append("MPI joins as singletons through ompi-server: it uses TCP between ranks on one node too "
                     "(no shared memory); use --launcher mpirun for MPI's best")
    return lines


def measure(a, nodes, run, bench_cmd, json_path, oversubscribed):
    """Runs dcomm-bench on every node, prints the node rows; returns the exit status."""
    header = header_lines(a, nodes, oversubscribed)
    for line in header:
        print(f"# {line}", flush=True)
    cpu_before = cpu_times()
    if a.launcher == "mpirun":
        launch_mpirun(run, nodes, a, bench_cmd, run.log_dir, oversubscribed)
    else:
        launch_dcomm_run(run, nodes, a, bench_cmd)
    failed = run.wait(time.monotonic() + a.timeout)
    cpu = cpu_line(cpu_before, cpu_times())
    if failed:
        for name in run.hidden:  # the cause may be on another node: show the end of each log not shown yet
            with open(os.path.join(run.log_dir, f"{name}.log")) as f:
                tail = f.readlines()[-12:]
            print(f"--- the end of {name}'s output:\n" + "".join(tail), end="")
        print(f"bench-nodes: error: {'; '.join(failed)}; output in {run.log_dir}")
        return 1
    with open(json_path) as f:
        doc = json.load(f)
    rows = node_rows(doc, a)
    header.append(wire_line(nodes, doc, a))
    header.append(cpu)
    header.append("node busbw: the bytes that must cross one node's link each way over the mean time, in GB/s "
                  f"(N = {a.nodes} nodes: all_reduce 2(N-1)/N x size, all_gather and reduce_scatter (N-1)/N, "
                  "broadcast and reduce 1; docs/benchmark.md); % link: of --rate; speedup: MPI's time over dcomm's")
    print_rows(rows, header)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bench_nodes": {"nodes": a.nodes, "ranks_per_node": a.ranks_per_node, "launcher": a.launcher,
                                       "rate": a.rate, "delay": a.delay, "delay_applied": nodes.delay_applied(),
                                       "mtu": a.mtu, "shaping": nodes.shaping, "oversubscribed": oversubscribed,
                                       "argv": sys.argv},
                       "rows": rows, "dcomm_bench": doc}, f, indent=1)
    return 0


def main(argv):
    a = parse_args(argv)
    reason = netns_nodes.unavailable_reason()
    if reason:
        print(f"bench-nodes: skipped: {reason}")
        return SKIP
    if a.clean:
        return clean()
    bench = os.path.join(a.build, "tools", "bench", "dcomm-bench")
    for path in (bench, os.path.join(a.build, "tools", "dcomm-run")):
        if not os.access(path, os.X_OK):
            print(f"bench-nodes: error: {path} is missing; build first (bash scripts/build.sh) or pass --build DIR")
            return 2
    oversubscribed = a.nodes * a.ranks_per_node > (os.cpu_count() or 1)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGINT too: a background job inherits it ignored
        signal.signal(sig, on_signal)
    # Every launcher of a multi-node world needs the same store secret; a fresh one per run, in the environment.
    os.environ["DCOMM_STORE_SECRET"] = secrets.token_hex(16)
    log_dir = a.log_dir or tempfile.mkdtemp(prefix="bench-nodes-")
    os.makedirs(log_dir, exist_ok=True)
    json_path = os.path.join(log_dir, "dcomm-bench.json")
    bench_cmd = [bench] + a.bench + ["--algo", a.algo, "--json", json_path] + ([] if a.no_mpi else ["--vs", "mpi"])
    run = Run(log_dir)
    code = 1
    try:
        with netns_nodes.Nodes(a.nodes, kind="bn", rate=a.rate, delay=a.delay, burst=a.burst, mtu=a.mtu) as nodes:
            try:
                code = measure(a, nodes, run, bench_cmd, json_path, oversubscribed)
            finally:
                run.stop()  # the processes first: a namespace with a process left inside outlives its name
    except netns_nodes.NamespacesUnavailable as e:
        print(f"bench-nodes: skipped: {e}")
        code = SKIP
    except Interrupted as e:
        print(f"bench-nodes: stopped ({e}); removed the namespaces; output in {log_dir}")
        code = e.code
    if code == 0 and not a.log_dir:
        shutil.rmtree(log_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
