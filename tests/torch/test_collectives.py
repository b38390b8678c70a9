"""Every collective and point-to-point call of the dcomm backend against a reference computed here, at every dtype
and op, sizes 0, 1, odd and large, contiguous and not. Each rank computes every rank's input from a seed, so each
can check the result alone. Run by dcomm-run or torchrun on 2 or 3 ranks: test_collectives.py [env|tcp|file] [quick] [late]
"""
import functools
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from common import fail, init, log

R = dist.ReduceOp
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64, torch.complex64, torch.complex128]
SIZES = [0, 1, 7, 100_003]
PREMUL = R.PREMUL_SUM  # stands for dist._make_nccl_premul_sum(factor) in the op lists
CHECKS = 0


def is_int(dt):
    return not dt.is_floating_point and not dt.is_complex and dt != torch.bool


def data(rank, n, dt, op=R.SUM, salt=0):
    """Rank `rank`'s input: random, different on every rank and index, in a range where `op` cannot overflow."""
    g = torch.Generator().manual_seed(7919 * rank + 104729 * salt + n)
    if dt == torch.bool:
        return torch.rand(n, generator=g) < 0.5
    if dt.is_complex:
        return torch.randn(n, dtype=dt, generator=g)
    if dt.is_floating_point:
        x = torch.rand(n, dtype=torch.float64, generator=g) + 0.5 if op == R.PRODUCT else \
            torch.randn(n, dtype=torch.float64, generator=g)
        return x.to(dt)
    if op == R.PRODUCT:
        lo, hi = (1, 4) if dt == torch.uint8 else (-2, 3)
    elif op in (R.BAND, R.BOR, R.BXOR):
        lo, hi = 0, {torch.uint8: 256, torch.int8: 128}.get(dt, 1 << 30)
    else:
        lo, hi = {torch.uint8: (0, 80), torch.int8: (-40, 40)}.get(dt, (-(1 << 20), 1 << 20))
    return torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64).to(dt)


def reference(xs, op, dt, factor=None):
    if dt == torch.bool:
        f = {R.SUM: torch.logical_or, R.MAX: torch.logical_or, R.BOR: torch.logical_or,
             R.PRODUCT: torch.logical_and, R.MIN: torch.logical_and, R.BAND: torch.logical_and,
             R.BXOR: torch.logical_xor}[op]
        return functools.reduce(f, xs)
    wide = torch.complex128 if dt.is_complex else torch.float64 if dt.is_floating_point else torch.int64
    ys = [x.to(wide) for x in xs]
    if op == PREMUL:
        out = functools.reduce(torch.add, [y * factor for y in ys])
    elif op == R.SUM:
        out = functools.reduce(torch.add, ys)
    elif op == R.AVG:
        out = functools.reduce(torch.add, ys) / len(ys)
    elif op == R.PRODUCT:
        out = functools.reduce(torch.mul, ys)
    elif op == R.MIN:
        out = functools.reduce(torch.minimum, ys)
    elif op == R.MAX:
        out = functools.reduce(torch.maximum, ys)
    else:
        f = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op]
        out = functools.reduce(f, ys)
    return out.to(dt)


def same(got, want, what):
    global CHECKS
    CHECKS += 1
    if got.dtype != want.dtype or got.shape != want.shape:
        fail(f"{what}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}")
    if got.dtype.is_floating_point or got.dtype.is_complex:
        tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5, torch.complex64: 1e-5}.get(got.dtype,
                                                                                                          1e-12)
        ok = torch.allclose(got.to(torch.complex128), want.to(torch.complex128), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        bad = (got != want).nonzero()[:5].flatten().tolist()
        fail(f"{what}: mismatch at {bad}: got {got.flatten()[bad].tolist()} want {want.flatten()[bad].tolist()}")


def ops_for(dt):
    if dt.is_complex:
        return [R.SUM, R.AVG, PREMUL]
    if dt.is_floating_point:
        return [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX, PREMUL]
    return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]


