#!/usr/bin/env python3
"""dcomm-run across two real network stacks: two network namespaces joined by a veth pair, one launcher in each.

usage: two_nodes.py DCOMM_RUN PROBE
The addresses (10.77.0.1 and 10.77.0.2) exist only inside the namespaces this test creates, and the namespaces
are deleted afterwards, also on failure. Without root or without `ip`, the test says why and exits 77 (skipped).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
RUN_TIMEOUT_S = 60
ADDR = ["10.77.0.1", "10.77.0.2"]
PORT = "29500"  # each namespace has its own port space, so a fixed port cannot collide with anything


def sh(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


class Namespaces:
    def __init__(self):
        tag = os.getpid() % 100000
        self.ns = [f"dcomm-run-a{tag}", f"dcomm-run-b{tag}"]
        self.veth = [f"dcra{tag}", f"dcrb{tag}"]

    def __enter__(self):
        steps = [["ip", "netns", "add", self.ns[0]], ["ip", "netns", "add", self.ns[1]],
                 ["ip", "link", "add", self.veth[0], "type", "veth", "peer", "name", self.veth[1]]]
        for i in range(2):
            steps += [["ip", "link", "set", self.veth[i], "netns", self.ns[i]],
                      ["ip", "-n", self.ns[i], "addr", "add", ADDR[i] + "/24", "dev", self.veth[i]],
                      ["ip", "-n", self.ns[i], "link", "set", self.veth[i], "up"],
                      ["ip", "-n", self.ns[i], "link", "set", "lo", "up"]]
        for step in steps:
            r = sh(*step)
            if r.returncode != 0:
                self.__exit__()
                raise RuntimeError(f"{' '.join(step)}: {r.stderr.strip()}")
        return self

    def __exit__(self, *exc):
        for ns in self.ns:
            sh("ip", "netns", "del", ns)  # takes its end of the veth pair with it
        sh("ip", "link", "del", self.veth[0])  # in case it never moved into a namespace


def launch_both(nsp, options, program):
    """Runs launcher 0 in namespace A and launcher 1 in namespace B; returns both results."""
    procs = []
    for node in range(2):
        cmd = ["ip", "netns", "exec", nsp.ns[node], DCOMM_RUN, "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "2", "--master-addr", ADDR[0], "--master-port", PORT, "--rdzv-timeout", "30",
               "--host-id", f"node{node}"] + options + ["--"] + program
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=RUN_TIMEOUT_S)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def fail(what, results):
    text = "\n".join(f"--- node {n}: exit {rc}\nstdout:\n{out}\nstderr:\n{err}" for n, (rc, out, err) in
                     enumerate(results))
    raise AssertionError(f"{what}\n{text}")


def check_env(results):
    if any(rc != 0 for rc, _, _ in results):
        fail("a launcher failed", results)
    run_ids = set()
    for node, (_, out, _) in enumerate(results):
        for local in range(2):
            rank = node * 2 + local
            env = dict(re.findall(rf"^\[rank {rank}\]: ENV (\w+)=(.*)$", out, re.M))
            expect = {"RANK": rank, "WORLD_SIZE": 4, "LOCAL_RANK": local, "LOCAL_WORLD_SIZE": 2, "NODE_RANK": node,
                      "GROUP_RANK": node, "DCOMM_NODE_RANK": node, "DCOMM_NODE_COUNT": 2, "DCOMM_RANK": rank,
                      "DCOMM_WORLD_SIZE": 4, "MASTER_ADDR": ADDR[0], "MASTER_PORT": PORT,
                      "DCOMM_MASTER_ADDR": ADDR[0], "DCOMM_STORE_HOSTED": 1, "DCOMM_HOST_ID": f"node{node}",
                      "DCOMM_RESTART_COUNT": 0}
            for name, value in expect.items():
                if env.get(name) != str(value):
                    fail(f"rank {rank}: {name}={env.get(name)}, expected {value}", results)
            run_ids.add(env["DCOMM_RUN_ID"])
    if len(run_ids) != 1:
        fail(f"the nodes disagree on the run id: {run_ids}", results)


def check_cross_node_failure(results):
    # Rank 3 (node 1) exits with 5: both launchers stop their ranks and report it as the root cause.
    for node, (rc, _, err) in enumerate(results):
        if rc != 1 or not re.search(r"\[1\] rank 3 \(local rank 1, node 1, host \S+, pid \d+\): exit code 5", err):
            fail(f"node {node} did not report rank 3's failure", results)


def check_cross_node_restart(results):
    for node, (rc, out, err) in enumerate(results):
        line = "dcomm-run: rank 2 failed (exit code 4); restarting the group (restart 1 of 1)"
        if rc != 0 or line not in err.splitlines():
            fail(f"node {node} did not restart", results)
        for local in range(2):
            if f"[rank {node * 2 + local}]: round 1 done" not in out:
                fail(f"rank {node * 2 + local} did not finish round 1", results)


def main():
    global DCOMM_RUN, PROBE
    DCOMM_RUN, PROBE = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        print("skipped: network namespaces need root")
        return SKIP
    if shutil.which("ip") is None:
        print("skipped: the `ip` tool (iproute2) is not installed")
        return SKIP
    try:
        with Namespaces() as nsp, tempfile.TemporaryDirectory() as ready_dir:
            os.environ["PROBE_READY_DIR"] = ready_dir
            check_env(launch_both(nsp, [], [PROBE, "env"]))
            check_cross_node_failure(launch_both(nsp, [], [PROBE, "fail", "3", "5", "200"]))
            check_cross_node_restart(launch_both(nsp, ["--max-restarts", "1"], [PROBE, "fail-first-round", "2", "4"]))
    except RuntimeError as e:
        print(f"skipped: cannot make network namespaces here: {e}")
        return SKIP
    except AssertionError as e:
        print(f"FAILED: {e}")
        return 1
    print("passed: two launchers in two network namespaces formed one world of 4 ranks")
    return 0


if __name__ == "__main__":
    os.environ["DCOMM_STORE_SECRET"] = "two-nodes-shared-secret"  # several launchers share the user's secret
    sys.exit(main())
