"""attribute_dataset (aieg_fast.dataset_attribution.runner): one record per example equal to
attributing it alone, batches separate from internal batches, resume, a cut last line
recomputed, settings and data changes refused, parquet, progress; on the tiny random GPT-2."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest
import torch

from aieg_fast import Attribution, AttributionWarning
from aieg_fast.dataset_attribution import PARQUET_FILE, RECORDS_FILE, attribute_dataset
from aieg_fast.runs import TORN_SUFFIX
from aieg_fast.runs.machine import machine_tag

ROWS = [
    {"text": "the movie is good", "id": "a"},
    {"text": "the film was bad , slow and boring", "target": " good"},
    {"text": "what a wonderful story", "template": "Review: {text} :"},
    {"text": "a positive review of a negative film", "target": " good", "contrast": " bad"},
    {"text": "great"},
    {"text": "terrible , amazing story"},
]
KW = dict(method="integrated_gradients", n_steps=4, progress=False)


def _records(out):
    return [json.loads(line) for line in (out / RECORDS_FILE).read_text(encoding="utf-8").splitlines()]


def _data(tmp_path, rows=ROWS):
    p = tmp_path / "data.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def test_records_equal_single_calls(tiny_gpt2, tmp_path):
    res = attribute_dataset(_data(tmp_path), tmp_path / "o", tiny_gpt2, batch_size=4, **KW)
    assert res["n_examples"] == 6 and res["computed"] == 6 and res["done_before"] == 0 and res["skipped"] == 0
    recs = _records(tmp_path / "o")
    assert [r["index"] for r in recs] == list(range(6)) and recs[0]["id"] == "a" and recs[1]["id"] == 1
    for row, rec in zip(ROWS, recs):
        a = Attribution.from_dict(rec)
        kw = {"contrast_target": row["contrast"]} if "contrast" in row else {}
        alone = tiny_gpt2.attribute(row["text"], target=row.get("target"), template=row.get("template"), **kw, **KW)
        assert rec["example_text"] == row["text"] and a.tokens == alone.tokens and a.target == alone.target
        torch.testing.assert_close(a.scores, alone.scores, rtol=1e-4, atol=1e-6)
        assert rec["method"] == "integrated_gradients" and rec["options"]["n_steps"] == 4 and "total" in rec["timing"]
        assert rec["machine"] == machine_tag()  # a run resumed on other machines says which computed each record
    # batches: up to 4 consecutive rows with one template and one contrast kind
    assert [r["batch"] for r in recs] == [{"first": 0, "size": 2}] * 2 + [{"first": 2, "size": 1}] + [
        {"first": 3, "size": 1}] + [{"first": 4, "size": 2}] * 2
    assert json.loads((tmp_path / "o" / "config.json").read_text())["method"] == "integrated_gradients"


def test_batch_size_is_examples_per_call(tiny_gpt2, tmp_path, monkeypatch):
    calls = []
    orig = type(tiny_gpt2).attribute

    def spy(self, text, **kw):
        calls.append((len(text), kw["internal_batch_size"]))
        return orig(self, text, **kw)

    monkeypatch.setattr(type(tiny_gpt2), "attribute", spy)
    rows = [{"text": f"the movie is good {i}"} for i in range(5)]
    attribute_dataset(_data(tmp_path, rows), tmp_path / "o", tiny_gpt2, batch_size=2, internal_batch_size=3, **KW)
    assert calls == [(1, 3), (2, 3), (2, 3), (1, 3)]  # the first: the settings' trial on example 0 (a fresh folder)


def test_resume_and_a_cut_last_line(tiny_gpt2, tmp_path, capsys):
    data, out = _data(tmp_path), tmp_path / "o"
    first = attribute_dataset(data, out, tiny_gpt2, batch_size=2, limit=4, **KW)
    assert first["computed"] == 4
    whole = _records(out)
    raw = (out / RECORDS_FILE).read_bytes()
    (out / RECORDS_FILE).write_bytes(raw[:-40])  # a hard kill while the last record was written
    again = attribute_dataset(data, out, tiny_gpt2, batch_size=2, **KW)
    assert again["computed"] == 3 and again["done_before"] == 3  # row 3 again, rows 4 and 5 new
    assert "was cut before its end" in capsys.readouterr().out
    assert (out / (RECORDS_FILE + TORN_SUFFIX)).exists()
    recs = _records(out)
    assert [r["index"] for r in recs] == list(range(6))
    assert recs[3]["scores"] == whole[3]["scores"]
    assert attribute_dataset(data, out, tiny_gpt2, batch_size=2, **KW)["computed"] == 0
    fewer = attribute_dataset(data, out, tiny_gpt2, batch_size=2, limit=2, **KW)  # records past the limit kept, not counted
    assert (fewer["n_examples"], fewer["computed"], fewer["done_before"]) == (2, 0, 2) and len(_records(out)) == 6
    # other settings, or other data, in the same folder: refused before any work
    with pytest.raises(ValueError, match=r"other settings \(n_steps: "):
        attribute_dataset(data, out, tiny_gpt2, batch_size=2, **dict(KW, n_steps=5))
    changed = [dict(r) for r in ROWS]
    changed[1]["text"] = "another text"
    with pytest.raises(ValueError, match="data row 1 with another text"):
        attribute_dataset(_data(tmp_path, changed), out, tiny_gpt2, batch_size=2, **KW)
    assert [r["index"] for r in _records(out)] == list(range(6))  # nothing lost



def _same(rec):
    return {k: v for k, v in rec.items() if k != "timing"}


def test_a_batch_cut_part_way_is_computed_whole_again(tiny_gpt2, tmp_path):
    """A torn batch write (a full disk, a kill between its records) keeps the whole lines of the
    batch: the resume computed the rest as a shorter batch ({first: 5, size: 3}, other padding,
    target_prob off in the 9th digit). It computes the planned batch again, keeps the records
    there and writes only the missing ones: the file equals an uninterrupted run's."""
    rows = [{"text": " ".join(["good", "bad", "film"][: 1 + i % 3]) + f" {i}"} for i in range(8)]
    data, out = _data(tmp_path, rows), tmp_path / "o"
    whole = attribute_dataset(data, tmp_path / "whole", tiny_gpt2, batch_size=4, **KW)
    assert whole["computed"] == 8
    want = _records(tmp_path / "whole")
    attribute_dataset(data, out, tiny_gpt2, batch_size=4, **KW)
    lines = (out / RECORDS_FILE).read_text(encoding="utf-8").splitlines(keepends=True)
    (out / RECORDS_FILE).write_text("".join(lines[:5]), encoding="utf-8")  # batch {4, 4}: only row 4 written
    again = attribute_dataset(data, out, tiny_gpt2, batch_size=4, **KW)
    assert (again["computed"], again["done_before"]) == (3, 5)
    got = _records(out)
    assert got[4] == json.loads(lines[4])  # the record there is kept as it was
    assert [_same(r) for r in got] == [_same(r) for r in want]
    assert [r["batch"] for r in got[4:]] == [{"first": 4, "size": 4}] * 4

