"""The terminal heatmap, drawn with `rich <https://rich.readthedocs.io>`_: words (or tokens) on
a coloured background wrapped to the console's width, then a score table; one line per step
for a generation result. The colours come from the scale the HTML view uses (:mod:`.scale`)."""
from __future__ import annotations

import math
from typing import Optional

from rich.color import Color
from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.style import Style
from rich.table import Table
from rich.text import Text

from ..core.validation import check_bool, check_int
from .scale import Scale, grid, make_scale, no_signal, row_flags, strip
from .words import describe_target, printable, target_probability

__all__ = ["Heatmap", "show", "printable"]

#: narrowest line width :func:`show` draws to
MIN_WIDTH = 20


def cell_style(scale: Scale, v: float) -> Style:
    """The style of a cell of value ``v``: background :meth:`Scale.rgb`, text :meth:`Scale.ink`."""
    return Style(bgcolor=Color.from_rgb(*scale.rgb(v)), color=Color.from_rgb(*scale.ink(v)))


def uses_colour(console: Console) -> bool:
    """Whether ``console`` shows colours: a colour system was detected (a terminal, Jupyter,
    ``FORCE_COLOR``; not ``TERM=dumb``) and ``NO_COLOR`` is not set."""
    return console.color_system is not None and not console.no_color


class Heatmap:
    """A rich renderable of an attribution result: ``console.print(Heatmap(res))``.

    Drawn to the width the console offers. With colour (:func:`uses_colour`) each word (or
    token) sits on its score's background colour; without colour it is followed by its score
    over the largest |score| (``word[+0.42]``). Held-fixed (template, special) words are shown
    in brackets ``[...]``. A near-zero or near-constant result says so (``scale: all scores ≈
    ...``) and is drawn without colour or values. A 2-D (generation) result draws one line per
    generated token: the token, then the ``top_k`` context words (or tokens) with the largest
    |score| (as many as fit the line).

    Args:
        attr: an :class:`~aieg_fast.result.Attribution` (scores ``[L]`` or ``[T, L]``).
        words: group tokens into words (``attr.word_groups()``), else one entry per token.
        top_k: entries per line of a generation result.
    """

    def __init__(self, attr, words: bool = True, top_k: int = 5):
        self.attr, self.words, self.top_k = attr, bool(words), int(top_k)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        color, width = uses_colour(console), options.max_width
        if self.attr.scores.dim() == 2:
            yield from _generation(self.attr, self.words, self.top_k, color, width)
        else:
            yield from _next_token(self.attr, self.words, color, width)


def _header(attr):
    """``method: ...   target: ...   p(target): ...   F(x): ...`` (the last two when known), then ``model: ...``."""
    parts = [f"method: {attr.method}", f"target: {printable(describe_target(attr))}"]
    prob = target_probability(attr)
    if prob is not None:
        parts.append(f"p(target): {prob:.3g}")
    if isinstance(attr.info.get("F_input"), (int, float)):
        parts.append(f"F(x): {attr.info['F_input']:.4g}")
    yield Text("   ".join(parts))
    yield Text(f"model: {attr.model}")


def _legend(scale: Scale, color: bool) -> Text:
    """``scale: diverging, ±0.53`` and, with colour, a colour bar from its lowest to its highest value."""
    out = Text(f"scale: {scale.legend}")
    if color and not scale.note and scale.vmax > 0:
        lo = -scale.vmax if scale.signed else 0.0
        out.append(f"   {'−' if scale.signed else ''}{scale.vmax if scale.signed else 0:.3g} ")
        for k in range(9):
            v = lo + (scale.vmax - lo) * k / 8
            out.append("  ", style=Style(bgcolor=Color.from_rgb(*scale.rgb(v))))
        out.append(f" +{scale.vmax:.3g}")
    return out


def _body(labels, vals, fixed, scale: Scale, color: bool) -> Text:
    """The words joined by spaces, each coloured (or followed by its value); rich wraps it."""
    out = Text()
    for k, (lab, v, fx) in enumerate(zip(labels, vals, fixed)):
        if k:
            out.append(" ")
        if fx:
            out.append(f"[{lab}]", style="dim" if color else "")
        elif scale.note or math.isnan(v):
            out.append(lab)
        elif color:
            out.append(lab, style=cell_style(scale, v))
        else:
            out.append(f"{lab}[{v / scale.vmax if scale.vmax else 0:+.2f}]")
    return out


def _table(labels, vals, fixed, scale: Scale, color: bool, width: int) -> Padding:
    """One row per attributed word: the word, its score and a bar of |score| / max |score|."""
    bar_w = max(5, min(30, width - 34))
    table = Table(box=None, show_header=False, padding=(0, 1, 0, 0), pad_edge=False)
    table.add_column(justify="right", max_width=18, no_wrap=True, overflow="ellipsis")
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True, overflow="crop")
    for lab, v, fx in zip(labels, vals, fixed):
        if fx or math.isnan(v):
            continue
        n = int(round(bar_w * min(abs(v) / scale.vmax, 1.0))) if scale.vmax and not scale.note else 0  # ±inf: a full bar
        paint = color and not scale.note
        bar_style = Style(color=Color.from_rgb(*scale.rgb(math.copysign(scale.vmax, v)))) if paint else ""
        table.add_row(
            Text(lab, style=cell_style(scale, v) if paint else ""),
            f"{v:+.4g}",
            Text.assemble("+" if v >= 0 else "-", ("█" * n, bar_style)),
        )
    return Padding(table, (0, 0, 0, 2), expand=False)


