"""The parquet copy of a dataset run's records (optional; needs pyarrow)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Sequence

from ..runs import replace_file

__all__ = ["check_parquet", "write_parquet", "LIST_COLUMNS"]

#: record fields written as list columns; every other list or dict field is a JSON string column.
LIST_COLUMNS = ("tokens", "token_ids", "scores", "attributable", "words", "word_scores", "raw_tokens", "special")


def check_parquet() -> None:
    """Raise ValueError (naming ``parquet``) when pyarrow is not installed."""
    import importlib

    try:
        importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ValueError("parquet=True (--parquet) needs pyarrow: pip install pyarrow") from None


def _column(records: Sequence[dict], key: str) -> List:
    values = [r.get(key) for r in records]
    if key in LIST_COLUMNS:
        return values
    if any(isinstance(v, (dict, list)) for v in values):
        return [None if v is None else json.dumps(v) for v in values]
    if key in ("id", "example_target", "example_contrast"):  # a token string or an id: one column type
        return [None if v is None else str(v) for v in values]
    return values


def write_parquet(records: Sequence[dict], path) -> Path:
    """Write ``records`` as a parquet table at ``path`` (a temporary file renamed over it): one
    row per record, the fields of :data:`LIST_COLUMNS` as list columns, the other nested fields
    (``target``, ``options``, ``info``, ``timing``, ...) as JSON strings, ``id``,
    ``example_target`` and ``example_contrast`` as strings."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = list(dict.fromkeys(k for r in records for k in r))
    table = pa.table({k: _column(records, k) for k in keys})
    buffer = pa.BufferOutputStream()  # written in memory, then replaced whole (a kill leaves the old file or the new one)
    pq.write_table(table, buffer)
    replace_file(path, memoryview(buffer.getvalue()))  # the buffer itself, not a copy of it
    return Path(path)
