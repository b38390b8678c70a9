#!/usr/bin/env python3
"""dcomm-run's tests: each case runs the launcher on a probe program and checks what it did.

usage: launcher_tests.py DCOMM_RUN PROBE CASE    (CASE is one of the functions named case_*)
Exits 0 when the case passes, 1 with a message when it fails.
"""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

# Generous bounds: the machine running the tests may be a loaded 2-core box.
RUN_TIMEOUT_S = 60
PROMPT_STOP_S = 30

ENV_NAMES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR",
             "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "DCOMM_RANK", "DCOMM_WORLD_SIZE", "DCOMM_LOCAL_RANK",
             "DCOMM_LOCAL_WORLD_SIZE", "DCOMM_NODE_RANK", "DCOMM_NODE_COUNT", "DCOMM_MASTER_ADDR",
             "DCOMM_MASTER_PORT", "DCOMM_STORE_HOSTED", "DCOMM_RUN_ID", "DCOMM_RESTART_COUNT", "DCOMM_HOST_ID",
             # torchrun's agent's variables
             "TORCHELASTIC_RUN_ID", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
             "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE"]


class CaseFailed(Exception):
    pass


def check(cond, what, result=None):
    if not cond:
        detail = ""
        if result is not None:
            detail = f"\n--- exit {result.returncode}\n--- stdout:\n{result.stdout}\n--- stderr:\n{result.stderr}"
        raise CaseFailed(what + detail)


def run(args, timeout=RUN_TIMEOUT_S, env=None):
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as ready_dir:
        env = dict(env if env is not None else os.environ, PROBE_READY_DIR=ready_dir)
        r = subprocess.run([DCOMM_RUN] + args, capture_output=True, text=True, timeout=timeout, env=env)
    r.elapsed = time.monotonic() - start
    return r


def rank_lines(text, rank):
    prefix = f"[rank {rank}]: "
    return [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]


def parse_env(stdout, rank):
    env = {}
    for line in rank_lines(stdout, rank):
        m = re.fullmatch(r"ENV (\w+)=(.*)", line)
        if m:
            env[m.group(1)] = m.group(2)
    return env


def check_env(r, nproc, nnodes=1, node_rank=0, host_id=None, restart=0, ranks=None, max_restarts=0, role="default",
              rdzv_id=None):
    """Checks every variable dcomm-run exports for the ranks of one node; returns the run id."""
    check(r.returncode == 0, "dcomm-run failed", r)
    world = nproc * nnodes
    run_ids, ports = set(), set()
    for local in range(nproc):
        rank = node_rank * nproc + local
        env = parse_env(r.stdout, rank)
        check(set(env) == set(ENV_NAMES), f"rank {rank} printed {sorted(env)}", r)
        expect = {"RANK": rank, "WORLD_SIZE": world, "LOCAL_RANK": local, "LOCAL_WORLD_SIZE": nproc,
                  "GROUP_RANK": node_rank, "NODE_RANK": node_rank, "TORCHELASTIC_RESTART_COUNT": restart,
                  "DCOMM_RANK": rank, "DCOMM_WORLD_SIZE": world, "DCOMM_LOCAL_RANK": local,
                  "DCOMM_LOCAL_WORLD_SIZE": nproc, "DCOMM_NODE_RANK": node_rank, "DCOMM_NODE_COUNT": nnodes,
                  "DCOMM_STORE_HOSTED": 1, "DCOMM_RESTART_COUNT": restart,
                  "DCOMM_HOST_ID": host_id if host_id is not None else "<unset>",
                  "GROUP_WORLD_SIZE": nnodes, "ROLE_RANK": rank, "ROLE_WORLD_SIZE": world, "ROLE_NAME": role,
                  "TORCHELASTIC_MAX_RESTARTS": max_restarts, "TORCHELASTIC_USE_AGENT_STORE": "False",
                  "TORCHELASTIC_RUN_ID": rdzv_id if rdzv_id is not None else env["DCOMM_RUN_ID"]}
        for name, value in expect.items():
            check(env[name] == str(value), f"rank {rank}: {name}={env[name]}, expected {value}", r)
        check(env["MASTER_ADDR"] == env["DCOMM_MASTER_ADDR"] and env["MASTER_ADDR"], f"rank {rank}: addresses", r)
        # MASTER_PORT is torch's own store (env://), which cannot share dcomm's port.
        check(env["MASTER_PORT"] != env["DCOMM_MASTER_PORT"] and 0 < int(env["MASTER_PORT"]) < 65536
              and 0 < int(env["DCOMM_MASTER_PORT"]) < 65536, f"rank {rank}: ports", r)
        check(re.fullmatch(r"[0-9a-f]{16}", env["DCOMM_RUN_ID"]), f"rank {rank}: run id {env['DCOMM_RUN_ID']}", r)
        run_ids.add(env["DCOMM_RUN_ID"])
        ports.add((env["MASTER_ADDR"], env["MASTER_PORT"], env["DCOMM_MASTER_PORT"]))
    check(len(run_ids) == 1 and len(ports) == 1, f"ranks disagree: run ids {run_ids}, stores {ports}", r)
    return run_ids.pop()


