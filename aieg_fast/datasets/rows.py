"""The rows of a user's data, from a file or a Python object, each with where it came from.

:func:`read_rows` reads:

* a ``.jsonl`` / ``.ndjson`` file (one JSON object per line; blank lines skipped), a ``.json``
  file holding a list of objects (a key given twice in an object refused), a ``.csv`` or
  ``.tsv`` file with a header line (read with Python's csv module; every cell a string, an
  empty cell = no value; a row with more cells than the header refused; in a ``.tsv`` quotes
  are text, as in GLUE's files, and a row written with CSV quoting is refused);
* a ``pandas.DataFrame``; a Hugging Face ``datasets.Dataset`` or anything like it (an object
  with ``column_names`` that iterates over dict rows), a list of dicts, or a list of strings
  (the texts, as ``{"text": ...}``).

Used by :func:`aieg_fast.datasets.user_dataset` (``evaluate --dataset PATH``) and
:func:`aieg_fast.dataset_attribution.read_examples` (``attribute-dataset``).
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any, List, Optional, Tuple

__all__ = ["FILE_TYPES", "read_rows", "is_empty", "whole_number", "is_integer_text"]

#: file suffixes :func:`read_rows` reads.
FILE_TYPES = (".jsonl", ".ndjson", ".json", ".csv", ".tsv")


def _utf8(path: Path) -> str:
    """The text of ``path`` (a leading UTF-8 byte-order mark, as some editors write, dropped);
    a byte that is not UTF-8 is named with its line."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ValueError(f"data {str(path)!r}: line {line} is not UTF-8 text (byte {raw[err.start:err.start + 4]!r}); "
                         "save the file as UTF-8") from None


class _DuplicateKey(ValueError):
    pass


def _one_value_per_key(pairs) -> dict:
    """A JSON object's dict, refusing a key given twice (``json`` keeps the last silently)."""
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise _DuplicateKey(f"names the key(s) {twice} more than once")
    return dict(pairs)


def _json_rows(path: Path) -> Tuple[List[dict], List[str]]:
    """(rows, where each row is: ``"line N"``) of a JSON-lines or JSON-list file; an object
    naming a key twice is refused (names its line)."""
    text = _utf8(path)
    if path.suffix.lower() == ".json" and text.lstrip().startswith("{") and "\n" in text.strip():
        try:  # one object over several lines (pretty-printed): not a list of rows
            json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            raise ValueError(f"data {str(path)!r} holds one JSON object, not rows: a .json file holds a list of objects "
                             "([{...}, {...}]); or write one object per line in a .jsonl file")
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
        try:
            rows = json.loads(text, object_pairs_hook=_one_value_per_key)
        except _DuplicateKey as err:
            raise ValueError(f"data {str(path)!r}: an object {err}; a row holds one value per column") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"data {str(path)!r}: not JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
        return rows, [f"item {i}" for i in range(len(rows))]
    rows, where = [], []
    # lines end at "\n" only: str.splitlines would also cut at U+2028, U+0085 and other characters
    # that JSON allows raw inside a string (json.dumps(..., ensure_ascii=False) writes them so)
    for no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line, object_pairs_hook=_one_value_per_key))
        except _DuplicateKey as err:
            raise ValueError(f"data {str(path)!r}: line {no} {err}; a row holds one value per column: {line[:80]!r}") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"data {str(path)!r}: line {no} is not JSON ({err.msg} at column {err.colno}): {line[:80]!r}") from None
        where.append(f"line {no}")
    return rows, where


