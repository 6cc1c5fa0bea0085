"""The command line (aieg_fast.cli): explain (also --generate), evaluate, exit codes."""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import aieg_fast
from aieg_fast import cli, datasets
from aieg_fast.cli import evaluate as cli_evaluate
from aieg_fast.eval import runner

PROMPT = "the movie is good"


# ------------------------------------------------------------------------------------------
# evaluate
# ------------------------------------------------------------------------------------------
def test_cli_evaluate_sample(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """The CLI subcommand runs on the shipped sample (model loading patched to the tiny model)."""
    monkeypatch.setattr(runner, "load_model", lambda model=None, **kw: tiny_gpt2)
    # no single-token label words in the tiny vocabulary: two token ids stand in
    sample = datasets.DATASETS["sst2-sample"]
    monkeypatch.setitem(datasets.DATASETS, "sst2-sample", dataclasses.replace(sample, labels=(10, 11)))
    rc = cli.main(["evaluate", "--dataset", "sst2-sample", "--methods", "saliency,random", "--n", "1",
                   "--n-steps", "4", "--n-samples", "1", "--max-tokens", "8", "--out", str(tmp_path / "o"), "--no-progress"])
    assert rc == 0
    assert "| saliency |" in capsys.readouterr().out
    rc = cli.main(["evaluate", "--dataset", "imdb", "--data-dir", str(tmp_path / "none"), "--out", str(tmp_path / "p")])
    assert rc == 2
    assert "data-dir" in capsys.readouterr().err


def test_cli_evaluate_soft_maps_ties_prob_space(tmp_path, monkeypatch):
    """--soft-maps, --ties and --prob-space reach evaluate; the defaults are both soft maps,
    random ties and None (the label words for these label tasks)."""
    seen = []

    def fake(**kw):
        seen.append(kw)
        return {"summary_md": "", "computed": 0, "skipped": 0, "out_dir": kw["out_dir"]}

    monkeypatch.setattr(cli_evaluate, "evaluate", fake)
    assert cli.main(["evaluate", "--out", str(tmp_path / "a")]) == 0
    assert seen[0]["soft_maps"] == "relu,minmax" and seen[0]["ties"] == "random" and seen[0]["prob_space"] is None
    assert cli.main(["evaluate", "--out", str(tmp_path / "b"), "--soft-maps", "abs", "--ties", "first",
                     "--prob-space", "vocab"]) == 0
    assert seen[1]["soft_maps"] == "abs" and seen[1]["ties"] == "first" and seen[1]["prob_space"] == "vocab"
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--ties", "last"])


def test_cli_evaluate_method_options(tmp_path, monkeypatch, capsys):
    """--method-options (a JSON object) reaches evaluate and command.json, and --config gives it
    back; anything but a JSON object is refused by name."""
    seen = []

    def fake(**kw):
        seen.append(kw)
        Path(kw["out_dir"]).mkdir(parents=True, exist_ok=True)  # as a run makes its folder
        return {"summary_md": "", "computed": 0, "skipped": 0, "out_dir": kw["out_dir"]}

    monkeypatch.setattr(cli_evaluate, "evaluate", fake)
    out = tmp_path / "a"
    assert cli.main(["evaluate", "--out", str(out), "--methods", "aieg,random", "--method-options", '{"aieg": {"preset": "v1"}}']) == 0
    assert seen[0]["method_options"] == {"aieg": {"preset": "v1"}}
    assert json.loads((out / "command.json").read_text())["method-options"] == {"aieg": {"preset": "v1"}}
    assert cli.main(["evaluate", "--config", str(out / "command.json")]) == 0
    assert seen[1]["method_options"] == {"aieg": {"preset": "v1"}} and seen[1]["methods"] == seen[0]["methods"]
    assert cli.main(["evaluate", "--out", str(tmp_path / "b")]) == 0 and seen[2]["method_options"] is None
    for bad in ("preset=v1", "[1]"):
        with pytest.raises(SystemExit):
            cli.main(["evaluate", "--method-options", bad])
        assert "--method-options" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # was "method_options['aieg'] must be a dict of options, got int", after parsing
        cli.main(["evaluate", "--method-options", '{"aieg": 3}'])
    assert "('aieg' maps to 3, not an object of options)" in capsys.readouterr().err


def test_cli_evaluate_interrupt(tmp_path, monkeypatch, capsys):
    """An interrupted evaluation exits with 130 and says how to resume."""

    def interrupted(**_):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_evaluate, "evaluate", interrupted)
    rc = cli.main(["evaluate", "--dataset", "sst2-sample", "--out", str(tmp_path / "e")])
    assert rc == 130 and "rerun the same command to resume" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# explain