def test_a_folder_of_settings_only_is_taken_over(tiny_gpt2, tmp_path, capsys):
    """A run stopped before its first record left only its settings: a rerun with other settings
    runs (said on stderr); with a record there, the same change is refused."""
    data, out = _data(tmp_path, ROWS[:1]), tmp_path / "o"
    attribute_dataset(data, out, tiny_gpt2, **KW)
    (out / RECORDS_FILE).write_bytes(b"")
    capsys.readouterr()
    assert attribute_dataset(data, out, tiny_gpt2, **dict(KW, n_steps=5))["computed"] == 1
    assert "wrote no results (n_steps" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"other settings \(n_steps"):
        attribute_dataset(data, out, tiny_gpt2, **KW)


def test_refused_text_is_recorded_and_the_run_goes_on(tiny_gpt2, tmp_path):
    rows = [{"text": "the movie is good"}, {"text": " ".join(["good"] * 80)}, {"text": "bad"}]  # 64 positions
    res = attribute_dataset(_data(tmp_path, rows), tmp_path / "o", tiny_gpt2, batch_size=3, **KW)
    assert res["skipped"] == 1 and res["skips"][0]["index"] == 1 and "at most 64 positions" in res["skips"][0]["reason"]
    # a skipped example is not counted as computed (it was: 3 computed, 1 skipped, of 3 examples)
    assert (res["n_examples"], res["computed"], res["skipped_now"], res["done_before"]) == (3, 2, 1, 0)
    again = attribute_dataset(_data(tmp_path, rows), tmp_path / "o", tiny_gpt2, batch_size=3, **KW)
    assert (again["computed"], again["skipped_now"], again["done_before"], again["skipped"]) == (0, 0, 3, 1)
    recs = _records(tmp_path / "o")
    assert "skipped" in recs[1] and "scores" in recs[0] and "scores" in recs[2]
    with pytest.raises(ValueError, match=r"record of data row 1 \(id 1\) is a skipped example, .*: .*at most 64 positions"):
        Attribution.from_dict(recs[1])  # was KeyError: 'scores'
    with pytest.raises(ValueError, match=r"d is not a saved attribution: it has no \['tokens', 'token_ids', 'scores', 'method', "
                       r"'target'\] \(its keys: \['controls', 'id', 'methods'\]\); .*an evaluate record holds metrics"):
        Attribution.from_dict({"id": "x", "methods": {}, "controls": {}})  # an evaluate record: was KeyError: 'scores'



