"""The terminal heatmap: words (or tokens) on a coloured background, wrapped to the terminal's
visible width, then a score table; one line per step for a generation result."""
from __future__ import annotations

import math
import shutil
import sys
from typing import List, Optional

from .scale import clip, grid, make_scale, pad, strip, text_width

__all__ = ["show"]


def _paint(lab: str, v: float, scale, color: bool) -> str:
    if not color or math.isnan(v):
        return lab
    (r, g, b), (ir, ig, ib) = scale.rgb(v), scale.ink(v)
    return f"\x1b[48;2;{r};{g};{b}m\x1b[38;2;{ir};{ig};{ib}m{lab}\x1b[0m"


def _wrap(pieces: List[tuple], width: int) -> List[str]:
    """Lines of ``(text, visible width)`` pieces joined by spaces, each at most ``width`` columns."""
    lines, line, used = [], [], 0
    for text, w in pieces:
        if line and used + 1 + w > width:
            lines.append(" ".join(line))
            line, used = [], 0
        used += (1 if line else 0) + w
        line.append(text)
    if line:
        lines.append(" ".join(line))
    return lines


def _header(attr) -> str:
    tgt = attr.target.get("text", attr.target.get("id"))
    extra = f"   F(x): {attr.info['F_input']:.4g}" if isinstance(attr.info.get("F_input"), (int, float)) else ""
    return f"method: {attr.method}   target: {tgt!r}   model: {attr.model}{extra}"


def show(attr, file=None, words: bool = True, width: Optional[int] = None, top_k: int = 5) -> None:
    """Print a terminal heatmap and a score table of ``attr``.

    Colours (on a terminal only): red = drives the target, blue = against it (diverging scale
    for signed scores; white to orange for non-negative ones); held-fixed (template, special)
    words are printed in brackets ``[...]``; whitespace carrying a score shows as ``␣`` / ``⏎``.
    A near-zero or near-constant result says so and is printed without colour. A 2-D
    (generation) result prints one line per generated token: the token, then the ``top_k``
    context words (or tokens) with the largest |score|.

    Args:
        attr: an :class:`~aieg_fast.result.Attribution`.
        file: text stream (default ``sys.stdout``); colour only when it is a TTY.
        words: group tokens into words (``attr.word_groups()``), else one entry per token.
        width: line width in columns (default: the terminal's, ``shutil.get_terminal_size``).
            Lines wrap on visible width (colour codes and wide characters accounted for).
        top_k: entries per line of a generation result.
    """
    file = file or sys.stdout
    color = hasattr(file, "isatty") and file.isatty()
    width = int(width) if width else shutil.get_terminal_size((100, 24)).columns
    width = max(width, 20)
    if attr.scores.dim() == 2:
        _show_generation(attr, file, words, top_k, color, width)
        return
    labels, vals, fixed = strip(attr, words)
    scale = make_scale(vals)
    print(_header(attr), file=file)
    print(f"scale: {scale.legend}", file=file)
    pieces = []
    for lab, v, fx in zip(labels, vals, fixed):
        if fx:
            text = plain = f"[{lab}]"
        elif color and not scale.note:
            text, plain = _paint(lab, v, scale, color), lab
        else:
            text = plain = f"{lab}[{v / scale.vmax if scale.vmax and not scale.note else 0:+.2f}]"
        pieces.append((text, text_width(plain)))
    print("\n".join(_wrap(pieces, width)), file=file)
    bar_w = max(5, min(30, width - 34))
    for lab, v, fx in zip(labels, vals, fixed):
        if fx or math.isnan(v):
            continue
        n = int(round(bar_w * abs(v) / scale.vmax)) if scale.vmax and not scale.note else 0
        bar = ("█" * n).ljust(bar_w)
        print(f"  {pad(clip(lab, 18), 18, right=True)} {v:+.4g}".ljust(2 + 18 + 12) + f" {'+' if v >= 0 else '-'}{bar}", file=file)


def _show_generation(attr, file, words: bool, top_k: int, color: bool, width: int) -> None:
    labels, row_labels, rows, visible = grid(attr, words)
    T = len(rows)
    Lp = attr.prompt_length
    how = "teacher forced" if attr.info.get("teacher_forced") else "greedy"
    prompt = attr.info.get("prompt", "".join(attr.tokens[:Lp]))
    gen_text = attr.info.get("generated_text", "".join(attr.tokens[Lp:]))
    print(f"method: {attr.method}   generation: {T} tokens ({how})   model: {attr.model}", file=file)
    print(f"prompt:    {prompt!r}", file=file)
    print(f"generated: {gen_text!r}", file=file)
    print(f"per step: the generated token, then the {top_k} context {'words' if words else 'tokens'} with the largest |score|", file=file)

    def line(head: str, vals, vis) -> str:
        finite = [(i, v) for i, v in enumerate(vals) if vis[i] and not math.isnan(v)]
        scale = make_scale([v for _, v in finite])
        finite.sort(key=lambda p: -abs(p[1]))
        out, used = head, text_width(head)
        if scale.note:
            return out + scale.note
        for k, (i, v) in enumerate(finite[:top_k]):
            lab = clip(labels[i], 16)
            sep = " | " if k else ""
            w = len(sep) + text_width(lab) + len(f" {v:+.3g}")
            if k and used + w > width:
                break
            out += sep + _paint(lab, v, scale, color) + f" {v:+.3g}"
            used += w
        return out if finite else out + "(no attributed token)"

    for t in range(T):
        print(line(f"  {t + 1:>3} {pad(clip(row_labels[t], 12), 12)} <- ", rows[t], visible[t]), file=file)
    if T > 1:
        mean = []
        for j in range(len(labels)):
            col = [r[j] for r in rows if not math.isnan(r[j])]
            mean.append(sum(col) / len(col) if col else float("nan"))
        print(line(f"  {'mean over steps':<18} <- ", mean, [True] * len(labels)), file=file)
