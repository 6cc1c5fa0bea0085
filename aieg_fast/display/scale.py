"""What the views share: the colour scale (diverging for signed scores, sequential for
non-negative ones; flat rows detected), and the label / value layout of a result."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core.diagnostics import FLAG_MEANINGS, NO_SIGNAL_KINDS

__all__ = ["Scale", "make_scale", "strip", "grid", "row_flags", "no_signal", "caution", "caution_steps", "caution_flag_of_steps",
           "fixed_columns"]

#: below this largest |score| a row is "near zero"
ZERO_TOL = 1e-9
#: a row whose spread is below this fraction of its largest |score| is "near constant"
FLAT_REL = 1e-6


@dataclass
class Scale:
    """A colour scale: ``signed`` (diverging blue-white-red centred at 0, ±vmax) or sequential
    (white to orange, 0..vmax); ``note`` says why a flat or degenerate row is drawn without
    colour ("" else); ``caveat`` is a warning shown with the colours (a large IG completeness
    error)."""

    signed: bool
    vmax: float
    note: str = ""
    caveat: str = ""

    def rgb(self, v: float) -> Tuple[int, int, int]:
        """Background colour of value ``v`` (white for NaN, 0 and flat rows)."""
        if math.isnan(v) or self.vmax <= 0 or self.note:
            return (255, 255, 255)
        t = max(-1.0, min(1.0, v / self.vmax))
        if not self.signed:
            t = max(t, 0.0)
            return (255, int(round(255 - t * 135)), int(round(255 - t * 255)))
        if t >= 0:
            return (255, int(round(255 * (1 - t))), int(round(255 * (1 - t))))
        return (int(round(255 * (1 + t))), int(round(255 * (1 + t))), 255)

    def ink(self, v: float) -> Tuple[int, int, int]:
        """Text colour readable on :meth:`rgb` (near-black, or white on dark backgrounds)."""
        r, g, b = self.rgb(v)
        return (255, 255, 255) if 0.299 * r + 0.587 * g + 0.114 * b < 140 else (17, 17, 17)

    @property
    def legend(self) -> str:
        """The scale in words, e.g. ``"diverging, ±0.53"``."""
        if self.note:
            return self.note
        base = f"diverging, ±{self.vmax:.3g}" if self.signed else f"sequential, 0 to {self.vmax:.3g}"
        return f"{base}; caution: {self.caveat}" if self.caveat else base


def row_flags(attr, row: Optional[int] = None) -> List[Dict[str, Any]]:
    """The degenerate-signal flags of a result (``attr.degenerate``): all of them for a 1-D
    result, those of generation step ``row`` for a 2-D one (``row=None``: all)."""
    flags = list(getattr(attr, "degenerate", None) or [])
    if row is None:
        return flags
    return [f for f in flags if f.get("step") == row]


def no_signal(flags: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The first flag saying the row carries no usable signal (drawn without colour), or None."""
    return next((f for f in flags if f.get("kind") in NO_SIGNAL_KINDS), None)


