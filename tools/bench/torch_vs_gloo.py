#!/usr/bin/env python3
"""dcomm beside gloo through torch.distributed, in one run: dist.all_reduce latency at 8 B, bandwidth at 1, 16 and
64 MiB, and the step time of DDP on an MLP of about 25M parameters, on 2 ranks of this machine.

    PYTHONPATH=build/bindings/torch /usr/bin/python3 tools/bench/torch_vs_gloo.py [--ranks 2] [--quick]

It starts its ranks itself (file:// rendezvous). Both backends get the same tensors, in alternating rounds so that
a change in machine load hits both. Times are medians over the rounds; ratio = gloo time / dcomm time (> 1: dcomm is
faster). Run it on a quiet machine: numbers taken beside other work mean little (docs/torch.md).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def time_all_reduce(group, t, iters):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    return (time.perf_counter() - start) / iters


def make_mlp():
    torch.manual_seed(0)
    # 4096*2048*2 + 2048*2048*2 + 2048*1024 + biases ~ 27.3M parameters
    return nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 4096), nn.ReLU(),
                         nn.Linear(4096, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1024))


def ddp_step_time(group, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(make_mlp(), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 1024), torch.randn(32, 1024)
    times = []
    for i in range(steps + 2):
        dist.barrier(group=group)
        start = time.perf_counter()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 2:  # the first steps build DDP's buckets
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker(rank, world, init_file, quick, results):
    import dcomm_torch  # noqa: F401  registers "dcomm"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    groups = {"gloo": dist.new_group(backend="gloo"), "dcomm": dist.new_group(backend="dcomm")}
    rounds = 3 if quick else 7
    cases = [("all_reduce 8 B", 8, 200 if quick else 5000)] + [
        (f"all_reduce {m} MiB", m << 20, 3 if quick else max(5, 160 // m)) for m in (1, 16, 64)]
    rows = []
    for name, nbytes, iters in cases:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        samples = {k: [] for k in groups}
        for _ in range(rounds):
            for k, g in groups.items():
                samples[k].append(time_all_reduce(g, t, iters))
        rows.append((name, nbytes, {k: statistics.median(v) for k, v in samples.items()}))
    step = {k: [] for k in groups}
    for _ in range(1 if quick else 3):
        for k, g in groups.items():
            step[k].append(ddp_step_time(g, 2 if quick else 10))
    rows.append(("DDP step, MLP 27M params", 0, {k: statistics.median(v) for k, v in step.items()}))
    if rank == 0:
        results.put(rows)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="few iterations: checks that the script runs")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        procs = [ctx.Process(target=worker, args=(r, args.ranks, os.path.join(d, "init"), args.quick, results))
                 for r in range(args.ranks)]
        for p in procs:
            p.start()
        rows = results.get()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs):
            sys.exit(f"a rank failed: exit codes {[p.exitcode for p in procs]}")
    n = args.ranks
    print(f"torch {torch.__version__}, {n} ranks on one host; median times; ratio = gloo / dcomm")
    print(f"{'case':28} {'gloo':>12} {'dcomm':>12} {'ratio':>7}   {'gloo bus BW':>12} {'dcomm bus BW':>13}")
    for name, nbytes, t in rows:
        line = f"{name:28} {t['gloo'] * 1e6:10.1f}us {t['dcomm'] * 1e6:10.1f}us {t['gloo'] / t['dcomm']:7.2f}"
        if nbytes >= 1 << 20:
            bus = lambda s: 2 * (n - 1) / n * nbytes / s / 1e9  # noqa: E731  (GB/s, as nccl-tests count it)
            line += f"   {bus(t['gloo']):9.2f}GB/s {bus(t['dcomm']):10.2f}GB/s"
        print(line)


if __name__ == "__main__":
    main()