def test_the_summary_counts_only_this_runs_examples(tiny_gpt2, tmp_path):
    """skipped, skips, degenerate and flag_kinds counted every record of the file: with a limit
    after a full run, or after rows were cut from the data, the rows outside this run too."""
    long = " ".join(["good"] * 80)  # more than the model's 64 positions: skipped
    rows = [{"text": t} for t in ["the movie is good", long, "bad", "great film", long, "terrible , amazing story"]]
    data, out, kw = _data(tmp_path, rows), tmp_path / "o", dict(KW, n_steps=2, baseline="zero")  # flags: completeness
    full = attribute_dataset(data, out, tiny_gpt2, batch_size=2, **kw)
    assert full["skipped"] == 2 and [s["index"] for s in full["skips"]] == [1, 4]
    recs = _records(out)

    def counted(n):
        return sum(bool(r.get("degenerate")) for r in recs[:n])

    def kinds(n):
        return dict(Counter(k for r in recs[:n] for k in {f["kind"] for f in r.get("degenerate") or []}))

    for again in (attribute_dataset(data, out, tiny_gpt2, batch_size=2, limit=3, **kw),
                  attribute_dataset(_data(tmp_path, rows[:3]), out, tiny_gpt2, batch_size=2, **kw)):
        assert (again["n_examples"], again["computed"], again["done_before"]) == (3, 0, 3)
        assert again["skipped"] == 1 and [s["index"] for s in again["skips"]] == [1]
        assert again["degenerate"] == counted(3) and again["flag_kinds"] == kinds(3)
        assert len(_records(out)) == 6  # the other records kept
    assert full["degenerate"] == counted(6) > counted(3) and full["flag_kinds"] == kinds(6)

def test_bad_settings_refused_before_any_file(tiny_gpt2, tmp_path):
    data, out = _data(tmp_path), tmp_path / "o"
    bad = [
        (dict(batch_size=0), "batch_size must be a positive int"),
        (dict(internal_batch_size=True), "internal_batch_size"),
        (dict(options={"bogus": 1}), "bogus"),
        (dict(target_fn="label_logprob"), "needs label_set"),
        (dict(template="no slot"), "template must contain"),
        (dict(dtype="int8"), "dtype must be one of"),
        (dict(device="cpu", device_map="auto"), "exclude each other"),
        (dict(progress="no"), "progress must be True or False, got 'no'"),  # truthy: a bar was shown
        (dict(parquet="no"), "parquet must be True or False, got 'no'"),
        (dict(target_is_id=1), "target_is_id must be True or False, got 1"),
    ]
    for kw, match in bad:
        with pytest.raises(ValueError, match=match):
            attribute_dataset(data, out, tiny_gpt2, **{**KW, **kw})
    with pytest.raises(ValueError, match=r"data\.jsonl': line 2 \(data row 1, id 1\): target ' good good'.*not a single token") as said:
        attribute_dataset(_data(tmp_path, [ROWS[0], {"text": "bad", "target": " good good"}]), out, tiny_gpt2, **KW)
    assert str(said.value).count("' good good'") == 1  # the value once (the role's prefix and the reason both named it)
    with pytest.raises(ValueError, match="an Explainer already loaded"):
        attribute_dataset(data, out, tiny_gpt2, dtype="float32", **KW)
    assert not (out / "config.json").exists() and not (out / RECORDS_FILE).exists()


