"""benchmarks/: bad arguments are argparse errors (exit 2) before any model is loaded, and the
shared header names the machine and the command."""
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name):
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_machine_header(capsys):
    machine = _load("machine")
    info = machine.print_header(["--runs", "1"], script=str(BENCH / "bench_x.py"))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# machine: ") and "cores" in out[0] and "torch" in out[0]
    assert out[1].startswith("# command: python ") and out[1].endswith("bench_x.py --runs 1")
    assert {"cpu", "cores", "torch", "transformers", "threads"} <= set(info)


@pytest.mark.parametrize("argv", [
    ["--tools", "ours,nosuch"], ["--models", "gpt5"], ["--methods", "ig,shap"], ["--quick", "--n-steps", "5"],
    ["--quick", "--lengths", "128"],
])
def test_bench_peers_refuses(argv, capsys):
    with pytest.raises(SystemExit) as e:
        _load("bench_peers").main(argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--dtypes", "fp32"], ["--ops", "nosuch"], ["--device", "tpu"]])
def test_bench_ops_refuses(argv, capsys):
    with pytest.raises(SystemExit) as e:
        _load("bench_ops").main(argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_eval_precision_one_example_has_no_interval():
    """bench_eval_precision on folders sharing one example says there is no interval (it printed
    "[+nan, +nan]"); with the 17 examples of the stored bfloat16 check it gives intervals."""
    compare = _load("bench_eval_precision").compare
    one = BENCH / "faithfulness" / "boolq_bf16_time_50"
    md = compare(one / "float32", one / "bfloat16")
    assert "nan" not in md and "(no interval: fewer than 2 finite differences)" in md
    many = BENCH / "faithfulness" / "boolq_bf16_check"
    md = compare(many / "float32", many / "bfloat16")
    assert "nan" not in md and "no interval" not in md and "[" in md


def test_boolq_report_splits_the_run_by_seen_passages(tmp_path, capsys):
    """benchmarks/boolq_report.py writes the package's summary of BoolQ run 5's records twice:
    all of them, and those whose passage is not a training passage (the split of
    boolq_passage_overlap.py); it refuses a folder of another dataset."""
    import shutil

    archive = BENCH / "faithfulness" / "boolq_heldout_ft" / "records.jsonl.gz"
    run = tmp_path / "run"
    _load("archive_records").restore(archive, run)
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    (run / "records.jsonl").write_text("".join(lines[:12]))  # the first 12 questions: a bounded test as the run grows
    report = _load("boolq_report")
    report.main([str(run), "--out", str(tmp_path / "rep")])
    ids = [r["id"] for r in report.run_records(run)]
    shared, _ = _load("boolq_passage_overlap").parts()
    seen = {r["id"] for r in shared}
    for name, n in (("all", len(ids)), ("unseen_passages", sum(i not in seen for i in ids))):
        md = (tmp_path / "rep" / name / "summary.md").read_text()
        assert f"n = {n} examples" in md and "| integrated_gradients |" in md
    assert 0 < sum(i not in seen for i in ids) < len(ids)
    other = tmp_path / "other"
    shutil.copytree(run, other)
    (other / "config.json").write_text((other / "config.json").read_text().replace('"boolq-heldout"', '"sst2-dev"'))
    with pytest.raises(SystemExit):
        report.main([str(other), "--out", str(tmp_path / "rep2")])
    assert "not boolq-heldout" in capsys.readouterr().err
