#!/usr/bin/env python3
"""What a new user reads from dcomm-run when something is wrong: an address that is not on this host, a store
that is not there, the launcher's own log lines, and a segfaulting rank's summary.

usage: message_tests.py DCOMM_RUN PROBE CASE    (CASE is one of the functions named case_*)
"""
import os
import signal
import sys

import launcher_tests as lt
from launcher_tests import check, free_port, run

# TEST-NET-1 (RFC 5737): never an address of this host.
NOT_HERE = "192.0.2.7"


def case_addr_not_here():
    """--master-addr of another host: errno 99 reported as "address not available", with what to check."""
    r = run(["--nproc-per-node", "1", "--master-addr", NOT_HERE, "--", lt.PROBE, "env"])
    lines = r.stderr.splitlines()
    check(r.returncode == 2 and len(lines) == 1, "exit 2 and one line", r)
    check(f"address not available: {NOT_HERE} is not an address of this host" in lines[0], "names errno 99", r)
    check("in use" not in lines[0], "does not blame a taken port", r)


def case_no_store():
    """Node 1 with no node 0: one sentence about the whole wait and why it fails, no nested inner timeout."""
    port = free_port()
    r = run(["--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "1", "--master-port", port, "--rdzv-timeout",
             "2", "--", lt.PROBE, "env"])
    lines = r.stderr.splitlines()
    check(r.returncode == 3 and len(lines) == 1, "exit 3 and one line", r)
    check(lines[0].startswith(f"dcomm-run: error: no store at 127.0.0.1:{port} after "), "the whole wait", r)
    check(f"connection refused (nothing listens on 127.0.0.1:{port})" in lines[0], "the reason", r)
    check("timeout 1 ms" not in lines[0] and "no connection after" not in lines[0], "no nested message", r)


def case_log_level():
    """DCOMM_LOG_LEVEL in any case or as a number; the launcher's own log lines start with "dcomm-run: "."""
    for level in ("INFO", "Info", "2", "debug", "3"):
        r = run(["--nproc-per-node", "1", "--", lt.PROBE, "env"], env=dict(os.environ, DCOMM_LOG_LEVEL=level))
        check(r.returncode == 0 and "is not one of" not in r.stderr, f"DCOMM_LOG_LEVEL={level} refused", r)
        own = [l for l in r.stderr.splitlines() if "TCP store server listening" in l]
        check(len(own) == 1 and own[0].startswith("dcomm-run: [dcomm "), f"DCOMM_LOG_LEVEL={level}: prefix", r)
    r = run(["--nproc-per-node", "1", "--", lt.PROBE, "env"], env=dict(os.environ, DCOMM_LOG_LEVEL="loud"))
    check("DCOMM_LOG_LEVEL='loud' is not one of" in r.stderr, "a bad level is named", r)


def case_segfault_tail():
    """A rank's own last stderr lines stay in the summary although a crash backtrace follows them."""
    r = run(["--nproc-per-node", "2", "--", lt.PROBE, "crash-with-backtrace", "1"])
    check(r.returncode == 128 + signal.SIGSEGV, "exit 128 + SIGSEGV", r)
    summary = r.stderr[r.stderr.index("dcomm-run: FAILED"):]
    check("dcomm-run:         rank 1: step 7, touching the halo buffer" in summary, "the rank's own last line", r)
    check("Caught signal 11" in summary, "the crash handler's headline", r)
    check("(26 backtrace lines not shown; see the rank's stderr above)" in summary, "the frames counted", r)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[3] in {"no_store"}:
        os.environ["DCOMM_STORE_SECRET"] = "launcher-tests-shared-secret"  # several launchers share the user's
    sys.exit(lt.run_case_from_argv(globals(), "PROBE", __doc__))
