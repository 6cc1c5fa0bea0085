"""Reading the examples of attribute-dataset (aieg_fast.dataset_attribution.inputs): files and
Python objects, default and named columns, and errors that name the data, the row and the value."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from aieg_fast.dataset_attribution import Example, read_examples, read_examples_and_notes

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
    ("\n\n", {}, r"holds no example \(blank lines only\)"),
    ("[1, 2]", {}, r"item 0 is not an object with named columns, got int 1$"),
    ('{"text": "a", "id": "x"}\n{"text": "b", "id": "y"}\n{"text": "c", "id": "x"}\n', {},
     r"line 3: id 'x' is also the id of line 1; the ids must be unique"),
    ('{"text": "a", "id": 1}\n{"text": "b"}\n', {},  # the second row's id is its index: the message said only "id 1"
     r"line 2: id 1 is also the id of line 1 \(a row without an id is numbered by its index from 0\); the ids must be unique"),
    ('{"text": "a", "id": 1.0}\n{"text": "b", "id": 1}\n', {},  # accepted as two ids, 1.0 and 1
     r"line 2: id 1 is also the id of line 1; the ids must be unique .* ids that print the same are one id"),
    ('{"text": "a", "id": "1"}\n{"text": "b", "id": 1}\n', {},  # one string column in the parquet copy
     r"line 2: id 1 is also the id of line 1 \(there '1'\); the ids must be unique"),
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


class _Splits(dict):
    """Stands in for a datasets.DatasetDict: a dict of splits whose column_names is a dict and
    which iterates over its split names."""

    @property
    def column_names(self):
        return {k: ["text", "label"] for k in self}


class _Stream:
    """Stands in for a streaming datasets.IterableDataset: rows without end."""

    column_names = ["text"]

    def __iter__(self):
        i = 0
        while True:
            i += 1
            if i > 1000:
                raise AssertionError("the stream was read past the rows asked for")
            yield {"text": f"row {i}"}


def test_hf_objects_a_dataset_dict_is_refused_and_a_stream_read_to_its_limit_only():
    """A DatasetDict was read as rows of its split names (evaluate_generation explained the
    prompts 'train' and 'test'); a stream was read to its end before limit applied."""
    from aieg_fast.datasets import user_dataset

    splits = _Splits(train=[{"text": "a", "label": 0}], test=[{"text": "b", "label": 1}])
    with pytest.raises(ValueError, match=r"_Splits of the splits \['train', 'test'\]; pass one split, e\.g\. data\['train'\]"):
        read_examples(splits)
    with pytest.raises(ValueError, match="pass one split"):
        user_dataset(splits, target_field="label")
    assert [e.text for e in read_examples(_Stream(), limit=3)] == ["row 1", "row 2", "row 3"]


def test_numpy_scalars_in_a_list_of_dicts_are_python_numbers():
    """Labels and targets as numpy integers in a list of dicts are read as in a DataFrame (they
    were refused: 'must be ... an integer id, got int64')."""
    import numpy as np

    from aieg_fast.datasets import user_dataset

    ex = read_examples([{"text": "a b", "target": np.int64(3)}], target_is_id=True)
    assert ex[0].target == 3 and type(ex[0].target) is int
    _, recs = user_dataset([{"text": "a b", "label": np.int64(1)}, {"text": "c", "label": np.int32(0)}],
                           label_field="label", labels=[" bad", " good"])
    assert [r["label"] for r in recs] == [1, 0]


def test_a_csv_cell_longer_than_the_csv_modules_default_limit(tmp_path):
    """A cell over 131,072 characters (Python's csv default) made the whole file 'not a readable
    CSV file'; the limit is raised for the read only."""
    import csv

    p = tmp_path / "long.csv"
    p.write_text("text,id\n\"" + "word " * 40_000 + "\",a\nshort,b\n", encoding="utf-8")
    before = csv.field_size_limit()
    ex = read_examples(p)
    assert len(ex[0].text) == 200_000 and ex[1].text == "short" and csv.field_size_limit() == before


def test_a_row_template_with_another_field_is_refused_naming_the_row(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"text": "a", "template": "Q: {text}"}\n{"text": "b", "template": "Q: {text} {other}"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: the row's template \('template'\): template names field\(s\) \['other'\]"):
        read_examples(p)


@pytest.mark.parametrize("ident", [(1, 2), float("inf"), pd.Timestamp("2026-01-01"), True])
def test_an_id_that_does_not_survive_json_is_refused_naming_the_row(ident):
    """A tuple, an infinite float or a Timestamp id made every resume fail as 'the data changed'
    (or crashed after the model loaded); it is refused when the data is read."""
    with pytest.raises(ValueError, match=r"row 1: the id \('id'\) must be a string or a finite number"):
        read_examples([{"text": "a", "id": "x"}, {"text": "b", "id": ident}])


def test_a_dataframe_id_column_with_a_gap_and_whole_floats():
    """pandas reads [1, 2, None] as 1.0, 2.0, NaN: the ids were 1.0, 2.0 and, for the NaN row,
    its index 2 (accepted beside 2.0). Whole floats are ints now, so 2 repeats; a gap that
    repeats no id is numbered by its index."""
    with pytest.raises(ValueError, match=r"row 2: id 2 is also the id of row 1 \(a row without an id is numbered by its index"):
        read_examples(pd.DataFrame({"text": ["a", "b", "c"], "id": [1, 2, None]}))
    assert [e.id for e in read_examples(pd.DataFrame({"text": ["a", "b", "c"], "id": [10, 11, None]}))] == [10, 11, 2]
    big = read_examples(pd.DataFrame({"text": ["a", "b"], "id": [12345678901234567, None]}))[0].id  # its last digit already lost
    assert type(big) is float and big == 1.2345678901234568e16  # not the int 12345678901234568, one off the user's id
    assert [e.id for e in read_examples(pd.DataFrame({"text": ["a", "b"], "id": [1.0, 2.5]}))] == [1, 2.5]
    assert type(read_examples(pd.DataFrame({"text": ["a"], "id": [7.0]}))[0].id) is int


def test_a_folder_and_a_single_json_object_are_named_as_such(tmp_path):
    """A folder named x.jsonl was 'no such file'; a pretty-printed .json object was 'line 1 is
    not JSON'."""
    (tmp_path / "x.jsonl").mkdir()
    with pytest.raises(ValueError, match="is a folder, not a file"):
        read_examples(tmp_path / "x.jsonl")
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"text": "a", "id": 1}, indent=2), encoding="utf-8")
    with pytest.raises(ValueError, match=r"holds one JSON object, not rows: a \.json file holds a list of objects"):
        read_examples(one)


