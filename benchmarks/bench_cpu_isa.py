"""Benchmark: do attributions depend on the CPU's vector units? float32 against bfloat16.

A long evaluation resumed over sessions may run on several CPU types. This script computes the
same attributions (a tiny random LLaMA from tests/builders.py, weights perturbed so that no score
is degenerate; IG with 20 steps, occlusion, saliency, attention; one sentence) in one subprocess
per code path and compares each with the native one:

* ``native``: the code paths this CPU's units allow;
* ``ATEN_CPU_CAPABILITY=avx2``: torch's own kernels take the AVX2 path (a CPU without AVX-512);
* ``ONEDNN_MAX_CPU_ISA=AVX512_CORE``: oneDNN's matrix products use AVX-512 without its
  bfloat16 instructions (a CPU without AVX512-BF16 or AMX).

It prints, per dtype and method, the largest absolute difference of the scores against the
native run and the largest absolute score, and Spearman's ρ. Emulated code paths are not other
machines, but they run the same kernels another CPU would choose.

    OMP_NUM_THREADS=1 python benchmarks/bench_cpu_isa.py
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from machine import print_header

ROOT = Path(__file__).resolve().parents[1]
PATHS = {"native": {}, "ATEN_CPU_CAPABILITY=avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
         "ONEDNN_MAX_CPU_ISA=AVX512_CORE": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}}
METHODS = ("integrated_gradients", "occlusion", "saliency", "attention")
TEXT = "the movie is good and the actors are great but the film was bad , slow and boring . a positive review of a negative film"


def worker(out: str) -> None:
    """Write {"<dtype>/<method>": scores} of the fixed model and sentence to ``out``."""
    sys.path.insert(0, str(ROOT / "tests"))
    import torch
    import warnings

    import aieg_fast
    from builders import make_tiny_llama

    warnings.simplefilter("ignore")
    m, tok = make_tiny_llama()
    torch.manual_seed(1)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    scores = {}
    for dt in ("float32", "bfloat16"):
        ex = aieg_fast.load_model(m.to(getattr(torch, dt)), tok)
        for meth in METHODS:
            a = ex.attribute(TEXT, method=meth, target=" good", target_fn="logit", contrast_target=" bad", n_steps=20)
            scores[f"{dt}/{meth}"] = a.scores.float().tolist()
        m = m.float()
    Path(out).write_text(json.dumps(scores))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker(a.worker)
        return
    print_header(argv)
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, env in PATHS.items():
            out = Path(tmp) / f"{len(got)}.json"
            subprocess.run([sys.executable, __file__, "--worker", str(out)], env={**os.environ, **env}, check=True)
            got[name] = json.loads(out.read_text())
    print("\n| code path | dtype | method | max abs diff vs native | max abs score | Spearman ρ |\n|---|---|---|---|---|---|")
    for name in list(PATHS)[1:]:
        for key in got["native"]:
            x, y = np.array(got["native"][key]), np.array(got[name][key])
            rho = spearmanr(x, y).statistic if np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")
            dt, meth = key.split("/")
            print(f"| {name} | {dt} | {meth} | {np.abs(x - y).max():.2g} | {np.abs(x).max():.2g} | {rho:.4f} |")


if __name__ == "__main__":
    main()
