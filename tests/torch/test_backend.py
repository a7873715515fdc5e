"""ccl's torch.distributed backend, checked against gloo's results on the same tensors, and against
independent references where gloo lacks a collective (torch 1.13's gloo has no
all_gather_into_tensor, reduce_scatter or all_to_all, nor bfloat16, bool or AVG).

Run one process per rank, under cclrun or torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):
    cclrun -n 4 -- python3 tests/torch/test_backend.py [--import NAME]
--import names the module imported for the backend: ccl_torch (the default), or one of the names
of oneCCL's package, oneccl_bindings_for_pytorch or torch_ccl, as scripts written for it do.
Any failure prints its traceback and exits 1 at once; the launcher stops the other ranks.
"""
import importlib
import os
import sys
import traceback
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn

ccl_torch = importlib.import_module(
    sys.argv[sys.argv.index("--import") + 1] if "--import" in sys.argv else "ccl_torch")

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
rank = int(os.environ.get("CCL_RANK", os.environ.get("RANK", "0")))
size = int(os.environ.get("CCL_SIZE", os.environ.get("WORLD_SIZE", "1")))
R = dist.ReduceOp

# Small integers, exact in every float type whatever the summation order.
GLOO_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.int8,
               torch.uint8]
ALL_DTYPES = GLOO_DTYPES + [torch.bfloat16]
SIZES = [0, 1, 7, 1000, 300_000]  # the largest spans several shared-memory chunks


def values(n, dtype, r=None, small=False):
    """Rank r's deterministic test input."""
    r = rank if r is None else r
    i = torch.arange(n, dtype=torch.int64)
    if small:  # products stay small: values in {1, 2}, with -1 for signed types
        v = (i + r) % 3
        v = torch.where(v == 0, torch.full_like(v, -1 if dtype not in (torch.uint8,) else 1), v)
    else:
        v = (i * (r + 1) + 3 * r) % 11
        if dtype != torch.uint8 and dtype != torch.bool:
            v = v - 4
    return v.to(dtype)


def equal(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
    assert torch.equal(a, b), f"{what}: differs at {(a != b).nonzero()[:5].tolist()}: {a.flatten()[:8]} vs {b.flatten()[:8]}"


def close(a, b, what, rtol):
    assert torch.allclose(a, b, rtol=rtol, atol=1e-7), f"{what}: max difference {(a - b).abs().max()}"


def raises(fn, words, what):
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        for w in words:
            assert w in str(e).lower(), f"{what}: error {str(e)!r} does not say {w!r}"
        return
    raise AssertionError(f"{what}: no error raised")


def test_allreduce(gloo):
    for dtype in ALL_DTYPES:
        for n in SIZES:
            for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX):
                small = op == R.PRODUCT
                a = values(n, dtype, small=small)
                dist.all_reduce(a, op=op)
                if dtype in GLOO_DTYPES:
                    b = values(n, dtype, small=small)
                    dist.all_reduce(b, op=op, group=gloo)
                else:  # reference from every rank's input, in float64 then rounded once
                    stack = torch.stack([values(n, dtype, r, small).double() for r in range(size)])
                    ref = {R.SUM: stack.sum(0), R.PRODUCT: stack.prod(0), R.MIN: stack.min(0).values,
                           R.MAX: stack.max(0).values}[op] if n else torch.zeros(0).double()
                    b = ref.to(dtype)
                equal(a, b, f"allreduce {dtype} n={n} {op}")
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        a = values(1000, dtype)
        dist.all_reduce(a, op=R.AVG)
        ref = torch.stack([values(1000, torch.float64, r) for r in range(size)]).sum(0) / size
        close(a.double(), ref, f"allreduce AVG {dtype}", 1e-2 if dtype == torch.bfloat16 else 1e-6)
    # booleans: SUM and MAX are "any", PRODUCT and MIN "all"
    a, b = values(100, torch.int64) > 2, values(100, torch.int64) > 2
    dist.all_reduce(a, op=R.SUM)
    ref = torch.stack([values(100, torch.int64, r) > 2 for r in range(size)]).any(0)
    equal(a, ref, "allreduce bool SUM")
    dist.all_reduce(b, op=R.MIN)
    ref = torch.stack([values(100, torch.int64, r) > 2 for r in range(size)]).all(0)
    equal(b, ref, "allreduce bool MIN")
    # complex numbers sum as pairs of reals
    c = torch.complex(values(50, torch.float32), values(50, torch.float32, small=True))
    dist.all_reduce(c)
    ref = sum(torch.complex(values(50, torch.float32, r), values(50, torch.float32, r, True))
              for r in range(size))
    equal(c, ref, "allreduce complex64 SUM")


