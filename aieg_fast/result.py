"""The result of one attribution: tokens, scores and everything needed to reproduce them."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch

from . import display
from .display import aggregate_words

__all__ = ["Attribution", "load_attribution", "aggregate_words"]


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
        See :func:`aieg_fast.display.show`.
        """
        display.show(self, file, words, width, top_k)

    def to_html(self, words: bool = True) -> str:
        """A self-contained HTML snippet with the heatmap (background colour per word or token).

        A 2-D (generation) result gives a table with one row per generated token. See
        :func:`aieg_fast.display.to_html`.
        """
        return display.to_html(self, words)

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