# ------------------------------------------------------------------------------------------
def test_cli_generate(tmp_path, capsys):
    from builders import make_tiny_llama

    from aieg_fast.cli import main

    m, t = make_tiny_llama()
    m.save_pretrained(tmp_path / "m")
    t.save_pretrained(tmp_path / "m")
    out_json = tmp_path / "g.json"
    rc = main(["explain", PROMPT, "--model", str(tmp_path / "m"), "--generate", "3", "--method", "saliency", "--no-progress", "--json", str(out_json)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "generation: 3 tokens (greedy)" in out
    assert len([l for l in out.splitlines() if "<-" in l and "mean over steps" not in l]) == 3
    assert aieg_fast.load_attribution(out_json).scores.shape[0] == 3
    assert main(["explain", PROMPT, "--generate", "3", "--target", " good"]) == 2


@pytest.mark.real_model
def test_cli_explain_json(tmp_path, smollm):
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "aieg_fast.cli", "explain", "it 's a charming journey", "--method", "aieg", "--n-steps", "4", "--json", str(out), "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(out.read_text())
    assert len(d["tokens"]) == len(d["token_ids"]) == len(d["scores"]) > 0
    assert all(s is not None and math.isfinite(s) for s in d["scores"])
    assert d["method"] == "aieg" and d["model"] == "SmolLM2-135M-Instruct"
    assert d["target"]["id"] is not None and d["backend"]


@pytest.mark.real_model
def test_cli_bad_input_exit_code():
    proc = subprocess.run([sys.executable, "-m", "aieg_fast.cli", "explain", "hello", "--method", "nope"], capture_output=True, text=True)
    assert proc.returncode != 0 and "invalid choice" in proc.stderr


def test_the_command_line_starts_without_the_model_classes():
    """`aieg-fast --help` and refusals before a model loads need not import transformers' model
    classes (transformers.modeling_utils: torch's compiler and distributed tensors with it, about
    2 s, which training.folder paid at import for one isinstance check)."""
    code = "import sys, aieg_fast.cli; print('transformers.modeling_utils' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stdout + proc.stderr[-2000:]


def test_cli_target_is_id_needs_an_integer(capsys):
    from aieg_fast.cli import main

    assert main(["explain", "the movie is great", "--target", "xx", "--target-is-id"]) == 2
    assert "--target-is-id needs --target to be an integer" in capsys.readouterr().err
    assert main(["explain", "the movie is great", "--target", "²", "--target-is-id"]) == 2  # a digit int() cannot read: was a crash
    assert "--target-is-id needs --target to be an integer" in capsys.readouterr().err


def test_cli_contrast_id_without_target_explains_the_prediction_against_it(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """--contrast-target ID --target-is-id without --target was refused ("needs --target ... got
    --target None"), while Explainer.attribute(text, contrast_target=ID) explains the model's
    prediction against the contrast; the command now does the same and its header says both."""
    from aieg_fast.cli import explain as cli_explain

    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **kw: tiny_gpt2)
    predicted = tiny_gpt2.attribute(PROMPT, method="saliency", progress=False).target["id"]
    contrast = (predicted + 1) % tiny_gpt2.vocab_size
    out = tmp_path / "r.json"
    assert cli.main(["explain", PROMPT, "--method", "saliency", "--contrast-target", str(contrast), "--target-is-id",
                     "--json", str(out), "--no-progress"]) == 0
    said = capsys.readouterr().out
    res = aieg_fast.load_attribution(out)
    assert res.target["id"] == predicted and res.target["contrast_id"] == contrast
    assert res.options["target_fn"] == "logit-contrast"
    expected = tiny_gpt2.attribute(PROMPT, method="saliency", contrast_target=contrast, progress=False)
    assert res.scores.tolist() == pytest.approx(expected.scores.tolist())
    header = next(line for line in said.splitlines() if line.startswith("method:"))
    assert f"(id {predicted})" in header or repr(res.target["text"]) in header
    assert " vs " in header
    # --target-is-id with neither --target nor --contrast-target reads nothing: refused, saying so
    assert cli.main(["explain", PROMPT, "--target-is-id"]) == 2
    assert "--target-is-id reads --target and --contrast-target as token ids / class indices, but neither is given" in capsys.readouterr().err


@pytest.mark.parametrize("target", [None, " bad", " good"])
def test_cli_task_contrasts_the_asked_label_with_the_other(tiny_gpt2, tmp_path, monkeypatch, target):
    """With --task the default F is the decision: the target label against the other label,
    whichever of the two is asked for (before, asking for the label the model does not predict
    silently explained its logit alone)."""
    from aieg_fast.cli import explain as cli_explain

    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **kw: tiny_gpt2)
    sample = datasets.DATASETS["sst2-sample"]
    monkeypatch.setitem(datasets.DATASETS, "sst2-sample", dataclasses.replace(sample, labels=(" bad", " good")))
    out = tmp_path / "r.json"
    extra = [] if target is None else ["--target", target]
    assert cli.main(["explain", "the movie is good", "--task", "sentiment", "--method", "saliency", "--json", str(out),
                     "--no-progress", *extra]) == 0
    res = aieg_fast.load_attribution(out)
    asked = res.target["text"]
    assert target is None or asked == target
    assert res.options["target_fn"] == "logit-contrast"
    assert res.target["contrast_text"] == ({" bad", " good"} - {asked}).pop()


def test_cli_task_target_outside_the_labels_is_said_to_replace_the_decision(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """--task with a --target that is no label word explained its logit alone under the
    "predicted sentiment" line without a word; a note on stderr now says that it replaces the
    label decision. A label word given as its id (--target-is-id) is the label: contrasted with
    the other one (it was explained alone, as a word outside the labels)."""
    from aieg_fast.cli import explain as cli_explain

    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **kw: tiny_gpt2)
    sample = datasets.DATASETS["sst2-sample"]
    monkeypatch.setitem(datasets.DATASETS, "sst2-sample", dataclasses.replace(sample, labels=(" bad", " good")))
    out = tmp_path / "r.json"
    base = ["explain", PROMPT, "--task", "sentiment", "--method", "saliency", "--json", str(out), "--no-progress"]
    assert cli.main([*base, "--target", " great"]) == 0  # one token of the tiny vocabulary, no label word
    said = capsys.readouterr()
    assert ("note: --target ' great' is not a label word of --task sentiment (' bad', ' good'): it replaces the label "
            "decision; its logit alone is explained") in said.err
    res = aieg_fast.load_attribution(out)
    assert res.target["text"] == " great" and res.target.get("contrast_id") is None and res.options["target_fn"] == "logit"
    good = tiny_gpt2.resolve_target(" good")["id"]
    assert cli.main([*base, "--target", str(good), "--target-is-id"]) == 0
    assert "note:" not in capsys.readouterr().err
    res = aieg_fast.load_attribution(out)
    assert res.target["id"] == good and res.target["contrast_text"] == " bad"
    for extra in (["--target", " good"], ["--target", " great", "--no-contrast"], ["--target", " great", "--contrast-target", " bad"]):
        assert cli.main([*base, *extra]) == 0
        assert "note:" not in capsys.readouterr().err, extra  # a label word, or the user's own contrast setting


def test_cli_no_contrast_needs_task(capsys):
    from aieg_fast.cli import main

    assert main(["explain", "the movie is great", "--no-contrast"]) == 2
    assert "--no-contrast applies with --task" in capsys.readouterr().err
    # with --task, a contrast named beside --no-contrast was used and --no-contrast ignored
    assert main(["explain", "--task", "sentiment", "--no-contrast", "--contrast-target", " bad"]) == 2
    assert "--no-contrast and --contrast-target exclude each other" in capsys.readouterr().err


def test_cli_explain_auto_steps(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """--n-steps auto with --tolerance and --max-steps reach attribute (model loading patched to
    the tiny model); a bad --n-steps is an argument error."""
    from aieg_fast.cli import explain as cli_explain

    monkeypatch.setattr(cli_explain, "load_model", lambda *a, **kw: tiny_gpt2)
    out = tmp_path / "r.json"
    rc = cli.main(["explain", PROMPT, "--method", "integrated_gradients", "--n-steps", "auto", "--tolerance", "0.001",
                   "--max-steps", "40", "--json", str(out), "--no-progress"])
    assert rc == 0
    res = aieg_fast.load_attribution(str(out))
    assert res.options["n_steps"] == "auto" and res.options["tolerance"] == 0.001 and res.options["max_steps"] == 40
    assert res.info["n_steps_used"] <= 40
    with pytest.raises(SystemExit):
        cli.main(["explain", PROMPT, "--n-steps", "many"])  # the option named once (argparse names it)
    assert "argument --n-steps: expected an int or 'auto', got 'many'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["explain", PROMPT, "--method", "integrated_gradients", "--n-steps", "0"], "error: --n-steps must be an int >= 2"),
    (["explain", PROMPT, "--method", "integrated_gradients", "--n-baseline-samples", "0"], "error: --n-baseline-samples must be"),
    (["explain", PROMPT, "--method", "integrated_gradients", "--n-steps", "auto", "--tolerance", "-1"], "error: --tolerance must be"),
    (["evaluate", "--methods", "saliency", "--n", "0"], "error: --n-examples (--n) must be a positive int, got 0"),
    (["evaluate", "--methods", "saliency", "--topk", "0"], "error: --topk must be a fraction"),
    (["evaluate", "--methods", "saliency", "--pis", "0.5,0.2"], "error: --pis must be a non-empty increasing"),
    (["evaluate", "--methods", "saliency", "--seed", "-1"], "error: --seed must be an int >= 0"),
    (["explain", PROMPT, "--method", "saliency", "--generate", "0"], "error: --generate must be a positive int"),
    (["verify", "--n-steps", "1", "--methods", "integrated_gradients"], "error: --n-steps must be an int >= 2"),
    (["explain", PROMPT, "--method", "integrated_gradients", "--n-steps", "auto", "--tolerance", "0.1", "--max-steps", "1"],
     "error: --max-steps must be an int >= 2"),
])
def test_cli_errors_name_the_option_not_the_python_argument(argv, says, tiny_gpt2, tmp_path, monkeypatch, capsys):
    """An error of the library names its argument (n_steps); on the command line the message
    names the option that sets it (--n-steps), for every command (before, only evaluate and the
    training commands did, each with its own table)."""
    from aieg_fast.cli import explain as cli_explain

    monkeypatch.setattr(cli_explain, "load_model", lambda *a, **kw: tiny_gpt2)
    monkeypatch.setattr(runner, "load_model", lambda *a, **kw: tiny_gpt2)
    extra = ["--out", str(tmp_path / "o")] if argv[0] == "evaluate" else []
    assert cli.main([*argv, *extra, *([] if argv[0] == "verify" else ["--no-progress"])]) == 2
    err = capsys.readouterr().err
    assert says in err and "n_steps" not in err and "n_baseline_samples" not in err


