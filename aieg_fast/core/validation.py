"""Argument checks shared by the whole package; each error names the argument and the value."""
from __future__ import annotations

import difflib
import math
import numbers
import operator
import re
from typing import Any, Iterable, Mapping, Optional

import torch

__all__ = ["DEFAULT_N_STEPS", "as_bool", "as_int", "as_real", "as_scalar_int", "as_ints", "CALL_SETTINGS", "check_call_settings", "check_choice", "check_int", "check_positive_int", "check_number", "check_bool", "check_bools", "check_options", "parse_memory", "parse_dtype",
           "parse_device", "check_device_map", "check_placement", "BACKENDS", "TARGET_FNS", "DTYPES", "DEVICE_MAPS"]

BACKENDS = ("auto", "ext", "reference")
#: what F is: the target's logit, log-probability or probability (specs/aieg.md §6.2)
TARGET_FNS = ("logit", "logprob", "prob", "label_logprob")


def as_int(value):
    """``value`` as a Python int when it is an integer of another library (``numpy.int64``, a
    one-element integer tensor such as ``logits.argmax()``); anything else as it is (a bool, a
    float or a bool tensor stays, and is refused by the caller)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if torch.is_tensor(value):
        if value.numel() != 1 or value.dtype == torch.bool or value.is_floating_point() or value.is_complex():
            return value
        return int(value.item())
    if type(value).__name__.startswith("bool"):  # numpy.bool_
        return value
    try:
        return operator.index(value)
    except TypeError:
        return value


def as_real(value):
    """``value`` as a Python float when it is a real scalar of another library (``np.float32(0.1)``,
    a one-element floating tensor); anything else as it is (a Python number, a bool, a str, a
    tensor of several elements: the caller's check refuses or takes it). A float16 / float32
    number becomes the shortest decimal that reads back as it, the number that was typed
    (``np.float32(0.7)`` is 0.7, not 0.699999988: a top-k fraction of 10 tokens keeps 7)."""
    if torch.is_tensor(value):
        if value.numel() != 1 or not value.is_floating_point():
            return value
        if value.dtype not in (torch.float16, torch.float32):
            return float(value.item())
        value = value.detach().cpu().reshape(()).numpy()[()]  # the NumPy scalar of its precision
    if isinstance(value, (bool, int, float)) or type(value).__name__.startswith("bool"):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("float16", "float32"):
        return float(str(value))  # NumPy writes the shortest decimal that reads back as this value
    return float(value) if isinstance(value, numbers.Real) else value


def as_scalar_int(value):
    """:func:`as_int` of a scalar: an integer of another library (``np.int32(5)``, a 0-d integer
    tensor) as the Python int it holds; a tensor of one or more dimensions stays as given
    (``torch.tensor([1])`` is no scalar: a baseline of embeddings, an option holding a tensor,
    and a refusal shows what was passed); anything else as :func:`as_int` leaves it."""
    return value if torch.is_tensor(value) and value.dim() > 0 else as_int(value)


def as_ints(value):
    """:func:`as_scalar_int` of ``value``, or of each item of a list or tuple (a list of layer
    indices from ``np.arange``): a new list or tuple of Python ints where the items are integers
    of another library; a 1-D NumPy integer array (``np.arange(2)``) as the list of ints it holds."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 1 and value.dtype.kind in "iu":
        return [int(v) for v in value.tolist()]
    return type(value)(as_scalar_int(v) for v in value) if type(value) in (list, tuple) else as_scalar_int(value)


def check_choice(name: str, value, choices) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


#: path steps of the path methods (IG, IDG, AIEG) when a call names none.
DEFAULT_N_STEPS = 50


def check_int(name: str, value, minimum: int, maximum: Optional[int] = None, *, optional: bool = False) -> None:
    """Raise ValueError unless ``value`` is an int (not bool) ≥ ``minimum`` (and ≤ ``maximum``), or
    None where ``optional``; ``minimum=1`` without ``maximum`` reads "a positive int", as
    :func:`check_positive_int`."""
    if optional and value is None:
        return
    none = " or None" if optional else ""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "a positive int" if minimum == 1 and maximum is None else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {what}{none}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an int in [{minimum}, {maximum}]{none}, got {value!r}")


def check_positive_int(name: str, value, *, optional: bool = False):
    """``value`` unchanged.

    Raises:
        ValueError: ``value`` is not an int ≥ 1 (bools are refused), nor None where ``optional``;
            the message names ``name`` and the value.
    """
    check_int(name, value, 1, optional=optional)
    return value


def check_number(name: str, value, minimum: float = 0.0, *, strict: bool = False, optional: bool = False) -> None:
    """Raise ValueError unless ``value`` is a finite real number (not bool) ≥ ``minimum`` (> where
    ``strict``), or None where ``optional``; the message names ``name`` and the value."""
    if optional and value is None:
        return
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < minimum or (strict and value == minimum):
        bound = f"{'>' if strict else '>='} {minimum:g}"
        raise ValueError(f"{name} must be a finite number {bound}{' or None' if optional else ''}, got {value!r}")


def as_bool(value):
    """``value`` as a Python bool when it is a NumPy bool (``np.bool_(True)``) or a one-element
    bool tensor (``mask.any()``); anything else as it is (a str or an int is refused by
    :func:`check_bool`)."""
    if torch.is_tensor(value):
        return bool(value.item()) if value.dtype == torch.bool and value.numel() == 1 else value
    return bool(value) if type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool") else value


def check_bool(name: str, value) -> bool:
    """``value`` as a bool (a NumPy bool too, :func:`as_bool`); ValueError unless it is one ("no"
    is truthy: a str would silently turn a flag on)."""
    value = as_bool(value)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_bools(flags: Mapping[str, Any]) -> None:
    """:func:`check_bool` of each ``{name: value}`` of ``flags``, in order (the first refused is named)."""
    for name, value in flags.items():
        check_bool(name, value)


#: names that Captum and Inseq users type for settings of the calls here, and the name here (a
#: hint when an option of that name is refused)
PEER_NAMES = {"baselines": "baseline", "contrast_targets": "contrast_target",
              "generated_texts": "generated_text (of attribute_generation)", "nt_samples": "n_baseline_samples",
              "stdevs": "baseline_noise", "attribute_target": "interpolate_generated (of attribute_generation)",
              "return_convergence_delta": "no setting: IG and IDG record res.info['convergence_delta']"}


#: names of this package's other calls and files that a call of attribute() may be given by mistake
NEAR_NAMES = {"contrast": "contrast_target (contrast is the name of a dataset file's column)",
              "labels": "label_set (labels are the label words of an evaluation run)"}


def _option_hint(key: str, allowed) -> str:
    """Why ``key`` is no option of the method: a setting of the call, a Captum / Inseq name, or a
    near miss of one of ``allowed`` or of the calls' settings (difflib); "" otherwise."""
    if key in CALL_SETTINGS:
        return (f"; {key} is a setting of the call, not a method option (pass it to attribute() itself; "
                f"aieg-fast explain: {CALL_SETTINGS[key]})")
    if key in PEER_NAMES:
        return f"; {key} is Captum's / Inseq's name: here it is {PEER_NAMES[key]}"
    if key in NEAR_NAMES:
        return f"; {key}: did you mean {NEAR_NAMES[key]}?"
    close = difflib.get_close_matches(key, list(allowed) + list(CALL_SETTINGS), n=1, cutoff=0.8)
    return f"; {key}: did you mean {close[0]}?" if close else ""


def check_options(method: str, options: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Raise ValueError naming the unknown keys of ``options`` and the allowed ones; a key that is a
    setting of the call rather than of the method (``alpha_range``, ``internal_batch_size``, ...,
    e.g. given as the CLI's ``--option``) is named as such, with its command-line flag, a Captum /
    Inseq name (:data:`PEER_NAMES`) with the name here, a near miss with what it may mean."""
    allowed = list(allowed)
    unknown = [k for k in options if k not in allowed]
    if unknown:
        hint = "".join(_option_hint(k, allowed) for k in unknown)
        raise ValueError(f"unknown option(s) {unknown} for method {method!r}; allowed: {sorted(allowed)}{hint}")


#: settings of an attribution call that are not method options, with their ``aieg-fast explain`` flag
CALL_SETTINGS = {
    "n_steps": "--n-steps", "internal_batch_size": "--internal-batch-size", "alpha_range": "--alpha-start",
    "baseline": "--baseline", "n_baseline_samples": "--n-baseline-samples", "seed": "--seed", "target": "--target",
    "target_fn": "--target-fn", "contrast_target": "--contrast-target", "template": "--template", "backend": "--backend",
    "tolerance": "--tolerance", "max_steps": "--max-steps", "max_new_tokens": "--generate",
}


def parse_memory(value) -> int:
    """Bytes from a number or a string such as ``"4GB"``, ``"512MiB"``, ``"2e9"``, ``"1e-3GB"``
    (units k, M, G, T, powers of 1000, or with ``i`` of 1024, any case; the ``B`` optional).

    Raises:
        ValueError: an unparseable value, or one that is not a finite number of at least one
            byte (names ``max_memory`` and the value).
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        num, mult = float(value), 1
    else:
        m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kmgt]?)(i?)b?\s*", str(value), flags=re.IGNORECASE)
        try:
            num = float(m.group(1)) if m else math.nan
        except ValueError:  # "1e", "1.2.3": the pattern's characters in no number's order
            num = math.nan
        if math.isnan(num):
            raise ValueError(f"max_memory must be bytes or a string like '4GB', got {value!r}")
        mult = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}[m.group(2).lower()]
        mult = (1024 if m.group(3) else 1000) ** mult
    if not math.isfinite(num * mult) or num * mult < 1:
        raise ValueError(f"max_memory must be a finite number of at least one byte, got {value!r}")
    return int(num * mult)


