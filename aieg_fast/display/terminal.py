"""The terminal heatmap, drawn with `rich <https://rich.readthedocs.io>`_: words (or tokens) on
a coloured background wrapped to the console's width, then a score table; one line per step
for a generation result. The colours come from the scale the HTML view uses (:mod:`.scale`)."""
from __future__ import annotations

import math
from collections import Counter
from typing import Optional

from rich.cells import cell_len
from rich.color import Color
from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.style import Style
from rich.table import Table
from rich.text import Text

from ..core.validation import as_int, check_bool, check_int
from .scale import Scale, caution_flag_of_steps, caution_steps, grid, make_scale, no_signal, row_flags, strip
from .words import describe_step_target, describe_target, printable, target_probability

__all__ = ["Heatmap", "show", "printable"]

#: narrowest line width :func:`show` draws to
MIN_WIDTH = 20
#: the fewest cells a context word of a step line keeps when it is shortened to fit the line
MIN_LABEL = 3
#: rich's names of the colour systems with 16 colours only
PALETTE_16 = ("standard", "windows")


def cell_style(scale: Scale, v: float, system: Optional[str] = None) -> Style:
    """The style of a cell of value ``v``: background :meth:`Scale.rgb`, text :meth:`Scale.ink`.

    On a 16-colour terminal (``system`` one of :data:`PALETTE_16`, as ``console.color_system``
    names it) the background is a palette colour instead, one family per sign: light red for
    up to half the scale's maximum and red beyond above 0, light blue and blue below 0 (light
    yellow and yellow on the sequential scale), white at 0. The RGB colours rounded to that
    palette gave small scores of either sign the same white or grey."""
    if system not in PALETTE_16:
        return Style(bgcolor=Color.from_rgb(*scale.rgb(v)), color=Color.from_rgb(*scale.ink(v)))
    t = 0.0 if scale.note or math.isnan(v) or scale.vmax <= 0 else max(-1.0, min(1.0, v / scale.vmax))
    if t == 0:
        return Style(bgcolor="bright_white", color="black")
    hue = ("red" if t > 0 else "blue") if scale.signed else "yellow"
    if abs(t) <= 0.5:
        return Style(bgcolor=f"bright_{hue}", color="black")
    return Style(bgcolor=hue, color="black" if hue == "yellow" else "bright_white")


def _painter(console: Console):
    """The cell style function of ``console`` (:func:`cell_style` for its colour system), or None
    where it shows no colour (:func:`uses_colour`)."""
    if not uses_colour(console):
        return None
    system = console.color_system
    return lambda scale, v: cell_style(scale, v, system)


def _check_view(words, top_k) -> int:
    """The checks :func:`show` and :class:`Heatmap` share: ``words`` a bool, ``top_k`` a positive
    int (a NumPy or one-element tensor integer too); ``top_k`` as a Python int."""
    check_bool("words", words)
    top_k = as_int(top_k)
    check_int("top_k", top_k, 1)
    return top_k


def uses_colour(console: Console) -> bool:
    """Whether ``console`` shows colours: a colour system was detected (a terminal, Jupyter,
    ``FORCE_COLOR``; not ``TERM=dumb``) and ``NO_COLOR`` is not set."""
    return console.color_system is not None and not console.no_color


class Heatmap:
    """A rich renderable of an attribution result: ``console.print(Heatmap(res))``.

    Drawn to the width the console offers. With colour (:func:`uses_colour`) each word (or
    token) sits on its score's background colour (:func:`cell_style`); without colour it is
    followed by its score over the largest |score| (``word[+0.42]``). Held-fixed (template, special) words are shown
    in brackets ``[...]``. A near-zero or near-constant result says so (``scale: all scores ≈
    ...``) and is drawn without colour or values. A 2-D (generation) result draws one line per
    generated token: the token, then the ``top_k`` context words (or tokens) with the largest
    |score| (as many as fit the line whole, on the next line when none fits beside the token;
    the others counted, ``(+2)``).

    Args:
        attr: an :class:`~aieg_fast.result.Attribution` (scores ``[L]`` or ``[T, L]``).
        words: group tokens into words (``attr.word_groups()``), else one entry per token.
        top_k: entries per line of a generation result.

    Raises:
        ValueError: ``words`` not a bool, ``top_k`` not an int ≥ 1 (as :func:`show`).
    """

    def __init__(self, attr, words: bool = True, top_k: int = 5):
        top_k = _check_view(words, top_k)
        self.attr, self.words, self.top_k = attr, words, top_k

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        paint, width = _painter(console), options.max_width
        if self.attr.scores.dim() == 2:
            yield from _generation(self.attr, self.words, self.top_k, paint, width)
        else:
            yield from _next_token(self.attr, self.words, paint, width)


