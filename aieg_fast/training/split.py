"""The training rows and the scored set kept apart: a training file given for a task loses its rows
that are in the set the model is scored on (:func:`scored_split`), and the split note of
``training.json`` says how the rows were chosen.

Two rows are the same example when their :func:`example_key` agree: a BoolQ row by its question
(BoolQ's 3,270 dev questions are all different; a copy of the set may write the passage as
"Title -- passage" or the labels as ints, and the question stays), a one-text row (SST-2) by its
text, both with runs of whitespace made one space and case folded. A BoolQ row whose ``idx`` is
that of a scored row whose passage ends its own (the title may stay before it) is one too.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from ..datasets import DATASETS, EVALUATION_DATASETS, DatasetSpec, load_records

__all__ = ["example_key", "rows_in_datasets", "scored_split"]


def _norm(text) -> str:
    return " ".join(str(text).split()).casefold()


def example_key(record: dict) -> str:
    """What tells a record's example apart (:func:`aieg_fast.datasets.load_records`' records):
    the normalised question where the fields hold one (BoolQ), else the normalised fields (the
    text of SST-2)."""
    fields = record["fields"]
    if "question" in fields:
        return _norm(fields["question"])
    return " | ".join(_norm(fields[k]) for k in sorted(fields))


def _in_scored(recs: List[dict], scored: List[dict]) -> List[bool]:
    """Whether each of ``recs`` is an example of ``scored`` (module docstring: by key, or BoolQ's
    idx with the same passage)."""
    keys = {example_key(r) for r in scored}
    passages: Dict[int, str] = {r["idx"]: _norm(r["passage"]) for r in scored if isinstance(r.get("idx"), int) and "passage" in r}

    def same_idx(r: dict) -> bool:
        p = passages.get(r.get("idx")) if isinstance(r.get("idx"), int) and not isinstance(r.get("idx"), bool) else None
        return p is not None and _norm(r.get("passage", "")).endswith(p)

    return [example_key(r) in keys or same_idx(r) for r in recs]


def _shared_passages(train: List[dict], held: List[dict]) -> Tuple[int, int]:
    """(passages in both sets, rows of ``held`` whose passage is one of them)."""
    both = {_norm(r["passage"]) for r in train} & {_norm(r["passage"]) for r in held}
    return len(both), sum(_norm(r["passage"]) in both for r in held)


def scored_split(recs: List[dict], scored: List[dict], path: Path, given: bool, train_name: str,
                 eval_name: str) -> Tuple[List[dict], str]:
    """The training records of a task, and the split note saying how they were made ("" for the
    task's own training set when it is not a half of the scored set's source: SST-2 train).

    A file given (``given``, read from ``path``) loses its rows that are examples of
    ``scored``, the records of the scored set ``eval_name`` (module docstring; said on stderr,
    and the count in the note). The task's own halves of one set (``boolq-train`` /
    ``boolq-heldout``) share no question; their note counts the passages they share.

    Raises:
        ValueError: every row of the file given is in the scored set.
    """
    train_parity, held = DATASETS[train_name].parity, DATASETS[eval_name].parity
    where = f" (idx % 2 == {held})" if held is not None else ""
    what = "question" if "question" in DATASETS[eval_name].fields else "sentence"
    if not given:
        if train_parity is None:
            return recs, ""
        shared, asked = _shared_passages(recs, scored)
        return recs, (f"trained on {train_name} ({path.name} rows with idx % 2 == {train_parity}), scored on {eval_name}{where}: "
                      f"halves of the same set with no question in common; {shared} passages are in both, so {asked} of the "
                      f"{len(scored)} scored questions ask about a passage trained on with another question")
    kept = [r for r, inside in zip(recs, _in_scored(recs, scored)) if not inside]
    dropped = len(recs) - len(kept)
    if not kept:
        raise ValueError(f"train_file {str(path)!r}: all its {len(recs)} rows are in {eval_name}, the set the adapter is "
                         "scored on; no row is left to train on")
    if dropped:
        print(f"note: {dropped} of the {len(recs)} rows of {path.name} are in {eval_name} (the scored set: the same {what}) "
              "and are left out of training", file=sys.stderr)
    which = (f"less {dropped} whose {what} is in {eval_name}" if dropped else f"none of whose {what}s is in {eval_name}")
    return kept, (f"trained on {len(kept)} rows of {path.name} (all rows of the file given, {which}), scored on {eval_name}"
                  f"{where}: no training row is in the scored set")


def rows_in_datasets(texts: Sequence, spec: DatasetSpec) -> Dict[str, Dict[str, int]]:
    """How many rows of each evaluation dataset of ``spec``'s task (the same task kind and
    fields; those that cannot be read are left out) are examples of the training rows ``texts``
    (strs, or mappings of template fields): dataset → ``{"rows": its rows, "trained": those}``,
    as ``training.json`` records it for :func:`aieg_fast.eval.trained.check_not_trained_on`."""
    keys = {example_key({"fields": t if isinstance(t, dict) else {"text": t}}) for t in texts}
    out = {}
    for name in EVALUATION_DATASETS:
        if DATASETS[name].task != spec.task or DATASETS[name].fields != spec.fields:
            continue
        try:
            rows = load_records(name)
        except (OSError, ValueError):  # not in the data folder: not known
            continue
        out[name] = {"rows": len(rows), "trained": sum(example_key(r) in keys for r in rows)}
    return out
