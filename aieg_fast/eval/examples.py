"""The examples of a classification evaluation: a registered dataset, a user's file or a Python
object, as records (:func:`aieg_fast.datasets.load_records`), and the text each one attributes.

A record's ``fields`` fill the template: a one-field dataset (``{"text": ...}``, the sentiment
sets) is attributed as a plain string with ``{text}``; a record with several fields (BoolQ's
passage and question) as the mapping, every field attributed and the template text held fixed
(:func:`aieg_fast.core.inputs.fill_template`).
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Union

from ..datasets import DATASETS, EVALUATION_DATASETS, DatasetSpec, dataset_path, is_dataset_file, load_records, template_fields, user_dataset
from ..datasets.user import number_words
from ..runs import torchrun_rank
from .checks import check_labels

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = ["load_examples", "example_text", "label_token_ids", "truncate", "CLASSIFICATION_TASKS"]

#: the task kinds :func:`aieg_fast.eval.evaluate` scores (the others have their own runners).
CLASSIFICATION_TASKS = ("sentiment", "classification")


def _where(spec: DatasetSpec, dataset, data_dir) -> str:
    if spec.file is not None and spec.name in DATASETS:
        return str(dataset_path(spec.name, data_dir))
    return "shipped sample" if spec.name in DATASETS else _name_of(dataset)


def _name_of(dataset) -> str:
    """A dataset in a message: the path of a file, else the kind of object (never its rows)."""
    if isinstance(dataset, (str, Path)):
        return str(dataset)
    n = len(dataset) if hasattr(dataset, "__len__") else None
    return f"a {type(dataset).__name__}" + (f" of {n} rows" if n is not None else "")


def _spec_and_records(dataset, data_dir, fields: dict) -> Tuple[DatasetSpec, List[dict]]:
    """The dataset asked for: a registry name, a file or a rows object (``fields``: the user
    dataset's field options, used only for those)."""
    if isinstance(dataset, str) and dataset in DATASETS:
        if dataset not in EVALUATION_DATASETS:
            raise ValueError(f"dataset must be one of {list(EVALUATION_DATASETS)} (or a .jsonl / .json / .csv / .tsv file), "
                             f"got {dataset!r} (a training set)")
        return DATASETS[dataset], load_records(dataset, data_dir)
    if isinstance(dataset, (str, Path)) and not is_dataset_file(dataset):
        raise ValueError(f"dataset must be one of {list(EVALUATION_DATASETS)} or a .jsonl / .json / .csv / .tsv file, got {str(dataset)!r}")
    return user_dataset(dataset, **fields)


#: keys of a record that the package sets, not columns of the data (the id names the record)
_NOT_COLUMNS = ("id", "text")


def _with_columns(spec: DatasetSpec, data: List[dict], extra: Sequence[str], template: str) -> Tuple[DatasetSpec, List[dict]]:
    """``spec`` and ``data`` with the columns ``extra`` that a template names beside the dataset's
    fields (BoolQ's ``{title}``) as fields too, after them (attributed; ``--max-tokens`` still
    cuts the first). Without such names both are returned as they are, so the recorded text of
    a run with the dataset's own fields does not change.

    Raises:
        ValueError: a name that is not a text column of every record (names it, the first such
            record and the columns there).
    """
    if not extra:
        return spec, data
    for rec in data:
        bad = [f for f in extra if not isinstance(rec.get(f), str) or f in _NOT_COLUMNS]
        if bad:
            columns = sorted(k for k, v in rec.items() if isinstance(v, str) and k not in _NOT_COLUMNS)
            raise ValueError(f"template names {', '.join('{' + f + '}' for f in bad)}, which is not a text column of dataset "
                             f"{spec.name!r} (its record {rec['id']!r} has {columns or 'none'}; fields "
                             + ", ".join("{" + f + "}" for f in spec.fields) + f"), in {template!r}")
    data = [dict(rec, fields={**rec["fields"], **{f: rec[f] for f in extra}}) for rec in data]
    return dataclasses.replace(spec, fields=tuple(spec.fields) + tuple(extra)), data


def load_examples(dataset, data_dir, n: int, start: int, *, text_field: str = "text", label_field: Optional[str] = None,
                  template: Optional[str] = None, labels: Optional[Sequence] = None,
                  id_field: Optional[str] = None) -> Tuple[DatasetSpec, List[dict]]:
    """The spec and the first ``n`` records of a classification dataset (fewer, with a note,
    if it is shorter).

    Args:
        dataset: a name of :data:`~aieg_fast.datasets.EVALUATION_DATASETS`, a file path
            (``.jsonl``, ``.json``, ``.csv``, ``.tsv``) or an object with dict rows (a
            ``datasets.Dataset``; :func:`~aieg_fast.datasets.user_dataset`).
        data_dir: the evaluation data folder (registered datasets).
        n, start: the first n examples; ``start`` must be below their number.
        text_field, label_field, template, labels, id_field: a user dataset's columns, template
            and label words (:func:`~aieg_fast.datasets.user_dataset`; ``label_field`` is
            required there).

    Raises:
        ValueError: an unknown name, a dataset of another task (names the runner to use), a
            user dataset without ``label_field``, a template without the dataset's fields or
            naming other columns than its records' text columns (those it names are attributed too), an
            empty dataset, repeated ids, ``start`` too large, fewer than 2 or repeated ``labels``;
            a malformed file (names the file and line). FileNotFoundError: a missing file.
        TypeError: ``labels`` a str.
    """
    check_labels(labels)
    user = not (isinstance(dataset, str) and dataset in DATASETS)
    if user and label_field is None:
        kind = f"the dataset file {str(dataset)!r}" if isinstance(dataset, (str, Path)) else f"the data ({_name_of(dataset)})"
        raise ValueError(f"label_field (--label-field) must name the column of the gold labels of {kind}; data without "
                         "labels is a generation dataset: score it with aieg_fast.eval.evaluate_generation")
    spec, data = _spec_and_records(dataset, data_dir, dict(text_field=text_field, label_field=label_field, template=template,
                                                            labels=labels, id_field=id_field, limit=start + n))
    if template is not None and not user:
        named = template_fields(template)  # its {name} fields ({{name}} is text), each once
        off = [f for f in spec.fields if f not in named]
        if off:
            raise ValueError(f"template must name each field of dataset {spec.name!r} once ("
                             + ", ".join("{" + f + "}" for f in spec.fields) + f"); {', '.join(off)} is not, in {template!r}")
        spec, data = _with_columns(spec, data, [f for f in named if f not in spec.fields], template)
    if spec.task not in CLASSIFICATION_TASKS:
        runner = "aieg_fast.eval.evaluate_longra" if spec.task == "longra" else "aieg_fast.eval.evaluate_generation"
        raise ValueError(f"dataset {spec.name!r} is a {spec.task} dataset; evaluate scores classification datasets: use {runner}")
    where = _where(spec, dataset, data_dir)
    if not data:
        raise ValueError(f"dataset {spec.name!r} has no examples: {where} holds no data line; check the file (or --data-dir)")
    ids = [r["id"] for r in data]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})[:5]
        rows = {t: [k for k, i in enumerate(ids) if i == t][:4] for t in twice}
        raise ValueError(f"dataset {spec.name!r}: the ids must be unique, got {twice} more than once (id_field; the rows, "
                         f"counted from 0: {rows})")
    if torchrun_rank() == 0:  # once under torchrun
        if user and number_words(labels):
            print(f"note: the label words {list(labels)} are numbers, so the labels of {label_field!r} are read as those words "
                  f"({str(labels[0]).strip()!r} is label 0), not as indices", file=sys.stderr)
        if len(data) < n:
            print(f"note: {spec.name} has {len(data)} examples ({where}); evaluating {len(data)}, not n = {n}", file=sys.stderr)
    data = data[:n]
    if start >= len(data):
        raise ValueError(f"start must be below the number of examples ({len(data)} in {spec.name}), got {start}")
    return spec, data


