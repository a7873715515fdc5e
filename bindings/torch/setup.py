"""Builds ccl_torch, ccl's torch.distributed backend, against the torch that this python imports.

    CCL_ROOT=/usr/local python3 -m pip install --no-build-isolation bindings/torch

CCL_ROOT is where ccl is installed (include/ccl/ccl.h and lib/libccl.so); CCL_INCLUDE_DIR and
CCL_LIB_DIR set the two folders separately. Without them, this source tree's include/ and build/
are used. The extension finds libccl.so at run time through an rpath to that folder.
"""
import os

import torch
from setuptools import setup
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
setup(
    name="ccl_torch",
    version="0.1.0",
    description="ccl's torch.distributed process-group backend",
    packages=["ccl_torch"],
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
    cmdclass={"build_ext": BuildExtension},
)
