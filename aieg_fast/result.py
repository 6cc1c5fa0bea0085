"""The result of one attribution: tokens, scores and everything needed to reproduce them."""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from .core.validation import as_int, check_bool, check_int
from .runs.records import json_safe, replace_file
from .display import aggregate_words, html, plots, terminal
from .display.words import group_text, marker_text, reads_as_bytes, reduce_groups, token_display_texts, visible, word_groups_of, word_markers

__all__ = ["Attribution", "load_attribution", "save_attributions", "load_attributions", "aggregate_words"]

#: ``format`` of a file written by :func:`save_attributions`
MULTI_FORMAT = "aieg_fast.attributions"


@dataclass(eq=False)
class Attribution:
    """Token attribution for one input (or one row per generated token).

    Results compare by identity (``==``, ``in``, ``list.index``, sets and dict keys work as for
    any object); compare values with ``torch.equal(a.scores, b.scores)`` or :meth:`to_dict`.

    Attributes:
        tokens (List[str]): display text of each input token (length L).
        token_ids (List[int]): the token ids (length L).
        scores (Tensor[L] or Tensor[T, L]): one score per token (float32, CPU). Signed, in
            F's units (a logit by default; nats for ``target_fn="logprob"`` / ``"label_logprob"``)
            for integrated_gradients, input_x_gradient, occlusion (its default ``measure``) and
            scaled_attention, in F's units squared for integrated_decision_gradients (gradients
            weighted by F's slope): > 0 raises F (supports the target).
            ≥ 0 for saliency (a gradient norm), attention (weights), aieg (its default PosNorm),
            grad_ellm and heta: compare scores within a method, not across methods. Positions
            held fixed (special, template, padding; a multi-token target's own tokens are not
            columns) hold 0 for every method; ``attributable`` marks the others. For a generation (:meth:`Explainer.attribute_generation`) one
            row per generated token, NaN where a token was not attributed for that row (not
            visible yet or held fixed); ``attributable[i]`` = column i is attributed in some row.
        method (str): method name (see :func:`aieg_fast.list_methods`).
        target (dict): ``{"kind": "token"|"class"|"tokens", "id": int, "text": str, ...}``;
            ``"tokens"`` (a multi-token target of ``target_fn="logprob"``) has ``"id"`` None
            and its ids in ``"ids"``.
        options (dict): every option the method ran with (defaults filled in).
        model (str): model name or path.
        backend (dict): op name → ``"ext"`` or ``"reference"`` for every kernel op used (empty
            when the method uses none).
        timing (dict): seconds per phase and ``total``.
        attributable (List[bool]): positions that were attributed (not held fixed).
        raw_tokens (List[str]): raw token strings (with ``Ġ``/``▁`` markers) for word grouping.
        special (List[bool]): special-token flags.
        info (dict): method-specific extras, e.g. IG's ``F_input``, ``F_baseline`` and
            ``convergence_delta``, AIEG's ``ieg``, ``posnorm``, ``attention`` and ``ef``, HETA's
            components; JSON-serialisable.
        text (str): the encoded string (the template filled in; for a generation, followed by
            the decoded continuation); "" when unknown (slow tokenizer, old files).
        offsets (List[Optional[List[int]]]): per token ``[start, end)`` into ``text`` from the
            fast tokenizer (None for special tokens); empty when unknown. With offsets, words
            follow :func:`~aieg_fast.display.words.offset_groups` (``word_rule == "offsets"``),
            else the marker rule of :func:`aggregate_words` (``"markers"``). Tokens whose own
            decoding holds U+FFFD (bytes of one character) take their text from ``text``.
        target_prob (float or None): the model's probability of the target on the full input
            (next token over the vocabulary, or class; for a multi-token target the product of
            its tokens' probabilities); None for a generation step or a result saved without it.
        degenerate (List[dict]): why the scores may carry no usable signal, one dict
            ``{"kind", "message"}`` per finding (``"step"`` too for a generation row); kinds in
            :data:`~aieg_fast.core.diagnostics.FLAG_KINDS`: ``zero_signal``, ``constant_signal``,
            ``non_finite``, ``inflated`` (a normalisation such as AIEG's PosNorm stretched a
            flat raw signal), ``completeness`` (large IG completeness error). Empty when sound;
            each finding was also warned as an :class:`~aieg_fast.core.diagnostics.AttributionWarning`.
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
    text: str = ""
    offsets: List[Optional[List[int]]] = field(default_factory=list)
    target_prob: Optional[float] = None
    degenerate: List[Dict[str, Any]] = field(default_factory=list)

    def __post_init__(self):
        """Scores as a float32 CPU tensor, the empty per-token lists filled with their defaults.

        Raises:
            ValueError: ``token_ids``, ``attributable``, ``raw_tokens``, ``special`` or ``offsets``
                given with another length than ``tokens``, or ``scores`` of a shape that is not
                [L] or [T, L]; names the field, its length and the number of tokens. ``target``,
                ``options``, ``backend``, ``timing`` or ``info`` not a dict, an entry of
                ``degenerate`` without a ``kind`` and ``message``, an offset that is not None
                nor a [start, end) pair (a hand-edited file; the views would fail on them later).
        """
        self._check_fields()
        self.scores = torch.as_tensor(self.scores, dtype=torch.float32).detach().cpu()
        L = len(self.tokens)
        if len(self.token_ids) != L:
            raise ValueError(f"token_ids has {len(self.token_ids)} entries but tokens has {L}")
        if self.scores.dim() not in (1, 2) or self.scores.shape[-1] != L:
            raise ValueError(f"scores has shape {tuple(self.scores.shape)} but there are {L} tokens")
        for name in ("attributable", "raw_tokens", "special", "offsets"):  # empty: the defaults below (offsets: unknown)
            if getattr(self, name) and len(getattr(self, name)) != L:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries but there are {L} tokens")
        if not self.attributable:
            self.attributable = [True] * L
        if not self.raw_tokens:
            self.raw_tokens = list(self.tokens)
        if not self.special:
            self.special = [False] * L
        if self.offsets:
            self.offsets = [None if o is None else [int(o[0]), int(o[1])] for o in self.offsets]
            if any("\ufffd" in t for t in self.tokens):  # only such tokens take their text from ``text``
                from_text = token_display_texts(self.text, self.offsets, self.tokens, self.raw_tokens)
                self.tokens = [f if "\ufffd" in t else t for t, f in zip(self.tokens, from_text)]

    def _check_fields(self) -> None:
        """The types :meth:`__post_init__` promises of the fields that are not lists of tokens."""
        for name in ("options", "backend", "timing", "info"):
            if getattr(self, name) is None:  # None for "none", as the views read it
                setattr(self, name, {})
        for name in ("attributable", "raw_tokens", "special", "offsets", "degenerate"):
            if getattr(self, name) is None:  # None for "not given": the defaults, as before the fields were checked
                setattr(self, name, [])
        for name in ("target", "options", "backend", "timing", "info"):
            if not isinstance(getattr(self, name), Mapping):
                raise ValueError(f"{name} must be a dict, got {getattr(self, name)!r:.80}")
        for name in ("attributable", "special"):
            bad = next((v for v in getattr(self, name) if not any(v is b or v == b for b in (True, False))), None)
            if bad is not None:
                raise ValueError(f"{name} must hold True / False per token, got {bad!r:.40}")
        for i, f in enumerate(self.degenerate):
            if not (isinstance(f, Mapping) and isinstance(f.get("kind"), str) and isinstance(f.get("message"), str)):
                raise ValueError(f"degenerate[{i}] must be a dict with a 'kind' and a 'message', got {f!r:.80}")
        for i, o in enumerate(self.offsets):
            if o is not None and not (isinstance(o, (list, tuple)) and len(o) == 2 and all(hasattr(v, "__index__") for v in o)
                                      and 0 <= o[0] <= o[1] <= (len(self.text) if self.text else o[1])):
                raise ValueError(f"offsets[{i}] must be None or a [start, end) pair of ints within text "
                                 f"({len(self.text or '')} characters), got {o!r:.80}")

    # ------------------------------------------------------------------ views
    @property
    def is_generation(self) -> bool:
        """True for a per-generation-step result (2-D ``scores``, one row per generated token)."""
        return self.scores.dim() == 2

    @property
    def word_rule(self) -> str:
        """How tokens are grouped into words: ``"offsets"`` (the tokenizer's character offsets
        into :attr:`text`) or ``"markers"`` (``Ġ``/``▁`` markers of :attr:`raw_tokens`, the
        fallback for slow tokenizers and results saved without offsets)."""
        return "offsets" if self.offsets else "markers"

    @property
    def prompt_length(self) -> int:
        """Number of prompt (context) tokens: ``info["prompt_length"]`` for a generation, else L."""
        if self.is_generation:
            return int(self.info.get("prompt_length", len(self.tokens) - self.scores.shape[0]))
        return len(self.tokens)

    def word_groups(self) -> List[List[int]]:
        """Token indices of each word (consecutive, covering every token once), by :attr:`word_rule`.

        For a generation the prompt is grouped into words and each generated token is a column
        of its own, so no row shows the token it explains inside a context word. A word never
        spans a held-fixed token and an attributed one: template text or a special token typed
        against a word is a word of its own (bracketed in the views); an unknown-character token
        (UNK, not attributed) joins the word before it in its run of text
        (:func:`~aieg_fast.display.words.word_groups_of`).
        """
        n = self.prompt_length
        offsets = self.offsets[:n] if self.word_rule == "offsets" else None
        groups = word_groups_of(self.text, offsets, self.raw_tokens[:n], self.special[:n], [not a for a in self.attributable[:n]])
        return groups + [[i] for i in range(n, len(self.tokens))]

    def word_labels(self) -> List[str]:
        """Display text of each word of :meth:`word_groups`: taken from :attr:`text` (accents,
        CJK and emoji as typed), whitespace-only words as visible symbols (``␣``, ``⏎``)."""
        out = []
        markers = word_markers(self.raw_tokens) if self.word_rule != "offsets" else None
        byte_level = self.word_rule != "offsets" and reads_as_bytes(self.raw_tokens[: self.prompt_length], self.text)
        for g in self.word_groups():
            if self.word_rule == "offsets":
                lab = group_text(self.text, self.offsets, g, self.tokens)
            else:
                lab = marker_text(self.raw_tokens, g, markers, byte_level) if len(g) > 1 or g[0] < self.prompt_length else self.tokens[g[0]]
            out.append(visible(lab) or "◌")
        return out

    def token_labels(self) -> List[str]:
        """Display text of each token: from :attr:`text` where the token's own decoding cannot
        show it (U+FFFD, UNK, an empty piece), whitespace-only tokens as visible symbols (the
        lone ``▁`` a Metaspace or Prepend normalizer puts before the text too: ``␣``). A
        character split over several tokens (UTF-8 bytes) is shown on the first of them, the
        others read ``◌`` (no character of their own)."""
        toks = list(self.tokens)
        if self.offsets:
            from_text = token_display_texts(self.text, self.offsets, self.tokens, self.raw_tokens)
            for i, off in enumerate(self.offsets):
                if off is not None and (self.special[i] or toks[i] == ""):
                    toks[i] = from_text[i]
        return [visible(t) or "◌" for t in toks]

    def words(self, reduce: Optional[str] = None):
        """Word-level view: (words, word_scores) over :meth:`word_groups` (NaN-skipping ``reduce``
        of the attributable tokens; NaN for a word with none).

        ``reduce`` None (default): ``"sum"``, except for a result whose tokens each hold a copy of
        their word's score (occlusion with ``granularity="word"``: the effect of masking the
        whole word), where the sum would count the word once per token: ``"mean"``, the word's
        own score. Every word view (:meth:`show`, :meth:`to_html`, :meth:`plot`,
        :meth:`to_dataframe`) uses this default.

        For a 2-D result ``word_scores`` is a list of rows (one per generated token), NaN for
        words with no attributed token in that row.

        Raises:
            ValueError: ``reduce`` not None, ``"sum"``, ``"mean"`` or ``"max"``.
        """
        if reduce is None:
            reduce = "mean" if self.options.get("granularity") == "word" else "sum"
        scores = self.scores.clone()
        mask = torch.tensor(self.attributable, dtype=torch.bool)
        scores[..., ~mask] = float("nan")
        groups, labels = self.word_groups(), self.word_labels()
        if scores.dim() == 1:
            return labels, reduce_groups(groups, scores.tolist(), reduce)
        return labels, [reduce_groups(groups, r, reduce) for r in scores.tolist()]

    def top_tokens(self, k: int = 5, row: Optional[int] = None, absolute: bool = False):
        """The k attributable tokens with the largest scores, as (token, score) pairs: the
        largest signed scores (the tokens that raised F most), or with ``absolute=True`` the
        largest |score| (those that moved F most either way, the order of :meth:`show`'s top
        tokens).

        For a 2-D result: the pairs of generation step ``row`` (counted from 0, as ``scores``'
        rows and the warnings count them; the views number rows from 1), or (``row=None``) a
        list with the pairs of every row; NaN cells are skipped.

        Raises:
            ValueError: ``k`` not an int ≥ 1; ``row`` not an int in [−T, T) for a generation
                result of T steps, or given for a 1-D result; ``absolute`` not True or False.
        """
        k, row = as_int(k), as_int(row)  # a NumPy or one-element tensor integer as an int
        check_int("k", k, 1)
        absolute = check_bool("absolute", absolute)  # a NumPy bool too
        if self.scores.dim() == 2:
            if row is None:
                return [self.top_tokens(k, r, absolute) for r in range(self.scores.shape[0])]
            T = self.scores.shape[0]
            if isinstance(row, bool) or not isinstance(row, int) or not -T <= row < T:
                raise ValueError(f"row must be a generation step, an int in [0, {T}) (or from -{T} counting from the "
                                 f"end), got {row!r}")
            vals = self.scores[row]
        else:
            if row is not None:
                raise ValueError(f"row applies to a generation result (one row per generated token); this result "
                                 f"has one row, got row={row!r}")
            vals = self.scores
        idx = [i for i in range(len(self.tokens)) if self.attributable[i] and not math.isnan(float(vals[i]))]
        idx.sort(key=lambda i: -abs(float(vals[i])) if absolute else -float(vals[i]))
        return [(self.tokens[i], float(vals[i])) for i in idx[:k]]

    # ------------------------------------------------------------------ display
    def show(self, file=None, words: bool = True, width: Optional[int] = None, top_k: int = 5) -> None:
        """Print a terminal heatmap and a score table (red = drives the target, blue = against
        it), drawn with ``rich`` and wrapped to the terminal's width (or ``width`` columns);
        plain text with each word's relative score where the stream shows no colour (not a
        terminal, ``NO_COLOR``). A 2-D (generation) result prints one line per generated token
        with its ``top_k`` context words (or tokens). See :func:`aieg_fast.display.terminal.show`."""
        terminal.show(self, file, words, width, top_k)

    def to_html(self, words: bool = True, values: bool = False, toggle: bool = False) -> str:
        """A self-contained HTML snippet: legend with the colour scale, method, target and model,
        then the coloured words (or tokens); a generation result as a grid of generated tokens
        × context. ``values=True`` prints the values too; ``toggle=True`` renders both views with
        a words / tokens switch (CSS only). See :func:`aieg_fast.display.html.to_html`."""
        return html.to_html(self, words, values, toggle)

    def _repr_html_(self) -> str:
        """Notebook display: :meth:`to_html` of the words."""
        return self.to_html()

    def plot(self, words: bool = True, ax=None, figsize=None, wrap=None):
        """A matplotlib Figure: heatmap strip (1-D; a long one wrapped into rows of ``wrap``
        cells) or generation matrix (2-D); save it with ``fig.savefig(path)`` (PNG, PDF, SVG).
        See :func:`aieg_fast.display.plots.plot`."""
        return plots.plot(self, words, ax, figsize, wrap)

    def to_dataframe(self, words: bool = False):
        """A pandas DataFrame, one row per token (or word; per (step, token) for a generation).
        Needs pandas. See :func:`aieg_fast.display.plots.to_dataframe`."""
        return plots.to_dataframe(self, words)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serialisable dict: scores as a list; tensors, numpy arrays and numpy scalars (e.g.
        in ``info``) as lists and numbers; NaN and ±inf written as null. :meth:`from_dict` reads a
        null score back as NaN (in ``scores`` and in ``info["sequence_scores"]``, a generation's score
        per token); a null elsewhere (``info``, ``timing``, ``target_prob``) stays None,
        as JSON keeps no difference between a missing value and a non-finite one."""
        words, wscores = self.words()
        return json_safe(
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
                "word_rule": self.word_rule,
                "text": self.text,
                "offsets": self.offsets,
                "target_prob": self.target_prob,
                "degenerate": self.degenerate,
                "info": self.info,
            }
        )

    def save(self, path) -> None:
        """Write :meth:`to_dict` as JSON to ``path``. The JSON is made first and written to a
        temporary file renamed over ``path``, so a result that cannot be written (e.g. a value
        JSON does not know put into ``info``) leaves an existing file at ``path`` as it was.

        Raises:
            TypeError: a value is not JSON-serialisable (nothing is written). ValueError:
                ``path`` is a folder. FileNotFoundError: its folder does not exist. OSError (its
                system kind, e.g. PermissionError): the file cannot be written there (e.g.
                ``/proc``, a read-only disk); each names ``path`` and the reason.
        """
        _write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Attribution":
        """The result of a :meth:`to_dict` dict (or of an ``attribute-dataset`` record); dicts
        written before ``text`` / ``offsets`` existed load too (words then follow the marker rule).

        Raises:
            ValueError: ``d`` is the record of an example ``attribute-dataset`` skipped (it has
                ``skipped``, the reason, and no result); names its row and the reason. Another
                dict without ``tokens``, ``token_ids``, ``scores``, ``method`` or ``target``
                (e.g. an ``evaluate`` record, which holds metrics): names the keys missing.
            TypeError: ``d`` is not a mapping (names its type).
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"d must be a dict or other mapping (Attribution.to_dict()), got {type(d).__name__}")
        if "skipped" in d and "scores" not in d:
            raise ValueError(f"the record of data row {d.get('index')} (id {d.get('id')!r}) is a skipped example, with no "
                             f"result to read: {d['skipped']} (leave out the records with 'skipped')")
        missing = [k for k in ("tokens", "token_ids", "scores", "method", "target") if k not in d]
        if missing:
            raise ValueError(f"d is not a saved attribution: it has no {missing} (its keys: {sorted(d)[:10]}); from_dict "
                             "reads Attribution.to_dict() and attribute-dataset records (an evaluate record holds metrics, "
                             "not scores)")
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
            info=_scores_in_info(d.get("info", {})),
            text=d.get("text") or "",
            offsets=d.get("offsets") or [],
            target_prob=d.get("target_prob"),
            degenerate=d.get("degenerate") or [],
        )

    @classmethod
    def load(cls, path) -> "Attribution":
        """Read a result written by :meth:`save` (:func:`load_attribution`, which names what is wrong
        with a file that is not one)."""
        return load_attribution(path)


def _flatten_rows(x):
    if x and isinstance(x[0], list):
        return [v for row in x for v in row]
    return x


def _read_json(path):
    """The JSON value in the file ``path``; ValueError naming the file when it is not UTF-8 JSON
    (for JSON Lines, one record per line as ``attribute-dataset`` writes, it says how to read it)."""
    if Path(path).is_dir():
        raise ValueError(f"{path} is a folder, not a saved result (attribute-dataset's results are its attributions.jsonl, "
                         "one record per line: aieg_fast.Attribution.from_dict(json.loads(line)))")
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        if isinstance(err, json.JSONDecodeError) and err.msg == "Extra data" and _first_line_is_object(path):
            raise ValueError(f"{path} holds one JSON record per line (JSON Lines, as attribute-dataset's attributions.jsonl), "
                             "not a saved result; read each line with aieg_fast.Attribution.from_dict(json.loads(line)), "
                             "or the whole file with pandas.read_json(path, lines=True, dtype=False) (dtype=False keeps "
                             "ids such as '007' and token texts such as '5' as typed)") from None
        raise ValueError(f"{path} is not a JSON file of attributions ({type(err).__name__}: {err})") from None


def _first_line_is_object(path) -> bool:
    with open(path, encoding="utf-8") as fh:
        try:
            return isinstance(json.loads(fh.readline()), dict)
        except json.JSONDecodeError:
            return False


def _scores_in_info(info):
    """``info`` of a saved result with the nulls of its ``sequence_scores`` (a score per token,
    NaN where none was computed) read back as NaN, as those of ``scores`` are."""
    seq = info.get("sequence_scores") if isinstance(info, Mapping) else None
    if not isinstance(seq, list):
        return info
    return {**info, "sequence_scores": [float("nan") if v is None else v for v in seq]}


def load_attribution(path) -> Attribution:
    """Read an :class:`Attribution` saved with :meth:`Attribution.save`.

    Raises:
        ValueError: the file holds several results (read it with :func:`load_attributions`), is
            not UTF-8 JSON, or is JSON but not a saved result.
    """
    d = _read_json(path)
    if isinstance(d, dict) and d.get("format") == MULTI_FORMAT:
        raise ValueError(f"{path} holds {len(d.get('results', []))} results; read it with aieg_fast.load_attributions")
    if not (isinstance(d, dict) and "tokens" in d and "scores" in d):
        raise ValueError(f"{path} is not a saved attribution (a JSON object with 'tokens' and 'scores', as "
                         f"Attribution.save writes), got {type(d).__name__}"
                         + (f" with keys {sorted(d)[:8]}" if isinstance(d, dict) else ""))
    return _from_file_dict(d, path)


def _from_file_dict(d, path, where: str = "") -> Attribution:
    """:meth:`Attribution.from_dict` of a dict read from ``path``; a dict that is not a saved
    result (a missing key, ragged or non-numeric scores) is a ValueError naming the file."""
    try:
        return Attribution.from_dict(d)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
        what = f"missing key {err}" if isinstance(err, KeyError) else f"{type(err).__name__}: {err}"  # KeyError: a nested key
        raise ValueError(f"{path}{where} is not a saved attribution ({what})") from None


def save_attributions(results, path) -> None:
    """Write several results to one JSON file: ``{"format": "aieg_fast.attributions",
    "version": 1, "results": [to_dict(), ...]}``.

    Args:
        results: a sequence of :class:`Attribution` (next-token and generation results may mix).
        path: the file to write (UTF-8; text kept as typed).

    Raises:
        TypeError: an element is not an :class:`Attribution`, or a value is not JSON-serialisable
            (nothing is written; an existing file at ``path`` stays as it was).
        ValueError, FileNotFoundError, OSError: ``path`` cannot be written, as for
            :meth:`Attribution.save` (naming ``path`` and the reason).
    """
    if isinstance(results, Attribution):
        raise TypeError("results must be a sequence of Attribution objects, got one Attribution; "
                        "save it with its .save(path), or pass [result]")
    results = list(results)
    for i, r in enumerate(results):
        if not isinstance(r, Attribution):
            raise TypeError(f"results[{i}] is a {type(r).__name__}, not an Attribution")
    _write_json(path, {"format": MULTI_FORMAT, "version": 1, "results": [r.to_dict() for r in results]})


def _write_json(path, obj) -> None:
    """``obj`` as JSON at ``path``: serialised in full first, then written to a temporary file in
    the same folder and renamed over ``path`` (an existing file is replaced whole or not at all).
    A symbolic link to a file has that file replaced (the link stays); a path that is not a
    regular file (a device such as ``/dev/stdout``, a named pipe, a link to one) is written
    through, as ``open`` would.

    Raises:
        ValueError: ``path`` is a folder or has no file name. FileNotFoundError: its folder does
            not exist (names ``path``). OSError (of the system's kind: PermissionError, ...): the
            file cannot be written there (no permission, a read-only or virtual file system such
            as ``/proc``, a full disk), naming ``path`` and the system's reason; ``errno`` kept.
            TypeError: a value is not JSON-serialisable.
    """
    path = Path(path)
    if not path.name or path.is_dir():
        raise ValueError(f"path must name a file to write, got {str(path)!r} (a folder)")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"path {str(path)!r}: the folder {str(path.parent)!r} does not exist")
    data = json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8")
    try:
        replace_file(path, data)
    except OSError as err:  # '[Errno 2] No such file or directory' for a folder that exists (/proc)
        friendly = type(err)(f"path {str(path)!r}: the file cannot be written there ({err.strerror or err})")
        friendly.errno = err.errno
        raise friendly from err


def load_attributions(path) -> List[Attribution]:
    """Read the results of :func:`save_attributions` (in order); a file written by
    :meth:`Attribution.save` gives a list of one.

    Raises:
        ValueError: the file is not UTF-8 JSON, or is neither format.
    """
    d = _read_json(path)
    if isinstance(d, dict) and d.get("format") == MULTI_FORMAT:
        results = d.get("results")
        if not isinstance(results, list):
            raise ValueError(f"{path} is not a file of attributions ('results' is not a list)")
        return [_from_file_dict(x, path, f" result {i}") for i, x in enumerate(results)]
    if isinstance(d, dict) and "tokens" in d and "scores" in d:
        return [_from_file_dict(d, path)]
    raise ValueError(f"{path} is not a file of attributions (no 'format': {MULTI_FORMAT!r} and no single result)")
