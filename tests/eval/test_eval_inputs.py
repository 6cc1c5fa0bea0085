"""evaluate's bad inputs (issue 14): typos in method_options refused before config.json is
written (so the corrected rerun is accepted), malformed or empty data files named with file and
line, and an example whose text the model cannot take recorded and skipped with a count while
the run goes on."""
from __future__ import annotations

import json

import pytest
import torch

from aieg_fast import cli
from aieg_fast import eval as E
from aieg_fast.eval import runner

KW = dict(n_steps=4, n_samples=1, pis=(0.5,), progress=False, plot=False, labels=(10, 11), template="{text} :", metrics="hard")


@pytest.mark.parametrize("methods, options, match", [
    ("aieg", {"aieg": {"ef_mod": "none"}}, r"method_options\['aieg'\] has unknown option\(s\) \['ef_mod'\]"),
    ("aieg", {"aeig": {"ef_mode": "none"}}, r"method_options names 'aeig', which is not among the methods run \['aieg'\]"),
    ("aieg", {"aieg": {"ef_mode": "bogus"}}, r"methods: 'aieg' with method_options .* ef_mode must be one of"),
    ("aieg:ef_mode=bogus", None, r"methods: 'aieg:ef_mode=bogus' .* ef_mode must be one of"),
    ("saliency", {"saliency": "l2"}, r"method_options\['saliency'\] must be a dict"),
    # call settings of a spec, checked with the other options (they were found on the first example)
    ("integrated_gradients:baseline=nonsense", None, r"methods: 'integrated_gradients:baseline=nonsense' .* baseline must be one of"),
    ("integrated_gradients:baseline=99999", None, r"methods: 'integrated_gradients:baseline=99999': baseline token id must be in \[0, \d+\), got 99999"),
    ("occlusion:baseline=-3", None, r"baseline token id must be >= 0, got -3"),
    ("integrated_gradients:alpha_range=2", None, r"alpha_range must be"),
    ("integrated_gradients:n_baseline_samples=0", None, r"n_baseline_samples must be a positive int"),
    ("integrated_gradients", {"integrated_gradients": {"baseline": "zero"}},
     r"unknown option\(s\) \['baseline'\]; .* \(baseline: a call setting, given in the method spec, e.g. integrated_gradients:baseline=...\)"),
])
def test_method_option_typos_refused_before_config(tiny_gpt2, tmp_path, methods, options, match):
    out = tmp_path / "run"
    with pytest.raises((ValueError, TypeError), match=match):
        E.evaluate(tiny_gpt2, methods=methods, method_options=options, n=1, out_dir=out, **KW)
    assert not out.exists()  # not even the folder
    fixed = {"aieg": {"ef_mode": "none"}} if methods.startswith("aieg") else None
    res = E.evaluate(tiny_gpt2, methods=methods.split(":")[0], method_options=fixed, n=1, out_dir=out, **KW)
    assert res["computed"] == 1  # the corrected rerun in the same folder is accepted


@pytest.mark.parametrize("content, match", [
    (b'{"text": "good", "label": 1}\n{"text": "bad"}\n', r"imdb_test_sample.jsonl: line 2 has no 'label' key"),
    (b'{"text": "good", "label": 1}\n\n{"label": 0}\n', r"line 3 has no 'text' key"),
    (b'{"text": "good", "label": 1}\n{"text": "caf\xe9", "label": 0}\n', r"line 2 is not UTF-8 text \(byte 13"),
    (b'{"text": "good", "label": 1}\n{"text": "bad", "label": 0\n', r"line 2 is not JSON"),
    (b'["good", 1]\n', r"line 1 is not a JSON object"),
    (b'{"text": "good", "label": "yes"}\n', r"line 1 needs a string 'text' and a 'label' of 0 or 1"),
])
def test_malformed_jsonl_named_with_file_and_line(tiny_gpt2, tmp_path, capsys, monkeypatch, content, match):
    data = tmp_path / "data"
    data.mkdir()
    (data / "imdb_test_sample.jsonl").write_bytes(content)
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=match):
        E.evaluate(tiny_gpt2, dataset="imdb", data_dir=data, methods="saliency", n=2, out_dir=out, **KW)
    assert not (out / "config.json").exists()
    monkeypatch.setattr(runner, "load_model", lambda model=None, **kw: tiny_gpt2)
    rc = cli.main(["evaluate", "--dataset", "imdb", "--data-dir", str(data), "--methods", "saliency", "--out", str(out), "--no-progress"])
    assert rc == 2 and "imdb_test_sample.jsonl: line" in capsys.readouterr().err