def check_all_reduce(rank, n, sizes):
    for dt in DTYPES:
        for op in ops_for(dt):
            for size in sizes:
                xs = [data(r, size, dt, op if op != PREMUL else R.SUM) for r in range(n)]
                t = xs[rank].clone()
                if op == PREMUL:
                    factor = 0.5 + rank * 0  # the same factor on every rank, as torch requires
                    dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
                    same(t, reference(xs, op, dt, factor), f"all_reduce premul {dt} n={size}")
                else:
                    dist.all_reduce(t, op=op)
                    same(t, reference(xs, op, dt), f"all_reduce {op} {dt} n={size}")
    # Non-contiguous: every other column of a matrix, and a transpose.
    for dt in (torch.float32, torch.int64, torch.complex64):
        base = [data(r, 6 * 9, dt).view(6, 9) for r in range(n)]
        t = base[rank].clone()
        dist.all_reduce(t[:, ::2])
        want = base[rank].clone()
        want[:, ::2] = reference([b[:, ::2] for b in base], R.SUM, dt)
        same(t, want, f"all_reduce of a strided view {dt}")
        tt = base[rank].clone().t()
        dist.all_reduce(tt, op=R.SUM)
        same(tt, reference([b.t() for b in base], R.SUM, dt), f"all_reduce of a transpose {dt}")
    check_all_reduce_coalesced(rank, n)