def case_env_1():
    env = dict(os.environ)
    env.pop("DCOMM_HOST_ID", None)
    env["DCOMM_STORE_HOSTED"] = "0"  # an outer value must not leak through
    check_env(run(["--nproc-per-node", "1", "--", PROBE, "env"], env=env), 1)


def case_env_3():
    r = run(["--nproc-per-node", "3", "--host-id", "box-7", "--", PROBE, "env"])
    check_env(r, 3, host_id="box-7")
    r2 = run(["--nproc-per-node", "3", "--host-id", "box-7", "--", PROBE, "env"])
    check(check_env(r2, 3, host_id="box-7") != check_env(r, 3, host_id="box-7"), "two launches share a run id")


def case_env_4():
    r = run(["--standalone", "--nproc-per-node", "4", "--", PROBE, "env"])
    check_env(r, 4)
    check(parse_env(r.stdout, 0)["MASTER_ADDR"] == "127.0.0.1", "--standalone uses 127.0.0.1", r)


def case_output():
    r = run(["--nproc-per-node", "2", "--", PROBE, "output"])
    check(r.returncode == 0, "output run failed", r)
    for rank in range(2):
        check(rank_lines(r.stdout, rank) == ["alpha", "beta", "no newline"], f"rank {rank} stdout lines", r)
        check(rank_lines(r.stderr, rank) == ["to stderr"], f"rank {rank} stderr lines", r)
    check(all(line.startswith("[rank ") for line in r.stdout.splitlines()), "an unprefixed stdout line", r)
    r = run(["--no-prefix", "--nproc-per-node", "2", "--", PROBE, "output"])
    check(sorted(r.stdout.splitlines()) == sorted(["alpha", "beta", "no newline"] * 2), "--no-prefix stdout", r)
    check(r.stderr.splitlines() == ["to stderr"] * 2, "--no-prefix stderr", r)


def check_failure(r, rank, status, nproc):
    check(r.elapsed < PROMPT_STOP_S, f"the other ranks were not stopped promptly ({r.elapsed:.1f} s)", r)
    lines = [l for l in r.stderr.splitlines() if l.startswith("dcomm-run:")]
    check(lines and lines[0] == f"dcomm-run: FAILED: 1 of {nproc} ranks failed; root cause first:", "headline", r)
    m = re.fullmatch(r"dcomm-run:   \[1\] rank (\d+) \(local rank (\d+), node 0, host (\S+), pid (\d+)\): (.*)",
                     lines[1])
    check(m and int(m.group(1)) == rank and int(m.group(2)) == rank and m.group(5) == status, "failure line", r)
    check(f"dcomm-run:         rank {rank} about to fail" in lines, "the failed rank's last stderr line", r)
    others = ", ".join(str(x) for x in range(nproc) if x != rank)
    check(lines[-1] == f"dcomm-run: stopped by dcomm-run after the failure: ranks {others}", "stopped ranks", r)
    for other in range(nproc):
        if other != rank:
            check(f"rank {other} got SIGTERM" in rank_lines(r.stdout, other), f"rank {other} saw SIGTERM", r)


def case_fail_exit_code():
    r = run(["--nproc-per-node", "3", "--", PROBE, "fail", "1", "3", "200"])
    check(r.returncode == 1, "exit code 1 after a rank's exit code 3", r)
    check_failure(r, 1, "exit code 3", 3)


def case_fail_signal():
    r = run(["--nproc-per-node", "4", "--", PROBE, "signal", "2", str(int(signal.SIGSEGV)), "200"])
    check(r.returncode == 128 + signal.SIGSEGV, "exit code 128 + SIGSEGV", r)
    check_failure(r, 2, f"signal {int(signal.SIGSEGV)} SIGSEGV (Segmentation fault)", 4)


