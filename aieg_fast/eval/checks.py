"""Argument checks of the metrics and of ``evaluate``; each error names the argument and the value."""
from __future__ import annotations

import numbers
from typing import Callable, Dict, List, Optional, Tuple

from ..core.baselines import check_alpha_range, check_baseline_noise, check_baseline_value
from ..core.validation import as_int, as_real, check_int, check_positive_int
from ..methods.registry import check_model, get_method, parse_method_spec, resolved_options

__all__ = ["BASELINE_KEYS", "check_labels", "check_topk", "check_positive_int", "check_pis", "check_choices", "check_method_options", "check_models",
           "check_baseline_settings", "check_seed", "check_n_steps",
           "method_only", "method_settings"]

#: Call settings a method spec may carry besides the method's options, for the methods that
#: integrate from a baseline (``uses_baseline``): ``integrated_gradients:baseline=zero``,
#: ``aieg:alpha_range=[0.1,1]``. They are passed to ``Explainer.attribute`` as they are.
BASELINE_KEYS = ("baseline", "alpha_range", "n_baseline_samples", "baseline_noise")


def method_only(opts: dict) -> dict:
    """The method options of a spec's settings, without its :data:`BASELINE_KEYS`."""
    return {k: v for k, v in opts.items() if k not in BASELINE_KEYS}


def check_topk(topk) -> float:
    """``topk`` as a float.

    Raises:
        ValueError: not a number in (0, 1] (bools are refused).
    """
    topk = as_real(topk)  # np.float32(0.2): the float it holds
    if isinstance(topk, bool) or not isinstance(topk, (int, float)) or not (0 < topk <= 1):
        raise ValueError(f"topk must be a fraction in (0, 1], got {topk!r}")
    return float(topk)


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


def check_method_options(method_options, specs: Dict[str, Tuple[str, dict]], controls=()) -> Dict[str, dict]:
    """``method_options`` as a dict, checked before anything is written: each key a method among
    ``methods`` (``specs``: spec → (name, options); ``controls`` are not methods), each value a
    dict of that method's options, and every method spec's options (its own over these) valid
    values (built once with the method's ``Options``).

    Raises:
        ValueError / TypeError: naming ``method_options`` (or the method spec) and the value.
    """
    if method_options is None:
        method_options = {}
    if not isinstance(method_options, dict):
        raise TypeError(f"method_options must be a dict {{method: {{option: value}}}}, got {type(method_options).__name__}")
    names = {name for m, (name, _) in specs.items() if m not in controls}
    for name, opts in method_options.items():
        if name not in names:
            raise ValueError(f"method_options names {name!r}, which is not among the methods run {sorted(names)}")
        if not isinstance(opts, dict):
            raise TypeError(f"method_options[{name!r}] must be a dict of options, got {type(opts).__name__}")
        unknown = sorted(set(opts) - set(get_method(name).option_names()))
        if unknown:
            where = [k for k in unknown if k in BASELINE_KEYS]
            hint = (f" ({', '.join(where)}: a call setting, given in the method spec, e.g. {name}:{where[0]}=...)"
                    if where and get_method(name).uses_baseline else "")
            raise ValueError(f"method_options[{name!r}] has unknown option(s) {unknown}; {name} takes "
                             f"{sorted(get_method(name).option_names())}{hint}")
    for m, (name, opts) in specs.items():
        if m in controls:
            continue
        try:
            get_method(name).options(**{**method_options.get(name, {}), **method_only(opts)})
            check_baseline_settings(opts)
        except (ValueError, TypeError) as err:
            raise type(err)(f"methods: {m!r} with method_options {method_options.get(name, {})}: {err}") from None
    return dict(method_options)


def check_seed(seed) -> int:
    """``seed`` as an int (a NumPy or one-element tensor integer too); ValueError unless it is an
    int ≥ 0 (numpy's generators, which draw the random control, the soft-metric masks and the
    bootstrap, take no negative seed)."""
    seed = as_int(seed)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return int(seed)


def check_n_steps(n_steps) -> int:
    """``n_steps`` (path steps of the path methods); ValueError unless an int ≥ 2."""
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 2:
        raise ValueError(f"n_steps must be an int >= 2 (path steps), got {n_steps!r}")
    return n_steps


def check_baseline_settings(opts: dict, vocab_size: Optional[int] = None) -> None:
    """Check the :data:`BASELINE_KEYS` values of a method spec's settings without a model
    (``vocab_size`` given: a token-id baseline against the vocabulary too), so that a run
    refuses them before its folder is written rather than on its first example.

    Raises:
        ValueError / TypeError: names the setting and the value: ``baseline`` not a name or a
            token id (:func:`~aieg_fast.core.baselines.check_baseline_value`), a bad
            ``alpha_range``, ``n_baseline_samples`` < 1, ``baseline_noise`` < 0.
    """
    check_baseline_value(opts.get("baseline"), vocab_size)
    if "alpha_range" in opts:
        check_alpha_range(opts["alpha_range"])
    if "n_baseline_samples" in opts:
        check_int("n_baseline_samples", opts["n_baseline_samples"], 1)
    check_baseline_noise(opts.get("baseline_noise"), opts.get("n_baseline_samples", 1))


def method_settings(specs: Dict[str, Tuple[str, dict]], method_options: Dict[str, dict],
                    controls=()) -> Tuple[Dict[str, dict], Callable[[str], Optional[dict]]]:
    """What a run folder records of its methods (``methods.json``): spec → every option it is
    computed with, and a function giving a spec's options under the former defaults
    (:data:`aieg_fast.methods.registry.FORMER_DEFAULTS`; None for a spec that is no method),
    for folders written before ``methods.json`` existed."""
    def options(name: str, opts: dict, former: bool = False) -> dict:
        return resolved_options(name, {**method_options.get(name, {}), **method_only(opts)}, former)

    def former(spec: str) -> Optional[dict]:
        try:
            return options(*parse_method_spec(spec), former=True)
        except (ValueError, TypeError):  # a control ("random") or a spec this version cannot read
            return None

    return {m: options(name, opts) for m, (name, opts) in specs.items() if m not in controls}, former


def check_models(ex, specs: Dict[str, Tuple[str, dict]], method_options: Dict[str, dict], controls=()) -> None:
    """Refuse, before anything is written, a method the model cannot run (an attention method
    on a model without attention layers; :func:`~aieg_fast.methods.registry.check_model`)."""
    for m, (name, opts) in specs.items():
        if m not in controls:
            method = get_method(name)
            check_model(method, method.options(**{**method_options.get(name, {}), **method_only(opts)}), ex.adapter)
            try:
                check_baseline_settings(opts, ex.vocab_size)
            except (ValueError, TypeError) as err:
                raise type(err)(f"methods: {m!r}: {err}") from None


def check_labels(labels) -> None:
    """``labels`` None (the dataset's) or a list of at least 2 distinct label words or ids,
    checked before the model is loaded (that each is one token needs the tokenizer).

    Raises:
        TypeError: a str (a list of words is meant) or not a list / tuple.
        ValueError: fewer than 2 labels, or a label given twice.
    """
    if labels is None:
        return
    if isinstance(labels, str) or not isinstance(labels, (list, tuple)):
        raise TypeError(f"labels must be a list of label words (index = label), e.g. [' negative', ' positive'], "
                        f"got {type(labels).__name__} {labels!r}")
    if len(labels) < 2:
        raise ValueError(f"labels needs at least 2 label words, got {list(labels)!r}")
    if len(set(labels)) < len(labels):
        raise ValueError(f"labels names a label more than once: {list(labels)!r}")
