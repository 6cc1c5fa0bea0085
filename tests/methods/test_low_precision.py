"""Low-precision models (issue 18): a bfloat16 / float16 model runs the path methods with the
interpolation, the integration, F and the reductions in float32; results are finite and float32,
IG's completeness error is reported, and where it is large the flag says the model runs in low
precision and how to fix it."""
from __future__ import annotations

import pytest
import torch

import aieg_fast
from aieg_fast import AttributionWarning
from builders import make_tiny_llama

TEXT = "the movie is good and the actors are great"


@pytest.fixture(scope="module")
def pair():
    """The same tiny LLaMA in float32 and in bfloat16."""
    m, t = make_tiny_llama()
    m16, t16 = make_tiny_llama()
    return aieg_fast.load_model(m, t), aieg_fast.load_model(m16.to(torch.bfloat16), t16)


def test_delta_and_F_are_float32(pair):
    _, ex = pair
    ids, fixed = ex.encode(TEXT)
    b = ex.build_batch([(ids, fixed)])
    assert b.embeds.dtype == torch.bfloat16 and b.delta.dtype == torch.float32
    torch.testing.assert_close(b.delta, b.embeds.float() - b.baseline.float(), rtol=0, atol=0)  # no bf16 rounding of the difference
    h = ex.adapter.hidden_last(b.embeds, None, None, None)
    assert h.dtype == torch.bfloat16
    t = torch.tensor([5])
    f = ex.adapter.target_scores(h, t, "logit")
    assert f.dtype == torch.float32
    expected = h.float() @ ex.adapter.head.weight[5].float()
    torch.testing.assert_close(f, expected, rtol=1e-6, atol=1e-6)  # the projection itself not rounded to bf16
    logits = ex.adapter.full_logits(h)
    assert logits.dtype == torch.float32
    torch.testing.assert_close(logits[:, 5], expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("method", ["integrated_gradients", "aieg", "integrated_decision_gradients", "saliency", "input_x_gradient"])
def test_bf16_results_are_finite_float32_and_close_to_fp32(pair, method):
    ex32, ex16 = pair
    a = ex32.attribute(TEXT, method=method, n_steps=16)
    b = ex16.attribute(TEXT, method=method, n_steps=16)
    assert b.scores.dtype == torch.float32 and bool(torch.isfinite(b.scores).all())
    assert b.target["id"] == a.target["id"]
    valid = torch.tensor(a.attributable)
    cos = torch.nn.functional.cosine_similarity(a.scores[valid], b.scores[valid], dim=0)
    assert float(cos) > 0.95


def test_bf16_ig_reports_its_completeness_error(pair):
    ex32, ex16 = pair
    a = ex32.attribute(TEXT, method="integrated_gradients", n_steps=64)
    b = ex16.attribute(TEXT, method="integrated_gradients", n_steps=64)
    for r in (a, b):
        dF = r.info["F_input"] - r.info["F_baseline"]
        assert r.info["convergence_delta"] == pytest.approx(float(r.scores.sum()) - dF, abs=1e-5)
    assert abs(b.info["F_input"] - a.info["F_input"]) < 0.05 * abs(a.info["F_input"])
    auto = ex16.attribute(TEXT, method="integrated_gradients", n_steps="auto", tolerance=0.02)
    assert auto.info["converged"] is True and auto.info["completeness_error"] <= 0.02


def test_large_error_in_bf16_says_so_and_recommends_float32(pair):
    ex32, ex16 = pair
    with pytest.warns(AttributionWarning, match=r"\[completeness\] .*The model runs in bfloat16 .* run the model in float32 "
                                                r"\(aieg_fast.load_model\(\.\.\., dtype=torch.float32\), or model.float\(\)\)"):
        res = ex16.attribute(TEXT, method="integrated_gradients", n_steps=2, baseline="zero")
    assert "bfloat16" in res.degenerate[0]["message"]
    with pytest.warns(AttributionWarning, match=r"\[completeness\]") as got:
        ex32.attribute(TEXT, method="integrated_gradients", n_steps=2, baseline="zero")
    assert all("bfloat16" not in str(w.message) for w in got)  # the hint is for low precision only
    with pytest.warns(AttributionWarning, match=r"did not converge.*The model runs in bfloat16"):
        ex16.attribute(TEXT, method="integrated_gradients", n_steps="auto", tolerance=1e-6, max_steps=20)


def test_float16_runs(pair):
    m, t = make_tiny_llama()
    ex = aieg_fast.load_model(m.to(torch.float16), t)
    res = ex.attribute(TEXT, method="integrated_gradients", n_steps=16)
    assert res.scores.dtype == torch.float32 and bool(torch.isfinite(res.scores).all())
    ref = pair[0].attribute(TEXT, method="integrated_gradients", n_steps=16)
    valid = torch.tensor(ref.attributable)
    assert float(torch.nn.functional.cosine_similarity(ref.scores[valid], res.scores[valid], dim=0)) > 0.95


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("target_fn", ["logprob", "prob"])
def test_low_precision_log_prob_targets(target_fn, dtype):
    """F = log p / p of the target on a half-precision model: the hidden state goes to float32
    before the head (the half-precision head is then applied in float32), as for the logit."""
    m32, t32 = make_tiny_llama()
    m16, t16 = make_tiny_llama()
    a = aieg_fast.load_model(m32, t32).attribute(TEXT, method="saliency", target_fn=target_fn)
    b = aieg_fast.load_model(m16.to(dtype), t16).attribute(TEXT, method="saliency", target_fn=target_fn)
    assert b.scores.dtype == torch.float32 and bool(torch.isfinite(b.scores).all())
    assert b.info["F_input"] == pytest.approx(a.info["F_input"], rel=0.05, abs=0.05)


def test_bf16_heta_and_generation_with_log_prob(pair):
    """HETA's sensitivity term and per-step generation scores with log p run on a bfloat16 model."""
    ex32, ex = pair
    h = ex.attribute(TEXT, method="heta")
    assert h.scores.dtype == torch.float32 and bool(torch.isfinite(h.scores).all())
    kw = dict(generated_text=" is good", method="saliency", target_fn="logprob")
    g32, g = ex32.attribute_generation("the movie", **kw), ex.attribute_generation("the movie", **kw)
    assert g.scores.dtype == torch.float32 and not bool(torch.isinf(g.scores).any())
    assert torch.equal(torch.isnan(g.scores), torch.isnan(g32.scores))  # NaN only where nothing is attributed
