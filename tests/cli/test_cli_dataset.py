"""aieg-fast attribute-dataset, the run commands on a full disk, and --device / --dtype / --device-map on the commands."""
from __future__ import annotations

import json
import re

import pytest
import torch

from aieg_fast import cli
from aieg_fast.cli import evaluate as cli_evaluate
from aieg_fast.dataset_attribution import RECORDS_FILE


def _csv(tmp_path):
    p = tmp_path / "reviews.csv"
    p.write_text("review,id\nthe movie is good,r1\n\"bad, slow and boring\",r2\ngreat,r3\n", encoding="utf-8")
    return p


def test_attribute_dataset_command(tiny_gpt2_dir, tmp_path, capsys):
    out = tmp_path / "o"
    args = ["attribute-dataset", str(_csv(tmp_path)), "--out", str(out), "--model", str(tiny_gpt2_dir), "--method", "saliency",
            "--text-column", "review", "--batch-size", "2", "--device", "cpu", "--dtype", "float32", "--no-progress"]
    assert cli.main(args) == 0
    said = capsys.readouterr().out
    assert "3 example(s): 3 computed now, 0 done before" in said and str(out / RECORDS_FILE) in said
    recs = [json.loads(line) for line in (out / RECORDS_FILE).read_text().splitlines()]
    assert [r["id"] for r in recs] == ["r1", "r2", "r3"] and recs[1]["example_text"] == "bad, slow and boring"
    assert cli.main(args) == 0
    assert "0 computed now, 3 done before" in capsys.readouterr().out


