"""Builds the aieg_fast._C extension: C++ CPU kernels always, CUDA kernels when possible.

AIEG_FAST_CUDA=auto (default): CUDA iff torch is a CUDA build and nvcc/CUDA_HOME is found;
AIEG_FAST_CUDA=1 requires CUDA (error otherwise); AIEG_FAST_CUDA=0 builds the CPU kernels only.
DEBUG=1 compiles with -O0 -g. Install: pip install --no-build-isolation -e .
"""
import glob
import os
import re

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = re.search(r'^version\s*=\s*"([^"]+)"', open(os.path.join(HERE, "pyproject.toml")).read(), re.M).group(1)


def use_cuda() -> bool:
    flag = os.environ.get("AIEG_FAST_CUDA", "auto").strip().lower()
    available = torch.version.cuda is not None and CUDA_HOME is not None
    if flag in ("1", "on", "true", "yes") and not available:
        raise SystemExit(f"AIEG_FAST_CUDA=1 but torch.version.cuda={torch.version.cuda} and CUDA_HOME={CUDA_HOME}")
    return available if flag == "auto" else flag in ("1", "on", "true", "yes")


def csrc(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", pattern)))


with_cuda = use_cuda()
openmp = "OpenMP" in torch.__config__.parallel_info()
archs = re.sub(r"[;\s]+", ",", os.environ.get("TORCH_CUDA_ARCH_LIST", "auto").strip()) if with_cuda else ""
opt = ["-O0", "-g"] if os.environ.get("DEBUG") == "1" else ["-O3"]
defines = [f"-DAIEG_FAST_VERSION={VERSION}", f"-DAIEG_TORCH_VERSION={torch.__version__}"]
# No fused multiply-add contraction: the kernels round each step like the reference does. The host
# C++ standard is left to torch (C++20 for torch 2.13 headers); csrc/aieg/*.h and the .cu are C++17.
cxx = opt + ["-ffp-contract=off"] + (["-fopenmp"] if openmp else []) + defines
# csrc/*.cpp: the schemas (ops.cpp) and the device-neutral part of each op (<op>.cpp: prepare_<op>).
sources = csrc("*.cpp") + csrc("cpu/*.cpp")
print(f"aieg_fast {VERSION}: torch {torch.__version__} (cuda={torch.version.cuda}), CUDA_HOME={CUDA_HOME}, "
      f"AIEG_FAST_CUDA={os.environ.get('AIEG_FAST_CUDA', 'auto')} -> building with CUDA: {with_cuda}"
      + (f" (TORCH_CUDA_ARCH_LIST={archs})" if with_cuda else "") + f"; OpenMP: {openmp}")
if with_cuda:
    cxx += ["-DAIEG_WITH_CUDA", f"-DAIEG_CUDA_ARCHS={archs}"]
    nvcc = opt + ["-std=c++17", "--fmad=false", "-lineinfo"]  # the .cu files are torch-free C++17
    ext = CUDAExtension("aieg_fast._C", sources + csrc("cuda/*.cu") + csrc("cuda/*.cpp"),
                        include_dirs=[os.path.join(HERE, "csrc")], extra_compile_args={"cxx": cxx, "nvcc": nvcc},
                        extra_link_args=["-fopenmp"] if openmp else [])
else:
    ext = CppExtension("aieg_fast._C", sources, include_dirs=[os.path.join(HERE, "csrc")],
                       extra_compile_args={"cxx": cxx}, extra_link_args=["-fopenmp"] if openmp else [])

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExtension})