def test_progress_bar_has_a_total(tiny_gpt2, tmp_path, capsys):
    attribute_dataset(_data(tmp_path), tmp_path / "o", tiny_gpt2, **dict(KW, progress=True))
    assert "6/6" in capsys.readouterr().err


def test_parquet(tiny_gpt2, tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *a, **k):
        if name.startswith("pyarrow"):
            raise ImportError("no pyarrow")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(ValueError, match="needs pyarrow"):
        attribute_dataset(_data(tmp_path), tmp_path / "o", tiny_gpt2, parquet=True, **KW)
    monkeypatch.undo()
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install pyarrow)")
    res = attribute_dataset(_data(tmp_path), tmp_path / "p", tiny_gpt2, parquet=True, **KW)
    table = pq.read_table(res["parquet_file"]).to_pylist()
    recs = _records(tmp_path / "p")
    assert res["parquet_file"].endswith(PARQUET_FILE) and len(table) == 6
    assert [t["scores"] for t in table] == [r["scores"] for r in recs]
    assert json.loads(table[1]["target"]) == recs[1]["target"]


@pytest.mark.parametrize("change, field", [
    (lambda r: dict(r, target=" good") if "target" not in r else r, "target"),   # a target column added
    (lambda r: dict(r, contrast=" bad") if "target" in r else r, "contrast"),
    (lambda r: dict(r, template="Text: {text} :"), "template"),
    (lambda r: dict(r, id="NEW") if r.get("id") == "a" else r, "id"),   # an id column edited: joins by id would go wrong
])
def test_resume_refuses_rows_whose_target_contrast_or_template_changed(tiny_gpt2, tmp_path, change, field):
    """A record explains its row as it was: a rerun whose data gives the row another target,
    contrast or template is refused (the old records were kept silently), naming the row and
    both values; the records are left as they were."""
    out = tmp_path / "o"
    attribute_dataset(_data(tmp_path), out, tiny_gpt2, **KW)
    before = (out / RECORDS_FILE).read_bytes()
    changed = tmp_path / "changed"
    changed.mkdir()
    with pytest.raises(ValueError, match=rf"holds a record of data row \d with another {field} \(.* recorded, .* now\): the data or its columns changed"):
        attribute_dataset(_data(changed, [change(r) for r in ROWS]), out, tiny_gpt2, **KW)
    assert (out / RECORDS_FILE).read_bytes() == before
    assert attribute_dataset(_data(tmp_path), out, tiny_gpt2, **KW)["done_before"] == len(ROWS)  # the same data resumes


