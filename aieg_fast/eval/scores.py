"""Score transforms of the soft metrics: normalisation to [0, 1] and proportional retention.

* :func:`normalise_scores` — ã of Soft-NC / Soft-NS (Zhao & Aletras 2023; specs/grad_ellm.md §5.2);
* :func:`retention_probs` — the water-filling W(a, π) of the π-Soft metrics (specs/grad_ellm.md §5.3).

Both are pure functions of the scores (no model), used by :mod:`aieg_fast.eval.metrics`.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

__all__ = ["NORMALISATIONS", "normalise_scores", "retention_probs"]

NORMALISATIONS = ("minmax", "max", "sigmoid", "l1")


def normalise_scores(scores: Tensor, eligible: Tensor, method: str = "minmax") -> Tensor:
    """Scores mapped to [0, 1] on eligible positions (0 elsewhere), for Soft-NC / Soft-NS.

    * ``"minmax"`` (default, specs/grad_ellm.md §5.2): negatives clipped to 0, then
      (a − min) / (max − min) over eligible tokens; a constant vector gives 0.5 everywhere.
    * ``"max"``: max(a, 0) / max(a); all ≤ 0 gives 0.5 everywhere.
    * ``"sigmoid"``: σ(a) (SoftFaith option 1). ``"l1"``: max(a, 0) / Σ max(a, 0) (ReAGent).
    """
    if method not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {list(NORMALISATIONS)}, got {method!r}")
    a = scores.detach().double().cpu()
    e = eligible.detach().cpu().bool()
    if method == "sigmoid":
        out = torch.sigmoid(a)
    else:
        r = a.clamp_min(0)
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
        scores: Tensor[L]. pi: a number or Tensor[P] in [0, 1]. eligible: bool [L] (default all).

    Returns:
        Tensor[P, L] (or [L] for a scalar π), float64, 0 at non-eligible positions.
    """
    if sign not in ("relu", "abs"):
        raise ValueError(f"sign must be 'relu' or 'abs', got {sign!r}")
    a = scores.detach().double().cpu()
    if a.dim() != 1:
        raise ValueError(f"scores must be 1-D, got shape {tuple(a.shape)}")
    e = torch.ones_like(a, dtype=torch.bool) if eligible is None else eligible.detach().cpu().bool()
    scalar = not torch.is_tensor(pi) and not isinstance(pi, (list, tuple))
    P = torch.as_tensor([pi] if scalar else pi, dtype=torch.float64).view(-1)
    if ((P < 0) | (P > 1)).any():
        raise ValueError(f"pi must lie in [0, 1], got {pi!r}")
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
