"""aieg-fast evaluate --config FILE: options from a JSON object, the command line winning; every
run writes its resolved options to OUT/command.json, which --config runs again; bad files and
keys are refused naming --config."""
import json
from pathlib import Path

import pytest

from aieg_fast import cli
from aieg_fast.cli import evaluate as cli_evaluate


@pytest.fixture
def seen(monkeypatch):
    calls = []

    def fake(**kw):  # like evaluate: the folder exists once the input was accepted
        calls.append(kw)
        Path(kw["out_dir"]).mkdir(parents=True, exist_ok=True)
        return {"summary_md": "", "computed": 0, "skipped": 0, "out_dir": kw["out_dir"]}

    monkeypatch.setattr(cli_evaluate, "evaluate", fake)
    return calls


def test_config_sets_options_and_the_command_line_wins(tmp_path, seen):
    cfg = tmp_path / "study.json"
    cfg.write_text(json.dumps({"methods": ["aieg:posnorm=relu_max", "heta:components=gate,information"], "n-steps": 50, "n": 7,
                               "pis": [0.1, 0.5], "ties": "first", "target_fn": "contrast", "no-progress": True}))
    assert cli.main(["evaluate", "--config", str(cfg), "--out", str(tmp_path / "a")]) == 0
    kw = seen[0]
    # a list of specs stays a list: joined at commas, the comma inside HETA's spec split it
    assert kw["methods"] == ["aieg:posnorm=relu_max", "heta:components=gate,information"] and kw["n_steps"] == 50 and kw["n"] == 7
    assert kw["pis"] == [0.1, 0.5] and kw["ties"] == "first" and kw["target_fn"] == "contrast" and kw["progress"] is False
    assert cli.main(["evaluate", "--config", str(cfg), "--n", "3", "--out", str(tmp_path / "b")]) == 0
    assert seen[1]["n"] == 3 and seen[1]["n_steps"] == 50  # the command line wins, the rest from the file
    assert cli.main(["evaluate", "--out", str(tmp_path / "c")]) == 0
    assert seen[2]["n"] == 20 and seen[2]["n_steps"] == 20  # the parser's defaults are back after a --config run


def test_command_json_reruns_exactly_what_was_run(tmp_path, seen):
    out = tmp_path / "run"
    argv = ["evaluate", "--methods", "saliency,random", "--n", "5", "--topk-sweep", "0.1,0.2", "--seed", "3",
            "--soft-maps", "relu", "--out", str(out)]
    assert cli.main(argv) == 0
    written = json.loads((out / "command.json").read_text())
    assert written["command"] == "evaluate" and written["n"] == 5 and written["topk-sweep"] == [0.1, 0.2]
    assert cli.main(["evaluate", "--config", str(out / "command.json")]) == 0
    assert seen[1] == seen[0]


