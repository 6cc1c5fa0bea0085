"""Integrated Gradients with the number of steps chosen by accuracy (``n_steps="auto"``).

The path integral is estimated with the trapezoid rule on a grid of α that is refined by
bisection, so every grid holds every point of the one before: each gradient is computed once and
kept. What makes a stopping rule possible is that the grid holds α = 0 and α = 1 and the forward
of every point gives F there, so the integral of each interval is known exactly,
F(α_{i+1}) − F(α_i), while the trapezoid rule estimates it from the two gradients,
(α_{i+1} − α_i) (f′_i + f′_{i+1}) / 2 with f′ = ∇F · Δ. Their difference e_i is the interval's
error (it holds everything the two end gradients miss, a sharp step of F inside the interval
included), and Σ_i e_i is IG's completeness error Σ_j IG_j − (F(x) − F(x′)).

Refinement (``refine``):

* ``"adaptive"`` (default): bisect the intervals with the largest |e_i| until they hold half of
  Σ|e_i| (Dörfler marking, θ = :data:`MARK_FRACTION`), so points go where F bends: on SmolLM2
  F is flat along most of the path with a few sharp steps (benchmarks/RESULTS.md, issue 18);
* ``"uniform"``: bisect every interval (a doubling trapezoid grid; the final grid is
  ``linspace(0, 1, 2^k·8 + 1)``, the grid of a fixed ``n_steps`` of that size).

Start: :data:`START_INTERVALS` + 1 uniform points. Stop (converged): when Σ|e_i| (no
cancellation possible) is at most ``tolerance`` · |F(x) − F(x′)|, or when the relative
completeness error |Σ e_i| / |F(x) − F(x′)| is at most ``tolerance`` on two consecutive grids
(one grid alone can meet it by cancellation of interval errors of opposite signs while its scores
still move; and noise in F, as in bfloat16, adds to every |e_i| but cancels in Σ e_i). Stop (not
converged): when the next refinement would pass ``max_steps`` points; the result then says so.

Only the signed token sum (``token_reduction="sum"``) is supported: completeness is defined for
it, and it needs one number per token and point (Tensor[M, L]) rather than the gradients.

Source: the trapezoid rule and its bisection (Davis & Rabinowitz, *Methods of Numerical
Integration*, 1984, ch. 6 on adaptive integration); the marking rule from Dörfler, SIAM J.
Numer. Anal. 33 (1996); completeness from Sundararajan et al., ICML 2017.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List

import torch
from torch import Tensor

from .path import path_chunks

__all__ = ["AUTO_TOLERANCE", "AUTO_MAX_STEPS", "START_INTERVALS", "MARK_FRACTION", "REFINE_RULES",
           "NestedGrid", "interval_errors", "trapezoid_weights", "mark_intervals", "integrate_auto"]

#: default relative completeness error of ``n_steps="auto"``
AUTO_TOLERANCE = 0.05
#: default budget of path points (forward + backward each) of ``n_steps="auto"``: 256 intervals,
#: so that a uniform grid can double up to 8·2^5 + 1 points
AUTO_MAX_STEPS = 257
#: intervals of the first grid (START_INTERVALS + 1 points, uniform)
START_INTERVALS = 8
#: Dörfler's θ: the marked intervals hold at least this fraction of Σ|e_i|
MARK_FRACTION = 0.5
REFINE_RULES = ("adaptive", "uniform")
#: the relative errors divide by max(|F(x) − F(x′)|, this) (units of F), so that ΔF = 0 gives no division by 0
_ABS_FLOOR = 1e-6


@dataclass
class NestedGrid:
    """The points of one example computed so far, sorted by α.

    Attributes:
        alphas: Tensor[M] float64, in [0, 1], holding 0 and 1.
        f: Tensor[M] float64, F at each point.
        contrib: Tensor[M, L] float32, Σ_d ∇F ⊙ Δ per token at each point (its row sum is f′).
        history: relative completeness error of each grid, first to last.
    """

    alphas: Tensor
    f: Tensor
    contrib: Tensor
    history: List[float]

    def add(self, alphas: Tensor, f: Tensor, contrib: Tensor) -> None:
        """Merge new points (any order) into the sorted grid."""
        a = torch.cat([self.alphas, alphas.to(self.alphas)])
        order = torch.argsort(a)
        self.alphas = a[order]
        self.f = torch.cat([self.f, f.to(self.f)])[order]
        self.contrib = torch.cat([self.contrib, contrib.to(self.contrib)])[order]

    @property
    def dF(self) -> float:
        return float(self.f[-1] - self.f[0])

    def errors(self) -> Tensor:
        return interval_errors(self.alphas, self.f, self.contrib.double().sum(-1))

    def rel_error(self) -> float:
        """|Σ e_i| / |F(x) − F(x′)| of the current grid (= IG's relative completeness error)."""
        return abs(float(self.errors().sum())) / max(abs(self.dF), _ABS_FLOOR)

    def rel_local_error(self) -> float:
        """Σ|e_i| / |F(x) − F(x′)|: the error without cancellation between intervals."""
        return float(self.errors().abs().sum()) / max(abs(self.dF), _ABS_FLOOR)

    def converged(self, tolerance: float) -> bool:
        """Σ|e_i| within ``tolerance``, or |Σ e_i| within it on this grid and the one before."""
        h = self.history
        return self.rel_local_error() <= tolerance or (len(h) >= 2 and max(h[-2:]) <= tolerance)

    def scores(self) -> Tensor:
        """Trapezoid IG on the current grid: Tensor[L] float32."""
        w = trapezoid_weights(self.alphas).to(self.contrib)
        return w @ self.contrib


def trapezoid_weights(alphas: Tensor) -> Tensor:
    """Trapezoid weights of sorted points ``alphas`` [M] (M ≥ 2): w_m = (α_{m+1} − α_{m−1}) / 2,
    halved intervals at the ends; Σ w = α_M − α_1. Tensor[M] in ``alphas``' dtype."""
    h = alphas[1:] - alphas[:-1]
    w = torch.zeros_like(alphas)
    w[:-1] += h / 2
    w[1:] += h / 2
    return w


def interval_errors(alphas: Tensor, f: Tensor, slope: Tensor) -> Tensor:
    """e_i = (α_{i+1} − α_i)(f′_i + f′_{i+1}) / 2 − (F_{i+1} − F_i) per interval: Tensor[M − 1].

    Args:
        alphas: Tensor[M] sorted points. f: Tensor[M], F at the points. slope: Tensor[M], the
            directional derivative f′ = ∇F · Δ at the points (the token contributions summed).
    """
    h = alphas[1:] - alphas[:-1]
    return h * (slope[1:] + slope[:-1]) / 2 - (f[1:] - f[:-1])


def mark_intervals(errors: Tensor, rule: str, budget: int) -> Tensor:
    """Indices of the intervals to bisect (at most ``budget``): every interval for ``"uniform"``
    (none when they do not all fit), else the fewest intervals, largest |e_i| first, holding
    :data:`MARK_FRACTION` of Σ|e_i|. Tensor[k] long, possibly empty."""
    n = errors.numel()
    if rule == "uniform":
        return torch.arange(n) if n <= budget else torch.zeros(0, dtype=torch.long)
    e = errors.abs()
    order = torch.argsort(e, descending=True)
    cum = torch.cumsum(e[order], 0)
    total = float(cum[-1]) if n else 0.0
    if total <= 0 or not math.isfinite(total):
        return torch.zeros(0, dtype=torch.long)
    k = int(torch.searchsorted(cum, torch.tensor(MARK_FRACTION * total, dtype=cum.dtype))) + 1
    return order[: min(k, n, budget)]


def _evaluate(ctx, new: List[Tensor], grids: List[NestedGrid]) -> None:
    """Forward + backward of the new points of every example, merged into its grid."""
    delta = ctx.batch.delta
    delta = delta if delta.dtype == torch.float64 else delta.float()  # a float64 model keeps its precision here
    f_new = [torch.empty(a.numel(), dtype=torch.float64, device=ctx.device) for a in new]
    c_new = [torch.empty(a.numel(), delta.shape[1], dtype=torch.float32, device=ctx.device) for a in new]
    for b, ms, f, g in path_chunks(ctx, [a.to(torch.float32) for a in new], True):
        f_new[b][ms] = f.double()
        c_new[b][ms] = torch.einsum("mld,ld->ml", g.to(delta.dtype), delta[b]).float()
    for b, grid in enumerate(grids):
        if new[b].numel():
            grid.add(new[b], f_new[b], c_new[b])


def integrate_auto(ctx, tolerance: float, max_steps: int, refine: str = "adaptive"):
    """IG of every example of ``ctx`` with the grid refined until ``tolerance`` or ``max_steps``.

    Args:
        ctx: the call's :class:`~aieg_fast.core.context.Context` (targets already filled).
        tolerance: relative completeness error to reach (> 0).
        max_steps: the most path points per example (≥ 2); each costs one forward and backward.
        refine: ``"adaptive"`` or ``"uniform"`` (module docstring).

    Returns:
        (scores: list of Tensor[L] float32, path: list of Tensor[M_b] F at the final grid,
        info: dict with per-example lists ``alphas`` (the final grid), ``n_steps_used`` (its
        points), ``completeness_error`` (relative, on the final grid), ``error_history`` (one
        entry per grid), ``converged`` (the final error is within ``tolerance``), and
        ``tolerance``, ``max_steps``, ``refine``).
    """
    B, L = ctx.batch.ids.shape
    dev = ctx.device
    start = torch.linspace(0, 1, min(START_INTERVALS + 1, max_steps), dtype=torch.float64, device=dev)
    grids = [NestedGrid(start[:0].clone(), start[:0].clone(), torch.zeros(0, L, device=dev), []) for _ in range(B)]
    new = [start] * B
    converged = [False] * B
    while any(a.numel() for a in new):
        _evaluate(ctx, new, grids)
        added, new = [a.numel() > 0 for a in new], []
        for b, g in enumerate(grids):
            if not added[b]:  # finished in an earlier pass (another example's grid is still refined)
                new.append(start[:0])
                continue
            g.history.append(g.rel_error())
            converged[b] = g.converged(tolerance)
            budget = max_steps - g.alphas.numel()
            idx = start[:0].long()
            if not converged[b] and budget > 0 and math.isfinite(g.history[-1]):
                idx = mark_intervals(g.errors(), refine, budget).to(dev)
            new.append((g.alphas[idx] + g.alphas[idx + 1]) / 2)
            converged[b] = converged[b] or (idx.numel() == 0 and g.history[-1] <= tolerance)
    scores = [g.scores() for g in grids]
    info: Dict[str, object] = {
        "alphas": [g.alphas.tolist() for g in grids],
        "n_steps_used": [int(g.alphas.numel()) for g in grids],
        "completeness_error": [g.history[-1] for g in grids],
        "error_history": [list(g.history) for g in grids],
        "converged": list(converged),
        "tolerance": float(tolerance),
        "max_steps": int(max_steps),
        "refine": refine,
    }
    return scores, [g.f.float() for g in grids], info
