#!/usr/bin/env python3
"""dcomm-run on a terminal (a pseudo-terminal here): a rank's redrawn line ('\\r', a progress bar) is shown as the
launcher's status line, taken away around other lines, and never left behind as a stray line; dcomm-bench's rank 0
draws its bar through it.

usage: tty_tests.py DCOMM_RUN PROBE CASE    (CASE is one of the functions named case_*)
"""
import os
import pty
import re
import select
import subprocess
import sys
import time

import launcher_tests as lt
from launcher_tests import check


def run_on_pty(args, timeout=lt.RUN_TIMEOUT_S):
    """Runs dcomm-run with stdout and stderr on one pseudo-terminal; returns (exit code, everything written)."""
    try:
        master, slave = pty.openpty()
    except OSError as e:
        raise lt.Skip(f"no pseudo-terminal here: {e}")
    p = subprocess.Popen([lt.DCOMM_RUN] + args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            out += data
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=timeout), out.decode(errors="replace")


def case_status_line():
    rc, out = run_on_pty(["--nproc-per-node", "2", "--", lt.PROBE, "bar"])
    check(rc == 0, f"exit {rc}: {out!r}")
    check("\r\x1b[K[rank 0]: [#..] 1/3" in out and "[rank 0]: [###] 3/3" in out, f"the bar is drawn: {out!r}")
    check(out.count("row 3") == 2, f"both ranks' rows: {out!r}")
    # Every row line starts on a clean line: the status line was taken away before it.
    for m in re.finditer(r"\[rank 0\]: row (\d)", out):
        before = out[max(0, m.start() - 4):m.start()]
        check(m.start() == 0 or before.endswith("\r\x1b[K") or before.endswith("\n"), f"row {m.group(1)} after {before!r}: {out!r}")
    lines = [l for l in out.replace("\r\n", "\n").split("\n") if l.strip()]
    check(not any(re.fullmatch(r"(\r\x1b\[K)*\[rank 0\]: (\r\x1b\[K)*", l) for l in lines), f"a stray line: {out!r}")


def case_bench_bar():
    bench = os.path.join(os.environ["DCOMM_BUILD_DIR"], "tools", "bench", "dcomm-bench")
    rc, out = run_on_pty(["--nproc-per-node", "2", "--", bench, "all_reduce", "-b", "8", "-e", "64", "-f", "2",
                          "-n", "2", "-w", "1"])
    check(rc == 0, f"exit {rc}: {out!r}")
    check(re.search(r"\[rank 0\]: \[#+\.*\] \d+/\d+", out), f"rank 0's bar through dcomm-run: {out!r}")


if __name__ == "__main__":
    sys.exit(lt.run_case_from_argv(globals(), "PROBE", __doc__))