@pytest.mark.parametrize("dataset, name, content", [("imdb", "imdb_test_sample.jsonl", ""), ("sst2-dev", "sst2_dev.tsv", "sentence\tlabel\n"),
                                                     ("sst2-dev", "sst2_dev.tsv", "")])
def test_empty_data_file(tiny_gpt2, tmp_path, dataset, name, content):
    data = tmp_path / "data"
    data.mkdir()
    (data / name).write_text(content)
    with pytest.raises(ValueError, match=rf"dataset '{dataset}' has no examples: .*{name} holds no data line"):
        E.evaluate(tiny_gpt2, dataset=dataset, data_dir=data, methods="saliency", n=3, out_dir=tmp_path / "run", **KW)
    assert not (tmp_path / "run" / "config.json").exists()


def test_over_long_text_is_recorded_and_skipped(tiny_gpt2, tmp_path, capsys, monkeypatch):
    """Example 1 has more tokens than the tiny model's 64 positions: it is recorded with the
    reason and skipped; the others are evaluated; a rerun does not try it again."""
    data = tmp_path / "data"
    data.mkdir()
    long = " ".join(["good"] * 80)
    (data / "sst2_dev.tsv").write_text(f"sentence\tlabel\nthe film was good\t1\n{long}\t0\nthe film was bad\t0\n")
    out = tmp_path / "run"
    res = E.evaluate(tiny_gpt2, dataset="sst2-dev", data_dir=data, methods="saliency,random", n=3, out_dir=out, **KW)
    assert res["computed"] == 2 and res["failed"] == 1
    assert res["failures"][0]["id"] == "sst2-dev:1" and "the model accepts at most 64 positions" in res["failures"][0]["reason"]
    recs = [json.loads(l) for l in (out / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in recs] == ["sst2-dev:0", "sst2-dev:1", "sst2-dev:2"]
    assert "skipped" in recs[1] and recs[1]["methods"] == {}
    md = (out / "summary.md").read_text()
    assert "n = 2 examples" in md and "1 example(s) skipped" in md and "sst2-dev:1" in md
    again = E.evaluate(tiny_gpt2, dataset="sst2-dev", data_dir=data, methods="saliency,random", n=3, out_dir=out, **KW)
    assert again["computed"] == 0 and again["failed"] == 1
    monkeypatch.setattr(runner, "load_model", lambda model=None, **kw: tiny_gpt2)
    from aieg_fast import datasets

    monkeypatch.setitem(datasets.DATASETS, "sst2-dev", datasets.DATASETS["sst2-dev"].__class__(
        **{**datasets.DATASETS["sst2-dev"].__dict__, "labels": (10, 11)}))
    rc = cli.main(["evaluate", "--dataset", "sst2-dev", "--data-dir", str(data), "--methods", "saliency", "--n", "3",
                   "--metrics", "hard", "--n-steps", "4", "--out", str(tmp_path / "cli"), "--no-progress"])
    assert rc == 0 and "1 example(s) skipped, their input refused" in capsys.readouterr().out


def test_flagged_attributions_recorded_not_warned(tiny_gpt2, tmp_path, recwarn):
    """During a run AttributionWarnings are not printed per example: each attribution's findings
    are in its record ("signal_flags") and counted in summary.md."""
    from aieg_fast import AttributionWarning

    res = E.evaluate(tiny_gpt2, methods="integrated_gradients,random", n=2, out_dir=tmp_path, **dict(KW, n_steps=2))
    assert not [w for w in recwarn if issubclass(w.category, AttributionWarning)]
    recs = [json.loads(l) for l in (tmp_path / "records.jsonl").read_text().splitlines()]
    # two IG steps on the random model: a large completeness error on both examples
    assert [r["methods"]["integrated_gradients"]["signal_flags"] for r in recs] == [["completeness"], ["completeness"]]
    assert [r["methods"]["random"]["signal_flags"] for r in recs] == [[], []]  # the control has no findings of IG's
    assert "Attributions flagged (AttributionWarning; 'signal_flags' in records.jsonl): integrated_gradients: completeness × 2." in res["summary_md"]
    # a rerun that summarises another method of the folder counted IG's flags under its table too
    only = E.evaluate(tiny_gpt2, methods="random", n=2, out_dir=tmp_path, **dict(KW, n_steps=2))
    assert only["computed"] == 0 and "Attributions flagged" not in only["summary_md"]


@pytest.mark.parametrize("kw, err, match", [
    (dict(n_steps=1), ValueError, r"n_steps must be an int >= 2 \(path steps\), got 1"),
    (dict(internal_batch_size=0), ValueError, r"internal_batch_size"),
    (dict(labels=" good"), TypeError, r"labels must be a list of label words .*got str ' good'"),
    (dict(labels=[10]), ValueError, r"labels needs at least 2 label words"),
    (dict(labels=[10, 10]), ValueError, r"labels names a label more than once"),
    (dict(seed=-1), ValueError, r"seed must be an int >= 0, got -1"),  # failed in the bootstrap, after every record
    # a string (a spec's "None" is not null) or a count below 1 was refused only on the model, after loading it
    (dict(methods="grad_ellm:n_layers=None"), ValueError, r"n_layers must be an int >= 1 .* or 'all' \(or null in a method spec .*\), got 'None'"),
    (dict(methods="grad_ellm:n_layers=0"), ValueError, r"n_layers must be an int >= 1 .* or 'all' .*, got 0"),
])
def test_settings_refused_before_the_model_and_any_file(tmp_path, monkeypatch, kw, err, match):
    """Refused before the model is loaded: no folder is made, so the corrected rerun is accepted."""
    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the settings were checked")

    monkeypatch.setattr(runner, "load_model", refuse)
    out = tmp_path / "run"
    with pytest.raises(err, match=match):
        E.evaluate("some-model", n=1, out_dir=out, **{"methods": "saliency", **KW, **kw})
    assert not out.exists()


def test_labels_of_one_token_refused_after_loading_leave_no_folder(tiny_gpt2, tmp_path):
    """Two label words of the same token are found with the tokenizer: refused, and the folder
    the run had made is removed, so the corrected rerun is accepted."""
    out = tmp_path / "run"
    word = tiny_gpt2.tokenizer.decode([10])  # the text of token 10: the same label twice
    assert tiny_gpt2.resolve_target(word)["id"] == 10
    with pytest.raises(ValueError, match=r"name the same token more than once"):
        E.evaluate(tiny_gpt2, methods="saliency", n=1, out_dir=out, **{**KW, "labels": (10, word)})
    assert not out.exists()
    assert E.evaluate(tiny_gpt2, methods="saliency", n=1, out_dir=out, **KW)["computed"] == 1


@pytest.mark.parametrize("bad, good, match", [
    ("grad_ellm:n_layers=3", "grad_ellm:n_layers=2", r"n_layers must be an int in \[1, 2\] or 'all', got 3"),
    ("aieg:attn_layers=[0,5]", "aieg:attn_layers=[0,-1]", r"attn_layers has layer indices out of range \[-2, 2\) .*: \[5\]"),
    ("attention:attn_layers=[2]", "attention:attn_layers=[1]", r"attn_layers has layer indices out of range"),
    ("heta:gate_layers=3:n_probes=1", "heta:gate_layers=2:n_probes=1", r"gate_layers must be at most the model's 2 layers, got 3"),
    ("heta:curvature_layers=3:n_probes=1", "heta:curvature_layers=2:n_probes=1", r"curvature_layers must be at most the model's 2 layers, got 3"),
    ("scaled_attention:attn_layers=[5]", "scaled_attention:attn_layers=[-2]", r"attn_layers has layer indices out of range \[-2, 2\)"),
])
def test_layers_beyond_the_model_refused_before_the_folder(tiny_gpt2, tmp_path, bad, good, match):
    """A layer the 2-layer model lacks (Grad-ELLM's n_layers=3, AIEG's or attention's attn_layers
    [5], HETA's gate_layers=3) was refused at the first example, after config.json and
    methods.json were written; now with the model's other checks, leaving no folder."""
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=match):
        E.evaluate(tiny_gpt2, methods=bad, n=1, out_dir=out, **KW)
    assert not out.exists()
    assert E.evaluate(tiny_gpt2, methods=good, n=1, out_dir=out, **KW)["computed"] == 1


