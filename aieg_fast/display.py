"""Views of an :class:`~aieg_fast.result.Attribution`: word grouping, the terminal heatmap and HTML."""
from __future__ import annotations

import html as _html
import math
import sys
from typing import List, Optional

import torch

__all__ = ["aggregate_words", "show", "to_html"]

_WORD_MARKERS = ("Ġ", "▁", "Ċ", " ", "\n", "\t")


def aggregate_words(tokens: List[str], scores, special: Optional[List[bool]] = None, reduce: str = "sum"):
    """Group sub-word tokens into words and aggregate their scores.

    A new word starts at a token whose raw form begins with a word marker — byte-level BPE
    ``"Ġ"`` (space) / ``"Ċ"`` (newline), SentencePiece ``"▁"``, or a literal space — and at
    every special token and the token after one. Source: reconstruction (the AIEG paper reports
    word-level scores without a rule), see specs/aieg.md §6.1.

    Args:
        tokens (List[str]): raw token strings (``tokenizer.convert_ids_to_tokens``).
        scores (Tensor[L] or list): token scores; NaN entries are skipped in the aggregate.
        special (List[bool], optional): special-token flags.
        reduce: ``"sum"`` (default), ``"mean"`` or ``"max"``.

    Returns:
        (words: List[str], word_scores: List[float], token_to_word: List[int]).

    Raises:
        ValueError: unknown ``reduce`` or length mismatch.
    """
    if reduce not in ("sum", "mean", "max"):
        raise ValueError(f"reduce must be 'sum', 'mean' or 'max', got {reduce!r}")
    vals = [float(x) for x in (scores.tolist() if torch.is_tensor(scores) else scores)]
    if len(vals) != len(tokens):
        raise ValueError(f"scores has {len(vals)} entries but tokens has {len(tokens)}")
    special = special or [False] * len(tokens)
    groups: List[List[int]] = []
    for i, tok in enumerate(tokens):
        starts = (
            i == 0
            or special[i]
            or special[i - 1]
            or tok.startswith(_WORD_MARKERS)
        )
        if starts:
            groups.append([i])
        else:
            groups[-1].append(i)
    words, wscores, tok2word = [], [], [0] * len(tokens)
    for g_idx, g in enumerate(groups):
        text = "".join(tokens[i] for i in g)
        for m in _WORD_MARKERS:
            text = text.replace(m, " " if m in ("Ġ", "▁", " ") else ("\\n" if m in ("Ċ", "\n") else " "))
        words.append(text.strip() or text)
        vs = [vals[i] for i in g if not math.isnan(vals[i])]
        if not vs:
            wscores.append(float("nan"))
        elif reduce == "sum":
            wscores.append(sum(vs))
        elif reduce == "mean":
            wscores.append(sum(vs) / len(vs))
        else:
            wscores.append(max(vs))
        for i in g:
            tok2word[i] = g_idx
    return words, wscores, tok2word


def _rgb(v: float, vmax: float):
    """Red for positive, blue for negative, white at 0."""
    if math.isnan(v) or vmax <= 0:
        return (255, 255, 255)
    t = max(-1.0, min(1.0, v / vmax))
    if t >= 0:
        return (255, int(255 * (1 - t)), int(255 * (1 - t)))
    return (int(255 * (1 + t)), int(255 * (1 + t)), 255)


def show(attr, file=None, words: bool = True, width: int = 100, top_k: int = 5) -> None:
    """Print a terminal heatmap (red = drives the target, blue = against it) and a score table.

    A 2-D (generation) result prints one line per generated token: the token, then the
    ``top_k`` prefix words (or tokens) with their scores, coloured per row on a terminal.
    """
    file = file or sys.stdout
    color = hasattr(file, "isatty") and file.isatty()
    if attr.scores.dim() == 2:
        _show_generation(attr, file, words, top_k, color)
        return
    if words:
        labels, vals = attr.words()
    else:
        labels = [t for t, a in zip(attr.tokens, attr.attributable) if a]
        vals = [float(s) for s, a in zip(attr.scores, attr.attributable) if a]
    # a whitespace-only word (e.g. a trailing space token) has nothing to show
    shown = [(lab, v) for lab, v in zip(labels, vals) if lab.strip()]
    labels, vals = [lab for lab, _ in shown], [v for _, v in shown]
    finite = [abs(v) for v in vals if not math.isnan(v)]
    vmax = max(finite) if finite else 0.0
    tgt = attr.target.get("text", attr.target.get("id"))
    print(f"method: {attr.method}   target: {tgt!r}   model: {attr.model}", file=file)
    line, out = "", []
    for lab, v in zip(labels, vals):
        if math.isnan(v):
            continue
        if color:
            r, g, b = _rgb(v, vmax)
            piece = f"\x1b[48;2;{r};{g};{b}m\x1b[38;2;0;0;0m{lab}\x1b[0m "
        else:
            piece = f"{lab}[{v / vmax if vmax else 0:+.2f}] "
        if len(line) + len(lab) + 8 > width and line:
            out.append(line)
            line = ""
        line += piece
    out.append(line)
    print("\n".join(out), file=file)
    bar_w = 30
    for lab, v in zip(labels, vals):
        if math.isnan(v):
            continue
        n = int(round(bar_w * abs(v) / vmax)) if vmax else 0
        bar = ("█" * n).ljust(bar_w)
        print(f"  {lab[:18]:>18} {v:+.4f} {'+' if v >= 0 else '-'}{bar}", file=file)

