"""Failures reach torch programs as errors, never hangs. test_failure.py kill: the last rank dies (SIGKILL) in the
middle of training; every other rank's dist.all_reduce must raise a RuntimeError naming it, well within the
timeout. test_failure.py monitored: the ranks other than 0 never reach monitoredBarrier; rank 0's must name them.
"""
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from common import TIMEOUT, fail, init, log


def kill():
    rank, n = init()
    victim = n - 1
    t = torch.ones(4096)
    for step in range(100_000):
        if rank == victim and step == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        start = time.monotonic()
        try:
            dist.all_reduce(t)
            t.fill_(1)
        except RuntimeError as e:
            took = time.monotonic() - start
            log(f"SURVIVOR rank {rank} at step {step}: all_reduce raised after {took:.1f} s: {e}")
            if f"rank {victim}" not in str(e):
                fail(f"the error does not name rank {victim}")
            if took > TIMEOUT.total_seconds():
                fail(f"the error came after {took:.1f} s, past the timeout {TIMEOUT}")
            sys.exit(3)
    fail("training went on without the dead rank")


def monitored():
    rank, n = init()
    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(timedelta(seconds=60), wait_all_ranks=True)  # everyone arrives: passes
    if rank != 0:
        time.sleep(10)  # never arrives at the second one
        os._exit(0)
    try:
        dist.monitored_barrier(timeout=timedelta(seconds=3), wait_all_ranks=n > 2)  # dcomm_torch lets it past gloo
    except RuntimeError as e:
        missing = "Rank 1 " if n == 2 else "Ranks 1, 2 "
        if missing + "failed to pass monitoredBarrier" not in str(e):
            fail(f"monitoredBarrier's error does not name {missing}: {e}")
        log(f"OK: monitoredBarrier raised: {e}")
        os._exit(0)
    fail("monitoredBarrier passed without the other ranks")


if __name__ == "__main__":
    {"kill": kill, "monitored": monitored}[sys.argv[1]]()