def dcomm_calls(group=None):
    """How many dcomm collectives the group's backend has issued."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg.collective_calls()


def check_all_reduce_coalesced(rank, n):
    """Several tensors of one dtype (any shapes, strided too) in one dcomm call over a flattened buffer, as gloo."""
    for dt, op in ((torch.float32, R.MAX), (torch.int64, R.SUM), (torch.complex64, R.SUM), (torch.float64, R.AVG),
                   (torch.bool, R.PRODUCT)):
        xs = [[data(r, k, dt, op, salt=k) for k in (0, 1, 5, 1000, 4 * 7)] for r in range(n)]
        ts = [x.clone() for x in xs[rank]]
        ts[4] = ts[4].view(4, 7).t()  # a transposed view: staged through the flat buffer, written back in place
        before = dcomm_calls()
        dist.all_reduce_coalesced(ts, op=op)
        if dcomm_calls() - before != 1:
            fail(f"all_reduce_coalesced of {len(ts)} {dt} tensors made {dcomm_calls() - before} dcomm calls, not 1")
        for i, t in enumerate(ts):
            want = reference([x[i] for x in xs], op, dt)
            same(t, want.view(4, 7).t() if i == 4 else want, f"all_reduce_coalesced {op} {dt} tensor {i}")
    try:  # the backend's own check (torch's Python wrapper refuses mixed dtypes before asking it)
        pg = dist.distributed_c10d._get_default_group()
        pg.allreduce_coalesced([torch.zeros(2), torch.zeros(2, dtype=torch.float64)],
                               dist.AllreduceCoalescedOptions()).wait()
        fail("all_reduce_coalesced of float32 and float64 did not raise")
    except RuntimeError as e:
        if "share a dtype" not in str(e):
            fail(f"all_reduce_coalesced of mixed dtypes: unclear message: {e}")


def check_rooted(rank, n, sizes):
    for dt in DTYPES:
        for size in sizes:
            for root in range(n):
                xs = [data(r, size, dt, salt=root) for r in range(n)]
                t = xs[rank].clone()
                dist.broadcast(t, root)
                same(t, xs[root], f"broadcast {dt} n={size} root={root}")
                t = xs[rank].clone()
                op = R.SUM if dt == torch.bool or dt.is_complex else R.MAX
                dist.reduce(t, root, op=op)
                if rank == root:
                    same(t, reference(xs, op, dt), f"reduce {dt} n={size} root={root}")
                else:
                    same(t, xs[rank], f"reduce {dt} n={size} root={root}: a non-root's tensor keeps its input")
                out = [torch.empty_like(xs[0]) for _ in range(n)] if rank == root else None
                dist.gather(xs[rank], out, dst=root)
                if rank == root:
                    for r in range(n):
                        same(out[r], xs[r], f"gather {dt} n={size} root={root} block {r}")
                ins = [data(r, size, dt, salt=root + 100) for r in range(n)]
                t = torch.empty_like(ins[0])
                dist.scatter(t, ins if rank == root else None, src=root)
                same(t, ins[rank], f"scatter {dt} n={size} root={root}")
    # Into non-contiguous tensors: broadcast into a transpose.
    x = data(0, 35, torch.float64).view(5, 7).t()
    t = x.clone() if rank == 0 else torch.zeros(5, 7, dtype=torch.float64).t()
    dist.broadcast(t, 0)
    same(t, x, "broadcast into a transpose")


def check_gathers(rank, n, sizes):
    for dt in DTYPES:
        for size in sizes:
            xs = [data(r, size, dt, salt=3) for r in range(n)]
            out = [torch.full_like(xs[0], 1) for _ in range(n)]
            dist.all_gather(out, xs[rank])
            for r in range(n):
                same(out[r], xs[r], f"all_gather {dt} n={size} block {r}")
            flat = torch.empty(n * size, dtype=dt)
            dist._all_gather_base(flat, xs[rank])
            same(flat, torch.cat(xs), f"_all_gather_base {dt} n={size}")
            op = R.SUM if dt.is_complex else R.MAX
            ins = [[data(r, size, dt, salt=10 + j) for j in range(n)] for r in range(n)]
            out = torch.empty(size, dtype=dt)
            dist.reduce_scatter(out, [x.clone() for x in ins[rank]], op=op)
            same(out, reference([ins[r][rank] for r in range(n)], op, dt), f"reduce_scatter {dt} n={size}")
            out = torch.empty(size, dtype=dt)
            dist._reduce_scatter_base(out, torch.cat(ins[rank]), op=op)
            same(out, reference([ins[r][rank] for r in range(n)], op, dt), f"_reduce_scatter_base {dt} n={size}")
    # Coalesced all_gather of tensors of different sizes (torch asks for one dtype); into strided outputs.
    xs = [[data(r, 3, torch.int32, salt=1), data(r, 0, torch.int32), data(r, 11, torch.int32, salt=2)]
          for r in range(n)]
    outs = [[torch.empty_like(x) for x in xs[0]] for _ in range(n)]
    outs[-1][2] = torch.empty(22, dtype=torch.int32)[::2]  # a strided output
    before = dcomm_calls()
    dist.all_gather_coalesced(outs, xs[rank])
    if dcomm_calls() - before != 1:
        fail(f"all_gather_coalesced of 3 tensors made {dcomm_calls() - before} dcomm calls, not 1")
    for r in range(n):
        for i in range(3):
            same(outs[r][i], xs[r][i], f"all_gather_coalesced rank {r} tensor {i}")
    xs = [[data(r, 6, torch.complex128, salt=5).view(2, 3), data(r, 1, torch.complex128, salt=6).view(())]
          for r in range(n)]
    outs = [[torch.empty_like(x) for x in xs[0]] for _ in range(n)]
    dist.all_gather_coalesced(outs, xs[rank])
    for r in range(n):
        for i in range(2):
            same(outs[r][i], xs[r][i], f"all_gather_coalesced complex128 rank {r} tensor {i}")
    xs = [data(r, 12, torch.float32, salt=4).view(3, 4) for r in range(n)]
    outs = [torch.zeros(4, 3).t() for _ in range(n)]
    dist.all_gather(outs, xs[rank])
    for r in range(n):
        same(outs[r], xs[r], f"all_gather into a transpose, block {r}")


def split(i, j):
    """Rows rank i sends rank j in the uneven all-to-all (0 included)."""
    return (i + 2 * j) % 3


def check_all_to_all(rank, n):
    for dt in (torch.bool, torch.int8, torch.int64, torch.bfloat16, torch.float32, torch.complex128):
        for rows in (0, 1, 5, 4001):
            xs = [data(r, n * rows * 3, dt, salt=20).view(n * rows, 3) for r in range(n)]
            out = torch.empty_like(xs[0])
            dist.all_to_all_single(out, xs[rank])
            want = torch.cat([xs[r][rank * rows:(rank + 1) * rows] for r in range(n)])
            same(out, want, f"all_to_all_single {dt} rows={rows}")
        # Uneven split sizes: rank i's input holds split(i, j) rows for each j in order.
        ins = [data(r, sum(split(r, j) for j in range(n)) * 3, dt, salt=21).view(-1, 3) for r in range(n)]

        def block(i, j):
            start = sum(split(i, k) for k in range(j))
            return ins[i][start:start + split(i, j)]
        out = torch.empty(sum(split(i, rank) for i in range(n)), 3, dtype=dt)
        dist.all_to_all_single(out, ins[rank], output_split_sizes=[split(i, rank) for i in range(n)],
                               input_split_sizes=[split(rank, j) for j in range(n)])
        same(out, torch.cat([block(i, rank) for i in range(n)]), f"all_to_all_single with splits {dt}")
        outs = [torch.empty(split(i, rank), 3, dtype=dt) for i in range(n)]
        dist.all_to_all(outs, [block(rank, j).clone() for j in range(n)])
        for i in range(n):
            same(outs[i], block(i, rank), f"all_to_all {dt} from {i}")


def check_p2p(rank, n):
    for dt in (torch.bool, torch.uint8, torch.float16, torch.float64, torch.complex64):
        for size in SIZES:
            # A ring: post the receive and the send, then wait for both (no order between ranks is assumed).
            nxt, prv = (rank + 1) % n, (rank - 1) % n
            t = torch.empty(size, dtype=dt)
            reqs = [dist.irecv(t, prv, tag=3), dist.isend(data(rank, size, dt, salt=30), nxt, tag=3)]
            for q in reqs:
                q.wait()
            same(t, data(prv, size, dt, salt=30), f"isend/irecv ring {dt} n={size}")
    # Blocking send/recv between 0 and every other rank; tags matched out of order; a strided receive.
    for peer in range(1, n):
        if rank == 0:
            dist.send(data(0, 9, torch.float32, salt=peer), peer, tag=7)
            dist.send(data(0, 4, torch.float32, salt=peer + 50), peer, tag=8)
        elif rank == peer:
            a, b = torch.empty(4), torch.zeros(3, 6)[:, ::2]
            dist.recv(a, 0, tag=8)
            dist.recv(b, 0, tag=7)
            same(a, data(0, 4, torch.float32, salt=peer + 50), "recv tag 8")
            same(b, data(0, 9, torch.float32, salt=peer).view(3, 3), "recv tag 7 into a strided view")
    # Any source: rank 0 learns who sent each message.
    if rank == 0:
        seen = set()
        for _ in range(n - 1):
            t = torch.empty(5, dtype=torch.int64)
            src = dist.recv(t)
            same(t, torch.full((5,), src, dtype=torch.int64), f"recv from any source (sender {src})")
            seen.add(src)
        if seen != set(range(1, n)):
            fail(f"recv from any source saw senders {seen}")
        w = dist.irecv(torch.empty(1, dtype=torch.int64), tag=9)
        w.wait()
        if w._source_rank() not in range(1, n):
            fail(f"irecv from any source: source rank {w._source_rank()}")
    else:
        dist.send(torch.full((5,), rank, dtype=torch.int64), 0)
        if rank == 1:
            dist.send(torch.ones(1, dtype=torch.int64), 0, tag=9)


def check_subgroups(rank, n):
    groups = {tuple(g): dist.new_group(list(g)) for g in ([0, n - 1], [1], list(range(n)))}
    for ranks, g in groups.items():
        if rank not in ranks:
            continue
        xs = {r: data(r, 33, torch.float32, salt=40) for r in ranks}
        t = xs[rank].clone()
        dist.all_reduce(t, group=g)
        same(t, reference(list(xs.values()), R.SUM, torch.float32), f"all_reduce in group {ranks}")
        out = [torch.empty(33) for _ in ranks]
        dist.all_gather(out, xs[rank], group=g)
        for i, r in enumerate(ranks):
            same(out[i], xs[r], f"all_gather in group {ranks}")
        t = xs[rank].clone()
        dist.broadcast(t, ranks[-1], group=g)  # a global rank as the root
        same(t, xs[ranks[-1]], f"broadcast in group {ranks}")
        if dist.get_world_size(g) != len(ranks) or dist.get_rank(g) != ranks.index(rank):
            fail(f"group {ranks}: size {dist.get_world_size(g)}, rank {dist.get_rank(g)}")
    dist.barrier()


def process_counts():
    """Threads and memory mappings of this process: a dcomm world adds both (its mesh's shared-memory rings, its
    threads); a subgroup of one adds neither."""
    with open("/proc/self/maps") as f:
        return len(os.listdir("/proc/self/task")), sum(1 for _ in f)


def check_many_groups(rank, n):
    """Many torch groups over the world's connections: each is a dcomm subgroup (no new mesh or threads; its only
    shared memory is its members' small-call slots, one mapping per member), and each computes right. Every rank calls new_group, as torch requires; only members build one."""
    sets = [list(range(n)), [n - 1], [0, n - 1], list(range(n - 1, -1, -1)), sorted({1, n - 1}), [0],
            list(range(n))] * 2
    dist.barrier()
    threads, maps = process_counts()
    for i, ranks in enumerate(sets):
        g = dist.new_group(ranks)
        if rank not in ranks:
            continue
        members = sorted(ranks)
        xs = {r: data(r, 7 + i, torch.float32, salt=80 + i) for r in members}
        t = xs[rank].clone()
        dist.all_reduce(t, group=g)
        same(t, reference(list(xs.values()), R.SUM, torch.float32), f"all_reduce in new group {i} {members}")
        out = [torch.empty(7 + i) for _ in members]
        dist.all_gather(out, xs[rank], group=g)
        for j, r in enumerate(members):
            same(out[j], xs[r], f"all_gather in new group {i} {members}")
    dist.barrier()
    now_threads, now_maps = process_counts()
    # A world of its own per group added about 10 mappings and 2 threads per group here; a subgroup maps one slot
    # segment per member (collectives/slots.hpp).
    slot_maps = sum(len(ranks) for ranks in sets if rank in ranks)
    if now_threads > threads or now_maps > maps + slot_maps:
        fail(f"{len(sets)} new groups took this process from {threads} threads and {maps} mappings to "
             f"{now_threads} and {now_maps}: groups should share the world's mesh")


