"""Shared by the torch suite's scripts: joining the world the way the test asked, and deterministic per-rank data."""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import dcomm_torch  # noqa: F401  registers the backend "dcomm"

TIMEOUT = timedelta(seconds=float(os.environ.get("DCOMM_TORCH_TEST_TIMEOUT_S", "120")))


def init(how="env", late=False):
    """Joins with init_method env://, tcp:// or file:// (the last two from the launcher's RANK and WORLD_SIZE).
    late: the launcher's rank 1 joins 2 s after the others (they wait for it in the rendezvous)."""
    if late and os.environ.get("RANK") == "1":
        time.sleep(2.0)
    if how == "env":
        dist.init_process_group("dcomm", timeout=TIMEOUT)
    else:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if how == "tcp":
            url = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
        else:
            run = os.environ.get("DCOMM_RUN_ID") or os.environ.get("TORCHELASTIC_RUN_ID", "local")
            url = f"file:///tmp/dcomm_torch_test_{run}"
        dist.init_process_group("dcomm", init_method=url, rank=rank, world_size=world, timeout=TIMEOUT)
    assert dist.get_backend() == "dcomm", dist.get_backend()
    return dist.get_rank(), dist.get_world_size()


def log(*args):
    print(f"[{dist.get_rank() if dist.is_initialized() else '?'}]", *args, flush=True)


def fail(msg):
    log("FAIL:", msg)
    sys.exit(1)
