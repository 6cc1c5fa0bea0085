"""Datasets: one registry of every dataset the package reads, and their readers.

Each entry of :data:`DATASETS` (a :class:`DatasetSpec`) says where a dataset lives and how it is
used: its file name in an evaluation data folder, the copy shipped in ``aieg_fast/data`` (if
any; source, sha256 and licence in ``aieg_fast/data/README.md``), its reader, its task kind, and
for a classification task the prompt template and label words (label index = the dataset's
label).

Sentiment (``task="sentiment"``; :data:`SENTIMENT_TEMPLATE`, label 0 negative, 1 positive):

* ``sst2-sample``: the first 24 SST-2 dev sentences of 6 to 16 words (shipped only; the demo);
* ``sst2-dev``, ``sst2-test``: the GLUE SST-2 dev set and the binary SST-2 test set (shipped);
* ``imdb``: the 2,000-review IMDb test sample ``imdb_test_sample.jsonl`` of a data folder, else
  its first 200 reviews shipped with the package;
* ``sst2-train``: the SST-2 train set (shipped gzipped), for :mod:`aieg_fast.training` only.

Question answering (``task="classification"``; :data:`BOOLQ_TEMPLATE`, passage and question
both attributed, label 0 no, 1 yes; explained with the contrast target by default):

* ``boolq``: the BoolQ dev set (3,270; Clark et al. 2019; shipped gzipped);
* ``boolq-train`` / ``boolq-heldout``: its two halves by the parity of ``idx`` (even: 1,635 for
  training, :mod:`aieg_fast.training`; odd: 1,635 to evaluate the model trained on the other
  half). No question is in both, but 137 passages are (BoolQ asks several questions about one
  passage): 177 held-out questions ask about a passage of a training question.

Ground truth (``task="longra"``, :mod:`aieg_fast.eval.longra`): ``longra`` (573 instances rebuilt
from the analogy set with ReAGent's templates) and ``longra-reagent`` (the 519 instances ReAGent
ran, six models' rows; shipped gzipped).

Open generation (``task="generation"``; records with ``prompt``, ``reference``,
``references``): ``wikibio`` (WikiBio test records 0–99), ``wikitext`` (ReAGent's 22 WikiText
prompts), both shipped; ``tellmewhy`` (the 464-question annotated test subset) and
``tellmewhy-reagent`` (45 prompts of ReAGent's repository: rows 0–24 are the 25 behind
ReAGent's published TellMeWhy results, rows 25–44 the lines of its ``tellmewhy2.txt``, which it
did not evaluate; ``n=25`` takes the first), read from a data folder only: TellMeWhy states no
licence, so it is not shipped.

The data folder is ``data_dir`` when given, else ``$AIEG_FAST_DATA`` when set
(:func:`data_folder`); with neither, the shipped copies are read (:func:`dataset_path`). A user's
own file or ``datasets.Dataset`` is read by :func:`user_dataset`. :func:`load_records` gives
every dataset as records (dicts).

This package imports nothing else of the package.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .readers import read_boolq, read_generation, read_jsonl, read_longra, read_sst2_tsv
from .user import label_index, template_fields, user_records

__all__ = [
    "BOOLQ_LABELS",
    "BOOLQ_LABEL_NAMES",
    "BOOLQ_TEMPLATE",
    "DATASETS",
    "DATA_ENV",
    "EVALUATION_DATASETS",
    "SENTIMENT_LABELS",
    "SENTIMENT_LABEL_NAMES",
    "SENTIMENT_TEMPLATE",
    "SHIPPED_DATA_DIR",
    "TASKS",
    "TASK_KINDS",
    "DatasetSpec",
    "data_folder",
    "dataset_path",
    "is_dataset_file",
    "label_index",
    "load_dataset",
    "load_records",
    "read_boolq",
    "read_generation",
    "read_jsonl",
    "read_longra",
    "read_sst2_tsv",
    "sst2_sample",
    "template_fields",
    "user_dataset",
]

#: the folder of the copies shipped with the package (``aieg_fast/data``).
SHIPPED_DATA_DIR = Path(__file__).resolve().parent.parent / "data"
#: environment variable naming the evaluation data folder.
DATA_ENV = "AIEG_FAST_DATA"

#: Zero-shot sentiment prompt for a causal LM; ``{text}`` is the attributed span.
SENTIMENT_TEMPLATE = "Review: {text}\nIs this review positive or negative? Answer:"
#: Label words (single tokens for GPT-2 and SmolLM2 tokenizers), index = SST-2 label.
SENTIMENT_LABELS = (" negative", " positive")
#: Names of the labels, index = SST-2 label.
SENTIMENT_LABEL_NAMES = ("negative", "positive")

#: BoolQ prompt (the lm-evaluation-harness ``boolq`` task's, on the passage without the Wikipedia title that
#: SuperGLUE's passage begins with; each record keeps it as ``title``): passage and question are attributed.
BOOLQ_TEMPLATE = "{passage}\nQuestion: {question}?\nAnswer:"
#: BoolQ label words, index = label (0 false, 1 true).
BOOLQ_LABELS = (" no", " yes")
#: Names of the BoolQ labels.
BOOLQ_LABEL_NAMES = ("no", "yes")

#: the task kinds of :attr:`DatasetSpec.task`.
TASK_KINDS = ("sentiment", "classification", "generation", "longra")

_TELLMEWHY_NOT_SHIPPED = (
    "TellMeWhy is not shipped with the package: its licence is not stated (no LICENSE in StonyBrookNLP/tellmewhy or "
    "knowwhy; the Hugging Face card says 'unknown')"
)


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
        reader: ``path -> [(text, label), ...]`` (the sentiment files) or ``path -> [dict, ...]``.
        template: prompt template for a causal LM, ``{text}`` or one ``{field}`` per field of
            :attr:`fields` (classification); None elsewhere.
        labels: label words (index = the dataset's label); ``()`` outside classification.
        label_names: names of the labels (index = the dataset's label).
        evaluation: whether ``evaluate`` accepts it (False for the training sets).
        task: ``"sentiment"``, ``"classification"``, ``"generation"`` or ``"longra"``
            (:data:`TASK_KINDS`).
        fields: the record fields that fill the template (classification).
        target_fn: what ``evaluate`` explains when its ``target_fn`` is ``"auto"``: ``"auto"``
            (the label log-probability its metrics score) or ``"contrast"`` (BoolQ).
        parity: keep only the rows whose ``idx`` has this parity (0 even, 1 odd); None: all.
        not_shipped: why there is no shipped copy (said when the data folder lacks the file).
    """

    name: str
    file: Optional[str]
    shipped: Optional[str]
    reader: Optional[Callable[[Path], list]]
    template: Optional[str] = SENTIMENT_TEMPLATE
    labels: Tuple = SENTIMENT_LABELS
    label_names: Tuple[str, ...] = SENTIMENT_LABEL_NAMES
    evaluation: bool = True
    task: str = "sentiment"
    fields: Tuple[str, ...] = ("text",)
    target_fn: str = "auto"
    parity: Optional[int] = None
    not_shipped: str = ""

    def read(self, path) -> list:
        """The rows of ``path`` read with this dataset's reader: (text, label) pairs for the
        sentiment files, dicts for the others (:meth:`records` gives both as records)."""
        rows = self.reader(path)
        if self.parity is not None:
            rows = [r for r in rows if r["idx"] % 2 == self.parity]
        return rows

    def records(self, path) -> List[dict]:
        """The rows of ``path`` as records (:func:`load_records`)."""
        out = []
        for i, row in enumerate(self.read(path)):
            if isinstance(row, tuple):  # a sentiment file: (text, label)
                out.append({"id": f"{self.name}:{i}", "index": i, "text": row[0], "fields": {"text": row[0]}, "label": row[1]})
            elif self.task == "classification":
                # the id names the source row (boolq:<idx>), the same in a dataset's halves
                out.append(dict(row, id=f"{self.name.split('-')[0]}:{row['idx']}", index=i, fields={f: row[f] for f in self.fields}))
            else:
                out.append(dict(row, id=str(row["id"]), index=i))
        return out


