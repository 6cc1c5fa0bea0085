"""Faithfulness metrics (aieg_fast.eval.metrics) on the tiny random models."""
from __future__ import annotations

import dataclasses
import math
import os

import pytest
import torch

from aieg_fast.core.model_state import model_prepared
from aieg_fast.eval import metrics as M
from aieg_fast.eval.context import step_attribution


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
    with model_prepared(ex.model), torch.no_grad():
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


def test_comprehensiveness_of_removing_every_token_is_nan(tiny_gpt2):
    """The tiny GPT-2 adds no BOS: top k = every token of a text without a template leaves
    comprehensiveness nothing to read. NaN (not the model's output on a padded empty row);
    log-odds and sufficiency are still computed, and the forward refuses an empty sequence."""
    from aieg_fast.eval.forwards import last_logits_ids

    ex = tiny_gpt2
    a = ex.attribute("good", method="saliency")
    assert all(a.attributable)  # no BOS, no template
    h = M.hard_metrics(ex, a, 1.0)
    y = a.target["id"]
    assert math.isnan(h["comprehensiveness"]) and math.isnan(h["p_comp"]) and h["k"] == len(a.token_ids)
    lo_ids = [ex.ref_token_id] * len(a.token_ids)
    assert h["p_log_odds"] == pytest.approx(_p_direct(ex, lo_ids, y), rel=1e-4)
    assert h["sufficiency"] == pytest.approx(h["p"] - _p_direct(ex, list(a.token_ids), y), abs=1e-6)
    with pytest.raises(ValueError, match=r"seqs: sequence\(s\) \[1\] are empty"):
        last_logits_ids(ex, [[5], []], 4)


def test_topk_ties_lower_index_and_k_zero(case):
    ex, a = case
    cand = torch.tensor([False, True, True, True, True, True])
    idx = M.top_k_positions(torch.tensor([9.0, 1.0, 2.0, 2.0, 2.0, -1.0]), cand, topk=0.4, ties="first")
    assert idx.tolist() == [2, 3]
    assert M.top_k_positions(torch.ones(6), cand, topk=0.1).numel() == 0
    # dig_compat counts every position and may pick a fixed one
    assert M.top_k_positions(torch.tensor([9.0, 1.0, 2.0, 2.0, 2.0, -1.0]), cand, 0.34, dig_compat=True,
                             ties="first").tolist() == [0, 2]
    h = M.hard_metrics(ex, a, topk=0.01)
    assert h["k"] == 0 and h["log_odds"] == h["comprehensiveness"] == h["sufficiency"] == 0.0


