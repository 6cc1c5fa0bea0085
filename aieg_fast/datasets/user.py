"""A user's own dataset (``evaluate --dataset PATH``): its rows read by
:func:`~aieg_fast.datasets.rows.read_rows`, checked and turned into the records of the registry's
datasets (:func:`aieg_fast.datasets.load_records`).

* With a label field: classification records ``{"id", "index", "text" (one text field only),
  "fields", "label"}``, ``fields`` holding what fills the template (``{text}`` from the text
  field, any other ``{name}`` of the template from the column ``name``), ``label`` the index of
  the row's label in the label words.
* Otherwise: generation records ``{"id", "index", "prompt", "reference", "references"}``, the
  reference continuation read from the target field when one is named.
"""
from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

from .rows import is_empty, is_integer_text, read_rows, whole_number

__all__ = ["TEMPLATE_FIELD", "template_fields", "user_records", "label_index", "check_label_words", "number_words"]

#: a ``{name}`` field of a prompt template; ``{{name}}`` is text, and other braces stay as typed
#: (``{"a": {text}}`` has the field ``text``) (one rule for the datasets' templates and
#: :func:`aieg_fast.core.inputs.fill_template`)
TEMPLATE_FIELD = re.compile(r"(?!(?<=\{)\{[A-Za-z_][A-Za-z0-9_]*\}\})\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_fields(template: Optional[str]) -> Tuple[str, ...]:
    """The ``{name}`` fields of a template, in order of appearance (``("text",)`` for None).

    Raises:
        ValueError: a template naming no field, or a field more than once.
    """
    if template is None:
        return ("text",)
    if not isinstance(template, str):
        raise TypeError(f"template must be a str or None, got {type(template).__name__}")
    names = TEMPLATE_FIELD.findall(template)
    if not names:
        raise ValueError(f"template must name the text to attribute as {{text}} (or other {{field}}s), got {template!r}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"template must name each field once, got {twice} more than once in {template!r}")
    return tuple(names)


def number_words(labels: Optional[Sequence]) -> bool:
    """Whether every label word is a string of digits (``" 1" ... " 5"``, star ratings; not
    token ids): a row's label is then read as a word, never as an index (:func:`label_index`)."""
    return bool(labels) and all(isinstance(w, str) and is_integer_text(w.strip()) for w in labels)


def label_index(value, labels: Optional[Sequence], loc: str) -> int:
    """The index of a row's label: an integer (or integer text, ``"1"`` or ``"1.0"``) is the
    index itself; a string equal to a label word (surrounding spaces and case ignored) is that
    word's index. When every label word is a number (:func:`number_words`), a label is read as
    a word, never as an index (``3`` is the word ``" 3"``).

    Raises:
        ValueError: a label out of range, or a name that matches no label word (names ``loc``,
            the value and the labels).
    """
    n = whole_number(value)  # 1.0 and "1.0" (an int column with gaps) are 1
    if number_words(labels) and (n is not None or isinstance(value, str)):
        words = [str(w).strip() for w in labels]
        if isinstance(value, str) and value.strip() in words:  # the word as written (" 01", Arabic-Indic digits)
            return words.index(value.strip())
        numbers = [int(w) for w in words]
        if n is not None and n in numbers:  # the number it is (3, 3.0, "3.0")
            return numbers.index(n)
        raise ValueError(f"{loc}: label {value!r} is none of the labels {list(labels)} (the label words are numbers, "
                         "so labels are read as words, not as indices)")
    value = value if n is None else n
    if isinstance(value, int) and not isinstance(value, bool):
        if labels is not None and not 0 <= value < len(labels):
            raise ValueError(f"{loc}: label {value} is not an index of the {len(labels)} labels {list(labels)}")
        if value < 0:
            raise ValueError(f"{loc}: label {value} is negative; labels are indices 0, 1, ...")
        return value
    if isinstance(value, str):
        if labels is None:
            raise ValueError(f"{loc}: label {value!r} is a name, not a class index; give labels (the label words, "
                             "--labels) to read label names")
        names = [str(w).strip().lower() for w in labels]
        if value.strip().lower() in names:
            return names.index(value.strip().lower())
        raise ValueError(f"{loc}: label {value!r} is none of the labels {list(labels)} (nor an index of them)")
    raise ValueError(f"{loc}: label must be an integer index or a label word, got {type(value).__name__} {value!r}")


def check_label_words(labels: Optional[Sequence]) -> None:
    """Refuse label words that a row's label could not tell apart (:func:`label_index` ignores
    surrounding spaces and case), e.g. ``" good"`` and ``" Good"``.

    Raises:
        ValueError: names the words.
    """
    names = [str(w).strip().lower() for w in labels or []]
    same = sorted({n for n in names if names.count(n) > 1})
    if same:
        clash = [w for w in labels if str(w).strip().lower() in same]
        raise ValueError(f"labels {clash} are the same word up to case and spaces; a row's label could not tell them apart")


def _field_columns(template: Optional[str], text_field: str) -> dict:
    """template field → the column that fills it."""
    return {f: (text_field if f == "text" else f) for f in template_fields(template)}


def user_records(data, *, text_field: str = "text", label_field: Optional[str] = None, target_field: Optional[str] = None,
                 template: Optional[str] = None, labels: Optional[Sequence] = None, id_field: Optional[str] = None,
                 name: str = "data", limit: Optional[int] = None) -> Tuple[List[dict], str]:
    """The records of a user's data and the task they make (``"classification"`` with a label
    field, else ``"generation"``).

    Args:
        data: a file path (``.jsonl``, ``.json``, ``.csv``, ``.tsv``) or an object
            (:func:`~aieg_fast.datasets.rows.read_rows`: a ``datasets.Dataset``, a DataFrame, a
            list of dicts).
        text_field: the column of ``{text}`` (the prompt of a generation dataset).
        label_field: the column of the gold label (an index, or a label word with ``labels``).
        target_field: the column of the reference continuation (generation; not with a label).
        template: the prompt template; its ``{name}`` fields other than ``{text}`` are columns.
        labels: the label words (index = label).
        id_field: the column of an identifier (default: ``<name>:<row index>``).
        name: the dataset's name in the ids.
        limit: read only the first ``limit`` rows (a streaming ``datasets.IterableDataset`` no
            further); None: all.

    Returns:
        (records, task) (module docstring).

    Raises:
        FileNotFoundError: no such file. ValueError: an empty field name, an empty file, bytes that are not UTF-8, a
            missing column or field, an empty text, a bad label; each names the data, the row
            (the line of a JSON-lines file), the field and what was found.
        TypeError: data of another kind.
    """
    for arg, value in (("text_field", text_field), ("label_field", label_field), ("target_field", target_field),
                       ("id_field", id_field)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"{arg} must name a column (a non-empty string), got {value!r}")
    if label_field is not None and target_field is not None:
        raise ValueError(f"give label_field (classification) or target_field (generation), not both: "
                         f"got {label_field!r} and {target_field!r}")
    cols = _field_columns(template, text_field)
    if text_field != "text" and "text" not in cols and text_field not in cols.values():
        raise ValueError(f"text_field {text_field!r} is not used: the template {template!r} has no {{text}} field for it; "
                         "name the column in the template itself, or put {text} in it")
    for arg, col in (("label_field", label_field), ("target_field", target_field)):
        if col is not None and col in cols.values():
            by_text = cols.get("text") == col
            raise ValueError(f"{'text_field' if by_text else f'the template {template!r}'} names the column {col!r}, which is "
                             f"the {arg}: the answer would be in the prompt the methods attribute; "
                             + ("give text_field another column" if by_text else f"leave {{{col}}} out of the template"))
    check_label_words(labels)
    rows, where, what = read_rows(data, limit)  # refuses data without rows
    task = "classification" if label_field is not None else "generation"
    out = []
    for i, (r, w) in enumerate(zip(rows, where)):
        loc = f"{what}: {w}"
        if not isinstance(r, dict):
            raise ValueError(f"{loc} is not an object with named fields: {str(r)[:80]!r}")
        need = list(dict.fromkeys(list(cols.values()) + [c for c in (label_field, target_field, id_field) if c]))
        missing = [c for c in need if c not in r]
        if missing:
            role = {label_field: "label_field", target_field: "target_field", id_field: "id_field"}
            named = ", ".join(f"{c!r} ({role.get(c) or ('text_field' if c == text_field else 'template field')})" for c in missing)
            raise ValueError(f"{loc} has no field {named}; its fields: {sorted(r)}")
        fields = {}
        for f, c in cols.items():
            v = r[c]
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"{loc}: field {c!r} must be a non-empty string, got {v!r:.60}")
            fields[f] = v
        ident = r.get(id_field) if id_field else None
        whole = whole_number(ident, text=False)  # 1.0 is 1 (an int column with gaps), as attribute-dataset reads it
        ident = ident if whole is None else whole
        rec = {"id": f"{name}:{i}" if is_empty(ident) else str(ident), "index": i}
        if task == "classification":
            if is_empty(r[label_field]):
                raise ValueError(f"{loc}: label field {label_field!r} is empty")
            rec.update(fields=fields, label=label_index(r[label_field], labels, loc))
            if list(fields) == ["text"]:
                rec["text"] = fields["text"]
        else:
            ref = None if target_field is None or is_empty(r[target_field]) else r[target_field]
            if ref is not None and not isinstance(ref, str):
                raise ValueError(f"{loc}: target field {target_field!r} must be a string, got {type(ref).__name__}")
            rec.update(prompt=fields["text"] if "text" in fields else next(iter(fields.values())), reference=ref,
                       references=[ref] if ref is not None else [])
        out.append(rec)
    return out, task
