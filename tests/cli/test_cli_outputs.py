"""Output paths of ``aieg-fast explain`` are checked before the model is loaded (issue 14): an
unwritable --json / --html path no longer costs the whole computation; a write that fails
after all keeps the result in the temporary folder."""
from __future__ import annotations

import json
import os
import re

import pytest
import torch

import aieg_fast
from aieg_fast import cli
from aieg_fast.cli import explain as cli_explain


@pytest.fixture
def no_model(monkeypatch):
    """load_model must not be reached: the path checks come first."""
    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the output paths were checked")

    monkeypatch.setattr(cli_explain, "load_model", refuse)


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_unwritable_outputs_refused_before_loading(tmp_path, capsys, no_model, flag):
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    cases = [
        (str(tmp_path / "missing" / "out"), "does not exist"),
        (str(tmp_path), "is a folder, not a file"),
        (str(a_file / "out"), "does not exist"),  # a file where the folder should be
    ]
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        cases.append((str(ro / "out"), "cannot write in the folder"))
    for path, msg in cases:
        assert cli.main(["explain", "the movie", flag, path, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert f"error: {flag} {path!r}" in err and msg in err, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".aieg")) == []  # the probe left nothing


def test_same_file_for_json_and_html(tmp_path, capsys, no_model):
    out = str(tmp_path / "x")
    assert cli.main(["explain", "the movie", "--json", out, "--html", out]) == 2
    assert "name the same file" in capsys.readouterr().err