def example_text(rec: dict) -> Union[str, Dict[str, str]]:
    """What a record attributes: its text (one ``{text}`` field) or its mapping of fields."""
    fields = rec["fields"]
    return fields["text"] if list(fields) == ["text"] else dict(fields)


def _cut(ex: "Explainer", text: str, n: int) -> str:
    """The text of the first ``n`` tokens of ``text``, or of fewer where the n-th token ends
    inside a character (byte-level tokenizers split an emoji or an accented letter into bytes:
    the cut would end in U+FFFD, a character the user never wrote, and encode to more than
    ``n`` tokens): the longest cut of at most ``n`` tokens that encodes back to at most ``n``."""
    tok = ex.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if len(ids) <= n:
        return text
    for k in range(n, max(0, n - 8), -1):  # a character is at most 4 bytes: a few steps back at most
        cut = tok.decode(ids[:k])
        torn = cut.endswith("\ufffd") and "\ufffd" not in text
        if not torn and len(tok(cut, add_special_tokens=False)["input_ids"]) <= n:
            return cut
    return tok.decode(ids[:n])


def truncate(ex: "Explainer", text: Union[str, Dict[str, str]], max_tokens: Optional[int]):
    """``text`` cut to ``max_tokens`` tokens (None: as it is; never inside a character:
    fewer tokens where the last would end inside one). A mapping of fields (a template's) is cut
    in its ``"text"`` field (a user file's ``--text-field``), else in its first (BoolQ's passage),
    so that all fields together hold at most ``max_tokens`` tokens; the other fields are kept
    whole (at least one token of the cut field is kept)."""
    if max_tokens is None:
        return text
    if isinstance(text, str):
        return _cut(ex, text, max_tokens)
    cut = "text" if "text" in text else next(iter(text))
    others = sum(len(ex.tokenizer(v, add_special_tokens=False)["input_ids"]) for k, v in text.items() if k != cut)
    return dict(text, **{cut: _cut(ex, text[cut], max(1, max_tokens - others))})


