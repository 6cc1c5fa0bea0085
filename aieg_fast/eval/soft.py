"""Soft-NC / Soft-NS (Zhao & Aletras 2023) and π-Soft-NC / π-Soft-NS (Grad-ELLM reconstruction).

The formulas, the soft maps and what each rewards are in the documentation of
:mod:`aieg_fast.eval.metrics`, which re-exports every function of this module.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

import torch
from torch import Tensor

from ..core.model_state import model_prepared
from ..core.validation import as_int, check_bool, check_choice
from ..result import Attribution
from .checks import check_pis, check_positive_int
from .context import MetricContext, check_ctx_settings, check_keywords, context_for, prepare, seed_for, target_probs
from .forwards import last_logits_embeds
from .scores import NORMALISATIONS, SOFT_MAPS, map_scores, normalise_scores, retention_probs

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = ["DEFAULT_PI_GRID", "soft_probs", "soft_metrics", "soft_nc", "soft_ns", "pi_soft", "pi_soft_nc",
           "pi_soft_ns"]

#: The π grid of specs/grad_ellm.md §5.3 (0.1, ..., 0.9).
DEFAULT_PI_GRID = tuple(round(0.1 * i, 10) for i in range(1, 10))


def _check_soft_map(soft_map) -> str:
    if soft_map not in SOFT_MAPS:
        raise ValueError(f"soft_map must be one of {list(SOFT_MAPS)}, got {soft_map!r}")
    return soft_map


def _uniforms(ctx: MetricContext, tag: str, shape) -> Tensor:
    g = torch.Generator(device="cpu").manual_seed(seed_for(ctx.seed, ctx.instance_id, tag))
    return torch.rand(shape, generator=g, dtype=torch.float32)


def soft_probs(ex: Explainer, ctx: MetricContext, keep: Tensor, U: Tensor) -> Tensor:
    """p(y | masked input) of the soft metrics, in batched forwards: Tensor[R, K] (float64, CPU).

    Element (i, j) of the token embeddings ``ctx.embeds`` [L, d] is kept when U < keep_i
    (fixed, non-eligible positions are always kept) and zeroed otherwise, without rescaling.

    Args:
        ex: the explainer ``ctx`` was prepared with.
        ctx: the instance (:func:`~aieg_fast.eval.context.prepare`).
        keep: keep probabilities Tensor[R, L].
        U: uniforms Tensor[R, K, L, d] (K draws per row).
    """
    R, K, L, d = U.shape
    keep = torch.where(ctx.eligible.cpu(), keep.float(), torch.ones_like(keep, dtype=torch.float32))
    mask = (U < keep.view(R, 1, L, 1)).to(ctx.embeds.dtype).to(ctx.embeds.device)
    X = (ctx.embeds.unsqueeze(0).unsqueeze(0) * mask).view(R * K, L, d)
    with model_prepared(ex.model), torch.no_grad():
        pr = target_probs(last_logits_embeds(ex, X, ctx.batch_size), ctx.target, ctx.prob_space, ctx.label_ids)
    return pr.double().cpu().view(R, K)


def _memo_probs(ex: Explainer, ctx: MetricContext, tag: str, keep: Tensor, U: Tensor) -> Tensor:
    """:func:`soft_probs`, computed once per instance for each (draws, keep probabilities) pair.

    The draws U depend only on (seed, instance, ``tag``) and their shape, so equal keep
    probabilities give equal results: the relu and min-max soft maps of non-negative scores
    (attention, AIEG after PosNorm) share their forwards (``ctx.probs_memo``).
    """
    key = (tag, tuple(U.shape), keep.detach().float().cpu().numpy().tobytes())
    hit = ctx.probs_memo.get(key)
    if hit is None:
        hit = ctx.probs_memo[key] = soft_probs(ex, ctx, keep, U)
    return hit.clone()


def _ns_nc(ctx: MetricContext, pk: Tensor):
    """Normalised sufficiency and comprehensiveness from the sampled probabilities pk [..., K]."""
    if ctx.degenerate:
        nan = torch.full(pk.shape[:-1], float("nan"), dtype=torch.float64)
        return nan, nan
    p, s0 = ctx.p, 1.0 - max(0.0, ctx.p - ctx.p0)
    S = (1.0 - (p - pk).clamp_min(0)).mean(-1)
    C = (p - pk).clamp_min(0).mean(-1)
    ns = ((S - s0) / (1.0 - s0)).clamp(0, 1)
    nc = (C / (1.0 - s0)).clamp(0, 1)
    return ns, nc


def soft_metrics(
    ex: Explainer,
    attr: Attribution,
    *,
    n_samples: int = 10,
    normalise: str = "minmax",
    soft_map: str = "relu",
    ctx: Optional[MetricContext] = None,
    **prepare_kw,
) -> Dict[str, float]:
    """Soft-NS and Soft-NC (Zhao & Aletras 2023; specs/grad_ellm.md §5.2) in one batched forward.

    Keep probabilities r^NS = ã, r^NC = 1 − ã with ã = ``normalise`` of the ``soft_map`` of the
    scores (:func:`~aieg_fast.eval.scores.normalise_scores`), element-wise Bernoulli masks of the
    token embeddings, ``n_samples`` draws averaged. The draws are the same for every method and
    soft map on the same (seed, instance_id).

    Args:
        soft_map: ``"relu"`` (default: negatives clipped to 0), ``"minmax"`` (min-max of the signed
            scores; unchanged by adding a constant) or ``"abs"``.
        normalise: ``"minmax"`` (default), ``"max"``, ``"sigmoid"`` or ``"l1"``.

    Returns:
        ``{"soft_ns", "soft_nc", "degenerate"}``, each metric in [0, 1]; NaN when degenerate.

    Raises:
        ValueError: bad ``n_samples``, ``normalise`` or ``soft_map`` (before any forward), and
            everything :func:`~aieg_fast.eval.context.prepare` raises. TypeError: a keyword that
            neither this function nor ``prepare`` takes (names ``soft_metrics``).
    """
    check_keywords("soft_metrics", prepare_kw, soft_metrics, prepare)
    n_samples = check_positive_int("n_samples", as_int(n_samples))
    check_choice("normalise", normalise, NORMALISATIONS)
    _check_soft_map(soft_map)
    ctx = context_for(ex, attr, ctx, prepare_kw)
    a = normalise_scores(attr.scores, ctx.eligible, normalise, soft_map)
    if ctx.degenerate:
        return {"soft_ns": float("nan"), "soft_nc": float("nan"), "degenerate": True}
    L, d = ctx.embeds.shape
    U = _uniforms(ctx, "soft", (1, n_samples, L, d)).expand(2, n_samples, L, d)
    pk = _memo_probs(ex, ctx, "soft", torch.stack([a, 1.0 - a]), U)
    ns, _ = _ns_nc(ctx, pk[0:1])
    _, nc = _ns_nc(ctx, pk[1:2])
    return {"soft_ns": float(ns[0]), "soft_nc": float(nc[0]), "degenerate": False}


def soft_ns(ex: Explainer, attr: Attribution, **kw) -> float:
    """Soft normalised sufficiency (Zhao & Aletras 2023): keep each embedding element of token i
    with probability ã_i (the normalised scores); higher is better.

    Args: ``attr`` a next-token result (``scores`` Tensor[L]; a generation step through
    :func:`~aieg_fast.eval.context.step_attribution`); ``**kw`` as :func:`soft_metrics` takes them
    (with :func:`~aieg_fast.eval.context.prepare`'s keywords). Raises: as :func:`soft_metrics`, an
    unknown keyword naming this function.

    Returns:
        Soft-NS, unitless in [0, 1] (clipped); NaN for a degenerate instance (p(y | x) − p(y | x_∅) < 1e-6).

    Source: specs/grad_ellm.md §5.2.
    """
    check_keywords("soft_ns", kw, soft_metrics, prepare)
    return soft_metrics(ex, attr, **kw)["soft_ns"]


def soft_nc(ex: Explainer, attr: Attribution, **kw) -> float:
    """Soft normalised comprehensiveness (Zhao & Aletras 2023): keep each embedding element of
    token i with probability 1 − ã_i (the important tokens are the ones masked); higher is better.

    Args: ``attr`` a next-token result (``scores`` Tensor[L]; a generation step through
    :func:`~aieg_fast.eval.context.step_attribution`); ``**kw`` as :func:`soft_metrics` takes them
    (with :func:`~aieg_fast.eval.context.prepare`'s keywords). Raises: as :func:`soft_metrics`, an
    unknown keyword naming this function.

    Returns:
        Soft-NC, unitless in [0, 1] (clipped); NaN for a degenerate instance (p(y | x) − p(y | x_∅) < 1e-6).

    Source: specs/grad_ellm.md §5.2.
    """
    check_keywords("soft_nc", kw, soft_metrics, prepare)
    return soft_metrics(ex, attr, **kw)["soft_nc"]


def _auc(pis: List[float], curve: Tensor, left: float, right: float):
    x = torch.tensor([0.0] + pis + [1.0], dtype=torch.float64)
    y = torch.cat([torch.tensor([left], dtype=torch.float64), curve, torch.tensor([right], dtype=torch.float64)])
    full = float(torch.trapezoid(y, x))
    if len(pis) > 1:
        inner = float(torch.trapezoid(curve, torch.tensor(pis, dtype=torch.float64))) / (pis[-1] - pis[0])
    else:
        inner = float(curve[0])
    return full, inner


def _pi_soft_map(soft_map: str, sign: Optional[str]) -> str:
    """The soft map of :func:`pi_soft`: ``sign`` ("relu" / "abs") is its older spelling."""
    if sign is not None:
        if sign not in ("relu", "abs"):
            raise ValueError(f"sign must be 'relu' or 'abs', got {sign!r}")
        if soft_map not in ("relu", sign):
            raise ValueError(f"sign={sign!r} contradicts soft_map={soft_map!r}; give soft_map only")
        soft_map = sign
    return _check_soft_map(soft_map)


def pi_soft(
    ex: Explainer,
    attr: Optional[Attribution],
    *,
    pis: Sequence[float] = DEFAULT_PI_GRID,
    n_samples: int = 10,
    soft_map: str = "relu",
    sign: Optional[str] = None,
    uniform: bool = False,
    curves: Sequence[str] = ("nc", "ns"),
    ctx: Optional[MetricContext] = None,
    **prepare_kw,
) -> Dict[str, Dict]:
    """π-Soft-NC and π-Soft-NS curves with their AUC (specs/grad_ellm.md §5.3), one batched pass.

    For each π in ``pis``: NS keeps with r = W(m, π), NC keeps with 1 − W(m, 1 − π)
    (:func:`~aieg_fast.eval.scores.retention_probs`) where m is the ``soft_map`` of the scores
    (:func:`~aieg_fast.eval.scores.map_scores`), ``n_samples`` Bernoulli draws each; the uniforms
    depend only on (seed, instance_id, π index), never on the method or the soft map.
    ``uniform=True`` is the control row r_i = π (then ``attr`` only supplies the input; its
    scores and the soft map are ignored; ``attr`` may be None when ``ctx`` gives the input).

    Args:
        soft_map: ``"relu"`` (default), ``"minmax"`` or ``"abs"``. sign: ``"relu"`` / ``"abs"``,
            the older name of ``soft_map`` (None: use ``soft_map``).

    Returns:
        ``{"nc": {"pi", "curve", "auc", "auc_interior"}, "ns": {...}, "degenerate": bool}`` for
        the requested ``curves``; NaN when degenerate.

    Raises:
        ValueError: bad ``pis`` (must be increasing, inside (0, 1)), ``n_samples``, ``curves``,
            ``soft_map`` / ``sign``, ``uniform`` not a bool (before any forward). TypeError: ``attr`` not an
            :class:`~aieg_fast.result.Attribution` (None is taken only as above); a keyword
            that neither this function nor :func:`~aieg_fast.eval.context.prepare` takes
            (names ``pi_soft``).
    """
    check_keywords("pi_soft", prepare_kw, pi_soft, prepare)
    pis = check_pis(pis)
    n_samples = check_positive_int("n_samples", as_int(n_samples))
    curves = list(curves)
    if not curves or any(c not in ("nc", "ns") for c in curves):
        raise ValueError(f"curves must be a non-empty subset of ('nc', 'ns'), got {curves!r}")
    soft_map = _pi_soft_map(soft_map, sign)
    check_bool("uniform", uniform)
    if uniform and attr is None and ctx is not None:  # the uniform control on a given ctx: no attribution to check
        check_ctx_settings(prepare_kw)
    else:
        ctx = context_for(ex, attr, ctx, prepare_kw)
    L, d = ctx.embeds.shape
    G = len(pis)
    P = torch.tensor(pis, dtype=torch.float64)
    e = ctx.eligible.cpu()
    out: Dict[str, Dict] = {"degenerate": ctx.degenerate}
    if ctx.degenerate:
        for c in curves:
            out[c] = {"pi": pis, "curve": [float("nan")] * G, "auc": float("nan"), "auc_interior": float("nan")}
        return out
    m = None if uniform else map_scores(attr.scores, e, soft_map)
    keeps = []
    for c in curves:
        if uniform:
            keeps.append(P.view(-1, 1).expand(G, L) * e)
        elif c == "ns":
            keeps.append(retention_probs(m, P, e, "relu"))
        else:
            keeps.append(1.0 - retention_probs(m, 1.0 - P, e, "relu"))
    U = _uniforms(ctx, "pi", (G, n_samples, L, d))
    keep = torch.cat(keeps, 0)  # [len(curves)·G, L]
    Ufull = U.repeat(len(curves), 1, 1, 1)
    pk = _memo_probs(ex, ctx, "pi", keep, Ufull)
    for j, c in enumerate(curves):
        ns, nc = _ns_nc(ctx, pk[j * G : (j + 1) * G])
        curve = ns if c == "ns" else nc
        left, right = (0.0, 1.0) if c == "ns" else (1.0, 0.0)
        full, inner = _auc(pis, curve, left, right)
        out[c] = {"pi": pis, "curve": curve.tolist(), "auc": full, "auc_interior": inner}
    return out


def pi_soft_nc(ex: Explainer, attr: Attribution, **kw) -> Dict:
    """π-Soft-NC: soft deletion of the important tokens at each expected retention π of the grid
    (keep probabilities 1 − W(m, 1 − π)), and the area under that curve; higher is better.

    Args: ``attr`` a next-token result (``scores`` Tensor[L]; a generation step through
    :func:`~aieg_fast.eval.context.step_attribution`); ``**kw`` as :func:`pi_soft` takes them but
    ``curves`` (with :func:`~aieg_fast.eval.context.prepare`'s keywords). Raises: as
    :func:`pi_soft`, an unknown keyword naming this function.

    Returns:
        ``{"pi": the grid, "curve": Soft-NC at each π, "auc": the trapezoid over [0, 1] with the
        endpoints NC(0) = 1, NC(1) = 0, "auc_interior": the trapezoid over the grid divided by its
        width}``, all unitless in [0, 1]; NaN for a degenerate instance.

    Source: specs/grad_ellm.md §5.3.
    """
    check_keywords("pi_soft_nc", kw, pi_soft, prepare, but=("curves",))
    return pi_soft(ex, attr, curves=("nc",), **kw)["nc"]


def pi_soft_ns(ex: Explainer, attr: Attribution, **kw) -> Dict:
    """π-Soft-NS: soft insertion of the important tokens at each expected retention π of the grid
    (keep probabilities W(m, π)), and the area under that curve; higher is better.

    Args: ``attr`` a next-token result (``scores`` Tensor[L]; a generation step through
    :func:`~aieg_fast.eval.context.step_attribution`); ``**kw`` as :func:`pi_soft` takes them but
    ``curves`` (with :func:`~aieg_fast.eval.context.prepare`'s keywords). Raises: as
    :func:`pi_soft`, an unknown keyword naming this function.

    Returns:
        As :func:`pi_soft_nc`, with Soft-NS on the curve and the endpoints NS(0) = 0, NS(1) = 1.

    Source: specs/grad_ellm.md §5.3.
    """
    check_keywords("pi_soft_ns", kw, pi_soft, prepare, but=("curves",))
    return pi_soft(ex, attr, curves=("ns",), **kw)["ns"]
