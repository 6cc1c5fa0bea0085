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
If the CUDA build fails under ``auto`` (e.g. nvcc of another CUDA major version than torch's),
the CPU kernels are built alone, with a line saying why.

A build that fails (no C++ compiler, a broken toolchain) does not stop the installation: the
package installs without the extension, with a warning here and at import.
``AIEG_FAST_REQUIRE_EXT=1`` makes such a failure an error. ``AIEG_FAST_DEBUG=1`` compiles with
-O0 -g. Add ``-v`` to pip to see these lines.
"""
import glob
import os
import re
import shlex
import shutil
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = re.search(r'^version\s*=\s*"([^"]+)"', open(os.path.join(HERE, "pyproject.toml")).read(), re.M).group(1)
TRUE = ("1", "on", "true", "yes")
FALSE = ("0", "off", "false", "no")


def env_flag(name: str, default: str = "0", extra=()) -> str:
    """The value of environment variable ``name`` (lower case): one of TRUE, FALSE or ``extra``,
    else SystemExit naming it (a typo such as ``ture`` is not taken for the default)."""
    value = os.environ.get(name, default).strip().lower() or default
    if value not in TRUE + FALSE + tuple(extra):
        raise SystemExit(f"aieg_fast setup: {name} must be one of {list(TRUE + FALSE + tuple(extra))}, got {value!r}")
    return value


REQUIRE_EXT = env_flag("AIEG_FAST_REQUIRE_EXT") in TRUE


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
    flag = env_flag("AIEG_FAST_CUDA", "auto", extra=("auto",))
    if flag in FALSE:
        return False, None, "AIEG_FAST_CUDA=0"
    missing = []
    if torch.version.cuda is None:  # then torch reports no CUDA_HOME whatever is installed: nvcc is not the reason
        missing.append(f"torch {torch.__version__} is not a CUDA build")
    elif cuda_home is None:
        missing.append("nvcc / CUDA_HOME not found")
    archs = cuda_archs(torch) if not missing else None
    if not missing and archs is None:
        missing.append("no GPU architecture known (no visible GPU and TORCH_CUDA_ARCH_LIST unset; "
                       "e.g. TORCH_CUDA_ARCH_LIST='8.0;9.0' builds for A100 and H100)")
    if flag in TRUE and missing:
        raise SystemExit("aieg_fast setup: AIEG_FAST_CUDA=1 but " + "; ".join(missing))
    return not missing, archs, "; ".join(missing)


def build_in_turn(cmd, attempts, build, required: bool = False) -> None:
    """Build the first of ``attempts`` that builds: each a (extensions, what they are) pair set as
    ``cmd.extensions`` before ``build()`` (torch's build_extensions). A failure says why and
    moves to the next (the CPU kernels after the CUDA ones); after the last, SystemExit where
    ``required`` (AIEG_FAST_REQUIRE_EXT=1 or AIEG_FAST_CUDA=1), else the package installs without
    the extension."""
    for i, (extensions, what) in enumerate(attempts):
        cmd.extensions = extensions
        try:
            build()
            return
        except Exception as err:  # compiler missing or failing, CUDA versions apart: anything but an interrupt
            reason = f"{type(err).__name__}: {failure_text(err)[:300]}"
            if i + 1 < len(attempts):
                say(f"WARNING: the {what} could not be built ({reason}); building the {attempts[i + 1][1]} "
                    "(AIEG_FAST_CUDA=1 turns this into an error)")
                continue
            if required:
                raise SystemExit(f"aieg_fast setup: the {what} could not be built ({reason}); AIEG_FAST_REQUIRE_EXT=1 "
                                 "or AIEG_FAST_CUDA=1 makes that an error") from err
            say(f"WARNING: the extension could not be built ({reason}); installing WITHOUT the compiled kernels (the "
                "package runs on its PyTorch reference kernels and warns at import). AIEG_FAST_REQUIRE_EXT=1 turns "
                "this into an error.")
            cmd.extensions = []  # nothing to copy or package


def failure_text(err) -> str:
    """``err``'s message; torch's CUDA version check raises RuntimeError(format, *values),
    whose str is a tuple: it is formatted here."""
    args = err.args
    if len(args) > 1 and isinstance(args[0], str) and "%s" in args[0]:
        try:
            return args[0] % args[1:]
        except (TypeError, ValueError):
            pass
    return str(err).strip()


def compiler_missing():
    """Why no C++ compiler can be run (torch builds with ``$CXX``, else ``c++``), or None."""
    cxx = shlex.split(os.environ.get("CXX", "") or "c++")
    if cxx and shutil.which(cxx[0]) is None:
        return f"no C++ compiler: {cxx[0]!r} ($CXX, else c++) is not on PATH"
    return None


def csrc(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", pattern)))


def extension_setup():
    """``setup()`` keyword arguments: the extension and its build command, or nothing (with a
    line saying why) when torch is not importable here."""
    try:
        import torch
        from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
    except ImportError as err:
        if REQUIRE_EXT:
            raise SystemExit(f"aieg_fast setup: AIEG_FAST_REQUIRE_EXT=1 but torch is not importable in this build "
                             f"environment ({err}): pip install --no-build-isolation .") from None
        say(f"torch is not importable in this build environment ({err}); installing WITHOUT the compiled "
            "kernels (the package runs on its PyTorch reference kernels). To build them against your torch: "
            "pip install --no-build-isolation .")
        return {}
    forced = env_flag("AIEG_FAST_CUDA", "auto", extra=("auto",)) in TRUE  # then a failure is not hidden
    no_compiler = compiler_missing()
    if no_compiler:
        if REQUIRE_EXT or forced:
            raise SystemExit(f"aieg_fast setup: AIEG_FAST_REQUIRE_EXT=1 or AIEG_FAST_CUDA=1 but {no_compiler}")
        say(f"WARNING: {no_compiler}; installing WITHOUT the compiled kernels (the package runs on its PyTorch "
            "reference kernels and warns at import). Install g++ (or set CXX) and reinstall to build them.")
        return {}

    with_cuda, archs, why_not = cuda_decision(torch, CUDA_HOME)
    openmp = "OpenMP" in torch.__config__.parallel_info()
    opt = ["-O0", "-g"] if env_flag("AIEG_FAST_DEBUG") in TRUE else ["-O3"]
    defines = [f"-DAIEG_FAST_VERSION={VERSION}", f"-DAIEG_TORCH_VERSION={torch.__version__}"]
    # No fused multiply-add contraction: the kernels round each step like the reference does. The host
    # C++ standard is left to torch (C++20 for torch 2.13 headers); csrc/aieg/*.h and the .cu are C++17.
    # -g0: no debug information (Python's own CFLAGS ask for -g, which made the library 22 MB); AIEG_FAST_DEBUG=1 keeps it.
    cxx = opt + ([] if "-g" in opt else ["-g0"]) + ["-ffp-contract=off"] + (["-fopenmp"] if openmp else []) + defines
    # csrc/*.cpp: the schemas (ops.cpp) and the device-neutral part of each op (<op>.cpp: prepare_<op>).
    sources = csrc("*.cpp") + csrc("cpu/*.cpp")
    link = ["-fopenmp"] if openmp else []
    kernels = f"CPU and CUDA kernels (TORCH_CUDA_ARCH_LIST={archs})" if with_cuda else f"CPU kernels only ({why_not})"
    say(f"aieg_fast {VERSION} against torch {torch.__version__} (cuda={torch.version.cuda}), CUDA_HOME={CUDA_HOME}, "
        f"OpenMP: {openmp}: building the {kernels}")
    cpu = CppExtension("aieg_fast._C", sources, include_dirs=[os.path.join(HERE, "csrc")],
                       extra_compile_args={"cxx": list(cxx)}, extra_link_args=link)
    attempts = [([cpu], "CPU kernels")]
    if with_cuda:
        os.environ["TORCH_CUDA_ARCH_LIST"] = archs  # what torch's build compiles for
        cuda_archs_define = re.sub(r"[;\s]+", ",", archs)
        cuda_cxx = cxx + ["-DAIEG_WITH_CUDA", f"-DAIEG_CUDA_ARCHS={cuda_archs_define}"]
        nvcc = opt + ["-std=c++17", "--fmad=false", "-lineinfo"]  # the .cu files are torch-free C++17
        both = CUDAExtension("aieg_fast._C", sources + csrc("cuda/*.cu") + csrc("cuda/*.cpp"),
                             include_dirs=[os.path.join(HERE, "csrc")], extra_compile_args={"cxx": cuda_cxx, "nvcc": nvcc},
                             extra_link_args=link)
        attempts = [([both], "CPU and CUDA kernels")] + ([] if forced else attempts)

    class OptionalBuildExtension(BuildExtension):
        """torch's build command over :func:`build_in_turn`'s attempts."""

        def build_extensions(self):
            first = self.extensions[0]  # the one setup() was given: finalize_options set setuptools' private fields on it
            for extensions, _ in attempts[1:]:
                for ext in extensions:
                    for key, value in vars(first).items():
                        if key.startswith("_") and not hasattr(ext, key):
                            setattr(ext, key, value)  # _needs_stub, _full_name, ...: build_extension reads them
            build_in_turn(self, attempts, super().build_extensions, required=REQUIRE_EXT or forced)

    return {"ext_modules": [attempts[0][0][0]], "cmdclass": {"build_ext": OptionalBuildExtension}}


if __name__ == "__main__":  # pip's build backend runs this file as __main__; tests import its functions
    setup(**extension_setup())