def test_a_tilde_after_an_equals_sign_is_the_home_folder(tiny_gpt2_dir, tmp_path, capsys, monkeypatch):
    """`--out=~/runs/o` (no shell expands a ~ after '=') made a folder named '~' in the working
    directory (whose `rm -rf ~` would take the home folder); `--dataset=~/...` was "no such file"."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    _csv(home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    assert cli.main(["attribute-dataset", "~/reviews.csv", "--out=~/runs/o", f"--model={tiny_gpt2_dir}", "--method", "saliency",
                     "--text-column", "review", "--no-progress"]) == 0
    assert (home / "runs" / "o" / RECORDS_FILE).is_file() and not (work / "~").exists()
    (home / "labelled.csv").write_text("review,label\nthe movie is good,1\nbad and boring,0\n", encoding="utf-8")
    assert cli.main(["evaluate", f"--model={tiny_gpt2_dir}", "--dataset=~/labelled.csv", "--text-field", "review",
                     "--label-field", "label", "--labels", " bad", " good", "--methods", "saliency", "--metrics", "hard",
                     "--n", "1", "--out=~/runs/e", "--no-progress"]) == 0
    assert (home / "runs" / "e" / "records.jsonl").is_file() and not (work / "~").exists()


def test_attribute_dataset_summary_names_each_kind_of_flag(tiny_gpt2_dir, tmp_path, capsys):
    """The summary counts the records of each flag kind and says what it means: an IG
    completeness caution is not a result "without usable signal" (the former line called every
    flagged record that)."""
    out = tmp_path / "o"
    assert cli.main(["attribute-dataset", str(_csv(tmp_path)), "--out", str(out), "--model", str(tiny_gpt2_dir), "--text-column", "review",
                     "--method", "integrated_gradients", "--n-steps", "2", "--baseline", "zero", "--no-progress"]) == 0
    said = capsys.readouterr().out
    recs = [json.loads(line) for line in (out / RECORDS_FILE).read_text().splitlines()]
    kinds = [{f["kind"] for f in r["degenerate"]} for r in recs]
    n = sum("completeness" in k for k in kinds)
    assert n >= 1 and all(k <= {"completeness"} for k in kinds), kinds  # two steps from zero: IG misses F(x) − F(x′)
    assert (f"{n} record(s) carry flags in their 'degenerate' field ({n} completeness: IG's completeness error above its limit "
            "(10 % of F(x) − F(x′), or the tolerance of n_steps='auto'))") in said
    assert "usable signal" not in said


def test_attribute_dataset_task_with_another_target_fn_takes_the_template_only(tiny_gpt2_dir, tmp_path, capsys):
    """--task with --target-fn logit explains each row's prediction in the task's template; it
    said "--label is used only with --target-fn 'label_logprob'", a --label the user never gave."""
    from aieg_fast.datasets import DATASETS, TASKS

    out = tmp_path / "o"
    assert cli.main(["attribute-dataset", str(_csv(tmp_path)), "--out", str(out), "--model", str(tiny_gpt2_dir), "--text-column", "review",
                     "--method", "saliency", "--task", "sentiment", "--target-fn", "logit", "--no-progress"]) == 0, capsys.readouterr().err
    recs = [json.loads(line) for line in (out / RECORDS_FILE).read_text().splitlines()]
    head = DATASETS[TASKS["sentiment"]].template.split("{text}")[0]
    assert len(recs) == 3 and all("".join(r["tokens"]).replace("Ġ", " ").startswith(head.strip()) for r in recs), recs[0]["tokens"]


@pytest.mark.parametrize("extra, match", [
    (["--device", "cpu", "--device-map", "auto"], "exclude each other"),
    (["--limit", "0"], "--limit must be a positive int"),
    (["--text-column", "body"], "--text-column 'body' is not a column"),
    (["--method", "saliency", "--n-steps", "5"], "--n-steps: method 'saliency' takes no path steps"),
    (["--option", "n_steps=3"], "--option 'n_steps=...': a setting of the call, not a method option; give it as --n-steps"),
    (["--option", "seed=3"], "--option 'seed=...': a setting of the call, not a method option; this command has no option for it"),
    (["--target-fn", "label_logprob", "--label", " yes"], "--label must hold at least 2 labels (log p is renormalised over them), got [' yes']"),
])
def test_attribute_dataset_bad_input_before_any_file(tiny_gpt2_dir, tmp_path, capsys, extra, match):
    out = tmp_path / "o"
    rc = cli.main(["attribute-dataset", str(_csv(tmp_path)), "--out", str(out), "--model", str(tiny_gpt2_dir),
                   "--text-column", "review", *extra])  # a repeated option: the last one counts
    assert rc == 2
    assert match in capsys.readouterr().err
    assert not out.exists()


def test_explain_device_and_dtype(tiny_gpt2_dir, tmp_path, capsys):
    res = tmp_path / "r.json"
    assert cli.main(["explain", "the movie is good", "--model", str(tiny_gpt2_dir), "--method", "saliency", "--device", "cpu",
                     "--dtype", "bfloat16", "--json", str(res), "--no-progress"]) == 0
    assert json.loads(res.read_text())["scores"]
    # --device is checked when parsed, before any file or model, and says what it takes
    for device, says in [("tpu9", "argument --device: device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'tpu9'")] + (
            [] if torch.cuda.is_available() else [("cuda", "argument --device: device 'cuda': CUDA is not available")]):
        for argv in (["explain", "x"], ["attribute-dataset", "d.jsonl", "--out", str(tmp_path / "o")], ["evaluate"]):
            with pytest.raises(SystemExit) as info:
                cli.main([*argv, "--model", str(tiny_gpt2_dir), "--device", device])
            assert info.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit):
        cli.main(["explain", "x", "--dtype", "int8"])


def test_evaluate_passes_device_dtype_device_map(tmp_path, monkeypatch):
    seen = []

    def fake(**kw):
        seen.append(kw)
        return {"summary_md": "", "computed": 0, "skipped": 0, "out_dir": kw["out_dir"]}

    monkeypatch.setattr(cli_evaluate, "evaluate", fake)
    assert cli.main(["evaluate", "--out", str(tmp_path / "a")]) == 0
    assert (seen[0]["device"], seen[0]["dtype"], seen[0]["device_map"]) == ("auto", "float32", None)
    assert cli.main(["evaluate", "--out", str(tmp_path / "b"), "--dtype", "bfloat16", "--device-map", "auto"]) == 0
    assert (seen[1]["device"], seen[1]["dtype"], seen[1]["device_map"]) == (None, "bfloat16", "auto")


def test_attribute_dataset_refusals_after_reading_leave_no_folder(tiny_gpt2_dir, tmp_path, capsys):
    """A target the tokenizer cannot make one token of is found after the model is loaded: the
    run is refused and the folder it had made is removed again."""
    data = tmp_path / "t.csv"
    data.write_text("text,target\nthe movie is,\" good\"\nit was,\" not one token\"\n", encoding="utf-8")
    out = tmp_path / "o"
    rc = cli.main(["attribute-dataset", str(data), "--out", str(out), "--model", str(tiny_gpt2_dir), "--method", "saliency",
                   "--target-column", "target", "--no-progress"])
    assert rc == 2 and "row 1" in capsys.readouterr().err
    assert not out.exists()


def test_attribute_dataset_other_settings_refused_before_loading(tiny_gpt2_dir, tmp_path, capsys, monkeypatch):
    from aieg_fast.dataset_attribution import runner

    out = tmp_path / "o"
    base = ["attribute-dataset", str(_csv(tmp_path)), "--out", str(out), "--model", str(tiny_gpt2_dir), "--text-column", "review",
            "--no-progress"]
    assert cli.main([*base, "--method", "saliency"]) == 0
    capsys.readouterr()

    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the folder's recorded settings were checked")

    monkeypatch.setattr(runner, "_explainer", refuse)
    assert cli.main([*base, "--method", "input_x_gradient"]) == 2
    assert "holds results with other settings (method: " in capsys.readouterr().err


def test_attribute_dataset_template_with_another_field_refused_before_any_file(tiny_gpt2_dir, tmp_path, capsys):
    """--template with a field besides {text}: refused before loading (every row was skipped,
    exit 0, and the corrected rerun refused as 'other settings')."""
    out = tmp_path / "o"
    rc = cli.main(["attribute-dataset", str(_csv(tmp_path)), "--out", str(out), "--model", str(tiny_gpt2_dir),
                   "--text-column", "review", "--template", "Q: {text} {other}", "--no-progress"])
    assert rc == 2 and "template names field(s) ['other']" in capsys.readouterr().err
    assert not out.exists()


def test_attribute_dataset_summary_does_not_count_a_skipped_row_as_computed(tiny_gpt2_dir, tmp_path, capsys):
    """One row attributed, one refused (longer than the model's 64 positions): the summary said
    "2 computed now" and then "1 skipped"."""
    p = tmp_path / "two.jsonl"
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["the movie is good", " ".join(["good"] * 80)]), encoding="utf-8")
    args = ["attribute-dataset", str(p), "--out", str(tmp_path / "o"), "--model", str(tiny_gpt2_dir), "--method", "saliency",
            "--no-progress"]
    assert cli.main(args) == 0
    said = capsys.readouterr().out
    assert "2 example(s): 1 computed now, 1 skipped now (input refused), 0 done before" in said
    assert "1 skipped in all, the model refused their text" in said
    assert cli.main(args) == 0
    said = capsys.readouterr().out
    assert "2 example(s): 0 computed now, 2 done before" in said and "1 skipped in all (1 by an earlier run)" in said


def test_attribute_dataset_every_example_refused_exits_1(tiny_gpt2_dir, tmp_path, capsys):
    """Every text refused by the model (longer than its 64 positions): the records say so and
    the command exits 1, as evaluate does (it exited 0)."""
    p = tmp_path / "long.jsonl"
    p.write_text("".join(json.dumps({"text": " ".join(["good"] * 80)}) + "\n" for _ in range(2)), encoding="utf-8")
    rc = cli.main(["attribute-dataset", str(p), "--out", str(tmp_path / "o"), "--model", str(tiny_gpt2_dir),
                   "--method", "saliency", "--no-progress"])
    said = capsys.readouterr()
    assert rc == 1 and "2 skipped" in said.out and "no example was attributed" in said.err


def test_column_options_take_either_name_in_both_commands():
    """evaluate names a file's columns --text-field / --id-field, attribute-dataset --text-column
    / --id-column: each command takes the other's name too (one was refused as unrecognized)."""
    p = cli.build_parser()
    ev = p.parse_args(["evaluate", "--text-column", "q", "--id-column", "k", "--target-column", "a"])
    assert (ev.text_field, ev.id_field, ev.target_field) == ("q", "k", "a")
    ad = p.parse_args(["attribute-dataset", "d.csv", "--out", "o", "--text-field", "q", "--id-field", "k", "--target-field", "t"])
    assert (ad.text_column, ad.id_column, ad.target_column) == ("q", "k", "t")
    assert ev.flags["text_field"] == "--text-field" and ad.flags["text_column"] == "--text-column"  # errors name each command's own


def test_attribute_dataset_auto_steps(tiny_gpt2_dir, tmp_path, capsys):
    """--n-steps auto (the message of a bad --n-steps offered it; the parser took ints only):
    integrated_gradients chooses its steps, recorded per example."""
    out = tmp_path / "o"
    args = ["attribute-dataset", str(_csv(tmp_path)), "--out", str(out), "--model", str(tiny_gpt2_dir), "--text-column", "review",
            "--method", "integrated_gradients", "--n-steps", "auto", "--limit", "1", "--no-progress"]
    assert cli.main(args) == 0
    rec = json.loads((out / RECORDS_FILE).read_text().splitlines()[0])
    assert json.loads((out / "config.json").read_text())["n_steps"] == "auto"
    assert rec["scores"] and "n_steps_used" in json.dumps(rec)


@pytest.fixture
def disk_full_after_first_record(monkeypatch):
    """Every fsync fails with ENOSPC (naming no file, as on a full disk) once the first batch of
    records of attribute-dataset or evaluate is written; ``monkeypatch.undo()`` frees the disk."""
    import errno
    import os

    from aieg_fast.dataset_attribution import runner as ad_runner
    from aieg_fast.eval import records as ev_records

    full, real_fsync = [], os.fsync

    def fsync(fd):
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    for module in (ad_runner, ev_records):
        def append(path, records, real=module.append_jsonl):
            real(path, records)
            full.append(path)

        monkeypatch.setattr(module, "append_jsonl", append)
    monkeypatch.setattr(os, "fsync", fsync)
    return monkeypatch


#: what a run command stopped by a full disk adds to the error
FULL = "(the disk is full: finished examples are kept in the records; free some space, then rerun the same command to resume)"


def test_a_full_disk_names_the_records_file_and_says_a_rerun_resumes(tiny_gpt2_dir, tmp_path, capsys, disk_full_after_first_record):
    """attribute-dataset printed only 'error: [Errno 28] No space left on device'."""
    out = tmp_path / "o"
    args = ["attribute-dataset", str(_csv(tmp_path)), "--out", str(out), "--model", str(tiny_gpt2_dir), "--text-column", "review",
            "--method", "saliency", "--batch-size", "1", "--no-progress"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"error: [Errno 28] No space left on device: '{out / RECORDS_FILE}' {FULL}" in err, err
    disk_full_after_first_record.undo()
    assert cli.main(args) == 0 and re.search(r"[12] done before", capsys.readouterr().out)  # the records written before the disk filled
    assert len((out / RECORDS_FILE).read_text().splitlines()) == 3


def test_evaluate_on_a_full_disk_reports_its_own_error_not_command_json(tiny_gpt2_dir, tmp_path, capsys, disk_full_after_first_record):
    """command.json, written on the way out, failed too and its error replaced the run's
    ('No space left on device: .../command.json', naming neither the records nor a rerun)."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": f"the movie is good {i}", "label": i % 2}) + "\n" for i in range(3)), encoding="utf-8")
    out = tmp_path / "ev"
    args = ["evaluate", "--model", str(tiny_gpt2_dir), "--dataset", str(data), "--label-field", "label", "--labels", " bad", " good",
            "--methods", "saliency", "--n", "3", "--metrics", "hard", "--out", str(out), "--no-progress"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"error: [Errno 28] No space left on device: '{out / 'records.jsonl'}' {FULL}" in err, err
    assert f"note: {out / 'command.json'} was not written (No space left on device)" in err, err
    disk_full_after_first_record.undo()
    assert cli.main(args) == 0 and (out / "command.json").is_file()
    assert re.search(r"[12] already complete", capsys.readouterr().out)


def test_other_system_errors_of_a_run_command_say_a_rerun_resumes(tmp_path, monkeypatch, capsys):
    """Once the folder holds records; an OSError before any (a file name too long, the data
    unreadable) has nothing to resume and gets no such words."""
    def stopped(**_):
        raise PermissionError(13, "Permission denied", str(tmp_path / "e" / "records.jsonl"))

    monkeypatch.setattr(cli_evaluate, "evaluate", stopped)
    assert cli.main(["evaluate", "--out", str(tmp_path / "e")]) == 2
    assert capsys.readouterr().err.strip() == f"error: [Errno 13] Permission denied: '{tmp_path / 'e' / 'records.jsonl'}'"
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "records.jsonl").write_text('{"id": "x"}\n', encoding="utf-8")
    assert cli.main(["evaluate", "--out", str(tmp_path / "e")]) == 2
    assert (f"error: [Errno 13] Permission denied: '{tmp_path / 'e' / 'records.jsonl'}' (finished examples are kept in the records; "
            "once that is fixed, rerun the same command to resume)") in capsys.readouterr().err