def _row_labels(attr, words: bool):
    """(labels, rows of values, first token index of each label) for a 2-D result."""
    if words:
        labels, rows = attr.words()
        _, _, t2w = aggregate_words(attr.raw_tokens, [0.0] * len(attr.tokens), attr.special)
        first = [t2w.index(w) for w in range(len(labels))]
    else:
        mask = torch.tensor(attr.attributable, dtype=torch.bool)
        sc = attr.scores.clone()
        sc[:, ~mask] = float("nan")
        labels, rows, first = list(attr.tokens), sc.tolist(), list(range(len(attr.tokens)))
    return labels, rows, first

def _show_generation(attr, file, words: bool, top_k: int, color: bool) -> None:
    labels, rows, _ = _row_labels(attr, words)
    gen_ids = attr.info.get("generated_ids") or []
    T = len(rows)
    Lp = attr.info.get("prompt_length", len(attr.tokens) - T)
    gen_tokens = attr.tokens[Lp:]
    prompt = attr.info.get("prompt", "".join(attr.tokens[:Lp]))
    gen_text = attr.info.get("generated_text", "".join(gen_tokens))
    how = "teacher forced" if attr.info.get("teacher_forced") else "greedy"
    print(f"method: {attr.method}   generation: {T} tokens ({how})   model: {attr.model}", file=file)
    print(f"prompt:    {prompt!r}", file=file)
    print(f"generated: {gen_text!r}", file=file)
    print(f"per step: the generated token, then the {top_k} prefix {'words' if words else 'tokens'} with the largest |score|", file=file)

    def piece(lab, v, vmax):
        lab = lab.replace("\n", "\\n")
        if color:
            r, g, b = _rgb(v, vmax)
            return f"\x1b[48;2;{r};{g};{b}m\x1b[38;2;0;0;0m{lab}\x1b[0m {v:+.3g}"
        return f"{lab} {v:+.3g}"

    def line(head, vals):
        finite = [(i, v) for i, v in enumerate(vals) if not math.isnan(v)]
        vmax = max((abs(v) for _, v in finite), default=0.0)
        finite.sort(key=lambda p: -abs(p[1]))
        body = " | ".join(piece(labels[i][:16], v, vmax) for i, v in finite[:top_k])
        return head + (body or "(no attributed token)")

    for t in range(T):
        tok = gen_tokens[t] if t < len(gen_tokens) else str(gen_ids[t] if t < len(gen_ids) else "?")
        print(line(f"  {t + 1:>3} {tok!r:<14.14} <- ", rows[t]), file=file)
    if T > 1:
        mean = []
        for j in range(len(labels)):
            col = [r[j] for r in rows if not math.isnan(r[j])]
            mean.append(sum(col) / len(col) if col else float("nan"))
        print(line(f"  {'mean over steps':<18} <- ", mean), file=file)

def _generation_html(attr, words: bool) -> str:
    labels, rows, first = _row_labels(attr, words)
    T = len(rows)
    Lp = attr.info.get("prompt_length", len(attr.tokens) - T)
    gen_tokens = attr.tokens[Lp:]
    trs = []
    for t in range(T):
        finite = [abs(v) for v in rows[t] if not math.isnan(v)]
        vmax = max(finite) if finite else 0.0
        spans = []
        for lab, v, f0 in zip(labels, rows[t], first):
            if f0 >= Lp + t:  # not visible at this step
                continue
            r, g, b = _rgb(v, vmax)
            title = "fixed" if math.isnan(v) else f"{v:.4g}"
            spans.append(
                f'<span title="{title}" style="background: rgb({r},{g},{b}); padding: 1px 2px; '
                f'margin: 1px; border-radius: 3px">{_html.escape(lab)}</span>'
            )
        tok = _html.escape(gen_tokens[t] if t < len(gen_tokens) else "")
        trs.append(f"<tr><td><b>{tok}</b></td><td>{' '.join(spans)}</td></tr>")
    gen = _html.escape(str(attr.info.get("generated_text", "".join(gen_tokens))))
    return (
        f'<div class="aieg-fast"><p><b>{_html.escape(attr.method)}</b> — generation {gen} — '
        f"{_html.escape(attr.model)}</p><table>{''.join(trs)}</table></div>"
    )

def to_html(attr, words: bool = True) -> str:
    """A self-contained HTML snippet with the heatmap (background colour per word or token).

    A 2-D (generation) result gives a table with one row per generated token.
    """
    if attr.scores.dim() == 2:
        return _generation_html(attr, words)
    labels, vals = attr.words() if words else (attr.tokens, [float(s) for s in attr.scores])
    finite = [abs(v) for v in vals if not math.isnan(v)]
    vmax = max(finite) if finite else 0.0
    spans = []
    for lab, v in zip(labels, vals):
        r, g, b = _rgb(v, vmax)
        title = "fixed" if math.isnan(v) else f"{v:.4g}"
        spans.append(
            f'<span title="{title}" style="background: rgb({r},{g},{b}); padding: 1px 2px; '
            f'margin: 1px; border-radius: 3px">{_html.escape(lab)}</span>'
        )
    tgt = _html.escape(str(attr.target.get("text", attr.target.get("id"))))
    return (
        f'<div class="aieg-fast"><p><b>{_html.escape(attr.method)}</b> — target {tgt} — '
        f"{_html.escape(attr.model)}</p><p>{' '.join(spans)}</p></div>"
    )

