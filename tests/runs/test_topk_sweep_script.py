"""benchmarks/topk_sweep.py: the k sweep computed afterwards from a run folder's stored scores
equals the sweep `evaluate` records when asked up front, and a folder whose recorded metrics the
script cannot reproduce is refused before anything is written."""
import csv
import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from aieg_fast.eval import evaluate
from aieg_fast.eval.records import read_records
from aieg_fast.eval.stats import summarise_topk

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "topk_sweep.py"


def _script():
    spec = importlib.util.spec_from_file_location("topk_sweep", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sweep_from_records_equals_the_recorded_sweep(tiny_gpt2_dir, tmp_path):
    kw = dict(dataset="sst2-sample", methods="integrated_gradients,saliency,random", n_steps=4, progress=False,
              labels=(10, 11), template="{text} :", max_tokens=20, metrics="hard", n=3, plot=False)
    evaluate(str(tiny_gpt2_dir), out_dir=tmp_path / "up_front", topk_sweep=(0.1, 0.2, 0.5), **kw)
    evaluate(str(tiny_gpt2_dir), out_dir=tmp_path / "plain", **kw)
    mod = _script()
    assert mod.main([str(tmp_path / "plain"), "--out", str(tmp_path / "after"), "--ks", "0.1,0.2,0.5", "--no-progress"]) == 0
    want, got = read_records(tmp_path / "up_front" / "records.jsonl"), read_records(tmp_path / "after" / "records.jsonl")
    assert set(got) == set(want) and len(got) == 3
    for eid, rec in want.items():
        for m, r in rec["methods"].items():
            sweep = got[eid]["methods"][m]["topk_sweep"]
            assert set(sweep) == {"0.1", "0.2", "0.5"}
            for k, h in r["topk_sweep"].items():
                for key in ("log_odds", "comprehensiveness", "sufficiency", "k"):
                    assert sweep[k][key] == pytest.approx(h[key], rel=1e-5, abs=1e-6), (eid, m, k, key)
    assert "Top-k sweep" in (tmp_path / "after" / "summary.md").read_text()
    assert json.loads((tmp_path / "after" / "config.json").read_text())["topk_sweep"] == [0.1, 0.2, 0.5]
    # the paired tests against the reference at each k are summary_topk.csv's columns
    rows = list(csv.DictReader((tmp_path / "after" / "summary_topk.csv").open()))
    assert len(rows) == 3 * 3 * 3 and not any(r["test"] for r in rows if r["method"] == "integrated_gradients")
    row = next(r for r in rows if (r["method"], r["topk"], r["metric"]) == ("saliency", "0.5", "comprehensiveness"))
    d = [g["methods"]["saliency"]["topk_sweep"]["0.5"]["comprehensiveness"]
         - g["methods"]["integrated_gradients"]["topk_sweep"]["0.5"]["comprehensiveness"] for g in got.values()]
    assert row["reference"] == "integrated_gradients" and float(row["mean_diff"]) == pytest.approx(sum(d) / 3)
    assert 0 <= float(row["p_vs_reference"]) <= 1
    with gzip.open(tmp_path / "after" / "topk_sweep.jsonl.gz", "rt") as f:
        slim = [json.loads(line) for line in f]
    methods = ["integrated_gradients", "saliency"]
    tests = [[r for r in summarise_topk(recs, methods, [0.5]) if r["method"] == "saliency"] for recs in (slim, list(got.values()))]
    assert tests[0] == tests[1] and len(tests[0]) == 3

    # a recorded metric the stored scores do not give: refused, naming record and method; nothing written
    lines = (tmp_path / "plain" / "records.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["methods"]["saliency"]["comprehensiveness"] += 0.5
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "records.jsonl").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    (tmp_path / "bad" / "config.json").write_text((tmp_path / "plain" / "config.json").read_text())
    with pytest.raises(ValueError, match="saliency.*does not reproduce"):
        mod.main([str(tmp_path / "bad"), "--out", str(tmp_path / "bad_out")])
    assert not (tmp_path / "bad_out").exists()
    with pytest.raises(SystemExit):  # an --out that holds files is refused
        mod.main([str(tmp_path / "plain"), "--out", str(tmp_path / "after")])