class _Pairs:
    """``parts`` (``label: value`` strings, or Texts) side by side, three spaces apart, as many to
    a line as the width holds: a part moves to the next line whole, never broken between its
    label and its value (a part wider than the line wraps within itself). No padding after the
    last part of a line (rich's Columns pads each to its column's width)."""

    def __init__(self, parts):
        self.parts = [p if isinstance(p, Text) else Text(p) for p in parts]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line: list = []
        for part in self.parts:
            if line and sum(p.cell_len for p in line) + 3 * len(line) + part.cell_len > options.max_width:
                yield Text("   ").join(line)
                line = []
            line.append(part)
        if line:
            yield Text("   ").join(line)


def _header(attr):
    """``method: ...   target: ...   p(target): ...   F(x): ...`` (the last two when known; a pair
    is never split across lines, :class:`_Pairs`), then ``model: ...``."""
    parts = [f"method: {printable(str(attr.method))}", f"target: {printable(describe_target(attr))}"]
    prob = target_probability(attr)
    if prob is not None:
        parts.append(f"p(target): {prob:.3g}")
    if isinstance(attr.info.get("F_input"), (int, float)):
        parts.append(f"F(x): {attr.info['F_input']:.4g}")
    yield _Pairs(parts)
    yield Text(f"model: {printable(str(attr.model))}")


def _legend(scale: Scale, paint) -> _Pairs:
    """``scale: diverging, ±0.53`` and, with colour (``paint``, see :func:`_painter`), a colour bar
    from its lowest to its highest value; without colour, what the bracketed values of the text
    are (score / largest |score|, where the table prints the scores). The two parts go on one line
    where it holds them, else one under the other (:class:`_Pairs`). The scale's note and caveat
    quote the result's flags: written with :func:`printable`."""
    parts = [Text(f"scale: {printable(scale.legend)}")]
    if not paint and not scale.note and scale.vmax > 0:
        parts.append(Text(f"[±x] = score / {scale.vmax:.3g} (the largest |score|); the table: scores"))
    if paint and not scale.note and scale.vmax > 0:
        lo = -scale.vmax if scale.signed else 0.0
        bar = Text(f"{'−' if scale.signed else ''}{scale.vmax if scale.signed else 0:.3g} ")
        for k in range(9):
            v = lo + (scale.vmax - lo) * k / 8
            bar.append("  ", style=Style(bgcolor=paint(scale, v).bgcolor))
        bar.append(f" +{scale.vmax:.3g}")
        parts.append(bar)
    return _Pairs(parts)


def _body(labels, vals, fixed, scale: Scale, paint) -> Text:
    """The words joined by spaces, each coloured (or followed by its value); rich wraps it. An
    attributed word whose score is NaN is followed by ``[nan]`` (it is not in the table)."""
    out = Text()
    for k, (lab, v, fx) in enumerate(zip(labels, vals, fixed)):
        if k:
            out.append(" ")
        if fx:
            out.append(f"[{lab}]", style="dim" if paint else "")
        elif math.isnan(v):
            out.append(f"{lab}[nan]", style="bold" if paint else "")
        elif scale.note:
            out.append(lab)
        elif paint:
            out.append(lab, style=paint(scale, v))
        else:
            out.append(f"{lab}[{v / scale.vmax if scale.vmax else 0:+.2f}]")
    return out


def _table(labels, vals, fixed, scale: Scale, paint, width: int) -> Padding:
    """One row per attributed word: the word, its score and a bar of |score| / max |score|.
    The score is printed whole; at a narrow width the bar, then the word, is shortened to fit."""
    rows = [(lab, v, f"{v:+.4g}") for lab, v, fx in zip(labels, vals, fixed) if not fx and not math.isnan(v)]
    num_w = max((len(num) for _, _, num in rows), default=1)
    lab_w = max(1, min(18, max((cell_len(lab) for lab, _, _ in rows), default=1)))
    room = width - 5 - num_w  # the indent, two column gaps and the sign before the bar
    bar_w = max(0, min(max(5, min(30, width - 34)), room - min(lab_w, 6)))  # the bar gives way first
    lab_w = max(1, min(lab_w, room - bar_w))
    table = Table(box=None, show_header=False, padding=(0, 1, 0, 0), pad_edge=False)
    table.add_column(justify="right", width=lab_w, no_wrap=True, overflow="ellipsis")
    table.add_column(width=num_w, no_wrap=True)
    table.add_column(width=bar_w + 1, no_wrap=True, overflow="crop")
    painted = paint and not scale.note
    for lab, v, num in rows:
        n = int(round(bar_w * min(abs(v) / scale.vmax, 1.0))) if scale.vmax and not scale.note else 0  # ±inf: a full bar
        bar_style = Style(color=paint(scale, math.copysign(scale.vmax, v)).bgcolor) if painted else ""
        table.add_row(Text(lab, style=paint(scale, v) if painted else ""), num,
                      Text.assemble("+" if v >= 0 else "-", ("█" * n, bar_style)))
    return Padding(table, (0, 0, 0, 2), expand=False)


