"""``n_steps="auto"`` (issue 18): IG refines a nested trapezoid grid until its relative
completeness error is within ``tolerance`` or ``max_steps`` is reached, computing every path
point once; the result equals a fixed grid of the same final points, says how many steps it
used, what error it reached and whether it converged, and is flagged when it did not."""
from __future__ import annotations

import pytest
import torch

import aieg_fast
from aieg_fast import AttributionWarning
from aieg_fast.core.adaptive_quadrature import interval_errors, mark_intervals, trapezoid_weights
from builders import model_state

TEXT = "the movie is good and the actors are great"
IG = "integrated_gradients"


def _completeness(res) -> float:
    dF = res.info["F_input"] - res.info["F_baseline"]
    return abs(float(res.scores.sum()) - dF) / abs(dF)


@pytest.mark.parametrize("refine", ["adaptive", "uniform"])
def test_auto_reaches_the_tolerance(tiny, refine):
    res = tiny.attribute(TEXT, method=IG, n_steps="auto", tolerance=1e-3, refine=refine)
    info = res.info
    assert info["converged"] is True and res.degenerate == []
    assert _completeness(res) <= 1e-3  # recomputed from the scores, not read from info
    assert info["completeness_error"] == pytest.approx(_completeness(res), rel=1e-3, abs=1e-6)
    assert info["n_steps_used"] == len(info["alphas"]) > 9  # 9 points alone are not within 1e-3 here
    assert info["error_history"][0] > 1e-3
    assert res.options["n_steps"] == "auto" and res.options["tolerance"] == 1e-3 and res.options["refine"] == refine


def test_a_looser_tolerance_takes_fewer_steps(tiny_llama):
    loose = tiny_llama.attribute(TEXT, method=IG, n_steps="auto", tolerance=0.05)
    tight = tiny_llama.attribute(TEXT, method=IG, n_steps="auto", tolerance=1e-4)
    assert loose.info["converged"] and tight.info["converged"]
    assert loose.info["n_steps_used"] < tight.info["n_steps_used"]
    assert _completeness(tight) <= 1e-4


def _count_rows(ex):
    """A forward hook counting the rows (path points) that go through the model."""
    seen = []
    handle = ex.adapter.base.register_forward_hook(lambda mod, args, kwargs, out: seen.append(kwargs["inputs_embeds"].shape[0]),
                                                   with_kwargs=True)
    return seen, handle


@pytest.mark.parametrize("refine", ["adaptive", "uniform"])
def test_auto_computes_each_point_once(tiny_llama, refine):
    """Every gradient is reused: the rows through the model are the final grid's points and one
    no-grad row of the input for p(target) (a given target: no prediction)."""
    target = tiny_llama.attribute(TEXT, method="saliency").target["id"]
    seen, handle = _count_rows(tiny_llama)
    try:
        res = tiny_llama.attribute(TEXT, method=IG, target=target, n_steps="auto", tolerance=1e-4, refine=refine,
                                   internal_batch_size=7)
    finally:
        handle.remove()
    alphas = res.info["alphas"]
    assert len(res.info["error_history"]) >= 3  # several refinements happened
    assert sum(seen) - 1 == res.info["n_steps_used"] == len(alphas) == len(set(alphas)) and "predict" in res.timing
    assert alphas == sorted(alphas) and alphas[0] == 0.0 and alphas[-1] == 1.0


def test_uniform_refinement_equals_the_fixed_grid(tiny):
    """Doubling from 9 points to 33 gives the fixed 33-point trapezoid IG."""
    with pytest.warns(AttributionWarning, match="did not converge"):
        auto = tiny.attribute(TEXT, method=IG, n_steps="auto", refine="uniform", tolerance=1e-9, max_steps=33)
    fixed = tiny.attribute(TEXT, method=IG, n_steps=33)
    assert auto.info["n_steps_used"] == 33
    torch.testing.assert_close(torch.tensor(auto.info["alphas"], dtype=torch.float64), torch.linspace(0, 1, 33, dtype=torch.float64))
    torch.testing.assert_close(auto.scores, fixed.scores, atol=1e-6, rtol=1e-5)
    assert auto.info["F_input"] == pytest.approx(fixed.info["F_input"], rel=1e-6)