def _next_token(attr, words: bool, color: bool, width: int):
    labels, vals, fixed = strip(attr, words)
    labels = [printable(x) for x in labels]
    scale = make_scale(vals, row_flags(attr))
    yield from _header(attr)
    yield _legend(scale, color)
    yield _body(labels, vals, fixed, scale, color)
    yield _table(labels, vals, fixed, scale, color, width)


def _more(n: int) -> str:
    """The note that ``n`` entries of a step line did not fit the width."""
    return f" (+{n})"


def _step_line(head: str, labels, vals, vis, top_k: int, color: bool, width: int, flags=()) -> Text:
    """``head`` then the ``top_k`` visible entries with the largest |score| that fit in ``width``
    columns (at least one) and how many more did not fit, each coloured on the row's own scale;
    or the row's note (flat, or without signal according to its ``flags``)."""
    finite = [(i, v) for i, v in enumerate(vals) if vis[i] and not math.isnan(v)]
    scale = make_scale([v for _, v in finite], flags)
    finite.sort(key=lambda p: -abs(p[1]))
    out = Text(head, no_wrap=True, overflow="ellipsis")
    if scale.note:
        out.append(scale.note)
        return out
    pieces = []
    for k, (i, v) in enumerate(finite[:top_k]):
        lab = Text(labels[i], style=cell_style(scale, v) if color else "")
        lab.truncate(16, overflow="ellipsis")
        pieces.append(Text.assemble(" | " if k else "", lab, f" {v:+.3g}"))
    shown = len(pieces)  # as many as fit with the count of those left out (at least one)
    while shown > 1 and out.cell_len + sum(p.cell_len for p in pieces[:shown]) + \
            (len(_more(len(pieces) - shown)) if shown < len(pieces) else 0) > width:
        shown -= 1
    for p in pieces[:shown]:
        out.append_text(p)
    if shown < len(pieces):
        out.append(_more(len(pieces) - shown), style="dim")
    if not finite:
        out.append("(no attributed token)")
    return out


def _generation(attr, words: bool, top_k: int, color: bool, width: int):
    labels, row_labels, rows, visible = grid(attr, words)
    labels, row_labels = [printable(x) for x in labels], [printable(x) for x in row_labels]
    T = len(rows)
    Lp = attr.prompt_length
    how = "teacher forced" if attr.info.get("teacher_forced") else "greedy"
    prompt = attr.info.get("prompt", "".join(attr.tokens[:Lp]))
    gen_text = attr.info.get("generated_text", "".join(attr.tokens[Lp:]))
    yield Text(f"method: {attr.method}   generation: {T} tokens ({how})")
    yield Text(f"model: {attr.model}")
    yield Text(f"prompt:    {prompt!r}")
    yield Text(f"generated: {gen_text!r}")
    yield Text(f"per step: the generated token, then the {top_k} context {'words' if words else 'tokens'} with the largest |score| "
               "((+n): n more that the width leaves out)")
    for t in range(T):
        tok = Text(row_labels[t])
        tok.truncate(12, overflow="ellipsis", pad=True)
        head = f"  {t + 1:>3} {tok.plain} <- "
        yield _step_line(head, labels, rows[t], visible[t], top_k, color, width, row_flags(attr, t))
    if T > 1:
        kept = [r for t, r in enumerate(rows) if no_signal(row_flags(attr, t)) is None]  # rows without signal do not count
        mean = []
        for j in range(len(labels)):
            col = [r[j] for r in kept if not math.isnan(r[j])]
            mean.append(sum(col) / len(col) if col else float("nan"))
        flags = [] if kept else [{"kind": "zero_signal", "message": "no step carries a signal"}]
        yield _step_line(f"  {'mean over steps':<16} <- ", labels, mean, [True] * len(labels), top_k, color, width, flags)


def show(attr, file=None, words: bool = True, width: Optional[int] = None, top_k: int = 5) -> None:
    """Print a terminal heatmap and a score table of ``attr`` (a :class:`Heatmap` on a rich
    ``Console``).

    Colours (red = drives the target, blue = against it on the diverging scale of signed
    scores; white to orange for non-negative ones) are shown where rich detects a colour
    terminal (``FORCE_COLOR`` forces them, ``NO_COLOR`` or ``TERM=dumb`` turns them off); other
    streams get plain text with each word's relative score, ``word[+0.42]``. Held-fixed
    (template, special) words are printed in brackets ``[...]``; whitespace carrying a score
    shows as ``␣`` / ``⏎``. A near-zero or near-constant result says so and is printed without
    colour. A 2-D (generation) result prints one line per generated token: the token, then the
    ``top_k`` context words (or tokens) with the largest |score|. A result (or a step) flagged
    in ``attr.degenerate`` as carrying no signal is printed without colour, with the reason.

    Args:
        attr: an :class:`~aieg_fast.result.Attribution` (scores ``[L]`` or ``[T, L]``).
        file: text stream (default ``sys.stdout``).
        words: group tokens into words (``attr.word_groups()``), else one entry per token.
        width: line width in columns (at least 20; default: the terminal's, or ``$COLUMNS``,
            else 80, as rich finds it). Lines wrap on visible width (colour codes and wide
            characters accounted for).
        top_k: entries per line of a generation result.

    Raises:
        ValueError: ``words`` not a bool, ``width`` not None or an int ≥ 1, ``top_k`` not an int ≥ 1.
    """
    check_bool("words", words)
    if width is not None:
        check_int("width", width, 1)
    check_int("top_k", top_k, 1)
    console = Console(file=file, width=width, highlight=False, markup=False,
                      emoji=False, force_jupyter=False if file is not None else None)
    console.width = max(console.width, MIN_WIDTH)
    console.print(Heatmap(attr, words, top_k))

