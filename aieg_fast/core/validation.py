"""Argument checks shared by the whole package; each error names the argument and the value."""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

__all__ = ["check_call_settings", "check_choice", "check_int", "check_bool", "check_options", "parse_memory", "BACKENDS", "TARGET_FNS"]

BACKENDS = ("auto", "ext", "reference")
#: what F is: the target's logit, log-probability or probability (specs/aieg.md §6.2)
TARGET_FNS = ("logit", "logprob", "prob", "label_logprob")


def check_choice(name: str, value, choices) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def check_int(name: str, value, minimum: int) -> None:
    """Raise ValueError unless ``value`` is an int (not bool) ≥ ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def check_bool(name: str, value) -> None:
    """Raise ValueError unless ``value`` is a bool."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def check_options(method: str, options: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Raise ValueError naming the unknown keys of ``options`` and the allowed ones."""
    allowed = list(allowed)
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for method {method!r}; allowed: {sorted(allowed)}")


def parse_memory(value) -> int:
    """Bytes from an int or a string such as ``"4GB"``, ``"512MiB"``, ``"2e9"``.

    Raises:
        ValueError: unparseable value or not positive.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"max_memory must be positive, got {value!r}")
        return int(value)
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kKmMgGtT]?)(i?)[bB]?\s*", str(value))
    if not m:
        raise ValueError(f"max_memory must be bytes or a string like '4GB', got {value!r}")
    num = float(m.group(1))
    base = 1024 if m.group(3) else 1000
    mult = {"": 1, "k": base, "m": base**2, "g": base**3, "t": base**4}[m.group(2).lower()]
    if num <= 0:
        raise ValueError(f"max_memory must be positive, got {value!r}")
    return int(num * mult)


def check_call_settings(n_steps, backend: str, tolerance=None, max_steps=None, auto_ok: bool = True) -> None:
    """The checks shared by every attribution call: ``n_steps`` an int ≥ 2 or ``"auto"``,
    ``backend`` one of :data:`BACKENDS` (``target_fn`` is checked by
    :func:`aieg_fast.core.call.resolve_call`); with ``"auto"``, ``tolerance`` a number > 0 (or
    None) and ``max_steps`` an int ≥ 2 (or None); with an int ``n_steps`` both must be None.
    ``auto_ok=False``: ``n_steps`` must be an int (the callers without ``"auto"``).

    Raises:
        ValueError: naming the argument and the value.
    """
    if not auto_ok and n_steps == "auto":
        raise ValueError("n_steps='auto' is available in Explainer.attribute (integrated_gradients) only; "
                         "pass an int here (50 is usual)")
    if n_steps != "auto" and (isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 2):
        raise ValueError(f"n_steps must be an int >= 2{' or ' + repr('auto') if auto_ok else ''}, got {n_steps!r}")
    check_choice("backend", backend, BACKENDS)
    if n_steps != "auto":
        for name, v in (("tolerance", tolerance), ("max_steps", max_steps)):
            if v is not None:
                raise ValueError(f"{name}={v!r} applies to n_steps='auto' only; got n_steps={n_steps!r}")
        return
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not 0 < tolerance < float("inf")):
        raise ValueError(f"tolerance must be a number > 0 (a relative completeness error, e.g. 0.05), got {tolerance!r}")
    if max_steps is not None:
        check_int("max_steps", max_steps, 2)
