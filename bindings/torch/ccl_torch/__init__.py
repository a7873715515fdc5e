"""ccl's torch.distributed backend.

    import ccl_torch
    torch.distributed.init_process_group("ccl", ...)

Importing registers the backend "ccl" (for CPU tensors; on torch 2.x also for "xpu" tensors,
whose data pointers ccl stages through Level Zero itself: docs/xpu.md; never run here), and
DeepSpeed's CCL ops: inference_all_reduce (also torch.ops.ccl.inference_all_reduce_, in place,
and torch.ops.ccl.inference_all_reduce) and all_reduce_caching (docs/torch.md).
"""
import torch
import torch.distributed as dist

from . import _C
from ._version import __version__  # written by setup.py: torch's version, then ccl's

__all__ = ["ProcessGroupCCL", "version", "inference_all_reduce", "all_reduce_caching"]

ProcessGroupCCL = _C.ProcessGroupCCL
version = _C.version


def _create(store, rank, size, timeout):
    pg = _C.ProcessGroupCCL(store, rank, size, timeout)
    if not dist.is_initialized():  # this is the default group: the ops without a group use it
        _C._set_world(pg)
    return pg


def _backend(group):
    """The ccl backend of a process group (None: the default group)."""
    g = group if group is not None else dist.distributed_c10d._get_default_group()
    b = g._get_backend(torch.device("cpu")) if hasattr(g, "_get_backend") else g
    if not isinstance(b, ProcessGroupCCL):
        raise RuntimeError("ccl_torch: this process group's backend is not ccl")
    return b


def inference_all_reduce(tensor, op=dist.ReduceOp.SUM, group=None):
    """DeepSpeed's low-latency all_reduce (deepspeed.comm.inference_all_reduce): in place,
    blocking; returns the tensor. SUM over the default group is the torch op
    torch.ops.ccl.inference_all_reduce_ (usable under torch.compile)."""
    if group is None and op == dist.ReduceOp.SUM:
        return torch.ops.ccl.inference_all_reduce_(tensor)
    _backend(group).allreduce_now(tensor, op)
    return tensor


def all_reduce_caching(tensor, op=dist.ReduceOp.SUM, match_id="", group=None, async_op=False):
    """DeepSpeed's all_reduce_caching: an all_reduce in place whose planned schedule ccl keeps
    under match_id (one name per call site, the same on every rank) and reuses in later calls
    with that name. Returns a work when async_op is set, else None once done."""
    if not match_id:
        raise ValueError("ccl_torch: all_reduce_caching needs a match_id")
    work = _backend(group).allreduce_tensor(tensor, op, match_id, not async_op)
    return work if async_op else None


def _register():
    if "ccl" in getattr(dist.Backend, "backend_list", []) or hasattr(dist.Backend, "CCL"):
        creator = getattr(dist.Backend, "_plugins", {}).get("CCL")
        if creator is not None and getattr(creator, "creator_fn", creator) is not _create:
            raise RuntimeError(
                "a torch.distributed backend named 'ccl' is already registered "
                "(another ccl package, e.g. oneccl_bindings_for_pytorch?); import only one")
        return
    if int(torch.__version__.split(".")[0]) >= 2:
        dist.Backend.register_backend("ccl", _create, extended_api=False, devices=["cpu", "xpu"])
    else:
        dist.Backend.register_backend("ccl", _create)


_register()
