"""Baselines of the path methods (issue 13): every kind keeps IG's completeness, F(x′) equals a
plain forward on the baseline, the baseline is recorded, and bad baselines are refused."""
from __future__ import annotations

import warnings

import pytest
import torch

import aieg_fast
from builders import model_state

TEXT = "the movie is good and the actors are great"


def _forward_F(ex, embeds, target):
    with torch.no_grad():
        return float(ex.model(inputs_embeds=embeds.unsqueeze(0)).logits[0, -1, target])


def _baseline_embeds(ex, text, row):
    """x′ as the package should build it: the row at attributable positions, x elsewhere."""
    ids, fixed = ex.encode(text)
    E = ex.adapter.embeddings(torch.tensor(ids)).detach()
    keep = torch.tensor(fixed).unsqueeze(-1)
    return torch.where(keep, E, row.expand_as(E) if row.dim() == 1 else row), E


def _kinds(ex):
    d = ex.adapter.embeddings.weight.shape[1]
    n = len(ex.encode(TEXT)[0])
    g = torch.Generator().manual_seed(3)
    W = ex.adapter.embeddings.weight.detach()
    return {
        "zero": ("zero", torch.zeros(d)),
        "mean": ("mean", W.mean(0)),
        "eos": ("eos", W[ex.tokenizer.eos_token_id]),
        "unk": ("unk", W[ex.tokenizer.unk_token_id]),
        "id": (7, W[7]),
        "vec": (torch.randn(d, generator=g) * 0.1, None),
        "mat": (torch.randn(n, d, generator=g) * 0.1, None),
    }


@pytest.mark.parametrize("kind", ["zero", "mean", "eos", "unk", "id", "vec", "mat"])
def test_every_baseline_kind_is_complete(tiny, kind):
    spec, row = _kinds(tiny)[kind]
    row = spec if row is None else row
    res = tiny.attribute(TEXT, method="integrated_gradients", target=5, baseline=spec, n_steps=256, integration="gausslegendre")
    xb, _ = _baseline_embeds(tiny, TEXT, row)
    assert res.info["F_baseline"] == pytest.approx(_forward_F(tiny, xb, 5), abs=1e-4)
    diff = res.info["F_input"] - res.info["F_baseline"]
    assert abs(diff) > 1e-3
    assert abs(float(res.scores.sum()) - diff) <= 0.01 * abs(diff)
    assert res.options["baseline"].split(":")[0] in {"zero", "mean", "eos", "unk", "token", "tensor[d]", "tensor[L,d]"}


def test_alpha_range_starts_the_path_later(tiny):
    full = tiny.attribute(TEXT, method="integrated_gradients", target=5, n_steps=256, integration="gausslegendre")
    part = tiny.attribute(TEXT, method="integrated_gradients", target=5, n_steps=256, integration="gausslegendre", alpha_range=(0.5, 1))
    ref = tiny.adapter.embeddings.weight[tiny.ref_token_id].detach()
    xb, E = _baseline_embeds(tiny, TEXT, ref)
    assert part.info["F_baseline"] == pytest.approx(_forward_F(tiny, xb + 0.5 * (E - xb), 5), abs=1e-4)
    assert part.info["F_input"] == pytest.approx(full.info["F_input"], abs=1e-5)
    diff = part.info["F_input"] - part.info["F_baseline"]
    assert abs(float(part.scores.sum()) - diff) <= 0.01 * abs(diff) + 1e-5
    assert part.options["alpha_range"] == [0.5, 1.0]
    assert not torch.allclose(part.scores, full.scores)


def test_noise_samples_average_and_are_seeded(tiny):
    kw = dict(method="integrated_gradients", target=5, n_steps=64, integration="gausslegendre", baseline="zero", n_baseline_samples=3)
    a = tiny.attribute(TEXT, **kw)
    b = tiny.attribute(TEXT, **kw)
    c = tiny.attribute(TEXT, seed=1, **kw)
    torch.testing.assert_close(a.scores, b.scores)
    assert not torch.allclose(a.scores, c.scores)
    per = a.info["F_baseline_samples"]
    assert len(per) == 3 and len(set(per)) == 3
    diff = a.info["F_input"] - sum(per) / 3  # completeness holds for the mean of the draws
    assert abs(float(a.scores.sum()) - diff) <= 0.02 * abs(diff) + 1e-4
    assert a.options["n_baseline_samples"] == 3 and a.options["baseline_seed"] == 0 and a.options["baseline_noise"] > 0


