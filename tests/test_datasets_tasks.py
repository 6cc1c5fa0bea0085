"""The datasets of issue 17 (aieg_fast.datasets): BoolQ and its halves, LongRA, the generation
sets, TellMeWhy from a data folder only, load_records, and a user's own file or datasets-like
object with its errors (missing field, bad encoding, empty file) named."""
from __future__ import annotations

import gzip
import hashlib
import json

import pytest

from aieg_fast import datasets as D


def _sha_of_shipped(name: str) -> str:
    raw = (D.SHIPPED_DATA_DIR / name).read_bytes()
    return hashlib.sha256(gzip.decompress(raw) if name.endswith(".gz") else raw).hexdigest()


def test_shipped_files_are_the_documented_ones(monkeypatch):
    monkeypatch.delenv("AIEG_FAST_DATA", raising=False)
    readme = (D.SHIPPED_DATA_DIR / "README.md").read_text(encoding="utf-8")
    for name in ("boolq", "longra", "longra-reagent", "wikibio", "wikitext"):
        shipped = D.DATASETS[name].shipped
        assert D.dataset_path(name).name == shipped
        assert f"`{shipped}`" in readme and _sha_of_shipped(shipped) in readme


def test_boolq_records_and_disjoint_halves(monkeypatch):
    monkeypatch.delenv("AIEG_FAST_DATA", raising=False)
    full = D.load_records("boolq")
    assert len(full) == 3270 and sum(r["label"] for r in full) == 2033
    r0 = full[0]
    assert r0["id"] == "boolq:0" and r0["label"] == 0 and set(r0["fields"]) == {"passage", "question"}
    assert r0["fields"]["question"] == "does ethanol take more energy make that produces" and r0["title"] == "Ethanol fuel"
    train, held = D.load_records("boolq-train"), D.load_records("boolq-heldout")
    assert {r["idx"] % 2 for r in train} == {0} and {r["idx"] % 2 for r in held} == {1}
    assert len(train) + len(held) == 3270 and not {r["id"] for r in train} & {r["id"] for r in held}
    assert held[0] == dict(full[1], index=0)  # the same record, its id kept across the sets
    spec = D.DATASETS["boolq"]
    assert (spec.task, spec.template, spec.labels, spec.target_fn) == ("classification", D.BOOLQ_TEMPLATE, (" no", " yes"), "contrast")
    assert "boolq-train" not in D.EVALUATION_DATASETS and "boolq-heldout" in D.EVALUATION_DATASETS
    with pytest.raises(ValueError, match=r"load_records\('boolq'\)"):
        D.load_dataset("boolq")


