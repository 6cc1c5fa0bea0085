"""setup.py's choice of kernels: CUDA only with a CUDA torch, nvcc and known GPU architectures,
else the CPU kernels and the reason; AIEG_FAST_CUDA=1 / 0 force it (fast: nothing is built)."""
from __future__ import annotations

import runpy
import types
from pathlib import Path

import pytest

SETUP = runpy.run_path(str(Path(__file__).resolve().parents[2] / "setup.py"), run_name="setup_under_test")


def fake_torch(cuda=None, gpus=()):
    """A stand-in for torch: its version and CUDA build, and the capabilities of visible GPUs."""
    return types.SimpleNamespace(
        __version__="2.13.0", version=types.SimpleNamespace(cuda=cuda),
        cuda=types.SimpleNamespace(is_available=lambda: bool(gpus), device_count=lambda: len(gpus),
                                   get_device_capability=lambda i: gpus[i]))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.delenv("AIEG_FAST_CUDA", raising=False)


def test_cpu_torch_builds_cpu_kernels():
    with_cuda, archs, why = SETUP["cuda_decision"](fake_torch(), None)
    assert (with_cuda, archs) == (False, None) and "not a CUDA build" in why and "nvcc" in why


def test_cuda_torch_without_a_known_arch_builds_cpu_kernels(monkeypatch):
    """What crashed before: a CUDA torch and nvcc on a machine without a GPU, no arch list."""
    with_cuda, archs, why = SETUP["cuda_decision"](fake_torch("12.8"), "/usr/local/cuda")
    assert not with_cuda and "no GPU architecture known" in why and "TORCH_CUDA_ARCH_LIST" in why
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    assert SETUP["cuda_decision"](fake_torch("12.8"), "/usr/local/cuda") == (True, "8.0;9.0", "")


def test_visible_gpus_give_the_archs():
    assert SETUP["cuda_decision"](fake_torch("12.8", gpus=[(9, 0), (8, 0), (9, 0)]), "/cuda")[:2] == (True, "8.0;9.0")


def test_forced_on_or_off(monkeypatch):
    monkeypatch.setenv("AIEG_FAST_CUDA", "1")
    with pytest.raises(SystemExit, match="AIEG_FAST_CUDA=1 but .*no GPU architecture known"):
        SETUP["cuda_decision"](fake_torch("12.8"), "/cuda")
    monkeypatch.setenv("AIEG_FAST_CUDA", "0")
    assert SETUP["cuda_decision"](fake_torch("12.8", gpus=[(9, 0)]), "/cuda") == (False, None, "AIEG_FAST_CUDA=0")