def label_token_ids(ex: "Explainer", labels: Sequence, template: Optional[str] = None,
                    fields: Sequence[str] = ("text",)) -> List[int]:
    """The token ids of the label words as :func:`aieg_fast.eval.evaluate` resolves them.

    Each label word is resolved after the prompt without its fields (the template with every
    ``{field}`` removed), so a word's leading space tokenises as it does after the prompt; for a
    classification head a label is the class index. Source: specs/aieg.md §7, Prediction (the label-word
    probability space, ``prob_space="labels"``); the resolution itself is this package's.

    Args:
        ex: the run's explainer. labels: one label word (str) or class index (int) per label.
        template: the run's prompt template (``config.json``'s ``template``), or None.
        fields: the dataset's fields named in ``template`` (default: ``text``).

    Returns:
        list[int], one token id (class index) per label, in the order of ``labels``.

    Raises:
        ValueError / TypeError: a label word that is not one token, or a class index out of
            range (the message starts with ``labels:``); two labels naming the same token.
    """
    context = template  # the label words follow the prompt: without its fields
    for f in fields if template is not None else ():
        context = context.replace("{" + f + "}", "")
    try:
        ids = [ex.resolve_target(l, context=context)["id"] for l in labels]
    except (ValueError, TypeError) as err:
        text = str(err)
        if "is not a single token" in text:  # the target's advice (target_fn='logprob') does not apply to label words
            text = text.split("; pass one token")[0] + ("; each label word must be one token of this tokenizer (a leading "
                                                        "space often matters): give other words (--labels)")
        raise type(err)(f"labels: {text}") from None
    if len(set(ids)) < len(ids):
        raise ValueError(f"labels {labels!r} name the same token more than once (ids {ids}); give one label word per class")
    _note_doubled_space(template, fields, labels)
    return ids


def _note_doubled_space(template: Optional[str], fields: Sequence[str], labels: Sequence) -> None:
    """A note on stderr when the prompt ends in whitespace (the template's text after its last
    field) and a label word starts with it: the model would read the label as a second space
    after the prompt's last token, a text it rarely saw. Said once under torchrun."""
    ends = [template.rfind("{" + f + "}") + len(f) + 2 for f in fields if template is not None and "{" + f + "}" in template]
    after = template[max(ends):] if ends else ""
    spaced = [l for l in labels if isinstance(l, str) and l[:1].isspace()]
    if after[-1:].isspace() and spaced and torchrun_rank() == 0:
        print(f"note: the template ends with whitespace ({after[-16:]!r}) and the label words {spaced} start with it: the "
              "prompt's last token is that whitespace and the label follows as a second one; drop the template's trailing "
              "whitespace (the label words carry the space)", file=sys.stderr)