@pytest.mark.parametrize("content, match", [
    ("not json", "cannot read a JSON object"),
    ("[1, 2]", "expected a JSON object"),
    ('{"n-stepz": 5}', "'n-stepz' is not an option"),
    ('{"ties": "last"}', "'ties' must be one of"),
    ('{"command": "explain"}', "written for `aieg-fast explain`"),
    ('{"teacher-forced": "false"}', "'teacher-forced' is a switch: give true or false (a JSON boolean), got 'false'"),
    # argparse's own message named only the flag ("argument --n/--n-examples: invalid int value: 'two'")
    ('{"n": "two"}', "'n': invalid literal for int() with base 10: 'two' (got 'two')"),
    ('{"pis": "a,b"}', "'pis': expected comma-separated fractions, got 'a,b'"),
])
def test_bad_config_is_refused_before_any_work(tmp_path, seen, capsys, content, match):
    cfg = tmp_path / "bad.json"
    cfg.write_text(content)
    assert cli.main(["evaluate", "--config", str(cfg), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "--config" in err and match in err
    assert seen == [] and not (tmp_path / "x").exists()


def test_refused_input_leaves_no_folder(tmp_path):
    """The real evaluate refuses an unknown method before it makes the folder: no command.json."""
    out = tmp_path / "never"
    assert cli.main(["evaluate", "--methods", "no_such_method", "--out", str(out)]) == 2
    assert not out.exists()


def test_empty_out_and_missing_file_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["evaluate", "--methods", "saliency", "--out", ""]) == 2
    assert "--out is empty" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
    assert cli.main(["evaluate", "--dataset", "nope.jsonl", "--out", "run"]) == 2
    err = capsys.readouterr().err
    assert "--dataset 'nope.jsonl': no such file" in err and "note:" not in err
    (tmp_path / "dir.jsonl").mkdir()
    assert cli.main(["evaluate", "--dataset", "dir.jsonl", "--out", "run"]) == 2
    assert "--dataset 'dir.jsonl' is a folder, not a file" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_a_training_set_is_not_an_evaluation_dataset(tmp_path, capsys, monkeypatch):
    """sst2-train / boolq-train are registered for training only: evaluate refuses them by name,
    before any model is loaded or folder written."""
    monkeypatch.chdir(tmp_path)
    for name in ("sst2-train", "boolq-train"):
        assert cli.main(["evaluate", "--dataset", name, "--out", "run"]) == 2
        err = capsys.readouterr().err
        assert "--dataset must be one of" in err and repr(name) in err and "boolq-heldout" in err
    assert list(tmp_path.iterdir()) == []


def test_command_json_resumes_a_run_given_relative_paths(tiny_gpt2_dir, tmp_path, monkeypatch, capsys):
    """A run whose model and data file were given as relative paths is resumed by --config
    OUT/command.json (which holds them as absolute paths) from the folder it was started in; a
    rerun with other settings is refused naming the recorded and the new value."""
    import shutil

    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(tiny_gpt2_dir, work / "model")
    (work / "data.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n"
                                             for t, y in [("the movie is good", 1), ("bad and slow", 0)]))
    monkeypatch.chdir(work)
    argv = ["evaluate", "--model", "model", "--dataset", "data.jsonl", "--label-field", "label", "--labels", " bad", " good",
            "--template", "{text} :", "--methods", "saliency,random", "--metrics", "hard", "--n-steps", "2", "--n", "2",
            "--out", "evb", "--no-progress"]
    assert cli.main(argv) == 0
    written = json.loads((work / "evb" / "command.json").read_text())
    assert written["model"] == str(work / "model") and written["dataset"] == str(work / "data.jsonl")
    capsys.readouterr()
    assert cli.main(["evaluate", "--config", str(work / "evb" / "command.json")]) == 0
    assert "computed 0 example(s)" in capsys.readouterr().out
    # from another folder the recorded relative paths name other files: refused (before the model
    # loads, on the dataset), both values named
    monkeypatch.chdir(tmp_path)
    assert cli.main(["evaluate", "--config", str(work / "evb" / "command.json")]) == 2
    assert "(dataset: 'data.jsonl' recorded, " in capsys.readouterr().err
    monkeypatch.chdir(work)
    assert cli.main([*argv, "--seed", "5"]) == 2
    assert "other settings (--seed: 0 recorded, 5 now)" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["evaluate", "train-nano", "train-sentiment"])
def test_help_names_each_default_once(cmd, capsys):
    """--help gives a default once (not again after a help text that names one), leaves out
    "(default: None)" / "(default: False)", and writes list defaults as the option takes them."""
    with pytest.raises(SystemExit):
        cli.main([cmd, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in text and "(default: False)" not in text
    assert text.count("(default: float32)") <= 1 and "default: float32) (default" not in text
    if cmd == "evaluate":
        assert "(default: 1,3,5)" in text and "(default: [" not in text


def test_sigterm_stops_evaluate_as_ctrl_c_does(tiny_gpt2_dir, tmp_path):
    """A run stopped with SIGTERM (timeout, a scheduler, kill) says how to resume, exits 130 and
    leaves command.json, so --config OUT/command.json resumes it; the finished records are kept."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "aieg_fast.cli", "evaluate", "--model", str(tiny_gpt2_dir), "--dataset", "sst2-sample",
           "--labels", " bad", " good", "--template", "{text} :", "--methods", "integrated_gradients", "--n-steps", "400",
           "--metrics", "hard", "--n", "20", "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    deadline = time.time() + 120
    while not ((out / "records.jsonl").is_file() and (out / "records.jsonl").read_text().strip()) and time.time() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted (finished examples are kept in the records; rerun the same command to resume)" in err
    written = json.loads((out / "command.json").read_text())
    assert written["n"] == 20 and written["methods"] == "integrated_gradients"
    assert 1 <= len((out / "records.jsonl").read_text().splitlines()) < 20
