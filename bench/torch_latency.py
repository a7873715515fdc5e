"""The cost of one small all_reduce through torch, against the same call through ccl's C ABI in the
same processes: where the torch path's time goes, and DeepSpeed's shm op beside it.

    cclrun -n 2 -- python3 bench/torch_latency.py [--sizes 4K,64K] [--rounds 5] [--ds-build DIR]

Needs ccl_torch importable (PYTHONPATH=<build>/torch). Variants, per dtype and size, SUM in place
on a zero tensor (sums stay zero), the variants taking turns within each round:
  c          ccl_allreduce, blocking, in a C++ loop on the group's communicator (the yardstick)
  ccl        dist.all_reduce(t) on the default group (backend "ccl")
  ccl_async  dist.all_reduce(t, async_op=True).wait()
  ccl_op     torch.ops.ccl.inference_all_reduce_(t) (ccl_torch's DeepSpeed-style op)
  ds         torch.ops.deepspeed.inference_all_reduce_(t): DeepSpeed's shm op, built by
             ../shared/peers/deepspeed_shm/build.sh (--ds-build: the folder with its module)
  fake       dist.all_reduce(t) on torch's "fake" backend (torch 2.x): torch's own cost of a call
             whose backend does nothing, the floor of any backend's torch path
  gloo       dist.all_reduce(t) on a gloo group (float32)
Time per call: the slowest rank's average over a timed loop, in microseconds; the table gives the
median over rounds.
"""
import argparse
import importlib
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import ccl_torch

rank = int(os.environ.get("RANK", os.environ.get("CCL_RANK", "0")))
size = int(os.environ.get("WORLD_SIZE", os.environ.get("CCL_SIZE", "1")))
TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def parse_size(s):
    unit = {"K": 1 << 10, "M": 1 << 20}
    return int(s[:-1]) * unit[s[-1].upper()] if s[-1].upper() in unit else int(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4K,64K")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=2000, help="timed calls at 4 KiB (fewer above)")
    ap.add_argument("--ds-build", help="folder holding DeepSpeed's deepspeed_shm_comm module")
    ap.add_argument("--variants", default="c,ccl,ccl_async,ccl_op,ds,fake,gloo")
    a = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29617")
    dist.init_process_group("ccl", rank=rank, world_size=size)
    gloo = dist.new_group(backend="gloo")
    variants = a.variants.split(",")
    if "ds" in variants:
        if a.ds_build:
            os.environ["LOCAL_SIZE"] = str(size)  # what DeepSpeed's launcher sets
            sys.path.insert(0, os.path.abspath(a.ds_build))
            import deepspeed_shm_comm as ds  # registers torch.ops.deepspeed.inference_all_reduce_
            ds.initialize(size, rank)
        else:
            variants.remove("ds")
    fake = None
    if "fake" in variants:
        try:
            importlib.import_module("torch.testing._internal.distributed.fake_pg")  # "fake"
            fake = dist.new_group(backend="fake")
        except Exception as e:  # torch 1.13 has no fake backend
            if rank == 0:
                print(f"# no fake backend: {e}", file=sys.stderr)
            variants.remove("fake")
    pg = ccl_torch._backend(None)

    def call(v, t):
        if v == "ccl":
            return lambda: dist.all_reduce(t)
        if v == "ccl_async":
            return lambda: dist.all_reduce(t, async_op=True).wait()
        if v == "ccl_op":
            return lambda: torch.ops.ccl.inference_all_reduce_(t)
        if v == "ds":
            return lambda: torch.ops.deepspeed.inference_all_reduce_(t)
        if v == "fake":
            return lambda: dist.all_reduce(t, group=fake)
        if v == "gloo":
            return lambda: dist.all_reduce(t, group=gloo)
        raise ValueError(v)

    def slowest(x):
        m = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=gloo)
        return m.item()

    def time_one(v, t, iters):
        if v == "c":
            pg._time_c_allreduce(t, 20)
            dist.barrier(group=gloo)
            return slowest(pg._time_c_allreduce(t, iters) / iters)
        f = call(v, t)
        for _ in range(20):
            f()
        dist.barrier(group=gloo)
        start = time.perf_counter()
        for _ in range(iters):
            f()
        return slowest((time.perf_counter() - start) / iters)

    results = {}  # (dtype, size, variant) -> [us per round]
    for r in range(a.rounds):
        for dname in a.dtypes.split(","):
            dtype = getattr(torch, dname)
            for s in a.sizes.split(","):
                n = parse_size(s)
                t = torch.zeros(n // torch.empty(0, dtype=dtype).element_size(), dtype=dtype)
                iters = max(100, a.iters * 4096 // max(n, 4096))
                order = variants[r % len(variants):] + variants[:r % len(variants)]
                for v in order:
                    if v == "gloo" and dtype != torch.float32:
                        continue
                    us = time_one(v, t, iters) * 1e6
                    results.setdefault((dname, s, v), []).append(us)
    if rank == 0:
        print(f"# {size} ranks, torch {torch.__version__}, median of {a.rounds} rounds, us per call")
        print("| dtype | size | " + " | ".join(variants) + " | ccl - c | ccl_op - c |")
        print("|---|---:|" + "---:|" * (len(variants) + 2))
        for dname in a.dtypes.split(","):
            for s in a.sizes.split(","):
                med = {v: statistics.median(results[(dname, s, v)])
                       for v in variants if (dname, s, v) in results}
                cells = [f"{med[v]:.2f}" if v in med else "" for v in variants]
                extra = [f"{med[v] - med['c']:.2f}" if v in med and "c" in med else ""
                         for v in ("ccl", "ccl_op")]
                print(f"| {dname} | {s} | " + " | ".join(cells + extra) + " |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
