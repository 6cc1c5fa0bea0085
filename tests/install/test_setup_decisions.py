"""setup.py's choice of kernels: CUDA only with a CUDA torch, nvcc and known GPU architectures,
else the CPU kernels and the reason; AIEG_FAST_CUDA=1 / 0 force it (fast: nothing is built)."""
from __future__ import annotations

import runpy
import sys
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
    """With a CPU torch, torch reports no CUDA_HOME even where nvcc is installed: the line said
    "nvcc / CUDA_HOME not found" on machines that have it."""
    with_cuda, archs, why = SETUP["cuda_decision"](fake_torch(), None)
    assert (with_cuda, archs) == (False, None) and "not a CUDA build" in why and "nvcc" not in why
    assert "nvcc / CUDA_HOME not found" in SETUP["cuda_decision"](fake_torch("12.8"), None)[2]


@pytest.mark.parametrize("name, value", [("AIEG_FAST_CUDA", "ture"), ("AIEG_FAST_CUDA", "bogus"), ("AIEG_FAST_DEBUG", "yes please")])
def test_a_mistyped_flag_is_refused(monkeypatch, name, value):
    """AIEG_FAST_CUDA=ture silently meant auto."""
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match=rf"{name} must be one of .*got {value!r}"):
        SETUP["env_flag"](name, "auto", extra=("auto",)) if name == "AIEG_FAST_CUDA" else SETUP["env_flag"](name)


class FakeCommand:
    extensions = None


def builds(cmd, *results):
    """A stand-in for torch's build_extensions on ``cmd``: each call fails (an exception) or
    builds (None), in turn; ``calls`` records the extensions each call was given."""
    calls = []

    def build():
        calls.append(list(cmd.extensions))
        if results[len(calls) - 1] is not None:
            raise results[len(calls) - 1]
    return build, calls


def test_a_failed_cuda_build_falls_back_to_the_cpu_kernels(capsys):
    """A CUDA build that failed (torch's CUDA version check, nvcc of another major version) left
    the package without any kernel, the CPU ones included."""
    cmd = FakeCommand()
    # as torch raises it: a format and its values
    mismatch = RuntimeError("The detected CUDA version (%s) mismatches the version that was used to compile PyTorch (%s)",
                            "13.0", "12.8")
    build, calls = builds(cmd, mismatch, None)
    SETUP["build_in_turn"](cmd, [(["both"], "CPU and CUDA kernels"), (["cpu"], "CPU kernels")], build)
    assert cmd.extensions == ["cpu"] and calls == [["both"], ["cpu"]]
    assert ("the CPU and CUDA kernels could not be built (RuntimeError: The detected CUDA version (13.0) mismatches the "
            "version that was used to compile PyTorch (12.8))") in capsys.readouterr().err


def test_the_last_failure_installs_without_kernels_or_stops_when_required(capsys):
    cmd = FakeCommand()
    build, _ = builds(cmd, RuntimeError("Error compiling objects"), RuntimeError("Error compiling objects"))
    SETUP["build_in_turn"](cmd, [(["cpu"], "CPU kernels")], build)
    assert cmd.extensions == [] and "installing WITHOUT the compiled kernels" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"the CPU and CUDA kernels could not be built \(RuntimeError: Error compiling"):
        SETUP["build_in_turn"](cmd, [(["both"], "CPU and CUDA kernels")], build, required=True)


def test_a_missing_compiler_is_named(monkeypatch):
    """Without a compiler the build failed with "Error compiling objects for extension" only; the
    cause was in ninja's lines above it."""
    monkeypatch.setenv("CXX", "no-such-compiler-here --flag")
    assert SETUP["compiler_missing"]() == "no C++ compiler: 'no-such-compiler-here' ($CXX, else c++) is not on PATH"
    monkeypatch.setenv("CXX", sys.executable)
    assert SETUP["compiler_missing"]() is None


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
