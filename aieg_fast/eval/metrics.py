"""Faithfulness metrics for token attributions of decoder-only LLMs (and classification heads).

Every metric takes an :class:`~aieg_fast.explainer.Explainer` and an
:class:`~aieg_fast.result.Attribution` (its ``token_ids``, ``scores``, ``attributable`` and
``target["id"]``), perturbs the input guided by the scores and compares the probability of the
target before and after. All perturbed inputs of one call go through the model as batched
forwards (right padding, explicit position ids, so GPT-2's learned positions are those of an
unpadded sequence); there are no per-token Python loops.

Probability p(y | x): for a causal LM, the softmax over the full vocabulary of the next-token
logits at the last position, read at the target token y (``prob_space="vocab"``), or the
softmax restricted to ``label_ids`` such as the ids of " negative" / " positive"
(``prob_space="labels"``, the "verbalizer" option of specs/aieg.md §7). The default
``prob_space=None`` is ``"labels"`` when ``label_ids`` are given (a label task, the
``label_set`` an attribution with ``target_fn="label_logprob"`` explained, or the target and
contrast of a contrast attribution, whose z_target − z_contrast is the log of p(target) over
those two) and ``"vocab"`` otherwise. For a classification head, the softmax over the classes (``"labels"`` then
restricts to a subset of classes).

Hard metrics (DIG, Sanyal & Ren 2021; adapted to causal LMs in specs/aieg.md §5, §7). The
top-k positions are the k largest *signed* scores among the attributable positions
(:func:`~aieg_fast.eval.scores.top_k_positions`); k = ⌊|P|·topk⌋ with P the attributable
positions (``dig_compat=False``, default: the template and BOS are never removed) or
k = ⌊L·topk⌋ chosen among all L positions (``dig_compat=True``, DIG's own rule: a fixed position
whose score ranks in the top k is replaced by log-odds and removed by comprehensiveness too);
the floor allows 1e-9 for float rounding (100 × 0.29 gives 29). Sufficiency keeps the fixed
positions (template, BOS) in both modes, where DIG keeps the top k alone (deviation from
specs/aieg.md §7: DIG's encoder inputs had no prompt, and a causal LM shown the top-k tokens
without its prompt is no longer asked the question). Equal scores are ordered at random
(``ties="random"``, default) by a generator seeded with ``ctx.tie_seed``,
derived from (seed, instance_id) and returned as ``tie_seed``, so a tie at the k-th place does
not favour early positions and the choice is reproducible; ``ties="first"`` takes the lower
index (the rule before). With k = 0 every hard metric is 0.

* :func:`log_odds`          LO   = log p(y | x') − log p(y | x), x' = top-k ids replaced in place
  by the reference token (the IG baseline token ``ex.ref_token_id``). Lower is better. A
  probability below 1e-30 counts as 1e-30.
* :func:`comprehensiveness` Comp = p(y | x) − p(y | x without the top-k tokens). Higher is better.
* :func:`sufficiency`       Suff = p(y | x) − p(y | top-k tokens + fixed positions only). Lower is
  better. Deleting tokens shortens the sequence; positions are re-indexed 0..L'−1.

Soft metrics: the Soft-NC / Soft-NS of Zhao & Aletras (ACL 2023, "Incorporating attribution
importance for improving faithfulness metrics"; decoder-only adaptation in specs/grad_ellm.md
§2.6, §5.2), i.e. *random Bernoulli masking* of the embeddings. Each element (i, j) of the token
embedding matrix is kept with probability r_i (U[i, j] < r_i) and zeroed otherwise, with no
rescaling; fixed positions are always kept; the score is the target probability. Metrics of the
same name elsewhere differ: ReAGent compares the whole next-token distribution (a Hellinger
distance), and some toolkits delete the top-k tokens outright (hard masking) and score the change
of the output distribution by KL divergence — a hard-deletion metric with a distribution score,
not this one. With x_∅ the input whose eligible embeddings are all zero:

* S(x, x') = 1 − max(0, p(y|x) − p(y|x')), C(x, x') = max(0, p(y|x) − p(y|x')), S₀ = S(x, x_∅);
* Soft-NS = clip((mean_k S_k − S₀) / (1 − S₀), 0, 1) with keep probabilities r = ã;
* Soft-NC = clip(mean_k C_k / (1 − S₀), 0, 1) with keep probabilities r = 1 − ã;
* ã = the soft-mapped scores normalised to [0, 1] over eligible tokens
  (:func:`~aieg_fast.eval.scores.normalise_scores`; default: ``soft_map="relu"``, then min-max).
  Higher is better for both.
* An instance with 1 − S₀ < 1e-6 (the empty input is at least as likely) is *degenerate*: its
  soft metrics are NaN and it is counted, not averaged.

Soft maps (``soft_map=`` of :func:`soft_metrics` and :func:`pi_soft`;
:func:`~aieg_fast.eval.scores.map_scores`) turn signed scores into importances:

* ``"relu"`` (default; the only map before it was an option): negative scores clipped to 0.
  Rewards methods whose *positive* scores single out the tokens the prediction rests on.
  Adding a constant to all scores changes the metric although the ranking and the top-k do not
  (min-max(IG) has IG's top-k, yet a different π-Soft-NC AUC).
* ``"minmax"``: (a − min a) / (max a − min a) of the signed scores, as SoftFaith does.
  Unchanged by adding a constant or multiplying by c > 0: rewards the ordering and the relative
  gaps of all scores, the most negative token counting as the least important.
* ``"abs"``: |a|: rewards magnitude whatever the sign.

:func:`~aieg_fast.eval.runner.evaluate` reports ``"relu"`` and ``"minmax"``
(:data:`DEFAULT_SOFT_MAPS`; the columns of a map other than ``"relu"`` end in ``_<map>``,
:func:`soft_key`).

π-Soft metrics (Grad-ELLM; reconstruction in specs/grad_ellm.md §2.7, §5.3): every method gets
keep probabilities with the same mean π over eligible tokens, by proportional water-filling
r = min(1, c·m) of the soft-mapped scores m, with c chosen so that mean r = π
(:func:`~aieg_fast.eval.scores.retention_probs`).
π-Soft-NS(π) keeps with r = W(a, π); π-Soft-NC(π) keeps with 1 − W(a, 1 − π) (the important tokens
are the removed ones). The curves over the π grid plus the analytic endpoints NS(0) = 0,
NS(1) = 1, NC(0) = 1, NC(1) = 0 are integrated by the trapezoid rule (AUC in [0, 1], higher is
better); ``auc_interior`` is the trapezoid over the grid only, divided by its width. Scaling all
scores by c > 0 changes nothing.

Randomness: the uniforms U come from a generator seeded by (seed, instance_id, metric), so
every method and soft map evaluated on the same instance sees the same draws (common random
numbers).

Controls: :func:`random_attribution` (scores ~ U(0, 1) on attributable tokens, seeded) and
``uniform`` retention (r_i = π for all eligible tokens) in :func:`pi_soft`.

:data:`METRICS` names the metrics of the evaluation tables and which direction is better. The
score transforms live in :mod:`aieg_fast.eval.scores`, the batched forwards in
:mod:`aieg_fast.eval.forwards`, the argument checks in :mod:`aieg_fast.eval.checks`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

import torch

from ..core.model_state import model_prepared
from ..core.validation import as_int, check_bool, check_choice
from ..result import Attribution
from .checks import check_choices, check_pis, check_positive_int, check_seed, check_topk
from .context import PROB_SPACES, MetricContext, check_attribution, check_keywords, context_for, prepare, seed_for, target_probs
from .forwards import last_logits_ids
from .scores import (
    NORMALISATIONS,
    SOFT_MAPS,
    TIE_RULES,
    map_scores,
    normalise_scores,
    retention_probs,
    top_k_positions,
)
from .soft import DEFAULT_PI_GRID, pi_soft, pi_soft_nc, pi_soft_ns, soft_metrics, soft_nc, soft_ns, soft_probs

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = [
    "CONTROLS",
    "score_attribution",
    "control_attribution",
    "recency_attribution",
    "DEFAULT_PI_GRID",
    "DEFAULT_SOFT_MAPS",
    "HARD_METRICS",
    "METRICS",
    "METRIC_SETS",
    "NORMALISATIONS",
    "PROB_SPACES",
    "SOFT_MAPS",
    "SOFT_METRICS",
    "TIE_RULES",
    "MetricContext",
    "prepare",
    "top_k_positions",
    "hard_metrics",
    "log_odds",
    "comprehensiveness",
    "sufficiency",
    "map_scores",
    "normalise_scores",
    "retention_probs",
    "soft_metrics",
    "soft_nc",
    "soft_ns",
    "pi_soft",
    "pi_soft_nc",
    "pi_soft_ns",
    "soft_probs",
    "soft_key",
    "metric_base",
    "run_metric_names",
    "random_attribution",
    "evaluate_attribution",
    "flat_metrics",
]

#: the soft maps :func:`evaluate_attribution` and ``evaluate`` report: today's clipped map and
#: the offset-invariant min-max of the signed scores.
DEFAULT_SOFT_MAPS = ("relu", "minmax")
#: the soft metrics of the evaluation tables, under the ``"relu"`` map (other maps: :func:`soft_key`).
SOFT_METRICS = ("soft_nc", "soft_ns", "pi_soft_nc_auc", "pi_soft_ns_auc")


def soft_key(key: str, soft_map: str) -> str:
    """The record / column name of the soft metric ``key`` (e.g. ``"soft_nc"``,
    ``"pi_soft_nc_curve"``) under ``soft_map``: ``key`` for ``"relu"``, ``key + "_" + soft_map``
    otherwise (``"soft_nc_minmax"``)."""
    return key if soft_map == "relu" else f"{key}_{soft_map}"


#: metric name → which direction is better (the columns of the evaluation tables): the hard
#: metrics, then the soft metrics of each soft map.
METRICS = {
    "log_odds": "lower",
    "comprehensiveness": "higher",
    "sufficiency": "lower",
    **{soft_key(k, m): "higher" for m in SOFT_MAPS for k in SOFT_METRICS},
}
#: the hard metrics (DIG), computed at one top-k fraction by :func:`hard_metrics`.
HARD_METRICS = ("log_odds", "comprehensiveness", "sufficiency")
#: ``evaluate(metrics=...)`` choices → the metrics computed (``"all"``: the soft ones of the run's
#: soft maps only); ``"hard"`` skips the soft forwards.
METRIC_SETS = {"all": tuple(METRICS), "hard": HARD_METRICS}
_BASE = {soft_key(k, m): k for m in SOFT_MAPS for k in SOFT_METRICS}


def run_metric_names(metrics: str, soft_maps: Sequence[str]) -> List[str]:
    """The metric columns of a run's summary: the hard metrics, then with ``metrics="all"`` the
    soft ones of each of the run's ``soft_maps`` (``evaluate(metrics=..., soft_maps=...)``)."""
    return list(HARD_METRICS) + ([soft_key(k, m) for m in soft_maps for k in SOFT_METRICS] if metrics == "all" else [])