def test_broadcast_reduce(gloo):
    for root in range(size):
        for dtype in ALL_DTYPES + [torch.bool, torch.complex64]:
            src = values(1000, torch.int64, root) > 2 if dtype == torch.bool else \
                values(1000, torch.float32, root).to(dtype)
            a = src.clone() if rank == root else torch.zeros_like(src)
            dist.broadcast(a, root)
            equal(a, src, f"broadcast {dtype} root={root}")
        for dtype in GLOO_DTYPES:
            for op in (R.SUM, R.MAX):
                a, b = values(3000, dtype), values(3000, dtype)
                dist.reduce(a, root, op=op)
                dist.reduce(b, root, op=op, group=gloo)
                if rank == root:
                    equal(a, b, f"reduce {dtype} {op} root={root}")
                else:
                    equal(a, values(3000, dtype), f"reduce leaves non-root {rank}'s input")


def test_gathers(gloo):
    for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.bool):
        for n in (0, 1, 1000, 100_000):
            t = values(n, torch.int64) > 2 if dtype == torch.bool else values(n, dtype)
            outs = [torch.empty_like(t) for _ in range(size)]
            dist.all_gather(outs, t)
            for r in range(size):
                ref = values(n, torch.int64, r) > 2 if dtype == torch.bool else values(n, dtype, r)
                equal(outs[r], ref, f"all_gather {dtype} n={n} block {r}")
            if dtype in GLOO_DTYPES and n > 0:  # gloo divides by zero on empty tensors
                g = [torch.empty_like(t) for _ in range(size)]
                dist.all_gather(g, t, group=gloo)
                for r in range(size):
                    equal(outs[r], g[r], f"all_gather vs gloo {dtype} n={n}")
            flat = torch.empty(size * n, dtype=t.dtype)
            dist.all_gather_into_tensor(flat, t)
            equal(flat, torch.cat(outs) if n else flat, f"all_gather_into_tensor {dtype} n={n}")
    # uneven blocks (rank r gives r + 1 elements)
    t = values(rank + 1, torch.float32)
    outs = [torch.empty(r + 1) for r in range(size)]
    dist.all_gather(outs, t)
    for r in range(size):
        equal(outs[r], values(r + 1, torch.float32, r), f"uneven all_gather block {r}")
    # in place: this rank's input is its own block of the output
    flat = torch.zeros(size * 500)
    flat[rank * 500:(rank + 1) * 500] = values(500, torch.float32)
    dist.all_gather_into_tensor(flat, flat[rank * 500:(rank + 1) * 500])
    equal(flat, torch.cat([values(500, torch.float32, r) for r in range(size)]), "in-place all_gather_into_tensor")
    # coalesced (torch wants one dtype): several shapes, one non-contiguous, one empty; and gloo
    def coalesced_inputs(r):
        return [values(10, torch.float32, r), values(6, torch.float32, r).view(2, 3).t(),
                values(0, torch.float32, r), values(3000, torch.float32, r)]
    ins = coalesced_inputs(rank)
    outs = [[torch.empty_like(t) for t in ins] for _ in range(size)]
    ref = [[torch.empty_like(t) for t in ins] for _ in range(size)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "will be deprecated"
        dist.all_gather_coalesced(outs, ins)
        dist.all_gather_coalesced(ref, ins, group=gloo)
    for r in range(size):
        for i, t in enumerate(coalesced_inputs(r)):
            equal(outs[r][i], t, f"all_gather_coalesced block {r} tensor {i}")
            equal(outs[r][i], ref[r][i], f"all_gather_coalesced vs gloo block {r} tensor {i}")
    # gather and scatter, every root, against gloo
    for root in range(size):
        t = values(777, torch.float32)
        a = [torch.empty_like(t) for _ in range(size)] if rank == root else None
        b = [torch.empty_like(t) for _ in range(size)] if rank == root else None
        dist.gather(t, a, dst=root)
        dist.gather(t, b, dst=root, group=gloo)
        if rank == root:
            for r in range(size):
                equal(a[r], b[r], f"gather root={root} block {r}")
        chunks = [values(333, torch.float32, 10 + r) for r in range(size)] if rank == root else None
        a, b = torch.empty(333), torch.empty(333)
        dist.scatter(a, chunks, src=root)
        dist.scatter(b, chunks, src=root, group=gloo)
        equal(a, b, f"scatter root={root}")
        equal(a, values(333, torch.float32, 10 + rank), f"scatter root={root} value")


def test_reduce_scatter():
    for dtype in (torch.float32, torch.float64, torch.int32, torch.bfloat16):
        for n in (0, 1, 999, 100_000):
            for op in (R.SUM, R.MAX):
                full = [values(size * n, dtype, r) for r in range(size)]
                stack = torch.stack([f.double() for f in full])
                red = (stack.sum(0) if op == R.SUM else stack.max(0).values) if n else torch.zeros(0).double()
                ref = red[rank * n:(rank + 1) * n].to(dtype)
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter(out, list(full[rank].chunk(size)) if n else
                                    [torch.empty(0, dtype=dtype)] * size, op=op)
                equal(out, ref, f"reduce_scatter {dtype} n={n} {op}")
                out2 = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out2, full[rank], op=op)
                equal(out2, ref, f"reduce_scatter_tensor {dtype} n={n} {op}")