def _table_rows(path: Path) -> Tuple[List[dict], List[str]]:
    """(rows, where each row is: ``"row N (line L)"``, L the line the row starts on) of a CSV or
    TSV file with a header line; every cell a string, a Windows line break inside a quoted cell
    read as a line break. A row with fewer cells than the header has the rest empty; one with more is
    refused (an unquoted comma would shift every column), as is a header naming a column twice;
    columns without a name (the trailing ``,,`` some spreadsheets write) are left out."""
    text = _utf8(path)
    if not text.strip():
        return [], []
    tsv = path.suffix.lower() == ".tsv"  # tab-separated: quotes are text (as in GLUE's files), not CSV quoting
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if tsv else ",",
                        quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL, strict=not tsv)
    kind = path.suffix[1:].upper()
    rows, where, header, line, opened = [], [], None, 0, None
    former_limit = csv.field_size_limit(max(csv.field_size_limit(), len(text)))  # a cell may be as long as the file
    try:
        for cells in reader:
            first = reader.line_num - sum(c.count("\n") for c in cells)  # the line the row starts on
            if not cells or not any(c.strip() for c in cells):
                continue  # a blank line
            if header is None:
                header, line = cells, first
                twice = sorted({h for h in header if h.strip() and header.count(h) > 1})  # unnamed columns are left out
                if twice:
                    raise ValueError(f"data {str(path)!r}: the header (line {line}) names the column(s) {twice} more than once")
                continue
            if len(cells) > len(header):
                fix = ("a TSV cell cannot hold a tab (quotes are text in .tsv): replace the tabs inside the text, or write the "
                       "data as CSV or JSON lines") if tsv else "quote a text holding a comma"
                raise ValueError(f"data {str(path)!r}: line {first} has {len(cells)} fields, the header {len(header)} "
                                 f"({header}); {fix}: {cells[:4]!r:.120}")
            if tsv:
                opened = _refuse_csv_quoting(path, first, cells, len(header), opened)
            row = dict(zip(header, (c.replace("\r\n", "\n") for c in cells + [""] * (len(header) - len(cells)))))
            rows.append({k: v for k, v in row.items() if k.strip()})
            where.append(f"row {len(rows) - 1} (line {first})")
    except csv.Error as err:
        raise ValueError(f"data {str(path)!r} is not a readable {kind} file: line {reader.line_num}: {err}") from None
    finally:
        csv.field_size_limit(former_limit)
    return rows, where


def _refuse_csv_quoting(path: Path, line: int, cells: List[str], n_columns: int, opened: Optional[tuple]) -> Optional[tuple]:
    r"""Refuse a ``.tsv`` row that CSV quoting wrote (pandas' and ``datasets``' ``to_csv(sep="\t")``
    quote a text holding a quote, a tab or a line break), which quotes-as-text would misread
    silently: a cell ``"..."`` whose quotes inside are all doubled (``"he said ""great"" film"``),
    or a quoted line break that cut a row in two, the first part's last cell opening a quote
    that the next line's first cell closes, one of them with fewer cells than the header.
    Quotes that are text (``6'2"``, ``"Hello," he said.``) are read as they are; a quoted line
    break in a file of one column cannot be told from them.

    ``opened``: what this call returned for the row before (``(line, cells)`` when its last
    cell opens a quote), None for the first row. Returns the same for this row."""
    for c in cells:
        if len(c) > 2 and c[0] == c[-1] == '"' and '""' in c[1:-1] and '"' not in c[1:-1].replace('""', ""):
            _quoting_error(path, line, f"a cell written with CSV quoting ({c[:60]!r}: its quotes doubled inside)")
    closes = cells[0].endswith('"') and cells[0].count('"') % 2 == 1
    if opened is not None and closes and min(len(opened[1]), len(cells)) < n_columns:
        _quoting_error(path, opened[0], f"a cell that opens a quote ({opened[1][-1][:40]!r}) and line {line} one that closes it "
                                        f"({cells[0][:40]!r}), a row of fewer cells than the header between them: a text "
                                        "with a line break written with CSV quoting")
    return (line, cells) if cells[-1].startswith('"') and cells[-1].count('"') % 2 == 1 else None


def _quoting_error(path: Path, line: int, what: str) -> None:
    raise ValueError(f"data {str(path)!r}: line {line} has {what}, but the cells of a .tsv file are read as they are written "
                     "(quotes are text, as in GLUE's files); save it as .csv, whose quoting is read (pandas: "
                     "df.to_csv('data.csv', index=False)), or as .jsonl (df.to_json('data.jsonl', orient='records', lines=True))")