def test_a_changed_long_text_is_shown_where_it_differs(tiny_gpt2, tmp_path):
    """Both texts were cut at 60 characters, so two long texts that differ near their end looked
    alike ("'... what a t recorded, '... what a t now"); the message shows where they differ."""
    text = "the film was long , slow and boring but the end was what a twist"
    out = tmp_path / "o"
    attribute_dataset(_data(tmp_path, [{"text": text}]), out, tiny_gpt2, **KW)
    changed = tmp_path / "changed"
    changed.mkdir()
    with pytest.raises(ValueError) as err:
        attribute_dataset(_data(changed, [{"text": text.replace("twist", "turn")}]), out, tiny_gpt2, **KW)
    p = text.index("twist") + 1
    assert (f"data row 0 with another text ({len(text)} and {len(text) - 1} characters, the first difference at character "
            f"{p} (from 0): ...'{text[p - 20:p + 20]}' recorded, ...'the end was what a turn' now)") in str(err.value)
    with pytest.raises(ValueError, match=r"another text \('the film was long , slow and boring but the end was what\.\.\. recorded, "
                                         r"'short' now\)"):  # different from the start: their beginnings show it
        attribute_dataset(_data(changed, [{"text": "short"}]), out, tiny_gpt2, **KW)
    # a setting is shown the same way: two long templates that differ near their end were cut alike
    t1 = "Review of a film, written by a viewer, to classify: {text} Sentiment:"
    t2 = t1.replace("Sentiment:", "Sentiment?")
    data = _data(changed, [{"text": "good"}])
    attribute_dataset(data, tmp_path / "t", tiny_gpt2, **dict(KW, template=t1))
    with pytest.raises(ValueError) as err:
        attribute_dataset(data, tmp_path / "t", tiny_gpt2, **dict(KW, template=t2))
    assert (f"template: {len(t1)} and {len(t2)} characters, the first difference at character {len(t1) - 1} (from 0): "
            f"...{t1[len(t1) - 21:]!r} recorded, ...{t2[len(t2) - 21:]!r} now") in str(err.value), str(err.value)

@pytest.mark.parametrize("kw, target, match", [
    (dict(method="integrated_gradients", baseline=99999), " good", r"baseline token id must be in \[0, \d+\), got 99999"),
    (dict(method="aieg", target_fn="logprob"), " very good", r"does not explain multi-token targets"),
])
def test_settings_the_model_refuses_are_an_error_not_skipped_rows(tiny_gpt2, tmp_path, kw, target, match):
    """Refused on the first example, before config.json or any record is written (every row was
    a "skipped" record, the run exited 0 and its config blocked the corrected rerun)."""
    rows = [{"text": "the movie is good", "target": target}, {"text": "bad film", "target": target}]
    out = tmp_path / "o"
    with pytest.raises(ValueError, match=r"the settings were refused on data .*data\.jsonl': line 1 \(data row 0, id 0\), a text the model takes: .*" + match):
        attribute_dataset(_data(tmp_path, rows), out, tiny_gpt2, n_steps=4, progress=False, **kw)
    assert not out.exists()
    fixed = dict(kw, baseline=None) if "baseline" in kw else dict(kw, method="integrated_gradients")
    assert attribute_dataset(_data(tmp_path, rows), out, tiny_gpt2, n_steps=4, progress=False, **fixed)["skipped"] == 0


def test_resume_with_another_batch_size_refused_and_older_folders_adopt_it(tiny_gpt2, tmp_path):
    """batch_size decides which examples share a padded call; it was not recorded, so a rerun
    with another one resumed silently. It is now in config.json; a folder from before takes it
    from the run that resumes it."""
    out = tmp_path / "o"
    attribute_dataset(_data(tmp_path), out, tiny_gpt2, batch_size=2, **KW)
    with pytest.raises(ValueError, match=r"other settings \(batch_size: 2 recorded, 3 now\); use another out_dir; batch_size "
                       r"fixes which examples .* to use less memory, lower internal_batch_size"):  # the way out said
        attribute_dataset(_data(tmp_path), out, tiny_gpt2, batch_size=3, **KW)
    with pytest.raises(ValueError, match=r"other settings \(n_steps: 4 recorded, 5 now\); use another out_dir$"):
        attribute_dataset(_data(tmp_path), out, tiny_gpt2, batch_size=2, **dict(KW, n_steps=5))
    cfg = json.loads((out / "config.json").read_text())
    del cfg["batch_size"]
    (out / "config.json").write_text(json.dumps(cfg))
    assert attribute_dataset(_data(tmp_path), out, tiny_gpt2, batch_size=3, **KW)["done_before"] == len(ROWS)
    assert json.loads((out / "config.json").read_text())["batch_size"] == 3