def test_failed_write_keeps_the_result(tiny_gpt2, tmp_path, capsys, monkeypatch):
    """A write that fails after the computation (say, a full disk) saves the result in the
    temporary folder and says where; the exit status is 1."""
    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **placement: tiny_gpt2)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    real_save = aieg_fast.Attribution.save
    target = str(tmp_path / "out.json")

    def full_disk(self, path):
        if path == target:
            raise OSError(28, "No space left on device")
        real_save(self, path)

    monkeypatch.setattr(aieg_fast.Attribution, "save", full_disk)
    assert cli.main(["explain", "the movie is", "--method", "saliency", "--json", target, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "could not be written (No space left on device); the result is saved in" in err
    rescue = err.strip().rsplit(" ", 1)[-1]
    assert rescue.startswith(str(tmp_path)) and json.loads(open(rescue).read())["method"] == "saliency"


def test_a_failed_html_write_leaves_the_old_file_whole(tiny_gpt2, tmp_path, capsys, monkeypatch):
    """--html replaces its file whole or not at all, as --json: the page was written into the
    file opened for writing, so a failure while writing it (a full disk) left the old page cut."""
    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **placement: tiny_gpt2)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    page = tmp_path / "page.html"
    page.write_text("<p>the last run's page</p>")
    from aieg_fast.runs import records

    real_fsync, calls = records.os.fsync, []

    def full_disk_once(fd):  # the page's write fails; the rescued JSON after it lands
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(records.os, "fsync", full_disk_once)
    assert cli.main(["explain", "the movie is", "--method", "saliency", "--html", str(page), "--no-progress"]) == 1
    assert "could not be written (No space left on device)" in capsys.readouterr().err
    assert page.read_text() == "<p>the last run's page</p>"


def test_html_shows_tokens_with_tokens(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """``--tokens --html F`` wrote the words view to F (the terminal showed tokens)."""
    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **placement: tiny_gpt2)
    page, saved = tmp_path / "out.html", tmp_path / "out.json"
    for extra in ([], ["--tokens"]):
        cmd = ["explain", "unflinchingly bleak", "--method", "saliency", "--html", str(page), "--json", str(saved), "--no-progress"]
        assert cli.main([*cmd, *extra]) == 0
        res = aieg_fast.load_attribution(saved)
        n = len(res.tokens) if extra else len(res.word_groups())
        assert page.read_text(encoding="utf-8").count('<span class="aieg-w') == n
    assert len(res.tokens) > len(res.word_groups())
    capsys.readouterr()


@pytest.mark.parametrize("extra, match", [
    (["the movie", "--option", "bogus=1"], "unknown option"),
    (["the movie", "--option", "alpha_range=0.5"], "--option 'alpha_range=...': a setting of the call, not a method option; "
                                                    "give it as --alpha-start"),
    (["the movie", "--option", "n_steps=3"], "--option 'n_steps=...': a setting of the call, not a method option; give it as --n-steps"),
    (["the movie", "--method", "integrated_gradients", "--option", "integration=uniform", "--option", "integration=trapezoid"],
     "--option 'integration=...' is given 2 times; give each option once"),  # the last one silently won
    (["   "], "text is empty (only whitespace)"),
    (["the movie", "--template", "no field here"], "template must contain '{text}' exactly once"),
    (["the movie", "--n-steps", "1"], "--n-steps must be an int >= 2 or 'auto', got 1"),
    (["the movie", "--method", "saliency", "--n-steps", "auto"], "--n-steps: method 'saliency' takes no path steps"),
    (["the movie", "--method", "occlusion", "--n-steps", "7"], "--n-steps: method 'occlusion' takes no path steps (only ['integrated_gradients', "
                                                               "'integrated_decision_gradients', 'aieg'] do)"),
    (["the movie", "--generate", "2", "--n-steps", "auto"], "--n-steps auto: not with --generate"),
    (["the movie", "--internal-batch-size", "0"], "--internal-batch-size"),
    (["the movie", "--n-baseline-samples", "0"], "--n-baseline-samples must be a positive int, got 0"),
    (["the movie", "--alpha-start", "-0.5"], "--alpha-start must be in [0, 1) (the path runs from it to 1), got -0.5"),
    (["the movie", "--alpha-start", "nan"], "--alpha-start must be in [0, 1)"),
])
def test_bad_settings_refused_before_loading(capsys, no_model, extra, match):
    """What needs no model is checked before it is loaded (minutes for a large one)."""
    assert cli.main(["explain", *extra, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err, err


def test_option_without_a_name_is_an_argument_error(capsys, no_model):
    """``--option =none`` is refused by the parser, naming --option (it said "unknown option(s) ['']")."""
    for command in (["explain", "the movie"], ["attribute-dataset", "data.jsonl"]):
        with pytest.raises(SystemExit):
            cli.main([*command, "--option", "=none"])
        assert "argument --option: expected NAME=VALUE, got '=none'" in capsys.readouterr().err


@pytest.mark.parametrize("extra, match", [
    (["--teacher-forced"], r"--teacher-forced: not used by the sentiment task of --dataset 'sst2-sample'"),
    (["--n-new-tokens", "3", "--ks", "2,4"], r"--n-new-tokens, --ks: not used by the sentiment task"),
    (["--label-field", "a", "--target-field", "b"], r"--label-field and --target-field: give one"),
    (["--dataset", "longra", "--template", "{text} :", "--topk", "0.3", "--metrics", "hard"],
     r"--template, --topk, --metrics: not used by the longra task of --dataset 'longra'"),
    (["--dataset", "longra", "--n-samples", "2", "--soft-maps", "relu", "--ties", "first", "--start", "1"],
     r"--start, --n-samples, --soft-maps, --ties: not used by the longra task"),
    (["--metrics", "hard", "--pis", "0.5", "--n-samples", "3"],
     r"--pis, --n-samples: not used by the sentiment task of --dataset 'sst2-sample' with --metrics hard"),
    (["--dataset", "{file}", "--label-field", "label", "--labels", " bad", " good", "--data-dir", "/nonexistent"],
     r"--data-dir: not used by the classification task of --dataset '.*rows.jsonl'"),
    (["--text-field", "body", "--id-field", "key"],
     r"--text-field, --id-field: for a dataset file; --dataset 'sst2-sample' is a built-in dataset with its own columns"),
    (["--dataset", "longra", "--label-field", "answer"], r"--label-field: for a dataset file; --dataset 'longra' is a built-in"),
    (["--start", "-1", "--n", "2"], r"--start must be in \[0, --n-examples\) = \[0, 2\), got -1"),
    (["--start", "2", "--n", "2"], r"--start must be in \[0, --n-examples\) = \[0, 2\), got 2"),
])
def test_evaluate_refuses_options_its_task_ignores(tmp_path, capsys, monkeypatch, extra, match):
    from aieg_fast.eval import runner

    def refuse(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(runner, "load_model", refuse)
    out, rows = tmp_path / "run", tmp_path / "rows.jsonl"
    rows.write_text('{"text": "a fine film", "label": 1}\n')
    extra = [str(rows) if a == "{file}" else a for a in extra]
    assert cli.main(["evaluate", "--dataset", "sst2-sample", "--out", str(out), "--no-progress", *extra]) == 2
    assert re.search(match, capsys.readouterr().err) and not out.exists()


@pytest.mark.parametrize("command", [["evaluate", "--methods", "saliency"], ["attribute-dataset", "{rows}", "--method", "saliency"]])
def test_out_naming_a_file_is_refused_as_a_file(tmp_path, capsys, command):
    """--out at an existing file: "is a file", not the mkdir errno "(File exists)"; the file is kept."""
    rows, taken = tmp_path / "rows.jsonl", tmp_path / "taken"
    rows.write_text('{"text": "a fine film"}\n')
    taken.write_text("keep me")
    argv = [str(rows) if a == "{rows}" else a for a in command]
    assert cli.main([*argv, "--out", str(taken), "--no-progress"]) == 2
    assert f"error: --out {str(taken)!r} is a file, not a folder" in capsys.readouterr().err
    assert taken.read_text() == "keep me"


@pytest.mark.parametrize("command", [["explain", "the movie"], ["attribute-dataset", "rows.jsonl", "--out", "o"]])
def test_unknown_baseline_is_an_argument_error(capsys, no_model, command):
    """--baseline is checked when parsed (explain checked it after loading the model)."""
    with pytest.raises(SystemExit) as info:
        cli.main([*command, "--baseline", "noise"])
    assert info.value.code == 2
    assert "argument --baseline: expected one of reference, zero, mean, unk, pad, eos or a token id, got 'noise'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main([*command, "--baseline", "²"])  # a digit int() cannot read: was "invalid parse_baseline value"
    assert "argument --baseline: expected one of" in capsys.readouterr().err


def test_empty_fraction_list_is_refused(tmp_path, capsys):
    """--topk-sweep "" (or --pis "") is an argument error, not a silent "no sweep"."""
    for opt in ("--topk-sweep", "--pis"):
        with pytest.raises(SystemExit):
            cli.main(["evaluate", opt, "", "--out", str(tmp_path / "x")])
        assert "leave the option out for none" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("model", [None, "tiny"])
def test_labelled_file_without_label_words_refused_before_loading(tmp_path, capsys, monkeypatch, tiny_gpt2_dir, model):
    """A labelled file of a causal LM needs --labels: said before the model loads (minutes for a
    large one), for the embedded default and for a model folder (its config.json)."""
    from aieg_fast.eval import runner

    def refuse(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(runner, "load_model", refuse)
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a film", "label": 0}\n', encoding="utf-8")
    out = tmp_path / "run"
    extra = [] if model is None else ["--model", str(tiny_gpt2_dir)]
    assert cli.main(["evaluate", "--dataset", str(data), "--label-field", "label", "--out", str(out), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err
    assert "names no label words and the model is a causal LM" in err and "--labels" in err and not out.exists()


def test_model_kind_without_loading_weights(tmp_path, tiny_gpt2, tiny_gpt2_dir):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    from aieg_fast.models import DEFAULT_MODEL, model_kind

    assert model_kind(None) == model_kind(DEFAULT_MODEL) == model_kind(tiny_gpt2) == "causal_lm"
    assert model_kind(str(tiny_gpt2_dir)) == model_kind(tiny_gpt2.model) == "causal_lm"
    head = GPT2ForSequenceClassification(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=50, num_labels=3))
    head.save_pretrained(tmp_path / "head")
    assert model_kind(tmp_path / "head") == model_kind(head) == "classifier"
    assert model_kind("some-org/not-here") is None and model_kind(tmp_path) is None and model_kind(3) is None


def test_option_values_are_json_with_pythons_constants_too(capsys):
    """``--option adaptive=False`` was the string 'False' ("adaptive must be True or False, got
    'False'"): Python's True / False read as JSON's true / false; other text that is no JSON
    stays text, and the help of --option says that values are read as JSON. 'None' stays text:
    null is "the preset's value" for posnorm and ef_norm, so posnorm=None would run the preset's
    reading under a name that says none; the option's check refuses it."""
    from aieg_fast.methods import get_method, option_value, parse_method_spec

    assert cli_explain.parse_option("adaptive=False") == ("adaptive", False)
    assert [option_value(t) for t in ("True", "False", "None", "false", "[0,1]", "none", "FALSE")] == [
        True, False, "None", False, [0, 1], "none", "FALSE"]
    name, opts = parse_method_spec("aieg:adaptive=False:posnorm=None")
    assert opts == {"adaptive": False, "posnorm": "None"}
    with pytest.raises(ValueError, match=r"posnorm must be one of .*'none'.*got 'None'"):
        get_method(name).options(**opts)
    with pytest.raises(ValueError, match=r"rope must be True, False or None \(the preset's; null in a method spec or --option\), got 'None'"):
        get_method("grad_ellm").options(**parse_method_spec("grad_ellm:rope=None")[1])
    assert get_method("grad_ellm").options(**parse_method_spec("grad_ellm:rope=null")[1]).rope is None
    for command in ("explain", "attribute-dataset"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "VALUE is read as JSON" in out and "attn_layers=[0,1]" in out, out


def test_a_comma_list_of_layers_shows_the_json_spelling(capsys, no_model):
    assert cli.main(["explain", "the movie", "--method", "attention", "--option", "attn_layers=0,1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "got '0,1'; a list of layers is written as JSON: attn_layers=[0,1] (on the command line --option attn_layers=[0,1])" in err, err


def test_the_view_gives_its_advice_in_the_commands_options(tiny_gpt2, tmp_path, capsys, monkeypatch):
    """The heatmap's caution line (a finding's advice) names the command's options, as its
    warning on stderr does ("raise --n-steps", not "raise n_steps"); the saved result keeps the
    library's names."""
    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **placement: tiny_gpt2)
    out = tmp_path / "r.json"
    assert cli.main(["explain", "the movie is good and the actors are great", "--method", "integrated_gradients",
                     "--n-steps", "2", "--json", str(out), "--no-progress"]) == 0
    shown = " ".join(capsys.readouterr().out.split())  # the caution line wraps
    assert "caution: IG completeness error" in shown and "raise --n-steps" in shown and "raise n_steps" not in shown
    saved = json.loads(out.read_text())["degenerate"]
    assert any("raise n_steps" in f["message"] for f in saved)


def test_a_template_typed_with_backslash_n_gets_a_note(tiny_gpt2, monkeypatch, capsys):
    """'--template "Q: {text}\\nA:"' in a shell passes a backslash and an n, not a newline: the
    prompt silently held them (and the model read them). A note says so; the run goes on."""
    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **placement: tiny_gpt2)
    assert cli.main(["explain", "the movie is good", "--template", "review: {text}\\nanswer:", "--method", "saliency",
                     "--no-progress"]) == 0
    assert "note: --template holds a backslash followed by n or t, as typed" in capsys.readouterr().err
    assert cli.main(["explain", "the movie is good", "--template", "review: {text}\nanswer:", "--method", "saliency",
                     "--no-progress"]) == 0
    assert "backslash" not in capsys.readouterr().err  # a real newline: no note


def test_explain_generated_text_explains_a_given_answer(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """The command line had no teacher forcing (--generate refuses --target): --generated-text
    explains each token of a given continuation, as attribute_generation(generated_text=...)."""
    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **placement: tiny_gpt2)
    out = tmp_path / "g.json"
    assert cli.main(["explain", "the movie is", "--generated-text", " good and great", "--method", "saliency",
                     "--no-progress", "--json", str(out)]) == 0
    saved = aieg_fast.load_attribution(out)
    expected = tiny_gpt2.attribute_generation("the movie is", generated_text=" good and great", method="saliency")
    assert saved.info["teacher_forced"] and saved.info["generated_ids"] == expected.info["generated_ids"]
    torch.testing.assert_close(saved.scores, expected.scores, equal_nan=True)
    for argv, said in ((["--generate", "2"], "--generate N decodes the continuation, --generated-text gives it"),
                       (["--target", " good"], "--generated-text explains each token of the continuation; it cannot be combined"),
                       (["--n-steps", "auto"], "--n-steps auto: not with --generated-text")):
        assert cli.main(["explain", "the movie is", "--generated-text", " good", *argv]) == 2
        assert said in capsys.readouterr().err
    assert cli.main(["explain", "the movie is", "--generated-text", ""]) == 2  # said as an option, not as Python's None
    assert "error: --generated-text is empty: give the continuation to explain, or --generate N to decode one" in capsys.readouterr().err
