"""The result of one attribution: tokens, scores and everything needed to reproduce them."""
from __future__ import annotations

import html as _html
import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch

__all__ = ["Attribution", "load_attribution", "aggregate_words"]

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


@dataclass
class Attribution:
    """Token attribution for one input (or one row per generated token).

    Attributes:
        tokens (List[str]): display text of each input token (length L).
        token_ids (List[int]): the token ids (length L).
        scores (Tensor[L] or Tensor[T, L]): one score per token (float32, CPU). Positions held
            fixed (special, template, padding) hold 0 for gradient methods; ``attributable``
            marks the others. For a generation (:meth:`Explainer.attribute_generation`) one
            row per generated token, NaN where a token was not attributed for that row (not
            visible yet or held fixed); ``attributable[i]`` = column i is attributed in some row.
        method (str): method name (see :func:`aieg_fast.list_methods`).
        target (dict): ``{"kind": "token"|"class", "id": int, "text": str, ...}``.
        options (dict): every option the method ran with (defaults filled in).
        model (str): model name or path.
        backend (dict): op name → ``"ext"`` or ``"reference"`` for every kernel op used (empty
            when the method uses none).
        timing (dict): seconds per phase and ``total``.
        attributable (List[bool]): positions that were attributed (not held fixed).
        raw_tokens (List[str]): raw token strings (with ``Ġ``/``▁`` markers) for word grouping.
        special (List[bool]): special-token flags.
        info (dict): method-specific extras (``F_input``, ``F_baseline``, ``convergence_delta``,
            components); JSON-serialisable.
    """

    tokens: List[str]
    token_ids: List[int]
    scores: torch.Tensor
    method: str
    target: Dict[str, Any]
    options: Dict[str, Any] = field(default_factory=dict)
    model: str = ""
    backend: Dict[str, str] = field(default_factory=dict)
    timing: Dict[str, float] = field(default_factory=dict)
    attributable: List[bool] = field(default_factory=list)
    raw_tokens: List[str] = field(default_factory=list)
    special: List[bool] = field(default_factory=list)
    info: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.scores = torch.as_tensor(self.scores, dtype=torch.float32).detach().cpu()
        L = len(self.tokens)
        if len(self.token_ids) != L:
            raise ValueError(f"token_ids has {len(self.token_ids)} entries but tokens has {L}")
        if self.scores.dim() not in (1, 2) or self.scores.shape[-1] != L:
            raise ValueError(f"scores has shape {tuple(self.scores.shape)} but there are {L} tokens")
        if not self.attributable:
            self.attributable = [True] * L
        if not self.raw_tokens:
            self.raw_tokens = list(self.tokens)
        if not self.special:
            self.special = [False] * L

    # ------------------------------------------------------------------ views
    @property
    def is_generation(self) -> bool:
        """True for a per-generation-step result (2-D ``scores``, one row per generated token)."""
        return self.scores.dim() == 2

    def words(self, reduce: str = "sum"):
        """Word-level view: (words, word_scores) using :func:`aggregate_words` on the attributable tokens.

        For a 2-D result ``word_scores`` is a list of rows (one per generated token), NaN for
        words with no attributed token in that row.
        """
        scores = self.scores.clone()
        mask = torch.tensor(self.attributable, dtype=torch.bool)
        scores[..., ~mask] = float("nan")
        if scores.dim() == 1:
            words, ws, _ = aggregate_words(self.raw_tokens, scores, self.special, reduce)
            return words, ws
        rows = []
        words: List[str] = []
        for r in scores:
            words, ws, _ = aggregate_words(self.raw_tokens, r, self.special, reduce)
            rows.append(ws)
        return words, rows

    def top_tokens(self, k: int = 5, row: Optional[int] = None):
        """The k attributable tokens with the largest scores, as (token, score) pairs.

        For a 2-D result: the pairs of generation step ``row``, or (``row=None``) a list with
        the pairs of every row; NaN cells are skipped.
        """
        if self.scores.dim() == 2:
            if row is None:
                return [self.top_tokens(k, r) for r in range(self.scores.shape[0])]
            vals = self.scores[row]
        else:
            vals = self.scores
        idx = [i for i in range(len(self.tokens)) if self.attributable[i] and not math.isnan(float(vals[i]))]
        idx.sort(key=lambda i: -float(vals[i]))
        return [(self.tokens[i], float(vals[i])) for i in idx[:k]]

    # ------------------------------------------------------------------ display
    def show(self, file=None, words: bool = True, width: int = 100, top_k: int = 5) -> None:
        """Print a terminal heatmap (red = drives the target, blue = against it) and a score table.

        A 2-D (generation) result prints one line per generated token: the token, then the
        ``top_k`` prefix words (or tokens) with their scores, coloured per row on a terminal.
        """
        file = file or sys.stdout
        color = hasattr(file, "isatty") and file.isatty()
        if self.scores.dim() == 2:
            self._show_generation(file, words, top_k, color)
            return
        if words:
            labels, vals = self.words()
        else:
            labels = [t for t, a in zip(self.tokens, self.attributable) if a]
            vals = [float(s) for s, a in zip(self.scores, self.attributable) if a]
        # a whitespace-only word (e.g. a trailing space token) has nothing to show
        shown = [(lab, v) for lab, v in zip(labels, vals) if lab.strip()]
        labels, vals = [lab for lab, _ in shown], [v for _, v in shown]
        finite = [abs(v) for v in vals if not math.isnan(v)]
        vmax = max(finite) if finite else 0.0
        tgt = self.target.get("text", self.target.get("id"))
        print(f"method: {self.method}   target: {tgt!r}   model: {self.model}", file=file)
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

    def _row_labels(self, words: bool):
        """(labels, rows of values, first token index of each label) for a 2-D result."""
        if words:
            labels, rows = self.words()
            _, _, t2w = aggregate_words(self.raw_tokens, [0.0] * len(self.tokens), self.special)
            first = [t2w.index(w) for w in range(len(labels))]
        else:
            mask = torch.tensor(self.attributable, dtype=torch.bool)
            sc = self.scores.clone()
            sc[:, ~mask] = float("nan")
            labels, rows, first = list(self.tokens), sc.tolist(), list(range(len(self.tokens)))
        return labels, rows, first

    def _show_generation(self, file, words: bool, top_k: int, color: bool) -> None:
        labels, rows, _ = self._row_labels(words)
        gen_ids = self.info.get("generated_ids") or []
        T = len(rows)
        Lp = self.info.get("prompt_length", len(self.tokens) - T)
        gen_tokens = self.tokens[Lp:]
        prompt = self.info.get("prompt", "".join(self.tokens[:Lp]))
        gen_text = self.info.get("generated_text", "".join(gen_tokens))
        how = "teacher forced" if self.info.get("teacher_forced") else "greedy"
        print(f"method: {self.method}   generation: {T} tokens ({how})   model: {self.model}", file=file)
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

    def _generation_html(self, words: bool) -> str:
        labels, rows, first = self._row_labels(words)
        T = len(rows)
        Lp = self.info.get("prompt_length", len(self.tokens) - T)
        gen_tokens = self.tokens[Lp:]
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
        gen = _html.escape(str(self.info.get("generated_text", "".join(gen_tokens))))
        return (
            f'<div class="aieg-fast"><p><b>{_html.escape(self.method)}</b> — generation {gen} — '
            f"{_html.escape(self.model)}</p><table>{''.join(trs)}</table></div>"
        )

    def to_html(self, words: bool = True) -> str:
        """A self-contained HTML snippet with the heatmap (background colour per word or token).

        A 2-D (generation) result gives a table with one row per generated token.
        """
        if self.scores.dim() == 2:
            return self._generation_html(words)
        labels, vals = self.words() if words else (self.tokens, [float(s) for s in self.scores])
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
        tgt = _html.escape(str(self.target.get("text", self.target.get("id"))))
        return (
            f'<div class="aieg-fast"><p><b>{_html.escape(self.method)}</b> — target {tgt} — '
            f"{_html.escape(self.model)}</p><p>{' '.join(spans)}</p></div>"
        )

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serialisable dict (scores as a list; NaN written as null)."""
        def clean(x):
            if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
                return None
            if isinstance(x, list):
                return [clean(v) for v in x]
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if torch.is_tensor(x):
                return clean(x.tolist())
            return x

        words, wscores = self.words()
        return clean(
            {
                "tokens": self.tokens,
                "token_ids": self.token_ids,
                "scores": self.scores.tolist(),
                "method": self.method,
                "target": self.target,
                "options": self.options,
                "model": self.model,
                "backend": self.backend,
                "timing": self.timing,
                "attributable": self.attributable,
                "raw_tokens": self.raw_tokens,
                "special": self.special,
                "words": words,
                "word_scores": wscores,
                "info": self.info,
            }
        )

    def save(self, path) -> None:
        """Write :meth:`to_dict` as JSON to ``path``."""
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, ensure_ascii=False, indent=1)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Attribution":
        scores = torch.tensor([float("nan") if v is None else v for v in _flatten_rows(d["scores"])], dtype=torch.float32)
        if d["scores"] and isinstance(d["scores"][0], list):
            scores = scores.view(len(d["scores"]), -1)
        return cls(
            tokens=d["tokens"],
            token_ids=d["token_ids"],
            scores=scores,
            method=d["method"],
            target=d["target"],
            options=d.get("options", {}),
            model=d.get("model", ""),
            backend=d.get("backend", {}),
            timing=d.get("timing", {}),
            attributable=d.get("attributable", []),
            raw_tokens=d.get("raw_tokens", []),
            special=d.get("special", []),
            info=d.get("info", {}),
        )

    @classmethod
    def load(cls, path) -> "Attribution":
        """Read a result written by :meth:`save`."""
        with open(path, encoding="utf-8") as fh:
            return cls.from_dict(json.load(fh))


def _flatten_rows(x):
    if x and isinstance(x[0], list):
        return [v for row in x for v in row]
    return x


def load_attribution(path) -> Attribution:
    """Read an :class:`Attribution` saved with :meth:`Attribution.save`."""
    return Attribution.load(path)