def _boolq(name: str, parity: Optional[int] = None, evaluation: bool = True) -> DatasetSpec:
    return DatasetSpec(name, "boolq_dev.jsonl", "boolq_dev.jsonl.gz", read_boolq, BOOLQ_TEMPLATE, BOOLQ_LABELS,
                       BOOLQ_LABEL_NAMES, evaluation, "classification", ("passage", "question"), "contrast", parity)


def _other(name: str, file: str, shipped: Optional[str], reader, task: str, not_shipped: str = "") -> DatasetSpec:
    return DatasetSpec(name, file, shipped, reader, None, (), (), True, task, (), "auto", None, not_shipped)


#: name → :class:`DatasetSpec`, in the order of the ``--dataset`` choices.
DATASETS: Dict[str, DatasetSpec] = {
    "sst2-sample": DatasetSpec("sst2-sample", None, "sst2_dev_sample.tsv", read_sst2_tsv),
    "sst2-dev": DatasetSpec("sst2-dev", "sst2_dev.tsv", "sst2_dev.tsv", read_sst2_tsv),
    "sst2-test": DatasetSpec("sst2-test", "sst2_test.tsv", "sst2_test.tsv", read_sst2_tsv),
    "imdb": DatasetSpec("imdb", "imdb_test_sample.jsonl", "imdb_test_sample_200.jsonl", read_jsonl),
    "sst2-train": DatasetSpec("sst2-train", "sst2_train.tsv", "sst2_train.tsv.gz", read_sst2_tsv, evaluation=False),
    "boolq": _boolq("boolq"),
    "boolq-train": _boolq("boolq-train", parity=0, evaluation=False),
    "boolq-heldout": _boolq("boolq-heldout", parity=1),
    "longra": _other("longra", "longra_full.jsonl", "longra_full.jsonl.gz", read_longra, "longra"),
    "longra-reagent": _other("longra-reagent", "longra_reagent_used.jsonl", "longra_reagent_used.jsonl.gz", read_longra, "longra"),
    "wikibio": _other("wikibio", "wikibio_test100.jsonl", "wikibio_test100.jsonl", read_generation, "generation"),
    "wikitext": _other("wikitext", "reagent_wikitext_prompts.jsonl", "reagent_wikitext_prompts.jsonl", read_generation, "generation"),
    "tellmewhy": _other("tellmewhy", "tellmewhy_test_annotated.jsonl", None, read_generation, "generation", _TELLMEWHY_NOT_SHIPPED),
    "tellmewhy-reagent": _other("tellmewhy-reagent", "tellmewhy_reagent_prompts.jsonl", None, read_generation, "generation",
                                _TELLMEWHY_NOT_SHIPPED),
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


def _spec(name: str, allowed: Sequence[str]) -> DatasetSpec:
    if name not in allowed:
        raise ValueError(f"dataset must be one of {list(allowed)} (or a .jsonl / .json / .csv / .tsv file), got {name!r}")
    return DATASETS[name]


def dataset_path(name: str, data_dir=None) -> Path:
    """The file a registered dataset is read from.

    Order: ``data_dir`` when given (only there); else ``$AIEG_FAST_DATA`` when set (only there);
    else the copy shipped in the package (:attr:`DatasetSpec.shipped`; for IMDb the first 200
    reviews of the 2,000-review sample, whose file ``imdb_test_sample.jsonl`` a data folder can
    hold). The training halves (``sst2-train``, ``boolq-train``) are found the same way.

    Raises:
        ValueError: unknown name, or a dataset without a data-folder file (``sst2-sample``).
        FileNotFoundError: the file is not in the folder asked for, or (TellMeWhy) no folder was
            given and the dataset is not shipped (says why).
    """
    spec = _spec(name, [k for k, d in DATASETS.items() if d.file])
    folder = data_folder(data_dir)
    if folder is None:
        if spec.shipped is None:
            raise FileNotFoundError(f"dataset {name!r}: {spec.not_shipped}. Put {spec.file} in a folder and pass --data-dir DIR "
                                    f"(data_dir=) or set {DATA_ENV}")
        return SHIPPED_DATA_DIR / spec.shipped
    path = folder / spec.file
    if not path.is_file():
        why = f" ({spec.not_shipped})" if spec.not_shipped else ", or leave both unset to use the copy shipped with the package"
        raise FileNotFoundError(
            f"dataset {name!r} needs {spec.file} in {folder}, which is missing; pass --data-dir DIR "
            f"(or set {DATA_ENV}) to the folder holding the evaluation data{why}"
        )
    return path


def _path(spec: DatasetSpec, data_dir) -> Path:
    return SHIPPED_DATA_DIR / spec.shipped if spec.file is None else dataset_path(spec.name, data_dir)


def load_dataset(name: str, data_dir=None) -> List[Tuple[str, int]]:
    """(text, label) pairs of a one-text classification dataset (the sentiment datasets), in
    file order (file chosen by :func:`dataset_path`; ``sst2-sample`` is always the shipped
    sample). Other datasets: :func:`load_records`.

    Raises:
        ValueError: unknown name, or a dataset that is not (text, label) pairs (BoolQ, LongRA,
            generation; names :func:`load_records`). FileNotFoundError: the data file is
            missing (names the folder searched and how to point to another).
    """
    spec = _spec(name, EVALUATION_DATASETS)
    if spec.task != "sentiment":
        raise ValueError(f"dataset {name!r} is a {spec.task} dataset, not (text, label) pairs: read it with load_records({name!r})")
    return spec.read(_path(spec, data_dir))


def load_records(name: str, data_dir=None) -> List[dict]:
    """The examples of a registered dataset as dicts, in file order (file chosen by
    :func:`dataset_path`).

    Every record has ``"id"`` (str, unique in the dataset) and ``"index"`` (its position in
    the list). Then, by task (:attr:`DatasetSpec.task`):

    * ``"sentiment"`` / ``"classification"``: ``"fields"`` (template field → str, what is
      attributed: ``{"text": ...}``, BoolQ's ``{"passage", "question"}``) and ``"label"`` (int,
      index into :attr:`DatasetSpec.labels`); one-field datasets also ``"text"``; BoolQ keeps
      ``idx``, ``question``, ``passage``, ``title`` and its id is ``boolq:<idx>`` in all three
      BoolQ sets;
    * ``"generation"``: ``"prompt"`` (str), ``"reference"`` (str or None) and ``"references"``
      (list of str, may be empty), plus the file's other fields;
    * ``"longra"``: ``"prompt"``, ``"target"`` (the final word, without its space),
      ``"relative"``, ``"distractor"``, plus the file's other fields.

    The training halves (``sst2-train``, ``boolq-train``) are read too.

    Raises:
        ValueError: unknown name; a malformed file (names the file and line).
        FileNotFoundError: the data file is missing (says where it was looked for; for
            TellMeWhy, why it is not shipped).
    """
    return _spec(name, list(DATASETS)).records(_path(DATASETS[name], data_dir))


def is_dataset_file(dataset) -> bool:
    """Whether ``dataset`` names a user's file (a path ending in .jsonl, .json, .csv or .tsv
    that is not a registry name) rather than a registered dataset."""
    return isinstance(dataset, (str, Path)) and str(dataset) not in DATASETS and \
        Path(str(dataset)).suffix.lower() in (".jsonl", ".ndjson", ".json", ".csv", ".tsv")


def user_dataset(data, *, text_field: str = "text", label_field: Optional[str] = None, target_field: Optional[str] = None,
                 template: Optional[str] = None, labels: Optional[Sequence] = None,
                 id_field: Optional[str] = None, limit: Optional[int] = None) -> Tuple[DatasetSpec, List[dict]]:
    """A user's own dataset: a file (``.jsonl``, ``.json``, ``.csv``, ``.tsv``) or a Python
    object (a Hugging Face ``datasets.Dataset`` or anything with ``column_names`` that iterates
    over dict rows, a DataFrame, a list of dicts), as a spec and its records.

    Args:
        data: the file path or object.
        text_field: the column of the text (``{text}`` of the template; the prompt of a
            generation dataset). Default ``"text"``.
        label_field: the column of the gold label (classification): an index into ``labels``,
            or a label word (``"positive"`` matches ``" positive"``).
        target_field: the column of the reference continuation (generation).
        template: the prompt, with ``{text}`` and / or ``{column}`` fields (all attributed).
        labels: the label words (single tokens), index = label.
        id_field: a column of identifiers (default ``<file name>:<row>``).
        limit: read only the first ``limit`` rows (a streaming ``datasets.IterableDataset`` no
            further); None: all.

    Returns:
        (:class:`DatasetSpec` with ``task`` ``"classification"`` (with a label field) or
        ``"generation"``, the template, labels and fields; the records, as :func:`load_records`
        gives them).

    Raises:
        FileNotFoundError: no such file. ValueError: an empty file, a byte that is not UTF-8
            (names the line), a missing column (names the row, the column and the row's
            fields), an empty text, a label that is not an index or label word, a template
            without fields. TypeError: data of another kind.
    """
    name = Path(str(data)).name if isinstance(data, (str, Path)) else "data"
    records, task = user_records(data, text_field=text_field, label_field=label_field, target_field=target_field,
                                 template=template, labels=labels, id_field=id_field, name=name, limit=limit)
    fields = template_fields(template)
    labels = tuple(labels) if labels is not None else ()
    spec = DatasetSpec(name, None, None, None, template, labels, tuple(str(l).strip() for l in labels), True, task, fields)
    return spec, records


def sst2_sample() -> List[Tuple[str, int]]:
    """The 24 SST-2 dev sentences shipped with the package, as (sentence, label) pairs."""
    return load_dataset("sst2-sample")