def _next_token(attr, words: bool, paint, width: int):
    labels, vals, fixed = strip(attr, words)
    labels = [printable(x) for x in labels]
    scale = make_scale(vals, row_flags(attr))
    yield from _header(attr)
    yield _legend(scale, paint)
    yield _body(labels, vals, fixed, scale, paint)
    yield _table(labels, vals, fixed, scale, paint, width)


def _more(n: int) -> str:
    """The note that ``n`` entries of a step line did not fit the width."""
    return f" (+{n})"


def _entries(entries, room: int) -> Optional[Text]:
    """As many ``(label, number)`` entries, largest first, as fit whole in ``room`` columns, joined
    by `` | ``, then the count of those left out; the first entry alone with its label shortened
    (to :data:`MIN_LABEL` cells at least) when no entry fits as it is; None when not even that
    fits. A number is never cut (a cut ``+3.4e-05`` read as ``+3.4``)."""
    n = len(entries)
    pieces = [Text.assemble(" | " if k else "", lab, num) for k, (lab, num) in enumerate(entries)]
    more = [_more(n - k) if k < n else "" for k in range(n + 1)]  # the note when k entries are shown
    shown = next((k for k in range(n, 0, -1) if sum(p.cell_len for p in pieces[:k]) + len(more[k]) <= room), 0)
    if not shown:
        lab, num = entries[0]
        fit = room - len(num) - len(more[1])
        if fit < min(MIN_LABEL, lab.cell_len):
            return None
        lab = lab.copy()
        lab.truncate(fit, overflow="ellipsis")
        pieces[0], shown = Text.assemble(lab, num), 1
    out = Text()
    for p in pieces[:shown]:
        out.append_text(p)
    out.append(more[shown], style="dim")
    return out


def _step_line(head: str, labels, vals, vis, top_k: int, paint, width: int, flags=()) -> Text:
    """``head`` then the ``top_k`` visible entries with the largest |score| that fit whole in
    ``width`` columns and how many more did not fit (:func:`_entries`), each coloured on the
    row's own scale; on a second line, indented, when not one fits beside the head; or the row's
    note (flat, or without signal according to its ``flags``)."""
    finite = [(i, v) for i, v in enumerate(vals) if vis[i] and not math.isnan(v)]
    scale = make_scale([v for _, v in finite], flags)
    finite.sort(key=lambda p: -abs(p[1]))
    out = Text(head, no_wrap=True, overflow="ellipsis")
    if scale.note:
        out.append(printable(scale.note))
        return out
    if not finite:
        out.append("(no attributed token)")
        return out
    entries = []
    for i, v in finite[:top_k]:
        lab = Text(labels[i], style=paint(scale, v) if paint else "")
        lab.truncate(16, overflow="ellipsis")
        entries.append((lab, f" {v:+.3g}"))
    line = _entries(entries, width - out.cell_len)
    if line is None:  # not one entry fits beside the head: they go on the next line
        out.rstrip()
        out.append("\n  ")
        line = _entries(entries, width - 2) or Text(f"(+{len(entries)})", style="dim")
    out.append_text(line)
    return out


def _cut(s: str, n: int) -> str:
    """``s`` cut (with an ellipsis) or padded to ``n`` cells."""
    out = Text(s)
    out.truncate(n, overflow="ellipsis", pad=True)
    return out.plain