@pytest.mark.parametrize("method", ["integrated_gradients", "occlusion", "heta", "aieg"])
def test_noisy_baselines_do_not_depend_on_the_batch(tiny_gpt2, method):
    """With n_baseline_samples > 1 a text's scores are those of the text alone, whatever the
    other texts of the batch and its place among them (left padding too); its default σ is its
    own. Before, the draws and σ were the batch's, so the scores moved by 5-15 %."""
    texts = ["the movie is very good and fun", "bad film"]
    kw = dict(method=method, n_baseline_samples=3, seed=0, **({} if method == "occlusion" else {"n_steps": 4}))
    alone = [tiny_gpt2.attribute(t, **kw) for t in texts]
    both = tiny_gpt2.attribute(texts, **kw)
    swapped = tiny_gpt2.attribute(texts[::-1], padding_side="left", **kw)
    for i in range(2):
        torch.testing.assert_close(both[i].scores, alone[i].scores, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(swapped[1 - i].scores, alone[i].scores, rtol=1e-4, atol=1e-6)
        assert both[i].options["baseline_noise"] == pytest.approx(alone[i].options["baseline_noise"])
    assert alone[0].options["baseline_noise"] != pytest.approx(alone[1].options["baseline_noise"])


@pytest.mark.parametrize("method", ["integrated_gradients", "integrated_decision_gradients", "aieg"])
def test_baseline_is_recorded(tiny_gpt2, method):
    res = tiny_gpt2.attribute(TEXT, method=method, n_steps=8)
    assert res.options["baseline"] == f"reference:{tiny_gpt2.ref_token_id}"
    res = tiny_gpt2.attribute(TEXT, method=method, n_steps=8, baseline="zero")
    assert res.options["baseline"] == "zero"


def test_zero_baseline_through_rmsnorm_is_finite(tiny_llama):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for m in ("integrated_gradients", "integrated_decision_gradients", "aieg"):
            res = tiny_llama.attribute(TEXT, method=m, n_steps=16, baseline="zero")
            assert bool(torch.isfinite(res.scores).all())


def test_bad_baselines_refused_before_work(tiny):
    before = model_state(tiny)
    d = tiny.adapter.embeddings.weight.shape[1]
    cases = [
        (dict(baseline="ones"), "baseline must be one of"),
        (dict(baseline=10**9), "baseline token id"),
        (dict(baseline=-1), "baseline token id"),
        (dict(baseline=torch.zeros(d + 1)), "must be \\[d\\] or \\[L, d\\]"),
        (dict(baseline=torch.zeros(3, d)), "one row per token"),
        (dict(baseline=torch.full((d,), float("nan"))), "non-finite"),
        (dict(alpha_range=(0.2, 0.9)), "alpha_range"),
        (dict(alpha_range=(1.0, 1.0)), "alpha_range"),
        (dict(n_baseline_samples=0), "n_baseline_samples"),
        (dict(n_baseline_samples=2, baseline_noise=float("nan")), "baseline_noise must be a finite"),
        (dict(n_baseline_samples=2, baseline_noise=float("inf")), "baseline_noise must be a finite"),
        (dict(baseline_noise=0.5), "used only with n_baseline_samples > 1"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            tiny.attribute(TEXT, method="integrated_gradients", n_steps=4, **kw)
    with pytest.raises(ValueError, match="does not use a baseline"):
        tiny.attribute(TEXT, method="saliency", baseline="zero")
    assert model_state(tiny) == before


def test_generation_baseline(tiny_gpt2):
    res = tiny_gpt2.attribute_generation("the film was", max_new_tokens=2, method="integrated_gradients", n_steps=8, baseline="zero")
    assert res.options["baseline"] == "zero"
    noisy = tiny_gpt2.attribute_generation("the film was", max_new_tokens=2, method="integrated_gradients", n_steps=8,
                                           baseline="zero", n_baseline_samples=2)
    assert noisy.options["n_baseline_samples"] == 2 and noisy.scores.shape == res.scores.shape


def test_noisy_baselines_report_and_flag_the_completeness_error(tiny):
    """With n_baseline_samples > 1 IG reports its completeness error (the mean of the draws'
    errors, = Σ s − (F(x) − mean F(x′))) and flags it as with one baseline; it was dropped, so
    a large error (here a 2-step path) passed without a flag or warning."""
    kw = dict(method="integrated_gradients", target=5, n_steps=2, baseline="zero", n_baseline_samples=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = tiny.attribute(TEXT, **kw)
    err = float(res.scores.sum()) - (res.info["F_input"] - res.info["F_baseline"])
    assert res.info["convergence_delta"] == pytest.approx(err, abs=1e-4)
    assert abs(err) > 0.1 * abs(res.info["F_input"] - res.info["F_baseline"])  # the coarse path's error is large here
    assert "completeness" in [d["kind"] for d in res.degenerate]
    assert any("completeness error" in str(w.message) for w in caught)


@pytest.mark.parametrize("name", ["llama", "gemma", "gemma2", "gemma3_text"])
def test_tensor_baseline_is_in_inputs_embeds_space(name):
    """A Tensor baseline and baseline_noise are in the space of model.get_input_embeddings()(ids)
    (HF's inputs_embeds) for every family: the input's own embeddings give F(x′) = F(x) and zero
    scores, and the recorded default σ is 0.1 × the RMS of those embeddings. Gemma's adapter
    took the tensor as unscaled table rows and scaled it by √hidden_size again (F(x′) ≠ F(x))."""
    from builders import family_specs

    model, tok = family_specs()[name].build()
    ex = aieg_fast.load_model(model, tok)
    ids, fixed = ex.encode(TEXT)
    with torch.no_grad():
        E = model.get_input_embeddings()(torch.tensor([ids]))[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", aieg_fast.AttributionWarning)  # zero scores are flagged zero_signal
        res = ex.attribute(TEXT, method="integrated_gradients", target=5, baseline=E, n_steps=8)
    assert res.info["F_baseline"] == pytest.approx(res.info["F_input"], abs=1e-5)
    assert float(res.scores.abs().max()) < 1e-5
    kw = dict(method="integrated_gradients", target=5, n_steps=8, baseline=E, n_baseline_samples=2)
    noisy = ex.attribute(TEXT, **kw)
    rms = float(E[~torch.tensor(fixed)].float().pow(2).mean().sqrt())
    assert noisy.options["baseline_noise"] == pytest.approx(0.1 * rms, rel=1e-5)
    given = ex.attribute(TEXT, baseline_noise=0.1 * rms, **kw)  # the recorded σ given back: the same draws
    torch.testing.assert_close(given.scores, noisy.scores, rtol=1e-4, atol=1e-6)


def test_default_reference_token_skips_an_all_zero_fallback_row():
    """PAD, EOS, UNK and id 0 all have zero embeddings (padding_idx on a shared id): the default
    reference token is the lowest id whose row is not zero, never a zero vector (the fallback
    took id 0 unchecked); an all-zero table warns."""
    from builders import make_tiny_llama

    model, tok = make_tiny_llama()
    W = model.get_input_embeddings().weight
    zero = {0, 1, 2} | {t for t in (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) if t is not None}
    with torch.no_grad():
        W[sorted(zero)] = 0.0
    ex = aieg_fast.load_model(model, tok)
    assert ex.ref_token_id == min(set(range(W.shape[0])) - zero)
    res = ex.attribute(TEXT, method="integrated_gradients", target=5, n_steps=8)
    assert res.options["baseline"] == f"reference:{ex.ref_token_id}"
    with torch.no_grad():
        W.zero_()
    with pytest.warns(aieg_fast.AttributionWarning, match="every row of the token embedding table is zero"):
        assert aieg_fast.load_model(model, tok).ref_token_id == 0
