"""Argument checks of the metrics and of ``evaluate``; each error names the argument and the value."""
from __future__ import annotations

from typing import List

__all__ = ["check_topk", "check_positive_int", "check_pis", "check_choices"]


def check_topk(topk) -> float:
    """``topk`` as a float.

    Raises:
        ValueError: not a number in (0, 1] (bools are refused).
    """
    if isinstance(topk, bool) or not isinstance(topk, (int, float)) or not (0 < topk <= 1):
        raise ValueError(f"topk must be a fraction in (0, 1], got {topk!r}")
    return float(topk)


def check_positive_int(name: str, v) -> int:
    """``v`` unchanged.

    Raises:
        ValueError: ``v`` is not an int ≥ 1 (bools are refused); the message names ``name``.
    """
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def check_pis(pis) -> List[float]:
    """A π grid as a list of floats.

    Raises:
        ValueError: not a non-empty, strictly increasing sequence of numbers inside (0, 1).
    """
    try:
        vals = [float(p) for p in pis]
    except TypeError:
        raise ValueError(f"pis must be a sequence of numbers in (0, 1), got {pis!r}") from None
    if not vals or any(not (0 < p < 1) for p in vals) or any(b <= a for a, b in zip(vals, vals[1:])):
        raise ValueError(f"pis must be a non-empty increasing sequence of numbers in (0, 1), got {pis!r}")
    return vals


def check_choices(name: str, values, allowed) -> List[str]:
    """``values`` (a sequence, or one comma-separated string) as a list without repeats.

    Raises:
        ValueError: empty, or a value not in ``allowed``; the message names ``name``.
    """
    if isinstance(values, str):
        values = [v.strip() for v in values.split(",") if v.strip()]
    try:
        vals = list(dict.fromkeys(values))
    except TypeError:
        raise ValueError(f"{name} must be a sequence of {list(allowed)}, got {values!r}") from None
    if not vals or any(v not in allowed for v in vals):
        raise ValueError(f"{name} must be a non-empty sequence of {list(allowed)}, got {values!r}")
    return vals
