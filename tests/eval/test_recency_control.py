"""The recency control (scores rising with the position): its scores and top k, and every runner
(classification, generation per step, LongRA) accepts it as it accepts ``random``."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from aieg_fast.eval import evaluate, evaluate_generation, read_records
from aieg_fast.eval import generation_runner as G
from aieg_fast.eval.context import prepare
from aieg_fast.eval.metrics import CONTROLS, control_attribution, hard_metrics, random_attribution, recency_attribution
from aieg_fast.eval.scores import top_k_positions


def test_recency_scores_rise_over_attributable_positions_only(tiny_gpt2):
    a = tiny_gpt2.attribute("the movie is good and the actors are great", method="saliency",
                            template="Review: {text}\nSentiment:")
    r = recency_attribution(a)
    e = torch.tensor(a.attributable)
    n = int(e.sum())
    assert r.method == "recency" and r.degenerate == [] and r.token_ids == a.token_ids
    assert (r.scores[~e] == 0).all()
    torch.testing.assert_close(r.scores[e], torch.arange(1, n + 1, dtype=torch.float32) / n)
    # its top k are the k attributable tokens nearest the end, whatever the template after them
    top = sorted(top_k_positions(r.scores, e, 0.5, ties="first").tolist())
    assert top == e.nonzero().flatten().tolist()[-len(top):] and len(top) == int(n * 0.5)
    assert "recency" in CONTROLS
    assert torch.equal(control_attribution("recency", a).scores, r.scores)
    assert torch.equal(control_attribution("random", a, 3, "x").scores, random_attribution(a, 3, "x").scores)
    with pytest.raises(ValueError, match="control must be one of"):
        control_attribution("saliency", a)


def test_classification_run_records_the_control(tiny_gpt2, tmp_path):
    # the tiny tokenizer has no single-token label words: two token ids stand in
    res = evaluate(tiny_gpt2, dataset="sst2-sample", n=2, methods="saliency,recency", out_dir=tmp_path, n_steps=2,
                   metrics="hard", progress=False, plot=False, reference="saliency", labels=(10, 11),
                   template="{text} :", max_tokens=20)
    assert res["computed"] == 2 and "| recency |" in res["summary_md"]
    for line in (tmp_path / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        s = rec["methods"]["recency"]["scores"]
        kept = [v for v in s if v > 0]
        assert kept == sorted(kept) and len(kept) == rec["n_attributable"]
        assert "recency" not in json.loads((tmp_path / "methods.json").read_text())  # a control has no options


def test_generation_run_scores_the_control_per_step(tiny_gpt2, tmp_path):
    prompts = [{"id": "a", "prompt": "the movie is good and the actors"}]
    evaluate_generation(tiny_gpt2, prompts, methods="recency", n_new_tokens=3, n_steps=2, metrics="hard",
                        progress=False, plot=False, out_dir=tmp_path, seed=4)
    rec = read_records(tmp_path / "records.jsonl")["a"]
    views = G.step_views(tiny_gpt2, rec["prompt"], rec["generated_ids"])
    for t, v in enumerate(views):
        ctx = prepare(tiny_gpt2, v, prob_space="vocab", seed=4, instance_id=f"a#{t}")
        want = hard_metrics(tiny_gpt2, recency_attribution(v), ctx=ctx)["log_odds"]
        assert rec["methods"]["recency"]["steps"][t]["log_odds"] == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("seed", ["a", -1, 1.5, True, None])
def test_controls_refuse_a_seed_as_prepare_does(tiny_gpt2, seed):
    """random_attribution(seed='a') raised "invalid literal for int()" without naming seed, and
    seed=-1 was accepted (prepare refuses it)."""
    a = tiny_gpt2.attribute("the movie is good", method="saliency")
    for call in (lambda: random_attribution(a, seed=seed), lambda: control_attribution("random", a, seed),
                 lambda: control_attribution("recency", a, seed), lambda: prepare(tiny_gpt2, a, seed=seed)):
        with pytest.raises(ValueError, match=rf"^seed must be an int >= 0, got {seed!r}$"):
            call()


def test_a_numpy_or_tensor_seed_is_the_int_it_holds(tiny_gpt2):
    """random_attribution(seed=torch.tensor(3)) was refused ("must be an int") where the
    attribution calls take it."""
    a = tiny_gpt2.attribute("the movie is good", method="saliency")
    want = random_attribution(a, seed=3)
    for seed in (np.int64(3), torch.tensor(3)):
        got = random_attribution(a, seed=seed)
        assert torch.equal(got.scores, want.scores) and got.options["seed"] == 3 and type(got.options["seed"]) is int


@pytest.mark.parametrize("control", ["random", "recency"])
def test_a_control_is_scored_in_its_results_probability_space(tiny_llama, control):
    """A control of a label_logprob result is scored over the label words, as the result is: the
    control dropped the result's target_fn and label set, so its metrics were read over the
    whole vocabulary (p 0.006 beside the method's 0.52 on the same input)."""
    r = tiny_llama.attribute("the movie is good", method="saliency", template="Review: {text}\nAnswer:",
                             target_fn="label_logprob", label_set=[" good", " bad"])
    c = control_attribution(control, r, seed=0)
    assert c.options["target_fn"] == "label_logprob" and c.options["label_set"] == [" good", " bad"]
    assert hard_metrics(tiny_llama, c)["p"] == pytest.approx(hard_metrics(tiny_llama, r)["p"])
    assert hard_metrics(tiny_llama, c)["p"] == pytest.approx(hard_metrics(tiny_llama, c, ctx=prepare(tiny_llama, r))["p"])
