"""``aieg-fast verify``: every method with the reference kernels and with the extension, compared."""
from __future__ import annotations

import sys
from typing import List, Optional, Sequence

import torch

from ._ext import HAS_EXT, build_info
from .core.inputs import fill_template
from .core.validation import check_call_settings
from .datasets import sst2_sample
from .explainer import load_model
from .methods.registry import check_model, get_method, list_methods

__all__ = ["verify", "compare_scores", "spearman"]

#: Tolerances of the extension against the reference on one attribution (fp32 models).
ATOL, RTOL = 1e-4, 1e-3


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rank correlation of two score tensors of the same number of elements
    (flattened; ties get average ranks, scipy's ``spearmanr``). Where a side is constant the
    correlation is undefined: 1.0 when the two are equal (close), else 0.0; 1.0 for fewer than 2
    elements."""
    from scipy.stats import spearmanr

    x, y = a.detach().double().flatten().cpu(), b.detach().double().flatten().cpu()
    if x.numel() < 2:
        return 1.0
    if bool((x == x[0]).all()) or bool((y == y[0]).all()):
        return 1.0 if torch.allclose(x, y) else 0.0
    return float(spearmanr(x.numpy(), y.numpy()).statistic)


def compare_scores(ref: torch.Tensor, ext: torch.Tensor):
    """(max abs diff, max rel diff, Spearman rank agreement) of two score vectors."""
    diff = (ref - ext).abs()
    mad = float(diff.max()) if diff.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    return mad, (mad / scale if scale > 0 else 0.0), spearman(ref, ext)


def verify(model=None, methods: Optional[str] = None, n_steps: int = 20, texts: Optional[Sequence[str]] = None, file=None) -> int:
    """Run each method with ``backend="reference"`` and ``backend="ext"``; print a table.

    Args:
        model: as :func:`~aieg_fast.explainer.load_model` (default: the embedded model).
        methods: comma-separated method names, or a list (default: every method).
        n_steps: path steps. texts: the inputs (default: the first two shipped SST-2 sentences,
            :func:`~aieg_fast.datasets.sst2_sample`). file: where the table goes (stdout).

    Returns:
        0 when every method agrees within ``ATOL + RTOL·max|ref|``, 1 on a mismatch, 2 when the
        extension is not available. A method that runs no kernel op is listed as ``n/a``, as is
        one that needs attention layers on a model without them (Mamba).

    Raises:
        ValueError: an unknown method, ``n_steps`` not an int ≥ 2, an empty text or list of texts
            (before the model is loaded).
    """
    file = file or sys.stdout
    if not HAS_EXT:
        print(f"error: the compiled extension is not available: {build_info()['ext_error']}", file=sys.stderr)
        return 2
    names: List[str] = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods or list_methods())
    if texts is not None and not list(texts):
        raise ValueError("texts is empty: give at least one text, or None for the two shipped SST-2 sentences")
    texts = list(texts) if texts is not None else [s for s, _ in sst2_sample()[:2]]
    for name in names:  # checked before the model is loaded
        get_method(name)
    check_call_settings(n_steps, "auto", auto_ok=False)
    for t in texts:
        fill_template(t)
    ex = load_model(model)
    print(f"model: {ex.name}   texts: {len(texts)}   n_steps: {n_steps}", file=file)
    print(f"{'method':32s} {'max abs diff':>13s} {'max rel diff':>13s} {'spearman':>9s}  status", file=file)
    bad = 0
    for name in names:
        m = get_method(name)
        try:
            check_model(m, m.options(), ex.adapter)  # the family's own refusal (a method needing attention on Mamba)
        except ValueError:
            print(f"{name:32s} {'':13s} {'':13s} {'':9s}  n/a (needs attention layers, which {ex.adapter.arch} has none)", file=file)
            continue
        worst = (0.0, 0.0, 1.0)
        ok, kernels = True, False
        for t in texts:
            a = ex.attribute(t, method=name, n_steps=n_steps, backend="reference")
            b = ex.attribute(t, method=name, n_steps=n_steps, backend="ext")
            kernels = kernels or "ext" in (b.backend or {}).values()
            mad, mrd, rho = compare_scores(a.scores, b.scores)
            worst = (max(worst[0], mad), max(worst[1], mrd), min(worst[2], rho))
            if not torch.allclose(a.scores, b.scores, atol=ATOL, rtol=RTOL, equal_nan=True):
                ok = False
        bad += not ok
        status = "MISMATCH" if not ok else ("ok" if kernels else "n/a (no kernel op: both runs are the reference)")
        print(f"{name:32s} {worst[0]:13.3e} {worst[1]:13.3e} {worst[2]:9.4f}  {status}", file=file)
    return 1 if bad else 0
