#!/usr/bin/env python3
"""The ucx transport between real processes started by dcomm-run, driven by the transport suite's program
(tests/transports/mp_transports) with DCOMM_TRANSPORT=ucx.

usage: ucx_mp_tests.py DCOMM_RUN MP_TRANSPORTS CASE     (CASE is one of the functions named case_*)
Exits 0 when the case passes, 1 with a message when it fails, 77 when it cannot run here (netns).
"""
import os
import re
import subprocess
import sys

# The launcher tests' result checks (check() raises CaseFailed with dcomm-run's exit code and output).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launcher"))
from launcher_tests import CaseFailed, Skip, check, run_case_from_argv  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import netns_nodes  # noqa: E402

# Generous bounds: the machine running the tests may be a loaded 2-core box.
RUN_TIMEOUT_S = 150
NOTICE_DEAD_PEER_S = 20


def ucx_env(extra=None):
    env = dict(os.environ, DCOMM_TRANSPORT="ucx")
    env.update(extra or {})
    return env


def launch(nproc, mode, extra_env=None):
    args = [DCOMM_RUN, "--nproc-per-node", str(nproc), "--standalone", "--grace-period", "60", "--",
            MP_TRANSPORTS, mode]
    return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=ucx_env(extra_env))


def check_conformance(stdout, ranks, what, result=None):
    for rank in ranks:
        check(f"rank {rank} over ucx: 0 failure(s)" in stdout, f"{what}: rank {rank} did not pass over ucx", result)


def case_conformance():
    """Two processes: ping-pong, sizes, many in flight, any-source, tag order, cancel, short buffers, 256 MiB."""
    r = launch(2, "conformance")
    check(r.returncode == 0, "the conformance suite over ucx failed", r)
    check_conformance(r.stdout, (0, 1), "2 processes", r)


def kill_case(extra_env):
    # Rank 1 dies by SIGKILL while rank 0's 64 MiB send to it is in flight.
    r = launch(2, "peer_killed", extra_env)
    m = re.search(r"SURVIVOR rank 0 after ([0-9.]+) s: (.*)$", r.stdout, re.M)
    check(m is not None, "rank 0 did not report on its pending send", r)
    seconds, text = float(m.group(1)), m.group(2)
    check("[RemoteError]" in text and "rank 1" in text and "over ucx" in text,
          f"the error does not name rank 1 and ucx: {text}", r)
    check(seconds < NOTICE_DEAD_PEER_S, f"took {seconds} s to notice the dead peer", r)
    check("SIGKILL" in r.stderr, "dcomm-run did not report rank 1's SIGKILL", r)


def case_kill():
    """UCX's own detection: with peer error handling UCX 1.13 carries same-host traffic over TCP."""
    kill_case({})


def case_kill_shm():
    """Shared-memory UCX transports (error handling turned on by the user): dcomm's same-host liveness check."""
    kill_case({"UCX_POSIX_ERROR_HANDLING": "y", "UCX_SYSV_ERROR_HANDLING": "y"})


def case_netns():
    """Two dcomm-run launchers (--nnodes 2) in two network namespaces behind a switch (scripts/netns_nodes.py)."""
    try:
        with netns_nodes.Nodes(2, kind="ux", subnet="10.215.0") as nodes:
            # Each namespace sees only its loopback and its eth0, so UCX's defaults find eth0.
            try:
                outs = netns_nodes.run_all(
                    [nodes.dcomm_run(i, DCOMM_RUN, 1, [MP_TRANSPORTS, "conformance"], ["--host-id", f"netns-{i}"])
                     for i in (0, 1)], RUN_TIMEOUT_S, ucx_env({"DCOMM_STORE_SECRET": "ucx-two-nodes-secret"}))
            except subprocess.TimeoutExpired:
                raise CaseFailed("the launchers in the two namespaces did not finish")
    except netns_nodes.NamespacesUnavailable as e:
        raise Skip(str(e))
    for i, (rc, out, err) in enumerate(outs):
        detail = f"node {i} failed (exit {rc})\n--- stdout:\n{out}\n--- stderr:\n{err}"
        check(rc == 0, detail)
        check_conformance(out, (i,), detail)


def main():
    return run_case_from_argv(globals(), "MP_TRANSPORTS", __doc__)


if __name__ == "__main__":
    sys.exit(main())