def wait_ready(p, count):
    ready = 0
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while ready < count and time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        ready += line.endswith("]: ready\n")
    check(ready == count, f"only {ready} of {count} ranks started")


def start_and_wait_ready(args, nproc):
    p = subprocess.Popen([DCOMM_RUN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_ready(p, nproc)
    return p


def case_sigterm_forwarded():
    p = start_and_wait_ready(["--nproc-per-node", "3", "--", PROBE, "sleep"], 3)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=PROMPT_STOP_S)
    for rank in range(3):
        check(f"[rank {rank}]: rank {rank} got SIGTERM" in out, f"rank {rank} did not get SIGTERM:\n{out}\n{err}")
    check(p.returncode == 128 + signal.SIGTERM, f"exit code {p.returncode}, expected 143:\n{err}")
    check("dcomm-run: received SIGTERM (Terminated); stopped 3 rank(s)" in err, f"the closing line:\n{err}")


def case_grace_then_kill():
    p = start_and_wait_ready(["--nproc-per-node", "2", "--grace-period", "0.5", "--", PROBE, "sleep-ignore"], 2)
    start = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=PROMPT_STOP_S)
    check(p.returncode == 128 + signal.SIGINT, f"exit code {p.returncode}, expected 130:\n{err}")
    elapsed = time.monotonic() - start
    check(0.5 <= elapsed < PROMPT_STOP_S, f"ranks that ignore SIGINT were killed after {elapsed:.1f} s, not after "
          "the 0.5 s grace period")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_all_dead(pids, r=None):
    deadline = time.monotonic() + PROMPT_STOP_S
    left = pids
    while left and time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        time.sleep(0.1)
    check(not left, f"processes {left} outlived dcomm-run", r)


def case_launcher_killed():
    # Ranks must not outlive a launcher that is killed outright (no chance to forward anything).
    p = start_and_wait_ready(["--nproc-per-node", "3", "--", PROBE, "sleep-ignore"], 3)
    ranks = []
    for task in os.listdir(f"/proc/{p.pid}/task"):
        with open(f"/proc/{p.pid}/task/{task}/children") as f:
            ranks += [int(x) for x in f.read().split()]
    check(len(ranks) == 3, f"dcomm-run has {len(ranks)} children, expected 3")
    p.kill()
    p.wait()
    wait_all_dead(ranks)


def case_restart():
    args = ["--nproc-per-node", "3", "--", PROBE, "fail-first-round", "1", "3"]
    r = run(["--max-restarts", "2"] + args)
    check(r.returncode == 0, "the second round should succeed", r)
    check("dcomm-run: rank 1 failed (exit code 3); restarting the group (restart 1 of 2)" in r.stderr.splitlines(),
          "the restart line", r)
    for rank in range(3):
        check("round 1 done" in rank_lines(r.stdout, rank), f"rank {rank} ran round 1", r)
    r = run(args)
    check(r.returncode == 1 and "restarting" not in r.stderr, "without --max-restarts the run fails", r)


def case_grandchildren_stopped():
    r = run(["--nproc-per-node", "2", "--grace-period", "1", "--", PROBE, "grandchild", "1", "3", "300"])
    check(r.returncode == 1, "rank 1's exit code 3 fails the run", r)
    pids = [int(m) for m in re.findall(r"grandchild (\d+)", r.stdout)]
    check(len(pids) == 2, "both ranks started a grandchild", r)
    wait_all_dead(pids, r)


