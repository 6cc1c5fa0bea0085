"""``aieg-fast verify``: every method with the reference kernels and with the extension, compared."""
from __future__ import annotations

import json
import math
import sys
import warnings
from typing import List, Optional, Sequence

import torch

from ._ext import HAS_EXT, build_info
from .core.diagnostics import AttributionWarning
from .core.inputs import fill_template
from .core.validation import check_call_settings
from .datasets import sst2_sample
from .explainer import Explainer, load_model
from .methods.aieg import PRESETS as AIEG_PRESETS
from .methods.registry import attention_missing, check_model, get_method, list_methods

__all__ = ["verify", "compare_scores", "spearman", "within_tolerance", "ATTENTION_FREE", "CPU_TOLERANCE", "KERNEL_READINGS",
           "TOLERANCE", "VERIFY_TEMPLATE"]

#: Tolerance of the extension against the reference on one attribution, as a fraction of the
#: reference's largest |score| (so it means the same for scores of 1e-3 and of 1e3), by the
#: model's dtype on a GPU: fp32 / fp64 agree to about 3e-7 of it (SmolLM2-135M and the tiny test
#: models); half precisions get 1e-2, their ~3 digits, since a GPU's forward and backward may
#: sum in another order from one call to the next (not measured yet). On a CPU every dtype
#: gets :data:`CPU_TOLERANCE`.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}

#: The tolerance on a CPU, for every dtype: the kernels accumulate in float32 or wider and a
#: CPU's forward and backward give the same numbers each call, so bfloat16 and float16 models
#: agree as closely as float32 ones (benchmarks/RESULTS.md, "aieg-fast verify in half precision
#: (CPU)": below 7e-7 of the largest |score|, tiny GPT-2 and SmolLM2-135M); 1e-2 let a
#: kernel 0.5 % off pass.
CPU_TOLERANCE = 1e-5

#: The template of the second default text, as the sentiment task writes its prompt: its
#: positions are held fixed. (Every baseline equals the input there, so a kernel that ignored
#: ``fixed_mask`` would give the same scores; tests/ops check the masks themselves.)
VERIFY_TEMPLATE = "Review: {text}\nSentiment:"

#: Further runs of a method, beyond its defaults (and AIEG's readings), with the options that
#: reach the kernels' other modes: every mode of every op runs in one row at least.
KERNEL_READINGS = {
    "aieg": [{"ef_mode": "autograd", "ef_sign": "relu", "posnorm": "abs_sum"},
             {"ef_mode": "none", "ef_sign": "minmax", "posnorm": "none"},
             {"ef_mode": "completeness"},
             {"stream_ef": False, "ef_sign": "signed", "idg_compat_quirk": True}],
    "integrated_gradients": [{"token_reduction": "l2"}],
    "integrated_decision_gradients": [{"idg_compat_quirk": True}],
    "scaled_attention": [{"reduce": "mean_of_products"}],
}


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


def _split_non_finite(ref: torch.Tensor, ext: torch.Tensor):
    """(whether NaN and ±inf sit at the same places with the same signs, mask of the positions
    where both are finite) of two score tensors."""
    same = torch.equal(torch.isnan(ref), torch.isnan(ext)) and torch.equal(torch.isposinf(ref), torch.isposinf(ext)) \
        and torch.equal(torch.isneginf(ref), torch.isneginf(ext))
    return same, torch.isfinite(ref) & torch.isfinite(ext)


def compare_scores(ref: torch.Tensor, ext: torch.Tensor):
    """(max abs diff, max rel diff, Spearman rank agreement) of two score vectors, over the
    positions where both are finite; NaN or ±inf at different places gives (inf, inf, 0.0)."""
    ref, ext = ref.reshape(-1), ext.reshape(-1)
    same, keep = _split_non_finite(ref, ext)
    if not same:
        return math.inf, math.inf, 0.0
    ref, ext = ref[keep], ext[keep]
    diff = (ref - ext).abs()
    mad = float(diff.max()) if diff.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    return mad, (mad / scale if scale > 0 else 0.0), spearman(ref, ext)


def within_tolerance(ref: torch.Tensor, ext: torch.Tensor, tol: float) -> bool:
    """Whether ``ext`` matches ``ref`` (two score tensors of one attribution): NaN and ±inf at
    the same places, and elsewhere max |ref − ext| ≤ ``tol``·max |ref| (exact equality when
    every finite reference score is 0)."""
    same, keep = _split_non_finite(ref, ext)
    if not same:
        return False
    r, e = ref[keep].double(), ext[keep].double()
    if not r.numel():
        return True
    return bool((r - e).abs().max() <= tol * r.abs().max())


