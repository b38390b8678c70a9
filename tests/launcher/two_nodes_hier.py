#!/usr/bin/env python3
"""The hierarchical collectives in real processes on two nodes: two network namespaces joined by a veth pair, one
dcomm-run in each with 2 ranks (shared memory within a namespace, UCX between them), as two_nodes.py sets them up.

usage: two_nodes_hier.py DCOMM_RUN MP_COLLECTIVES DCOMM_BENCH
1. mp_collectives: every algorithm of the table forced by name - the hierarchical ones included, since the world
   spans two nodes - against the serial reference, with every rank's results compared bit for bit.
2. dcomm-bench --algo auto --check for each collective with a hierarchical row, under a tuning file that makes the
   link between nodes slow and the one within a node fast: the cost model must choose hier for the large sizes,
   and every iteration's result is checked (the barrier with the call check off, see barrier_hier.cpp).
Skips (77) like two_nodes.py where namespaces cannot be made.
"""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import two_nodes  # noqa: E402  (the namespaces and the two launchers)

SKIP = 77
HIER_COLLECTIVES = ["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "barrier"]
# Between nodes 20 us and 1 GB/s, within a node 1 us and 10 GB/s: hier wins from a few KiB up on 2 x 2.
TUNING = {"alpha_s": 20e-6, "beta_s_per_byte": 1e-9, "gamma_s_per_byte": 5e-11, "alpha_intra_s": 1e-6,
          "beta_intra_s_per_byte": 1e-10}


def check_matrix(results):
    if any(rc != 0 for rc, _, _ in results):
        two_nodes.fail("mp_collectives failed across the two nodes", results)
    for node, (_, out, _) in enumerate(results):
        for local in range(2):
            rank = node * 2 + local
            m = re.search(rf"rank {rank}/4 over \S+: (\d+) calls \((\d+) hierarchical\), 0 failures", out)
            if not m or int(m.group(2)) == 0:
                two_nodes.fail(f"rank {rank} did not run the hierarchical algorithms cleanly", results)


def check_auto(results, coll):
    if any(rc != 0 for rc, _, _ in results):
        two_nodes.fail(f"dcomm-bench {coll} --algo auto --check failed across the two nodes", results)
    out = "".join(o for _, o, _ in results)
    if "auto:hier" not in out:
        two_nodes.fail(f"{coll}: the cost model never chose hier across two nodes", results)


def main():
    dcomm_run, mp_collectives, bench = sys.argv[1:4]
    two_nodes.DCOMM_RUN = dcomm_run
    try:
        nodes = two_nodes.netns_nodes.Nodes(2, kind="rh", subnet=two_nodes.SUBNET)
        with nodes as nsp, tempfile.TemporaryDirectory() as tmp:
            check_matrix(two_nodes.launch_both(nsp, [], [mp_collectives]))
            tuning = os.path.join(tmp, "tuning.json")
            with open(tuning, "w") as f:
                json.dump(TUNING, f)
            os.environ["DCOMM_TUNING_FILE"] = tuning
            for coll in HIER_COLLECTIVES:
                # With the call check on, the check is a barrier of its own and dissemination (whose rounds it
                # shares) stays cheapest; the hierarchical barrier is for runs without it.
                os.environ["DCOMM_CHECK_CALLS"] = "0" if coll == "barrier" else "1"
                sizes = ["-b", "0", "-e", "0"] if coll == "barrier" else ["-b", "1K", "-e", "1M", "-f", "32"]
                check_auto(two_nodes.launch_both(nsp, [], [bench, coll, "--algo", "auto", "--check", "-n", "2", "-w",
                                                           "1", "-d", "float32"] + sizes), coll)
    except two_nodes.netns_nodes.NamespacesUnavailable as e:
        print(f"skipped: {e}")
        return SKIP
    except AssertionError as e:
        print(f"FAILED: {e}")
        return 1
    print("passed: the hierarchical algorithms, forced and under auto, across two network namespaces")
    return 0


if __name__ == "__main__":
    os.environ["DCOMM_STORE_SECRET"] = "two-nodes-shared-secret"  # several launchers share the user's secret
    sys.exit(main())
