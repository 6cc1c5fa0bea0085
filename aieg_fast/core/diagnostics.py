"""Diagnostics of a result: the package's warning categories and the flags of a row of scores
that carries no usable signal (zero, constant, non-finite, stretched by a normalisation) or
breaks IG's completeness.

A flag is a dict ``{"kind", "message"}`` (``"step"`` added for a generation row); the kinds are
:data:`FLAG_KINDS`. Methods say where their raw signal is (``Method.raw_signal``), which
normalisation they apply to it (``Method.normalisation``) and whether completeness holds
(``Method.completeness``); :func:`row_flags` does the rest.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import warnings
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import Tensor

__all__ = [
    "AttributionWarning", "NonFiniteAttributionWarning", "FLAG_KINDS", "FLAG_MEANINGS", "NO_SIGNAL_KINDS", "ZERO_TOL", "FLAT_REL",
    "COMPLETENESS_REL", "ROUTING_NOTE", "signal_flags", "completeness_flag", "auto_steps_flag", "low_precision_hint", "row_flags",
    "method_flags", "warn_flags", "warn",
]

#: the package's folder: frames inside it (and contextlib's) are skipped when a warning names the user's line
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKIP_FILES = (os.path.abspath(contextlib.__file__),)


def warn(message, category=None) -> None:
    """``warnings.warn`` of ``message`` (a str, default category :class:`AttributionWarning`, or
    a warning instance) attributed to the first caller outside the package (the user's line),
    however deep the call."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2 = the caller of this function
    while frame is not None and (os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR)
                                 or os.path.abspath(frame.f_code.co_filename) in _SKIP_FILES):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category or AttributionWarning, stacklevel=level)


class AttributionWarning(UserWarning):
    """A result (or an input) that may mislead: no signal behind the scores, a normalisation
    that stretched a flat row, a large IG completeness error, a tokenisation surprise (a
    target that merges with the prompt, a special-token string typed in the text), a model in
    training mode. Filter it with ``warnings.filterwarnings("ignore", category=AttributionWarning)``
    or turn it into errors with ``"error"``."""

    #: the end of a result's flags that points to ``res.degenerate`` ("" otherwise); the
    #: command line leaves it out, since its output shows the flags
    pointer = ""


class NonFiniteAttributionWarning(AttributionWarning, RuntimeWarning):
    """Scores or the model's output are not finite (NaN / inf). Also a ``RuntimeWarning``, the
    category this case had before :class:`AttributionWarning` existed."""


#: what a flag may say: the raw signal is 0 / the same everywhere / not finite, a normalisation
#: stretched a flat raw signal into a full-range map, IG's completeness error is large
FLAG_KINDS = ("zero_signal", "constant_signal", "non_finite", "inflated", "completeness")
#: the kinds whose row carries no usable signal: the views draw it without colour
NO_SIGNAL_KINDS = ("zero_signal", "constant_signal", "non_finite", "inflated")
#: what each kind says of a result, in a few words (summaries that count flags by kind)
FLAG_MEANINGS = {
    "zero_signal": "no usable signal (the raw signal is 0)",
    "constant_signal": "no usable signal (the raw signal is the same everywhere)",
    "non_finite": "no usable signal (values not finite)",
    "inflated": "no usable signal (a flat raw signal stretched by a normalisation)",
    "completeness": "IG's completeness error above its limit (10 % of F(x) − F(x′), or the tolerance of n_steps='auto')",
}
#: a raw signal whose largest |value| is at most this is "zero"
ZERO_TOL = 1e-12
#: a raw signal whose spread is at most this fraction of its largest |value| is "constant"
FLAT_REL = 1e-6
#: IG completeness error |Σ s − (F(x) − F(x′))| above this fraction of |F(x) − F(x′)| is "large"
COMPLETENESS_REL = 0.1


def _flag(kind: str, message: str, **extra) -> Dict[str, Any]:
    return {"kind": kind, "message": message, **extra}


