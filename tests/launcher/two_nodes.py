#!/usr/bin/env python3
"""dcomm-run across two real network stacks: two network namespaces behind a switch (scripts/netns_nodes.py), one
launcher in each.

usage: two_nodes.py DCOMM_RUN PROBE
The addresses (10.77.0.1 and 10.77.0.2) exist only inside the namespaces this test creates, and the namespaces
are deleted afterwards, also on failure. Without root or without `ip`, the test says why and exits 77 (skipped).
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import netns_nodes  # noqa: E402

SKIP = 77
RUN_TIMEOUT_S = 60
SUBNET = "10.77.0"
ADDR = [f"{SUBNET}.1", f"{SUBNET}.2"]
PORT = "29500"  # each namespace has its own port space, so a fixed port cannot collide with anything


def launch_both(nodes, options, program):
    """Runs launcher 0 in namespace A and launcher 1 in namespace B; returns both results."""
    return netns_nodes.run_all([nodes.dcomm_run(node, DCOMM_RUN, 2, program, ["--host-id", f"node{node}"] + options,
                                                port=PORT, rdzv_timeout=30) for node in range(2)], RUN_TIMEOUT_S)


def fail(what, results):
    raise AssertionError(f"{what}\n{netns_nodes.transcript(results)}")


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
                      "DCOMM_WORLD_SIZE": 4, "MASTER_ADDR": ADDR[0], "DCOMM_MASTER_PORT": PORT,
                      "MASTER_PORT": int(PORT) + 1,  # torch's store (env://), next to dcomm's across nodes
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
    try:
        with netns_nodes.Nodes(2, kind="rn", subnet=SUBNET) as nsp, tempfile.TemporaryDirectory() as ready_dir:
            os.environ["PROBE_READY_DIR"] = ready_dir
            check_env(launch_both(nsp, [], [PROBE, "env"]))
            check_cross_node_failure(launch_both(nsp, [], [PROBE, "fail", "3", "5", "200"]))
            check_cross_node_restart(launch_both(nsp, ["--max-restarts", "1"], [PROBE, "fail-first-round", "2", "4"]))
    except netns_nodes.NamespacesUnavailable as e:
        print(f"skipped: {e}")
        return SKIP
    except AssertionError as e:
        print(f"FAILED: {e}")
        return 1
    print("passed: two launchers in two network namespaces formed one world of 4 ranks")
    return 0


if __name__ == "__main__":
    os.environ["DCOMM_STORE_SECRET"] = "two-nodes-shared-secret"  # several launchers share the user's secret
    sys.exit(main())
