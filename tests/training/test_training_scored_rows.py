"""``train_sentiment`` with a training file given never trains on the set it is scored on: BoolQ
rows by their question (or idx and passage), SST-2 rows by their sentence, whatever the copy's
spacing, case, passage title or label type; on a one-layer random LLaMA (seconds)."""
from __future__ import annotations

import importlib.util
import json

import pytest

import aieg_fast.training.sentiment as sentiment
from aieg_fast.datasets import DATASETS, dataset_path
from aieg_fast.training import train_sentiment
from builders import sst2_rows, word_level_base

pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="needs peft")


@pytest.fixture(autouse=True)
def tiny(monkeypatch):
    monkeypatch.setattr(sentiment, "load_hf_model", word_level_base)


def _own_boolq(n, start=100):
    return [{"idx": start + i, "question": f"is the film number {i} good", "passage": f"the film was {i}", "label": i % 2}
            for i in range(n)]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_superglue_copy_of_the_boolq_scored_rows_is_left_out(tmp_path, capsys):
    """SuperGLUE's val.jsonl keeps the title in the passage ("Title -- passage") and has no
    title field; its questions are the scored set's, and every such row is left out."""
    held = DATASETS["boolq-heldout"].records(dataset_path("boolq-heldout"))[:3]
    copy = [{"question": "  " + r["question"].upper() + " ", "passage": f"{r['title']} -- {r['passage']}", "idx": r["idx"],
             "label": int(r["label"])} for r in held]
    f = _write_jsonl(tmp_path / "val.jsonl", copy + _own_boolq(2))
    done = train_sentiment(task="boolq", out_dir=tmp_path / "run", train_file=f, batch_size=2, epochs=1, n_dev=2, progress=False)
    assert "3 of the 5 rows of val.jsonl are in boolq-heldout" in capsys.readouterr().err
    assert done["steps"] == 1 and "trained on 2 rows of val.jsonl" in done["split"]
    assert "less 3 whose question is in boolq-heldout" in done["split"]


def test_boolq_rows_are_matched_by_idx_only_with_the_same_passage(tmp_path, capsys):
    """A row of another BoolQ split shares idx numbers with the dev set (not its examples): kept.
    A scored row whose question was reworded keeps its idx and passage: left out."""
    held = DATASETS["boolq-heldout"].records(dataset_path("boolq-heldout"))[:2]
    other_split = [{"idx": r["idx"], "question": "is this another question", "passage": "another passage", "label": 1} for r in held]
    reworded = [{"idx": held[0]["idx"], "question": "reworded: " + held[0]["question"], "passage": held[0]["passage"], "label": 0}]
    f = _write_jsonl(tmp_path / "mixed.jsonl", other_split + reworded + _own_boolq(1))
    done = train_sentiment(task="boolq", out_dir=tmp_path / "run", train_file=f, batch_size=3, epochs=1, n_dev=2, progress=False)
    assert "1 of the 4 rows of mixed.jsonl are in boolq-heldout" in capsys.readouterr().err
    assert "trained on 3 rows of mixed.jsonl" in done["split"]


def test_sst2_dev_sentences_in_a_training_file_are_left_out_and_said(tmp_path, capsys):
    dev = DATASETS["sst2-dev"].read(dataset_path("sst2-dev"))[:4]
    f = sst2_rows(tmp_path / "t.tsv", 4)
    with open(f, "a", encoding="utf-8") as fh:
        fh.writelines(f"{' '.join(s.split()).upper()}  \t{y}\n" for s, y in dev)
    done = train_sentiment(out_dir=tmp_path / "run", train_file=f, n_train=8, batch_size=2, n_dev=2, progress=False)
    assert "4 of the 8 rows of t.tsv are in sst2-dev" in capsys.readouterr().err
    assert done["steps"] == 2 and done["settings"]["n_train"] == 4
    assert "trained on 4 rows of t.tsv" in done["split"] and "less 4 whose sentence is in sst2-dev" in done["split"]
    clean = train_sentiment(out_dir=tmp_path / "clean", train_file=sst2_rows(tmp_path / "c.tsv", 4), n_train=4, batch_size=2,
                            n_dev=2, progress=False)
    assert "none of whose sentences is in sst2-dev" in clean["split"]


def test_training_json_records_the_rows_of_each_evaluation_dataset_trained_on(tmp_path):
    """What ``evaluate`` reads to refuse a dataset the model was trained on (tests/eval/test_eval_trained_rows.py)."""
    train = DATASETS["boolq-train"].records(dataset_path("boolq-train"))[:3]
    f = _write_jsonl(tmp_path / "b.jsonl", [{k: r[k] for k in ("idx", "question", "passage", "label")} for r in train])
    done = train_sentiment(task="boolq", out_dir=tmp_path / "run", train_file=f, batch_size=3, epochs=1, n_dev=2, progress=False)
    assert done["training_rows_in"] == {"boolq": {"rows": 3270, "trained": 3}, "boolq-heldout": {"rows": 1635, "trained": 0}}
    assert json.loads((tmp_path / "run" / "training.json").read_text())["training_rows_in"] == done["training_rows_in"]


def test_the_boolq_halves_are_described_as_they_are():
    """The halves share no question but 137 passages; 177 held-out questions ask about a passage
    trained on with another question. The docstrings and the split note say so, not "disjoint"."""
    import aieg_fast.datasets as datasets
    from aieg_fast.datasets import load_records
    from aieg_fast.training.split import scored_split

    train, held = load_records("boolq-train"), load_records("boolq-heldout")
    assert not {r["question"] for r in train} & {r["question"] for r in held}
    both = {r["passage"] for r in train} & {r["passage"] for r in held}
    assert (len(both), sum(r["passage"] in both for r in held)) == (137, 177)
    for doc in (sentiment.__doc__, datasets.__doc__):
        assert "disjoint" not in doc and "137 passages" in " ".join(doc.split()) and "177" in doc
    _, note = scored_split(train, held, dataset_path("boolq-train"), False, "boolq-train", "boolq-heldout")
    assert "no question in common; 137 passages are in both, so 177 of the 1635 scored questions" in note
    assert "disjoint" not in note