def metric_base(name: str) -> str:
    """``name`` without its soft-map suffix (``"pi_soft_nc_auc_minmax"`` → ``"pi_soft_nc_auc"``)."""
    return _BASE.get(name, name)


# ============================================================================================
# hard metrics (DIG protocol adapted to causal LMs)
# ============================================================================================
def hard_metrics(
    ex: Explainer,
    attr: Attribution,
    topk: float = 0.20,
    *,
    dig_compat: bool = False,
    ties: str = "random",
    ctx: Optional[MetricContext] = None,
    **prepare_kw,
) -> Dict[str, float]:
    """Log-odds, comprehensiveness and sufficiency of ``attr`` in one batched forward.

    See the module documentation for the formulas (DIG metrics.py; specs/aieg.md §5.5, §7). The
    top-k are :func:`~aieg_fast.eval.scores.top_k_positions` with ``ties`` (``"random"``,
    default: equal scores in an order drawn with ``ctx.tie_seed``; ``"first"``: lower index).

    Returns:
        ``{"log_odds", "comprehensiveness", "sufficiency", "k", "p", "p_log_odds", "p_comp",
        "p_suff", "tie_seed"}`` (probabilities in [0, 1]; ``tie_seed`` None with
        ``ties="first"``); with k = 0 the three metrics are 0. Comprehensiveness and ``p_comp``
        are NaN when removing the top k leaves no token at all (a model without BOS, the top k
        every token of a text without a template): an empty input has no next-token
        distribution (the summaries leave NaN out and count the rest).

    Raises:
        ValueError: ``topk`` outside (0, 1], unknown ``ties``, ``dig_compat`` not a bool (before
            any forward), and everything :func:`prepare` raises. TypeError: a keyword that
            neither this function nor :func:`prepare` takes (names ``hard_metrics``).
    """
    check_keywords("hard_metrics", prepare_kw, hard_metrics, prepare)
    topk = check_topk(topk)
    check_bool("dig_compat", dig_compat)
    check_choice("ties", ties, TIE_RULES)
    ctx = context_for(ex, attr, ctx, prepare_kw)
    top = top_k_positions(attr.scores, ctx.eligible, topk, dig_compat, ties=ties, tie_seed=ctx.tie_seed)
    k = int(top.numel())
    tie_seed = ctx.tie_seed if ties == "random" else None
    if k == 0:
        return {"log_odds": 0.0, "comprehensiveness": 0.0, "sufficiency": 0.0, "k": 0, "p": ctx.p,
                "p_log_odds": ctx.p, "p_comp": ctx.p, "p_suff": ctx.p, "tie_seed": tie_seed}
    ids = torch.tensor(ctx.token_ids, dtype=torch.long)
    sel = torch.zeros(len(ids), dtype=torch.bool)
    sel[top] = True
    fixed = ~ctx.eligible.cpu()
    lo_ids = torch.where(sel, torch.full_like(ids, ex.ref_token_id), ids)
    comp_ids = ids[~sel]
    suff_ids = ids[sel | fixed]
    seqs = [lo_ids.tolist(), comp_ids.tolist(), suff_ids.tolist()]
    empty = not seqs[1]  # every token removed (no BOS or template): nothing for the model to read
    with model_prepared(ex.model), torch.no_grad():
        pr = target_probs(last_logits_ids(ex, [q for q in seqs if q], ctx.batch_size), ctx.target, ctx.prob_space,
                          ctx.label_ids).double().tolist()
    if empty:
        pr.insert(1, math.nan)
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
        "tie_seed": tie_seed,
    }


