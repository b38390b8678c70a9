"""DDP on dcomm: a small model, initialised with a different seed on every rank and trained for a few steps on
each rank's shard of a global batch, must end where a single process training on the whole batch ends (DDP
broadcasts rank 0's parameters, then averages gradients; buckets are small so that several overlap, each
completed through Work.getFuture())."""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from common import fail, init, log

STEPS = 6
GLOBAL_BATCH = 12  # divisible by 2 and 3: every rank's shard is the same size, so mean-of-means is the mean


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(10, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(GLOBAL_BATCH, 10, generator=g), torch.randn(GLOBAL_BATCH, 3, generator=g)


def train(model, shard):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        x, y = shard(*batch(step))
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def main():
    rank, n = init()
    per = GLOBAL_BATCH // n
    local = make_model(seed=100 + rank)  # a different start on every rank
    if rank > 0 and torch.equal(local[0].weight, make_model(seed=100)[0].weight):
        fail("the ranks' models start equal: the test would not show DDP's broadcast")
    ddp = DDP(local, bucket_cap_mb=0.005)
    train(ddp, lambda x, y: (x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]))
    reference = train(make_model(seed=100), lambda x, y: (x, y))
    worst = 0.0
    for (name, got), want in zip(ddp.module.named_parameters(), reference.parameters()):
        worst = max(worst, (got - want).abs().max().item())
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            fail(f"parameter {name} differs from the single-process reference by {(got - want).abs().max():.3g}")
    # Every rank holds the same parameters.
    flat = torch.cat([p.detach().flatten() for p in ddp.parameters()])
    copies = [torch.empty_like(flat) for _ in range(n)]
    dist.all_gather(copies, flat)
    if not all(torch.equal(c, flat) for c in copies):
        fail("the ranks' parameters differ after training")
    log(f"OK: DDP on {n} ranks matches the single-process reference (max difference {worst:.2g})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
