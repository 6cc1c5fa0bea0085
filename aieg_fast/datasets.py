"""Datasets: one registry of every dataset the package reads, and their readers.

Each entry of :data:`DATASETS` (a :class:`DatasetSpec`) says where a dataset lives and how it is
used: its file name in an evaluation data folder, the copy shipped in ``aieg_fast/data`` (if
any; source and checksums in ``aieg_fast/data/README.md``), its reader, and the prompt template
and label words of its task (a zero-shot sentiment prompt for a causal LM; label index = the
dataset's label, 0 negative, 1 positive).

* ``sst2-sample``: the first 24 SST-2 dev sentences of 6 to 16 words (shipped only; the demo);
* ``sst2-dev``, ``sst2-test``: the GLUE SST-2 dev set and the binary SST-2 test set (shipped in
  full);
* ``imdb``: the 2,000-review IMDb test sample ``imdb_test_sample.jsonl`` of a data folder, else
  its first 200 reviews shipped with the package;
* ``sst2-train``: the SST-2 train set (67,349 rows, shipped gzipped as ``sst2_train.tsv.gz``),
  read by :mod:`aieg_fast.training` only; not an evaluation dataset.

The data folder is ``data_dir`` when given, else ``$AIEG_FAST_DATA`` when set
(:func:`data_folder`); with neither, the shipped copies are read (:func:`dataset_path`).

This module imports nothing else of the package.
"""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

__all__ = [
    "DATASETS",
    "DATA_ENV",
    "EVALUATION_DATASETS",
    "SENTIMENT_LABELS",
    "SENTIMENT_LABEL_NAMES",
    "SENTIMENT_TEMPLATE",
    "SHIPPED_DATA_DIR",
    "TASKS",
    "DatasetSpec",
    "data_folder",
    "dataset_path",
    "load_dataset",
    "read_jsonl",
    "read_sst2_tsv",
    "sst2_sample",
]

#: the folder of the copies shipped with the package (``aieg_fast/data``).
SHIPPED_DATA_DIR = Path(__file__).resolve().parent / "data"
#: environment variable naming the evaluation data folder.
DATA_ENV = "AIEG_FAST_DATA"

#: Zero-shot sentiment prompt for a causal LM; ``{text}`` is the attributed span.
SENTIMENT_TEMPLATE = "Review: {text}\nIs this review positive or negative? Answer:"
#: Label words (single tokens for GPT-2 and SmolLM2 tokenizers), index = SST-2 label.
SENTIMENT_LABELS = (" negative", " positive")
#: Names of the labels, index = SST-2 label.
SENTIMENT_LABEL_NAMES = ("negative", "positive")


# ============================================================================================
# readers
# ============================================================================================
def _lines(path):
    """(line number, text without the newline) of a UTF-8 text file (gzipped when it ends in
    ``.gz``), each line decoded on its own so that a bad byte is reported with its line.

    Raises:
        ValueError: a line that is not UTF-8 (names the file, the line and the byte offset).
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        for no, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{path}: line {no} is not UTF-8 text (byte {err.start}: {raw[err.start:err.start + 4]!r}); "
                                 "save the file as UTF-8") from None
            yield no, line.rstrip("\r\n")


def read_sst2_tsv(path) -> List[Tuple[str, int]]:
    """(sentence, label) pairs of a GLUE-style ``sentence<TAB>label`` file with a header line.

    The files are unquoted, so each line is split on its last TAB.

    Raises:
        ValueError: a line that is not ``sentence<TAB>0|1``, or not UTF-8 (names the file and line).
    """
    rows = []
    for no, line in _lines(path):
        if no == 1:
            continue  # the header
        if not line:
            continue
        parts = line.rsplit("\t", 1)
        if len(parts) != 2 or parts[1].strip() not in ("0", "1"):
            raise ValueError(
                f"{path}: line {no} is not 'sentence<TAB>label' with label 0 or 1: {line[:80]!r}"
            )
        rows.append((parts[0], int(parts[1])))
    return rows


def read_jsonl(path) -> List[Tuple[str, int]]:
    """(text, label) pairs of a JSON-lines file whose objects hold ``"text"`` (a string) and
    ``"label"`` (0 or 1) (the IMDb sample; blank lines are skipped).

    Raises:
        ValueError: a line that is not UTF-8, not a JSON object, without ``text`` or ``label``,
            or with a wrong type (names the file and line).
    """
    rows = []
    for no, line in _lines(path):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: line {no} is not JSON ({err.msg} at column {err.colno}): {line[:80]!r}") from None
        if not isinstance(r, dict):
            raise ValueError(f"{path}: line {no} is not a JSON object with 'text' and 'label': {line[:80]!r}")
        missing = [k for k in ("text", "label") if k not in r]
        if missing:
            raise ValueError(f"{path}: line {no} has no {' and no '.join(repr(k) for k in missing)} key (keys: {sorted(r)})")
        label = r["label"]
        if not isinstance(r["text"], str) or isinstance(label, bool) or label not in (0, 1):
            raise ValueError(f"{path}: line {no} needs a string 'text' and a 'label' of 0 or 1, got "
                             f"text {type(r['text']).__name__}, label {label!r}")
        rows.append((r["text"], int(label)))
    return rows


# ============================================================================================
# the registry
# ============================================================================================
@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: where its file is, how to read it, and the prompt of its task.

    Attributes:
        name: the registry name (``--dataset``).
        file: its file name in an evaluation data folder (None: not read from a folder).
        shipped: its file name in :data:`SHIPPED_DATA_DIR` (None: not shipped).
        reader: ``path -> [(text, label), ...]``.
        template: prompt template with ``{text}`` for a causal LM.
        labels: label words (index = the dataset's label).
        label_names: names of the labels (index = the dataset's label).
        evaluation: whether ``evaluate`` accepts it (False for the training set).
    """

    name: str
    file: Optional[str]
    shipped: Optional[str]
    reader: Callable[[Path], List[Tuple[str, int]]]
    template: str = SENTIMENT_TEMPLATE
    labels: Tuple[str, ...] = SENTIMENT_LABELS
    label_names: Tuple[str, ...] = SENTIMENT_LABEL_NAMES
    evaluation: bool = True

    def read(self, path) -> List[Tuple[str, int]]:
        """(text, label) pairs of ``path`` read with this dataset's reader."""
        return self.reader(path)