def log_odds(ex: Explainer, attr: Attribution, topk: float = 0.20, **kw) -> float:
    """Log-odds: LO = log p(y | x') − log p(y | x), x' = x with its top-k ids replaced in place by
    the reference token (``ex.ref_token_id``); lower is better (DIG, Sanyal & Ren 2021).

    Args: ``attr`` a next-token result (``scores`` Tensor[L]; a generation step through
    :func:`~aieg_fast.eval.context.step_attribution`); ``topk`` and ``**kw`` as :func:`hard_metrics`
    takes them (with :func:`prepare`'s keywords). Raises: as :func:`hard_metrics`, an unknown
    keyword naming this function.

    Returns:
        LO in nats (a difference of natural logarithms of probabilities; ≤ 0 when the
        replacement lowers p(y)); 0 when k = 0. The probabilities are the model's softmax in
        its own precision (float32 for a float32 model), and one below 1e-30 counts as 1e-30:
        LO lies within about ±69 nats, and is 0 when both are below (a far likelier output
        makes p(y) that small). Such a value is a bound, not a log-ratio: read ``p`` and
        ``p_log_odds`` of :func:`hard_metrics`.

    Source: specs/aieg.md §5.5 (DIG's metric), §7 (adapted to causal LMs).
    """
    check_keywords("log_odds", kw, hard_metrics, prepare)
    return hard_metrics(ex, attr, topk, **kw)["log_odds"]