def signal_flags(raw: Tensor, valid: Tensor, what: str = "the scores", normalisation: Optional[str] = None) -> List[Dict[str, Any]]:
    """Flags of one row's raw signal over its attributable positions.

    Args:
        raw: Tensor[L], the signal before any normalisation (the scores themselves for most
            methods; AIEG's IEG).
        valid: bool Tensor[L], the attributable positions.
        what: how the messages name the signal.
        normalisation: the normalisation the method applies to it (e.g. ``"PosNorm (minmax)"``),
            or None: a flat raw signal then gives ``"inflated"`` instead of ``"zero_signal"`` /
            ``"constant_signal"``, since the normalised map looks like a signal.

    Returns:
        A list of at most one flag (empty: the row carries a signal).
    """
    x = raw.detach().float().reshape(-1)[valid.reshape(-1).to(torch.bool)]
    if x.numel() == 0:
        return []
    lo, hi = torch.aminmax(x)  # NaN propagates to both, ±inf to one: finite both ⇔ every value finite
    lo, hi, spread = torch.stack([lo, hi, hi - lo]).tolist()  # one read back; the spread in float32
    if not (math.isfinite(lo) and math.isfinite(hi)):
        bad = int((~torch.isfinite(x)).sum())
        return [_flag("non_finite", f"{bad} of {x.numel()} values of {what} are not finite (NaN or inf)")]
    amax = max(abs(lo), abs(hi))  # = max |x|
    if amax <= ZERO_TOL:
        state = f"{what}: 0 at every attributable token (max |value| = {amax:.2g})"
    elif x.numel() > 1 and spread <= FLAT_REL * amax:
        state = f"{what}: the same value ({float(x[0]):+.4g}) at every attributable token"
    else:
        return []
    if normalisation:
        return [_flag("inflated", f"{state}; {normalisation} turns it into a full-range map, which carries no signal "
                                  "(the scores show the other factors alone, e.g. AIEG's attention row)")]
    return [_flag("zero_signal" if amax <= ZERO_TOL else "constant_signal", state)]


#: the advice of a completeness flag on a model that routes tokens to experts (mixture of experts)
ROUTING_NOTE = ("this model routes each token to some of its experts (mixture of experts): where the expert choice switches "
                "along the path, F jumps and no gradient sees the jump, and more steps do not remove that part of the error "
                "(n_steps, n_steps='auto' and max_steps shrink only the rest); choose another baseline, or read the scores "
                "knowing they miss this part of F(x) − F(x′)")


def completeness_flag(delta: float, F_input: float, F_baseline: float, routed: bool = False) -> List[Dict[str, Any]]:
    """A ``"completeness"`` flag when |δ| > :data:`COMPLETENESS_REL` · |F(x) − F(x′)| (and above
    1e-4, so rounding alone never flags), δ = Σ_i s_i − (F(x) − F(x′)); else []. The message
    advises more steps, or, for a model that routes tokens to experts (``routed``), says that
    more steps do not remove the jumps of the routing (:data:`ROUTING_NOTE`)."""
    vals = (delta, F_input, F_baseline)
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals):
        return []
    dF = F_input - F_baseline
    if abs(delta) > max(COMPLETENESS_REL * abs(dF), 1e-4):
        advice = ROUTING_NOTE if routed else ("raise n_steps (for the next token n_steps='auto' refines them until the "
                                              "error is below tolerance=0.05 by default), or choose another baseline")
        return [_flag("completeness", f"IG completeness error {delta:+.3g} is {abs(delta) / max(abs(dF), 1e-30):.0%} of "
                                      f"F(x) − F(x′) = {dF:+.3g}; {advice}")]
    return []


def auto_steps_flag(info: Dict[str, Any], b: int, routed: bool = False) -> List[Dict[str, Any]]:
    """A ``"completeness"`` flag for row ``b`` of an ``n_steps="auto"`` result that stopped at
    its step budget with the error above its tolerance (``info["converged"]`` false); else [].
    The message advises a larger ``max_steps``, or, for a model that routes tokens to experts
    (``routed``), says that more steps do not remove the routing's jumps (:data:`ROUTING_NOTE`)."""
    if _item(info, "converged", b) is not False:
        return []
    err, tol = _item(info, "completeness_error", b), info.get("tolerance")
    used, budget = _item(info, "n_steps_used", b), info.get("max_steps")
    advice = ROUTING_NOTE if routed else "raise max_steps, or choose another baseline"
    return [_flag("completeness", f"n_steps='auto' did not converge: IG completeness error {err:.3g} × |F(x) − F(x′)| "
                                  f"after {used} steps, above tolerance={tol:g} (max_steps={budget}); {advice}")]


def low_precision_hint(dtype) -> str:
    """What a large completeness error means on a float16 / bfloat16 model and the setting that
    fixes it, to append to the flag's message; '' for other dtypes."""
    if dtype not in (torch.float16, torch.bfloat16):
        return ""
    name = str(dtype).replace("torch.", "")
    return (f". The model runs in {name} (about 3 significant digits per activation): its gradients and F carry "
            "rounding noise that more steps do not remove; if raising n_steps (or max_steps) does not lower the error, "
            "run the model in float32 (aieg_fast.load_model(..., dtype=torch.float32), or model.float())")


def _item(info: Dict[str, Any], key: str, b: int):
    """Row ``b`` of ``info[key]``: a list's item, a ``[B, ...]`` tensor's row (a method's padded
    rows; a ``[1, ...]`` tensor is one for every row), else the value itself (one for every row)."""
    v = info.get(key)
    if isinstance(v, Tensor) and v.dim() >= 2 and 1 < v.shape[0] and b < v.shape[0]:
        return v[b]
    return v[b] if isinstance(v, list) else v