def test_longra_and_generation_records(monkeypatch, tmp_path):
    monkeypatch.delenv("AIEG_FAST_DATA", raising=False)
    lr = D.load_records("longra")
    assert len(lr) == 573 and all(r["distractor"] in r["prompt"] and r["reference"] == " " + r["target"] for r in lr)
    assert lr[0]["relative"] == "Greece" and lr[0]["target"] == "Athens"
    used = D.load_records("longra-reagent")
    assert len(used) == 519 and {r["model_shortname"] for r in used} >= {"gpt2", "OPT1B"}
    by_prompt = {r["prompt"]: r["distractor"] for r in lr}
    # ReAGent's files have no distractor text: the reader takes the prompt's "(...)." clause, which is the rebuilt one
    assert all(by_prompt[r["prompt"]] == r["distractor"] for r in used if r["prompt"] in by_prompt)
    wb, wt = D.load_records("wikibio"), D.load_records("wikitext")
    assert len(wb) == 100 and wb[0]["prompt"].startswith("Title: lenny randle") and wb[0]["references"] == [wb[0]["reference"]]
    assert len(wt) == 22 and all(r["reference"] is None and r["references"] == [] for r in wt)
    assert {D.DATASETS[k].task for k in ("wikibio", "wikitext", "tellmewhy", "tellmewhy-reagent")} == {"generation"}
    # TellMeWhy is not shipped: without a folder the error says why; from a folder it is read
    with pytest.raises(FileNotFoundError, match="licence is not stated.*--data-dir"):
        D.load_records("tellmewhy")
    row = {"id": "caters_0", "prompt": "Matt ate. Why did Matt eat?", "reference": "he was hungry.",
           "references": ["he was hungry.", "lunch time."]}
    (tmp_path / "tellmewhy_test_annotated.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert D.load_records("tellmewhy", data_dir=tmp_path) == [dict(row, index=0)]
    with pytest.raises(FileNotFoundError, match="tellmewhy_reagent_prompts.jsonl .*licence is not stated"):
        D.load_records("tellmewhy-reagent", data_dir=tmp_path)


@pytest.mark.parametrize("name, content, match", [
    ("wikibio", '{"id": "a", "prompt": "x"}\n{"id": "b"}\n', r"line 2 has no 'prompt' key"),
    ("wikibio", '{"id": "a", "prompt": "x", "reference": 3}\n', r"line 1 \(a\): 'reference' must be a string or null, got int"),
    ("wikibio", '{"id": "a", "prompt": 5}\n', r"line 1: 'prompt' must be str, got int"),
    ("boolq", '{"idx": 0, "question": "q", "passage": "p", "label": 1}\n\n{"idx": 1, "question": "q", "passage": "p", "label": 2}\n',
     r"line 3 \(idx 1\): 'label' must be 0 \(no\) or 1 \(yes\), got 2"),
    ("boolq", '{"idx": 0, "question": "q", "passage": "p", "label": true}\n', r"line 1: 'label' must be int, got bool"),
    ("longra", '{"id": "x", "prompt": "in Paris (a b). the", "target": "c", "relative": "Rome"}\n',
     r"line 1 \(x\): its relative 'Rome' is not in its prompt"),
    ("longra", '{"id": "x", "prompt": "in Paris, the", "target": "c", "relative": "Paris"}\n', r"line 1 \(x\) has no 'distractor'"),
])
def test_task_file_errors_name_the_line(tmp_path, name, content, match):
    (tmp_path / D.DATASETS[name].file).write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        D.load_records(name, data_dir=tmp_path)


def test_user_dataset_files_and_objects(tmp_path):
    f = tmp_path / "qa.jsonl"
    rows = [{"q": "is it good", "p": "the film was good", "y": "yes", "key": "a"},
            {"q": "is it bad", "p": "the film was good", "y": "no", "key": "b"}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec, recs = D.user_dataset(f, label_field="y", template="{p}\nQ: {q}?\nA:", labels=[" no", " yes"], id_field="key")
    assert (spec.name, spec.task, spec.fields, spec.labels) == ("qa.jsonl", "classification", ("p", "q"), (" no", " yes"))
    assert [r["id"] for r in recs] == ["a", "b"] and [r["label"] for r in recs] == [1, 0]
    assert recs[0]["fields"] == {"p": "the film was good", "q": "is it good"} and "text" not in recs[0]
    c = tmp_path / "s.csv"
    c.write_text("sentence,gold\ngood film,1\nbad film,0\n", encoding="utf-8")
    spec, recs = D.user_dataset(c, text_field="sentence", label_field="gold")
    assert [(r["id"], r["text"], r["label"]) for r in recs] == [("s.csv:0", "good film", 1), ("s.csv:1", "bad film", 0)]
    spec, recs = D.user_dataset(c, text_field="sentence", target_field="gold")  # a generation dataset
    assert spec.task == "generation" and recs[1]["prompt"] == "bad film" and recs[1]["references"] == ["0"]
    t = tmp_path / "q.tsv"  # tab-separated: quotes are part of the text; a CSV keeps its quoting
    t.write_text('sentence\tgold\n"the movie" is good\t1\n', encoding="utf-8")
    assert D.user_dataset(t, text_field="sentence", label_field="gold")[1][0]["text"] == '"the movie" is good'
    c.write_text('sentence,gold\n"bad, slow film",0\n', encoding="utf-8")
    assert D.user_dataset(c, text_field="sentence", label_field="gold")[1][0]["text"] == "bad, slow film"

    class FakeDataset:  # what a Hugging Face datasets.Dataset offers: column names, dict rows, column access
        column_names = ["sentence", "label"]

        def __init__(self, data):
            self.data = data

        def __iter__(self):
            return iter(self.data)

        def __len__(self):
            return len(self.data)

        def __getitem__(self, key):
            return [r[key] for r in self.data] if isinstance(key, str) else self.data[key]

    spec, recs = D.user_dataset(FakeDataset([{"sentence": "fine", "label": 1}, {"sentence": "awful", "label": 0}]),
                                text_field="sentence", label_field="label")
    assert spec.name == "data" and [(r["id"], r["text"], r["label"]) for r in recs] == [("data:0", "fine", 1), ("data:1", "awful", 0)]


@pytest.mark.parametrize("name, content, kwargs, match", [
    ("d.jsonl", b'{"text": "ok", "label": 1}\n{"txt": "x", "label": 0}\n', {},
     r"d.jsonl': line 2 has no field 'text' \(text_field\); its fields: \['label', 'txt'\]"),
    ("d.jsonl", b'{"p": "ok", "label": 1}\n', {"template": "{p} {q}"}, r"line 1 has no field 'q' \(template field\)"),
    ("d.jsonl", b'{"text": "ok"}\n', {}, r"line 1 has no field 'label' \(label_field\)"),
    ("d.jsonl", b'{"text": "ok", "label": 0}\n{"text": "caf\xe9", "label": 1}\n', {}, r"line 2 is not UTF-8 text"),
    ("d.csv", b'text,label\nok,1\ncaf\xe9,0\n', {}, r"d.csv': line 3 is not UTF-8 text"),
    ("d.jsonl", b"", {}, r"d.jsonl' holds no example \(the file is empty\)"),
    ("d.csv", b"", {}, r"d.csv' holds no example \(the file is empty\)"),
    ("d.csv", b"text,label\n", {}, r"d.csv' holds no example \(a header and no rows\)"),  # was "the file is empty"
    ("d.json", b"[]", {}, r"d.json' holds no example \(an empty list\)"),
    ("d.jsonl", b'{"text": "ok", "label": "maybe"}\n', {"labels": [" no", " yes"]},
     r"line 1: label 'maybe' is none of the labels \[' no', ' yes'\]"),
    ("d.jsonl", b'{"text": "ok", "label": 2}\n', {"labels": [" no", " yes"]}, r"label 2 is not an index of the 2 labels"),
    ("d.jsonl", b'{"text": "ok", "label": "yes"}\n', {}, r"label 'yes' is a name, not a class index; give labels"),
    ("d.jsonl", b'{"text": " ", "label": 1}\n', {}, r"line 1: field 'text' must be a non-empty string"),
    ("d.txt", b"text\n", {}, r"unknown file type '\.txt'"),
    # number words: a label is a word, never an index; words equal up to case are refused
    ("d.jsonl", b'{"text": "ok", "label": 7}\n', {"labels": [" 1", " 2", " 3", " 4", " 5"]},
     r"label 7 is none of the labels .* \(the label words are numbers, so labels are read as words"),
    ("d.jsonl", b'{"text": "ok", "label": "good"}\n', {"labels": [" good", " Good"]},
     r"labels \[' good', ' Good'\] are the same word up to case and spaces"),
    # every row with one comma too many: refused (the first column was read as the index)
    ("d.csv", b"text,label\ngreat, really great,1\nbad, really bad,0\n", {}, r"line 2 has 3 fields, the header 2"),
    # in a TSV, quotes are text: the advice is to take the tab out, not to quote it
    ("d.tsv", b'text\tlabel\n"a\ttab"\t1\n', {}, r"line 2 has 3 fields, the header 2 .*a TSV cell cannot hold a tab"),
    ("d.csv", b"text,label,text\nok,1,x\n", {}, r"the header \(line 1\) names the column\(s\) \['text'\] more than once"),
    # line numbers count quoted newlines and blank lines
    ("d.csv", b'text,label\n"the movie\nis\ngood",1\n\nbad,2\n', {"labels": [" no", " yes"]},
     r"row 1 \(line 6\): label 2 is not an index"),
])
def test_user_dataset_errors_are_named(tmp_path, name, content, kwargs, match):
    f = tmp_path / name
    f.write_bytes(content)
    with pytest.raises(ValueError, match=match):
        D.user_dataset(f, label_field="label", **kwargs)


@pytest.mark.parametrize("arg", ["text_field", "label_field", "target_field", "id_field"])
def test_empty_field_names_are_refused(tmp_path, arg):
    (tmp_path / "d.jsonl").write_text('{"text": "ok", "label": 1}\n', encoding="utf-8")
    kw = {"label_field": "label", arg: ""} if arg != "target_field" else {arg: ""}
    with pytest.raises(ValueError, match=rf"{arg} must name a column \(a non-empty string\), got ''"):
        D.user_dataset(tmp_path / "d.jsonl", **kw)


def test_user_dataset_missing_file_and_bad_template(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        D.user_dataset(tmp_path / "missing.jsonl", label_field="label")
    (tmp_path / "d.jsonl").write_text('{"text": "ok", "label": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="template must name the text"):
        D.user_dataset(tmp_path / "d.jsonl", label_field="label", template="no field here")
    with pytest.raises(ValueError, match=r"each field once, got \['text'\]"):
        D.user_dataset(tmp_path / "d.jsonl", label_field="label", template="{text} and {text}")
    with pytest.raises(ValueError, match="label_field .* or target_field .*not both"):
        D.user_dataset(tmp_path / "d.jsonl", label_field="label", target_field="text")
    assert D.is_dataset_file("x/d.csv") and not D.is_dataset_file("boolq") and not D.is_dataset_file("d.txt")


def test_user_dataset_with_a_byte_order_mark(tmp_path):
    """Some editors start UTF-8 files with a byte-order mark: JSON lines and CSV read the same."""
    j, c = tmp_path / "b.jsonl", tmp_path / "b.csv"
    j.write_bytes(b"\xef\xbb\xbf" + b'{"text": "good film", "label": 1}\n')
    c.write_bytes(b"\xef\xbb\xbf" + b"text,label\ngood film,1\n")
    for f in (j, c):
        assert [(r["text"], r["label"]) for r in D.user_dataset(f, label_field="label")[1]] == [("good film", 1)]


def test_number_label_words_are_read_as_words(tmp_path):
    """Star ratings with label words " 1" ... " 5": the label 3 (or "3") is the word " 3" (index
    2), not index 3 (the word " 4")."""
    f = tmp_path / "stars.jsonl"
    f.write_text('{"text": "fine", "stars": "3"}\n{"text": "great", "stars": 5}\n', encoding="utf-8")
    _, recs = D.user_dataset(f, label_field="stars", labels=[" 1", " 2", " 3", " 4", " 5"])
    assert [r["label"] for r in recs] == [2, 4]


def test_jsonl_with_line_separator_characters_inside_strings(tmp_path):
    """JSON allows U+2028, U+0085 and U+001C raw inside a string (json.dumps(ensure_ascii=False)
    writes them so); str.splitlines cut the line there and the row was refused as not JSON."""
    f = tmp_path / "d.jsonl"
    texts = ["the movie is good\u2028and great", "bad\x85film", "ok\x1cfine"]
    f.write_text("".join(json.dumps({"text": t, "gold": i % 2}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)),
                 encoding="utf-8")
    spec, recs = D.user_dataset(f, label_field="gold", labels=[" bad", " good"])
    assert [r["text"] for r in recs] == texts


def test_double_braces_are_text_in_a_dataset_template_as_in_fill_template():
    """{{name}} in a template is text for the datasets' templates too (evaluate read it as the
    column 'name' while attribute-dataset and fill_template kept it as text)."""
    from aieg_fast.core.inputs import fill_template
    from aieg_fast.datasets.user import template_fields

    assert template_fields("{{note}} Review: {text}") == ("text",)
    assert fill_template("good", "{{note}} Review: {text}")[0] == "{{note}} Review: good"


def test_evaluate_runners_read_a_stream_no_further_than_n(tiny_gpt2, tmp_path):
    """evaluate and evaluate_generation read a user's rows object only as far as they need (a
    streaming Dataset was read to its end before n applied)."""
    from aieg_fast import eval as E

    class Stream:
        column_names = ["text", "label"]

        def __iter__(self):
            for i in range(1000):
                if i >= 2:
                    raise AssertionError("the stream was read past the rows asked for")
                yield {"text": f"the movie is good {i}", "label": i % 2}

    res = E.evaluate(tiny_gpt2, Stream(), methods="saliency", n=2, out_dir=tmp_path / "c", label_field="label", labels=(10, 11),
                     template="{text} :", metrics="hard", progress=False, plot=False)
    assert res["computed"] == 2
    res = E.evaluate_generation(tiny_gpt2, Stream(), methods="saliency", n=2, out_dir=tmp_path / "g", metrics="hard",
                                n_new_tokens=2, n_steps=4, progress=False, plot=False)
    assert res["computed"] == 2
    with pytest.raises(ValueError, match="n must be a positive int"):
        E.evaluate_generation(tiny_gpt2, Stream(), methods="saliency", n=-1, out_dir=tmp_path / "h")


def test_a_tsv_written_with_csv_quoting_is_refused_not_misread(tmp_path):
    """pandas' to_csv(sep="\\t") quotes a text holding a quote or a line break; read with quotes as
    text (GLUE's .tsv rule) the text changed and a quoted line break made two rows, silently."""
    doubled = tmp_path / "q.tsv"
    doubled.write_text('text\tgold\n"he said ""great"" film"\t1\nbad film\t0\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2 has a cell written with CSV quoting .*its quotes doubled inside.*save it as \.csv"):
        D.user_dataset(doubled, label_field="gold")
    broken = tmp_path / "nl.tsv"
    broken.write_text('text\tgold\n"good\nfilm"\t1\nbad film\t0\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2 has a cell that opens a quote \('\"good'\) and line 3 one that closes it"):
        D.user_dataset(broken, label_field="gold")
    last = tmp_path / "last.tsv"  # the text in the last column: the closing part is the short row
    last.write_text('gold\ttext\n1\t"good\nfilm"\n0\tbad film\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2 has a cell that opens a quote"):
        D.user_dataset(last, label_field="gold")
    optional = tmp_path / "optional.tsv"  # short rows (an optional last cell left out) with quotes that are text
    optional.write_text('text\ttarget\n"I don\'t know.\nit is fine\t a\nHe is 6\'2"\n', encoding="utf-8")
    assert [r["prompt"] for r in D.user_dataset(optional)[1]] == ['"I don\'t know.', "it is fine", "He is 6'2\""]
    glue = tmp_path / "glue.tsv"  # quotes that are text, as GLUE writes them, are read as they are
    texts = ['"Hello," he said.', '"fine"', 'it is "ok" then', "The man was 6'2\"", 'It ends here."', '"I don\'t know.', '""']
    glue.write_text("sentence\tlabel\n" + "".join(f"{t}\t1\n" for t in texts), encoding="utf-8")
    assert [r["text"] for r in D.user_dataset(glue, text_field="sentence", label_field="label")[1]] == texts


def test_a_json_row_naming_a_key_twice_is_refused(tmp_path):
    """json keeps the last value of a key given twice: the first text was dropped without a word."""
    f = tmp_path / "dup.jsonl"
    f.write_text('{"review": "good film", "gold": 1}\n{"review": "good film", "review": "bad film", "gold": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2 names the key\(s\) \['review'\] more than once"):
        D.user_dataset(f, text_field="review", label_field="gold")
    g = tmp_path / "dup.json"
    g.write_text('[{"review": "good", "review": "bad", "gold": 1}]', encoding="utf-8")
    with pytest.raises(ValueError, match=r"names the key\(s\) \['review'\] more than once"):
        D.user_dataset(g, text_field="review", label_field="gold")


def test_a_template_naming_the_label_column_is_refused():
    """The gold label in the prompt: a random model scored 100 % accuracy on it."""
    rows = [{"review": "the movie is good", "gold": "good"}, {"review": "bad", "gold": "bad"}]
    with pytest.raises(ValueError, match=r"^the template 'Review: \{text\} \(\{gold\}\) Sentiment:' names the column 'gold', which is "
                                         r"the label_field: the answer would be in the prompt.*leave \{gold\} out of the template$"):
        D.user_dataset(rows, text_field="review", label_field="gold", template="Review: {text} ({gold}) Sentiment:",
                       labels=[" bad", " good"])
    with pytest.raises(ValueError, match="^text_field names the column 'gold', which is the label_field: .*give text_field another"):
        D.user_dataset(rows, text_field="gold", label_field="gold", labels=[" bad", " good"])


def test_whole_number_labels_written_as_floats_and_number_words_are_said(tmp_path, capsys, monkeypatch):
    """pandas writes an int column with gaps as 1.0 in a CSV; and number label words read labels
    as words (0-based labels would shift by one), which is now said."""
    f = tmp_path / "g.csv"
    f.write_text("text,gold\ngood film,1.0\nbad film,0.0\n", encoding="utf-8")
    assert [r["label"] for r in D.user_dataset(f, label_field="gold", labels=[" bad", " good"])[1]] == [1, 0]
    assert "note:" not in capsys.readouterr().err
    s = tmp_path / "stars.csv"
    s.write_text("text,stars\nfine,3.0\ngreat,5\n", encoding="utf-8")
    stars = [" 1", " 2", " 3", " 4", " 5"]
    assert [r["label"] for r in D.user_dataset(s, label_field="stars", labels=stars)[1]] == [2, 4]
    from aieg_fast.eval.examples import load_examples

    load_examples(s, None, 2, 0, label_field="stars", labels=stars)  # what evaluate reads, and says
    assert "are numbers, so the labels of 'stars' are read as those words ('1' is label 0), not as indices" in capsys.readouterr().err
    monkeypatch.setenv("RANK", "1")  # another process of a torchrun run: said once, by rank 0
    load_examples(s, None, 2, 0, label_field="stars", labels=stars)
    assert "note:" not in capsys.readouterr().err


def test_spreadsheet_csv_quirks_are_read_as_meant(tmp_path):
    """Trailing empty columns (",," from a spreadsheet) were refused as a column named '' twice; a
    Windows line break inside a quoted cell kept its "\\r" (an attributed token); an id 1.0 was
    the id "1.0" here and 1 in attribute-dataset."""
    f = tmp_path / "sheet.csv"
    f.write_bytes(b'text,gold,id,,\r\n"good\r\nfilm",1,1.0,,\r\nbad film,0,2.0,,\r\n')
    _, recs = D.user_dataset(f, label_field="gold", id_field="id")
    assert [r["text"] for r in recs] == ["good\nfilm", "bad film"]
    from aieg_fast.datasets.rows import read_rows

    assert read_rows(f)[0][1] == {"text": "bad film", "gold": "0", "id": "2.0"}  # the unnamed columns are not read
    j = tmp_path / "ids.jsonl"
    j.write_text('{"text": "good", "gold": 1, "id": 1.0}\n{"text": "bad", "gold": 0, "id": 2}\n', encoding="utf-8")
    assert [r["id"] for r in D.user_dataset(j, label_field="gold", id_field="id")[1]] == ["1", "2"]
    twice = tmp_path / "twice.csv"
    twice.write_text("text,gold,text\ngood,1,bad\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"names the column\(s\) \['text'\] more than once"):
        D.user_dataset(twice, label_field="gold")


def test_a_text_field_the_template_does_not_use_is_refused():
    """--text-field was silently ignored when the template named its columns without {text}."""
    rows = [{"review": "good film", "gold": 1}]
    with pytest.raises(ValueError, match=r"text_field 'nonexistent' is not used: the template 'Review: \{review\}' has no \{text\}"):
        D.user_dataset(rows, text_field="nonexistent", label_field="gold", template="Review: {review}")
    assert D.user_dataset(rows, label_field="gold", template="Review: {review}")[1][0]["fields"] == {"review": "good film"}


def test_number_label_words_match_as_written_or_as_numbers():
    """Label words " 01", " 02" or Arabic-Indic digits matched their labels as written; a first
    reading by number refused them. A column naming its own template field is not refused as an
    unused text_field."""
    from aieg_fast.datasets.user import label_index

    assert [label_index(v, [" 01", " 02"], "row") for v in ("01", "02", 2, 1.0)] == [0, 1, 1, 0]
    assert label_index("٣", [" ١", " ٢", " ٣"], "row") == 2
    assert label_index(3.0, [" 1", " 2", " 3"], "row") == 2 and label_index("3.0", [" 1", " 2", " 3"], "row") == 2
    with pytest.raises(ValueError, match=r"row: label '04' is none of the labels"):
        label_index("04", [" 01", " 02"], "row")
    # digits that int() does not read ("²", "--3") are names, not numbers: no int() crash
    assert label_index("³", [" ²", " ³"], "row") == 1 and label_index(1, [" --1", " --2"], "row") == 1
    rows = [{"review": "good film", "gold": 1}]
    assert D.user_dataset(rows, text_field="review", label_field="gold", template="Review: {review}")[1][0]["fields"] == {
        "review": "good film"}