@pytest.mark.parametrize("kw, match", [
    (dict(baseline="bogus"), r"baseline must be one of .* got 'bogus'"),
    (dict(label_set=[" good", " bad"]), r"label_set is used only with target_fn='label_logprob', got target_fn='logit'"),
    (dict(target_is_id=True), r"target_is_id: .* has no target or contrast column to read as ids"),
    (dict(target_fn="label_logprob", label_set=[" yes"]), r"label_set must hold at least 2 labels .*got \[' yes'\]"),
    (dict(method="aieg", n_steps="auto"), r"n_steps='auto' is not available for method 'aieg'"),
])
def test_settings_refused_before_the_model_loads(tmp_path, monkeypatch, kw, match):
    """Checked from the settings and the data alone (they were found after the model loaded, or
    target_is_id without targets was accepted and did nothing)."""
    from aieg_fast.dataset_attribution import runner

    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the settings were checked")

    monkeypatch.setattr(runner, "load_model", refuse)
    data = tmp_path / "texts.jsonl"
    data.write_text('{"text": "the movie is good"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        attribute_dataset(data, tmp_path / "o", "some-model", **{**KW, **kw})
    assert not (tmp_path / "o").exists()


def test_a_method_option_given_as_a_keyword_points_to_options(tmp_path, monkeypatch):
    """token_reduction="l2" as a keyword of attribute_dataset failed with Python's plain
    "unexpected keyword argument", which did not say that method options go in options={...}."""
    from aieg_fast.dataset_attribution import runner

    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the keywords were checked")

    monkeypatch.setattr(runner, "load_model", refuse)
    data = _data(tmp_path, ROWS[:1])
    with pytest.raises(TypeError, match=r"attribute_dataset\(\) got token_reduction='l2' as a keyword, but 'token_reduction' is "
                       r"a method option \(of [^)]*'aieg'[^)]*\): method options go in options=\{\.\.\.\}, e\.g\. options=\{'token_reduction': 'l2'\}"):
        attribute_dataset(data, tmp_path / "o", "some-model", method="aieg", token_reduction="l2", progress=False)
    with pytest.raises(TypeError, match=r"attribute_dataset\(\) got an unexpected keyword argument 'bogus'$"):
        attribute_dataset(data, tmp_path / "o", "some-model", bogus=1)
    assert not (tmp_path / "o").exists()


def test_the_optional_columns_used_are_noted_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """A column named target, contrast, template or id is used without being asked for (a 0/1
    sentiment column is read as token ids 0 and 1): a note on stderr names each, and how its
    values are read, before the model loads; once (rank 0 only under torchrun)."""
    from aieg_fast.dataset_attribution import runner

    def refuse(*a, **k):
        raise RuntimeError("the model is loaded")

    monkeypatch.setattr(runner, "load_model", refuse)
    data = _data(tmp_path, [{"text": "the movie is good", "target": 1, "id": "a"}, {"text": "bad", "target": 0, "id": "b"}])
    with pytest.raises(RuntimeError, match="the model is loaded"):
        attribute_dataset(data, tmp_path / "o", "some-model", **KW)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"note: data {str(data)!r}: column 'target' is each row's target (an int is a token id / class index, a string the text "
        "of the target; empty: the model's prediction): 2 int(s); used because of its name ('target'): rename the column "
        "to leave it out",
        f"note: data {str(data)!r}: column 'id' is each row's id, kept in its record (empty: the row's index): 2 string(s); "
        "used because of its name ('id'): rename the column to leave it out"]
    csv = tmp_path / "data.csv"
    csv.write_text("text,label\nthe movie is good,1\nbad,\n", encoding="utf-8")  # a CSV cell is text: "1" is the token of "1"
    with pytest.raises(RuntimeError, match="the model is loaded"):
        attribute_dataset(csv, tmp_path / "o", "some-model", target_column="label", **KW)
    err = capsys.readouterr().err
    assert "column 'label' is each row's target" in err and "1 string(s), 1 empty" in err
    assert 'a string of digits is text ("1" is the token of the text "1"' in err and "because of its name" not in err
    monkeypatch.setenv("RANK", "1")  # another torchrun process: rank 0 says it
    with pytest.raises(RuntimeError, match="the model is loaded"):
        attribute_dataset(data, tmp_path / "o", "some-model", **KW)
    assert capsys.readouterr().err == ""