#: name → :class:`DatasetSpec`, in the order of the ``--dataset`` choices.
DATASETS: Dict[str, DatasetSpec] = {
    "sst2-sample": DatasetSpec("sst2-sample", None, "sst2_dev_sample.tsv", read_sst2_tsv),
    "sst2-dev": DatasetSpec("sst2-dev", "sst2_dev.tsv", "sst2_dev.tsv", read_sst2_tsv),
    "sst2-test": DatasetSpec("sst2-test", "sst2_test.tsv", "sst2_test.tsv", read_sst2_tsv),
    "imdb": DatasetSpec("imdb", "imdb_test_sample.jsonl", "imdb_test_sample_200.jsonl", read_jsonl),
    "sst2-train": DatasetSpec("sst2-train", "sst2_train.tsv", "sst2_train.tsv.gz", read_sst2_tsv, evaluation=False),
}
#: names of the datasets ``evaluate`` accepts, in registry order.
EVALUATION_DATASETS = tuple(k for k, d in DATASETS.items() if d.evaluation)
#: ``explain --task`` presets → the dataset whose first sentence, template and label words they use.
TASKS = {"sentiment": "sst2-sample"}


def data_folder(data_dir=None) -> Optional[Path]:
    """The evaluation data folder asked for: ``data_dir``, else ``$AIEG_FAST_DATA``, else None."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else None


def dataset_path(name: str, data_dir=None) -> Path:
    """The file an evaluation dataset is read from.

    Order: ``data_dir`` when given (only there); else ``$AIEG_FAST_DATA`` when set (only there);
    else the copy shipped in the package (:attr:`DatasetSpec.shipped`; for IMDb the first 200
    reviews of the 2,000-review sample, whose file ``imdb_test_sample.jsonl`` a data folder can
    hold).

    Raises:
        ValueError: unknown name, or a dataset without a data-folder file (``sst2-sample``).
        FileNotFoundError: the file is not in the folder asked for.
    """
    allowed = [k for k in EVALUATION_DATASETS if DATASETS[k].file]
    if name not in allowed:
        raise ValueError(f"dataset must be one of {allowed}, got {name!r}")
    spec = DATASETS[name]
    folder = data_folder(data_dir)
    if folder is None:
        return SHIPPED_DATA_DIR / spec.shipped
    path = folder / spec.file
    if not path.is_file():
        raise FileNotFoundError(
            f"dataset {name!r} needs {spec.file} in {folder}, which is missing; pass --data-dir DIR "
            f"(or set AIEG_FAST_DATA) to the folder holding the evaluation data, or leave both unset "
            f"to use the copy shipped with the package"
        )
    return path


def load_dataset(name: str, data_dir=None) -> List[Tuple[str, int]]:
    """(text, label) pairs of an evaluation dataset, in file order (file chosen by
    :func:`dataset_path`; ``sst2-sample`` is always the shipped sample).

    Raises:
        ValueError: unknown name. FileNotFoundError: the data file is missing (names the
            folder searched and how to point to another).
    """
    if name not in EVALUATION_DATASETS:
        raise ValueError(f"dataset must be one of {list(EVALUATION_DATASETS)}, got {name!r}")
    spec = DATASETS[name]
    if spec.file is None:
        return spec.read(SHIPPED_DATA_DIR / spec.shipped)
    return spec.read(dataset_path(name, data_dir))


def sst2_sample() -> List[Tuple[str, int]]:
    """The 24 SST-2 dev sentences shipped with the package, as (sentence, label) pairs."""
    return load_dataset("sst2-sample")