def comprehensiveness(ex: Explainer, attr: Attribution, topk: float = 0.20, **kw) -> float:
    """Comprehensiveness: Comp = p(y | x) − p(y | x without its top-k tokens); higher is better
    (DeYoung et al. 2020, DIG).

    Args: ``attr`` a next-token result (``scores`` Tensor[L]; a generation step through
    :func:`~aieg_fast.eval.context.step_attribution`); ``topk`` and ``**kw`` as :func:`hard_metrics`
    takes them (with :func:`prepare`'s keywords). Raises: as :func:`hard_metrics`, an unknown
    keyword naming this function.

    Returns:
        Comp, a difference of probabilities, in [-1, 1]; 0 when k = 0; NaN when removing the top
        k leaves no token (see :func:`hard_metrics`).

    Source: specs/aieg.md §5.5 (DIG's metric), §7 (adapted to causal LMs).
    """
    check_keywords("comprehensiveness", kw, hard_metrics, prepare)
    return hard_metrics(ex, attr, topk, **kw)["comprehensiveness"]


def sufficiency(ex: Explainer, attr: Attribution, topk: float = 0.20, **kw) -> float:
    """Sufficiency: Suff = p(y | x) − p(y | the top-k tokens and the fixed positions only, in
    order); lower is better (DeYoung et al. 2020, DIG).

    Args: ``attr`` a next-token result (``scores`` Tensor[L]; a generation step through
    :func:`~aieg_fast.eval.context.step_attribution`); ``topk`` and ``**kw`` as :func:`hard_metrics`
    takes them (with :func:`prepare`'s keywords). Raises: as :func:`hard_metrics`, an unknown
    keyword naming this function.

    Returns:
        Suff, a difference of probabilities, in [-1, 1]; 0 when k = 0.

    Source: specs/aieg.md §5.5 (DIG's metric), §7 (adapted to causal LMs; the fixed positions
    are kept, a deviation the module documentation explains).
    """
    check_keywords("sufficiency", kw, hard_metrics, prepare)
    return hard_metrics(ex, attr, topk, **kw)["sufficiency"]


