"""``evaluate`` refuses a dataset whose rows the model was trained on (its ``training.json`` says
so), before any work, and names the held-out dataset to use instead."""
from __future__ import annotations

import json

import pytest

from aieg_fast import cli
from aieg_fast.eval import evaluate

#: the training.json of the BoolQ adapter kept in benchmarks/faithfulness/boolq_heldout_ft/adapter
#: (written before "training_rows_in" was recorded), its loss curve left out
KEPT_BOOLQ = {"finished": True, "dev_accuracy": 0.68, "n_dev": 1635, "steps": 309, "dev_dataset": "boolq-heldout",
              "settings": {"n_train": None, "batch_size": 16, "lr": 0.0005, "seed": 0, "train_file": "boolq_dev.jsonl.gz",
                           "task": "boolq", "epochs": 3}}


def _folder(path, record):
    path.mkdir(parents=True)
    (path / "training.json").write_text(json.dumps(record))
    (path / "adapter_config.json").write_text("{}")  # not loadable: the refusal must come first
    return path


def test_a_boolq_model_is_refused_on_the_whole_of_boolq_before_any_work(tmp_path):
    model = _folder(tmp_path / "smollm2-boolq", KEPT_BOOLQ)
    with pytest.raises(ValueError, match=r"model '.*smollm2-boolq' was trained on 1,635 of the 3,270 rows of dataset 'boolq' .*"
                                         r"evaluate it on 'boolq-heldout', whose rows it was not trained on"):
        evaluate(str(model), dataset="boolq", n=300, out_dir=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    from aieg_fast.eval.trained import check_not_trained_on, trained_rows

    assert trained_rows(KEPT_BOOLQ) == {"boolq": {"rows": 3270, "trained": 1635}, "boolq-heldout": {"rows": 1635, "trained": 0}}
    check_not_trained_on(str(model), "boolq-heldout")  # the held-out half passes


def test_the_command_refuses_it_too(tmp_path, capsys):
    model = _folder(tmp_path / "smollm2-boolq", KEPT_BOOLQ)
    assert cli.main(["evaluate", "--model", str(model), "--dataset", "boolq", "--n", "300", "--out", str(tmp_path / "out"),
                     "--no-progress"]) == 2
    assert "rows of dataset 'boolq'" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_recorded_training_rows_are_read_and_a_few_are_only_noted(tmp_path, capsys):
    from aieg_fast.eval.trained import check_not_trained_on

    rec = {"training_rows_in": {"sst2-sample": {"rows": 24, "trained": 24}, "sst2-dev": {"rows": 872, "trained": 872},
                                "sst2-test": {"rows": 1821, "trained": 2}, "imdb": {"rows": 200, "trained": 0}},
           "settings": {"train_file": "/data/sst2_dev.tsv"}}
    model = _folder(tmp_path / "nano", rec)
    with pytest.raises(ValueError, match="872 of the 872 rows of dataset 'sst2-dev'.*evaluate it on 'imdb'"):
        check_not_trained_on(str(model), "sst2-dev")
    check_not_trained_on(str(model), "sst2-test")
    assert "trained on 2 of the 1,821 rows of dataset 'sst2-test'" in capsys.readouterr().err
    check_not_trained_on(str(model), "imdb")
    check_not_trained_on(None, "boolq")  # the embedded model: no training record
    check_not_trained_on(str(tmp_path / "nano"), tmp_path / "file.jsonl")  # a file: not a registered dataset


def test_a_nano_trained_on_the_dev_set_is_refused_on_it_by_its_alias(tmp_path, monkeypatch):
    from aieg_fast.datasets import dataset_path
    from aieg_fast.training import train_nano
    from builders import byte_level_tokenizer

    monkeypatch.setenv("AIEG_FAST_CACHE", str(tmp_path / "cache"))
    done = train_nano(dataset_path("sst2-dev"), dataset_path("sst2-dev"), epochs=1, batch_size=128, tokenizer=byte_level_tokenizer(),
                      progress=False)
    assert done["training_rows_in"]["sst2-dev"] == {"rows": 872, "trained": 872}
    assert done["training_rows_in"]["sst2-sample"] == {"rows": 24, "trained": 24}
    with pytest.raises(ValueError, match="model 'gpt-nano' was trained on 872 of the 872 rows of dataset 'sst2-dev'.*'sst2-test'"):
        evaluate("gpt-nano", dataset="sst2-dev", n=5, out_dir=tmp_path / "out", progress=False)