def caution(flags: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The first ``completeness`` flag of ``flags`` (a large IG completeness error: the row keeps
    its colours and is read with caution), or None."""
    return next((f for f in flags if f.get("kind") == "completeness"), None)


def caution_steps(attr) -> List[int]:
    """The generation steps (0-based rows) with a ``completeness`` flag and a signal: those the
    views mark with ⚠ and keep coloured."""
    return [t for t in range(attr.scores.shape[0])
            if caution(row_flags(attr, t)) is not None and no_signal(row_flags(attr, t)) is None]


def caution_flag_of_steps(attr) -> List[Dict[str, Any]]:
    """The caution of a generation result as one ``completeness`` flag for :func:`make_scale`
    (its message names the steps marked ⚠, 1-based, and quotes the first step's flag); [] when
    no step has one."""
    steps = caution_steps(attr)
    if not steps:
        return []
    first = caution(row_flags(attr, steps[0]))["message"]
    return [{"kind": "completeness", "message": f"⚠ step{'s' if len(steps) > 1 else ''} {', '.join(str(t + 1) for t in steps)}: "
                                                f"{FLAG_MEANINGS['completeness']}, colours kept (step {steps[0] + 1}: {first})"}]


def make_scale(values: Sequence[float], flags: Sequence[Dict[str, Any]] = ()) -> Scale:
    """The scale of ``values`` (NaN skipped): signed when any value is negative; ``note`` set
    for a near-zero (max |v| < 1e-9) or near-constant (spread < 1e-6·max |v|) set of 2+ values,
    for values none of which is finite (all NaN, or ±inf), and for a row whose ``flags`` (:attr:`Attribution.degenerate`)
    say it carries no signal (:data:`~aieg_fast.core.diagnostics.NO_SIGNAL_KINDS`); a
    ``completeness`` flag becomes the ``caveat``."""
    raw = [float(v) for v in values]
    vals = [v for v in raw if not math.isnan(v)]
    vmax = max((abs(v) for v in vals if math.isfinite(v)), default=0.0)
    signed = any(v < 0 for v in vals)
    note = ""
    bad = no_signal(flags)
    caveat = "; ".join(f["message"] for f in flags if f.get("kind") == "completeness")
    if bad is not None:
        note = f"no signal ({bad['kind']}): {bad['message']}: no colour"
    elif raw and not any(math.isfinite(v) for v in vals):
        note = "no finite score (all NaN): no colour" if not vals else "no finite score (all ±inf or NaN): no colour"
    elif vals and vmax < ZERO_TOL:
        note = f"all scores ≈ 0 (max |score| = {vmax:.2g}): no colour"
    elif len(vals) > 1 and max(vals) - min(vals) <= FLAT_REL * vmax:
        note = f"all scores ≈ {vals[0]:+.4g} (near-constant): no colour"
    return Scale(signed, vmax, note, caveat)


def strip(attr, words: bool = True):
    """(labels, values, fixed) of a 1-D result: one entry per word (or token); ``fixed`` marks
    entries with no attributed token (template, special), whose value is NaN."""
    L = len(attr.tokens)
    groups = attr.word_groups() if words else [[i] for i in range(L)]
    labels = attr.word_labels() if words else attr.token_labels()
    if words:
        vals = attr.words()[1]
    else:
        vals = [float(s) if a else float("nan") for s, a in zip(attr.scores.tolist(), attr.attributable)]
    fixed = [not any(attr.attributable[i] for i in g) for g in groups]
    return labels, vals, fixed


def fixed_columns(attr, words: bool = True) -> List[bool]:
    """Whether each column of :func:`grid` is held fixed (no token of it attributed): a NaN there
    is "held fixed", elsewhere a NaN score."""
    groups = attr.word_groups() if words else [[i] for i in range(len(attr.tokens))]
    return [not any(attr.attributable[i] for i in g) for g in groups]


def grid(attr, words: bool = True):
    """The layout of a generation result: (column labels, row labels, rows of values, visible),
    ``visible[t][c]`` = column c is in step t's context (its first token precedes the token
    that step explains); invisible cells are NaN and drawn blank."""
    L = len(attr.tokens)
    Lp = attr.prompt_length
    groups = attr.word_groups() if words else [[i] for i in range(L)]
    labels = attr.word_labels() if words else attr.token_labels()
    if words:
        rows = attr.words()[1]
    else:
        rows = [[v if a else float("nan") for v, a in zip(r, attr.attributable)] for r in attr.scores.tolist()]
    tok_labels = attr.token_labels()
    T = len(rows)
    row_labels = [tok_labels[Lp + t] if Lp + t < L else "?" for t in range(T)]
    visible = [[g[0] < Lp + t for g in groups] for t in range(T)]
    return labels, row_labels, rows, visible

