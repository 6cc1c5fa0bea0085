"""Argument checks of :func:`~aieg_fast.eval.evaluate`: the method specs and the run settings;
each error names the argument and the value."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..core.validation import check_bools
from ..methods.registry import get_method, list_methods, method_options as allowed_options, parse_method_spec, split_method_specs
from .checks import BASELINE_KEYS, check_choices, check_n_steps, check_pis, check_positive_int, check_seed, check_topk
from .metrics import METRIC_SETS, NORMALISATIONS, PROB_SPACES, SOFT_MAPS, TIE_RULES
from .stats import REFERENCE_METHOD

__all__ = ["check_methods", "check_run_settings"]


def check_methods(methods, reference: str, controls=()) -> Tuple[List[str], Dict[str, Tuple[str, dict]]]:
    """The method specs as a list without repeats, and their (name, options); ``controls``
    are accepted names that are not attribution methods.

    Raises:
        ValueError: no method, an unknown name or option, a control given options, a
            ``reference`` not among the methods.
    """
    if isinstance(methods, str):
        methods = split_method_specs(methods)
    methods = list(dict.fromkeys(m.strip() if isinstance(m, str) else m for m in methods))  # " saliency" of a list too
    if not methods:
        raise ValueError("methods must name at least one method")
    if reference != REFERENCE_METHOD and reference not in methods:
        raise ValueError(f"reference must be one of the methods {methods}, got {reference!r}")
    specs = {m: parse_method_spec(m) for m in methods}
    tuned = [m for m in methods if specs[m][0] in controls and m not in controls]
    if tuned:
        raise ValueError(f"methods: {tuned[0]!r}: the control {specs[tuned[0]][0]!r} takes no options; name it alone")
    bad = [m for m in methods if specs[m][0] not in list_methods() and m not in controls]
    if bad:
        hint = ("; a value holding a comma is written as JSON in a method spec: a list (attn_layers=[0,1]) or a "
                'string in double quotes (components="gate,information")') if any(":" in m for m in methods) else ""
        raise ValueError(f"methods has unknown name(s) {bad}; choose from {list_methods() + list(controls)}{hint}")
    for m, (name, opts) in specs.items():
        if m in controls:
            continue
        allowed = sorted(allowed_options(name)) + (list(BASELINE_KEYS) if get_method(name).uses_baseline else [])
        unknown = sorted(set(opts) - set(allowed))
        if unknown:
            raise ValueError(f"methods: {m!r} has unknown option(s) {unknown}; {name} takes {allowed}")
    return methods, specs


def check_run_settings(n, n_steps, max_tokens, start, seed, topk, metrics, topk_sweep, n_samples, pis, prob_space,
                    normalise, soft_maps, ties, flags=None) -> Tuple[Optional[List[float]], List[float], List[str]]:
    """Check the numeric and named settings (in this order) and ``flags`` {name: value}, which
    must be bools ("no" is truthy: a str would turn a bar or the plots on); return the top-k
    sweep (sorted, no repeats, None when empty), the π grid and the soft maps as lists."""
    check_bools(flags or {})
    check_positive_int("n", n)
    check_n_steps(n_steps)
    check_positive_int("max_tokens", max_tokens, optional=True)
    if isinstance(start, bool) or not isinstance(start, int) or not (0 <= start < n):
        raise ValueError(f"start must be an int in [0, n) = [0, {n}), got {start!r}")
    check_seed(seed)
    check_topk(topk)
    if metrics not in METRIC_SETS:
        raise ValueError(f"metrics must be {' or '.join(repr(k) for k in METRIC_SETS)}, got {metrics!r}")
    if topk_sweep is not None:
        if isinstance(topk_sweep, (int, float)):
            topk_sweep = [topk_sweep]
        try:
            topk_sweep = sorted({check_topk(k) for k in topk_sweep}) or None
        except ValueError:
            raise ValueError(f"topk_sweep values must be fractions in (0, 1], got {list(topk_sweep)}") from None
    check_positive_int("n_samples", n_samples)
    pis = check_pis(pis)
    if prob_space is not None and prob_space not in PROB_SPACES:
        raise ValueError(f"prob_space must be one of {list(PROB_SPACES)} or None, got {prob_space!r}")
    if normalise not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {list(NORMALISATIONS)}, got {normalise!r}")
    soft_maps = check_choices("soft_maps", soft_maps, SOFT_MAPS)
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {list(TIE_RULES)}, got {ties!r}")
    return topk_sweep, pis, soft_maps