def test_cli_warnings_name_the_option_not_the_python_line(tiny_gpt2, monkeypatch, capsys):
    """A command's AttributionWarning is one ``warning: ...`` line naming the options
    (--n-steps), not Python's ``<entry point>:6: AttributionWarning: ...`` followed by the
    source line ``sys.exit(main())``; other warnings keep Python's format."""
    import warnings

    from aieg_fast.cli import explain as cli_explain

    def load(*a, **kw):
        warnings.warn("a library's own warning", FutureWarning)
        return tiny_gpt2

    monkeypatch.setattr(cli_explain, "load_model", load)
    with warnings.catch_warnings(record=True) as passed_on:  # what goes on to Python's own display
        warnings.simplefilter("always")
        rc = cli.main(["explain", PROMPT, "--method", "integrated_gradients", "--baseline", "zero", "--n-steps", "2", "--no-progress"])
    assert rc == 0
    err = capsys.readouterr().err
    said = [ln for ln in err.splitlines() if "[completeness]" in ln]
    assert len(said) == 1 and said[0].startswith("warning: integrated_gradients: [completeness]"), err
    assert "raise --n-steps" in said[0] and "n_steps" not in said[0] and "AttributionWarning" not in err
    assert said[0].endswith("(for the next token --n-steps 'auto' refines them until the error is below --tolerance 0.05 by default), "
                            "or choose another baseline") and "res.degenerate" not in err  # no result object on the command line
    assert [w.category for w in passed_on] == [FutureWarning]


