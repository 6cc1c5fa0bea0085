"""The dataset registry (aieg_fast.datasets): shipped copies, data folders, readers."""
from __future__ import annotations

import hashlib

import pytest

from aieg_fast import datasets as D


def test_shipped_datasets(monkeypatch, tmp_path, capsys):
    """Without a data folder the shipped copies are used, and they are the documented files."""
    monkeypatch.delenv("AIEG_FAST_DATA", raising=False)
    readme = (D.SHIPPED_DATA_DIR / "README.md").read_text()
    for name, rows in (("sst2-dev", 872), ("sst2-test", 1821), ("imdb", 200)):
        path = D.dataset_path(name)
        assert path.parent.name == "data" and path.name == D.DATASETS[name].shipped
        assert hashlib.sha256(path.read_bytes()).hexdigest() in readme
        data = D.load_dataset(name)
        assert len(data) == rows and {l for _, l in data} == {0, 1}
    imdb = D.load_dataset("imdb")
    assert sum(l for _, l in imdb) == 100 and [l for _, l in imdb[:4]] == [0, 1, 0, 1]
    with pytest.raises(FileNotFoundError, match="data-dir"):
        D.dataset_path("imdb", data_dir=tmp_path)


def test_registry_sample_and_data_folder(monkeypatch, tmp_path):
    """The shipped sample, the evaluation names, a data folder from $AIEG_FAST_DATA, bad names."""
    sample = D.sst2_sample()
    assert len(sample) == 24 and sample == D.load_dataset("sst2-sample")
    assert sample == D.DATASETS["sst2-sample"].read(D.SHIPPED_DATA_DIR / D.DATASETS["sst2-sample"].shipped)
    assert D.EVALUATION_DATASETS == ("sst2-sample", "sst2-dev", "sst2-test", "imdb", "boolq", "boolq-heldout", "longra",
                                     "longra-reagent", "wikibio", "wikitext", "tellmewhy", "tellmewhy-reagent")
    assert not D.DATASETS["sst2-train"].evaluation
    train = D.DATASETS["sst2-train"].read(D.SHIPPED_DATA_DIR / D.DATASETS["sst2-train"].shipped)  # gzipped copy
    assert len(train) == 67349 and train[0] == ("hide new secretions from the parental units ", 0)
    (tmp_path / "sst2_dev.tsv").write_text("sentence\tlabel\ngood film \t1\nbad film \t0\n")
    monkeypatch.setenv("AIEG_FAST_DATA", str(tmp_path))
    assert D.data_folder() == tmp_path and D.data_folder(tmp_path / "x") == tmp_path / "x"
    assert D.load_dataset("sst2-dev") == [("good film ", 1), ("bad film ", 0)]
    with pytest.raises(FileNotFoundError, match="sst2_test.tsv"):
        D.load_dataset("sst2-test")
    with pytest.raises(ValueError, match="dataset must be one of"):
        D.load_dataset("sst2-train")
    with pytest.raises(ValueError, match="dataset must be one of"):
        D.dataset_path("sst2-sample")
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\nno label here\n")
    with pytest.raises(ValueError, match="line 2"):
        D.read_sst2_tsv(bad)


def test_json_array_file_read_whatever_the_suffix_case(tmp_path):
    """A JSON array in x.JSON is read as one (it was read as JSON lines: "line 1 is not JSON")."""
    from aieg_fast.datasets.rows import read_rows

    body = '[\n {"text": "the movie is good"},\n {"text": "bad film"}\n]\n'
    for name in ("low.json", "up.JSON", "mixed.Json"):
        (tmp_path / name).write_text(body, encoding="utf-8")
        rows, where, _ = read_rows(tmp_path / name)
        assert [r["text"] for r in rows] == ["the movie is good", "bad film"], name