# ============================================================================================
# controls and one-call evaluation
# ============================================================================================
#: methods that are controls (:func:`control_attribution`), not attribution methods
CONTROLS = ("random", "recency")


def random_attribution(attr: Attribution, seed: int = 0, instance_id=0) -> Attribution:
    """A copy of ``attr`` with scores ~ U(0, 1) on attributable positions (0 elsewhere), method "random".

    Seeded by (seed, instance_id), so the control is reproducible and the same for every run.
    Only the tokens, target, positions and what was explained are kept: the method's other
    options, diagnostics, findings (``degenerate``) and backend are not the control's.

    Args:
        attr: a next-token :class:`~aieg_fast.result.Attribution` (``attr.scores`` Tensor[L]);
            for a generation result, one step of it: :func:`~aieg_fast.eval.context.step_attribution`.
        seed: an int >= 0. instance_id: any value with a stable ``str`` (the example's id).

    Returns:
        The control: an :class:`~aieg_fast.result.Attribution` with ``scores`` Tensor[L] (float32,
        unitless, in [0, 1)), ``method="random"``, ``options`` ``{"seed": seed}`` and what
        ``attr`` explained (its ``target_fn`` and label set: the control is scored in the same
        probability space).

    Raises:
        ValueError: ``seed`` not an int >= 0 (as :func:`prepare`). TypeError / ValueError: what
            :func:`~aieg_fast.eval.context.check_attribution` raises (not an Attribution, scores
            not Tensor[L] or not finite, no attributable position, no target id).

    Source: the random baseline of specs/aieg.md §7 and specs/grad_ellm.md §5.3 (ReAGent style).
    """
    seed = check_seed(seed)
    check_attribution(attr)
    g = torch.Generator(device="cpu").manual_seed(seed_for(seed, instance_id, "random_scores"))
    u = torch.rand(len(attr.token_ids), generator=g, dtype=torch.float32)
    e = torch.tensor(attr.attributable, dtype=torch.bool)
    s = torch.where(e, u, torch.zeros_like(u))
    return dataclasses.replace(attr, scores=s, method="random", options={**_explained(attr), "seed": int(seed)}, info={}, timing={},
                               degenerate=[], backend={})


def _explained(attr: Attribution) -> dict:
    """The options of ``attr`` that say what it explained (``target_fn`` and its label set), which
    :func:`prepare` reads to score a control in the same probability space as ``attr``."""
    return {k: v for k, v in (attr.options or {}).items() if k in ("target_fn", "label_set", "label_ids")}


def recency_attribution(attr: Attribution) -> Attribution:
    """A copy of ``attr`` whose scores rise with the position on attributable positions (the
    i-th attributable token scores i / n; 0 elsewhere), method "recency": a content-free control
    whose top k are the k attributable tokens nearest the prediction.

    Why: on generated text, replacing or deleting the tokens just before y_t moves p(y_t)
    whatever they say, so the hard metrics reward recent top tokens (RESULTS_faithfulness.md
    §5.3: this control beat every method there). Compare a method with it before reading a hard
    metric as faithfulness.

    Args:
        attr: a next-token :class:`~aieg_fast.result.Attribution` (``attr.scores`` Tensor[L]);
            for a generation result, one step of it: :func:`~aieg_fast.eval.context.step_attribution`.

    Returns:
        The control: an :class:`~aieg_fast.result.Attribution` with ``scores`` Tensor[L] (float32,
        unitless, in (0, 1] on attributable positions), ``method="recency"``, of the options only
        what ``attr`` explained (its ``target_fn`` and label set, as :func:`random_attribution`).

    Raises:
        TypeError / ValueError: what :func:`~aieg_fast.eval.context.check_attribution` raises
            (not an Attribution, scores not Tensor[L] or not finite, no attributable position,
            no target id).
    """
    check_attribution(attr)
    e = torch.tensor(attr.attributable, dtype=torch.bool)
    rank = torch.cumsum(e.to(torch.float32), 0) / max(1, int(e.sum()))
    s = torch.where(e, rank, torch.zeros_like(rank))
    return dataclasses.replace(attr, scores=s, method="recency", options=_explained(attr), info={}, timing={}, degenerate=[],
                               backend={})


