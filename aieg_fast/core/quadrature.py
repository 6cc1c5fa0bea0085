"""Integration rules on [0, 1] for path methods."""
from __future__ import annotations

import functools

import torch

from .validation import as_int, check_choice, check_int

__all__ = ["INTEGRATION_RULES", "quadrature"]

INTEGRATION_RULES = ("trapezoid", "uniform", "gausslegendre", "riemann_left", "riemann_right", "riemann_middle")


def quadrature(rule: str, n_steps: int, dtype=torch.float64):
    """Points and weights of an integration rule on [0, 1].

    Args:
        rule: one of ``trapezoid`` (default of IG: linspace points, trapezoid weights),
            ``uniform`` (linspace points, weight 1/M each — the form of specs/aieg.md §9, and
            what AIEG with ``ef_mode="none"`` uses), ``gausslegendre`` (captum's default),
            ``riemann_left``, ``riemann_right``, ``riemann_middle``.
        n_steps: M ≥ 2 (an int).
        dtype: a floating-point ``torch.dtype`` of the returned tensors (default float64).

    Returns:
        (alphas Tensor[M], weights Tensor[M]); Σ weights = 1.

    Raises:
        ValueError: unknown ``rule``, ``n_steps`` not an int ≥ 2.
        TypeError: ``dtype`` not a floating-point ``torch.dtype`` (an integer dtype would round
            every weight to 0).
    """
    check_choice("rule", rule, INTEGRATION_RULES)
    n_steps = as_int(n_steps)  # a NumPy or one-element tensor integer as an int
    check_int("n_steps", n_steps, 2)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype (e.g. torch.float32), got {dtype!r}")
    a, w = _quadrature64(rule, n_steps)
    return a.to(dtype, copy=True), w.to(dtype, copy=True)


@functools.lru_cache(maxsize=64)
def _quadrature64(rule: str, M: int):
    """:func:`quadrature` in float64, computed once per (rule, M); callers get copies."""
    if rule in ("trapezoid", "uniform"):
        a = torch.linspace(0, 1, M, dtype=torch.float64)
        if rule == "uniform":
            w = torch.full((M,), 1.0 / M, dtype=torch.float64)
        else:
            w = torch.full((M,), 1.0 / (M - 1), dtype=torch.float64)
            w[0] = w[-1] = 0.5 / (M - 1)
    elif rule == "gausslegendre":
        import numpy as np

        x, wq = np.polynomial.legendre.leggauss(M)
        a = torch.tensor((x + 1) / 2, dtype=torch.float64)
        w = torch.tensor(wq / 2, dtype=torch.float64)
    else:
        k = torch.arange(M, dtype=torch.float64)
        off = {"riemann_left": 0.0, "riemann_right": 1.0, "riemann_middle": 0.5}[rule]
        a = (k + off) / M
        w = torch.full((M,), 1.0 / M, dtype=torch.float64)
    return a, w