def row_flags(info: Dict[str, Any], b: int, scores: Tensor, valid: Tensor, raw_key: Optional[str] = None,
              normalisation: Optional[str] = None, completeness: bool = False, routed: bool = False,
              start: int = 0) -> List[Dict[str, Any]]:
    """Every flag of row ``b`` of a method's output.

    Args:
        info: the method's ``MethodOutput.info`` (a list entry holds one value per row).
        b: the row. scores: Tensor[L], its scores. valid: bool Tensor[L], its attributable positions.
        raw_key: the info key of the raw signal (None: the scores are the raw signal).
        normalisation: the normalisation applied to the raw signal (see :func:`signal_flags`);
            a flat raw signal is called ``"inflated"`` only where the scores are not all 0
            (PosNorm ``relu_max`` maps a zero or negative constant to 0, not to a full range).
        completeness: check ``convergence_delta`` against ``F_input − F_baseline`` (IG); for an
            ``n_steps="auto"`` result (``info["converged"]``), whether it reached its tolerance.
        routed: the model routes tokens to experts (the completeness advice says what that does).
        start: where the row's tokens begin in a raw signal longer than ``valid`` (a custom
            method's padded row; the built-in methods give each example's own tokens). A raw
            signal shorter than ``valid`` is not read.

    Returns:
        The flags (empty when the row is sound).
    """
    F = _item(info, "F_input", b)
    if isinstance(F, (int, float)) and not math.isfinite(F):
        return [_flag("non_finite", f"the model's output F(x) = {F} is not finite; the scores mean nothing", source="output")]
    out = signal_flags(scores, valid)
    if out and out[0]["kind"] == "non_finite":
        return out
    raw = _item(info, raw_key, b) if raw_key else None
    if raw is not None:
        n = valid.numel()
        raw = torch.as_tensor(raw, dtype=torch.float32).reshape(-1)
        raw = raw[start : start + n] if raw.numel() > n else raw  # a padded row: the example's span
        if raw.numel() == n:  # a shorter one is not read (it crashed after the work)
            stretched = bool(scores.reshape(-1)[valid.reshape(-1).to(torch.bool)].ne(0).any())  # a map left at 0 is not inflated
            out = signal_flags(raw, valid, f"the raw signal info[{raw_key!r}]", normalisation if stretched else None) or out
    if completeness and "converged" in info:  # n_steps="auto": flagged when it stopped above its tolerance
        out = out + auto_steps_flag(info, b, routed)
    elif completeness:
        out = out + completeness_flag(_item(info, "convergence_delta", b), F, _item(info, "F_baseline", b), routed)
    return out


def method_flags(method, opts, info: Dict[str, Any], b: int, scores: Tensor, valid: Tensor,
                 routed: bool = False, start: int = 0) -> List[Dict[str, Any]]:
    """:func:`row_flags` of row ``b`` with what ``method`` (a :class:`~aieg_fast.methods.Method`)
    declares: its ``raw_signal`` key, its ``normalisation(opts)``, and ``completeness`` (checked
    only for ``token_reduction="sum"``, where it holds exactly); ``routed``: the model routes
    tokens to experts; ``start``: as :func:`row_flags`."""
    complete = bool(getattr(method, "completeness", False)) and getattr(opts, "token_reduction", "sum") == "sum"
    return row_flags(info, b, scores, valid, getattr(method, "raw_signal", None), method.normalisation(opts), complete, routed,
                     start)


def warn_flags(flags: Sequence[Dict[str, Any]], method: str, hint: str = "") -> None:
    """One :class:`AttributionWarning` (:class:`NonFiniteAttributionWarning` when a value is not
    finite) listing ``flags`` (each may hold ``"step"`` or ``"text"``), or nothing when empty;
    ``hint`` is added when a score (not the model's output) is not finite. The warning names
    the user's line (:func:`warn`)."""
    if not flags:
        return
    parts = []
    for f in flags:
        at = f" step {f['step']}" if "step" in f else (f" text {f['text']}" if "text" in f else "")
        parts.append(f"[{f['kind']}{at}] {f['message']}")
    nonfinite = any(f["kind"] == "non_finite" for f in flags)
    cat = NonFiniteAttributionWarning if nonfinite else AttributionWarning
    head = f"{method}: " + ("; ".join(parts))
    scores_bad = any(f["kind"] == "non_finite" and f.get("source") != "output" for f in flags)
    silent = any(f["kind"] in NO_SIGNAL_KINDS for f in flags)
    pointer = " (see res.degenerate" + ("; the views draw rows without signal without colour)" if silent else ")")
    w = cat(head + (hint if scores_bad else "") + pointer)
    w.pointer = pointer
    warn(w)