BAD_COMMAND_LINES = [
    ["--nproc-per-node", "2"],                                    # no program
    ["--nproc-per-node", "2", "--"],                              # no program after --
    ["--nproc-per-node", "0", "--", "true"],
    ["--nproc-per-node", "-1", "--", "true"],
    ["--nproc-per-node", "two", "--", "true"],
    ["--", "true"],                                               # --nproc-per-node is required
    ["--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "2", "--", "true"],
    ["--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "-1", "--", "true"],
    ["--nproc-per-node", "1", "--nnodes", "0", "--", "true"],
    ["--nproc-per-node", "1", "--rdzv-endpoint", "nohostport", "--", "true"],
    ["--nproc-per-node", "1", "--rdzv-endpoint", "host:99999", "--", "true"],
    ["--nproc-per-node", "1", "--rdzv-endpoint", "host:", "--", "true"],
    ["--nproc-per-node", "1", "--rdzv-endpoint", "h:1", "--master-port", "5", "--", "true"],
    ["--nproc-per-node", "1", "--standalone", "--nnodes", "2", "--", "true"],
    ["--nproc-per-node", "1", "--master-port", "70000", "--", "true"],
    ["--nproc-per-node", "1", "--nnodes", "2", "--master-port", "0", "--", "true"],
    ["--nproc-per-node", "1", "--max-restarts", "-1", "--", "true"],
    ["--nproc-per-node", "1", "--grace-period", "-2", "--", "true"],
    ["--nproc-per-node", "1", "--bogus", "--", "true"],
    # torchrun's vocabulary: what dcomm-run refuses, with one line
    ["--nproc-per-node", "1", "--rdzv-backend", "etcd", "--", "true"],
    ["--nproc-per-node", "1", "--nnodes", "4:1", "--", "true"],
    ["--nproc-per-node", "1", "--nnodes", "1:4", "--node-rank", "1", "--", "true"],
    ["--nproc-per-node", "tpu", "--", "true"],
    ["--nproc-per-node", "1", "--rdzv-conf", "nokey", "--", "true"],
    ["--nproc-per-node", "1", "--tee", "7", "--", "true"],
    ["--nproc-per-node", "1", "--monitor-interval", "-1", "--", "true"],
]


def case_bad_command_lines():
    for args in BAD_COMMAND_LINES:
        r = run(args)
        lines = r.stderr.splitlines()
        check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("dcomm-run: error: ") and not r.stdout,
              f"dcomm-run {' '.join(args)}: expected exit 2 and one error line", r)


def free_port():
    # Several launchers must meet at a fixed port: take one the kernel says is free right now.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def case_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = run(["--nproc-per-node", "1", "--master-port", str(s.getsockname()[1]), "--", "true"])
    lines = r.stderr.splitlines()
    check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("dcomm-run: error: cannot host the store"),
          "a taken port: exit 2 and one line", r)


