"""Build hygiene of csrc/: the CUDA kernels are torch-free and compile with nvcc alone.

CI has nvcc with the CUDA runtime headers only and a CPU build of torch, so every
``csrc/**/*.cu`` must compile without any torch include path (for sm_80 and sm_90), and nothing
they include may come from torch, ATen, c10 or pybind11. The torch-free headers in csrc/aieg/ must
also compile with a plain C++17 host compiler.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"
CU_FILES = sorted(CSRC.rglob("*.cu"))
ARCHS = ("sm_80", "sm_90")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
FORBIDDEN = re.compile(r"^(torch|ATen|c10|caffe2|pybind11|Python\.h)")
ALLOWED_IN_CU = {"cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "cstdint"}

nvcc = shutil.which("nvcc")
cxx = shutil.which("g++") or shutil.which("c++")


def _includes(path: Path):
    return [(kind, name) for kind, name in INCLUDE.findall(path.read_text())]


def _closure(path: Path):
    """Every header reached from ``path`` (quoted includes resolved against csrc/), as names."""
    seen, todo, names = set(), [path], []
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for kind, name in _includes(p):
            names.append(name)
            if kind == '"' and (CSRC / name).exists():
                todo.append(CSRC / name)
    return names


def test_there_are_cuda_kernels():
    assert CU_FILES, "no csrc/**/*.cu found"


@pytest.mark.parametrize("cu", CU_FILES, ids=lambda p: p.name)
def test_cu_files_are_torch_free(cu):
    own = [name for _, name in _includes(cu)]
    bad_own = [n for n in own if n not in ALLOWED_IN_CU and not n.startswith("aieg/")]
    assert not bad_own, f"{cu.name} includes {bad_own}; allowed: {sorted(ALLOWED_IN_CU)} and aieg/*.h"
    torchy = [n for n in _closure(cu) if FORBIDDEN.match(n)]
    assert not torchy, f"{cu.name} pulls in torch headers: {torchy}"


@pytest.mark.skipif(nvcc is None, reason="nvcc not found")
def test_cu_files_compile_with_nvcc_alone(tmp_path):
    """nvcc -std=c++17 -I csrc -arch=<sm> -c <file>, with no torch include path (two archs)."""

    def compile_one(job):
        cu, arch = job
        out = tmp_path / f"{cu.stem}.{arch}.o"
        cmd = [nvcc, "-std=c++17", "-I", str(CSRC), f"-arch={arch}", "-c", str(cu), "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        return job, proc.returncode, proc.stdout + proc.stderr

    jobs = [(cu, arch) for cu in CU_FILES for arch in ARCHS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(compile_one, jobs))
    failures = [f"{cu.name} [{arch}]:\n{log}" for (cu, arch), rc, log in results if rc != 0]
    assert not failures, "\n".join(failures)


@pytest.mark.skipif(cxx is None, reason="no C++ compiler")
@pytest.mark.parametrize("header", sorted(p for p in (CSRC / "aieg").glob("*.h") if p.name != "cuda_common.h"),
                         ids=lambda p: p.name)
def test_aieg_headers_compile_as_plain_cpp17(header, tmp_path):
    src = tmp_path / "t.cpp"
    src.write_text(f'#include "aieg/{header.name}"\nint main() {{ return 0; }}\n')
    proc = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-Wall", "-I", str(CSRC), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not [n for n in _closure(header) if FORBIDDEN.match(n)]
