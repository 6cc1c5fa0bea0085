"""``records.jsonl``: one strict-JSON line per evaluated example, appended as it is done.

A record is ``{"id", "index", "text", "label", "pred_label", "target", "label_probs", "methods":
{spec: metrics}, "controls": {"uniform": metrics}, "n_tokens", "n_attributable", "p", "p0",
"degenerate", "tie_seed"}`` (``tie_seed``: the seed of the random order of equal scores in the
top-k, :func:`~aieg_fast.eval.scores.top_k_positions`; each method's ``signal_flags``: the kinds
of the attribution's ``degenerate`` findings). An example whose input was refused has ``{"id",
"index", "label", "skipped": reason, "methods": {}, "controls": {}}``. Every line also names the
machine that computed it (``"machine"``: :func:`~aieg_fast.runs.machine.machine_tag`; older
lines have none). NaN / infinite floats are written as null
(:func:`json_safe`). Reading merges lines of the same id (a rerun that adds methods appends a
line with only those, and a merged torchrun part may repeat a line); a method or control added
by a line of another machine keeps that line's ``"machine"`` in its own entry.

A hard kill can cut the last line. :func:`read_records` leaves it out (its example is computed
again) and :func:`repair_records`, called by :func:`~aieg_fast.eval.evaluate` before it appends,
cuts it off the file (the bytes go to ``records.jsonl.torn``), so the recomputed record starts
on a line of its own (:mod:`aieg_fast.runs.records`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

from ..runs.machine import machine_tag
from ..runs.records import append_jsonl, json_safe, read_jsonl, repair_jsonl

__all__ = ["RECORDS_FILE", "json_safe", "read_records", "append_record", "merge_record_lines", "repair_records"]

#: file name of the records in an evaluation folder.
RECORDS_FILE = "records.jsonl"


def merge_record_lines(lines) -> Dict[str, dict]:
    """Records by example id from record lines in file order; a later line for the same id
    adds its methods and controls to the earlier one (each entry with the later line's
    ``"machine"`` when that is not the record's)."""
    out: Dict[str, dict] = {}
    for r in lines:
        if "id" not in r:
            continue
        if r["id"] in out:
            rec, tag = out[r["id"]], r.get("machine")
            for part in ("methods", "controls"):
                added = r.get(part, {})
                if tag is not None and tag != rec.get("machine"):
                    added = {k: {**v, "machine": tag} if isinstance(v, dict) else v for k, v in added.items()}
                rec.setdefault(part, {}).update(added)
        else:
            out[r["id"]] = r
    return out


def read_records(path: Path) -> Dict[str, dict]:
    """Records by example id; a later line for the same id adds methods to the earlier one.

    A missing file gives ``{}``; a cut last line (a hard kill) is left out, so its example is
    computed again (:func:`aieg_fast.runs.records.read_jsonl`).
    """
    records, _ = read_jsonl(path)
    return merge_record_lines(records)


def repair_records(path: Path) -> List[str]:
    """Cut a cut last line off ``path`` before records are appended (the removed bytes are kept
    in ``<path>.torn``); what was repaired, as sentences (:func:`aieg_fast.runs.records.repair_jsonl`)."""
    return repair_jsonl(path)


def append_record(path: Path, rec: dict) -> None:
    """Append ``rec`` as one strict-JSON line (:func:`json_safe`) with the ``"machine"`` that
    computed it (:func:`~aieg_fast.runs.machine.machine_tag`; a record that names one, computed
    elsewhere and copied here, keeps it), flushed to the disk."""
    append_jsonl(path, [rec if "machine" in rec else {**rec, "machine": machine_tag()}])
