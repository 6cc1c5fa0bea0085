"""Which machine computed a result: a short description that evaluation records carry.

A run spread over sessions may resume on other machines, and results in a low-precision dtype
depend on the kernels the hardware leads torch to: on a tiny model, torch's AVX2 code path
(a CPU without AVX-512) moved bfloat16 scores by up to 1.4 % of the largest against the AVX-512
one, float32 scores by about 1e-6 of it at most (benchmarks/bench_cpu_isa.py, benchmarks/RESULTS.md).
Each evaluation record therefore names its machine
(:func:`machine_tag`), and the run's summary counts the records of each.
"""
from __future__ import annotations

import functools
import os
import platform
import subprocess
from typing import FrozenSet, Tuple

__all__ = ["BF16_FLAGS", "cpu_flags", "cpu_model", "machine_tag", "parse_cpuinfo"]

#: CPU flags (as /proc/cpuinfo names them: x86 "flags", Arm "Features") of units that compute in
#: bfloat16 natively.
BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")


def parse_cpuinfo(text: str) -> Tuple[str, FrozenSet[str]]:
    """(model name, flags) of the first CPU in the text of /proc/cpuinfo (x86's ``model name`` and
    ``flags``, Arm's ``Features``; Arm has no model name: ""); ("", frozenset()) for none."""
    model, flags = "", frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    return model, flags


@functools.lru_cache(maxsize=None)
def _cpuinfo() -> tuple:
    """:func:`parse_cpuinfo` of this machine's /proc/cpuinfo (none: ("", frozenset()))."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return parse_cpuinfo(fh.read())
    except OSError:
        return "", frozenset()


@functools.lru_cache(maxsize=None)
def _lscpu_model() -> str:
    """lscpu's "Model name" (an Arm CPU's /proc/cpuinfo has no model name), else ""."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name:")), "")


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo, else lscpu), else ``platform.processor()`` or
    ``platform.machine()``."""
    return _cpuinfo()[0] or _lscpu_model() or platform.processor() or platform.machine()


def cpu_flags() -> FrozenSet[str]:
    """The CPU's flags as /proc/cpuinfo lists them (empty where there is no /proc/cpuinfo)."""
    return _cpuinfo()[1]


def machine_tag() -> str:
    """``"<CPU model>; <torch's CPU code path>[; <bfloat16 units>]; torch <version>[; <GPU>]"``,
    e.g. ``"AMD EPYC; AVX512; avx512_bf16; torch 2.13.0+cpu"``: the CPU, the vector code path
    torch's kernels take on it (``torch.backends.cpu.get_cpu_capability()``), the bfloat16 units
    of :data:`BF16_FLAGS` it has, torch's version, and the current CUDA device's name once this
    process has used CUDA (a run on the CPU of a machine with a GPU names no GPU). No host name."""
    import torch

    parts = [cpu_model(), torch.backends.cpu.get_cpu_capability()]
    units = [f for f in BF16_FLAGS if f in cpu_flags()]
    if units:
        parts.append("+".join(units))
    parts.append(f"torch {torch.__version__}")
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        parts.append(torch.cuda.get_device_name())
    return "; ".join(parts)
