"""evaluate beyond sentiment (issue 17): a template with several attributed fields (BoolQ's
passage and question), BoolQ's contrast target, a user's file or datasets-like object with label
words, the accuracy against chance, and the command line for those, on the tiny random models."""
from __future__ import annotations

import json

import pytest

from aieg_fast import cli
from aieg_fast import datasets as D
from aieg_fast import eval as E
from aieg_fast.core.inputs import fill_template
from aieg_fast.eval import runner

KW = dict(n_steps=4, n_samples=1, pis=(0.5,), progress=False, plot=False, metrics="hard")
BOOLQ_ROWS = [
    {"idx": 0, "question": "is the movie good", "title": "A", "passage": "the movie is good and the actors are great", "label": 1},
    {"idx": 1, "question": "is the film bad", "title": "B", "passage": "the film was bad , slow and boring", "label": 1},
    {"idx": 2, "question": "is it positive", "title": "C", "passage": "a negative film", "label": 0},
    {"idx": 3, "question": "is it great", "title": "D", "passage": "what a wonderful story", "label": 1},
]


def test_fill_template_spans_and_errors():
    full, spans = fill_template({"question": "is it", "passage": "P text"}, "{passage}\nQ: {question}?")
    assert full == "P text\nQ: is it?" and [full[a:b] for a, b in spans] == ["P text", "is it"]
    assert fill_template("x", "a {text} b") == ("a x b", [(2, 3)]) and fill_template("x") == ("x", [(0, 1)])
    with pytest.raises(ValueError, match=r"template must contain '\{question\}' exactly once .* found it 0 times"):
        fill_template({"question": "q"}, "{passage}")
    with pytest.raises(ValueError, match=r"text\['q'\] is empty"):
        fill_template({"q": " "}, "{q}")
    with pytest.raises(ValueError, match="needs a template naming each field"):
        fill_template({"q": "x"})
    with pytest.raises(TypeError, match="mapping of field names to str"):
        fill_template({"q": 3}, "{q}")


def test_fields_are_attributed_and_the_template_held_fixed(tiny_gpt2):
    """Every token of both fields is attributable, every template token fixed; the ids are those
    of the filled prompt, and the scores of a field mapping match the same prompt given whole
    with the same fixed mask (the fields decide only which tokens are attributed)."""
    tpl = "{passage}\nQuestion: {question}?\nAnswer:"
    text = {"passage": "the movie is good", "question": "is it bad"}
    ids, fixed = tiny_gpt2.encode(text, tpl)
    full, spans = fill_template(text, tpl)
    enc = tiny_gpt2.tokenizer(full, return_offsets_mapping=True)
    assert ids == enc["input_ids"]
    inside = [any(e > a and s < b for a, b in spans) for s, e in enc["offset_mapping"]]
    assert [not f for f in fixed] == inside and 0 < sum(inside) < len(ids)
    a = tiny_gpt2.attribute(text, method="saliency", template=tpl, target=10)
    assert a.text == full and a.attributable == inside
    assert all(s == 0 for s, f in zip(a.scores.tolist(), fixed) if f) and any(s != 0 for s in a.scores.tolist())