def check_async(rank, n, group=None):
    """Async handles and futures: on a group that runs host collectives inline (the default: complete at the
    call) and on one that hands them to dcomm's worker (DCOMM_TORCH_ASYNC_BYTES=0: complete later)."""
    xs = [data(r, 50_000, torch.float32, salt=60) for r in range(n)]
    ts = [xs[rank].clone() * (k + 1) for k in range(4)]
    hs = [dist.all_reduce(t, async_op=True, group=group) for t in ts]
    fut = hs[0].get_future().then(lambda f: f.value()[0] * 2)
    for h in reversed(hs):
        if not h.wait(timeout=timedelta(seconds=120)):
            fail("wait returned False")
        if not h.is_completed() or not h.is_success():
            fail("a waited handle is not complete and successful")
    want = reference(xs, R.SUM, torch.float32)
    for k, t in enumerate(ts):
        same(t, want * (k + 1), f"async all_reduce {k} (group {group})")
    same(fut.wait(), want * 2, "a future's then() callback")
    same(hs[1].result()[0], want * 2, "Work.result()")
    # A future nobody waits on through the Work: its callback runs when dcomm's work completes.
    t = xs[rank].clone()
    f = dist.all_reduce(t, async_op=True, group=group).get_future()
    same(torch.futures.wait_all([f])[0][0], want, "torch.futures.wait_all")
    h = dist.barrier(async_op=True, group=group)
    h.wait()
    h = dist.broadcast(torch.zeros(3), 0, async_op=True, group=group)
    h.get_future().wait()
    if not h.is_completed():
        fail("a handle whose future completed is not complete")


