"""benchmarks/position_check.py: where the top token sits, on hand-built records where the answer
is known; and the position controls, which must give a generation run's own hard metrics back
and move the first token into / out of the top k."""
import dataclasses
import gzip
import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

from aieg_fast.eval import evaluate_generation, read_records
from aieg_fast.eval.context import prepare
from aieg_fast.eval.generation_runner import step_views
from aieg_fast.eval.metrics import random_attribution
from aieg_fast.eval.scores import top_k_positions

_SPEC = importlib.util.spec_from_file_location(
    "position_check", Path(__file__).resolve().parents[2] / "benchmarks" / "position_check.py")
position_check = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(position_check)


def test_top_counts_first_and_last_attributable_positions(tmp_path, capsys):
    records = [
        # a generation record split over two lines (head, then one method), two steps; None marks
        # positions that are not attributable (padding after the step's context)
        {"id": "a", "steps": [{}, {}], "methods": {}},
        {"id": "a", "methods": {"m": {"scores": [[0.9, 0.1, 0.2, None], [0.1, 0.2, 0.3, 0.8]]}}},
        # a classification record whose first position is a template token; a control without scores
        {"id": "b", "methods": {"m": {"scores": [None, 0.5, 0.1, 0.2]}, "random": {"log_odds": 0.0}}},
    ]
    path = tmp_path / "records.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    position_check.main(["top", str(path)])
    out = capsys.readouterr().out
    # rows: step 0 (top first), step 1 (top last), example b (top = its first attributable)
    # top 20 %: k = 0 for the 3- and 4-token rows (left out), so no share among the last
    assert "| m | 3 | 0.67 | 0.33 | nan |" in out
    assert "random" not in out


def test_top_ties_go_to_the_earlier_position():
    recs = {"x": {"id": "x", "methods": {"m": {"scores": [0.5, 0.1, 0.5]}}}}
    n, first, last, recent = position_check.top_positions(recs)["m"]
    assert (n, first, last) == (1, 1.0, 0.0) and math.isnan(recent)  # k = int(3 · 0.2) = 0


def test_top_share_of_the_top_k_among_the_last_k():
    # 10 attributable tokens, k = 2: top two are positions 9 and 2 -> one of the last two (8, 9)
    row = [0.0] * 10
    row[9], row[2] = 1.0, 0.9
    recs = {"x": {"id": "x", "methods": {"m": {"scores": [None] + row}}}}
    assert position_check.top_positions(recs)["m"] == pytest.approx((1, 0.0, 1.0, 0.5))


PROMPTS = [{"id": "a", "prompt": "the movie is good and the actors"},
           {"id": "b", "prompt": "the actors are great and the movie is"}]


def test_controls_methods_split_as_evaluate_splits_them(tmp_path, monkeypatch):
    """--methods names specs as in the records, split as evaluate splits them: a JSON value's
    comma (aieg:attn_layers=[0,1], evaluate takes it since split_method_specs) stays in its spec
    (split at every comma: "--methods: ['aieg:attn_layers=[0', '1]'] not in every record")."""
    import aieg_fast.explainer

    spec = 'aieg:attn_layers=[0,1]'
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps({"id": "a", "generated_ids": [1], "methods": {spec: {}, "saliency": {}}}) + "\n", encoding="utf-8")
    seen = {}
    monkeypatch.setattr(aieg_fast.explainer, "load_model", lambda *a, **k: None)
    monkeypatch.setattr(position_check, "controls", lambda ex, records, methods, **kw: seen.setdefault("m", methods) and {"x": {"c": 1.0}})
    position_check.main(["controls", str(path), "--methods", f"{spec},saliency"])
    assert seen["m"] == [spec, "saliency"]


def test_controls_give_the_run_back_and_move_the_first_token(tiny_gpt2, tmp_path):
    ex, out = tiny_gpt2, tmp_path / "g"
    evaluate_generation(ex, PROMPTS, methods="attention,saliency,random", n_new_tokens=3, n_steps=4, n_samples=2,
                        pis=(0.3, 0.7), soft_maps="relu", progress=False, plot=False, out_dir=out, seed=5)
    records = read_records(out / "records.jsonl")
    res = position_check.controls(ex, records, ["attention", "saliency"], seed=5, soft=((0.3, 0.7), 2))
    for m in ("attention", "saliency", "random"):
        for k in position_check.METRICS + ("pi_soft_nc_auc", "pi_soft_ns_auc"):
            want = sum(r["methods"][m][k] for r in records.values()) / len(records)
            assert res[m][k] == pytest.approx(want, abs=1e-6), (m, k)
    assert set(res) == {"attention", "attention − first", "saliency", "saliency − first", "random", "random + first",
                        "recency"}

    view = step_views(ex, PROMPTS[0]["prompt"], records["a"]["generated_ids"])[2]
    first = view.attributable.index(True)
    ctx = prepare(ex, view, prob_space="vocab", seed=5, instance_id="a#2")
    variants = position_check._step_variants(view, records["a"], 2, ["attention"], seed=5)

    def top(attr, k):
        return top_k_positions(attr.scores, ctx.eligible, k, False, ties="random", tie_seed=ctx.tie_seed).tolist()

    assert first in top(variants["random + first"], 0.2)
    assert first not in top(variants["attention − first"], 0.9)
    eligible = [i for i, e in enumerate(ctx.eligible.tolist()) if e]
    assert sorted(top(variants["recency"], 0.5)) == eligible[-len(top(variants["recency"], 0.5)):]
    torch.testing.assert_close(variants["random"].scores, random_attribution(view, 5, "a#2").scores)
    down = position_check._moved_first(dataclasses.replace(view, scores=torch.arange(len(view.token_ids), 0, -1.0)), False)
    assert down.scores[first] == down.scores.min() and (down.scores == down.scores.min()).sum() == 1
