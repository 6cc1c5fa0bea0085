"""The examples of a dataset to attribute, from a file or a Python object, checked row by row.

Accepted data (:func:`read_examples`): the files and objects of
:func:`aieg_fast.datasets.rows.read_rows` (JSON lines, JSON, CSV, TSV; a DataFrame, a
``datasets.Dataset``, a list of dicts or strings).

Columns: the text (``text_column``, default ``"text"``, required) and, each optional, the target
(``"target"``: a token string, or a token id / class index as a JSON integer, or with
``target_is_id`` any integer text), the contrast token (``"contrast"``, same forms), a per-row
prompt template with ``{text}`` (``"template"``) and an identifier kept in the output (``"id"``:
a string or a number, unique; a row without one, or data without the column, is numbered by
its index). A default column name that is absent is simply not used; a name given explicitly must
exist. An empty value means none: no target = the model's prediction, no template = the run's.
A CSV / TSV cell is always text: a target ``1`` there is the token of the text ``"1"``, not id 1,
unless ``target_is_id``; :func:`read_examples_and_notes` says which optional columns were used and
how their values were read.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..core.inputs import fill_template, unencodable
from ..datasets.rows import FILE_TYPES, is_empty, read_rows, whole_number

__all__ = ["Example", "read_examples", "read_examples_and_notes", "DEFAULT_COLUMNS", "FILE_TYPES"]

#: role → the column name used when present (``text`` is required).
DEFAULT_COLUMNS = {"text": "text", "target": "target", "contrast": "contrast", "template": "template", "id": "id"}


@dataclass(frozen=True)
class Example:
    """One row: its position ``index`` in the data (the key of its record), ``id`` (the id
    column's value, a whole float as an int; else the index), ``text``, ``target`` /
    ``contrast`` (None, a token string or an int), ``template`` (None: the run's)."""

    index: int
    id: Any
    text: str
    target: Any = None
    contrast: Any = None
    template: Optional[str] = None
    #: where the row is, for messages (``"data 'x.csv': row 0 (line 2)"``; not compared)
    where: str = field(default="", compare=False)

    @property
    def named(self) -> str:
        """The row for messages: where it is in the data, its index and its id."""
        return f"{self.where} (data row {self.index}, id {self.id!r})" if self.where else f"data row {self.index} (id {self.id!r})"


def _token(v, role: str, target_is_id: bool, where: str):
    """A target / contrast value: None, an int (id) or a token string."""
    if is_empty(v):
        return None
    if isinstance(v, bool):
        raise ValueError(f"{where}: {role} must be a token string or an integer id, got {v!r}")
    n = whole_number(v, text=target_is_id)  # 1.0: pandas reads an integer column with gaps as floats
    if n is not None:
        return n
    if isinstance(v, str):
        if not target_is_id:
            return v
        raise ValueError(f"{where}: {role} must be an integer (target_is_id), got {v!r}")
    raise ValueError(f"{where}: {role} must be a token string or an integer id, got {type(v).__name__} {v!r}")


def _columns(keys: Sequence[str], given: Dict[str, Optional[str]], what: str) -> Dict[str, Optional[str]]:
    """role → the column used (None: none), from the explicit names and the defaults present."""
    keys = list(keys)
    out: Dict[str, Optional[str]] = {}
    for role, default in DEFAULT_COLUMNS.items():
        name = given.get(role)
        if name is not None and name not in keys:
            raise ValueError(f"{role}_column {name!r} is not a column of {what} (columns: {keys})")
        out[role] = name if name is not None else (default if default in keys else None)
    if out["text"] is None:
        raise ValueError(f"text_column 'text' is not a column of {what} (columns: {keys}); name the text column with text_column=")
    return out


def read_examples(data, *, text_column: Optional[str] = None, target_column: Optional[str] = None,
                  contrast_column: Optional[str] = None, template_column: Optional[str] = None,
                  id_column: Optional[str] = None, target_is_id: bool = False, limit: Optional[int] = None) -> List[Example]:
    """The examples of ``data`` (see the module docstring), checked, in order.

    Args:
        data: a file path or a Python object (module docstring).
        text_column, target_column, contrast_column, template_column, id_column: column names
            (None: ``"text"``, ``"target"``, ``"contrast"``, ``"template"``, ``"id"`` when present).
        target_is_id: read string targets / contrasts as integer token ids or class indices (a
            CSV cell is always a string).
        limit: only the first ``limit`` rows.

    Returns:
        List[Example], ``index`` = position in the data.

    Raises:
        FileNotFoundError: a missing file. ValueError: an unknown file type, a file that is not
            JSON / CSV, a ``limit`` that is not a positive int, a missing column, a row without a non-empty string text, a target that
            is not a token string or an integer, an id that is not a string or a finite number
            (it must survive JSON), two ids that print the same (``1`` and ``1.0`` or ``'1'``;
            a row without an id is numbered by its index), a template without ``{text}`` exactly once or with another field, no
            row at all, ``target_is_id`` without a target or contrast column; each names the data,
            the row (the line for JSON lines) and the value.
        TypeError: data of another kind.
    """
    return _read(data, text_column, target_column, contrast_column, template_column, id_column, target_is_id, limit)[0]


def read_examples_and_notes(data, **kw) -> Tuple[List[Example], List[str]]:
    """(the examples, as :func:`read_examples` with the same arguments, one note per optional
    column used: its name, what it is, how its values were read and how many rows have one),
    e.g. ``"data 'x.jsonl': column 'target' is each row's target (...): 2 int(s)"``; a column
    used because of its default name says so (a 0/1 class column named ``target`` is read as
    token ids 0 and 1)."""
    examples, cols, given, what, numbered = _read(data, **kw)
    return examples, _column_notes(examples, cols, given, what, numbered, bool(kw.get("target_is_id")))


#: role → what its column is and how a value is read, for the notes
_MEANINGS = {
    "target": "each row's target (an int is a token id / class index, a string the text of the target; empty: the model's "
              "prediction)",
    "contrast": "each row's contrast token, F = z_target - z_contrast (an int is a token id, a string the text of the token)",
    "template": "each row's prompt template with {text} (empty: the run's template)",
    "id": "each row's id, kept in its record (empty: the row's index)",
}

#: how the notes name the kinds of values
_KINDS = {int: "int(s)", str: "string(s)", float: "float(s)"}


def _column_notes(examples: Sequence[Example], cols: Dict[str, Optional[str]], given: Dict[str, Optional[str]], what: str,
                  numbered: Set[int], target_is_id: bool) -> List[str]:
    """One note per optional column used (:func:`read_examples_and_notes`); ``numbered``: the
    rows without an id."""
    notes = []
    for role, meaning in _MEANINGS.items():
        if cols[role] is None:
            continue
        values = [None if role == "id" and e.index in numbered else getattr(e, role) for e in examples]
        kinds = Counter("empty" if v is None else _KINDS.get(type(v), type(v).__name__) for v in values)
        seen = ", ".join(f"{n} {k}" for k, n in kinds.items())
        how = meaning
        if role in ("target", "contrast") and target_is_id:
            how = how.split(" (")[0] + " (read as a token id / class index: target_is_id)"
        note = f"{what}: column {cols[role]!r} is {how}: {seen}"
        digits = any(isinstance(v, str) and whole_number(v) is not None for v in values)
        if role in ("target", "contrast") and not target_is_id and digits:
            note += ('; a string of digits is text ("1" is the token of the text "1"; a CSV cell is always text): '
                     'target_is_id (--target-is-id) reads it as an id')
        if given.get(role) is None:
            note += f"; used because of its name ({cols[role]!r}): rename the column to leave it out"
        notes.append(note)
    return notes


def _read(data, text_column=None, target_column=None, contrast_column=None, template_column=None, id_column=None,
          target_is_id=False, limit=None):
    """(examples, role → column used, role → column given, what the data is, the rows without an
    id): :func:`read_examples`."""
    rows, where, what = read_rows(data, limit)  # refuses a bad limit before reading, and data without rows
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        row, hint = rows[bad], " (a list of data holds dicts or texts)" if isinstance(data, (list, tuple)) else ""
        shown = repr(row) if len(repr(row)) <= 80 else repr(row)[:77] + "..."
        raise ValueError(f"{what}: {where[bad]} is not an object with named columns{hint}, got {type(row).__name__} {shown}")
    keys = list(getattr(data, "column_names", None) or dict.fromkeys(k for r in rows for k in r))
    given = {"text": text_column, "target": target_column, "contrast": contrast_column, "template": template_column, "id": id_column}
    cols = _columns(keys, given, what)
    if target_is_id and cols["target"] is None and cols["contrast"] is None:
        raise ValueError(f"target_is_id: {what} has no target or contrast column to read as ids (columns: {keys[:8]})")
    out, unnamed = [], set()
    for i, (r, w) in enumerate(zip(rows, where)):
        loc = f"{what}: {w}"
        text = r.get(cols["text"])
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{loc}: the text ({cols['text']!r}) must be a non-empty string, got {text!r}")
        why = unencodable(text)
        if why:  # the tokenizer's error named no row
            raise ValueError(f"{loc}: the text ({cols['text']!r}) {why}")
        get = lambda role: None if cols[role] is None else r.get(cols[role])  # noqa: E731
        template = None if is_empty(get("template")) else get("template")
        if template is not None:
            try:  # the prompt's own checks on a stand-in text: {text} once, no other field
                fill_template("x", template)
            except (TypeError, ValueError) as err:
                raise ValueError(f"{loc}: the row's template ({cols['template']!r}): {err}") from None
        if cols["id"] is None or is_empty(get("id")):
            ident = i
            unnamed.add(i)
        else:
            ident = _ident(get("id"), cols["id"], loc)
        out.append(Example(i, ident, text, _token(get("target"), "target", target_is_id, loc),
                           _token(get("contrast"), "contrast", target_is_id, loc), template, loc))
    _refuse_repeated_ids(out, unnamed)
    return out, cols, given, what, unnamed


def _ident(v, column: str, loc: str):
    """A row's id from the id column: a string or a finite number, a float that is a whole
    number up to 2**53 read as an int (pandas reads an integer column with gaps as floats; a
    larger float has lost the int's last digits, and stays a float, visibly)."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        raise ValueError(f"{loc}: the id ({column!r}) must be a string or a finite number (the records keep it as "
                         f"JSON, and a resume compares it), got {v!r} ({type(v).__name__}); convert the column to strings")
    whole = whole_number(v, text=False)  # beyond 2**53 a float stays one
    return v if whole is None else whole


def _refuse_repeated_ids(examples: Sequence[Example], numbered: Set[int]) -> None:
    """Refuse an id column that gives two rows one id (the records' ids name the rows): ids
    that print the same (``1`` and ``'1'``; ``1.0`` is read as ``1``) are one id, as in the
    parquet copy's string column or a table joined on them. ``numbered``: the rows without an
    id, whose id is their index (the message says so when one of them is involved)."""
    seen: Dict[str, Example] = {}
    for e in examples:  # a row without an id has its index as id, which a given id may repeat too
        key = str(e.id)
        if key in seen:
            other = seen[key]
            shown = f" (there {other.id!r})" if repr(other.id) != repr(e.id) else ""
            why = " (a row without an id is numbered by its index from 0)" if {e.index, other.index} & numbered else ""
            raise ValueError(f"{e.where}: id {e.id!r} is also the id of {other.where.rsplit(': ', 1)[-1]}{shown}{why}; the ids "
                             "must be unique (they name the records), ids that print the same are one id; fix the id "
                             "column, or leave it out to number the rows")
        seen[key] = e
