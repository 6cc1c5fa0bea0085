"""Faithfulness metrics for token attributions of decoder-only LLMs (and classification heads).

Every metric takes an :class:`~aieg_fast.explainer.Explainer` and an
:class:`~aieg_fast.result.Attribution` (its ``token_ids``, ``scores``, ``attributable`` and
``target["id"]``), perturbs the input guided by the scores and compares the probability of the
target before and after. All perturbed inputs of one call go through the model as batched
forwards (right padding, explicit position ids, so GPT-2's learned positions are those of an
unpadded sequence); there are no per-token Python loops.

Probability p(y | x): for a causal LM, the softmax over the full vocabulary of the next-token
logits at the last position, read at the target token y (``prob_space="vocab"``, default), or
the softmax restricted to ``label_ids`` such as the ids of " negative" / " positive"
(``prob_space="labels"``, the "verbalizer" option of specs/aieg.md §7). For a classification
head, the softmax over the classes (``"labels"`` then restricts to a subset of classes).

Hard metrics (DIG, Sanyal & Ren 2021; adapted to causal LMs in specs/aieg.md §5, §7). The
top-k positions are the k largest *signed* scores among the attributable positions, ties broken
by the lower index; k = int(|P|·topk) with P the attributable positions (``dig_compat=False``,
default: the template and BOS are never removed) or k = int(L·topk) over all L positions
(``dig_compat=True``, DIG's own rule). With k = 0 every hard metric is 0.

* :func:`log_odds`          LO   = log p(y | x') − log p(y | x), x' = top-k ids replaced in place
  by the reference token (the IG baseline token ``ex.ref_token_id``). Lower is better.
* :func:`comprehensiveness` Comp = p(y | x) − p(y | x without the top-k tokens). Higher is better.
* :func:`sufficiency`       Suff = p(y | x) − p(y | top-k tokens + fixed positions only). Lower is
  better. Deleting tokens shortens the sequence; positions are re-indexed 0..L'−1.

Soft metrics (Zhao & Aletras, ACL 2023, "Incorporating attribution importance for improving
faithfulness metrics"; decoder-only adaptation in specs/grad_ellm.md §2.6, §5.2). Each element
(i, j) of the token embedding matrix is kept with probability r_i (Bernoulli, U[i, j] < r_i) and
zeroed otherwise, with no rescaling; fixed positions are always kept. With x_∅ the input whose
eligible embeddings are all zero:

* S(x, x') = 1 − max(0, p(y|x) − p(y|x')), C(x, x') = max(0, p(y|x) − p(y|x')), S₀ = S(x, x_∅);
* Soft-NS = clip((mean_k S_k − S₀) / (1 − S₀), 0, 1) with keep probabilities r = ã;
* Soft-NC = clip(mean_k C_k / (1 − S₀), 0, 1) with keep probabilities r = 1 − ã;
* ã = scores normalised to [0, 1] over eligible tokens
  (:func:`~aieg_fast.eval.scores.normalise_scores`; default: negative scores clipped to 0,
  then min-max). Higher is better for both.
* An instance with 1 − S₀ < 1e-6 (the empty input is at least as likely) is *degenerate*: its
  soft metrics are NaN and it is counted, not averaged.

π-Soft metrics (Grad-ELLM; reconstruction in specs/grad_ellm.md §2.7, §5.3): every method gets
keep probabilities with the same mean π over eligible tokens, by proportional water-filling
r = min(1, c·max(a, 0)) with c chosen so that mean r = π
(:func:`~aieg_fast.eval.scores.retention_probs`).
π-Soft-NS(π) keeps with r = W(a, π); π-Soft-NC(π) keeps with 1 − W(a, 1 − π) (the important tokens
are the removed ones). The curves over the π grid plus the analytic endpoints NS(0) = 0,
NS(1) = 1, NC(0) = 1, NC(1) = 0 are integrated by the trapezoid rule (AUC in [0, 1], higher is
better); ``auc_interior`` is the trapezoid over the grid only, divided by its width. Scaling all
scores by c > 0 changes nothing.

Randomness: the uniforms U come from a generator seeded by (seed, instance_id, metric), so
every method evaluated on the same instance sees the same draws (common random numbers).

Controls: :func:`random_attribution` (scores ~ U(0, 1) on attributable tokens, seeded) and
``uniform`` retention (r_i = π for all eligible tokens) in :func:`pi_soft`.

:data:`METRICS` names the metrics of the evaluation tables and which direction is better. The
score transforms live in :mod:`aieg_fast.eval.scores`, the batched forwards in
:mod:`aieg_fast.eval.forwards`, the argument checks in :mod:`aieg_fast.eval.checks`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

import torch
from torch import Tensor

from ..core.model_state import model_prepared
from ..result import Attribution
from .checks import check_pis, check_positive_int, check_topk
from .forwards import last_logits_embeds, last_logits_ids
from .scores import NORMALISATIONS, normalise_scores, retention_probs

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = [
    "DEFAULT_PI_GRID",
    "HARD_METRICS",
    "METRICS",
    "METRIC_SETS",
    "NORMALISATIONS",
    "PROB_SPACES",
    "MetricContext",
    "prepare",
    "top_k_positions",
    "hard_metrics",
    "log_odds",
    "comprehensiveness",
    "sufficiency",
    "normalise_scores",
    "retention_probs",
    "soft_metrics",
    "soft_nc",
    "soft_ns",
    "pi_soft",
    "pi_soft_nc",
    "pi_soft_ns",
    "soft_probs",
    "random_attribution",
    "evaluate_attribution",
    "flat_metrics",
]

#: The π grid of specs/grad_ellm.md §5.3 (0.1, ..., 0.9).
DEFAULT_PI_GRID = tuple(round(0.1 * i, 10) for i in range(1, 10))
PROB_SPACES = ("vocab", "labels")
_DEGENERATE_EPS = 1e-6
#: metric name → which direction is better (the columns of the evaluation tables).
METRICS = {
    "log_odds": "lower",
    "comprehensiveness": "higher",
    "sufficiency": "lower",
    "soft_nc": "higher",
    "soft_ns": "higher",
    "pi_soft_nc_auc": "higher",
    "pi_soft_ns_auc": "higher",
}
#: the hard metrics (DIG), computed at one top-k fraction by :func:`hard_metrics`.
HARD_METRICS = ("log_odds", "comprehensiveness", "sufficiency")
#: ``evaluate(metrics=...)`` choices → the metrics computed: ``"hard"`` skips the soft forwards.
METRIC_SETS = {"all": tuple(METRICS), "hard": HARD_METRICS}


# ============================================================================================
# argument check and seeds
# ============================================================================================
def _check_attribution(attr) -> None:
    if not isinstance(attr, Attribution):
        raise TypeError(f"attr must be an aieg_fast Attribution, got {type(attr).__name__}")
    L = len(attr.token_ids)
    if attr.scores.dim() != 1 or attr.scores.numel() != L:
        raise ValueError(f"attr.scores must have one score per token ({L}), got shape {tuple(attr.scores.shape)}")
    if len(attr.attributable) != L:
        raise ValueError(f"attr.attributable must have {L} entries, got {len(attr.attributable)}")
    if not any(attr.attributable):
        raise ValueError("attr has no attributable position")
    if not isinstance(attr.target, dict) or not isinstance(attr.target.get("id"), int):
        raise ValueError(f"attr.target must hold the target id, got {attr.target!r}")
    if not torch.isfinite(attr.scores.float()).all():
        raise ValueError("attr.scores contains NaN or infinite values")


def _seed_for(seed: int, instance_id, tag: str) -> int:
    h = hashlib.sha256(f"{int(seed)}|{instance_id}|{tag}".encode()).hexdigest()
    return int(h[:15], 16)


# ============================================================================================
# per-instance context
# ============================================================================================
@dataclass
class MetricContext:
    """What every metric of one instance shares: input, target, p(y|x), p(y|x_∅), settings.

    Build it once with :func:`prepare` and pass ``ctx=`` to the metric functions to avoid
    recomputing the reference forwards for each method.
    """

    token_ids: List[int]
    eligible: Tensor  # [L] bool: positions that may be perturbed (attributable)
    target: int
    prob_space: str
    label_ids: Optional[List[int]]
    p: float  # p(y | x)
    p0: float  # p(y | x_∅): eligible token embeddings zeroed
    embeds: Tensor  # [L, d]
    seed: int
    instance_id: object
    batch_size: int

    @property
    def degenerate(self) -> bool:
        """True when the empty input is at least as likely as the full one (soft metrics undefined)."""
        return (self.p - self.p0) < _DEGENERATE_EPS


def _probs(logits: Tensor, target: int, prob_space: str, label_ids: Optional[List[int]]) -> Tensor:
    if prob_space == "vocab":
        return torch.softmax(logits, -1)[:, target]
    sub = logits[:, label_ids]
    return torch.softmax(sub, -1)[:, label_ids.index(target)]


def prepare(
    ex: Explainer,
    attr: Attribution,
    *,
    prob_space: str = "vocab",
    label_ids=None,
    seed: int = 0,
    instance_id=0,
    batch_size: int = 64,
) -> MetricContext:
    """Reference forwards of one instance: p(y|x) and p(y|x_∅) in one batched call.

    Args:
        ex: the explainer whose model produced ``attr``.
        attr: an attribution (its ``token_ids``, ``attributable`` and ``target["id"]`` are used).
        prob_space: ``"vocab"`` (softmax over all outputs, default) or ``"labels"``.
        label_ids: label token ids or single-token strings (class indices for a classifier);
            required with ``prob_space="labels"``; must contain the target.
        seed, instance_id: seed of the common random numbers of the soft metrics.
        batch_size: rows per forward.

    Raises:
        ValueError: bad ``prob_space`` / ``label_ids`` / ``batch_size``, an attribution without
            target or attributable positions, or ``token_ids`` that do not fit the model.
    """
    _check_attribution(attr)
    if prob_space not in PROB_SPACES:
        raise ValueError(f"prob_space must be one of {list(PROB_SPACES)}, got {prob_space!r}")
    batch_size = check_positive_int("batch_size", batch_size)
    target = int(attr.target["id"])
    n_out = ex.adapter.num_labels if ex.adapter.kind == "classifier" else ex.vocab_size
    if not (0 <= target < n_out):
        raise ValueError(f"attr.target id {target} is out of range for this model ({n_out} outputs)")
    if any(not (0 <= int(i) < ex.vocab_size) for i in attr.token_ids):
        raise ValueError("attr.token_ids contains ids outside the model's vocabulary")
    if prob_space == "labels":
        if not label_ids:
            raise ValueError("label_ids must be given (token ids or single-token strings) when prob_space='labels'")
        label_ids = [ex.resolve_target(l)["id"] if isinstance(l, str) else int(l) for l in label_ids]
        if target not in label_ids:
            raise ValueError(f"label_ids {label_ids} must contain the attribution target {target}")
    else:
        label_ids = None
    ids = torch.tensor(attr.token_ids, dtype=torch.long, device=ex.device)
    eligible = torch.tensor(attr.attributable, dtype=torch.bool, device=ex.device)
    with model_prepared(ex.model), torch.no_grad():
        E = ex.adapter.embeddings(ids).detach()
        E0 = torch.where(eligible.unsqueeze(-1), torch.zeros_like(E), E)
        pr = _probs(last_logits_embeds(ex, torch.stack([E, E0]), batch_size), target, prob_space, label_ids)
    return MetricContext(
        token_ids=[int(i) for i in attr.token_ids], eligible=eligible, target=target, prob_space=prob_space,
        label_ids=label_ids, p=float(pr[0]), p0=float(pr[1]), embeds=E, seed=int(seed), instance_id=instance_id,
        batch_size=batch_size,
    )


def _context(ex, attr, ctx, kw) -> MetricContext:
    if ctx is None:
        return prepare(ex, attr, **kw)
    _check_attribution(attr)
    if list(map(int, attr.token_ids)) != ctx.token_ids or int(attr.target["id"]) != ctx.target:
        raise ValueError("ctx was prepared for another input or target than attr")
    if attr.attributable != ctx.eligible.tolist():
        raise ValueError("ctx was prepared with other attributable positions than attr")
    return ctx


# ============================================================================================
# hard metrics (DIG protocol adapted to causal LMs)
# ============================================================================================
def top_k_positions(scores: Tensor, candidates: Tensor, topk: float = 0.20, dig_compat: bool = False) -> Tensor:
    """Indices of the top-k scores among ``candidates`` (bool [L]), largest signed score first.

    k = int(#candidates · topk) (``dig_compat=False``) or int(L · topk) over all positions
    (``dig_compat=True``; then any position may be chosen). Ties go to the lower index.
    """
    topk = check_topk(topk)
    s = scores.detach().float().cpu()
    cand = candidates.detach().cpu().bool() if not dig_compat else torch.ones_like(candidates, dtype=torch.bool, device="cpu")
    k = int(int(cand.sum()) * topk + 1e-9)
    if k == 0:
        return torch.empty(0, dtype=torch.long)
    key = torch.where(cand, -s, torch.full_like(s, math.inf))
    order = torch.sort(key, stable=True).indices  # stable: equal scores keep index order
    return order[:k]


def hard_metrics(
    ex: Explainer,
    attr: Attribution,
    topk: float = 0.20,
    *,
    dig_compat: bool = False,
    ctx: Optional[MetricContext] = None,
    **prepare_kw,
) -> Dict[str, float]:
    """Log-odds, comprehensiveness and sufficiency of ``attr`` in one batched forward.

    See the module documentation for the formulas (DIG metrics.py; specs/aieg.md §5.5, §7).

    Returns:
        ``{"log_odds", "comprehensiveness", "sufficiency", "k", "p", "p_log_odds", "p_comp",
        "p_suff"}``; with k = 0 the three metrics are 0.

    Raises:
        ValueError: ``topk`` outside (0, 1], and everything :func:`prepare` raises.
    """
    topk = check_topk(topk)
    ctx = _context(ex, attr, ctx, prepare_kw)
    top = top_k_positions(attr.scores, ctx.eligible, topk, dig_compat)
    k = int(top.numel())
    if k == 0:
        return {"log_odds": 0.0, "comprehensiveness": 0.0, "sufficiency": 0.0, "k": 0, "p": ctx.p,
                "p_log_odds": ctx.p, "p_comp": ctx.p, "p_suff": ctx.p}
    ids = torch.tensor(ctx.token_ids, dtype=torch.long)
    sel = torch.zeros(len(ids), dtype=torch.bool)
    sel[top] = True
    fixed = ~ctx.eligible.cpu()
    lo_ids = torch.where(sel, torch.full_like(ids, ex.ref_token_id), ids)
    comp_ids = ids[~sel]
    suff_ids = ids[sel | fixed]
    seqs = [lo_ids.tolist(), comp_ids.tolist(), suff_ids.tolist()]
    with model_prepared(ex.model), torch.no_grad():
        pr = _probs(last_logits_ids(ex, seqs, ctx.batch_size), ctx.target, ctx.prob_space, ctx.label_ids).double()
    p = ctx.p
    tiny = 1e-30
    return {
        "log_odds": float(math.log(max(float(pr[0]), tiny)) - math.log(max(p, tiny))),
        "comprehensiveness": float(p - pr[1]),
        "sufficiency": float(p - pr[2]),
        "k": k,
        "p": p,
        "p_log_odds": float(pr[0]),
        "p_comp": float(pr[1]),
        "p_suff": float(pr[2]),
    }


def log_odds(ex: Explainer, attr: Attribution, topk: float = 0.20, **kw) -> float:
    """LO = log p(y | x with top-k ids → reference token) − log p(y | x); lower is better (DIG)."""
    return hard_metrics(ex, attr, topk, **kw)["log_odds"]


def comprehensiveness(ex: Explainer, attr: Attribution, topk: float = 0.20, **kw) -> float:
    """Comp = p(y | x) − p(y | x without its top-k tokens); higher is better (DeYoung et al. 2020, DIG)."""
    return hard_metrics(ex, attr, topk, **kw)["comprehensiveness"]


def sufficiency(ex: Explainer, attr: Attribution, topk: float = 0.20, **kw) -> float:
    """Suff = p(y | x) − p(y | top-k tokens and fixed positions only); lower is better (DeYoung et al. 2020, DIG)."""
    return hard_metrics(ex, attr, topk, **kw)["sufficiency"]


# ============================================================================================
# soft metrics (Zhao & Aletras 2023)
# ============================================================================================
def _uniforms(ctx: MetricContext, tag: str, shape) -> Tensor:
    g = torch.Generator(device="cpu").manual_seed(_seed_for(ctx.seed, ctx.instance_id, tag))
    return torch.rand(shape, generator=g, dtype=torch.float32)


def soft_probs(ex: Explainer, ctx: MetricContext, keep: Tensor, U: Tensor) -> Tensor:
    """p(y | masked input) of the soft metrics, in batched forwards: Tensor[R, K] (float64, CPU).

    Element (i, j) of the token embeddings ``ctx.embeds`` [L, d] is kept when U < keep_i
    (fixed, non-eligible positions are always kept) and zeroed otherwise, without rescaling.

    Args:
        ex: the explainer ``ctx`` was prepared with.
        ctx: the instance (:func:`prepare`).
        keep: keep probabilities Tensor[R, L].
        U: uniforms Tensor[R, K, L, d] (K draws per row).
    """
    R, K, L, d = U.shape
    keep = torch.where(ctx.eligible.cpu(), keep.float(), torch.ones_like(keep, dtype=torch.float32))
    mask = (U < keep.view(R, 1, L, 1)).to(ctx.embeds.dtype).to(ctx.embeds.device)
    X = (ctx.embeds.unsqueeze(0).unsqueeze(0) * mask).view(R * K, L, d)
    with model_prepared(ex.model), torch.no_grad():
        pr = _probs(last_logits_embeds(ex, X, ctx.batch_size), ctx.target, ctx.prob_space, ctx.label_ids)
    return pr.double().cpu().view(R, K)


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
    ctx: Optional[MetricContext] = None,
    **prepare_kw,
) -> Dict[str, float]:
    """Soft-NS and Soft-NC (Zhao & Aletras 2023; specs/grad_ellm.md §5.2) in one batched forward.

    Keep probabilities r^NS = ã, r^NC = 1 − ã (ã from :func:`normalise_scores`), element-wise
    Bernoulli masks of the token embeddings, ``n_samples`` draws averaged. The draws are the
    same for every method on the same (seed, instance_id).

    Returns:
        ``{"soft_ns", "soft_nc", "degenerate"}``; NaN metrics when degenerate.
    """
    n_samples = check_positive_int("n_samples", n_samples)
    ctx = _context(ex, attr, ctx, prepare_kw)
    a = normalise_scores(attr.scores, ctx.eligible, normalise)
    if ctx.degenerate:
        return {"soft_ns": float("nan"), "soft_nc": float("nan"), "degenerate": True}
    L, d = ctx.embeds.shape
    U = _uniforms(ctx, "soft", (1, n_samples, L, d)).expand(2, n_samples, L, d)
    pk = soft_probs(ex, ctx, torch.stack([a, 1.0 - a]), U)
    ns, _ = _ns_nc(ctx, pk[0:1])
    _, nc = _ns_nc(ctx, pk[1:2])
    return {"soft_ns": float(ns[0]), "soft_nc": float(nc[0]), "degenerate": False}


def soft_ns(ex: Explainer, attr: Attribution, **kw) -> float:
    """Soft normalised sufficiency: keep embedding elements with probability ã_i; higher is better."""
    return soft_metrics(ex, attr, **kw)["soft_ns"]


def soft_nc(ex: Explainer, attr: Attribution, **kw) -> float:
    """Soft normalised comprehensiveness: keep embedding elements with probability 1 − ã_i; higher is better."""
    return soft_metrics(ex, attr, **kw)["soft_nc"]


# ============================================================================================
# π-Soft metrics
# ============================================================================================
def _auc(pis: List[float], curve: Tensor, left: float, right: float):
    x = torch.tensor([0.0] + pis + [1.0], dtype=torch.float64)
    y = torch.cat([torch.tensor([left], dtype=torch.float64), curve, torch.tensor([right], dtype=torch.float64)])
    full = float(torch.trapezoid(y, x))
    if len(pis) > 1:
        inner = float(torch.trapezoid(curve, torch.tensor(pis, dtype=torch.float64))) / (pis[-1] - pis[0])
    else:
        inner = float(curve[0])
    return full, inner


def pi_soft(
    ex: Explainer,
    attr: Optional[Attribution],
    *,
    pis: Sequence[float] = DEFAULT_PI_GRID,
    n_samples: int = 10,
    sign: str = "relu",
    uniform: bool = False,
    curves: Sequence[str] = ("nc", "ns"),
    ctx: Optional[MetricContext] = None,
    **prepare_kw,
) -> Dict[str, Dict]:
    """π-Soft-NC and π-Soft-NS curves with their AUC (specs/grad_ellm.md §5.3), one batched pass.

    For each π in ``pis``: NS keeps with r = W(a, π), NC keeps with 1 − W(a, 1 − π)
    (:func:`retention_probs`), ``n_samples`` Bernoulli draws each; the uniforms depend only on
    (seed, instance_id, π index), never on the method. ``uniform=True`` is the control row
    r_i = π (then ``attr`` only supplies the input; its scores are ignored).

    Returns:
        ``{"nc": {"pi", "curve", "auc", "auc_interior"}, "ns": {...}, "degenerate": bool}`` for
        the requested ``curves``; NaN when degenerate.

    Raises:
        ValueError: bad ``pis`` (must be increasing, inside (0, 1)), ``n_samples``, ``curves``.
    """
    pis = check_pis(pis)
    n_samples = check_positive_int("n_samples", n_samples)
    curves = list(curves)
    if not curves or any(c not in ("nc", "ns") for c in curves):
        raise ValueError(f"curves must be a non-empty subset of ('nc', 'ns'), got {curves!r}")
    ctx = _context(ex, attr, ctx, prepare_kw)
    L, d = ctx.embeds.shape
    G = len(pis)
    P = torch.tensor(pis, dtype=torch.float64)
    e = ctx.eligible.cpu()
    out: Dict[str, Dict] = {"degenerate": ctx.degenerate}
    if ctx.degenerate:
        for c in curves:
            out[c] = {"pi": pis, "curve": [float("nan")] * G, "auc": float("nan"), "auc_interior": float("nan")}
        return out
    keeps = []
    for c in curves:
        if uniform:
            keeps.append(P.view(-1, 1).expand(G, L) * e)
        elif c == "ns":
            keeps.append(retention_probs(attr.scores, P, e, sign))
        else:
            keeps.append(1.0 - retention_probs(attr.scores, 1.0 - P, e, sign))
    U = _uniforms(ctx, "pi", (G, n_samples, L, d))
    keep = torch.cat(keeps, 0)  # [len(curves)·G, L]
    Ufull = U.repeat(len(curves), 1, 1, 1)
    pk = soft_probs(ex, ctx, keep, Ufull)
    for j, c in enumerate(curves):
        ns, nc = _ns_nc(ctx, pk[j * G : (j + 1) * G])
        curve = ns if c == "ns" else nc
        left, right = (0.0, 1.0) if c == "ns" else (1.0, 0.0)
        full, inner = _auc(pis, curve, left, right)
        out[c] = {"pi": pis, "curve": curve.tolist(), "auc": full, "auc_interior": inner}
    return out


def pi_soft_nc(ex: Explainer, attr: Attribution, **kw) -> Dict:
    """π-Soft-NC curve (soft deletion of the important tokens at expected retention π) and its AUC."""
    return pi_soft(ex, attr, curves=("nc",), **kw)["nc"]


def pi_soft_ns(ex: Explainer, attr: Attribution, **kw) -> Dict:
    """π-Soft-NS curve (soft insertion of the important tokens at expected retention π) and its AUC."""
    return pi_soft(ex, attr, curves=("ns",), **kw)["ns"]


# ============================================================================================
# controls and one-call evaluation
# ============================================================================================
def random_attribution(attr: Attribution, seed: int = 0, instance_id=0) -> Attribution:
    """A copy of ``attr`` with scores ~ U(0, 1) on attributable positions (0 elsewhere), method "random".

    Seeded by (seed, instance_id), so the control is reproducible and the same for every run.
    """
    _check_attribution(attr)
    g = torch.Generator(device="cpu").manual_seed(_seed_for(seed, instance_id, "random_scores"))
    u = torch.rand(len(attr.token_ids), generator=g, dtype=torch.float32)
    e = torch.tensor(attr.attributable, dtype=torch.bool)
    s = torch.where(e, u, torch.zeros_like(u))
    return dataclasses.replace(attr, scores=s, method="random", options={"seed": int(seed)}, info={}, timing={})


def evaluate_attribution(
    ex: Explainer,
    attr: Attribution,
    *,
    topk: float = 0.20,
    n_samples: int = 10,
    pis: Sequence[float] = DEFAULT_PI_GRID,
    normalise: str = "minmax",
    dig_compat: bool = False,
    ctx: Optional[MetricContext] = None,
    **prepare_kw,
) -> Dict[str, object]:
    """Every metric of this module for one attribution, as a flat JSON-friendly dict.

    Keys: ``log_odds``, ``comprehensiveness``, ``sufficiency``, ``k``, ``soft_nc``, ``soft_ns``,
    ``pi_soft_nc_auc``, ``pi_soft_ns_auc``, ``pi_soft_nc_auc_interior``,
    ``pi_soft_ns_auc_interior``, ``pi_soft_nc_curve``, ``pi_soft_ns_curve``, ``degenerate``.
    """
    ctx = _context(ex, attr, ctx, prepare_kw)
    h = hard_metrics(ex, attr, topk, dig_compat=dig_compat, ctx=ctx)
    s = soft_metrics(ex, attr, n_samples=n_samples, normalise=normalise, ctx=ctx)
    ps = pi_soft(ex, attr, pis=pis, n_samples=n_samples, ctx=ctx)
    return flat_metrics(h, s, ps)


def flat_metrics(h: Optional[Dict], s: Optional[Dict], ps: Dict) -> Dict[str, object]:
    """One flat dict of the results of :func:`hard_metrics` (``h``), :func:`soft_metrics` (``s``)
    and :func:`pi_soft` (``ps``); ``h`` or ``s`` may be None (left out). Keys as in
    :func:`evaluate_attribution` (the curves of the ``ps`` curves present, ``degenerate`` always)."""
    out: Dict[str, object] = {}
    if h is not None:
        out.update({k: h[k] for k in ("log_odds", "comprehensiveness", "sufficiency", "k")})
    if s is not None:
        out.update({"soft_nc": s["soft_nc"], "soft_ns": s["soft_ns"]})
    for c in ("nc", "ns"):
        if c in ps:
            out[f"pi_soft_{c}_auc"] = ps[c]["auc"]
            out[f"pi_soft_{c}_auc_interior"] = ps[c]["auc_interior"]
            out[f"pi_soft_{c}_curve"] = ps[c]["curve"]
    out["degenerate"] = bool(ps["degenerate"])
    return out