def test_all_to_all(gloo):
    n = 1000
    t = values(size * n, torch.float32)
    a, b = torch.empty_like(t), torch.empty_like(t)
    dist.all_to_all_single(a, t)
    dist.all_to_all_single(b, t, group=gloo)
    equal(a, b, "all_to_all_single")
    for r in range(size):
        equal(a[r * n:(r + 1) * n], values(size * n, torch.float32, r)[rank * n:(rank + 1) * n],
              f"all_to_all_single block {r}")
    # uneven: rank r sends (r + j + 1) rows of 3 to rank j
    send_splits = [rank + j + 1 for j in range(size)]
    recv_splits = [r + rank + 1 for r in range(size)]
    t = values(sum(send_splits) * 3, torch.int64).view(-1, 3)
    a = torch.empty(sum(recv_splits), 3, dtype=torch.int64)
    b = torch.empty_like(a)
    dist.all_to_all_single(a, t, recv_splits, send_splits)
    dist.all_to_all_single(b, t, recv_splits, send_splits, group=gloo)
    equal(a, b, "all_to_all_single with splits")
    # lists of tensors of different sizes: block j of rank r has r + j + 1 elements
    ins = [values(rank + j + 1, torch.float64, 100 * rank + j) for j in range(size)]
    outs = [torch.empty(r + rank + 1, dtype=torch.float64) for r in range(size)]
    dist.all_to_all(outs, ins)
    for r in range(size):
        equal(outs[r], values(r + rank + 1, torch.float64, 100 * r + rank), f"all_to_all from {r}")


