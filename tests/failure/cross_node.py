#!/usr/bin/env python3
"""Two nodes x two ranks in real processes: two network namespaces (scripts/netns_nodes.py), one dcomm-run in
each, shared memory within a node and UCX over TCP between them.

usage: cross_node.py DCOMM_RUN PROGRAM CASE
  kill   PROGRAM is mp_kill_point: rank 3 (node 1), then rank 1 (node 0), is killed (SIGKILL) 1 s into its
         all_reduce loop. Every survivor on both nodes fails in an all_reduce within kill_matrix.py's DETECT_S of
         the kill, names the victim and blames no survivor; no rank returns a wrong result; both launchers exit 137
         (128 + SIGKILL) and name the victim as the root cause ("[1] rank R (local rank L, node N, host dcomm-nodeN,
         ...): signal 9 SIGKILL").
  check  PROGRAM is dcomm-bench: every collective (the group's own choice of algorithm) with --check over sizes from
         0, 4 and 12 bytes past 1 MiB, then every dtype and op of all_reduce and reduce_scatter: 0 wrong elements.
Without root or namespace support it says why and exits 77 (skipped).
"""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import netns_nodes  # noqa: E402
from kill_matrix import check_kill_survivors  # noqa: E402

SKIP = 77
RUN_TIMEOUT_S = 120
RANKS_PER_NODE = 2


def launch(nodes, program, env, options=()):
    """One dcomm-run per node, at once; returns [(exit code, stdout, stderr)] by node."""
    return netns_nodes.run_all([nodes.dcomm_run(i, DCOMM_RUN, RANKS_PER_NODE, program, options)
                                for i in range(nodes.n)], RUN_TIMEOUT_S, env)


def check_kill(nodes, victim, after):
    # The timer starts once init() returned: the kill lands in the all_reduce loop however slow startup was.
    # 64 KiB chunks: the loop's 1.2 MiB all_reduce runs all_reduce[hier] as a pipeline of 3 segments, so the kill
    # can land with two segments' stages in flight.
    env = dict(os.environ, KILL_RANK=str(victim), KILL_AFTER_S=str(after), KILL_FROM="loop", KILL_SIGNAL="KILL",
               DCOMM_TIMEOUT_S="30", LOOP_S=str(after + 8), UCX_TLS="tcp,self", DCOMM_CHUNK_BYTES="65536")
    results = launch(nodes, [PROG], env, ["--grace-period", "3"])
    out = "".join(o for _, o, _ in results)
    problems = []
    m = re.search(rf"VICTIM rank {victim} signal KILL at ([0-9.]+)", out)
    if not m:
        return [f"rank {victim} was never killed"], results, 0.0
    slowest = check_kill_survivors(out, nodes.n * RANKS_PER_NODE, victim, float(m.group(1)), problems,
                                   lambda s: f" (node {s // RANKS_PER_NODE})")
    for s, text in re.findall(r"SURVIVOR rank (\d+) at [0-9.]+ call_s [0-9.]+: \[\w+\] (.*)", out):
        if not text.startswith("all_reduce["):
            problems.append(f"rank {s} did not fail in an all_reduce (not killed mid-collective?): {text}")
    if "WRONG" in out:
        problems.append("a rank returned a wrong result")
    node = victim // RANKS_PER_NODE
    cause = (rf"dcomm-run:   \[1\] rank {victim} \(local rank {victim % RANKS_PER_NODE}, node {node}, "
             rf"host {nodes.hostnames[node]}, pid \d+\): signal 9 SIGKILL")
    for n, (rc, _, err) in enumerate(results):
        if rc != 128 + 9:  # the root cause's signal, on every node (docs/launcher.md, exit codes)
            problems.append(f"node {n}'s dcomm-run exited {rc}, not 137 (the root cause's SIGKILL)")
        if not re.search(cause, err):
            problems.append(f"node {n}'s dcomm-run does not give rank {victim}'s SIGKILL as the root cause")
    return problems, results, slowest


def case_kill(nodes):
    problems = []
    for victim in (3, 1):  # a rank of node 1, then of node 0: each time the other node's survivors must see it
        p, results, slowest = check_kill(nodes, victim, after=1.0)
        if p:
            problems += [f"--- victim rank {victim}:"] + p + [netns_nodes.transcript(results)]
        else:
            print(f"rank {victim} killed: every survivor on both nodes named it within {slowest:.2f} s, "
                  "both launchers blamed it")
    return problems


def case_check(nodes):
    problems = []
    runs = [["all", "-b", "0", "-e", "0", "-n", "1", "-w", "0"], ["all", "-b", "4", "-e", "4", "-n", "1", "-w", "0"],
            ["all", "-b", "12", "-e", "2M", "-f", "11", "-n", "2", "-w", "1", "-r", "3"],
            ["all_reduce", "-d", "all", "-o", "all", "-b", "12", "-e", "300", "-f", "5", "-n", "1", "-w", "0"],
            ["reduce_scatter", "-d", "all", "-o", "all", "-b", "48", "-e", "400", "-f", "8", "-n", "1", "-w", "0"]]
    with tempfile.TemporaryDirectory() as d:
        for i, args in enumerate(runs):
            path = os.path.join(d, f"r{i}.json")
            results = launch(nodes, [BENCH, *args, "--check", "--json", path], dict(os.environ))
            if any(rc != 0 for rc, _, _ in results):
                problems += [f"dcomm-bench {' '.join(args)} failed", netns_nodes.transcript(results)]
                continue
            doc = json.load(open(path))
            rows = [r for r in doc["results"] if not r.get("skipped")]
            wrong = sum(r["wrong"] for r in rows)
            colls = {r["collective"] for r in rows}
            if doc["world_size"] != nodes.n * RANKS_PER_NODE or wrong or not rows:
                problems.append(f"dcomm-bench {' '.join(args)}: world {doc['world_size']}, {len(rows)} rows, "
                                f"{wrong} wrong elements")
            if args[0] == "all" and args[2] != "4" and len(colls) != 10:  # one element: no partitioned collectives
                problems.append(f"dcomm-bench all ran only {sorted(colls)}")
            chosen = sorted({f"{r['collective']}:{r['chosen_algorithm']}" for r in rows if r["chosen_algorithm"]})
            print(f"dcomm-bench {' '.join(args)} --check: {len(rows)} rows, 0 wrong; auto chose {', '.join(chosen)}")
    return problems


def main():
    global DCOMM_RUN, PROG, BENCH
    DCOMM_RUN, program, case = sys.argv[1], sys.argv[2], sys.argv[3]
    PROG = BENCH = program
    os.environ["DCOMM_STORE_SECRET"] = "cross-node-shared-secret"  # the launchers of one world share the secret
    try:
        with netns_nodes.Nodes(2, kind="xn", subnet="10.214.0") as nodes:
            problems = case_kill(nodes) if case == "kill" else case_check(nodes)
    except netns_nodes.NamespacesUnavailable as e:
        print(f"skipped: {e}")
        return SKIP
    if problems:
        print("\n".join(problems))
        print(f"cross_node {case}: FAILED")
        return 1
    print(f"cross_node {case}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