def control_attribution(name: str, attr: Attribution, seed: int = 0, instance_id=0) -> Attribution:
    """The control ``name`` of :data:`CONTROLS` on ``attr``'s input and target
    (:func:`random_attribution` or :func:`recency_attribution`). Raises ValueError for another
    name, or a ``seed`` that is not an int >= 0 (for either control: a run passes its seed to both)."""
    seed = check_seed(seed)
    if name == "random":
        return random_attribution(attr, seed, instance_id)
    if name == "recency":
        return recency_attribution(attr)
    raise ValueError(f"control must be one of {list(CONTROLS)}, got {name!r}")


def evaluate_attribution(
    ex: Explainer,
    attr: Attribution,
    *,
    topk: float = 0.20,
    n_samples: int = 10,
    pis: Sequence[float] = DEFAULT_PI_GRID,
    normalise: str = "minmax",
    soft_maps: Sequence[str] = DEFAULT_SOFT_MAPS,
    dig_compat: bool = False,
    ties: str = "random",
    ctx: Optional[MetricContext] = None,
    **prepare_kw,
) -> Dict[str, object]:
    """Every metric of this module for one attribution, as a flat JSON-friendly dict.

    Keys: ``log_odds``, ``comprehensiveness``, ``sufficiency``, ``k``, ``degenerate``, and for
    each soft map of ``soft_maps`` (default ``("relu", "minmax")``) the keys ``soft_nc``,
    ``soft_ns``, ``pi_soft_nc_auc``, ``pi_soft_ns_auc``, ``pi_soft_nc_auc_interior``,
    ``pi_soft_ns_auc_interior``, ``pi_soft_nc_curve``, ``pi_soft_ns_curve``, named by
    :func:`soft_key` (``"relu"``: as is; others suffixed, e.g. ``soft_nc_minmax``).

    Raises:
        ValueError: bad ``soft_maps``, ``ties``, ``topk``, ``n_samples``, ``pis`` or
            ``normalise``, ``dig_compat`` not a bool (all before any forward), and everything the
            metric functions raise. TypeError: a keyword that neither this function nor
            :func:`prepare` takes (names ``evaluate_attribution``).
    """
    check_keywords("evaluate_attribution", prepare_kw, evaluate_attribution, prepare)
    soft_maps = check_choices("soft_maps", soft_maps, SOFT_MAPS)
    check_bool("dig_compat", dig_compat)
    check_choice("ties", ties, TIE_RULES)
    topk = check_topk(topk)
    n_samples = check_positive_int("n_samples", as_int(n_samples))
    pis = check_pis(pis)
    check_choice("normalise", normalise, NORMALISATIONS)
    ctx = context_for(ex, attr, ctx, prepare_kw)
    h = hard_metrics(ex, attr, topk, dig_compat=dig_compat, ties=ties, ctx=ctx)
    out = flat_metrics(h, None, {"degenerate": ctx.degenerate})
    for m in soft_maps:
        s = soft_metrics(ex, attr, n_samples=n_samples, normalise=normalise, soft_map=m, ctx=ctx)
        ps = pi_soft(ex, attr, pis=pis, n_samples=n_samples, soft_map=m, ctx=ctx)
        out.update(flat_metrics(None, s, ps, soft_map=m))
    return out


