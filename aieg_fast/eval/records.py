"""``records.jsonl``: one strict-JSON line per evaluated example, appended as it is done.

A record is ``{"id", "index", "text", "label", "pred_label", "target", "label_probs", "methods":
{spec: metrics}, "controls": {"uniform": metrics}, "n_tokens", "n_attributable", "p", "p0",
"degenerate", "tie_seed"}`` (``tie_seed``: the seed of the random order of equal scores in the
top-k, :func:`~aieg_fast.eval.scores.top_k_positions`; each method's ``signal_flags``: the kinds
of the attribution's ``degenerate`` findings). An example whose input was refused has ``{"id",
"index", "label", "skipped": reason, "methods": {}, "controls": {}}``. NaN / infinite floats are written as null (:func:`json_safe`). Reading merges
lines of the same id (a rerun that adds methods appends a line with only those) and skips a line
cut by an interrupt, so a folder resumes where it stopped.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict

__all__ = ["RECORDS_FILE", "json_safe", "read_records", "append_record"]

#: file name of the records in an evaluation folder.
RECORDS_FILE = "records.jsonl"


def json_safe(x):
    """``x`` with NaN / inf floats replaced by None (in nested dicts, lists and tuples; tuples
    become lists), so that ``json.dumps(..., allow_nan=False)`` writes strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def read_records(path: Path) -> Dict[str, dict]:
    """Records by example id; a later line for the same id adds methods to the earlier one.

    A missing file gives ``{}``; a line that is not JSON (cut by an interrupt) is skipped.
    """
    out: Dict[str, dict] = {}
    if not path.exists():
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interrupt
            if r["id"] in out:
                out[r["id"]]["methods"].update(r["methods"])
                out[r["id"]]["controls"].update(r.get("controls", {}))
            else:
                out[r["id"]] = r
    return out


def append_record(path: Path, rec: dict) -> None:
    """Append ``rec`` as one strict-JSON line (:func:`json_safe`) and flush it."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(json_safe(rec), allow_nan=False) + "\n")
        fh.flush()