def test_adaptive_result_is_the_trapezoid_rule_on_its_points(tiny_gpt2):
    """Recomputed with plain autograd at the grid the call chose: Δ ⊙ Σ_m w_m ∇F(α_m)."""
    ex = tiny_gpt2
    res = ex.attribute(TEXT, method=IG, n_steps="auto", tolerance=1e-4)
    a = torch.tensor(res.info["alphas"], dtype=torch.float64)
    assert not torch.allclose(a[1:] - a[:-1], a[1:2] - a[:1])  # a non-uniform grid
    ids, fixed = ex.encode(TEXT)
    b = ex.build_batch([(ids, fixed)])
    ctx = ex.context(b, [res.target["id"]])
    E, Eb = b.embeds[0], b.baseline[0]
    X = (Eb + a.float().view(-1, 1, 1) * (E - Eb)).requires_grad_(True)
    (G,) = torch.autograd.grad(ctx.F(None, X).sum(), X)
    h = a[1:] - a[:-1]
    w = torch.zeros_like(a)
    w[:-1] += h / 2
    w[1:] += h / 2
    expected = ((E - Eb) * torch.einsum("m,mld->ld", w.float(), G)).sum(-1)
    torch.testing.assert_close(res.scores, expected, atol=1e-5, rtol=1e-4)


def test_budget_stops_and_flags(tiny_llama):
    with pytest.warns(AttributionWarning, match=r"\[completeness\] n_steps='auto' did not converge: .* after 9 steps, above tolerance=1e-06"):
        res = tiny_llama.attribute(TEXT, method=IG, n_steps="auto", tolerance=1e-6, max_steps=12, refine="uniform")
    assert res.info["converged"] is False and res.info["n_steps_used"] == 9  # a doubling to 17 would pass 12
    assert [f["kind"] for f in res.degenerate] == ["completeness"]
    with pytest.warns(AttributionWarning, match="did not converge"):
        res = tiny_llama.attribute(TEXT, method=IG, n_steps="auto", tolerance=1e-6, max_steps=12)
    assert res.info["n_steps_used"] == 12  # adaptive bisection spends the budget


def test_batch_equals_one_at_a_time(tiny_gpt2):
    texts = [TEXT, "the film was bad", "good"]
    both = tiny_gpt2.attribute(texts, method=IG, n_steps="auto", tolerance=1e-3)
    assert len({len(r.info["error_history"]) for r in both}) > 1  # one example finishes before another
    for t, r in zip(texts, both):
        one = tiny_gpt2.attribute(t, method=IG, n_steps="auto", tolerance=1e-3)
        assert r.info["alphas"] == one.info["alphas"]
        assert r.info["error_history"] == pytest.approx(one.info["error_history"], abs=2e-5)  # one entry per grid
        assert r.info["converged"] == one.info["converged"]
        torch.testing.assert_close(r.scores, one.scores, atol=1e-6, rtol=1e-5)


def test_fixed_steps_warning_recommends_auto(tiny_llama):
    with pytest.warns(AttributionWarning, match=r"\[completeness\] .*raise n_steps \(for the next token n_steps='auto' refines them"):
        tiny_llama.attribute(TEXT, method=IG, n_steps=2, baseline="zero")


def test_mixture_of_experts_warning_says_more_steps_do_not_help():
    """Top-k routing switches experts along the path: F jumps there and no gradient sees it, so the
    completeness error of a MoE model does not shrink with n_steps; the flag says so instead of
    recommending more steps (tiny Qwen2-MoE: about 15 % at 64 steps, the same at 1024)."""
    from builders import family_specs

    specs = family_specs()
    ex = aieg_fast.load_model(*specs["qwen2_moe"].build())
    for kwargs in (dict(n_steps=64), dict(n_steps="auto", max_steps=17)):
        with pytest.warns(AttributionWarning, match=r"\[completeness\] ") as rec:
            res = ex.attribute(TEXT, method=IG, **kwargs)
        msg = " ".join(str(w.message) for w in rec)
        assert "routes each token to some of its experts" in msg and "more steps do not remove" in msg, msg
        assert "raise n_steps" not in msg and "raise max_steps" not in msg
        assert "more steps do not remove" in res.degenerate[0]["message"]
    # the three MoE families are detected from their configs; a dense one is not
    assert all(aieg_fast.load_model(*specs[f].build()).adapter.routed_experts for f in ("qwen2_moe", "qwen3_moe", "mixtral"))
    assert not aieg_fast.load_model(*specs["qwen2"].build()).adapter.routed_experts