def score_attribution(ex: Explainer, s, a: Attribution, ctx: MetricContext) -> Dict[str, object]:
    """The metrics of one attribution in a run over many examples (hard only, or all, under the
    run's settings ``s``), with its top-k sweep; used by :func:`aieg_fast.eval.evaluate` and
    :func:`aieg_fast.eval.evaluate_generation` for each method (and step).

    Scores that are not all finite (a method's NaN on this input, e.g. integrated gradients from
    a zero baseline on a model whose zero embedding overflows) score nothing: every metric is
    NaN, ``non_finite`` is True, and the summaries leave them out as they do a degenerate
    instance, so one method's NaN neither stops the run nor moves its other numbers.

    Args:
        ex: the explainer. s: the run's settings (any object with ``hard_only``, ``topk``,
            ``ties``, ``n_samples``, ``pis``, ``normalise``, ``soft_maps``, ``topk_sweep``:
            :class:`aieg_fast.eval.runner.RunSettings`).
        a: a next-token :class:`~aieg_fast.result.Attribution` (scores Tensor[L]).
        ctx: the input's :class:`~aieg_fast.eval.context.MetricContext` (:func:`prepare`).

    Returns:
        The flat dict of :func:`flat_metrics` (probabilities and metrics without unit, in
        [0, 1] except log-odds), with ``topk_sweep`` when asked, and ``non_finite`` when True.

    Raises:
        ValueError: ``ctx`` prepared for another input than ``a`` (and what the metrics raise).
    """
    hard = (*HARD_METRICS, "k")  # a fixed key order: record lines are the same bytes in every process
    if not bool(torch.isfinite(a.scores.float()).all()):
        r = _nan_metrics(s, ctx.degenerate)
        if s.topk_sweep:
            r["topk_sweep"] = {f"{k:g}": {key: math.nan for key in hard} for k in s.topk_sweep}
        return r
    if s.hard_only:
        r = flat_metrics(hard_metrics(ex, a, s.topk, ties=s.ties, ctx=ctx), None, {"degenerate": ctx.degenerate})
    else:
        r = evaluate_attribution(ex, a, topk=s.topk, n_samples=s.n_samples, pis=s.pis, normalise=s.normalise,
                                 soft_maps=s.soft_maps, ties=s.ties, ctx=ctx)
    if s.topk_sweep:
        r["topk_sweep"] = {
            f"{k:g}": {key: h[key] for key in hard}
            for k in s.topk_sweep
            for h in [{key: r[key] for key in hard} if k == s.topk else hard_metrics(ex, a, k, ties=s.ties, ctx=ctx)]
        }
    return r


def _nan_metrics(s, degenerate: bool) -> Dict[str, object]:
    """The keys :func:`score_attribution` gives under the settings ``s``, every metric NaN, and
    ``non_finite`` True."""
    nan = math.nan
    out = flat_metrics(dict.fromkeys((*HARD_METRICS, "k"), nan), None, {"degenerate": degenerate})
    if not s.hard_only:
        curve = {"auc": nan, "auc_interior": nan, "curve": [nan] * len(s.pis)}
        for m in s.soft_maps:
            out.update(flat_metrics(None, {"soft_nc": nan, "soft_ns": nan}, {"nc": curve, "ns": curve, "degenerate": degenerate},
                                    soft_map=m))
    out["non_finite"] = True
    return out


def flat_metrics(h: Optional[Dict], s: Optional[Dict], ps: Dict, soft_map: str = "relu") -> Dict[str, object]:
    """One flat dict of the results of :func:`hard_metrics` (``h``), :func:`soft_metrics` (``s``)
    and :func:`pi_soft` (``ps``) computed with ``soft_map``; ``h`` or ``s`` may be None (left
    out). Keys as in :func:`evaluate_attribution` (the soft keys named by :func:`soft_key`, the
    curves of the ``ps`` curves present, ``degenerate`` always)."""
    out: Dict[str, object] = {}
    if h is not None:
        out.update({k: h[k] for k in ("log_odds", "comprehensiveness", "sufficiency", "k")})
    if s is not None:
        out.update({soft_key("soft_nc", soft_map): s["soft_nc"], soft_key("soft_ns", soft_map): s["soft_ns"]})
    for c in ("nc", "ns"):
        if c in ps:
            out[soft_key(f"pi_soft_{c}_auc", soft_map)] = ps[c]["auc"]
            out[soft_key(f"pi_soft_{c}_auc_interior", soft_map)] = ps[c]["auc_interior"]
            out[soft_key(f"pi_soft_{c}_curve", soft_map)] = ps[c]["curve"]
    out["degenerate"] = bool(ps["degenerate"])
    return out