def test_cli_attribute_dataset_error_names_the_option(tmp_path, capsys):
    """attribute-dataset: --internal-batch-size named as its option; target_fn='label_logprob'
    written as the option and its value, label_set as the option that gives it (--label)."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "the movie is good"}\n', encoding="utf-8")
    base = ["attribute-dataset", str(data), "--out", str(tmp_path / "o"), "--method", "saliency", "--no-progress"]
    assert cli.main([*base, "--internal-batch-size", "0"]) == 2
    assert "error: --internal-batch-size must be a positive int" in capsys.readouterr().err
    assert cli.main([*base, "--target-fn", "label_logprob"]) == 2
    err = capsys.readouterr().err
    assert "--target-fn 'label_logprob' needs --label" in err and "label_set" not in err


def test_option_names_leave_quoted_values_and_escapes_alone():
    """The names are replaced as words of the message only: not in a value shown with repr (a
    template's '\\n', a column the user named 'n_steps'), and name=value is written as the
    option and its value."""
    from aieg_fast.cli.common import as_flags

    flags = {"n_steps": "--n-steps", "text_field": "--text-field", "tolerance": "--tolerance"}
    assert as_flags("no field 'n_steps' (text_field)", flags) == "no field 'n_steps' (--text-field)"
    assert as_flags(r"in 'Review: {text}\n_steps'", flags) == r"in 'Review: {text}\n_steps'"
    assert as_flags("tolerance=0.1 applies to 'auto' only; got n_steps=20", flags) == \
        "--tolerance 0.1 applies to 'auto' only; got --n-steps 20"
    assert as_flags("runs/n_steps/x and --n_steps and n_steps_max", flags) == "runs/n_steps/x and --n_steps and n_steps_max"
    assert as_flags("text_field (--text-field) names it; n_steps / --n-steps", flags) == "--text-field names it; --n-steps"
    for quoted in ("'{text} {n_steps}'", "'aieg:n_steps 3'", "'data/a n_steps b/x.jsonl'", '"total n_steps here"'):
        assert as_flags(f"text_field {quoted}: n_steps", flags) == f"--text-field {quoted}: --n-steps"  # a quoted span as typed
    # "or None" is the library's word for an argument left out; on the command line it is the option left out
    assert as_flags("n_steps must be a positive int or None, got 0", flags) == "--n-steps must be a positive int, got 0"
    assert as_flags("a value 'x or None' as typed", flags) == "a value 'x or None' as typed"
    # ... but not where the message goes on to say what None means (the sentence would explain a value it no longer names)
    assert as_flags("rope must be True, False or None (the preset's), got 'None'", flags) == \
        "rope must be True, False or None (the preset's), got 'None'"


@pytest.mark.parametrize("argv", [["explain", "the movie is good", "--model", "no-such-model"],
                                  ["train-sentiment", "--out", "no-such-folder"], ["train-nano", "--out", "no-such-folder"]])
def test_commands_that_run_in_one_process_refuse_torchrun(argv, tmp_path, monkeypatch, capsys):
    """Under torchrun every process would train the same model into the same folder (or explain the
    same text); a command that does not share its work says so once (rank 0), before any work."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        said = f"aieg-fast {argv[0]} runs in one process: under torchrun (WORLD_SIZE=2)"
        assert (said in err) == (rank == "0") and err.count("error:") == (rank == "0"), err
    assert not (tmp_path / "no-such-folder").exists()


def test_a_reader_that_goes_away_is_no_error():
    """`aieg-fast info | head -1` printed "error: [Errno 32] Broken pipe" and exited 2."""
    root = Path(__file__).resolve().parents[2]
    p = subprocess.Popen([sys.executable, "-m", "aieg_fast.cli", "info"], cwd=root, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={"PYTHONPATH": str(root), "PATH": "", "AIEG_FAST_NO_EXT_WARNING": "1"})
    p.stdout.close()  # before the command writes: its first write meets a closed pipe
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 1 and "error" not in err.lower() and "Traceback" not in err, err


def test_explain_writes_its_files_when_the_reader_goes_away(tiny_gpt2, monkeypatch, tmp_path):
    """`aieg-fast explain ... --json a.json | head -c 100` lost the result: show() met the closed
    pipe before the files were written."""
    from aieg_fast.cli import explain as cli_explain

    def closed_pipe(self, **kw):
        raise BrokenPipeError(32, "Broken pipe")

    gone = []
    monkeypatch.setattr(cli_explain, "load_model", lambda *a, **kw: tiny_gpt2)
    monkeypatch.setattr(aieg_fast.Attribution, "show", closed_pipe)
    monkeypatch.setattr(cli_explain, "stdout_gone", lambda: gone.append(True))  # not pytest's own stdout
    out = tmp_path / "a.json"
    assert cli.main(["explain", "the movie is", "--method", "saliency", "--json", str(out), "--no-progress"]) == 0
    assert gone and aieg_fast.load_attribution(out).method == "saliency"


def test_stdout_gone_leaves_a_stream_without_a_file_descriptor(monkeypatch):
    """A notebook's sys.stdout has no fileno(): redirecting it raised io.UnsupportedOperation out
    of the BrokenPipeError handler."""
    import io

    from aieg_fast.cli.common import stdout_gone

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stream)
    stdout_gone()
    print("still writable")
    assert stream.getvalue() == "still writable\n"


