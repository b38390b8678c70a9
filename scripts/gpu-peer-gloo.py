#!/usr/bin/env python3
"""The peer for scripts/gpu-diag.sh: gloo's all_reduce on CUDA tensors through torch.distributed, 2 ranks on the one
GPU (NCCL refuses two ranks on one device), the sizes dcomm-bench uses; mean us per call after warm-up."""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [8, 4096, 1 << 20, 16 << 20, 256 << 20]


def worker(rank, world, init):
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    torch.cuda.set_device(0)
    for size in SIZES:
        t = torch.rand(max(1, size // 4), device="cuda")
        iters = 20 if size < (64 << 20) else 5
        for _ in range(3):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
            torch.cuda.synchronize()
        us = (time.perf_counter() - start) / iters * 1e6
        if rank == 0:
            print(f"gloo cuda all_reduce {size:>12} B {us:12.1f} us", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = 2
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(world, os.path.join(d, "init")), nprocs=world)
    sys.exit(0)
