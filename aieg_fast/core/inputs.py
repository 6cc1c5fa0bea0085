"""What a call explains, checked before any model work: texts or token ids, one target per input.

``attribute(text=...)`` takes a string or a list of strings; ``attribute(input_ids=...)`` takes
token ids that skip tokenisation: one sequence (a list of ints or a 1-D LongTensor) or a batch
(a list of such sequences, or a 2-D LongTensor whose rows are all of the same length).

A text may also be a mapping of fields, ``{"passage": ..., "question": ...}``, for a template
that names each field once (``"{passage}\nQuestion: {question}?\nAnswer:"``): every field is
attributed and the template's own text is held fixed (:func:`fill_template`).
"""
from __future__ import annotations

import numbers
from typing import List, Mapping, Sequence, Tuple

import torch

from ..datasets.user import TEMPLATE_FIELD

__all__ = ["inputs_and_targets", "unencodable", "check_input_ids", "check_no_padding", "fixed_by_specials", "fill_template", "is_text", "as_id_list",
           "per_text_ids"]


def unencodable(text: str) -> str:
    """The empty string when UTF-8 encodes ``text``, else what stops it, for a message after the
    text's name:
    ``"holds '\\ud800' at character 4, which UTF-8 cannot encode (a lone surrogate, ...)"``. The
    tokenizers raise a TypeError that names nothing for such a text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return (f"holds {text[err.start]!r} at character {err.start}, which UTF-8 cannot encode (a lone surrogate, e.g. "
                "from decoding bytes with errors='surrogateescape')")
    return ""


def _check_encodable(texts: Sequence, single: bool) -> None:
    """ValueError naming the text and the position of a character UTF-8 cannot encode
    (:func:`unencodable`)."""
    for i, t in enumerate(texts):
        for field, s in ([(None, t)] if isinstance(t, str) else t.items()):
            why = unencodable(s)
            if why:
                name = ("text" if single else f"text[{i}]") + ("" if field is None else f"[{field!r}]")
                raise ValueError(f"{name} {why}; fix the text")


def is_text(x) -> bool:
    """Whether ``x`` is one text: a str, or a mapping of field names to str (:func:`fill_template`)."""
    return isinstance(x, str) or (isinstance(x, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in x.items()))


def fill_template(text, template=None) -> Tuple[str, List[Tuple[int, int]]]:
    """The prompt a text makes, and the character spans of the attributed text in it.

    Args:
        text: a str, placed at ``{text}``; or a mapping field name → str, each placed at
            ``{<field>}`` (e.g. BoolQ's ``{"passage": ..., "question": ...}``). Braces of the
            template that hold no name (``{}``, ``{"a": 1}``) are kept as they are (the template
            is not a format string: ``{{name}}`` stays as it is); a ``{name}`` the text does not give is
            refused (a missing field, or a field besides ``{text}`` for a str).
        template: None (the text alone; not with a mapping), or a str holding ``{text}`` (or each
            field of the mapping) exactly once.

    Returns:
        (the prompt str, [(start, end), ...]): one character span per field, in the order they
        appear in the prompt; the rest of the prompt is the template's text.

    Raises:
        TypeError: text neither a str nor a mapping of str to str; a template that is not a str.
        ValueError: an empty text or field (named); a mapping without a template, with a field
            the template does not name exactly once, or missing a field the template names; a
            str text with a template naming other fields (names the fields and the template).
    """
    if template is not None and not isinstance(template, str):
        raise TypeError(f"template must be a str with '{{text}}' or None, got {type(template).__name__}")
    if isinstance(text, str):
        if not text.strip():
            raise ValueError(f"text is empty{'' if not text else ' (only whitespace)'}, got {text!r}")
        if template is None:
            return text, [(0, len(text))]
        found = list(TEMPLATE_FIELD.finditer(template))  # the {name} fields; {{name}} is text
        if sum(m.group(1) == "text" for m in found) != 1:
            raise ValueError(f"template must contain '{{text}}' exactly once, got {template!r}")
        others = [f for f in dict.fromkeys(m.group(1) for m in found) if f != "text"]
        if others:
            raise ValueError(f"template names field(s) {others} besides {{text}}, which a text (a str) does not give: pass the "
                             f"text as a mapping of every field, or take them out of the template: {template!r}")
        pre, post = template[: found[0].start()], template[found[0].end():]
        return pre + text + post, [(len(pre), len(pre) + len(text))]
    if not is_text(text):
        raise TypeError(f"text must be a str or a mapping of field names to str, got {_describe(text)}")
    if not text:
        raise ValueError("text is an empty mapping: give at least one field")
    if template is None:
        raise ValueError(f"text is a mapping of fields {sorted(text)}: it needs a template naming each field, e.g. "
                         + " ".join("{" + k + "}" for k in text))
    found = list(TEMPLATE_FIELD.finditer(template))  # the {name} fields, in order; {{name}} is text
    for k, v in text.items():
        n = sum(m.group(1) == k for m in found)
        if n != 1:
            raise ValueError(f"template must contain '{{{k}}}' exactly once (text field {k!r}), found it {n} times: {template!r}")
        if not v.strip():
            raise ValueError(f"text[{k!r}] is empty{'' if not v else ' (only whitespace)'}, got {v!r}")
    missing = [f for f in dict.fromkeys(m.group(1) for m in found) if f not in text]
    if missing:
        raise ValueError(f"template names field(s) {missing} that text does not give (text has {sorted(text)}): "
                         f"add them to text, or take them out of the template: {template!r}")
    full, spans, last = "", [], 0
    for m in found:  # each a field of text, each once (checked above)
        full += template[last : m.start()]
        spans.append((len(full), len(full) + len(text[m.group(1)])))
        full += text[m.group(1)]
        last = m.end()
    return full + template[last:], spans


def _describe(x) -> str:
    """The type of ``x``, and for a mapping the first entry that is not str → str."""
    if isinstance(x, Mapping):
        bad = next(((k, v) for k, v in x.items() if not (isinstance(k, str) and isinstance(v, str))), None)
        if bad is not None:
            return f"a {type(x).__name__} whose entry {bad[0]!r} holds a {type(bad[1]).__name__}"
    return type(x).__name__


def _is_array(x) -> bool:
    """A numpy array (told apart without importing numpy)."""
    return type(x).__module__ == "numpy" and hasattr(x, "ndim") and hasattr(x, "tolist")


def _listed(value):
    """A pandas Series / Index (``df["text"]``) or a NumPy array of strings or objects
    (``np.array([" good", " bad"])``) as the list it holds; anything else as it is (a numeric
    array: token ids, for the caller)."""
    pandas = type(value).__module__.startswith("pandas") and callable(getattr(value, "tolist", None))
    return value.tolist() if pandas or (_is_array(value) and value.dtype.kind in "USO") else value


def as_id_list(value, name: str):
    """``value`` as a list of ints when it is a 1-D integer tensor or numpy array (token ids);
    anything else as it is, for the caller to check.

    Raises:
        TypeError: a tensor / array that is not 1-D integer ids (names ``name``, its dtype and shape).
    """
    value = _listed(value)  # words: their list
    if not (torch.is_tensor(value) or _is_array(value)):
        return value
    t = torch.as_tensor(value)
    if not _integer_ids(t) or t.dim() != 1:
        raise TypeError(f"{name} as a tensor must hold 1-D integer token ids, got dtype {t.dtype} and shape {tuple(t.shape)}")
    return [int(i) for i in t.tolist()]


def per_text_ids(value, name: str):
    """``value`` as a list of ints when it is a 1-D tensor or numpy array of several integer token
    ids, Tensor[B] (one id per text, as a list of ints is); anything else as it is (a scalar, a
    one-element tensor: one id for every text).

    Raises:
        TypeError: such a tensor / array that does not hold integer ids (names ``name``).
    """
    value = _listed(value)  # a pandas column of words or ids: one per text, as a list
    if (torch.is_tensor(value) or _is_array(value)) and value.ndim == 1 and len(value) > 1:
        return as_id_list(value, name)
    return value


def _integer_ids(t: torch.Tensor) -> bool:
    """Whether the tensor ``t`` holds integers (token ids can be): not float, complex or bool."""
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def _as_id_rows(input_ids) -> Tuple[List[list], bool]:
    """(rows, single): the id sequences of ``input_ids`` as lists, unchecked values; of a
    tokenizer's output (a mapping such as ``BatchEncoding``) its ``input_ids`` without the
    positions its ``attention_mask`` marks 0 (the padding)."""
    if isinstance(input_ids, Mapping):
        if "input_ids" not in input_ids:
            raise TypeError(f"input_ids is a {type(input_ids).__name__} without an 'input_ids' entry (keys {sorted(map(str, input_ids))[:6]}): "
                            "give token ids, or a tokenizer's output")
        rows, single = _as_id_rows(input_ids["input_ids"])
        mask = input_ids.get("attention_mask")
        if mask is not None:
            keep, _ = _as_id_rows(torch.as_tensor(mask).long() if torch.is_tensor(mask) or _is_array(mask) else mask)  # bools too
            if [len(r) for r in keep] != [len(r) for r in rows]:
                raise ValueError("input_ids['attention_mask'] has another shape than input_ids['input_ids']")
            rows = [[i for i, m in zip(r, k) if m] for r, k in zip(rows, keep)]
        return rows, single
    if _is_array(input_ids):  # a numpy array (return_tensors="np")
        input_ids = torch.as_tensor(input_ids)
    if isinstance(input_ids, torch.Tensor):
        if not _integer_ids(input_ids):
            raise TypeError(f"input_ids must hold integer token ids, got a tensor of dtype {input_ids.dtype}")
        if input_ids.dim() not in (1, 2):
            raise ValueError(f"input_ids must be 1-D [L] or 2-D [B, L], got shape {tuple(input_ids.shape)}")
        rows = input_ids.tolist()
        return ([rows], True) if input_ids.dim() == 1 else (rows, False)
    if isinstance(input_ids, (list, tuple)):
        if input_ids and all(isinstance(r, (list, tuple)) or ((torch.is_tensor(r) or _is_array(r)) and r.ndim >= 1) for r in input_ids):
            rows = [r.tolist() if isinstance(r, torch.Tensor) or _is_array(r) else list(r) for r in input_ids]
            return rows, False
        return [list(input_ids)], True
    raise TypeError(f"input_ids must be a list of token ids, a list of such lists or a LongTensor, got {type(input_ids).__name__}")


def check_input_ids(input_ids, vocab_size: int, max_positions: int) -> Tuple[List[List[int]], bool]:
    """Check token ids given in place of text.

    Args:
        input_ids: one sequence (list of int, Tensor[L] long, a numpy integer array) or a batch
            (list of sequences, Tensor[B, L] long, a 2-D numpy integer array); numpy integers
            count as ints; or a tokenizer's output (``BatchEncoding``, a mapping with
            ``input_ids``), whose ``attention_mask`` takes its padding off each row.
        vocab_size: rows of the input embedding matrix (ids must be in [0, vocab_size)).
        max_positions: the model's most positions.

    Returns:
        (list of id lists, single: True when one sequence was given).

    Raises:
        TypeError: not ids (floats, bools, strings, other types).
        ValueError: no sequence, an empty sequence, an id out of range, a sequence longer than
            ``max_positions``; the message names the item and position.
    """
    rows, single = _as_id_rows(input_ids)
    if not rows:
        raise ValueError("input_ids is an empty list")
    for r, row in enumerate(rows):
        where = "input_ids" if single else f"input_ids[{r}]"
        if not row:
            raise ValueError(f"{where} is empty")
        for k, i in enumerate(row):
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):  # numpy integers count; numpy bools do not
                raise TypeError(f"{where}[{k}] must be an int token id, got {i!r} ({type(i).__name__})")
            if not 0 <= int(i) < vocab_size:
                raise ValueError(f"{where}[{k}] = {int(i)} is not a token id of this model: ids are in [0, {vocab_size})")
        if len(row) > max_positions:
            raise ValueError(f"{where} is {len(row)} tokens long, but the model accepts at most {max_positions} positions")
    return [[int(i) for i in row] for row in rows], single


def _run(row: Sequence[int], token: int) -> int:
    """How many times ``token`` repeats at the start of ``row``."""
    n = 0
    while n < len(row) and row[n] == token:
        n += 1
    return n


def check_no_padding(input_ids, pad_id, bos_eos_ids=()) -> None:
    """Refuse a padded ``[B, L]`` tensor (e.g. a tokenizer's ``padding=True`` output): its pad
    tokens would be read as input and the prediction explained would follow them. A row that
    starts or ends with the pad token is refused. Where the pad token is also the BOS or EOS
    token (GPT-2's ``<|endoftext|>``), which a prompt may hold once, a row is refused for a run
    of two or more, or for one where other rows have none at that end (rows one token apart,
    padded); lists and 1-D tensors are not checked.

    Args:
        input_ids: what the caller gave as ``input_ids``.
        pad_id: the tokenizer's pad token id, or None (nothing is checked).
        bos_eos_ids: the tokenizer's BOS and EOS ids.

    Raises:
        ValueError: names the row, the run of pad tokens and what to give instead.
    """
    if pad_id is None or not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        return
    rows = input_ids.tolist()
    runs = [(_run(row, pad_id), _run(row[::-1], pad_id)) for row in rows]
    once = pad_id in set(bos_eos_ids)  # a prompt may hold the token once at either end
    for end, name in ((0, "starts"), (1, "ends")):
        uneven = once and len({min(r[end], 1) for r in runs}) > 1  # some rows have it there, some not
        for r, run in enumerate(runs):
            if run[end] >= (2 if once else 1) or (uneven and run[end]):
                why = " where other rows have none" if once and run[end] == 1 else ""
                raise ValueError(f"input_ids[{r}] {name} with {run[end]} padding token(s) (id {pad_id}){why}: a [B, L] "
                                 "tensor is read as B unpadded sequences (there is no attention mask), so the pads would "
                                 "be input; give sequences of different lengths as a list of id lists (or as texts): the "
                                 "batch is padded inside")


def inputs_and_targets(text, input_ids, target, template, vocab_size: int, max_positions: int, tokenizer=None):
    """The inputs of a call and one target per input.

    Args:
        text: a str (or a mapping of template fields, :func:`fill_template`) or a list of them,
            or None when ``input_ids`` is given.
        input_ids: token ids (:func:`check_input_ids`) or None.
        target: one target, or a list of one per input.
        template: a str with ``{text}`` or None (not allowed with ``input_ids``).
        vocab_size, max_positions: the model's, for checking ids.
        tokenizer: the model's, whose pad token a padded ``[B, L]`` tensor is refused for
            (:func:`check_no_padding`); None: not checked.

    Returns:
        (inputs: list of texts, or list of id lists; targets: list; single: one input given;
        ids: whether the inputs are ids).

    Raises:
        TypeError / ValueError: both or neither of text and input_ids, bad shapes, a template with
            ids, a target list of the wrong length, a text with a character UTF-8 cannot encode.
    """
    if (text is None) == (input_ids is None):
        raise ValueError("give either text or input_ids (token ids that skip tokenisation), not "
                         + ("both" if text is not None else "neither"))
    if template is not None and not isinstance(template, str):
        raise TypeError(f"template must be a str with '{{text}}' or None, got {type(template).__name__}")
    if input_ids is not None:
        if template is not None:
            raise ValueError("template applies to text; with input_ids put the template's tokens in the ids "
                             "(they are then attributed, except special tokens)")
        inputs, single = check_input_ids(input_ids, vocab_size, max_positions)
        tk = tokenizer
        if isinstance(input_ids, Mapping) and input_ids.get("attention_mask") is None:
            input_ids = input_ids["input_ids"]  # no mask to take the padding off with: checked as the ids alone
        check_no_padding(input_ids, getattr(tk, "pad_token_id", None), (getattr(tk, "bos_token_id", None), getattr(tk, "eos_token_id", None)))
    else:
        text = _listed(text)  # a pandas column (df["text"]) or NumPy array of texts: the list it holds
        if isinstance(text, (list, tuple)):
            bad = next((i for i, t in enumerate(text) if not is_text(t)), None)
            if bad is not None:
                raise TypeError(f"text[{bad}] must be a str (or a mapping of template fields to str), got "
                                f"{_describe(text[bad])}")
        elif not is_text(text):
            raise TypeError(f"text must be a str or a list of str, got {_describe(text)} (a text may also be a mapping of "
                            "template fields to str)")
        single = is_text(text)
        inputs = [text] if single else list(text)
        if not inputs:
            raise ValueError("text is an empty list")
        _check_encodable(inputs, single)
    target = per_text_ids(target, "target")
    targets = target if isinstance(target, (list, tuple)) else [target] * len(inputs)
    if len(targets) != len(inputs):
        what = "id sequences" if input_ids is not None else "texts"
        entries, what = "entry" if len(targets) == 1 else "entries", what if len(inputs) != 1 else what[:-1]
        raise ValueError(f"target has {len(targets)} {entries} for {len(inputs)} {what}: "
                         "give one target per input (or one target for all)")
    return inputs, list(targets), single, input_ids is not None


def fixed_by_specials(rows: Sequence[Sequence[int]], special_ids) -> List[Tuple[List[int], List[bool]]]:
    """(ids, fixed) per row: special tokens held fixed, every other token attributed.

    Raises:
        ValueError: a row whose tokens are all special (nothing to attribute), naming it.
    """
    out = []
    for r, row in enumerate(rows):
        fixed = [i in special_ids for i in row]
        if all(fixed):
            raise ValueError(f"input_ids{'' if len(rows) == 1 else f'[{r}]'} has no attributable token: "
                             f"all {len(row)} are special tokens")
        out.append((list(row), fixed))
    return out
