"""How transformers, accelerate and DeepSpeed find oneCCL's PyTorch package, replayed against
ccl's (docs/oneccl.md): each must conclude that a ccl backend is there. One process, no ranks.

    PYTHONPATH=build/torch python3 tests/torch/test_detection.py
"""
import importlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys


def check(ok, what):
    if not ok:
        sys.exit(f"test_detection: FAILED: {what}")
    print(f"ok: {what}")


# transformers (utils/import_utils.py): either module name findable, and the distribution
# oneccl_bind_pt's version readable; else "ccl not available".
found = (importlib.util.find_spec("torch_ccl") is not None
         or importlib.util.find_spec("oneccl_bindings_for_pytorch") is not None)
check(found, "transformers: find_spec finds torch_ccl or oneccl_bindings_for_pytorch")
try:
    ccl_version = importlib.metadata.version("oneccl_bind_pt")
except importlib.metadata.PackageNotFoundError:
    ccl_version = None
check(ccl_version is not None, f"transformers, accelerate: oneccl_bind_pt's version is {ccl_version}")
# transformers' TrainingArguments imports oneccl_bindings_for_pytorch where the version compares
# as 1.12 or later (as a string in some releases, parsed in others), torch_ccl before.
check(ccl_version >= "1.12", "transformers: the version compares (as a string) as 1.12 or later")
try:
    from packaging import version
    check(version.parse(ccl_version) >= version.parse("1.12"),
          "transformers: the version parses as 1.12 or later")
except ImportError:
    print("skipped: packaging is not installed, the parsed comparison is not replayed")

# DeepSpeed (accelerator/cpu_accelerator.py): the CPU accelerator's backend is "ccl" when
# oneccl_bindings_for_pytorch imports, else gloo.
try:
    import oneccl_bindings_for_pytorch  # noqa: F401
    backend = "ccl"
except ImportError:
    backend = "gloo"
check(backend == "ccl", "DeepSpeed: import oneccl_bindings_for_pytorch works: backend ccl")

import ccl_torch  # noqa: E402
import torch_ccl  # noqa: E402
import torch.distributed as dist  # noqa: E402

for m in (oneccl_bindings_for_pytorch, torch_ccl):
    check(m.ProcessGroupCCL is ccl_torch.ProcessGroupCCL and m.__version__ == ccl_version,
          f"{m.__name__} is ccl_torch's backend, version {m.__version__}")
check("CCL" in getattr(dist.Backend, "_plugins", {}), "torch.distributed has the backend 'ccl'")

# oneCCL's package: cwd and env/setvars.sh, which DeepSpeed's CCL op build relies on (CCL_ROOT,
# and the compiler finding oneapi/ccl.hpp and libccl).
setvars = os.path.join(oneccl_bindings_for_pytorch.cwd, "env", "setvars.sh")
check(os.path.isfile(setvars), f"{setvars} exists")
out = subprocess.run(["bash", "-c", f'. "{setvars}" && printf "%s\\n" "$CCL_ROOT" "$CPATH" '
                      '"$LIBRARY_PATH" "$LD_LIBRARY_PATH"'],
                     env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, capture_output=True,
                     text=True, check=True).stdout.split("\n")
root, cpath, library_path, ld_path = out[:4]
check(os.path.isdir(root), f"setvars.sh sets CCL_ROOT to a folder ({root})")
include = cpath.split(":")[0]
for header in ("ccl/ccl.h", "oneapi/ccl.hpp"):
    check(os.path.isfile(os.path.join(include, header)), f"CPATH finds {header} ({include})")
lib = library_path.split(":")[0]
check(any(f.startswith("libccl.so") for f in os.listdir(lib)), f"LIBRARY_PATH finds libccl ({lib})")
check(ld_path.split(":")[0] == lib, "LD_LIBRARY_PATH names the same folder")
print("test_detection: all passed")