@pytest.fixture
def tiny_boolq(tmp_path, monkeypatch):
    """A BoolQ data folder of 4 short records; the registry's BoolQ with two token ids as label
    words (the tiny tokenizer has no single-token ' no' / ' yes')."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "boolq_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in BOOLQ_ROWS), encoding="utf-8")
    for name in ("boolq", "boolq-heldout"):
        spec = D.DATASETS[name]
        monkeypatch.setitem(D.DATASETS, name, spec.__class__(**{**spec.__dict__, "labels": (10, 11)}))
    return data


def test_boolq_run_contrast_fields_resume(tiny_gpt2, tmp_path, tiny_boolq):
    out = tmp_path / "run"
    res = E.evaluate(tiny_gpt2, dataset="boolq", data_dir=tiny_boolq, methods="saliency,random", n=3, out_dir=out, **KW)
    assert res["computed"] == 3
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["target_fn"] == "contrast" and cfg["template"] == D.BOOLQ_TEMPLATE and cfg["dataset"] == "boolq"
    recs = [json.loads(l) for l in (out / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in recs] == ["boolq:0", "boolq:1", "boolq:2"]
    r0 = recs[0]
    assert r0["text"] == {"passage": BOOLQ_ROWS[0]["passage"], "question": BOOLQ_ROWS[0]["question"]}
    assert {r0["target"], r0["contrast"]} == {10, 11}
    ids, fixed = tiny_gpt2.encode(r0["text"], D.BOOLQ_TEMPLATE)
    assert r0["n_attributable"] == sum(not f for f in fixed) < r0["n_tokens"] == len(ids)
    # the recorded scores are the contrast attribution of the two fields in the BoolQ prompt
    a = tiny_gpt2.attribute(r0["text"], method="saliency", target=r0["target"], contrast_target=r0["contrast"],
                            template=D.BOOLQ_TEMPLATE)
    assert r0["methods"]["saliency"]["scores"] == pytest.approx(a.scores.tolist(), rel=1e-5, abs=1e-7)
    md = (out / "summary.md").read_text()
    assert "Accuracy" in md and "against chance" in md and "**The accuracy is not above chance**" in md
    assert res["chance"]["n"] == 3 and res["chance"]["at_chance"]
    again = E.evaluate(tiny_gpt2, dataset="boolq", data_dir=tiny_boolq, methods="saliency,random", n=3, out_dir=out, **KW)
    assert again["computed"] == 0 and again["skipped"] == 3
    held = E.evaluate(tiny_gpt2, dataset="boolq-heldout", data_dir=tiny_boolq, methods="saliency", n=5, out_dir=tmp_path / "h", **KW)
    recs = [json.loads(l) for l in (tmp_path / "h" / "records.jsonl").read_text().splitlines()]
    assert held["computed"] == 2 and [r["id"] for r in recs] == ["boolq:1", "boolq:3"]


def test_template_must_name_the_dataset_fields(tiny_gpt2, tmp_path, tiny_boolq):
    with pytest.raises(ValueError, match=r"template must name each field of dataset 'boolq' once \(\{passage\}, \{question\}\); "
                                         r"question is not"):
        E.evaluate(tiny_gpt2, dataset="boolq", data_dir=tiny_boolq, template="{passage} ?", out_dir=tmp_path / "r", **KW)
    assert not (tmp_path / "r").exists()


def test_a_template_may_name_other_text_columns_of_the_records(tiny_gpt2, tmp_path, tiny_boolq):
    """BoolQ's records keep the Wikipedia title, and README gives lm-evaluation-harness's prompt
    with it, but a template naming {title} skipped every question one by one ("text does not
    give ['title']") and the run ended with no example evaluated. It is a field now (attributed);
    a name that is no text column is refused before anything is written."""
    tpl = "{title} -- {passage}\nQuestion: {question}?\nAnswer:"
    res = E.evaluate(tiny_gpt2, dataset="boolq", data_dir=tiny_boolq, methods="saliency", n=2, template=tpl, out_dir=tmp_path / "r", **KW)
    rec = json.loads((tmp_path / "r" / "records.jsonl").read_text().splitlines()[0])
    assert res["computed"] == 2 and res["failed"] == 0
    row = BOOLQ_ROWS[0]
    assert rec["text"] == {"passage": row["passage"], "question": row["question"], "title": row["title"]}
    a = tiny_gpt2.attribute(rec["text"], method="saliency", target=rec["target"], contrast_target=rec["contrast"], template=tpl)
    assert a.text.startswith(f"{row['title']} -- {row['passage']}") and a.attributable[0]  # the title's token is attributed
    assert rec["methods"]["saliency"]["scores"] == pytest.approx(a.scores.tolist(), rel=1e-5, abs=1e-7)
    with pytest.raises(ValueError, match=r"template names \{idx\}, which is not a text column of dataset 'boolq' \(its record "
                                         r"'boolq:0' has \['passage', 'question', 'title'\]"):
        E.evaluate(tiny_gpt2, dataset="boolq", data_dir=tiny_boolq, template="{idx} {passage} {question}", out_dir=tmp_path / "x", **KW)
    with pytest.raises(ValueError, match=r"template names \{id\}, which is not a text column"):  # the package's id, not the data's
        E.evaluate(tiny_gpt2, dataset="boolq", data_dir=tiny_boolq, template="{id} {passage} {question}", out_dir=tmp_path / "x", **KW)
    assert not (tmp_path / "x").exists()


def test_max_tokens_cuts_the_first_field(tiny_gpt2, tmp_path, tiny_boolq):
    E.evaluate(tiny_gpt2, dataset="boolq", data_dir=tiny_boolq, methods="saliency", n=1, max_tokens=6, out_dir=tmp_path / "r", **KW)
    rec = json.loads((tmp_path / "r" / "records.jsonl").read_text().splitlines()[0])
    tok = tiny_gpt2.tokenizer
    n_q = len(tok(BOOLQ_ROWS[0]["question"], add_special_tokens=False)["input_ids"])
    assert rec["text"]["question"] == BOOLQ_ROWS[0]["question"]
    assert len(tok(rec["text"]["passage"], add_special_tokens=False)["input_ids"]) == max(1, 6 - n_q)


def test_user_file_and_object_with_label_words(tiny_gpt2, tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text("".join(json.dumps({"review": t, "gold": g}) + "\n" for t, g in
                         [("the movie is good", "Good"), ("the film was bad", "bad"), ("a great story", "good")]), encoding="utf-8")
    res = E.evaluate(tiny_gpt2, dataset=str(f), text_field="review", label_field="gold", labels=[" bad", " good"],
                     template="{text} :", methods="saliency", n=3, out_dir=tmp_path / "r", **KW)
    recs = [json.loads(l) for l in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert res["computed"] == 3 and [(r["id"], r["label"]) for r in recs] == [("mine.jsonl:0", 1), ("mine.jsonl:1", 0), ("mine.jsonl:2", 1)]
    assert json.loads((tmp_path / "r" / "config.json").read_text())["labels"] == [" bad", " good"]
    rows = [{"text": "good film", "label": 1}, {"text": "bad film", "label": 0}]

    class FakeDataset(list):  # a datasets.Dataset stand-in: dict rows and column_names
        column_names = ["text", "label"]

    res = E.evaluate(tiny_gpt2, dataset=FakeDataset(rows), label_field="label", labels=(10, 11), template="{text} :",
                     methods="saliency", n=2, out_dir=tmp_path / "o", **KW)
    assert res["computed"] == 2 and json.loads((tmp_path / "o" / "config.json").read_text())["dataset"] == "data"
    with pytest.raises(ValueError, match="label_field .* must name the column of the gold labels"):
        E.evaluate(tiny_gpt2, dataset=str(f), text_field="review", out_dir=tmp_path / "x", **KW)
    with pytest.raises(ValueError, match="label 'Good' is a name, not a class index; give labels"):
        E.evaluate(tiny_gpt2, dataset=str(f), text_field="review", label_field="gold", out_dir=tmp_path / "x", **KW)
    (tmp_path / "idx.jsonl").write_text('{"text": "a film", "label": 0}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="labels: dataset 'idx.jsonl' names no label words"):
        E.evaluate(tiny_gpt2, dataset=str(tmp_path / "idx.jsonl"), label_field="label", out_dir=tmp_path / "x", n=1, **KW)
    (tmp_path / "dup.jsonl").write_text('{"text": "a", "label": 0, "k": "1"}\n{"text": "b", "label": 1, "k": "1"}\n')
    with pytest.raises(ValueError, match=r"ids must be unique, got \['1'\] more than once \(id_field; the rows, counted from 0: \{'1': \[0, 1\]\}\)"):
        E.evaluate(tiny_gpt2, dataset=str(tmp_path / "dup.jsonl"), label_field="label", id_field="k", labels=(10, 11),
                   out_dir=tmp_path / "x", **KW)
    with pytest.raises(ValueError, match="is a longra dataset; evaluate scores classification datasets: use aieg_fast.eval.evaluate_longra"):
        E.evaluate(tiny_gpt2, dataset="longra", out_dir=tmp_path / "x", **KW)
    assert not (tmp_path / "x" / "config.json").exists() and not (tmp_path / "x" / "records.jsonl").exists()


def test_cli_dataset_file_and_tasks(tiny_gpt2, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "load_model", lambda model=None, **kw: tiny_gpt2)
    f = tmp_path / "qa.csv"
    f.write_text("p,q,y\nthe movie is good,is it good,1\nthe film was bad,is it good,0\n", encoding="utf-8")
    rc = cli.main(["evaluate", "--dataset", str(f), "--label-field", "y", "--template", "{p} / {q} :", "--labels", " bad", " good",
                   "--methods", "saliency", "--n", "2", "--metrics", "hard", "--n-steps", "4", "--out", str(tmp_path / "r"),
                   "--no-progress"])
    assert rc == 0 and "# Faithfulness: " in capsys.readouterr().out
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    assert cfg["dataset"] == str(f) and cfg["labels"] == [" bad", " good"] and cfg["template"] == "{p} / {q} :"
    rec = json.loads((tmp_path / "r" / "records.jsonl").read_text().splitlines()[1])
    assert rec["id"] == "qa.csv:1" and rec["label"] == 0 and rec["text"] == {"p": "the film was bad", "q": "is it good"}
    rc = cli.main(["evaluate", "--dataset", str(f), "--label-field", "y", "--template", "{p} / {q} :", "--labels", " bad", " fine",
                   "--methods", "saliency", "--out", str(tmp_path / "r1"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "labels: target ' fine' is not a single token" in err  # refused, named
    assert "each label word must be one token of this tokenizer" in err and "target_fn='logprob'" not in err
    # without --label-field a file is a generation dataset: its rows are prompts (--text-field)
    rc = cli.main(["evaluate", "--dataset", str(f), "--methods", "saliency", "--out", str(tmp_path / "r2"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "has no --label-field: its rows are prompts ('text')" in err and "has no field 'text' (--text-field)" in err
    rc = cli.main(["evaluate", "--dataset", str(f), "--text-field", "p", "--target-field", "q", "--teacher-forced", "--n", "1",
                   "--n-new-tokens", "2", "--methods", "saliency", "--metrics", "hard", "--out", str(tmp_path / "r3"), "--no-progress"])
    assert rc == 0 and "# Faithfulness of generated text: " in capsys.readouterr().out
    assert json.loads((tmp_path / "r3" / "config.json").read_text())["teacher_forced"] is True
    rc = cli.main(["evaluate", "--dataset", "nope", "--out", str(tmp_path / "r4"), "--no-progress"])
    assert rc == 2 and "--dataset must be one of" in capsys.readouterr().err


def test_rows_without_labels_are_named_briefly(tiny_gpt2, tmp_path, capsys):
    """A list of 3000 dicts without label_field is refused with a short message that points to
    evaluate_generation (it printed the whole list); the note on a short dataset names the
    object, not its rows."""
    rows = [{"review": f"text number {i}", "gold": i % 2} for i in range(3000)]
    with pytest.raises(ValueError, match="evaluate_generation") as err:
        E.evaluate(tiny_gpt2, dataset=rows, text_field="review", methods="saliency", n=1, out_dir=tmp_path / "r", **KW)
    assert len(str(err.value)) < 400 and "a list of 3000 rows" in str(err.value)
    E.evaluate(tiny_gpt2, dataset=rows[:2], text_field="review", label_field="gold", labels=(10, 11), template="{text} :",
               methods="saliency", n=5, out_dir=tmp_path / "s", **KW)
    note = capsys.readouterr().err
    assert "(a list of 2 rows); evaluating 2, not n = 5" in note and "text number" not in note
