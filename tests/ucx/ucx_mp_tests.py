#!/usr/bin/env python3
"""The ucx transport between real processes started by dcomm-run (the ucx_peer program).

usage: ucx_mp_tests.py DCOMM_RUN UCX_PEER CASE     (CASE is one of the functions named case_*)
Exits 0 when the case passes, 1 with a message when it fails, 77 when it cannot run here (netns).
"""
import os
import re
import subprocess
import sys
import uuid

# The launcher tests' result checks (check() raises CaseFailed with dcomm-run's exit code and output).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launcher"))
from launcher_tests import CaseFailed, check  # noqa: E402

# Generous bounds: the machine running the tests may be a loaded 2-core box.
RUN_TIMEOUT_S = 90
NOTICE_DEAD_PEER_S = 20


class Skip(Exception):
    pass


def ucx_env(extra=None):
    env = dict(os.environ, DCOMM_TRANSPORT="ucx")
    env.update(extra or {})
    return env


def launch(args, env, prefix=()):
    cmd = list(prefix) + [DCOMM_RUN] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)


def case_pingpong():
    r = launch(["--nproc-per-node", "2", "--", UCX_PEER, "pingpong"], ucx_env())
    check(r.returncode == 0, "ping-pong over ucx failed", r)
    for rank in (0, 1):
        check(f"[rank {rank}]: pingpong ok" in r.stdout, f"rank {rank} did not report success", r)


def kill_case(extra_env):
    r = launch(["--nproc-per-node", "2", "--", UCX_PEER, "kill"], ucx_env(extra_env))
    m = re.search(r"^\[rank 0\]: SURVIVOR ([0-9.]+) (.*)$", r.stdout, re.M)
    check(m is not None, "rank 0 did not report on its pending operation", r)
    seconds, text = float(m.group(1)), m.group(2)
    check("rank 1" in text and "over ucx" in text, f"the error does not name rank 1 and ucx: {text}", r)
    check("completed without an error" not in text and "wrong error" not in text, f"unexpected: {text}", r)
    check(seconds < NOTICE_DEAD_PEER_S, f"took {seconds} s to notice the dead peer", r)
    check(r.returncode != 0 and "SIGKILL" in r.stderr, "dcomm-run did not report rank 1's SIGKILL", r)


def case_kill():
    """UCX's own detection: with peer error handling UCX 1.13 carries same-host traffic over TCP."""
    kill_case({})


def case_kill_shm():
    """Shared-memory UCX transports (error handling enabled by the user): dcomm's same-host liveness check."""
    kill_case({"UCX_POSIX_ERROR_HANDLING": "y", "UCX_SYSV_ERROR_HANDLING": "y"})


def ip(*args, check_rc=True):
    r = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=30)
    if check_rc and r.returncode != 0:
        raise CaseFailed(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def case_netns():
    """Two dcomm-run launchers (--nnodes 2) in two network namespaces joined by a veth pair."""
    tag = uuid.uuid4().hex[:6]
    ns = [f"dcucx{tag}a", f"dcucx{tag}b"]
    veth = [f"vdcx{tag}a", f"vdcx{tag}b"]
    # Addresses that exist only inside the two namespaces.
    addr = [f"10.{int(tag[:2], 16)}.{int(tag[2:4], 16)}.1", f"10.{int(tag[:2], 16)}.{int(tag[2:4], 16)}.2"]
    try:
        r = subprocess.run(["ip", "netns", "add", ns[0]], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise Skip("no `ip` command")
    if r.returncode != 0:
        raise Skip(f"cannot create a network namespace: {r.stderr.strip()}")
    try:
        ip("netns", "add", ns[1])
        ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for i in (0, 1):
            ip("link", "set", veth[i], "netns", ns[i])
            ip("-n", ns[i], "addr", "add", addr[i] + "/30", "dev", veth[i])
            ip("-n", ns[i], "link", "set", veth[i], "up")
            ip("-n", ns[i], "link", "set", "lo", "up")
        procs = []
        for i in (0, 1):
            # Each namespace sees only its loopback and its end of the veth, so UCX's defaults find the veth.
            args = ["ip", "netns", "exec", ns[i], DCOMM_RUN, "--nnodes", "2", "--node-rank", str(i),
                    "--nproc-per-node", "1", "--master-addr", addr[0], "--master-port", "29500",
                    "--host-id", f"netns-{i}", "--", UCX_PEER, "pingpong"]
            procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          env=ucx_env()))
        outs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise CaseFailed("the launchers in the two namespaces did not finish")
            outs.append((p.returncode, out, err))
        for i, (rc, out, err) in enumerate(outs):
            check(rc == 0 and "pingpong ok" in out,
                  f"node {i} failed (exit {rc})\n--- stdout:\n{out}\n--- stderr:\n{err}")
    finally:
        for n in ns:
            ip("netns", "del", n, check_rc=False)  # takes its end of the veth pair with it


def main():
    global DCOMM_RUN, UCX_PEER
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    DCOMM_RUN, UCX_PEER, case = sys.argv[1], sys.argv[2], sys.argv[3]
    fn = globals().get("case_" + case)
    if fn is None:
        print(f"no case {case}", file=sys.stderr)
        return 2
    try:
        fn()
    except Skip as e:
        print(f"SKIP {case}: {e}")
        return 77
    except (CaseFailed, subprocess.TimeoutExpired) as e:
        print(f"FAIL {case}: {e}", file=sys.stderr)
        return 1
    print(f"PASS {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
