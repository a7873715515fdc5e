"""DeepSpeed's ccl.cpp (built unmodified against ccl by build_deepspeed_ext.py), driven as
DeepSpeed's CCLBackend drives it (deepspeed/comm/ccl.py), its results checked against references
computed here from every rank's known input.

    cclrun -n N -- python3 run_deepspeed.py BUILD_DIR DEEPSPEED_DIR

The least of DeepSpeed's Python side that the extension needs: the module deepspeed.comm with its
ReduceOp (get_ccl_reduce_op imports it), made here from DeepSpeed's own reduce_op.py. torch's gloo
group stands in for DeepSpeed's TorchBackend where CCLBackend uses it: to broadcast the KVS
addresses and to name sub-groups. LOCAL_SIZE is unset, so that inference_all_reduce takes ccl's
allreduce rather than DeepSpeed's own shared-memory one. Any failure raises; the launcher stops
the other ranks.
"""
import importlib.util
import os
import sys
import types

import torch
import torch.distributed as dist

build_dir, ds_dir = sys.argv[1], sys.argv[2]
os.environ.pop("LOCAL_SIZE", None)

# deepspeed.comm.ReduceOp, from DeepSpeed's reduce_op.py.
spec = importlib.util.spec_from_file_location(
    "deepspeed.comm.reduce_op", os.path.join(ds_dir, "deepspeed", "comm", "reduce_op.py"))
reduce_op = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reduce_op)
ds_pkg, ds_comm = types.ModuleType("deepspeed"), types.ModuleType("deepspeed.comm")
ds_comm.ReduceOp = reduce_op.ReduceOp
ds_pkg.comm = ds_comm
sys.modules.update({"deepspeed": ds_pkg, "deepspeed.comm": ds_comm,
                    "deepspeed.comm.reduce_op": reduce_op})
ReduceOp = reduce_op.ReduceOp

spec = importlib.util.spec_from_file_location("deepspeed_ccl_comm",
                                              os.path.join(build_dir, "deepspeed_ccl_comm.so"))
op = importlib.util.module_from_spec(spec)
spec.loader.exec_module(op)

dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
world = list(range(size))

# CCLBackend.__init__: rank 0 makes the main KVS, its address goes to every rank, all initialize.
addr = torch.tensor(op.get_kvs_addr(rank)).to(torch.uint8)
dist.broadcast(addr, 0)
op.initialize(size, rank, addr)
assert op.get_rank(0) == rank and op.get_world_size(0) == size
assert "all_reduce_caching" in op.get_available_coll()

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64]
COUNTS = [1, 7, 1000, 70_000]  # the largest spans several of ccl's shared-memory chunks


def values(n, dtype, r):
    """Rank r's input: small integers, exact in every dtype whatever the order of the sum."""
    i = torch.arange(n, dtype=torch.int64)
    return ((i * (r + 1) + 3 * r) % 7 - 3).to(dtype)


def expected(n, dtype, ranks, reduce_op):
    inputs = [values(n, torch.int64, r) for r in ranks]
    out = inputs[0].clone()
    for x in inputs[1:]:
        if reduce_op == ReduceOp.SUM:
            out = out + x
        elif reduce_op == ReduceOp.PRODUCT:
            out = out * x
        elif reduce_op == ReduceOp.MIN:
            out = torch.minimum(out, x)
        elif reduce_op == ReduceOp.MAX:
            out = torch.maximum(out, x)
    return out.to(dtype)


def same(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert torch.equal(got, want), f"{what}: {got[:8]} != {want[:8]}"


def check_all_reduce(fn, ranks, group, what):
    me = ranks.index(rank)
    for dtype in DTYPES:
        for n in COUNTS:
            ops = [ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX]
            if n <= 7 and len(ranks) <= 4:  # products of up to 4 values of |v| <= 3 stay exact
                ops.append(ReduceOp.PRODUCT)
            for o in ops:
                t = values(n, dtype, ranks[me])
                fn(t, o, group)
                same(t, expected(n, dtype, ranks, o), f"{what} {o} {dtype} n={n}")


def check_broadcast(ranks, group, what):
    me = ranks.index(rank)
    for dtype in DTYPES:
        for n in COUNTS:
            for src in sorted({0, len(ranks) - 1}):
                t = values(n, dtype, ranks[me]) if me == src else torch.zeros(n, dtype=dtype)
                op.broadcast(t, src, group, False)
                same(t, values(n, dtype, ranks[src]), f"{what} broadcast {dtype} n={n} src={src}")


# The world communicator.
check_broadcast(world, world, "world")
check_all_reduce(lambda t, o, g: op.all_reduce(t, o, g, False), world, world, "all_reduce")
# The cached allreduce: one match_id per call site, repeated with new data each time.
for it in range(3):
    for n in COUNTS:
        t = values(n, torch.float32, rank) * (it + 1)
        op.all_reduce_caching(t, ReduceOp.SUM, f"grad_{n}", world, False)
        same(t, expected(n, torch.float32, world, ReduceOp.SUM) * (it + 1),
             f"all_reduce_caching it={it} n={n}")
# inference_all_reduce: float32 and bfloat16 (its fast types), int32 (its fallback): all ccl here.
for dtype in [torch.float32, torch.bfloat16, torch.int32]:
    for n in COUNTS:
        t = values(n, dtype, rank)
        op.inference_all_reduce(t, ReduceOp.SUM)
        same(t, expected(n, dtype, world, ReduceOp.SUM), f"inference_all_reduce {dtype} n={n}")
# bool: SUM is MAX over uint8 (a logical or), as ccl.cpp maps it.
t = torch.tensor([rank == 0, False, True])
op.all_reduce(t, ReduceOp.SUM, world, False)
same(t, torch.tensor([True, False, True]), "all_reduce bool")
op.barrier(world, False)

# Sub-communicators, as CCLBackend._new_group makes them for a group's first use: the group's
# first rank makes a KVS, broadcasts its address over the group, and its members initialize.
groups = [[r] for r in world] if size < 4 else [[0, 2], [1, 3], [1, 2, 3]]
torch_groups = [dist.new_group(g) for g in groups]  # every rank, in one order (torch's rule)
for g, tg in zip(groups, torch_groups):
    if rank not in g:
        continue
    sub = torch.tensor(op.get_sub_kvs_addr(rank == g[0])).to(torch.uint8)
    dist.broadcast(sub, g[0], group=tg)
    op.initialize_sub_comm(len(g), g.index(rank), sub, g)
for g, tg in zip(groups, torch_groups):
    if rank not in g:
        continue
    check_broadcast(g, g, f"group {g}")
    check_all_reduce(lambda t, o, grp: op.all_reduce(t, o, grp, False), g, g, f"group {g}")
    # A match_id names one call site on one communicator (oneCCL's rule; ccl enforces it).
    t = values(1000, torch.float32, rank)
    op.all_reduce_caching(t, ReduceOp.SUM, f"sub_grad_{'_'.join(map(str, g))}", g, False)
    same(t, expected(1000, torch.float32, g, ReduceOp.SUM), f"group {g} all_reduce_caching")
    op.barrier(g, False)
op.barrier(world, False)
dist.barrier()
print(f"rank {rank}/{size}: DeepSpeed ccl.cpp OK", flush=True)