def _python(v):
    """A numpy or torch scalar as the Python number it holds (as pandas rows are read); other
    values as they are."""
    return v.item() if getattr(v, "ndim", None) == 0 and hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def read_rows(data, limit: Optional[int] = None) -> Tuple[List[Any], List[str], str]:
    """(rows, where each row is, what the data is) of any accepted data (module docstring);
    with ``limit``, its first ``limit`` rows (a streaming ``datasets.IterableDataset`` is read
    that far only).

    ``where`` names each row for messages (``"line 3"`` of a JSON-lines file, ``"row 0 (line 2)"``
    of a CSV file, ``"row 5"`` of an object); ``what`` names the data (``"data 'x.csv'"``).
    Numpy and torch scalars in the rows of an object are read as Python numbers.

    Raises:
        FileNotFoundError: a missing file. ValueError: an unknown file type, a folder, bytes that
            are not UTF-8 (names the line), a file that is not JSON / CSV or a .json file holding
            one object, a ``datasets.DatasetDict`` (names its splits: pass one), a ``limit``
            that is not a positive int, no row at all (says whether the file is empty or holds a
            header, blank lines or an empty list only). TypeError: data of another kind.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    rows, where, what = _read_all(data, limit)
    if not rows:
        raise ValueError(f"{what} holds no example{_why_no_rows(data)}")
    return rows[:limit], where[:limit], what


def _why_no_rows(data) -> str:
    """Why a file gave no row, for the message (nothing for an object)."""
    if not isinstance(data, (str, Path)):
        return ""
    if Path(data).stat().st_size == 0:
        return " (the file is empty)"
    suffix = Path(data).suffix.lower()
    return {".csv": " (a header and no rows)", ".tsv": " (a header and no rows)", ".json": " (an empty list)"}.get(
        suffix, " (blank lines only)")


def _read_all(data, limit: Optional[int]) -> Tuple[List[Any], List[str], str]:
    if isinstance(data, (str, Path)):
        path = Path(data)
        if path.suffix.lower() not in FILE_TYPES:
            raise ValueError(f"data {str(data)!r}: unknown file type {path.suffix!r}; expected one of {list(FILE_TYPES)}")
        if path.is_dir():
            raise ValueError(f"data {str(data)!r} is a folder, not a file")
        if not path.is_file():
            raise FileNotFoundError(f"data {str(data)!r}: no such file")
        if path.suffix.lower() in (".csv", ".tsv"):
            rows, where = _table_rows(path)
            return rows, where, f"data {str(data)!r}"
        rows, where = _json_rows(path)
        return rows, where, f"data {str(data)!r}"
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame: numpy scalars as Python ones
        rows = [{k: _python(v) for k, v in r.items()} for r in data.to_dict("records")]
        return rows, [f"row {i}" for i in range(len(rows))], "data"
    if isinstance(getattr(data, "column_names", None), dict):  # a DatasetDict iterates over its split names
        raise ValueError(f"data is a {type(data).__name__} of the splits {list(data.column_names)}; pass one split, "
                         f"e.g. data[{next(iter(data.column_names), 'train')!r}]")
    if hasattr(data, "column_names") or isinstance(data, (list, tuple)):  # a datasets.Dataset (or alike), a list
        rows = list(itertools.islice(data, limit))  # a stream is read no further than limit
        rows = [{"text": r} if isinstance(r, str) else {k: _python(v) for k, v in r.items()} if isinstance(r, dict) else r
                for r in rows]
        return rows, [f"row {i}" for i in range(len(rows))], "data"
    raise TypeError(f"data must be a file path, a pandas DataFrame, a datasets.Dataset or a list of dicts or strings, "
                    f"got {type(data).__name__}")


def is_empty(v) -> bool:
    """Whether a cell holds no value: None, a blank string, or NaN (pandas' empty cell)."""
    return v is None or (isinstance(v, str) and not v.strip()) or (isinstance(v, float) and math.isnan(v))


#: a whole number written as text: "3", " -2", "1.0" (pandas writes an int column with gaps as floats)
_WHOLE_TEXT = re.compile(r"\s*-?\d+(\.0*)?\s*")
_INTEGER_TEXT = re.compile(r"-?\d+")  # \d: decimal digits of any script, as int() reads them ("٣"; not "²")


def is_integer_text(s: str) -> bool:
    """Whether ``s`` is an optional ``-`` and decimal digits (``"3"``, ``"-12"``, ``"٣"``), a
    string ``int()`` reads; not ``"²"`` (a digit ``int()`` refuses), ``"3.0"`` or ``" 3"``."""
    return bool(_INTEGER_TEXT.fullmatch(s))


def whole_number(v, text: bool = True) -> Optional[int]:
    """The int ``v`` holds, or None: an int (not a bool); a float that is a whole number up to
    2**53 (pandas reads an int column with gaps as floats; a larger float has lost the int's
    last digits); with ``text``, a string of one (``"3"``, ``" -2"``, ``"1.0"``)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if v.is_integer() and abs(v) <= 2**53 else None
    if text and isinstance(v, str) and _WHOLE_TEXT.fullmatch(v):
        return int(float(v)) if "." in v else int(v)
    return None