#: parameter dtypes a model may be loaded in, by name (``--dtype``).
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: ``device_map`` strategies of accelerate (``from_pretrained(device_map=...)``).
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


def parse_dtype(dtype) -> Optional[torch.dtype]:
    """None, a name of :data:`DTYPES` (``"bfloat16"``) or one of its torch dtypes, as a torch dtype.

    Raises:
        ValueError: anything else (names ``dtype`` and the value).
    """
    if dtype is None or (isinstance(dtype, torch.dtype) and dtype in DTYPES.values()):
        return dtype
    if isinstance(dtype, str) and dtype.replace("torch.", "") in DTYPES:
        return DTYPES[dtype.replace("torch.", "")]
    raise ValueError(f"dtype must be one of {list(DTYPES)} (or the torch dtype), got {dtype!r}")


def parse_device(device) -> Optional[torch.device]:
    """None (leave the model where it is), ``"auto"`` (the current CUDA device when CUDA is
    available, else the CPU), or a torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a
    ``torch.device``) that exists on this machine.

    Raises:
        ValueError: not a device, or one this machine does not have (names ``device``).
    """
    if device is None:
        return None
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device, got {device!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: CUDA is not available here (torch {torch.__version__}, "
                             f"{'a CPU build' if torch.version.cuda is None else 'no GPU visible'}); use 'cpu' or 'auto'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: there are {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type != "cpu":
        backend = getattr(torch.backends, dev.type, None)
        if backend is None or not getattr(backend, "is_available", lambda: False)():
            raise ValueError(f"device {device!r} is not available here")
    return dev


def check_device_map(device_map) -> None:
    """None, a strategy of :data:`DEVICE_MAPS` or a dict {module name: device}.

    Raises:
        ValueError: anything else (names ``device_map``).
    """
    if device_map is None or isinstance(device_map, dict) or (isinstance(device_map, str) and device_map in DEVICE_MAPS):
        return
    raise ValueError(f"device_map must be one of {list(DEVICE_MAPS)}, a dict {{module name: device}} or None, got {device_map!r}")


def check_placement(device, dtype, device_map) -> None:
    """:func:`parse_device`, :func:`parse_dtype` and :func:`check_device_map` together, and
    ``device`` with ``device_map`` refused: what ``load_model`` checks first, for callers that
    must refuse bad values before they write anything.

    Raises:
        ValueError: as those functions, naming the argument.
    """
    parse_dtype(dtype)
    check_device_map(device_map)
    if device is not None and device_map is not None:
        raise ValueError(f"device and device_map exclude each other: device_map places the model, got device={str(device)!r} "
                         f"and device_map={device_map!r}")
    parse_device(device)


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
    tolerance = as_real(tolerance)
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not 0 < tolerance < float("inf")):
        raise ValueError(f"tolerance must be a number > 0 (a relative completeness error, e.g. 0.05), got {tolerance!r}")
    if max_steps is not None:
        check_int("max_steps", max_steps, 2)