def test_records_of_rows_beyond_the_run_are_kept_and_said(tiny_gpt2, tmp_path, capsys):
    """Records of rows cut from the data, or past a smaller limit, stay in the file (as the
    docstring says) and the run says how many and which (it said nothing)."""
    rows = [{"text": t} for t in ["the movie is good", "bad", "great film"]]
    out, kw = tmp_path / "o", dict(KW, n_steps=2)
    assert attribute_dataset(_data(tmp_path, rows), out, tiny_gpt2, **kw)["kept_beyond"] == 0
    assert "beyond" not in capsys.readouterr().err
    res = attribute_dataset(_data(tmp_path, rows[:2]), out, tiny_gpt2, **kw)
    assert (res["n_examples"], res["done_before"], res["kept_beyond"]) == (2, 2, 1) and len(_records(out)) == 3
    assert (f"note: out_dir {str(out)!r} keeps 1 record(s) of rows beyond this run's 2 row(s) (index 2), from a former "
            f"run over more rows (longer data, or a larger limit): kept in {RECORDS_FILE} as they were") in capsys.readouterr().err
    res = attribute_dataset(_data(tmp_path, rows), out, tiny_gpt2, limit=1, **kw)
    assert res["kept_beyond"] == 2 and len(_records(out)) == 3
    assert "keeps 2 record(s) of rows beyond this run's 1 row(s) (index 1, 2)" in capsys.readouterr().err


def test_a_target_outside_the_label_set_is_refused_before_any_work(tiny_llama, tmp_path):
    """A row's target that is not one of label_set became a 'skipped' record for good (and a
    fixed file was then refused as another target); it is a data error, refused naming the row."""
    rows = [{"text": "the film is great", "target": " good"}, {"text": "bad film", "target": " awful"}]
    out = tmp_path / "o"
    with pytest.raises(ValueError, match=r"row 1.*target ' awful' \(id \d+\) is not in label_set \[' good', ' bad'\]"):
        attribute_dataset(_data(tmp_path, rows), out, tiny_llama, method="saliency", target_fn="label_logprob",
                          label_set=[" good", " bad"], progress=False)
    assert not out.exists()


def test_a_text_with_a_lone_surrogate_is_refused_naming_its_row(tiny_gpt2, tmp_path):
    """The tokenizer's TypeError ("TextEncodeInput must be ...") named no row, after the model loaded."""
    with pytest.raises(ValueError, match=r"data: row 1: the text \(.text.\) holds '\\ud800' at character 4, which UTF-8 cannot encode"):
        attribute_dataset([{"text": "good film"}, {"text": "bad \ud800 film"}], tmp_path / "o", tiny_gpt2, **KW)


def test_a_string_label_set_is_refused(tiny_gpt2, tmp_path):
    """list(" good") ran with the labels [' ', 'g', 'o', 'o', 'd']."""
    with pytest.raises(TypeError, match=r"label_set must be a list of labels \(token strings or ids\), got str 'ab'"):
        attribute_dataset(["the film"], tmp_path / "o", tiny_gpt2, method="saliency", target_fn="label_logprob",
                          label_set="ab", progress=False)


def test_a_resume_with_another_tensor_baseline_is_refused(tiny_gpt2, tmp_path):
    """Every tensor was recorded as "tensor": a resume with another one mixed the records of two
    baselines in one folder."""
    data, out = ["the movie is good", "bad film", "the film"], tmp_path / "mix"
    d = tiny_gpt2.adapter.hidden_size
    attribute_dataset(data, out, tiny_gpt2, baseline=torch.zeros(d), limit=1, batch_size=1, **KW)
    with pytest.raises(ValueError, match=r"baseline: 'tensor:[0-9a-f]{16}' recorded, 'tensor:[0-9a-f]{16}' now"):
        attribute_dataset(data, out, tiny_gpt2, baseline=torch.ones(d), batch_size=1, **KW)
    attribute_dataset(data, out, tiny_gpt2, baseline=torch.zeros(d), batch_size=1, **KW)  # the same tensor resumes
    assert len(_records(out)) == 3


