"""Score transforms of the metrics: soft maps, normalisation to [0, 1], retention, top-k.

* :func:`map_scores` — the *soft map* that turns signed scores into non-negative importances
  before the soft metrics: ``"relu"`` (negatives clipped to 0), ``"abs"`` (|a|) or ``"minmax"``
  (min-max of the signed scores, as SoftFaith does; unchanged when a constant is added);
* :func:`normalise_scores` — ã of Soft-NC / Soft-NS (Zhao & Aletras 2023; specs/grad_ellm.md §5.2);
* :func:`retention_probs` — the water-filling W(a, π) of the π-Soft metrics (specs/grad_ellm.md §5.3);
* :func:`top_k_positions` — the top-k positions of the hard metrics, ties broken at random with
  a given seed (or towards the lower index).

All are pure functions of the scores (no model), used by :mod:`aieg_fast.eval.metrics`.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from ..core.validation import as_int
from .checks import check_topk

__all__ = ["NORMALISATIONS", "SOFT_MAPS", "TIE_RULES", "map_scores", "normalise_scores", "retention_probs",
           "top_k_positions"]

NORMALISATIONS = ("minmax", "max", "sigmoid", "l1")
#: soft maps (signed scores → non-negative importances); ``"relu"`` is the default of the metric
#: functions (the only map before it became an option).
SOFT_MAPS = ("relu", "minmax", "abs")
#: tie rules of :func:`top_k_positions`.
TIE_RULES = ("random", "first")


def map_scores(scores: Tensor, eligible: Tensor, soft_map: str = "relu") -> Tensor:
    """Signed scores mapped to non-negative importances on eligible positions (0 elsewhere).

    * ``"relu"``: max(a, 0). Negative scores count as "not important", like zero scores; adding a
      constant to all scores changes which tokens are clipped, so the soft metrics change although
      the ranking does not. Rewards methods whose positive scores pick the tokens the prediction
      depends on and whose sign is meaningful (negative = evidence against the target).
    * ``"abs"``: |a|. Strongly negative tokens count as important as strongly positive ones.
    * ``"minmax"``: (a − min a) / (max a − min a) over eligible tokens, 0.5 everywhere for a
      constant vector (SoftFaith's min-max of the signed scores). Unchanged when a constant is
      added to all scores or all are multiplied by c > 0, so it depends on the ordering and the
      relative gaps only; the most negative token becomes the least important.

    Args:
        scores: Tensor[L] of signed scores (any unit). eligible: bool Tensor[L].
        soft_map: one of :data:`SOFT_MAPS`.

    Returns:
        Tensor[L], float64, CPU.

    Raises:
        ValueError: unknown ``soft_map``, or ``eligible`` selects no position.
    """
    if soft_map not in SOFT_MAPS:
        raise ValueError(f"soft_map must be one of {list(SOFT_MAPS)}, got {soft_map!r}")
    a = scores.detach().double().cpu()
    e = eligible.detach().cpu().bool()
    if not bool(e.any()):
        raise ValueError("eligible selects no position")
    if soft_map == "relu":
        m = a.clamp_min(0)
    elif soft_map == "abs":
        m = a.abs()
    else:
        lo, hi = a[e].min(), a[e].max()
        m = (a - lo) / (hi - lo) if hi > lo else torch.full_like(a, 0.5)
    return torch.where(e, m.clamp_min(0), torch.zeros_like(m))


def normalise_scores(scores: Tensor, eligible: Tensor, method: str = "minmax", soft_map: str = "relu") -> Tensor:
    """Scores mapped to [0, 1] on eligible positions (0 elsewhere), for Soft-NC / Soft-NS.

    First the soft map m = :func:`map_scores` (``"relu"``: max(a, 0), default; ``"abs"``: |a|;
    ``"minmax"``: min-max of the signed scores), then ``method``:

    * ``"minmax"`` (default, specs/grad_ellm.md §5.2): (m − min m) / (max m − min m) over eligible
      tokens; a constant vector gives 0.5 everywhere. With ``soft_map="minmax"`` this is the
      min-max of the signed scores.
    * ``"max"``: m / max m; all m = 0 gives 0.5 everywhere.
    * ``"sigmoid"``: σ(a) of the signed scores (SoftFaith option 1); the soft map is not applied.
    * ``"l1"``: m / Σ m (ReAGent).

    Raises:
        ValueError: unknown ``method`` (named ``normalise``) or ``soft_map``.
    """
    if method not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {list(NORMALISATIONS)}, got {method!r}")
    r = map_scores(scores, eligible, soft_map)
    a = scores.detach().double().cpu()
    e = eligible.detach().cpu().bool()
    if method == "sigmoid":
        out = torch.sigmoid(a)
    else:
        if method == "minmax":
            lo, hi = r[e].min(), r[e].max()
            out = (r - lo) / (hi - lo) if hi > lo else torch.full_like(r, 0.5)
        elif method == "max":
            hi = r[e].max()
            out = r / hi if hi > 0 else torch.full_like(r, 0.5)
        else:
            tot = r[e].sum()
            out = r / tot if tot > 0 else torch.full_like(r, 1.0 / int(e.sum()))
    return torch.where(e, out.clamp(0, 1), torch.zeros_like(out))


def retention_probs(scores: Tensor, pi, eligible: Optional[Tensor] = None, sign: str = "relu") -> Tensor:
    """Proportional water-filling W(a, π): r_i = min(1, c·ã_i) with mean over eligible r = π.

    ã = max(a, 0) (``sign="relu"``) or |a| (``sign="abs"``). Exact sorted solution: with the s
    largest ã saturated at 1, c = (nπ − s) / Σ_{rest} ã; the smallest consistent s is taken.
    If fewer than nπ tokens have ã > 0, those get 1 and the others share the remaining mass
    uniformly; if all ã = 0, r = π (specs/grad_ellm.md §5.3).

    Args:
        scores: Tensor[L]. pi: a number, or P numbers in [0, 1] (a list, tuple, numpy array or
            Tensor[P]). eligible: bool [L] (default all).

    Returns:
        Tensor[P, L] (or [L] for a scalar π), float64, 0 at non-eligible positions.

    Raises:
        ValueError: ``sign`` unknown, ``scores`` not 1-D, a π outside [0, 1] or NaN, ``eligible``
            selecting nothing.
    """
    if sign not in ("relu", "abs"):
        raise ValueError(f"sign must be 'relu' or 'abs', got {sign!r}")
    a = scores.detach().double().cpu()
    if a.dim() != 1:
        raise ValueError(f"scores must be 1-D, got shape {tuple(a.shape)}")
    e = torch.ones_like(a, dtype=torch.bool) if eligible is None else eligible.detach().cpu().bool()
    try:
        P = torch.as_tensor(pi.detach().cpu() if torch.is_tensor(pi) else pi, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"pi must be a number or a 1-D sequence of numbers in [0, 1], got {pi!r}") from None
    scalar = P.dim() == 0  # a number, or a 0-d tensor / array; a list, tuple, array or tensor of them gives [P, L]
    if P.dim() > 1 or not bool(((P >= 0) & (P <= 1)).all()):  # NaN fails both comparisons
        raise ValueError(f"pi must be a number or a 1-D sequence of numbers in [0, 1], got {pi!r}")
    P = P.view(-1)
    at = (a.abs() if sign == "abs" else a.clamp_min(0))[e]
    n = at.numel()
    if n == 0:
        raise ValueError("eligible selects no position")
    T = P * n  # total retention to distribute [P]
    v, order = torch.sort(at, descending=True)
    s = torch.arange(n, dtype=torch.float64)
    suffix = v.flip(0).cumsum(0).flip(0)  # Σ_{i≥s} v_i
    c = (T.view(-1, 1) - s.view(1, -1)) / suffix.clamp_min(1e-300).view(1, -1)  # [P, n]
    tol = 1e-12
    prev = torch.cat([torch.full((1,), math.inf, dtype=torch.float64), v[:-1]])
    first_ok = (s == 0).view(1, -1) | (c * prev.view(1, -1) >= 1 - tol)
    valid = (suffix.view(1, -1) > 0) & (c >= -tol) & (c * v.view(1, -1) <= 1 + tol) & first_ok
    has = valid.any(-1)
    first = torch.where(has, valid.float().argmax(-1), torch.zeros_like(has, dtype=torch.long))
    cs = c.gather(1, first.view(-1, 1)).clamp_min(0)  # [P, 1]
    r = (cs * at.view(1, -1)).clamp(max=1.0)
    # not reachable proportionally: positives saturate, zeros share the rest
    npos = int((at > 0).sum())
    if npos < n:
        rest = ((T - npos) / (n - npos)).clamp(0, 1).view(-1, 1)
        fill = torch.where(at.view(1, -1) > 0, torch.ones_like(r), rest.expand_as(r))
        r = torch.where(has.view(-1, 1), r, fill)
    if npos == 0:
        r = P.view(-1, 1).expand(-1, n).clone()
    out = torch.zeros(P.numel(), a.numel(), dtype=torch.float64)
    out[:, e] = r
    return out[0] if scalar else out


def top_k_positions(scores: Tensor, candidates: Tensor, topk: float = 0.20, dig_compat: bool = False, *,
                    ties: str = "random", tie_seed: int = 0) -> Tensor:
    """Indices of the top-k signed scores among ``candidates``, largest first: Tensor[k] (int64, CPU).

    k = ⌊#candidates · topk⌋ (``dig_compat=False``) or ⌊L · topk⌋ over all L positions
    (``dig_compat=True``; then any position may be chosen), the floor allowing 1e-9 for float
    rounding (100 × 0.29 = 28.999… in floats gives 29). Equal scores are ordered by
    ``ties``: ``"random"`` (default) — a random permutation drawn from a generator seeded with
    ``tie_seed``, so every tied position is equally likely to be chosen and the same seed gives
    the same choice; ``"first"`` — the lower index first (the rule before ties became random;
    it favours early positions).

    Args:
        scores: Tensor[L]. candidates: bool Tensor[L]. topk: fraction in (0, 1].
        dig_compat: count and choose among all positions (DIG's rule).
        ties: one of :data:`TIE_RULES`. tie_seed: seed of the random tie order (an int).

    Raises:
        ValueError: ``topk`` outside (0, 1], unknown ``ties``, ``tie_seed`` not an int.
    """
    topk = check_topk(topk)
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {list(TIE_RULES)}, got {ties!r}")
    tie_seed = as_int(tie_seed)  # a NumPy or one-element tensor integer as an int
    if isinstance(tie_seed, bool) or not isinstance(tie_seed, int):
        raise ValueError(f"tie_seed must be an int, got {tie_seed!r}")
    s = scores.detach().cpu().double()  # float64 scores keep their order (float32 would tie close ones)
    cand = candidates.detach().cpu().bool() if not dig_compat else torch.ones_like(candidates, dtype=torch.bool, device="cpu")
    k = int(int(cand.sum()) * topk + 1e-9)
    if k == 0:
        return torch.empty(0, dtype=torch.long)
    key = torch.where(cand, -s, torch.full_like(s, math.inf))
    if ties == "random":
        g = torch.Generator(device="cpu").manual_seed(int(tie_seed))
        perm = torch.randperm(s.numel(), generator=g)
        order = perm[torch.sort(key[perm], stable=True).indices]  # equal scores keep the random order
    else:
        order = torch.sort(key, stable=True).indices  # equal scores keep index order
    return order[:k]