def verify(model=None, methods: Optional[str] = None, n_steps: int = 20, texts: Optional[Sequence[str]] = None, file=None,
           device=None, dtype=None, device_map=None) -> int:
    """Run each method with ``backend="reference"`` and ``backend="ext"``; print a table.

    AIEG is run once per reading (:data:`~aieg_fast.methods.aieg.PRESETS`; rows
    ``aieg:preset=<name>``), and methods with other kernel modes once more with the options of
    each of :data:`KERNEL_READINGS` (rows ``<method>:<option>=<value>...``), so that every
    mode of every op is compared. On a model without
    attention layers (Mamba) AIEG and HETA run their attention-free readings
    (:data:`ATTENTION_FREE`); other methods that need attention are listed as ``n/a``.

    Args:
        model: an :class:`~aieg_fast.explainer.Explainer`, or what
            :func:`~aieg_fast.explainer.load_model` takes (default: the embedded model).
        device, dtype, device_map: how ``model`` is loaded (:func:`~aieg_fast.explainer.load_model`;
            not with an Explainer).
        methods: comma-separated method names, or a list (default: every method).
        n_steps: path steps. texts: the inputs (default: the first two shipped SST-2 sentences,
            :func:`~aieg_fast.datasets.sst2_sample`, the second inside :data:`VERIFY_TEMPLATE`,
            with held-fixed positions). file: where the table goes (stdout).

    Returns:
        0 when every method agrees on every text within :data:`CPU_TOLERANCE` on a CPU, or
        :data:`TOLERANCE` of the model's dtype on a GPU, of the largest reference score
        (:func:`within_tolerance`), 1 on a mismatch, 2 when the extension is not available. A
        method that runs no kernel op is listed as ``n/a``, as is one that needs attention
        layers on a model without them (Mamba).

    Raises:
        ValueError: an unknown method, ``n_steps`` not an int ≥ 2, an empty text or list of texts
            (before the model is loaded); ``device`` / ``dtype`` / ``device_map`` with an Explainer.
    """
    file = file or sys.stdout
    if not HAS_EXT:
        print(f"error: the compiled extension is not available: {build_info()['ext_error']}", file=sys.stderr)
        return 2
    names: List[str] = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods or list_methods())
    if texts is not None and not list(texts):
        raise ValueError("texts is empty: give at least one text, or leave texts out for the two shipped SST-2 sentences")
    inputs = [(t, None) for t in texts] if texts is not None else \
        [(s, None if i == 0 else VERIFY_TEMPLATE) for i, (s, _) in enumerate(sst2_sample()[:2])]
    for name in names:  # checked before the model is loaded
        get_method(name)
    check_call_settings(n_steps, "auto", auto_ok=False)
    for t, template in inputs:
        fill_template(t, template)
    if isinstance(model, Explainer):
        if (device, dtype, device_map) != (None, None, None):
            raise ValueError("device, dtype and device_map load a model: not with an Explainer, which is loaded already")
        ex = model
    else:
        ex = load_model(model, device=device, dtype=dtype, device_map=device_map)
    dtype = next(ex.model.parameters()).dtype
    tol = CPU_TOLERANCE if ex.device.type == "cpu" else TOLERANCE.get(dtype, 1e-2)
    print(f"model: {ex.name} ({str(dtype).replace('torch.', '')} on {ex.device})   texts: {len(inputs)}   n_steps: {n_steps}   "
          f"tolerance: {tol:g} of max |score|", file=file)
    runs = {name: _variants(ex, name) for name in names}
    w = max([32] + [len(label) for v in runs.values() for label, _ in v])  # the label column fits the longest spec
    print(f"{'method':{w}s} {'max abs diff':>13s} {'max rel diff':>13s} {'spearman':>9s}  status", file=file)
    bad = 0
    for name, variants in runs.items():
        if not variants:
            print(f"{name:{w}s} {'':13s} {'':13s} {'':9s}  n/a (needs attention layers; {ex.adapter.arch} has none)", file=file)
        for label, opts in variants:
            bad += not _verify_row(ex, name, label.ljust(w), opts, inputs, n_steps, tol, file)
    return 1 if bad else 0


#: the readings of AIEG and HETA that need no attention layers (what they run on Mamba)
ATTENTION_FREE = {"aieg": {"attn_layers": "none"}, "heta": {"components": "curvature,information"}}


def _variants(ex, name: str):
    """(row label, method options) of each run of method ``name`` on ``ex``'s model: AIEG's
    readings, else the defaults, then :data:`KERNEL_READINGS`; on a model without attention the
    attention-free reading, or none."""
    m = get_method(name)
    if attention_missing(m, m.options(), ex.adapter):  # the family's own refusal (Mamba)
        opts = ATTENTION_FREE.get(name)
        if opts is None:
            return []
        check_model(m, m.options(**opts), ex.adapter)
        return [(_spec(name, opts), opts)]
    check_model(m, m.options(), ex.adapter)  # another refusal (check_adapter) is raised, not listed as n/a
    runs = [{"preset": p} for p in AIEG_PRESETS] if name == "aieg" else [{}]
    return [(_spec(name, o), o) for o in runs + KERNEL_READINGS.get(name, [])]


def _spec(name: str, opts: dict) -> str:
    """A row's label: the method spec that runs it (``aieg:ef_mode=none:stream_ef=false``, as
    ``aieg-fast evaluate --methods`` takes it)."""
    return name + "".join(f":{k}={v if isinstance(v, str) and ',' not in v else json.dumps(v)}" for k, v in opts.items())


def _verify_row(ex, name: str, label: str, opts: dict, inputs, n_steps: int, tol: float, file) -> bool:
    """One row of the table: ``name`` with ``opts`` on every (text, template) of ``inputs``,
    reference against extension; whether it agrees. The attributions' own cautions (an IG
    completeness error at few steps) are not written: the row compares two backends."""
    worst = (0.0, 0.0, 1.0)
    ok, kernels = True, False
    for t, template in inputs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AttributionWarning)
            a = ex.attribute(t, method=name, n_steps=n_steps, template=template, backend="reference", **opts)
            b = ex.attribute(t, method=name, n_steps=n_steps, template=template, backend="ext", **opts)
        kernels = kernels or "ext" in (b.backend or {}).values()
        mad, mrd, rho = compare_scores(a.scores, b.scores)
        worst = (max(worst[0], mad), max(worst[1], mrd), min(worst[2], rho))
        ok = within_tolerance(a.scores, b.scores, tol) and ok
    status = "MISMATCH" if not ok else ("ok" if kernels else "n/a (no kernel op: both runs are the reference)")
    print(f"{label:32s} {worst[0]:13.3e} {worst[1]:13.3e} {worst[2]:9.4f}  {status}", file=file)
    return ok
