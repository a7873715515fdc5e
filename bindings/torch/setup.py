"""Builds ccl_torch, ccl's torch.distributed backend, against the torch that this python imports.

    CCL_ROOT=/usr/local python3 -m pip install --no-build-isolation bindings/torch

The distribution is named oneccl_bind_pt, as Intel's package is (transformers and accelerate read
its version), and holds ccl_torch and the two names oneCCL's package is imported by,
oneccl_bindings_for_pytorch (with its env/setvars.sh) and torch_ccl (docs/oneccl.md).

CCL_ROOT is where ccl is installed (include/ccl/ccl.h and lib/libccl.so); CCL_INCLUDE_DIR and
CCL_LIB_DIR set the two folders separately. Without them, this source tree's include/ and build/
are used. The extension finds libccl.so at run time through an rpath to that folder.
"""
import os
import re

import torch
from setuptools import setup
from setuptools.command.build_py import build_py
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
os.chdir(here)
tree = os.path.normpath(os.path.join(here, "..", ".."))
root = os.environ.get("CCL_ROOT")


def folder(var, installed, in_tree):
    path = os.environ.get(var) or (os.path.join(root, installed) if root else in_tree)
    return os.path.abspath(path)


include_dir = folder("CCL_INCLUDE_DIR", "include", os.path.join(tree, "include"))
lib_dir = folder("CCL_LIB_DIR", "lib", os.path.join(tree, "build"))
if not os.path.exists(os.path.join(include_dir, "ccl", "ccl.h")):
    raise SystemExit(f"ccl_torch: no ccl/ccl.h under {include_dir}: set CCL_ROOT or CCL_INCLUDE_DIR")
if not any(f.startswith("libccl.so") for f in os.listdir(lib_dir) if os.path.isdir(lib_dir)):
    raise SystemExit(f"ccl_torch: no libccl.so in {lib_dir}: build ccl, or set CCL_ROOT or CCL_LIB_DIR")

major, minor = (int(x) for x in torch.__version__.split(".")[:2])
with open(os.path.join(include_dir, "ccl", "ccl.h")) as f:
    header = f.read()
ccl_version = ".".join(re.search(rf"#define CCL_VERSION_{p} (\d+)", header).group(1)
                       for p in ("MAJOR", "MINOR", "PATCH"))
# Intel's package takes torch's version (scripts compare it with "1.12" to choose between its
# names); ccl's own follows the +.
version = f"{major}.{minor}.0+ccl.{ccl_version}"
# Where `cmake --install` put ccl, else this source tree.
ccl_root = os.path.abspath(root) if root else tree


class BuildPy(build_py):
    """Also writes ccl_torch/_version.py and oneccl_bindings_for_pytorch/env/setvars.sh, which
    name this build's ccl, into the built package."""

    def run(self):
        super().run()
        with open(os.path.join(self.build_lib, "ccl_torch", "_version.py"), "w") as f:
            f.write(f'__version__ = "{version}"\n')
        env = os.path.join(self.build_lib, "oneccl_bindings_for_pytorch", "env")
        os.makedirs(env, exist_ok=True)
        with open(os.path.join(env, "setvars.sh"), "w") as f:
            f.write(f"""# ccl's stand-in for oneCCL's setvars.sh: source it (bash, zsh or sh) to build and run
# against the ccl this torch backend was built with (DeepSpeed's CCL op reads CCL_ROOT; the
# compiler reads CPATH and LIBRARY_PATH).
export CCL_ROOT="{ccl_root}"
export CPATH="{include_dir}${{CPATH:+:$CPATH}}"
export LIBRARY_PATH="{lib_dir}${{LIBRARY_PATH:+:$LIBRARY_PATH}}"
export LD_LIBRARY_PATH="{lib_dir}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
""")


setup(
    name="oneccl_bind_pt",
    version=version,
    description="ccl's torch.distributed process-group backend",
    packages=["ccl_torch", "oneccl_bindings_for_pytorch", "torch_ccl"],
    ext_modules=[
        CppExtension(
            "ccl_torch._C",
            ["csrc/process_group_ccl.cpp"],
            include_dirs=[include_dir],
            library_dirs=[lib_dir],
            libraries=["ccl"],
            define_macros=[("CCL_TORCH_VERSION_MAJOR", str(major)),
                           ("CCL_TORCH_VERSION_MINOR", str(minor))],
            extra_compile_args=["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-deprecated-declarations", "-fvisibility=hidden"],
            extra_link_args=[f"-Wl,-rpath,{lib_dir}"],
            depends=["csrc/process_group_ccl.h"],
        )
    ],
    cmdclass={"build_ext": BuildExtension, "build_py": BuildPy},
)