def start_nodes(nodes, program, options=(), nproc=(2, 2), probes=None):
    """Starts one launcher per node rank in `nodes` on this machine, all meeting at one port."""
    port = free_port()
    procs = []
    for node in nodes:
        probe = probes[node] if probes else PROBE
        args = ["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", str(nproc[node]), "--master-port",
                port] + list(options) + ["--", probe] + program
        procs.append(subprocess.Popen([DCOMM_RUN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def finish(procs):
    results = []
    for p in procs:
        out, err = p.communicate(timeout=RUN_TIMEOUT_S)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results


def case_nodes_local():
    results = finish(start_nodes([0, 1], ["env"]))
    run_ids = {check_env(r, 2, nnodes=2, node_rank=node) for node, r in enumerate(results)}
    check(len(run_ids) == 1, f"the nodes disagree on the run id: {run_ids}")


def case_cannot_start():
    r = run(["--nproc-per-node", "2", "--", "/nonexistent/dcomm-probe"])
    lines = r.stderr.splitlines()
    check(r.returncode == 127 and lines == ["dcomm-run: error: cannot start '/nonexistent/dcomm-probe' (no such file): "
                                            "No such file or directory (errno 2)"], "exit 127 and one line", r)
    # On node 1 of 2: node 0's ranks are stopped, and node 0 names the cause.
    r0, r1 = finish(start_nodes([0, 1], ["sleep"], probes=[PROBE, "/nonexistent/dcomm-probe"]))
    check(r1.returncode == 127, "node 1 exits 127", r1)
    check(r0.returncode == 1 and re.search(r"\[1\] rank 2 \(local rank 0, node 1, host \S+, pid -1\): exit code 127",
                                           r0.stderr) and "cannot start '/nonexistent/dcomm-probe'" in r0.stderr,
          "node 0 names node 1's failure to start", r0)
    check("dcomm-run: stopped by dcomm-run after the failure: ranks 0, 1" in r0.stderr, "node 0 stopped its ranks", r0)


def case_rdzv_endpoint():
    # A store that already runs (here: a store server of its own, tests/rendezvous/store_server, with the secret the
    # launchers share) serves two launchers that host none. (Another launch's store would refuse them: its job
    # differs.)
    server = os.path.join(os.environ.get("DCOMM_BUILD_DIR", "."), "tests", "rendezvous", "store_server")
    host = subprocess.Popen([server], stdout=subprocess.PIPE, text=True)
    port = host.stdout.readline().strip()
    try:
        procs = []
        for node in range(2):
            args = ["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2", "--rdzv-endpoint",
                    f"127.0.0.1:{port}", "--", PROBE, "env"]
            procs.append(subprocess.Popen([DCOMM_RUN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        results = finish(procs)
    finally:
        host.kill()
        host.communicate(timeout=RUN_TIMEOUT_S)
    for node, r in enumerate(results):
        check_env(r, 2, nnodes=2, node_rank=node)
        env = parse_env(r.stdout, node * 2)
        check(env["DCOMM_MASTER_PORT"] == port and env["MASTER_PORT"] == str(int(port) + 1),
              "the ranks use the endpoint's port (and the next one for torch's store)", r)


def hello_status(port, secret):
    """Says hello to the store at 127.0.0.1:port as a stranger would; returns (status, reason) of its reply, or
    (None, '') when it closed the connection without one."""
    payload = struct.pack("<I", len(secret)) + secret.encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack("<IBBHI", 0x54534344, 1, 1, 0, len(payload)) + payload)
        head = s.recv(12, socket.MSG_WAITALL)
        if len(head) < 12:
            return None, ""
        body = s.recv(struct.unpack("<I", head[8:12])[0], socket.MSG_WAITALL)
        return head[5], body[4:].decode(errors="replace")


def case_store_secret():
    # Issue 13: any local process could read and overwrite dcomm-run's store. Now dcomm-run makes a secret per
    # launch, hands it to its ranks in the environment (never on a command line), and refuses strangers.
    os.environ.pop("DCOMM_STORE_SECRET", None)
    os.environ.pop("DCOMM_STORE_SECRET_FILE", None)
    os.environ.pop("DCOMM_STORE_INSECURE", None)
    p = subprocess.Popen([DCOMM_RUN, "--nproc-per-node", "2", "--", PROBE, "env-sleep"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out = ""
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline and out.count("ENV DCOMM_STORE_SECRET=") < 2:
            out += p.stdout.readline()
        secrets = set(re.findall(r"ENV DCOMM_STORE_SECRET=(\S+)", out))
        port = int(re.search(r"ENV DCOMM_MASTER_PORT=(\d+)", out).group(1))  # MASTER_PORT is torch's store
        check(len(secrets) == 1 and re.fullmatch(r"[0-9a-f]{64}", next(iter(secrets))),
              f"both ranks got one random secret: {secrets}")
        secret = next(iter(secrets))
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    check(secret.encode() not in f.read(), f"the secret is on the command line of pid {pid}")
            except OSError:
                pass
        for stranger in ["", "guess"]:
            status, reason = hello_status(port, stranger)
            check(status == 1 and "secret" in reason and f"127.0.0.1:{port}" in reason,
                  f"a stranger with secret {stranger!r} was refused with a reason naming the store: {status} {reason}")
        check(hello_status(port, secret)[0] == 0, "a client with the job's secret is admitted")
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=RUN_TIMEOUT_S)
    check(p.returncode == 0 or p.returncode == 128 + signal.SIGTERM, f"dcomm-run ended: {p.returncode}")


def case_nodes_need_secret():
    # Several launchers cannot be handed a fresh secret through a store they are not yet admitted to.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DCOMM_STORE_")}
    r = run(["--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "1", "--master-port", free_port(), "--", "true"],
            env=env)
    check(r.returncode == 2 and "--nnodes 2 needs a store secret shared by every node's dcomm-run" in r.stderr and
          "DCOMM_STORE_SECRET_FILE" in r.stderr and "DCOMM_STORE_INSECURE=1" in r.stderr,
          "a multi-node launch without a secret exits 2 saying how to give one", r)


def case_nodes_disagree():
    for r in finish(start_nodes([0, 1], ["env"], nproc=(2, 3))):
        check(r.returncode == 3 and "dcomm-run: error: nodes disagree: node 1 (host " in r.stderr and
              "runs --nproc-per-node 3 but node 0" in r.stderr and not r.stdout, "exit 3 naming both counts", r)


def case_rdzv_timeout():
    r = run(["--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "1", "--rdzv-timeout", "1", "--master-port",
             free_port(), "--", PROBE, "env"])
    check(r.returncode == 3 and "rendezvous timed out after " in r.stderr and
          "1 of 2 nodes arrived (missing node ranks: 1)" in r.stderr and not r.stdout, "exit 3 naming the count", r)


def case_node0_lost():
    node0, node1 = start_nodes([0, 1], ["sleep"])
    wait_ready(node0, 2)
    wait_ready(node1, 2)
    node0.kill()  # its ranks die with it (PR_SET_PDEATHSIG), and its store closes
    node0.wait()
    (r,) = finish([node1])
    check(r.returncode == 3 and "dcomm-run: error: lost the store at 127.0.0.1:" in r.stderr, "node 1 exits 3", r)
    for rank in (2, 3):
        check(f"rank {rank} got SIGTERM" in r.stdout, f"node 1 stopped rank {rank}", r)


def case_node1_lost():
    # Node 1's launcher is killed outright: node 0 misses its heartbeat and stops the world.
    node0, node1 = start_nodes([0, 1], ["sleep"], options=["--node-timeout", "2", "--max-restarts", "1"])
    wait_ready(node0, 2)
    wait_ready(node1, 2)
    node1.kill()
    node1.wait()
    (r,) = finish([node0])
    check(r.returncode == 3 and re.search(r"\[1\] dcomm-run on node 1 \(host \S+\) stopped responding: no heartbeat",
                                          r.stderr) and "restarting" not in r.stderr, "node 0 exits 3 naming node 1", r)
    for rank in (0, 1):
        check(f"rank {rank} got SIGTERM" in r.stdout, f"node 0 stopped rank {rank}", r)


def case_remote_interrupt():
    # A launcher that received a signal is leaving: the others must not restart without it.
    node0, node1 = start_nodes([0, 1], ["sleep"], options=["--max-restarts", "1"])
    wait_ready(node0, 2)
    wait_ready(node1, 2)
    node1.send_signal(signal.SIGTERM)
    r0, r1 = finish([node0, node1])
    check(r1.returncode == 143 and r0.returncode == 143, "both launchers exit 128 + SIGTERM", r0)
    check("restarting" not in r0.stderr, "node 0 restarted without node 1", r0)
    check(re.search(r"\[1\] dcomm-run on node 1 \(host \S+, pid \d+\) received signal 15 SIGTERM", r0.stderr),
          "node 0 names node 1's signal as the root cause", r0)
    for rank in (0, 1):
        check(f"rank {rank} got SIGTERM" in r0.stdout, f"node 0 stopped rank {rank}", r0)


class Skip(Exception):
    """A case that cannot run here (no root, no network namespaces): exit 77, meson's skip."""


def run_case_from_argv(module_globals, program_var, doc):
    """The drivers' shared main: argv is DCOMM_RUN PROGRAM CASE; runs case_<CASE> of the calling module with
    DCOMM_RUN and <program_var> set. Returns 0 when it passes, 1 when it fails, 77 when it skips, 2 on bad usage."""
    if len(sys.argv) != 4:
        print(doc, file=sys.stderr)
        return 2
    module_globals["DCOMM_RUN"], module_globals[program_var], case = sys.argv[1], sys.argv[2], sys.argv[3]
    # The helpers here (run, start_nodes, ...) read this module's globals when another driver imports them.
    globals()["DCOMM_RUN"], globals()["PROBE"] = sys.argv[1], sys.argv[2]
    fn = module_globals.get("case_" + case)
    if fn is None:
        print(f"no case {case}", file=sys.stderr)
        return 2
    try:
        fn()
    except Skip as e:
        print(f"SKIP {case}: {e}")
        return 77
    except CaseFailed as e:
        print(f"FAILED {case}: {e}", file=sys.stderr)
        return 1
    except subprocess.TimeoutExpired as e:
        print(f"FAILED {case}: dcomm-run did not finish within {e.timeout} s\n{e.stdout}\n{e.stderr}", file=sys.stderr)
        return 1
    print(f"passed {case}")
    return 0


# Several launchers must share a store secret given by the user (one launcher makes its own).
MULTI_NODE_CASES = {"nodes_local", "rdzv_endpoint", "nodes_disagree", "rdzv_timeout", "node0_lost", "node1_lost",
                    "remote_interrupt", "cannot_start"}


def main():
    if len(sys.argv) == 4 and sys.argv[3] in MULTI_NODE_CASES:
        os.environ["DCOMM_STORE_SECRET"] = "launcher-tests-shared-secret"
    return run_case_from_argv(globals(), "PROBE", __doc__)


if __name__ == "__main__":
    sys.exit(main())
