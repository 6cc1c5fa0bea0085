"""Reading the examples of attribute-dataset (aieg_fast.dataset_attribution.inputs): files and
Python objects, default and named columns, and errors that name the data, the row and the value."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from aieg_fast.dataset_attribution import Example, read_examples

ROWS = [
    {"text": "the movie is good", "id": "a", "target": " good"},
    {"text": "the film was bad", "target": 17, "contrast": " good"},
    {"text": "what a story", "template": "Review: {text} :"},
]


def _want():
    return [Example(0, "a", "the movie is good", " good", None, None),
            Example(1, 1, "the film was bad", 17, " good", None),
            Example(2, 2, "what a story", None, None, "Review: {text} :")]


def test_jsonl_json_list_dataframe_and_lists(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in ROWS[:2]) + "\n\n" + json.dumps(ROWS[2]) + "\n", encoding="utf-8")
    assert read_examples(p) == _want()
    q = tmp_path / "d.json"
    q.write_text(json.dumps(ROWS), encoding="utf-8")
    assert read_examples(q) == _want()
    assert read_examples(pd.DataFrame(ROWS)) == _want()  # numpy scalars and NaN gaps read as Python values
    assert read_examples(ROWS) == _want()
    assert read_examples(["one text", "two"]) == [Example(0, 0, "one text"), Example(1, 1, "two")]
    assert [e.index for e in read_examples(p, limit=2)] == [0, 1]


def test_hf_datasets_object():
    datasets = pytest.importorskip("datasets", reason="the datasets package is not installed (pip install datasets)")
    import pyarrow as pa

    table = pa.table({"text": ["the movie is good", "bad"], "target": [" good", None]})
    ds = datasets.Dataset(table, fingerprint="test")  # no hashing of the constructor's arguments
    assert read_examples(ds) == [Example(0, 0, "the movie is good", " good"), Example(1, 1, "bad")]


def test_csv_tsv_columns_and_ids(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text('review,label_token,key\n"good, really",7,x\nbad,,y\n', encoding="utf-8")
    ex = read_examples(p, text_column="review", target_column="label_token", id_column="key", target_is_id=True)
    assert ex == [Example(0, "x", "good, really", 7), Example(1, "y", "bad")]
    assert read_examples(p, text_column="review", target_column="label_token")[0].target == "7"  # a token string
    t = tmp_path / "d.tsv"
    t.write_text("text\ttarget\nit works\t good\n", encoding="utf-8")
    assert read_examples(t) == [Example(0, 0, "it works", " good")]


@pytest.mark.parametrize("content, kwargs, match", [
    ('{"text": "ok"}\n{"text": "x",\n', {}, r"line 2 is not JSON"),
    ('{"review": "ok"}\n', {}, r"text_column 'text' is not a column .*\['review'\]"),
    ('{"text": "ok"}\n', {"target_column": "label"}, r"target_column 'label' is not a column"),
    ('{"text": "ok"}\n{"text": "  "}\n', {}, r"line 2: the text \('text'\) must be a non-empty string"),
    ('{"text": "ok", "target": true}\n', {}, r"line 1: target must be a token string or an integer id, got True"),
    ('{"text": "ok", "target": [1]}\n', {}, r"line 1: target must be .* got list"),
    ('{"text": "ok", "target": "x"}\n', {"target_is_id": True}, r"target must be an integer \(target_is_id\), got 'x'"),
    ('{"text": "ok", "template": "no slot"}\n', {}, r"template must contain '\{text\}' exactly once"),
    ("\n\n", {}, r"holds no example"),
    ("[1, 2]", {}, r"item 0 is not an object"),
    ('{"text": "a", "id": "x"}\n{"text": "b", "id": "y"}\n{"text": "c", "id": "x"}\n', {},
     r"line 3: id 'x' is also the id of line 1; the ids must be unique"),
])
def test_bad_data_names_the_row(tmp_path, content, kwargs, match):
    p = tmp_path / ("d.json" if content.startswith("[") else "d.jsonl")
    p.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=match) as err:
        read_examples(p, **kwargs)
    assert str(p) in str(err.value)


def test_bad_files_and_objects(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_examples(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match=r"unknown file type '\.txt'"):
        read_examples(tmp_path / "d.txt")
    (tmp_path / "bad.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "\xff"}\n')
    with pytest.raises(ValueError, match="line 2 is not UTF-8"):
        read_examples(tmp_path / "bad.jsonl")
    (tmp_path / "bad.csv").write_text('text\n"unclosed\n', encoding="utf-8")
    with pytest.raises(ValueError, match="not a readable CSV file"):
        read_examples(tmp_path / "bad.csv")
    with pytest.raises(TypeError, match="data must be"):
        read_examples(42)