def _generation(attr, words: bool, top_k: int, paint, width: int):
    labels, row_labels, rows, visible = grid(attr, words)
    labels, row_labels = [printable(x) for x in labels], [printable(x) for x in row_labels]
    T = len(rows)
    Lp = attr.prompt_length
    how = "teacher forced" if attr.info.get("teacher_forced") else "greedy"
    prompt = attr.info.get("prompt", "".join(attr.tokens[:Lp]))
    gen_text = attr.info.get("generated_text", "".join(attr.tokens[Lp:]))
    step = describe_step_target(attr)
    yield Text(f"method: {printable(str(attr.method))}   generation: {T} tokens ({how})" + (f", {printable(step)}" if step else ""))
    yield Text(f"model: {printable(str(attr.model))}")
    yield Text(f"prompt:    {prompt!r}")
    yield Text(f"generated: {gen_text!r}")
    yield Text(f"per step: the generated token, then the {top_k} context {'words' if words else 'tokens'} with the largest |score| "
               "(+n: n more that the width leaves out)")
    scales = ["colours: each line on its own scale (HTML and plot: one for all)"] if paint else []
    if T > 1:
        scales.append("mean over steps: each entry's mean over the steps that see it (the last tokens: over few)")
    if scales:
        yield Text("; ".join(scales))
    warned = caution_steps(attr)
    if warned:  # a large IG completeness error: the steps keep their colours, marked ⚠
        yield Text(f"caution: {printable(caution_flag_of_steps(attr)[0]['message'])}")
    tok_w = max(1, min(12, width - 10))  # the step's token: 12 cells, fewer on a narrow line
    for t in range(T):
        head = f"{'⚠' if t in warned else ' '} {t + 1:>3} {_cut(row_labels[t], tok_w)} <- "
        yield _step_line(head, labels, rows[t], visible[t], top_k, paint, width, row_flags(attr, t))
    if T > 1:
        silent = [no_signal(row_flags(attr, t)) for t in range(T)]
        kept = [r for r, flag in zip(rows, silent) if flag is None]  # rows without signal do not count
        mean = []
        for j in range(len(labels)):
            col = [r[j] for r in kept if not math.isnan(r[j])]
            mean.append(sum(col) / len(col) if col else float("nan"))
        flags = [] if kept else [_silent_steps(silent)]
        yield _step_line(f"  {_cut('mean over steps', tok_w + 4)} <- ", labels, mean, [True] * len(labels), top_k, paint, width,
                         flags)


def _silent_steps(silent) -> dict:
    """The flag of the ``mean over steps`` line when none of the steps carries a signal
    (``silent``: each step's no-signal flag): the kind most steps are flagged with (the first of
    a tie); the message counts the steps of any other kind (``no step carries a signal, 1 step
    zero_signal``)."""
    kinds = Counter(flag["kind"] for flag in silent)
    kind = kinds.most_common(1)[0][0]
    others = "".join(f", {n} step{'s' if n > 1 else ''} {k}" for k, n in kinds.items() if k != kind)
    return {"kind": kind, "message": f"no step carries a signal{others}"}


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
    ``top_k`` context words (or tokens) with the largest |score| that fit the width (the entries
    left out are counted, ``(+2)``; a number is printed whole or not at all; on a narrow
    terminal, where none fits beside the token, they go on a second line), each line coloured
    on its own scale (its largest |score|; the HTML and plot views use one scale for all steps),
    then a ``mean over steps`` line: each entry's mean over the steps that see it (a token
    generated late is averaged over the few steps after it), steps without signal left out. A
    result (or a step) flagged in ``attr.degenerate`` as carrying no signal is printed without
    colour, with the reason; a large IG completeness error keeps the colours and adds a caution
    (in the scale line, or for a generation on a line of its own, the steps so flagged marked
    ``⚠``). On a 16-colour terminal the two signs keep distinct colours (:func:`cell_style`).
    Every text from the result (tokens, target, method, model, flag messages) is printed with
    its control characters written as escapes (:func:`~aieg_fast.display.words.printable`).

    Args:
        attr: an :class:`~aieg_fast.result.Attribution` (scores ``[L]`` or ``[T, L]``).
        file: text stream, an object with a ``write(str)`` method (default ``sys.stdout``); to
            write to a file, pass ``open(path, "w")``.
        words: group tokens into words (``attr.word_groups()``), else one entry per token.
        width: line width in columns, an int ≥ :data:`MIN_WIDTH` (20); default None: the
            terminal's, or ``$COLUMNS``, else 80, as rich finds it (raised to 20 when less).
            Lines wrap on visible width (colour codes and wide characters accounted for); a
            header pair (``p(target): 0.00317``) moves to the next line whole, never split.
        top_k: entries per line of a generation result.

    Raises:
        ValueError: ``words`` not a bool, ``width`` not None or an int ≥ 20, ``top_k`` not an int ≥ 1.
        TypeError: ``file`` not None and without a ``write`` method (a path, say).
    """
    top_k, width = _check_view(words, top_k), as_int(width)
    check_int("width", width, MIN_WIDTH, optional=True)
    if file is not None and not callable(getattr(file, "write", None)):
        raise TypeError(f"file must be a text stream with a write() method (sys.stdout, open(path, 'w')) or None, got {file!r}")
    console = Console(file=file, width=width, highlight=False, markup=False,
                      emoji=False, force_jupyter=False if file is not None else None)
    console.width = max(console.width, MIN_WIDTH)
    console.print(Heatmap(attr, words, top_k))