@pytest.mark.parametrize("kwargs, match", [
    (dict(method="aieg"), r"n_steps='auto' is not available for method 'aieg': its weights follow the logit's slope"),
    (dict(method="integrated_decision_gradients"), r"not available for method 'integrated_decision_gradients'"),
    (dict(method="saliency"), r"not available for method 'saliency': it takes no path steps"),
    (dict(method=IG, integration="gausslegendre"), r"integration='gausslegendre' has no nested points"),
    (dict(method=IG, token_reduction="l2"), r"token_reduction='sum' only; got token_reduction='l2'"),
    (dict(method=IG, tolerance=0), r"tolerance must be a number > 0"),
    (dict(method=IG, tolerance=True), r"tolerance must be a number > 0"),
    (dict(method=IG, tolerance="5%"), r"tolerance must be a number > 0"),
    (dict(method=IG, max_steps=1), r"max_steps must be an int >= 2, got 1"),
    (dict(method=IG, max_steps=20.0), r"max_steps must be an int >= 2, got 20.0"),
    (dict(method=IG, refine="random"), r"refine must be one of \['adaptive', 'uniform'\]"),
    (dict(method=IG, n_baseline_samples=2), r"n_steps='auto' with n_baseline_samples=2"),
])
def test_auto_refused_with_a_reason(tiny_gpt2, kwargs, match):
    before = model_state(tiny_gpt2)
    with pytest.raises(ValueError, match=match):
        tiny_gpt2.attribute(TEXT, n_steps="auto", **kwargs)
    assert model_state(tiny_gpt2) == before


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_steps=20, tolerance=0.01), r"tolerance=0.01 applies to n_steps='auto' only; got n_steps=20"),
    (dict(n_steps=20, max_steps=64), r"max_steps=64 applies to n_steps='auto' only"),
    (dict(n_steps="AUTO"), r"n_steps must be an int >= 2 or 'auto', got 'AUTO'"),
    (dict(n_steps=8, refine="uniform"), r"refine='uniform' applies to n_steps='auto' only; got n_steps=8"),
])
def test_auto_settings_without_auto(tiny_gpt2, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tiny_gpt2.attribute(TEXT, method=IG, **kwargs)
    if "refine" in kwargs:  # it was accepted and ignored, in both calls
        with pytest.raises(ValueError, match=match):
            tiny_gpt2.attribute_generation(TEXT, max_new_tokens=2, method=IG, **kwargs)


def test_auto_on_a_float64_model():
    """A float64 model (it failed: a float32 gradient times the float64 Δ): the uniform
    refinement equals the fixed trapezoid grid of the same size, as in float32."""
    from builders import make_tiny_llama

    m, t = make_tiny_llama()
    ex = aieg_fast.Explainer(m.to(torch.float64), t)
    auto = ex.attribute(TEXT, method=IG, n_steps="auto", refine="uniform", tolerance=1e-12, max_steps=17)
    fixed = ex.attribute(TEXT, method=IG, n_steps=17)
    assert auto.info["n_steps_used"] == 17
    torch.testing.assert_close(auto.scores, fixed.scores, rtol=1e-5, atol=1e-7)


def test_generation_refuses_auto(tiny_gpt2):
    with pytest.raises(ValueError, match=r"n_steps='auto' is available in Explainer.attribute \(integrated_gradients\) only"):
        tiny_gpt2.attribute_generation(TEXT, max_new_tokens=2, method=IG, n_steps="auto")


# ------------------------------------------------------------------------------------------
# the pieces, on functions with known integrals
# ------------------------------------------------------------------------------------------
def test_interval_errors_sum_to_the_trapezoid_error():
    a = torch.tensor([0.0, 0.25, 0.5, 1.0], dtype=torch.float64)
    f = a**3  # F(α) = α³, f′ = 3α²
    e = interval_errors(a, f, 3 * a**2)
    trap = float(trapezoid_weights(a) @ (3 * a**2))
    assert float(e.sum()) == pytest.approx(trap - 1.0, abs=1e-12)
    assert float(e[-1]) == pytest.approx(0.5 * (3 * 0.25 + 3) / 2 - (1 - 0.125), abs=1e-12)
    assert float(trapezoid_weights(a).sum()) == pytest.approx(1.0)


def test_marking_takes_the_largest_errors_first():
    e = torch.tensor([0.1, -3.0, 0.2, 1.0, 0.0], dtype=torch.float64)
    assert mark_intervals(e, "adaptive", 10).tolist() == [1]  # 3.0 ≥ half of 4.3
    assert mark_intervals(e, "adaptive", 0).tolist() == []
    assert sorted(mark_intervals(torch.ones(4, dtype=torch.float64), "adaptive", 10).tolist()) in ([0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3])
    assert mark_intervals(e, "uniform", 5).tolist() == [0, 1, 2, 3, 4]
    assert mark_intervals(e, "uniform", 4).tolist() == []  # a doubling that does not fit is not started
