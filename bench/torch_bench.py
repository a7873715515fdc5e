"""torch.distributed through ccl against gloo, in one run: all_reduce time from 4 KiB to 64 MiB and
a DDP training step.

    cclrun -n 8 -- python3 bench/torch_bench.py          (or torchrun --nproc-per-node 8 ...)

Needs ccl_torch importable (PYTHONPATH=<build>/torch). Times are the max over ranks of each rank's
average, in microseconds (all_reduce) or milliseconds (DDP step); float32 SUM.
"""
import argparse
import os
import re
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import ccl_torch  # noqa: F401  (registers "ccl")

rank = int(os.environ.get("CCL_RANK", os.environ.get("RANK", "0")))
size = int(os.environ.get("CCL_SIZE", os.environ.get("WORLD_SIZE", "1")))


def slowest(seconds, gloo):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.item()


def time_allreduce(nbytes, group, gloo, budget):
    t = torch.ones(nbytes // 4)
    for _ in range(3):
        dist.all_reduce(t, group=group)
    # the same iteration count on every rank: rank 0's estimate, broadcast
    start = time.perf_counter()
    dist.all_reduce(t, group=group)
    iters = torch.tensor([max(3, min(1000, int(budget / max(time.perf_counter() - start, 1e-6))))])
    dist.broadcast(iters, 0, group=gloo)
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(int(iters)):
        dist.all_reduce(t, group=group)
    return slowest((time.perf_counter() - start) / int(iters), gloo)


class MLP(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(width, 10))

    def forward(self, x):
        return self.net(x)


def time_ddp(group, gloo, width, depth, steps):
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(MLP(width, depth), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, width), torch.randint(0, 10, (32,))

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return slowest((time.perf_counter() - start) / steps, gloo)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--min", default="4K", help="smallest all_reduce size (default 4K)")
    p.add_argument("--max", default="64M", help="largest all_reduce size (default 64M)")
    p.add_argument("--budget", type=float, default=0.3, help="seconds per size and backend")
    p.add_argument("--ddp-width", type=int, default=1024)
    p.add_argument("--ddp-depth", type=int, default=4)
    p.add_argument("--ddp-steps", type=int, default=20)
    a = p.parse_args()
    unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    parse = lambda s: int(s[:-1]) * unit[s[-1].upper()] if s[-1].upper() in unit else int(s)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // size))

    if "MASTER_ADDR" in os.environ:
        init, store_file = "env://", None
    else:
        store_file = os.path.join(tempfile.gettempdir(), "ccl_torch_bench_" +
                                  re.sub(r"\W", "_", os.environ["CCL_KVS_ADDRESS"]))
        init = "file://" + store_file
    dist.init_process_group("ccl", init_method=init, rank=rank, world_size=size)
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        print(f"# torch {torch.__version__}, {size} ranks, {os.cpu_count()} cpus, "
              f"{torch.get_num_threads()} torch threads per rank")
        print(f"# layout: rank 0 on {len(os.sched_getaffinity(0))} cpus; ccl's team "
              f"(CCL_RANK_THREADS): {os.environ.get('CCL_RANK_THREADS', 'auto')}")
        print(f"# {'bytes':>10} {'ccl us':>10} {'gloo us':>10} {'gloo/ccl':>9}")
    n = parse(a.min)
    while n <= parse(a.max):
        c = time_allreduce(n, None, gloo, a.budget)
        g = time_allreduce(n, gloo, gloo, a.budget)
        if rank == 0:
            print(f"  {n:>10} {c * 1e6:>10.1f} {g * 1e6:>10.1f} {g / c:>8.1f}x", flush=True)
        n *= 4
    params = sum(p.numel() for p in MLP(a.ddp_width, a.ddp_depth).parameters())
    c = time_ddp(None, gloo, a.ddp_width, a.ddp_depth, a.ddp_steps)
    g = time_ddp(gloo, gloo, a.ddp_width, a.ddp_depth, a.ddp_steps)
    if rank == 0:
        print(f"# DDP step, MLP {a.ddp_depth}x{a.ddp_width} ({params / 1e6:.1f} M parameters), "
              f"batch 32 per rank: ccl {c * 1e3:.2f} ms, gloo {g * 1e3:.2f} ms, "
              f"gloo/ccl {g / c:.1f}x")
    dist.destroy_process_group()
    if store_file and rank == 0 and os.path.exists(store_file):
        os.unlink(store_file)


if __name__ == "__main__":
    main()
