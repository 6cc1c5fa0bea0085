"""Faithfulness metrics (aieg_fast.metrics) and the evaluate driver, on the tiny random models."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from aieg_fast import metrics as M
from aieg_fast.attribution import _model_prepared

TEMPLATE = "Review: {text} Answer:"
TEXT = "the movie is good and the actors are great"


@pytest.fixture(scope="module")
def attrs(tiny_gpt2, tiny_llama):
    out = {}
    for name, ex in (("gpt2", tiny_gpt2), ("llama", tiny_llama)):
        out[name] = ex.attribute(TEXT, method="input_x_gradient", template=TEMPLATE)
    return out


@pytest.fixture(params=["gpt2", "llama"])
def case(request, tiny_gpt2, tiny_llama, attrs):
    ex = tiny_gpt2 if request.param == "gpt2" else tiny_llama
    return ex, attrs[request.param]


def _p_direct(ex, ids, target):
    """p(target | ids) from a plain, unbatched forward of the whole model on input_ids."""
    with _model_prepared(ex.model), torch.no_grad():
        logits = ex.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    return float(torch.softmax(logits, -1)[target])


def _with_scores(attr, scores):
    return dataclasses.replace(attr, scores=torch.as_tensor(scores, dtype=torch.float32))


# ------------------------------------------------------------------ hard metrics
def test_hard_metrics_match_direct_forward(case):
    ex, a = case
    L = len(a.token_ids)
    elig = [i for i in range(L) if a.attributable[i]]
    # hand-made scores: the two chosen positions get the largest scores, template/BOS a huge one
    # (must be ignored because they are not attributable)
    s = torch.zeros(L)
    s[elig[1]], s[elig[3]] = 5.0, 4.0
    for i in range(L):
        if not a.attributable[i]:
            s[i] = 100.0
    a2 = _with_scores(a, s)
    topk = 2 / len(elig) + 1e-6
    h = M.hard_metrics(ex, a2, topk)
    assert h["k"] == 2
    y = a.target["id"]
    ids = list(a.token_ids)
    p = _p_direct(ex, ids, y)
    lo_ids = [ex.ref_token_id if i in (elig[1], elig[3]) else t for i, t in enumerate(ids)]
    comp_ids = [t for i, t in enumerate(ids) if i not in (elig[1], elig[3])]
    suff_ids = [t for i, t in enumerate(ids) if i in (elig[1], elig[3]) or not a.attributable[i]]
    assert h["p"] == pytest.approx(p, rel=1e-4, abs=1e-7)
    assert h["log_odds"] == pytest.approx(math.log(_p_direct(ex, lo_ids, y)) - math.log(p), abs=1e-4)
    assert h["comprehensiveness"] == pytest.approx(p - _p_direct(ex, comp_ids, y), abs=1e-6)
    assert h["sufficiency"] == pytest.approx(p - _p_direct(ex, suff_ids, y), abs=1e-6)
    # the single-metric wrappers agree
    assert M.comprehensiveness(ex, a2, topk) == pytest.approx(h["comprehensiveness"], abs=1e-7)


def test_topk_ties_lower_index_and_k_zero(case):
    ex, a = case
    cand = torch.tensor([False, True, True, True, True, True])
    idx = M.top_k_positions(torch.tensor([9.0, 1.0, 2.0, 2.0, 2.0, -1.0]), cand, topk=0.4)
    assert idx.tolist() == [2, 3]
    assert M.top_k_positions(torch.ones(6), cand, topk=0.1).numel() == 0
    # dig_compat counts every position and may pick a fixed one
    assert M.top_k_positions(torch.tensor([9.0, 1.0, 2.0, 2.0, 2.0, -1.0]), cand, 0.34, dig_compat=True).tolist() == [0, 2]
    h = M.hard_metrics(ex, a, topk=0.01)
    assert h["k"] == 0 and h["log_odds"] == h["comprehensiveness"] == h["sufficiency"] == 0.0


def test_classifier_uses_class_probability(tiny_gpt2_clf):
    ex = tiny_gpt2_clf
    a = ex.attribute(TEXT, method="saliency", target=1)
    h = M.hard_metrics(ex, a, 0.5)
    with _model_prepared(ex.model), torch.no_grad():
        logits = ex.model(input_ids=torch.tensor([a.token_ids])).logits[0].float()
    assert h["p"] == pytest.approx(float(torch.softmax(logits, -1)[1]), abs=1e-6)


def test_label_prob_space(case):
    ex, a = case
    other = (a.target["id"] + 1) % ex.vocab_size
    ctx = M.prepare(ex, a, prob_space="labels", label_ids=[a.target["id"], other])
    with _model_prepared(ex.model), torch.no_grad():
        lg = ex.model(input_ids=torch.tensor([a.token_ids])).logits[0, -1].float()
    assert ctx.p == pytest.approx(float(torch.softmax(lg[[a.target["id"], other]], -1)[0]), abs=1e-5)


# ------------------------------------------------------------------ π-Soft retention
@pytest.mark.parametrize("scores", [
    [3.0, 1.0, 0.0, 0.0, -2.0, 0.5, 7.0, 0.1],
    [1.0, 1.0, 1.0, 1.0],
    [0.0, 0.0, 0.0],
    [-1.0, -2.0, -3.0],
    [100.0, 0.0, 0.0, 0.0, 0.0],
    [1e-8, 2e-8, 5.0],
])
def test_retention_mean_is_pi(scores):
    s = torch.tensor(scores)
    pis = torch.tensor([0.0, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 1.0])
    R = M.retention_probs(s, pis)
    assert R.shape == (len(pis), len(scores))
    assert torch.allclose(R.mean(-1), pis.double(), atol=1e-9)
    assert (R >= 0).all() and (R <= 1 + 1e-12).all()
    # monotone in the score (among positive scores)
    pos = s.clamp_min(0)
    order = torch.argsort(pos)
    assert (R[:, order].diff(dim=-1) >= -1e-12).all()


def test_retention_random_vectors_and_eligible():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        n = int(torch.randint(2, 30, (1,), generator=g))
        s = torch.randn(n, generator=g) * 10 ** float(torch.randint(-3, 3, (1,), generator=g))
        e = torch.rand(n, generator=g) < 0.7
        e[0] = True
        pis = torch.rand(5, generator=g)
        R = M.retention_probs(s, pis, e)
        assert torch.allclose(R[:, e].mean(-1), pis.double(), atol=1e-9)
        assert (R[:, ~e] == 0).all()


def test_pi_soft_invariant_to_scaling(case):
    ex, a = case
    ctx = M.prepare(ex, a, seed=3, instance_id="x")
    pis = (0.2, 0.5, 0.8)
    r1 = M.pi_soft(ex, a, pis=pis, n_samples=2, ctx=ctx)
    r2 = M.pi_soft(ex, _with_scores(a, a.scores * 37.5), pis=pis, n_samples=2, ctx=ctx)
    for c in ("nc", "ns"):
        assert r1[c]["curve"] == pytest.approx(r2[c]["curve"], abs=1e-9, nan_ok=True)
        assert r1[c]["auc"] == pytest.approx(r2[c]["auc"], abs=1e-9, nan_ok=True)
    # soft (min-max) metrics are scale invariant too
    s1 = M.soft_metrics(ex, a, n_samples=2, ctx=ctx)
    s2 = M.soft_metrics(ex, _with_scores(a, a.scores * 0.01), n_samples=2, ctx=ctx)
    assert s1["soft_nc"] == pytest.approx(s2["soft_nc"], abs=1e-9, nan_ok=True)


def _forced_ctx(ex, a, p=0.6, p0=0.1, **kw):
    """A context whose p / p0 are set so the soft metrics are never degenerate on random weights."""
    ctx = M.prepare(ex, a, **kw)
    return dataclasses.replace(ctx, p=p, p0=p0)


def test_pi_soft_endpoints_auc_and_uniform(case):
    ex, a = case
    ctx = _forced_ctx(ex, a)
    pis = (0.25, 0.5, 0.75)
    r = M.pi_soft(ex, a, pis=pis, n_samples=2, ctx=ctx)
    for c, (left, right) in (("nc", (1.0, 0.0)), ("ns", (0.0, 1.0))):
        y = [left] + r[c]["curve"] + [right]
        x = [0.0] + list(pis) + [1.0]
        auc = sum((x[i + 1] - x[i]) * (y[i] + y[i + 1]) / 2 for i in range(len(x) - 1))
        assert r[c]["auc"] == pytest.approx(auc, abs=1e-12)
        assert 0 <= r[c]["auc"] <= 1
    u = M.pi_soft(ex, a, pis=pis, n_samples=2, uniform=True, ctx=ctx)
    # uniform retention ignores the scores entirely
    u2 = M.pi_soft(ex, _with_scores(a, torch.randn(len(a.token_ids))), pis=pis, n_samples=2, uniform=True, ctx=ctx)
    assert u["ns"]["curve"] == u2["ns"]["curve"]


def test_common_random_numbers_and_seed(case):
    ex, a = case
    ctx = _forced_ctx(ex, a, seed=1, instance_id=7)
    r1 = M.pi_soft(ex, a, pis=(0.5,), n_samples=3, ctx=ctx)
    r2 = M.pi_soft(ex, a, pis=(0.5,), n_samples=3, ctx=ctx)
    assert r1["ns"]["curve"] == r2["ns"]["curve"]
    # same draws for two methods whose keep probabilities coincide (here: both all-equal scores)
    b1 = M.soft_metrics(ex, _with_scores(a, torch.ones(len(a.token_ids))), n_samples=3, ctx=ctx)
    b2 = M.soft_metrics(ex, _with_scores(a, 2 * torch.ones(len(a.token_ids))), n_samples=3, ctx=ctx)
    assert b1 == b2


def test_degenerate_instance_gives_nan(case):
    ex, a = case
    ctx = _forced_ctx(ex, a, p=0.1, p0=0.2)
    assert ctx.degenerate
    s = M.soft_metrics(ex, a, ctx=ctx)
    assert s["degenerate"] and math.isnan(s["soft_nc"]) and math.isnan(s["soft_ns"])
    assert math.isnan(M.pi_soft(ex, a, pis=(0.5,), ctx=ctx)["nc"]["auc"])


def test_random_control(case):
    ex, a = case
    r1 = M.random_attribution(a, seed=0, instance_id="a")
    r2 = M.random_attribution(a, seed=0, instance_id="a")
    r3 = M.random_attribution(a, seed=0, instance_id="b")
    assert r1.method == "random"
    assert torch.equal(r1.scores, r2.scores) and not torch.equal(r1.scores, r3.scores)
    e = torch.tensor(a.attributable)
    assert (r1.scores[~e] == 0).all() and (r1.scores[e] > 0).all() and (r1.scores[e] < 1).all()
    out = M.evaluate_attribution(ex, r1, n_samples=1, pis=(0.5,))
    assert {"log_odds", "soft_nc", "pi_soft_ns_auc"} <= set(out)


def test_soft_keep_probability_one_and_zero(case):
    ex, a = case
    ctx = _forced_ctx(ex, a, p=0.9, p0=0.0)
    # keeping everything: p_k = p(y|x) (the real one); NS from the definition
    pk = M._soft_probs(ex, ctx, torch.ones(1, len(a.token_ids)), torch.rand(1, 2, *ctx.embeds.shape))
    p_true = M.prepare(ex, a).p
    assert torch.allclose(pk, torch.full_like(pk, p_true), atol=1e-6)


# ------------------------------------------------------------------ bad input
def test_bad_inputs_name_the_argument(case):
    ex, a = case
    with pytest.raises(ValueError, match="topk"):
        M.hard_metrics(ex, a, topk=0)
    with pytest.raises(ValueError, match="topk"):
        M.log_odds(ex, a, topk=1.5)
    with pytest.raises(ValueError, match="n_samples"):
        M.soft_metrics(ex, a, n_samples=0)
    with pytest.raises(ValueError, match="pis"):
        M.pi_soft(ex, a, pis=(0.5, 0.2))
    with pytest.raises(ValueError, match="pis"):
        M.pi_soft(ex, a, pis=(0.0, 0.5))
    with pytest.raises(ValueError, match="prob_space"):
        M.prepare(ex, a, prob_space="bogus")
    with pytest.raises(ValueError, match="label_ids"):
        M.prepare(ex, a, prob_space="labels")
    with pytest.raises(ValueError, match="normalise"):
        M.soft_metrics(ex, a, normalise="softmax2")
    with pytest.raises(ValueError, match="scores"):
        M.hard_metrics(ex, _with_scores(a, torch.zeros(len(a.token_ids) + 1)))
    with pytest.raises(ValueError, match="pi"):
        M.retention_probs(torch.ones(3), 1.5)
    with pytest.raises(TypeError, match="attr"):
        M.hard_metrics(ex, {"scores": [1.0]})
    other = ex.attribute("the film was bad , slow and boring", method="saliency", template=TEMPLATE)
    with pytest.raises(ValueError, match="ctx"):
        M.hard_metrics(ex, other, ctx=M.prepare(ex, a))


# ------------------------------------------------------------------ evaluate driver
def test_evaluate_resume(tiny_gpt2, tmp_path, monkeypatch):
    from aieg_fast import evaluate as E

    calls = []
    orig = E._one_example

    def counting(*args, **kw):
        calls.append(args[1])
        return orig(*args, **kw)

    monkeypatch.setattr(E, "_one_example", counting)
    # the tiny tokenizer has no single-token " negative"/" positive": two token ids stand in
    kw = dict(dataset="sst2-sample", methods="integrated_gradients,saliency,random", out_dir=tmp_path, n_steps=4,
              n_samples=1, pis=(0.5,), progress=False, plot=False, labels=(10, 11),
              template="{text} :", max_tokens=20)
    r1 = E.evaluate(tiny_gpt2, n=2, **kw)
    assert r1["computed"] == 2 and calls == ["sst2-sample:0", "sst2-sample:1"]
    r2 = E.evaluate(tiny_gpt2, n=4, **kw)
    assert r2["computed"] == 2 and r2["skipped"] == 2
    assert calls[2:] == ["sst2-sample:2", "sst2-sample:3"]
    lines = (tmp_path / "records.jsonl").read_text().strip().splitlines()
    assert len(lines) == 4
    recs = [json.loads(l) for l in lines]
    assert [r["id"] for r in recs] == [f"sst2-sample:{i}" for i in range(4)]
    assert set(recs[0]["methods"]) == {"integrated_gradients", "saliency", "random"}
    assert "uniform" in recs[0]["controls"]
    # summary files: one row per (method, metric) plus the uniform control's π rows
    csv_text = (tmp_path / "summary.csv").read_text()
    assert "saliency,comprehensiveness" in csv_text and "uniform,pi_soft_nc_auc" in csv_text
    assert "| saliency |" in (tmp_path / "summary.md").read_text()
    # a cut last line (interrupt while writing) is ignored and recomputed
    with open(tmp_path / "records.jsonl", "a") as fh:
        fh.write('{"id": "sst2-sample:4", "meth')
    r3 = E.evaluate(tiny_gpt2, n=5, **kw)
    assert r3["computed"] == 1
    # other settings in the same folder are refused
    with pytest.raises(ValueError, match="out_dir"):
        E.evaluate(tiny_gpt2, n=2, **dict(kw, n_samples=2))


def test_evaluate_bad_arguments(tiny_gpt2, tmp_path, monkeypatch):
    from aieg_fast import evaluate as E

    with pytest.raises(ValueError, match="dataset"):
        E.evaluate(tiny_gpt2, dataset="mnist", out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="methods"):
        E.evaluate(tiny_gpt2, methods="nope", out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="n must"):
        E.evaluate(tiny_gpt2, n=0, out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="max_tokens"):
        E.evaluate(tiny_gpt2, max_tokens=0, out_dir=tmp_path, progress=False)
    monkeypatch.delenv("AIEG_FAST_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="data-dir"):
        E.load_dataset("sst2-dev", data_dir=tmp_path / "missing")


def test_paired_test_and_bootstrap():
    from aieg_fast import evaluate as E

    p, name = E.paired_test([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0] * 6)
    assert p < 0.05 and name
    p, _ = E.paired_test([1.0, -1.0, 1.0, -1.0], [0.0] * 4)
    assert p > 0.5
    assert E.paired_test([1.0, 2.0], [1.0, 2.0])[0] == 1.0
    lo, hi = E.bootstrap_ci([1.0, 2.0, 3.0, 4.0])
    assert 1.0 <= lo < 2.5 < hi <= 4.0


def test_cli_evaluate_sample(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """The CLI subcommand runs on the shipped sample (model loading patched to the tiny model)."""
    from aieg_fast import attribution, cli

    from aieg_fast import evaluate as E

    monkeypatch.setattr(attribution, "load_model", lambda model=None, **kw: tiny_gpt2)
    monkeypatch.setattr(E, "SENTIMENT_LABELS", (10, 11))  # no single-token label words in the tiny vocabulary
    rc = cli.main(["evaluate", "--dataset", "sst2-sample", "--methods", "saliency,random", "--n", "1",
                   "--n-steps", "4", "--n-samples", "1", "--max-tokens", "8", "--out", str(tmp_path / "o"), "--no-progress"])
    assert rc == 0
    assert "| saliency |" in capsys.readouterr().out
    rc = cli.main(["evaluate", "--dataset", "imdb", "--data-dir", str(tmp_path / "none"), "--out", str(tmp_path / "p")])
    assert rc == 2
    assert "data-dir" in capsys.readouterr().err


# ------------------------------------------------------------------ method variants, k sweep, hard-only, classifier
def test_parse_method_spec():
    from aieg_fast.evaluate import parse_method_spec

    assert parse_method_spec("aieg") == ("aieg", {})
    assert parse_method_spec("aieg:ef_mode=none:n_pilot=4:adaptive=false") == (
        "aieg", {"ef_mode": "none", "n_pilot": 4, "adaptive": False})
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_method_spec("aieg:ef_mode")
    with pytest.raises(ValueError, match="empty"):
        parse_method_spec(":ef_mode=none")


def test_evaluate_variants_sweep_hard_only(tiny_gpt2, tmp_path):
    """A method spec with options runs that variant; the k sweep is stored and summarised."""
    from aieg_fast import evaluate as E

    variant = "aieg:ef_mode=none:posnorm=none"
    kw = dict(dataset="sst2-sample", methods=f"integrated_gradients,{variant},random", out_dir=tmp_path, n_steps=4,
              progress=False, labels=(10, 11), template="{text} :", max_tokens=20, metrics="hard",
              topk_sweep=(0.1, 0.2, 0.5))
    res = E.evaluate(tiny_gpt2, n=3, **kw)
    assert res["computed"] == 3 and res["plot"] is None
    text = (tmp_path / "records.jsonl").read_text()
    recs = [json.loads(l, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c} in records")) for l in text.splitlines()]
    r0 = recs[0]
    assert set(r0["methods"]) == {"integrated_gradients", variant, "random"}
    # the variant's scores are those of the method called with the options
    a = tiny_gpt2.attribute(r0["text"], method="aieg", target=r0["target"], template="{text} :", n_steps=4,
                            ef_mode="none", posnorm="none")
    assert r0["methods"][variant]["scores"] == pytest.approx(a.scores.tolist(), rel=1e-5, abs=1e-7)
    ref = tiny_gpt2.attribute(r0["text"], method="aieg", target=r0["target"], template="{text} :", n_steps=4)
    assert r0["methods"][variant]["scores"] != pytest.approx(ref.scores.tolist(), rel=1e-3)
    # hard-only: no soft metrics, no uniform control; the sweep entry at the main k equals the main metrics
    m = r0["methods"]["integrated_gradients"]
    assert "soft_nc" not in m and "pi_soft_nc_auc" not in m and "uniform" not in r0["controls"]
    assert set(m["topk_sweep"]) == {"0.1", "0.2", "0.5"}
    assert m["topk_sweep"]["0.2"]["comprehensiveness"] == m["comprehensiveness"]
    assert m["topk_sweep"]["0.5"]["k"] >= m["topk_sweep"]["0.1"]["k"]
    # a sweep value equals a direct hard-metric call at that k
    b = tiny_gpt2.attribute(r0["text"], method="integrated_gradients", target=r0["target"], template="{text} :", n_steps=4)
    ctx = M.prepare(tiny_gpt2, b, prob_space="vocab", seed=0, instance_id=r0["id"])
    h = M.hard_metrics(tiny_gpt2, b, 0.5, ctx=ctx)
    assert m["topk_sweep"]["0.5"]["log_odds"] == pytest.approx(h["log_odds"], rel=1e-5, abs=1e-7)
    md = (tmp_path / "summary.md").read_text()
    assert "Top-k sweep" in md and f"| {variant} |" in md and "soft_nc" not in md
    rows = (tmp_path / "summary_topk.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 3 * 3  # header + methods × k × metrics
    with pytest.raises(ValueError, match="topk"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, out_dir=tmp_path / "b", topk_sweep=(0.0,)))
    with pytest.raises(ValueError, match="metrics"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, out_dir=tmp_path / "c", metrics="soft"))
    # paired tests against another method (e.g. the full AIEG for an ablation table)
    res2 = E.evaluate(tiny_gpt2, n=3, **dict(kw, reference=variant))
    assert res2["computed"] == 0
    assert f"paired test against {variant}" in res2["summary_md"]
    rows = {(r["method"], r["metric"]): r for r in res2["rows"]}
    assert rows[("integrated_gradients", "log_odds")]["reference"] == variant
    assert math.isnan(rows[(variant, "log_odds")]["p_vs_reference"])
    with pytest.raises(ValueError, match="reference"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, reference="saliency"))
    with pytest.raises(ValueError, match="unknown option"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, out_dir=tmp_path / "e", methods="aieg:ef_mod=none"))


def test_json_safe_records():
    from aieg_fast.evaluate import _json_safe

    rec = {"a": float("nan"), "b": [1.0, float("inf"), {"c": float("-inf")}], "d": "x", "e": 2}
    out = json.dumps(_json_safe(rec), allow_nan=False)
    assert json.loads(out) == {"a": None, "b": [1.0, None, {"c": None}], "d": "x", "e": 2}


def test_evaluate_classifier_defaults(tiny_gpt2_clf, tmp_path):
    """A classification head: no prompt, classes 0/1 as labels, class probability as p."""
    from aieg_fast import evaluate as E

    res = E.evaluate(tiny_gpt2_clf, dataset="sst2-sample", n=2, methods="saliency,random", out_dir=tmp_path, n_steps=2,
                     n_samples=1, pis=(0.5,), progress=False, plot=False, max_tokens=20)
    assert res["computed"] == 2
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["template"] is None and cfg["labels"] == [0, 1]
    r = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])
    with torch.no_grad():
        ids = tiny_gpt2_clf.encode(r["text"])[0]
        probs = torch.softmax(tiny_gpt2_clf.model(torch.tensor([ids])).logits[0].double(), -1)
    assert r["label_probs"] == pytest.approx(probs.tolist(), rel=1e-5)
    assert r["target"] == int(probs.argmax()) and r["p"] == pytest.approx(float(probs.max()), rel=1e-4)


def test_evaluate_shards_merge(tiny_gpt2, tmp_path):
    """Two shards (start=…) concatenated give the records and summary of one run."""
    from aieg_fast import evaluate as E

    kw = dict(dataset="sst2-sample", methods="saliency,random", n_steps=2, n_samples=1, pis=(0.5,), progress=False,
              plot=False, labels=(10, 11), template="{text} :", max_tokens=20)
    E.evaluate(tiny_gpt2, n=2, out_dir=tmp_path / "a", **kw)
    rb = E.evaluate(tiny_gpt2, n=4, start=2, out_dir=tmp_path / "b", **kw)
    assert rb["computed"] == 2 and rb["skipped"] == 0
    ids_b = [json.loads(l)["id"] for l in (tmp_path / "b" / "records.jsonl").read_text().splitlines()]
    assert ids_b == ["sst2-sample:2", "sst2-sample:3"]
    with open(tmp_path / "a" / "records.jsonl", "a") as fh:
        fh.write((tmp_path / "b" / "records.jsonl").read_text())
    merged = E.evaluate(tiny_gpt2, n=4, out_dir=tmp_path / "a", **kw)
    assert merged["computed"] == 0
    whole = E.evaluate(tiny_gpt2, n=4, out_dir=tmp_path / "c", **kw)
    key = lambda rows: {(r["method"], r["metric"]): (r["n"], r["mean"]) for r in rows}  # noqa: E731
    assert key(merged["rows"]).keys() == key(whole["rows"]).keys()
    for (m, k), (n, mean) in key(whole["rows"]).items():
        n2, mean2 = key(merged["rows"])[(m, k)]
        assert n2 == n and (mean2 == pytest.approx(mean, rel=1e-6, abs=1e-9) or (math.isnan(mean) and math.isnan(mean2)))
    with pytest.raises(ValueError, match="start"):
        E.evaluate(tiny_gpt2, n=2, start=2, out_dir=tmp_path / "d", **kw)


def test_shipped_datasets(monkeypatch, tmp_path, capsys):
    """Without a data folder the shipped copies are used, and they are the documented files."""
    import hashlib

    from aieg_fast import evaluate as E

    monkeypatch.delenv("AIEG_FAST_DATA", raising=False)
    readme = (E.Path(E.__file__).parent / "data" / "README.md").read_text()
    for name, rows in (("sst2-dev", 872), ("sst2-test", 1821), ("imdb", 200)):
        path = E.dataset_path(name)
        assert path.parent.name == "data" and path.name == E.SHIPPED[name]
        assert hashlib.sha256(path.read_bytes()).hexdigest() in readme
        data = E.load_dataset(name)
        assert len(data) == rows and {l for _, l in data} == {0, 1}
    imdb = E.load_dataset("imdb")
    assert sum(l for _, l in imdb) == 100 and [l for _, l in imdb[:4]] == [0, 1, 0, 1]
    with pytest.raises(FileNotFoundError, match="data-dir"):
        E.dataset_path("imdb", data_dir=tmp_path)


def test_evaluate_input_errors_before_work(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """Bad --start / --out / --topk-sweep / duplicate options fail with the argument named."""
    from aieg_fast import cli
    from aieg_fast import evaluate as E
    from aieg_fast.evaluate import parse_method_spec

    kw = dict(dataset="sst2-sample", methods="saliency", n_steps=2, progress=False, labels=(10, 11), template="{text} :")
    with pytest.raises(ValueError, match="start must be below the number of examples"):
        E.evaluate(tiny_gpt2, n=100, start=30, out_dir=tmp_path / "a", **kw)  # the sample has 24
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    with pytest.raises(ValueError, match="out_dir"):
        E.evaluate(tiny_gpt2, n=1, out_dir=afile / "sub", **kw)
    with pytest.raises(ValueError, match="topk_sweep"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "b", topk_sweep=(0.1, 1.5), **kw)
    with pytest.raises(ValueError, match="n_steps"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "c", **dict(kw, n_steps=0))
    with pytest.raises(ValueError, match="twice"):
        parse_method_spec("aieg:attn_layers=none:attn_layers=last")
    with pytest.raises(ValueError, match="methods: 'aieg:ef_mode=bogus'"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "d", **dict(kw, methods="aieg:ef_mode=bogus"))

    def interrupted(**_):
        raise KeyboardInterrupt

    monkeypatch.setattr(E, "evaluate", interrupted)
    rc = cli.main(["evaluate", "--dataset", "sst2-sample", "--out", str(tmp_path / "e")])
    assert rc == 130 and "rerun the same command to resume" in capsys.readouterr().err
