"""Builds the aieg_fast._C extension against the torch of the environment it is built in.

Install into an environment that already has torch (the README's path; the usual one for torch
extensions, as with flash-attn or apex):

    pip install --no-build-isolation .          # or a source archive: pip install --no-build-isolation aieg_fast-0.1.0.tar.gz

Without ``--no-build-isolation`` pip builds in a fresh environment that holds no torch (the
build requirements do not list torch, so pip never downloads a second one): the package then
installs without the extension and runs on the PyTorch reference kernels, and says so at import.

Kernels built:
* C++ CPU kernels always (OpenMP when torch has it);
* CUDA kernels when ``AIEG_FAST_CUDA=auto`` (default) finds a CUDA build of torch, nvcc
  (``CUDA_HOME``) and the GPU architectures: ``TORCH_CUDA_ARCH_LIST`` (e.g. ``"8.0;9.0"``), else
  those of the visible GPUs; otherwise the CPU kernels only, with a line saying why.
  ``AIEG_FAST_CUDA=1`` requires them (an error says what is missing); ``AIEG_FAST_CUDA=0`` skips them.

A build that fails (no C++ compiler, a broken toolchain) does not stop the installation: the
package installs without the extension, with a warning here and at import.
``AIEG_FAST_REQUIRE_EXT=1`` makes such a failure an error. ``DEBUG=1`` compiles with -O0 -g.
Add ``-v`` to pip to see these lines.
"""
import glob
import os
import re
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = re.search(r'^version\s*=\s*"([^"]+)"', open(os.path.join(HERE, "pyproject.toml")).read(), re.M).group(1)
TRUE = ("1", "on", "true", "yes")
REQUIRE_EXT = os.environ.get("AIEG_FAST_REQUIRE_EXT", "0").strip().lower() in TRUE


def say(msg: str) -> None:
    print(f"aieg_fast setup: {msg}", file=sys.stderr, flush=True)


def cuda_archs(torch):
    """The GPU architectures to compile for, as TORCH_CUDA_ARCH_LIST writes them, or None."""
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if env:
        return env
    try:
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a driver problem: no visible device
        n = 0
    caps = sorted({"%d.%d" % torch.cuda.get_device_capability(i) for i in range(n)})
    return ";".join(caps) or None


def cuda_decision(torch, cuda_home):
    """(build CUDA kernels?, arch list, why not) from AIEG_FAST_CUDA, torch, nvcc and the GPUs."""
    flag = os.environ.get("AIEG_FAST_CUDA", "auto").strip().lower()
    if flag in ("0", "off", "false", "no"):
        return False, None, "AIEG_FAST_CUDA=0"
    missing = []
    if torch.version.cuda is None:
        missing.append(f"torch {torch.__version__} is not a CUDA build")
    if cuda_home is None:
        missing.append("nvcc / CUDA_HOME not found")
    archs = cuda_archs(torch) if not missing else None
    if not missing and archs is None:
        missing.append("no GPU architecture known (no visible GPU and TORCH_CUDA_ARCH_LIST unset; "
                       "e.g. TORCH_CUDA_ARCH_LIST='8.0;9.0' builds for A100 and H100)")
    if flag in TRUE and missing:
        raise SystemExit("aieg_fast setup: AIEG_FAST_CUDA=1 but " + "; ".join(missing))
    return not missing, archs, "; ".join(missing)


def csrc(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", pattern)))


def extension_setup():
    """``setup()`` keyword arguments: the extension and its build command, or nothing (with a
    line saying why) when torch is not importable here."""
    try:
        import torch
        from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
    except ImportError as err:
        say(f"torch is not importable in this build environment ({err}); installing WITHOUT the compiled "
            "kernels (the package runs on its PyTorch reference kernels). To build them against your torch: "
            "pip install --no-build-isolation .")
        if REQUIRE_EXT:
            raise SystemExit("aieg_fast setup: AIEG_FAST_REQUIRE_EXT=1 but torch is not importable") from None
        return {}

    class OptionalBuildExtension(BuildExtension):
        """torch's build command; a failure installs the package without the extension."""

        def build_extensions(self):
            try:
                super().build_extensions()
            except Exception as err:  # compiler missing or failing: anything but an interrupt
                if REQUIRE_EXT:
                    raise
                say(f"WARNING: the extension could not be built ({type(err).__name__}: {str(err).strip()[:300]}); "
                    "installing WITHOUT the compiled kernels (the package runs on its PyTorch reference kernels "
                    "and warns at import). AIEG_FAST_REQUIRE_EXT=1 turns this into an error.")
                self.extensions = []  # nothing to copy or package

    with_cuda, archs, why_not = cuda_decision(torch, CUDA_HOME)
    openmp = "OpenMP" in torch.__config__.parallel_info()
    opt = ["-O0", "-g"] if os.environ.get("DEBUG") == "1" else ["-O3"]
    defines = [f"-DAIEG_FAST_VERSION={VERSION}", f"-DAIEG_TORCH_VERSION={torch.__version__}"]
    # No fused multiply-add contraction: the kernels round each step like the reference does. The host
    # C++ standard is left to torch (C++20 for torch 2.13 headers); csrc/aieg/*.h and the .cu are C++17.
    # -g0: no debug information (Python's own CFLAGS ask for -g, which made the library 22 MB); DEBUG=1 keeps it.
    cxx = opt + ([] if "-g" in opt else ["-g0"]) + ["-ffp-contract=off"] + (["-fopenmp"] if openmp else []) + defines
    # csrc/*.cpp: the schemas (ops.cpp) and the device-neutral part of each op (<op>.cpp: prepare_<op>).
    sources = csrc("*.cpp") + csrc("cpu/*.cpp")
    link = ["-fopenmp"] if openmp else []
    kernels = f"CPU and CUDA kernels (TORCH_CUDA_ARCH_LIST={archs})" if with_cuda else f"CPU kernels only ({why_not})"
    say(f"aieg_fast {VERSION} against torch {torch.__version__} (cuda={torch.version.cuda}), CUDA_HOME={CUDA_HOME}, "
        f"OpenMP: {openmp}: building the {kernels}")
    if with_cuda:
        os.environ["TORCH_CUDA_ARCH_LIST"] = archs  # what torch's build compiles for
        cuda_archs_define = re.sub(r"[;\s]+", ",", archs)
        cxx += ["-DAIEG_WITH_CUDA", f"-DAIEG_CUDA_ARCHS={cuda_archs_define}"]
        nvcc = opt + ["-std=c++17", "--fmad=false", "-lineinfo"]  # the .cu files are torch-free C++17
        ext = CUDAExtension("aieg_fast._C", sources + csrc("cuda/*.cu") + csrc("cuda/*.cpp"),
                            include_dirs=[os.path.join(HERE, "csrc")], extra_compile_args={"cxx": cxx, "nvcc": nvcc},
                            extra_link_args=link)
    else:
        ext = CppExtension("aieg_fast._C", sources, include_dirs=[os.path.join(HERE, "csrc")],
                           extra_compile_args={"cxx": cxx}, extra_link_args=link)
    return {"ext_modules": [ext], "cmdclass": {"build_ext": OptionalBuildExtension}}


if __name__ == "__main__":  # pip's build backend runs this file as __main__; tests import its functions
    setup(**extension_setup())
