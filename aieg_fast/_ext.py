"""Loads the compiled extension ``aieg_fast._C`` if it is there. Never raises.

Importing ``_C`` registers the ``torch.ops.aieg_fast.*`` operators. When the extension is missing
or cannot be used (not built, fails to load, built against another torch release), ``HAS_EXT``
is False, ``EXT_ERROR`` says why, :mod:`aieg_fast.ops` falls back to :mod:`aieg_fast.reference`
(same results, slower), and importing the package warns once with an
:class:`ExtensionWarning` that says how to build it (``pip install --no-build-isolation .``).
Silence it with ``AIEG_FAST_NO_EXT_WARNING=1``.
"""
from __future__ import annotations

import importlib
import os
import warnings
from typing import Any, Dict, Optional

import torch

__all__ = ["HAS_EXT", "WITH_CUDA", "EXT_ERROR", "CPU_OPS", "CUDA_OPS", "ExtensionWarning", "build_info", "has_kernel",
           "torch_release"]


class ExtensionWarning(UserWarning):
    """The compiled kernels are not available; the PyTorch reference kernels run instead."""


def torch_release(version: str) -> str:
    """``"2.13.0"`` of ``"2.13.0+cu128"``: the release, without the local build tag (a CPU and a
    CUDA build of one release share the C++ ABI the extension links against)."""
    return str(version).split("+", 1)[0]


_C: Any = None
EXT_ERROR: Optional[str] = None
try:
    # registers the operators as a side effect; imported by name because the compiled module
    # may be absent (and static import analysis would read "from . import _C" as the package)
    _C = importlib.import_module(f"{__package__}._C")
except Exception as exc:  # ImportError, OSError (undefined symbol), anything else: never raise
    _C = None
    EXT_ERROR = f"{type(exc).__name__}: {exc}"
if _C is not None and torch_release(getattr(_C, "torch_version", "")) != torch_release(torch.__version__):
    EXT_ERROR = (f"aieg_fast._C was built against torch {getattr(_C, 'torch_version', '?')}, "
                 f"but torch {torch.__version__} is running")
    _C = None


def build_advice(package_dir: str) -> str:
    """How to get the kernels: build in place where ``package_dir`` is a source checkout (its
    parent holds setup.py and csrc/: imported from there, it takes the place of an installed
    copy), else reinstall from the source."""
    root = os.path.dirname(os.path.abspath(package_dir))
    if os.path.isfile(os.path.join(root, "setup.py")) and os.path.isdir(os.path.join(root, "csrc")):
        return (f"This is the source checkout {root}: it is imported instead of any installed copy while it is the "
                "working directory or on sys.path. Build the kernels in place with "
                "`pip install --no-build-isolation --no-deps -e .` there (a C++ compiler is needed), or run from another folder")
    return ("To build them against the installed torch, reinstall from the source with `pip install --force-reinstall "
            "--no-deps --no-build-isolation .` (a C++ compiler is needed; without --force-reinstall pip keeps an "
            "installed copy of the same version)")


if EXT_ERROR is not None and os.environ.get("AIEG_FAST_NO_EXT_WARNING", "").strip().lower() in ("", "0", "false", "no", "off"):
    warnings.warn(
        f"aieg_fast: the compiled kernels are not available ({EXT_ERROR}); running on the PyTorch reference "
        f"kernels (same results, slower). {build_advice(os.path.dirname(__file__))}; AIEG_FAST_NO_EXT_WARNING=1 "
        "silences this.",
        ExtensionWarning, stacklevel=2)

HAS_EXT: bool = _C is not None
WITH_CUDA: bool = bool(getattr(_C, "with_cuda", False))
CPU_OPS = frozenset(getattr(_C, "ops", ()))
CUDA_OPS = frozenset(getattr(_C, "cuda_ops", ()))


def has_kernel(op: str, device_type: str) -> bool:
    """Whether the loaded extension has a kernel for ``op`` on ``device_type`` ("cpu" or "cuda")."""
    if not HAS_EXT:
        return False
    if device_type == "cpu":
        return op in CPU_OPS
    if device_type == "cuda":
        return WITH_CUDA and op in CUDA_OPS
    return False


def build_info() -> Dict[str, Any]:
    """How the extension was built (or why it is missing), as a plain dict."""
    info: Dict[str, Any] = {
        "has_ext": HAS_EXT,
        "ext_error": EXT_ERROR,
        "with_cuda": WITH_CUDA,
        "cpu_ops": sorted(CPU_OPS),
        "cuda_ops": sorted(CUDA_OPS),
        "torch_runtime": torch.__version__,
    }
    if _C is not None:
        for key in ("__version__", "torch_version", "cuda_arch_list", "compiler", "openmp"):
            info[key.strip("_")] = getattr(_C, key, None)
    return info