def test_loading_a_runs_records_as_a_saved_result_says_how(tiny_gpt2, tmp_path):
    """load_attributions on the run's folder raised a bare IsADirectoryError, and on its JSON Lines
    file suggested pandas.read_json without dtype=False (ids '007' came back as 7.0)."""
    from aieg_fast import load_attributions

    out = tmp_path / "o"
    attribute_dataset([{"text": "a fine film", "id": "007"}], out, tiny_gpt2, id_column="id", **KW)
    with pytest.raises(ValueError, match=r"is a folder, not a saved result .*Attribution.from_dict\(json.loads\(line\)\)"):
        load_attributions(out)
    (out / "two.jsonl").write_text((out / RECORDS_FILE).read_text() * 2)
    with pytest.raises(ValueError, match=r"pandas.read_json\(path, lines=True, dtype=False\) \(dtype=False keeps ids"):
        load_attributions(out / "two.jsonl")


def test_the_same_data_in_another_format_resumes(tiny_gpt2, tmp_path):
    """Data converted from JSON Lines (id 1) to CSV (id "1") was refused on resume as another id,
    although ids that print the same are one id."""
    out = tmp_path / "o"
    attribute_dataset([{"text": "a fine film", "id": 1}, {"text": "a dull film", "id": 2}], out, tiny_gpt2, id_column="id",
                      limit=1, **KW)
    csv = tmp_path / "d.csv"
    csv.write_text("text,id\na fine film,1\na dull film,2\n")
    attribute_dataset(csv, out, tiny_gpt2, id_column="id", **KW)
    assert [r["index"] for r in _records(out)] == [0, 1]


def test_a_resume_restating_a_default_option_resumes(tiny_gpt2, tmp_path):
    """A resume that gave a method option at its default value (or left out one given at its
    default) was refused as 'other settings (options: ...)', although every record is the same:
    the options as given are recorded, the values they resolve to are what is compared."""
    out = tmp_path / "o"
    attribute_dataset(_data(tmp_path), out, tiny_gpt2, **KW)
    again = attribute_dataset(_data(tmp_path), out, tiny_gpt2, **dict(KW, options={"integration": "trapezoid"}))
    assert again["done_before"] == len(ROWS) and again["computed"] == 0
    assert json.loads((out / "config.json").read_text())["options"] == {}  # as the first run gave them
    with pytest.raises(ValueError, match=r"other settings \(option_values: \{'integration': 'trapezoid'\} recorded, "
                       r"\{'integration': 'riemann_left'\} now\)"):  # a value that changes the records is still refused
        attribute_dataset(_data(tmp_path), out, tiny_gpt2, **dict(KW, options={"integration": "riemann_left"}))


def test_a_special_token_typed_in_rows_is_warned_once_naming_the_rows(tiny_gpt2, tmp_path):
    """attribute_dataset ignored every AttributionWarning (a result's flags are recorded), so a
    special-token string typed in the texts (a rendered chat template) went unsaid, although
    explain and attribute warn of it: the tokens around it were attributed silently."""
    rows = [{"text": "<|endoftext|>the movie is good"}, {"text": "great"}, {"text": "bad film<|endoftext|>"},
            {"text": "a story<|endoftext|>"}]
    with pytest.warns(AttributionWarning) as got:
        attribute_dataset(_data(tmp_path, rows), tmp_path / "o", tiny_gpt2, **KW)
    typed = [str(w.message) for w in got if "typed as text" in str(w.message)]
    assert len(typed) == 1, typed  # once, not once per row or per call
    assert re.match(r".*data\.jsonl': line 3 \(data row 2, id 2\) and 1 more row: text holds \['<\|endoftext\|>'\]", typed[0])