def test_every_method_with_attn_layers_checks_them_with_the_model(tiny_gpt2):
    """Each method taking ``attn_layers`` refuses an index the model lacks in check_model (its
    check_adapter), not at its first example: scaled_attention did not, so an evaluation (and
    evaluate_generation) wrote its folder and then failed."""
    from aieg_fast.methods.registry import check_model, get_method, list_methods

    names = [n for n in list_methods() if "attn_layers" in get_method(n).defaults()]
    assert {"aieg", "attention", "scaled_attention"} <= set(names)
    for name in names:
        m = get_method(name)
        with pytest.raises(ValueError, match=r"attn_layers has layer indices out of range \[-2, 2\)"):
            check_model(m, m.options(attn_layers=[7]), tiny_gpt2.adapter)


def test_resume_refuses_records_of_other_data(tiny_gpt2, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "the movie is good", "label": 1}\n{"text": "bad film", "label": 0}\n', encoding="utf-8")
    out = tmp_path / "run"
    kw = dict(KW, labels=(10, 11), template="{text} :")
    E.evaluate(tiny_gpt2, dataset=str(data), label_field="label", methods="saliency", n=1, out_dir=out, **kw)
    data.write_text('{"text": "another text", "label": 1}\n{"text": "bad film", "label": 0}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"holds a record of example .* with another text \('the movie is good'\) than the data "
                                         r"gives it now \('another text'\)"):
        E.evaluate(tiny_gpt2, dataset=str(data), label_field="label", methods="saliency", n=2, out_dir=out, **kw)
    lines = (out / "records.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["text"] == "the movie is good"  # nothing was added
    # the same text with another gold label: refused too (accuracy reads the recorded label)
    data.write_text('{"text": "the movie is good", "label": 0}\n{"text": "bad film", "label": 0}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"example .* with the gold label 1, the data gives it 0 now"):
        E.evaluate(tiny_gpt2, dataset=str(data), label_field="label", methods="saliency", n=2, out_dir=out, **kw)
    assert (out / "records.jsonl").read_text().splitlines() == lines


def test_refused_rerun_keeps_command_json(tiny_gpt2, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "load_model", lambda model=None, **kw: tiny_gpt2)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sst2_dev.tsv").write_text("sentence\tlabel\nthe film was good\t1\n")
    base = ["evaluate", "--dataset", "sst2-dev", "--data-dir", "data", "--n", "1", "--methods", "saliency", "--labels", "a", "b",
            "--metrics", "hard", "--out", "run", "--no-progress"]
    assert cli.main([*base, "--n-steps", "4"]) == 0
    before = json.loads((tmp_path / "run" / "command.json").read_text())
    assert before["out"] == str(tmp_path / "run") and before["data-dir"] == str(tmp_path / "data")  # --config works anywhere
    assert before["dataset"] == "sst2-dev"  # a registry name stays a name
    assert cli.main([*base, "--n-steps", "6"]) == 2
    assert "holds results with other settings" in capsys.readouterr().err
    assert json.loads((tmp_path / "run" / "command.json").read_text()) == before


def test_every_input_refused_says_so_and_fails(tiny_gpt2, tmp_path, capsys, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    long = " ".join(["good"] * 80)  # more tokens than the tiny model's 64 positions
    (data / "sst2_dev.tsv").write_text(f"sentence\tlabel\n{long}\t1\n{long} bad\t0\n")
    monkeypatch.setattr(runner, "load_model", lambda model=None, **kw: tiny_gpt2)
    rc = cli.main(["evaluate", "--dataset", "sst2-dev", "--data-dir", str(data), "--methods", "saliency", "--n", "2", "--labels", "a",
                   "b", "--metrics", "hard", "--n-steps", "4", "--out", str(tmp_path / "run"), "--no-progress"])
    said = capsys.readouterr()
    assert rc == 1 and "no example was evaluated" in said.err
    assert "**No example was evaluated**: the model refused all 2 inputs" in (tmp_path / "run" / "summary.md").read_text()
    assert "--max-tokens N cuts the texts to N tokens" in said.out  # the way to fit them
    assert f"{str(tmp_path / 'run')!r} holds their 'skipped' records under these settings: delete it, or pass another --out" in said.err


def test_short_texts_with_no_top_k_token_are_noted(tiny_gpt2, tmp_path):
    """int(0.2 · |attributable|) = 0 below 5 tokens: the summary says the hard metrics are 0 there."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "sst2_dev.tsv").write_text("sentence\tlabel\ngood\t1\nthe film was very bad indeed\t0\n")
    E.evaluate(tiny_gpt2, dataset="sst2-dev", data_dir=data, methods="saliency", n=2, out_dir=tmp_path / "run",
               **{**KW, "template": None})
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "The top-k removed no token from 1 of 2 examples (int(0.2 · |attributable|) = 0: fewer than 5" in md


def test_rerun_with_other_weights_under_one_name_refused(tiny_gpt2, tmp_path):
    """config.json records a digest of the weights: another model object of the same class
    (another seed, a weight changed in memory) or a model folder saved again in place is refused,
    not resumed with the first model's records; the same weights resume; a folder from before
    the digest was recorded takes it from the run that resumes it, and checks it from then on."""
    import aieg_fast
    from builders import make_tiny_gpt2

    out = tmp_path / "run"
    E.evaluate(tiny_gpt2, methods="saliency", n=1, out_dir=out, **KW)
    assert json.loads((out / "config.json").read_text())["model_weights"].startswith("sha256:")
    other = aieg_fast.load_model(*make_tiny_gpt2(seed=1))
    with pytest.raises(ValueError, match=r"holds results with other settings \(model_weights: 'sha256:"):
        E.evaluate(other, methods="saliency", n=2, out_dir=out, **KW)
    m, t = make_tiny_gpt2()  # the fixture's weights again, in a new object: resumed
    assert E.evaluate(aieg_fast.load_model(m, t), methods="saliency", n=2, out_dir=out, **KW)["computed"] == 1
    with torch.no_grad():
        m.get_input_embeddings().weight[3, 0] += 1.0  # one weight changed in memory
    with pytest.raises(ValueError, match=r"other settings \(model_weights: "):
        E.evaluate(aieg_fast.load_model(m, t), methods="saliency", n=3, out_dir=out, **KW)
    # a model folder trained again in place, loaded by its path
    folder, run = tmp_path / "model", tmp_path / "run2"
    m0, t0 = make_tiny_gpt2()
    m0.save_pretrained(folder)
    t0.save_pretrained(folder)
    E.evaluate(str(folder), methods="saliency", n=1, out_dir=run, **KW)
    m.save_pretrained(folder)  # the changed weights, same name
    with pytest.raises(ValueError, match=r"other settings \(model_weights: "):
        E.evaluate(str(folder), methods="saliency", n=2, out_dir=run, **KW)
    # a folder written before the digest: adopted, then checked
    cfg = json.loads((run / "config.json").read_text())
    del cfg["model_weights"]
    (run / "config.json").write_text(json.dumps(cfg))
    assert E.evaluate(str(folder), methods="saliency", n=2, out_dir=run, **KW)["computed"] == 1
    assert "model_weights" in json.loads((run / "config.json").read_text())
    m0.save_pretrained(folder)
    with pytest.raises(ValueError, match=r"other settings \(model_weights: "):
        E.evaluate(str(folder), methods="saliency", n=3, out_dir=run, **KW)


def test_a_resume_with_other_settings_is_refused_before_the_model_loads(tiny_gpt2, tmp_path, monkeypatch):
    """Classification, generation and LongRA runs: a rerun on a folder with records whose settings
    differ is refused naming the setting, before the model loads (it loaded a whole model first);
    the same settings pass that check and resume."""
    from aieg_fast.eval import generation_runner as G

    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the recorded settings were compared")

    GEN = {k: v for k, v in KW.items() if k not in ("labels", "template")}
    runs = {
        "label": lambda model, **kw: E.evaluate(model, methods="saliency", n=1, out_dir=tmp_path / "label", **{**KW, **kw}),
        "gen": lambda model, **kw: G.evaluate_generation(model, [{"id": "a", "prompt": "the movie is good"}], methods="saliency",
                                                         out_dir=tmp_path / "gen", n_new_tokens=2, **{**GEN, **kw}),
        "longra": lambda model, **kw: E.evaluate_longra(model, methods="saliency", n=2, out_dir=tmp_path / "longra", progress=False,
                                                        plot=False, **{"n_steps": 4, **kw}),
    }
    for name, run in runs.items():
        run(tiny_gpt2)
        monkeypatch.setattr(runner, "load_model", refuse)
        with pytest.raises(ValueError, match=r"holds results with other settings \(n_steps: 4 recorded, 6 now\)"):
            run("some-model", n_steps=6)
        assert run(tiny_gpt2)["computed"] == 0, name  # the same settings resume (nothing left to compute)
        monkeypatch.undo()


def test_max_tokens_never_cuts_inside_a_character(tiny_gpt2):
    """A byte-level tokenizer splits an emoji or an accented letter into bytes: the cut ended in
    U+FFFD (a character not in the text) and encoded to more tokens than asked."""
    from aieg_fast.eval.examples import truncate

    text = "the café was great 😀 and good"
    tok = tiny_gpt2.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    torn = [n for n in range(1, len(ids)) if tok.decode(ids[:n]).endswith("\ufffd")]
    assert torn  # the tokenizer does split characters (else this test checks nothing)
    for n in torn:
        cut = truncate(tiny_gpt2, text, n)
        assert "\ufffd" not in cut and text.startswith(cut) and len(tok(cut, add_special_tokens=False)["input_ids"]) <= n
    assert truncate(tiny_gpt2, {"passage": text, "question": "is it?"}, 12)["passage"].count("\ufffd") == 0


def test_max_tokens_cuts_the_text_field_of_a_template_that_starts_with_another(tiny_gpt2):
    """A user template "Q: {question} C: {text} A:" had its question cut to one token and the text
    kept whole (still over max_tokens), silently: the first field was cut. The {text} field is cut;
    a mapping without one (BoolQ's passage, question) is cut in its first field, as before."""
    from aieg_fast.eval.examples import truncate

    n = lambda s: len(tiny_gpt2.tokenizer(s, add_special_tokens=False)["input_ids"])  # noqa: E731
    row = {"question": "is the movie good", "text": "the movie is good and the actors are great and the story is good"}
    cut = truncate(tiny_gpt2, row, 12)
    assert cut["question"] == row["question"] and row["text"].startswith(cut["text"]) and cut["text"] != row["text"]
    assert n(cut["question"]) + n(cut["text"]) <= 12
    boolq = truncate(tiny_gpt2, {"passage": row["text"], "question": row["question"]}, 12)
    assert boolq["question"] == row["question"] and boolq["passage"] != row["text"]


def test_a_template_ending_in_a_space_before_spaced_label_words_is_noted(tiny_gpt2, capsys, monkeypatch):
    from aieg_fast.eval.examples import label_token_ids

    label_token_ids(tiny_gpt2, [" a", " good"], "Review: {text} Sentiment: ")
    assert "note: the template ends with whitespace (' Sentiment: ') and the label words [' a', ' good'] start with it" in (
        capsys.readouterr().err)
    label_token_ids(tiny_gpt2, [" a", " good"], "Review: {text} Sentiment:")
    label_token_ids(tiny_gpt2, [" a", " good"], "Review: {text}")
    label_token_ids(tiny_gpt2, ["a", "b"], "Review: {text} Sentiment: ")
    monkeypatch.setenv("RANK", "1")  # another process of a torchrun run: said once, by rank 0
    label_token_ids(tiny_gpt2, [" a", " good"], "Review: {text} Sentiment: ")
    assert "note:" not in capsys.readouterr().err


def test_a_generation_run_whose_prompts_are_refused_does_not_point_to_max_tokens(tiny_gpt2_dir, tmp_path, capsys):
    """--max-tokens is for label tasks only (refused for generated text): the hint must not name it there."""
    f = tmp_path / "gen.jsonl"
    f.write_text(json.dumps({"text": " ".join(["good"] * 80)}) + "\n", encoding="utf-8")
    rc = cli.main(["evaluate", "--model", str(tiny_gpt2_dir), "--dataset", str(f), "--methods", "saliency", "--metrics", "hard",
                   "--n-steps", "2", "--n-new-tokens", "2", "--out", str(tmp_path / "run"), "--no-progress"])
    said = capsys.readouterr()
    assert rc == 1 and "example(s) skipped" in said.out and "--max-tokens" not in said.out + said.err


def test_a_class_index_typed_as_digits_is_taken_for_a_classifier_head(tiny_gpt2_clf):
    """`--labels 0 1 2` / `--target 1` for a classification head reach the package as strings, which
    were refused as "not a label of this classifier" (its labels are LABEL_0, ...): digits that name
    no label are the class index; a label name still wins, and other strings are refused."""
    from aieg_fast.eval.examples import label_token_ids

    ex = tiny_gpt2_clf
    n = ex.adapter.num_labels
    assert [ex.resolve_target(t)["id"] for t in ("1", " 1", "LABEL_1", 1)] == [1, 1, 1, 1]
    assert label_token_ids(ex, [str(i) for i in range(n)]) == list(range(n))
    with pytest.raises(ValueError, match=rf"'x' is not a label of this classifier; labels: .*, or a class index in \[0, {n}\)"):
        ex.resolve_target("x")
    with pytest.raises(ValueError, match=rf"target must be a class index in \[0, {n}\), got {n}"):
        ex.resolve_target(str(n))


def test_a_user_id_stays_on_its_line_in_summary_md(tiny_gpt2, tmp_path):
    """An id of a user's file with a newline, '#', '|' or HTML is written quoted in a code span in
    summary.md's list of skipped examples (it was written raw: the list broke into a heading and
    raw HTML); a plain id stays as it is."""
    long = " ".join(["good"] * 80)  # more tokens than the tiny model's 64 positions: skipped, listed
    rows = [{"text": long, "label": 0, "k": "a|b\n# Heading <script>x</script>"}, {"text": long, "label": 1, "k": "plain-7"},
            {"text": "the film was good", "label": 1, "k": "ok"}]
    f = tmp_path / "adv.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = E.evaluate(tiny_gpt2, dataset=str(f), label_field="label", id_field="k", out_dir=tmp_path / "run", **KW)
    assert res["failed"] == 2
    md = (tmp_path / "run" / "summary.md").read_text()
    listed = md[md.index("example(s) skipped"):].splitlines()
    assert '- ` "a|b\\n# Heading <script>x</script>" `: ' in listed[2] and listed[3].startswith("- plain-7: ")
    assert "\n# Heading" not in md


@pytest.mark.parametrize("runner, flag", [("evaluate", "progress"), ("evaluate", "plot"), ("evaluate_generation", "teacher_forced"),
                                          ("evaluate_generation", "interpolate_generated"), ("evaluate_longra", "plot")])
def test_a_flag_that_is_not_a_bool_is_refused(tiny_gpt2, tmp_path, runner, flag):
    """progress="no" turned the bar on ("no" is truthy), as plot="no" the plots; the runners'
    flags must be bools, refused before any file is written."""
    kw = {"evaluate": dict(KW), "evaluate_longra": dict(n_steps=4, progress=False, plot=False),
          "evaluate_generation": dict(n_steps=4, n_samples=1, pis=(0.5,), progress=False, plot=False, metrics="hard", n_new_tokens=1,
                                      records=[{"prompt": "the movie is", "reference": " good"}])}[runner]
    kw[flag] = "no"
    with pytest.raises(ValueError, match=rf"{flag} must be True or False, got 'no'"):
        getattr(E, runner)(tiny_gpt2, methods="saliency", n=1, out_dir=tmp_path / "run", **kw)
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


@pytest.mark.parametrize("eid, shown", [("sst2-dev:12", "sst2-dev:12"), ("wikibio_test_49", "wikibio_test_49"),
                                        ("__init__", '` "__init__" `'), ("a\u202eb", '` "a\\u202eb" `'), ("x\x85y", '` "x\\u0085y" `'),
                                        ("a`b\n", '`` "a`b\\n" ``'), ("a\u061cb\u2028", '` "a\\u061cb\\u2028" `')])
def test_shown_id(eid, shown):
    """Plain ids as they are; an id Markdown would read as emphasis, or holding a right-to-left
    override or a C1 control (which reversed or broke a terminal line), quoted and escaped."""
    assert E.shown_id(eid) == shown