def test_explain_writes_its_files_when_a_real_pipe_closes(tmp_path):
    """Through a real pipe the view is rich's, which exits (SystemExit) on a closed pipe: the
    --json file was still lost."""
    from builders import make_tiny_gpt2

    m, tok = make_tiny_gpt2()
    m.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "a.json"
    p = subprocess.Popen([sys.executable, "-m", "aieg_fast.cli", "explain", "the movie is", "--model", str(tmp_path / "tiny"),
                          "--method", "saliency", "--no-progress", "--json", str(out)], cwd=root, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={"PYTHONPATH": str(root), "PATH": "", "AIEG_FAST_NO_EXT_WARNING": "1",
                                                      "HF_HUB_OFFLINE": "1"})
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=300)
    assert out.exists() and "Traceback" not in err, err



def test_cli_explain_label_set(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """explain had no label-set option: --target-fn label_logprob needed --task (sentiment's words);
    --label-set gives the words (ids with --target-is-id), as label_set= does in Python."""
    from aieg_fast.cli import explain as cli_explain

    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **kw: tiny_gpt2)
    out = tmp_path / "r.json"
    assert cli.main(["explain", PROMPT, "--method", "saliency", "--target", "10", "--target-is-id", "--target-fn",
                     "label_logprob", "--label-set", "10", "11", "--json", str(out), "--no-progress"]) == 0
    want = tiny_gpt2.attribute(PROMPT, method="saliency", target=10, target_fn="label_logprob", label_set=[10, 11], progress=False)
    got = aieg_fast.load_attribution(out)
    assert torch.equal(got.scores, want.scores) and got.options["target_fn"] == "label_logprob"
    for argv, said in ((["--target-fn", "label_logprob"], "needs --label-set WORD WORD... (the label words) or --task"),
                       (["--label-set", "10", "11"], "--label-set applies with --target-fn label_logprob"),
                       (["--target", "10", "--target-is-id", "--target-fn", "label_logprob", "--label-set", "10", "x"],
                        "--target-is-id needs --label-set to be integers")):
        assert cli.main(["explain", PROMPT, "--method", "saliency", *argv]) == 2 and said in capsys.readouterr().err


def test_a_process_that_lost_its_peer_says_another_one_stopped(tmp_path, monkeypatch, capsys):
    """Under torchrun, when one process failed, the others stopped on gloo's 'Connection closed by
    peer' alone, which did not say that another process had failed (and printed why)."""
    from aieg_fast.cli import evaluate as cli_evaluate

    def gone(*a, **k):
        raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:41234")

    monkeypatch.setattr(cli_evaluate, "evaluate", gone)
    for k, v in {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(k, v)
    assert cli.main(["evaluate", "--methods", "saliency", "--n-examples", "1", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "error: another process of this run stopped (its error, printed by it, says why), so this one stopped too: [" in err, err
