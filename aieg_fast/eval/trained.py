"""Refusing to evaluate a model on the rows it was trained on.

A model that ``aieg-fast train-sentiment`` or ``train-nano`` made records in its ``training.json``
how many rows of each evaluation dataset it was trained on (``"training_rows_in"``: dataset →
``{"rows", "trained"}``). A record written before that was kept names its training file only;
its training set is then the registered one read from a file of that name (``boolq_dev.jsonl.gz``
with ``task`` boolq: ``boolq-train``, the even ``idx``), whose rows are in each evaluation dataset
read from the same file with that parity (``boolq``: 1,635 of 3,270).

:func:`check_not_trained_on` refuses a dataset of which the model was trained on at least
:data:`INCIDENTAL` of the rows (half of ``boolq`` for a model trained on ``boolq-train``; all
of ``sst2-dev`` for one trained on it), naming the dataset to evaluate it on instead; fewer (two
of SST-2 test's 1,821 sentences, "what 's next ?" and "no . .", are also SST-2 train phrases) is
a note on stderr.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, Optional

from ..datasets import DATASETS, EVALUATION_DATASETS, load_records
from ..models import TRAINING_RECORD, training_folder

__all__ = ["INCIDENTAL", "check_not_trained_on", "trained_rows"]

#: the share of a dataset's rows below which training rows in it are noted, not refused.
INCIDENTAL = 0.01


def _inferred(record: dict, data_dir=None) -> Dict[str, Dict[str, int]]:
    """:func:`trained_rows` of a record without ``"training_rows_in"``: the registered training
    set read from a file of the recorded name (module docstring), else nothing known."""
    settings = record.get("settings") if isinstance(record.get("settings"), dict) else {}
    name = Path(str(settings.get("train_file") or "")).name
    sources = [d for d in DATASETS.values() if name and name in (d.file, d.shipped)]
    train = [d for d in sources if not d.evaluation] or sources
    if len(train) != 1:
        return {}
    parity = train[0].parity
    out = {}
    for d in sources:
        if not d.evaluation:
            continue
        try:
            rows = load_records(d.name, data_dir)
        except (OSError, ValueError):  # not there: nothing known
            continue
        trained = sum(1 for r in rows if parity is None or r.get("idx", parity) % 2 == parity)
        out[d.name] = {"rows": len(rows), "trained": trained}
    return out


def trained_rows(record: dict, data_dir=None) -> Dict[str, Dict[str, int]]:
    """Evaluation dataset → ``{"rows": its rows, "trained": those the model was trained on}``,
    from a ``training.json`` record (module docstring); the datasets not known are left out."""
    recorded = record.get("training_rows_in")
    if isinstance(recorded, dict):
        return {k: v for k, v in recorded.items() if isinstance(v, dict) and {"rows", "trained"} <= set(v)}
    return _inferred(record, data_dir)


def _refused(counts: Dict[str, int]) -> bool:
    return counts["trained"] > 0 and counts["trained"] >= INCIDENTAL * counts["rows"]


def _instead(record: dict, rows: Dict[str, Dict[str, int]], dataset: str) -> Optional[str]:
    """The dataset to evaluate on instead: the scored set the training recorded, else one of the
    same task with no row trained on; None when none is known."""
    task = DATASETS[dataset].task
    free = [d for d in EVALUATION_DATASETS if d in rows and DATASETS[d].task == task and not rows[d]["trained"]]
    dev = record.get("dev_dataset")
    return dev if dev in free else (free[0] if free else None)


def check_not_trained_on(model, dataset, data_dir=None) -> None:
    """Refuse, before any work, to evaluate ``model`` on ``dataset`` when the model's
    ``training.json`` (:func:`aieg_fast.models.training_folder`) shows it was trained on at
    least :data:`INCIDENTAL` of the dataset's rows; a note on stderr for fewer. Nothing for a
    dataset that is not a registered name, or a model without a training record.

    Raises:
        ValueError: names the model, the dataset, how many of its rows were trained on, and
            the dataset to evaluate on instead.
    """
    if not isinstance(dataset, str) or dataset not in EVALUATION_DATASETS:
        return
    folder = training_folder(model)
    if folder is None:
        return
    try:
        record = json.loads((folder / TRAINING_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # not a record this package wrote; loading the model says what is wrong with the folder
    rows = trained_rows(record if isinstance(record, dict) else {}, data_dir)
    counts = rows.get(dataset)
    if counts is None or not counts["trained"]:
        return
    name = getattr(model, "name", model) if not isinstance(model, (str, Path)) else str(model)
    said = f"model {str(name)!r} was trained on {counts['trained']:,} of the {counts['rows']:,} rows of dataset {dataset!r}"
    if not _refused(counts):
        print(f"note: {said} ({folder / TRAINING_RECORD}); their scores measure rows it learnt", file=sys.stderr)
        return
    alt = _instead(record, rows, dataset)
    use = (f"evaluate it on {alt!r}, whose rows it was not trained on" if alt is not None
           else "evaluate it on rows it was not trained on (a dataset file)")
    raise ValueError(f"{said} ({folder / TRAINING_RECORD}): its scores there would measure rows it learnt; {use}")
