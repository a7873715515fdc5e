"""ccl's torch.distributed backend.

    import ccl_torch
    torch.distributed.init_process_group("ccl", ...)

Importing registers the backend "ccl" (for CPU tensors; on torch 2.x also for "xpu" tensors,
whose data pointers ccl stages through Level Zero itself: docs/xpu.md; never run here).
"""
import torch
import torch.distributed as dist

from . import _C

__all__ = ["ProcessGroupCCL", "version"]

ProcessGroupCCL = _C.ProcessGroupCCL
version = _C.version


def _create(store, rank, size, timeout):
    return _C.ProcessGroupCCL(store, rank, size, timeout)


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