def test_point_to_point():
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    # a ring of blocking sends of 4 MiB: would deadlock if a send waited for its receiver
    big = values(1 << 20, torch.float32)
    got = torch.empty_like(big)
    dist.send(big, nxt)
    dist.recv(got, prv)
    equal(got, values(1 << 20, torch.float32, prv), "ring send/recv")
    # nonblocking, both directions, several messages in order
    reqs = [dist.isend(values(100 + k, torch.int64, rank * 10 + k), nxt) for k in range(3)]
    outs = [torch.empty(100 + k, dtype=torch.int64) for k in range(3)]
    reqs += [dist.irecv(outs[k], prv) for k in range(3)]
    for q in reqs:
        q.wait()
    for k in range(3):
        equal(outs[k], values(100 + k, torch.int64, prv * 10 + k), f"isend/irecv message {k}")
    ops = [dist.P2POp(dist.isend, values(64, torch.float32), nxt),
           dist.P2POp(dist.irecv, got[:64], prv)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    equal(got[:64], values(64, torch.float32, prv), "batch_isend_irecv")
    # tags: sent 3, 1, 2 (1 large), received 1, 2, 3; isend/irecv with tags
    sizes = {1: 300_000, 2: 7, 3: 50}
    for tag in (3, 1, 2):
        dist.send(values(sizes[tag], torch.float32, rank * 10 + tag), nxt, tag=tag)
    for tag in (1, 2, 3):
        t = torch.empty(sizes[tag])
        dist.recv(t, prv, tag=tag)
        equal(t, values(sizes[tag], torch.float32, prv * 10 + tag), f"recv tag {tag}")
    w = dist.irecv(got[:9], prv, tag=11)
    dist.isend(values(9, torch.float32, rank + 500), nxt, tag=12).wait()
    dist.isend(values(9, torch.float32, rank + 600), nxt, tag=11).wait()
    w.wait()
    equal(got[:9], values(9, torch.float32, prv + 600), "irecv tag 11 past a tag-12 message")
    dist.recv(got[:9], prv, tag=12)
    equal(got[:9], values(9, torch.float32, prv + 500), "the tag-12 message kept aside")
    # from any source: every other rank sends two to rank 0, which learns the senders (torch 2.x
    # refuses sends to oneself)
    if rank != 0:
        for k in range(2):
            dist.send(values(5, torch.int64, rank * 100 + k), 0, tag=4)
    else:
        seen = {}
        for i in range(2 * (size - 1)):
            t = torch.empty(5, dtype=torch.int64)
            if i % 2:
                w = dist.irecv(t, tag=4)
                w.wait()
                src = w._source_rank()
            else:
                src = dist.recv(t, tag=4)
            k = seen.get(src, 0)
            equal(t, values(5, torch.int64, src * 100 + k), f"any-source message {k} from {src}")
            seen[src] = k + 1
        assert seen == {r: 2 for r in range(1, size)}, f"any-source senders: {seen}"


def test_async_and_futures():
    works, tensors = [], []
    for k in range(5):
        t = values(10_000, torch.float32) + k
        tensors.append(t)
        works.append(dist.all_reduce(t, async_op=True))
    fut = works[-1].get_future().then(lambda f: f.value()[0] * 2)
    doubled = fut.wait()
    for k, (w, t) in enumerate(zip(works, tensors)):
        w.wait()
        assert w.is_completed(), f"work {k} not complete after wait"
        ref = sum(values(10_000, torch.float64, r) + k for r in range(size)).float()
        equal(t, ref, f"async allreduce {k}")
    equal(doubled, tensors[-1] * 2, "future.then")
    w = dist.all_reduce(torch.ones(10), async_op=True)
    while not w.is_completed():
        pass
    w.wait()  # completed: returns at once
    late = w.get_future()  # asked for after completion: made complete
    assert late.done(), "a completed work's future is not done"
    equal(late.wait()[0], torch.full((10,), float(size)), "future of a completed work")
    w = dist.barrier(async_op=True)
    w.wait()


def test_deepspeed_ops():
    # inference_all_reduce: in place, the same tensor back, every dtype DeepSpeed's op takes
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        a = values(1000, dtype)
        got = ccl_torch.inference_all_reduce(a)
        assert got is a, "inference_all_reduce did not return its tensor"
        ref = torch.stack([values(1000, torch.float64, r) for r in range(size)]).sum(0).to(dtype)
        equal(a, ref, f"inference_all_reduce {dtype}")
    # the torch ops: in place, out of place (input untouched), and shapes on the meta device
    a = values(300, torch.float32)
    torch.ops.ccl.inference_all_reduce_(a)
    ref = sum(values(300, torch.float64, r) for r in range(size)).float()
    equal(a, ref, "torch.ops.ccl.inference_all_reduce_")
    b = values(300, torch.float32)
    out = torch.ops.ccl.inference_all_reduce(b)
    equal(out, ref, "torch.ops.ccl.inference_all_reduce")
    equal(b, values(300, torch.float32), "torch.ops.ccl.inference_all_reduce's input")
    if TORCH2:  # torch 1.13 has no autograd fallthrough for meta tensors (nor torch.compile)
        m = torch.ops.ccl.inference_all_reduce(torch.empty(4, 5, device="meta"))
        assert m.device.type == "meta" and m.shape == (4, 5), f"meta: {m.device} {m.shape}"
    # a non-contiguous tensor (a staged copy, copied back), another reduction, a subgroup
    c = values(200, torch.float32).view(20, 10).t()
    expect = torch.stack([values(200, torch.float32, r).view(20, 10).t() for r in range(size)])
    ccl_torch.inference_all_reduce(c, op=R.MAX)
    equal(c, expect.max(0).values, "inference_all_reduce MAX, non-contiguous")
    pair = dist.new_group([0, 1])
    if rank < 2:
        d = values(50, torch.float32)
        ccl_torch.inference_all_reduce(d, group=pair)
        equal(d, values(50, torch.float32, 0) + values(50, torch.float32, 1),
              "inference_all_reduce over a subgroup")
    # all_reduce_caching: the cached schedule serves new buffers of the same call
    for k in range(3):
        e = values(4096, torch.float32) + k
        assert ccl_torch.all_reduce_caching(e, R.SUM, "layer0.attn") is None
        equal(e, sum(values(4096, torch.float64, r) + k for r in range(size)).float(),
              f"all_reduce_caching call {k}")
    f = values(100, torch.int32)
    w = ccl_torch.all_reduce_caching(f, R.SUM, "layer0.mlp", async_op=True)
    w.wait()
    equal(f, sum(values(100, torch.int64, r) for r in range(size)).int(), "all_reduce_caching async")
    raises(lambda: ccl_torch.all_reduce_caching(f, R.SUM, ""), ["match_id"], "no match_id")


def test_subgroups(gloo):
    even = dist.new_group([r for r in range(size) if r % 2 == 0])
    odd = dist.new_group([r for r in range(size) if r % 2 == 1])
    mine = even if rank % 2 == 0 else odd
    members = [r for r in range(size) if r % 2 == rank % 2]
    for k in range(3):  # interleaved with the world group
        a = values(5000, torch.float32) + k
        dist.all_reduce(a, group=mine)
        equal(a, sum(values(5000, torch.float64, r) + k for r in members).float(), f"subgroup allreduce {k}")
        b = values(100, torch.float32)
        dist.all_reduce(b)
        equal(b, sum(values(100, torch.float64, r) for r in range(size)).float(), "world allreduce between")
        c = values(10, torch.float32) if rank == members[-1] else torch.zeros(10)
        dist.broadcast(c, members[-1], group=mine)
        equal(c, values(10, torch.float32, members[-1]), "subgroup broadcast")
    single = None
    for r in range(size):  # singletons: every rank creates every group, in the same order
        g = dist.new_group([r])
        if r == rank:
            single = g
    a = values(10, torch.float32)
    dist.all_reduce(a, group=single)
    equal(a, values(10, torch.float32), "singleton allreduce")
    # a group destroyed while a work whose future was asked for is still in flight
    g = dist.new_group(list(range(size)))
    t = values(100_000, torch.float32)
    fut = dist.all_reduce(t, group=g, async_op=True).get_future()
    dist.destroy_process_group(g)
    del g
    fut.wait()
    equal(t, sum(values(100_000, torch.float64, r) for r in range(size)).float(), "allreduce outliving its group")


def test_non_contiguous():
    m = values(60, torch.float32).view(6, 10).t()  # 10 x 6, transposed
    assert not m.is_contiguous()
    dist.all_reduce(m)
    ref = sum(values(60, torch.float64, r) for r in range(size)).float().view(6, 10).t()
    equal(m, ref, "allreduce of a transposed tensor")
    col = torch.zeros(8, 4)[:, 1]
    if rank == 0:
        col.copy_(values(8, torch.float32))
    dist.broadcast(col, 0)
    equal(col, values(8, torch.float32, 0), "broadcast into a strided column")
    outs = [torch.zeros(5, 3)[:, 0] for _ in range(size)]
    dist.all_gather(outs, values(5, torch.float32)[::1])
    for r in range(size):
        equal(outs[r], values(5, torch.float32, r), f"all_gather into strided outputs, block {r}")


def test_errors():
    t = values(10, torch.float32)
    raises(lambda: dist.all_reduce(t, op=R.BAND), ["ccl", "band"], "BAND on floats")
    raises(lambda: dist.send(t, (rank + 1) % size, tag=-3), ["tag"], "a negative tag")
    raises(lambda: dist.send(t, (rank + 1) % size, tag=1 << 24), ["tag"], "a tag out of range")
    raises(lambda: dist.all_reduce(torch.ones(4).to_sparse()), ["ccl", "sparse"], "sparse tensor")
    # the communicator still works after refused calls
    a = values(10, torch.float32)
    dist.all_reduce(a)
    equal(a, sum(values(10, torch.float64, r) for r in range(size)).float(), "allreduce after errors")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def train_ddp(group, steps=5):
    torch.manual_seed(1234)  # same initial weights, and DDP broadcasts rank 0's anyway
    model = nn.parallel.DistributedDataParallel(Net(), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=gen)
        y = torch.randn(8, 4, generator=gen)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def test_ddp(gloo):
    ccl_weights = train_ddp(None)
    gloo_weights = train_ddp(gloo)
    for i, (a, b) in enumerate(zip(ccl_weights, gloo_weights)):
        if size <= 2:  # x + y == y + x: bit for bit
            equal(a, b, f"DDP parameter {i} after 5 steps")
        else:
            close(a, b, f"DDP parameter {i} after 5 steps", 1e-5)


def test_fsdp_style(gloo):
    """Sharded parameters: all_gather_into_tensor before the step, reduce_scatter_tensor of the
    gradients after, against unsharded training with gloo allreduce."""
    torch.manual_seed(0)
    numel = 16 * 32 + 32 + 32 * 4 + 4
    padded = (numel + size - 1) // size * size
    shard_len = padded // size
    full0 = torch.zeros(padded)
    full0[:numel] = torch.cat([p.detach().flatten() for p in Net().parameters()])
    shard = full0[rank * shard_len:(rank + 1) * shard_len].clone()
    ref_full = full0.clone()
    gen = torch.Generator().manual_seed(100 + rank)

    def grad_of(flat, x, y):
        net = Net()
        nn.utils.vector_to_parameters(flat[:numel].clone(), net.parameters())
        nn.functional.mse_loss(net(x), y).backward()
        g = torch.zeros(padded)
        g[:numel] = nn.utils.parameters_to_vector([p.grad for p in net.parameters()])
        return g

    for _ in range(3):
        x, y = torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)
        full = torch.empty(padded)
        dist.all_gather_into_tensor(full, shard)
        g = grad_of(full, x, y)
        g_shard = torch.empty(shard_len)
        dist.reduce_scatter_tensor(g_shard, g, op=R.SUM)
        shard -= 0.1 * g_shard / size
        # reference: unsharded, gradients averaged with gloo
        rg = grad_of(ref_full, x, y)
        dist.all_reduce(rg, group=gloo)
        ref_full -= 0.1 * rg / size
    close(shard, ref_full[rank * shard_len:(rank + 1) * shard_len], "FSDP-style shard after 3 steps", 1e-5)


def main():
    # torchrun and cclrun both set MASTER_ADDR and MASTER_PORT
    dist.init_process_group("ccl", init_method="env://", rank=rank, world_size=size)
    assert dist.get_backend() == "ccl"
    gloo = dist.new_group(backend="gloo")
    tests = [lambda: test_allreduce(gloo), lambda: test_broadcast_reduce(gloo),
             lambda: test_gathers(gloo), test_reduce_scatter, lambda: test_all_to_all(gloo),
             test_point_to_point, test_async_and_futures, test_deepspeed_ops,
             lambda: test_subgroups(gloo),
             test_non_contiguous, test_errors, lambda: test_ddp(gloo),
             lambda: test_fsdp_style(gloo)]
    names = ["allreduce", "broadcast/reduce", "gathers", "reduce_scatter", "all_to_all",
             "point to point", "async and futures", "DeepSpeed ops", "subgroups", "non-contiguous", "errors",
             "DDP", "FSDP-style"]
    for name, test in zip(names, tests):
        try:
            test()
        except Exception:
            print(f"rank {rank}: FAILED {name}", file=sys.stderr)
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        dist.barrier(group=gloo)
        if rank == 0:
            print(f"ok {name} ({size} ranks, torch {torch.__version__})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