def test_notes_name_the_optional_columns_used_and_how_they_are_read(tmp_path):
    """A JSON int target is a token id, a CSV "1" the text "1": the notes say which, per column."""
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    examples, notes = read_examples_and_notes(p)
    assert examples == _want() and [n.split(" is ")[0] for n in notes] == [
        f"data {str(p)!r}: column {c!r}" for c in ("target", "contrast", "template", "id")]
    assert notes[0].endswith("(an int is a token id / class index, a string the text of the target; empty: the model's "
                             "prediction): 1 string(s), 1 int(s), 1 empty; used because of its name ('target'): rename the "
                             "column to leave it out")
    assert "2 empty, 1 string(s)" in notes[2] and ": 1 string(s), 2 empty;" in notes[3]  # a row without an id: its index
    q = tmp_path / "d.csv"
    q.write_text("text,y\nthe movie is good,1\n", encoding="utf-8")
    assert read_examples_and_notes(q, target_column="y")[1] == [
        f"data {str(q)!r}: column 'y' is each row's target (an int is a token id / class index, a string the text of the target; "
        "empty: the model's prediction): 1 string(s); a string of digits is text (\"1\" is the token of the text \"1\"; a CSV "
        "cell is always text): target_is_id (--target-is-id) reads it as an id"]
    assert read_examples_and_notes(q, target_column="y", target_is_id=True)[1] == [
        f"data {str(q)!r}: column 'y' is each row's target (read as a token id / class index: target_is_id): 1 int(s)"]
    assert read_examples_and_notes(["a text"])[1] == []


def test_a_whole_number_written_as_a_float_is_an_id_with_target_is_id(tmp_path):
    """A CSV target "1.0" (an int column with gaps, as pandas writes it) was refused with
    target_is_id, while evaluate reads the label "1.0" as 1."""
    from aieg_fast.dataset_attribution import read_examples

    f = tmp_path / "t.csv"
    f.write_text("text,target\ngood film,1.0\nbad film,2\n", encoding="utf-8")
    assert [e.target for e in read_examples(f, target_is_id=True)] == [1, 2]
    assert [e.target for e in read_examples(f)] == ["1.0", "2"]  # without it, text


def test_a_row_that_is_no_object_is_shown_with_its_type():
    """A list row that is neither a dict nor a text: the refusal names its type and value (it
    said "... named columns: '5'", as if a text '5' were given)."""
    with pytest.raises(ValueError, match=r"^data: row 1 is not an object with named columns \(a list of data holds dicts or "
                                         r"texts\), got int 5$"):
        read_examples(["ok", 5])
    with pytest.raises(ValueError, match=r"row 0 .* got list \[0, 1, 2, .*, 2\d\.\.\.$"):
        read_examples([list(range(40))])