def test_topk_random_ties_reproducible_and_unbiased():
    """Equal scores are ordered by a permutation seeded with tie_seed: the same seed gives the same
    choice, and over many seeds every tied position is chosen about equally often (no pull
    towards early positions). Positions with distinct scores are chosen as before."""
    L = 10
    cand = torch.ones(L, dtype=torch.bool)
    tied = torch.ones(L)
    counts = torch.zeros(L)
    for seed in range(1000):
        idx = M.top_k_positions(tied, cand, topk=0.2, tie_seed=seed)
        assert idx.numel() == 2
        assert torch.equal(idx, M.top_k_positions(tied, cand, topk=0.2, tie_seed=seed))  # reproducible
        counts[idx] += 1
    # 2000 picks over 10 positions: 200 each expected (binomial sd ≈ 12.6)
    assert counts.sum() == 2000 and counts.min() >= 140 and counts.max() <= 260, counts
    assert 0.45 <= float(counts[: L // 2].sum() / counts.sum()) <= 0.55
    # the lower-index rule always takes positions 0 and 1
    assert M.top_k_positions(tied, cand, topk=0.2, ties="first").tolist() == [0, 1]
    # only equal scores are permuted: the largest comes first, the second from the tied 2.0s only
    s = torch.tensor([5.0, 2.0, 2.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0, -4.0])
    seconds = {int(M.top_k_positions(s, cand, 0.2, tie_seed=seed)[1]) for seed in range(50)}
    assert seconds == {1, 2, 3}
    assert all(int(M.top_k_positions(s, cand, 0.2, tie_seed=seed)[0]) == 0 for seed in range(50))
    distinct = torch.randn(L, generator=torch.Generator().manual_seed(0))
    assert torch.equal(M.top_k_positions(distinct, cand, 0.5, tie_seed=3), M.top_k_positions(distinct, cand, 0.5, ties="first"))


def test_hard_metrics_record_tie_seed(case):
    """hard_metrics draws the tie order from ctx.tie_seed (derived from seed and instance id) and
    returns it; with all scores equal the removed tokens are those of that order."""
    ex, a = case
    flat = _with_scores(a, torch.ones(len(a.token_ids)))
    c1 = M.prepare(ex, a, seed=0, instance_id="a")
    c2 = M.prepare(ex, a, seed=0, instance_id="b")
    assert c1.tie_seed == M.prepare(ex, a, seed=0, instance_id="a").tie_seed != c2.tie_seed
    h = M.hard_metrics(ex, flat, 0.5, ctx=c1)
    assert h["tie_seed"] == c1.tie_seed
    assert M.hard_metrics(ex, flat, 0.5, ctx=c1, ties="first")["tie_seed"] is None
    top = M.top_k_positions(flat.scores, c1.eligible, 0.5, tie_seed=c1.tie_seed).tolist()
    keep = [t for i, t in enumerate(a.token_ids) if i not in top]
    assert h["comprehensiveness"] == pytest.approx(c1.p - _p_direct(ex, keep, a.target["id"]), abs=1e-6)


def test_classifier_uses_class_probability(tiny_gpt2_clf):
    ex = tiny_gpt2_clf
    a = ex.attribute(TEXT, method="saliency", target=1)
    h = M.hard_metrics(ex, a, 0.5)
    with model_prepared(ex.model), torch.no_grad():
        logits = ex.model(input_ids=torch.tensor([a.token_ids])).logits[0].float()
    assert h["p"] == pytest.approx(float(torch.softmax(logits, -1)[1]), abs=1e-6)


def test_label_prob_space(case):
    ex, a = case
    other = (a.target["id"] + 1) % ex.vocab_size
    ctx = M.prepare(ex, a, prob_space="labels", label_ids=[a.target["id"], other])
    with model_prepared(ex.model), torch.no_grad():
        lg = ex.model(input_ids=torch.tensor([a.token_ids])).logits[0, -1].float()
    assert ctx.p == pytest.approx(float(torch.softmax(lg[[a.target["id"], other]], -1)[0]), abs=1e-5)


def test_prob_space_defaults_to_labels_for_label_tasks(case):
    ex, a = case
    other = (a.target["id"] + 1) % ex.vocab_size
    labels = [a.target["id"], other]
    ctx = M.prepare(ex, a, label_ids=labels)
    assert ctx.prob_space == "labels" and ctx.label_ids == labels
    assert ctx.p == pytest.approx(M.prepare(ex, a, prob_space="labels", label_ids=labels).p, abs=1e-9)
    plain = M.prepare(ex, a)
    assert plain.prob_space == "vocab" and plain.label_ids is None
    assert M.prepare(ex, a, prob_space="vocab", label_ids=labels).p == pytest.approx(plain.p, abs=1e-9)
    assert abs(ctx.p - plain.p) > 1e-6  # the two spaces are really different here


def test_a_contrast_attribution_is_scored_over_its_target_and_contrast(case):
    """A contrast attribution explains z_target − z_contrast, the log of p(target) over the two:
    the metrics score that by default, as evaluate --target-fn contrast does (they had scored
    p(target) over the whole vocabulary, another quantity, without a word)."""
    ex, a = case
    other = (a.target["id"] + 1) % ex.vocab_size
    rc = ex.attribute(TEXT, method="saliency", template=TEMPLATE, target=a.target["id"], contrast_target=other)
    ctx = M.prepare(ex, rc)
    assert ctx.prob_space == "labels" and ctx.label_ids == [a.target["id"], other]
    assert ctx.p == pytest.approx(M.prepare(ex, rc, label_ids=[a.target["id"], other]).p, abs=1e-12)
    assert M.hard_metrics(ex, rc) == M.hard_metrics(ex, rc, label_ids=[a.target["id"], other])
    vocab = M.prepare(ex, rc, prob_space="vocab")  # the whole vocabulary when asked for
    assert vocab.label_ids is None and abs(vocab.p - ctx.p) > 1e-6


@pytest.mark.parametrize("label_ids, error, match", [
    ([0, -1], ValueError, r"label_ids\[1\] must be an id in \[0, "),
    ([0, 10 ** 6], ValueError, r"label_ids\[1\] must be an id in \[0, "),
    ([0, 0], ValueError, "same output more than once"),
    ([0], ValueError, "at least 2"),
    ([], ValueError, "at least 2"),
    ([0, True], TypeError, r"label_ids\[1\] must be a token id"),
    ([0, 1.5], TypeError, r"label_ids\[1\] must be a token id"),
    ([0, " zzqx qqq"], ValueError, r"label_ids\[1\]: "),
    (" good", TypeError, "label_ids must be a list"),
])
def test_bad_label_ids_are_refused_naming_the_entry(case, label_ids, error, match):
    """label_ids of the metrics get evaluate's checks of labels: a -1 had silently been the last
    vocabulary id, an id past the vocabulary an IndexError, a repeat or a single label every
    metric 0, and an empty list the whole vocabulary."""
    ex, a = case
    ids = [a.target["id"] if isinstance(x, int) and not isinstance(x, bool) and x == 0 else x for x in label_ids] \
        if isinstance(label_ids, list) else label_ids
    with pytest.raises(error, match=match):
        M.hard_metrics(ex, a, label_ids=ids)


def test_a_multi_token_target_is_refused_saying_why(tiny_gpt2):
    r = tiny_gpt2.attribute("the movie is", method="saliency", target=" very good", target_fn="logprob")
    with pytest.raises(ValueError, match="multi-token target.*one next token's probability"):
        M.hard_metrics(tiny_gpt2, r)


def test_a_classifiers_class_indices_are_checked_against_its_classes(tiny_gpt2_clf):
    ex = tiny_gpt2_clf
    a = ex.attribute(TEXT, method="saliency")
    n = ex.adapter.num_labels
    assert M.prepare(ex, a, label_ids=[a.target["id"], (a.target["id"] + 1) % n]).prob_space == "labels"
    with pytest.raises(ValueError, match=rf"label_ids\[1\] must be an id in \[0, {n}\)"):
        M.prepare(ex, a, label_ids=[a.target["id"], n])


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


def test_soft_maps_under_a_constant_shift(case):
    """soft_map="minmax" (min-max of the signed scores) gives the same Soft-NC/NS and π-Soft
    curves when a constant is added to every score; soft_map="relu" (negatives clipped) does
    not, although the ranking (and so every hard metric) is the same."""
    ex, a = case
    e = torch.tensor(a.attributable)
    # scores on a 1/1024 grid in [-1, 1], so that adding 2 is exact in float32
    s = torch.round(a.scores / a.scores[e].abs().max() * 1024) / 1024
    a = _with_scores(a, s)
    assert (s[e] < 0).any() and (s[e] > 0).any()  # mixed signs: the clip matters
    moved = _with_scores(a, s + 2.0)
    # the keep probabilities themselves
    for norm in ("minmax", "max", "l1"):
        torch.testing.assert_close(M.normalise_scores(moved.scores, e, norm, "minmax"),
                                   M.normalise_scores(s, e, norm, "minmax"), rtol=0, atol=1e-12)
    assert not torch.allclose(M.normalise_scores(moved.scores, e, "minmax", "relu"), M.normalise_scores(s, e, "minmax", "relu"))
    pis = (0.2, 0.5, 0.8)
    # p from the model, p0 forced to 0 so that no metric is clipped at 0 or 1
    ctx = _forced_ctx(ex, a, p=M.prepare(ex, a).p, p0=0.0, seed=5, instance_id="shift")

    def all_soft(attr, m):
        sm = M.soft_metrics(ex, attr, n_samples=3, soft_map=m, ctx=ctx)
        ps = M.pi_soft(ex, attr, pis=pis, n_samples=3, soft_map=m, ctx=ctx)
        return [sm["soft_nc"], sm["soft_ns"]] + ps["nc"]["curve"] + ps["ns"]["curve"] + [ps["nc"]["auc"], ps["ns"]["auc"]]

    assert all_soft(moved, "minmax") == pytest.approx(all_soft(a, "minmax"), abs=1e-9)
    relu_a, relu_moved = all_soft(a, "relu"), all_soft(moved, "relu")
    assert max(abs(x - y) for x, y in zip(relu_a, relu_moved)) > 1e-4
    assert torch.equal(M.top_k_positions(s, e, 0.5, ties="first"), M.top_k_positions(moved.scores, e, 0.5, ties="first"))
    # evaluate_attribution reports both maps, the second in columns ending in _minmax
    out = M.evaluate_attribution(ex, a, n_samples=1, pis=(0.5,), ctx=ctx)
    assert out["soft_nc"] == pytest.approx(M.soft_metrics(ex, a, n_samples=1, ctx=ctx)["soft_nc"], abs=1e-12)
    assert out["soft_nc_minmax"] == pytest.approx(M.soft_metrics(ex, a, n_samples=1, soft_map="minmax", ctx=ctx)["soft_nc"], abs=1e-12)
    assert {"pi_soft_nc_auc_minmax", "pi_soft_ns_curve_minmax"} <= set(out) and "soft_nc_abs" not in out


def test_pi_soft_sign_is_the_old_name_of_soft_map(case):
    ex, a = case
    ctx = _forced_ctx(ex, a, p=M.prepare(ex, a).p, p0=0.0)
    old = M.pi_soft(ex, a, pis=(0.3, 0.7), n_samples=2, sign="abs", ctx=ctx)
    new = M.pi_soft(ex, a, pis=(0.3, 0.7), n_samples=2, soft_map="abs", ctx=ctx)
    assert old["nc"]["curve"] == new["nc"]["curve"] and old["ns"]["curve"] == new["ns"]["curve"]
    with pytest.raises(ValueError, match="sign"):
        M.pi_soft(ex, a, sign="abs", soft_map="minmax", ctx=ctx)


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
    # the documented control call without an attribution: ctx gives the input (it raised TypeError)
    assert M.pi_soft(ex, None, pis=pis, n_samples=2, uniform=True, ctx=ctx) == u


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
    a = dataclasses.replace(a, degenerate=[{"kind": "completeness", "message": "x"}])
    r1 = M.random_attribution(a, seed=0, instance_id="a")
    assert r1.degenerate == [] and r1.backend == {}  # the attributed method's findings are not the control's
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
    pk = M.soft_probs(ex, ctx, torch.ones(1, len(a.token_ids)), torch.rand(1, 2, *ctx.embeds.shape))
    p_true = M.prepare(ex, a).p
    assert torch.allclose(pk, torch.full_like(pk, p_true), atol=1e-6)


# ------------------------------------------------------------------ bad input
def test_an_attribution_of_another_model_is_refused(tiny_gpt2, tiny_llama, attrs):
    """A LLaMA result scored with the GPT-2 explainer read its ids with GPT-2's vocabulary and
    gave a number without a word."""
    with pytest.raises(ValueError, match=r"attr was made by model 'LlamaForCausalLM', not by this explainer's 'GPT2LMHeadModel'"):
        M.log_odds(tiny_gpt2, attrs["llama"])
    assert M.prepare(tiny_gpt2, dataclasses.replace(attrs["llama"], model="")).p > 0  # unnamed: not checked


def test_a_classifier_label_set_of_repeated_names_is_scored_over_its_classes(tiny_gpt2_clf, monkeypatch):
    """A label_set recorded as class names that repeat cannot be read back as classes: it is
    not taken as label_ids (it was refused: "label_ids [1, 1] must contain the target 0")."""
    n = tiny_gpt2_clf.adapter.num_labels
    monkeypatch.setattr(tiny_gpt2_clf.model.config, "id2label", {i: "LABEL" for i in range(n)})
    a = tiny_gpt2_clf.attribute(TEXT, method="saliency", target=0, target_fn="label_logprob")
    assert a.options["label_set"] == ["LABEL"] * n  # the repeated names the case is about
    assert M.prepare(tiny_gpt2_clf, a).prob_space == "labels" and math.isfinite(M.log_odds(tiny_gpt2_clf, a))  # by its ids
    older = dataclasses.replace(a, options={k: v for k, v in a.options.items() if k != "label_ids"})
    assert M.prepare(tiny_gpt2_clf, older).prob_space == "vocab"  # names that repeat are not read back as classes
    mixed = tiny_gpt2_clf.attribute(TEXT, method="saliency", target=0, target_fn="label_logprob", label_set=[0, 1])
    mixed = dataclasses.replace(mixed, options=dict(mixed.options, label_set=[0, "0"], label_ids=None))
    monkeypatch.setattr(tiny_gpt2_clf.model.config, "id2label", {0: "neg", 1: "0", **{i: f"c{i}" for i in range(2, n)}})
    assert M.prepare(tiny_gpt2_clf, mixed).label_ids == [0, 1]  # an id and a name that read alike are not a repeat


def test_an_attribution_of_the_same_folder_under_another_path_is_scored(tiny_gpt2_dir, monkeypatch):
    import aieg_fast

    folder = str(tiny_gpt2_dir)
    a = aieg_fast.load_model(folder).attribute(TEXT, method="saliency")
    monkeypatch.chdir(os.path.dirname(folder))
    ex = aieg_fast.load_model(os.path.basename(folder) + "/")
    assert ex.name != a.model and M.prepare(ex, a).p > 0


def test_a_label_set_attribution_is_scored_over_its_labels(tiny_gpt2):
    """target_fn='label_logprob' with a label_set explains log p over the labels; the metrics
    scored p over the whole vocabulary unless label_ids were given again."""
    labels = [" bad", " good"]
    a = tiny_gpt2.attribute(TEXT, method="saliency", template=TEMPLATE, target_fn="label_logprob", label_set=labels)
    ctx = M.prepare(tiny_gpt2, a)
    assert ctx.prob_space == "labels" and ctx.p == pytest.approx(M.prepare(tiny_gpt2, a, label_ids=labels).p, abs=1e-12)
    assert ctx.p != pytest.approx(M.prepare(tiny_gpt2, a, prob_space="vocab").p, abs=1e-3)
    assert M.log_odds(tiny_gpt2, a) == pytest.approx(M.log_odds(tiny_gpt2, a, label_ids=labels), abs=1e-12)
    assert M.prepare(tiny_gpt2, a, prob_space="labels").p == pytest.approx(ctx.p, abs=1e-12)  # was "label_ids must be given"


def test_a_label_set_is_scored_over_the_ids_it_explained(tiny_llama):
    """The label words are resolved once, after a batch's first text; read again after another
    text (a trailing space, SentencePiece) they could be other tokens, and the metrics scored
    another label set. The ids explained are recorded and used."""
    ex = tiny_llama
    res = ex.attribute(["the movie is:", "the movie is: "], method="saliency", target="c", target_fn="label_logprob",
                       label_set=["c", "a"])
    explained = res[1].options["label_ids"]
    again = [ex.resolve_target(w, context=res[1].text)["id"] for w in ("c", "a")]
    assert explained == [ex.resolve_target(w, context=res[0].text)["id"] for w in ("c", "a")] != again  # the case
    assert M.prepare(ex, res[1]).label_ids == explained
    saved = dataclasses.replace(res[1], options={k: v for k, v in res[1].options.items() if k != "label_ids"})
    assert M.prepare(ex, saved).label_ids == again  # a result saved before the ids were recorded: its words, as before


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
    with pytest.raises(ValueError, match="soft_map.*'clip'"):
        M.soft_metrics(ex, a, soft_map="clip")
    with pytest.raises(ValueError, match="soft_map"):
        M.pi_soft(ex, a, soft_map="shift")
    with pytest.raises(ValueError, match="soft_maps"):
        M.evaluate_attribution(ex, a, soft_maps=("relu", "bogus"))
    with pytest.raises(ValueError, match="ties.*'last'"):
        M.hard_metrics(ex, a, ties="last")
    with pytest.raises(ValueError, match="tie_seed"):
        M.top_k_positions(a.scores, torch.ones(len(a.token_ids), dtype=torch.bool), tie_seed=1.5)
    with pytest.raises(ValueError, match="scores"):
        M.hard_metrics(ex, _with_scores(a, torch.zeros(len(a.token_ids) + 1)))
    with pytest.raises(ValueError, match="pi"):
        M.retention_probs(torch.ones(3), 1.5)
    with pytest.raises(TypeError, match="attr"):
        M.hard_metrics(ex, {"scores": [1.0]})
    other = ex.attribute("the film was bad , slow and boring", method="saliency", template=TEMPLATE)
    with pytest.raises(ValueError, match="ctx"):
        M.hard_metrics(ex, other, ctx=M.prepare(ex, a))


def test_equal_keep_probabilities_share_their_forwards(case, monkeypatch):
    """Non-negative scores with a zero minimum give the relu and min-max soft maps the same keep
    probabilities: evaluate_attribution runs their masked forwards once (memo on the context) and
    reports what fresh, separate computations give; scores with mixed signs run both."""
    from aieg_fast.eval import soft as S

    ex, a = case
    e = torch.tensor(a.attributable)
    s = a.scores.abs() * e
    s[e.nonzero()[0, 0]] = 0.0  # min over eligible = 0, so min-max(s) = s / max s = the relu map's π-Soft input
    nonneg = _with_scores(a, s)
    calls = []
    real = S.soft_probs
    monkeypatch.setattr(S, "soft_probs", lambda *args: calls.append(1) or real(*args))
    ctx = _forced_ctx(ex, nonneg, p=M.prepare(ex, nonneg).p, p0=0.0, seed=3, instance_id="memo")
    out = M.evaluate_attribution(ex, nonneg, n_samples=2, pis=(0.3, 0.7), ctx=ctx)
    assert len(calls) == 2  # Soft-NC/NS and π-Soft once each, shared by both maps
    for m in ("relu", "minmax"):
        fresh = dataclasses.replace(ctx)  # a new, empty memo
        assert not fresh.probs_memo
        sm = M.soft_metrics(ex, nonneg, n_samples=2, soft_map=m, ctx=fresh)
        ps = M.pi_soft(ex, nonneg, pis=(0.3, 0.7), n_samples=2, soft_map=m, ctx=fresh)
        suffix = "" if m == "relu" else "_minmax"
        assert out["soft_nc" + suffix] == sm["soft_nc"] and out["soft_ns" + suffix] == sm["soft_ns"]
        assert out["pi_soft_nc_curve" + suffix] == ps["nc"]["curve"] and out["pi_soft_ns_curve" + suffix] == ps["ns"]["curve"]
    calls.clear()
    mixed = _with_scores(a, a.scores - a.scores[e].mean())
    M.evaluate_attribution(ex, mixed, n_samples=2, pis=(0.3, 0.7), ctx=_forced_ctx(ex, mixed, seed=3, instance_id="memo2"))
    assert len(calls) == 4


def test_retention_probs_takes_any_sequence_of_pis_and_refuses_nan():
    """A numpy array of π counted as one scalar and gave only the first row; NaN π gave NaN
    keep probabilities."""
    import numpy as np

    s = torch.tensor([0.5, 0.1, 0.0, 0.9, 0.3, 0.2])
    R = M.retention_probs(s, [0.2, 0.5])
    assert R.shape == (2, 6)
    assert torch.equal(M.retention_probs(s, np.array([0.2, 0.5])), R)
    assert torch.equal(M.retention_probs(s, torch.tensor([0.2, 0.5], dtype=torch.float64)), R)
    assert torch.equal(M.retention_probs(s, np.float64(0.5)), R[1])
    for bad in (float("nan"), [0.2, float("nan")], "0.5", [[0.2]]):
        with pytest.raises(ValueError, match=r"pi must be a number or a 1-D sequence of numbers in \[0, 1\]"):
            M.retention_probs(s, bad)


def test_top_k_keeps_float64_order():
    """Scores were compared in float32, so float64 scores 1e-9 apart tied (and a random one won)."""
    s = torch.ones(32, dtype=torch.float64)
    s[24] = 1 + 1e-9
    cand = torch.zeros(32, dtype=torch.bool)
    cand[6:25] = True
    assert M.top_k_positions(s, cand, 1 / 19 + 1e-9, ties="first").tolist() == [24]
    assert all(M.top_k_positions(s, cand, 1 / 19 + 1e-9, tie_seed=seed).tolist() == [24] for seed in range(5))


@pytest.fixture
def forwards(case):
    """The number of forwards through the first block of ``case``'s model while the test runs."""
    ex, _ = case
    n = []
    handle = ex.adapter.layers[0].register_forward_hook(lambda *args: n.append(1))
    yield n
    handle.remove()


@pytest.mark.parametrize("bad, match", [
    ({"topk": 0}, "topk must be a fraction in \\(0, 1\\], got 0"),
    ({"n_samples": 0}, "n_samples must be a positive int, got 0"),
    ({"pis": [2.0]}, "pis must be .*got \\[2.0\\]"),
    ({"normalise": "softmax2"}, "normalise must be one of .*got 'softmax2'"),
    ({"ties": "last"}, "ties must be one of .*got 'last'"),
])
def test_evaluate_attribution_refuses_bad_settings_before_any_forward(case, forwards, bad, match):
    """topk, n_samples, pis and normalise were refused by the metric that used them, after the
    reference forwards of prepare (and the hard metrics' forward, for pis and normalise)."""
    ex, a = case
    with pytest.raises(ValueError, match=match):
        M.evaluate_attribution(ex, a, **bad)
    assert not forwards


@pytest.mark.parametrize("call, name", [
    (lambda ex, a: M.hard_metrics(ex, a, dig_compat="x"), "dig_compat"),
    (lambda ex, a: M.log_odds(ex, a, dig_compat=1), "dig_compat"),
    (lambda ex, a: M.evaluate_attribution(ex, a, dig_compat="no"), "dig_compat"),
    (lambda ex, a: M.pi_soft(ex, a, uniform="x"), "uniform"),
    (lambda ex, a: M.pi_soft_nc(ex, a, uniform=0), "uniform"),
])
def test_flags_must_be_bools(case, forwards, call, name):
    """dig_compat='x' ran DIG's rule and uniform='x' silently ran the uniform control (any truthy
    value was taken as True), after the reference forwards."""
    ex, a = case
    with pytest.raises(ValueError, match=rf"^{name} must be True or False, got "):
        call(ex, a)
    assert not forwards


@pytest.mark.parametrize("fn", ["hard_metrics", "log_odds", "comprehensiveness", "sufficiency", "soft_metrics", "soft_nc",
                                "soft_ns", "pi_soft", "pi_soft_nc", "pi_soft_ns", "evaluate_attribution"])
def test_an_unknown_keyword_names_the_function_called(case, forwards, fn):
    """hard_metrics(..., foo=1) said "prepare() got an unexpected keyword argument 'foo'", naming
    an inner function."""
    ex, a = case
    with pytest.raises(TypeError, match=rf"^{fn}\(\) got an unexpected keyword argument 'foo'; it takes \[.*'seed'"):
        getattr(M, fn)(ex, a, foo=1)
    assert not forwards


def test_pi_soft_nc_and_ns_set_their_curve_themselves(case, forwards):
    ex, a = case
    for fn in ("pi_soft_nc", "pi_soft_ns"):
        with pytest.raises(TypeError, match=rf"^{fn}\(\) got an unexpected keyword argument 'curves'"):
            getattr(M, fn)(ex, a, curves=("nc",))
    assert not forwards


@pytest.mark.parametrize("fn", ["hard_metrics", "soft_metrics", "pi_soft", "evaluate_attribution"])
def test_settings_of_prepare_beside_a_ctx_are_refused(case, fn):
    """hard_metrics(ex, a, ctx=ctx, seed=5) dropped the seed without a word: ctx was prepared
    with its own."""
    ex, a = case
    ctx = M.prepare(ex, a)
    with pytest.raises(ValueError, match=r"ctx was prepared with its own settings; \['seed'\] would be ignored"):
        getattr(M, fn)(ex, a, ctx=ctx, seed=5)
    getattr(M, fn)(ex, a, ctx=ctx)  # alone it is taken


def test_settings_beside_a_ctx_are_refused_for_the_uniform_control_too(case):
    """pi_soft(ex, None, uniform=True, ctx=ctx, seed=3) skipped the check (the control needs no
    attribution) and dropped the seed."""
    ex, a = case
    ctx = M.prepare(ex, a)
    with pytest.raises(ValueError, match=r"ctx was prepared with its own settings; \['seed'\] would be ignored"):
        M.pi_soft(ex, None, uniform=True, ctx=ctx, seed=3, pis=[0.5], n_samples=1)
    assert M.pi_soft(ex, None, uniform=True, ctx=ctx, pis=[0.5], n_samples=1)["nc"]["pi"] == [0.5]


def test_a_users_scores_and_target_are_named_or_taken(tiny_gpt2):
    """Scores set by plain assignment (a list: __post_init__ does not run) were an AttributeError,
    a NumPy / tensor target id (from argmax) was refused as no id, a generation result's message
    did not point at step_attribution, and step_attribution needed info['generated_ids']."""
    import numpy as np

    res = tiny_gpt2.attribute(TEXT, method="saliency", template=TEMPLATE)
    listed = dataclasses.replace(res)
    listed.scores = [0.1] * len(res.tokens)
    with pytest.raises(TypeError, match=r"attr.scores must be a tensor, got list; set new scores with dataclasses.replace"):
        M.hard_metrics(tiny_gpt2, listed)
    want = M.hard_metrics(tiny_gpt2, res)
    for tid in (np.int64(res.target["id"]), torch.tensor(res.target["id"])):
        got = M.hard_metrics(tiny_gpt2, dataclasses.replace(res, target=dict(res.target, id=tid)))
        assert got == want
    gen = tiny_gpt2.attribute_generation("the movie is", generated_text=" good and", method="saliency")
    with pytest.raises(ValueError, match=r"a generation result is scored one step at a time: step_attribution\(gen, t\)"):
        M.hard_metrics(tiny_gpt2, gen)
    bare = dataclasses.replace(gen, info={k: v for k, v in gen.info.items() if k != "generated_ids"})
    for t in range(gen.scores.shape[0]):
        assert step_attribution(bare, t).target == step_attribution(gen, t).target
