"""``evaluate(target_fn="contrast")``: the methods explain z_pred − z_runner-up, and the metrics
score the probability of that decision, p(pred) over the predicted and the runner-up label
(over two labels, all of them); a tie between labels still gives a runner-up other than pred."""
from __future__ import annotations

import json

import pytest
import torch

import aieg_fast
from aieg_fast import eval as E
from builders import make_tiny_gpt2

KW = dict(dataset="sst2-sample", methods="saliency", n_steps=4, progress=False, template="{text} :", max_tokens=20, metrics="hard",
          target_fn="contrast", plot=False)


def _records(out):
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def test_over_three_labels_the_metrics_score_the_pair_explained(tiny_gpt2, tmp_path):
    E.evaluate(tiny_gpt2, n=3, out_dir=tmp_path / "three", labels=(10, 11, 12), **KW)
    for r in _records(tmp_path / "three"):
        lp = r["label_probs"]
        pair = lp[r["pred_label"]] / (lp[r["pred_label"]] + lp[[10, 11, 12].index(r["contrast"])])
        assert r["contrast"] != r["target"] and r["p"] == pytest.approx(pair, rel=1e-5)
        assert abs(r["p"] - max(lp)) > 1e-3  # not p(pred) over the three labels, which moves with the third label's logit too
    config = json.loads((tmp_path / "three" / "config.json").read_text())
    assert config["contrast_scored_over"] == "pair"
    assert "p is p(pred) over the predicted and the runner-up label" in (tmp_path / "three" / "summary.md").read_text()
    del config["contrast_scored_over"]  # a folder of three labels written before: its p was over the three, not mixed in
    (tmp_path / "three" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="contrast_scored_over"):
        E.evaluate(tiny_gpt2, n=4, out_dir=tmp_path / "three", labels=(10, 11, 12), **KW)
    E.evaluate(tiny_gpt2, n=2, out_dir=tmp_path / "two", labels=(10, 11), **KW)
    assert "contrast_scored_over" not in json.loads((tmp_path / "two" / "config.json").read_text())  # two labels: as before
    assert "runner-up label" not in (tmp_path / "two" / "summary.md").read_text()
    for r in _records(tmp_path / "two"):
        assert r["p"] == pytest.approx(max(r["label_probs"]), rel=1e-5)


def test_a_tie_between_the_labels_gives_a_runner_up_other_than_pred(tmp_path):
    m, t = make_tiny_gpt2()
    with torch.no_grad():  # GPT-2 ties its output head to the embeddings: equal rows, equal logits
        m.transformer.wte.weight[11] = m.transformer.wte.weight[10]
    ex = aieg_fast.load_model(m, t)
    E.evaluate(ex, n=1, out_dir=tmp_path / "tie", labels=(10, 11), **KW)
    r = _records(tmp_path / "tie")[0]
    assert r["label_probs"][0] == r["label_probs"][1]
    assert (r["target"], r["contrast"]) == (10, 11)  # the first label first, and the other as the runner-up
