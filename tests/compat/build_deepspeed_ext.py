"""Builds DeepSpeed's CPU communication op (csrc/cpu/comm/ccl.cpp and shm.cpp, copied unmodified
into thirdparty/deepspeed by fetch_sources.sh) against ccl, the way DeepSpeed builds it: its
CCLCommBuilder through OpBuilder.jit_load, i.e. torch.utils.cpp_extension.load with that
builder's flags (-O2 -fopenmp, plus -UC10_USE_GLOG from jit_load; torch adds -std=c++14 on torch
1.13) and its -lccl -L$CCL_ROOT/lib. Run it after sourcing the environment script of ccl's torch
package (oneccl_bindings_for_pytorch/env/setvars.sh), as DeepSpeed's users source oneCCL's: it
sets CCL_ROOT, and CPATH and LIBRARY_PATH, through which the compiler finds oneapi/ccl.hpp and
libccl.

    . <ccl_torch build>/oneccl_bindings_for_pytorch/env/setvars.sh
    build_deepspeed_ext.py DEEPSPEED_DIR BUILD_DIR

Leaves BUILD_DIR/deepspeed_ccl_comm.so; run_deepspeed.py imports it from there.
"""
import os
import sys

ds, build = (os.path.abspath(a) for a in sys.argv[1:3])
os.makedirs(build, exist_ok=True)
ccl_root = os.environ.get("CCL_ROOT")
if ccl_root is None:  # as DeepSpeed's CCLCommBuilder.extra_ldflags
    sys.exit("build_deepspeed_ext: no CCL_ROOT: source oneccl_bindings_for_pytorch's env/setvars.sh")
os.environ.setdefault("MAX_JOBS", "2")

from torch.utils.cpp_extension import load  # noqa: E402

comm = os.path.join(ds, "csrc", "cpu", "comm")
load(name="deepspeed_ccl_comm",
     sources=[os.path.join(comm, "ccl.cpp"), os.path.join(comm, "shm.cpp")],
     extra_include_paths=[os.path.join(ds, "csrc", "cpu", "includes")],
     extra_cflags=["-O2", "-fopenmp", "-UC10_USE_GLOG"],
     extra_ldflags=["-lccl", f"-L{ccl_root}/lib"],
     build_directory=build,
     verbose=False)  # a failure's message carries the compiler's output
print("built", os.path.join(build, "deepspeed_ccl_comm.so"))