def async_group():
    """A group whose host collectives all go through dcomm's worker thread (the variable is read at creation)."""
    os.environ["DCOMM_TORCH_ASYNC_BYTES"] = "0"
    try:
        return dist.new_group()
    finally:
        del os.environ["DCOMM_TORCH_ASYNC_BYTES"]


def check_errors(rank, n):
    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(timedelta(seconds=60), wait_all_ranks=True)
    try:
        dist.all_reduce(torch.zeros(3, dtype=torch.int16))
        fail("an int16 all_reduce did not raise")
    except RuntimeError as e:
        if "dtype" not in str(e) or "Short" not in str(e):
            fail(f"int16: unclear message: {e}")
    try:
        dist.all_reduce(torch.zeros(3), op=R.BXOR)
        fail("a bitwise op on floats did not raise")
    except RuntimeError as e:
        if "bitwise" not in str(e):
            fail(f"BXOR on float: unclear message: {e}")
    check_recv_size_mismatch(rank, n)
    dist.barrier()


def check_recv_size_mismatch(rank, n):
    """A recv whose tensor is not the message's size raises on the receiver, as with gloo, instead of leaving the
    tail untouched (shorter message) or truncating (longer); the group stays usable."""
    last = n - 1
    if rank == 0:
        dist.send(data(0, 3, torch.float32, salt=70), last, tag=11)
        dist.send(data(0, 5, torch.float32, salt=71), last, tag=12)
        dist.send(data(0, 4, torch.int64, salt=72), last, tag=13)
    elif rank == last:
        for size, tag, want in ((5, 11, "holds 12 bytes but the Float tensor of 5 elements holds 20"),
                                (3, 12, "does not fit")):
            t = torch.full((size,), 7.0)
            try:
                dist.recv(t, 0, tag=tag)
                fail(f"recv of a {3 if tag == 11 else 5}-float message into {size} floats did not raise")
            except RuntimeError as e:
                if want not in str(e) or "rank 0" not in str(e):
                    fail(f"recv size mismatch (tag {tag}): unclear message: {e}")
        t = torch.empty(4, dtype=torch.int64)
        dist.recv(t, 0, tag=13)
        same(t, data(0, 4, torch.int64, salt=72), "recv after two refused ones")
    dist.barrier()


def main():
    how = sys.argv[1] if len(sys.argv) > 1 else "env"
    quick = "quick" in sys.argv[2:]
    rank, n = init(how, late="late" in sys.argv[2:])
    if quick:
        check_subgroups(rank, n)
        xs = [data(r, 7, torch.float32) for r in range(n)]
        t = xs[rank].clone()
        dist.all_reduce(t)
        same(t, reference(xs, R.SUM, torch.float32), f"all_reduce over {how}://")
    else:
        check_all_reduce(rank, n, SIZES)
        check_rooted(rank, n, SIZES)
        check_gathers(rank, n, SIZES)
        check_all_to_all(rank, n)
        check_p2p(rank, n)
        check_subgroups(rank, n)
        check_many_groups(rank, n)
        check_async(rank, n)
        check_async(rank, n, async_group())
        check_errors(rank, n)
    dist.barrier()
    log(f"OK: {CHECKS} checks on {n} ranks ({how}://)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
