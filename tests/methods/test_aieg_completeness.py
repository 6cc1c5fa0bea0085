"""AIEG's ``ef_mode="completeness"`` (issue 19, V8): weights ω_m = clip(Δf_m/((G_m·Δ)·g_m), 0, 1)·g_m
(:func:`aieg_fast.reference.emphasis_factors`), rederived from the model's own path logits and
gradients, the completeness it keeps, and the option checks."""
from __future__ import annotations

import pytest
import torch

import aieg_fast
from aieg_fast import reference as R
from aieg_fast.methods import get_method
from builders import sentencepiece_like_tokenizer

TEXT = "the movie is good and the actors are great"
RAW = dict(attn_layers="none", posnorm="none")  # scores = ieg (the emphasized integral itself)
COMPLETE = dict(ef_mode="completeness")  # ef_norm defaults to "none" there


def test_matches_rederived_formula(tiny_llama):
    """ieg = Δ ⊙ Σ_m ω_m G_m with ω from the op on the path logits and slopes G_m·Δ, on the grid
    the method chose; chunks of 3 points check that each chunk sees the step before it."""
    ex = tiny_llama
    res = ex.attribute(TEXT, method="aieg", n_steps=10, internal_batch_size=3, **COMPLETE, **RAW)
    alphas = torch.tensor(res.info["alphas"])
    widths = R.adaptive_alphas(torch.tensor(res.info["pilot_logits"]), 10)[1]
    ids, fixed = ex.encode(TEXT)
    b = ex.build_batch([(ids, fixed)])
    ctx = ex.context(b, [res.target["id"]])
    E, Eb = b.embeds[0], b.baseline[0]
    X = (Eb + alphas.view(-1, 1, 1) * (E - Eb)).requires_grad_(True)
    f = ctx.F(torch.zeros(len(alphas), dtype=torch.long), X)
    (G,) = torch.autograd.grad(f.sum(), X)
    slopes = (G * (E - Eb)).sum((-2, -1))
    omega = R.emphasis_factors(f.detach(), alphas, widths, "completeness", "abs", "none", slopes)
    torch.testing.assert_close(torch.tensor(res.info["ef"]), omega, atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(torch.tensor(res.info["path_logits"]), f.detach(), atol=1e-5, rtol=1e-5)
    expected = ((E - Eb) * torch.einsum("m,mld->ld", omega, G)).sum(-1)
    torch.testing.assert_close(res.scores, expected, atol=1e-5, rtol=1e-4)
    assert 0 < int((omega > 0).sum()) < len(alphas)  # some steps weighted, some clipped to 0 (a meaningful check)


@pytest.mark.parametrize("text", [TEXT, "the film was bad , slow and boring"])
def test_closer_to_the_logit_change_than_fd(tiny_llama, text):
    """Zero baseline on the tiny LLaMA (RMSNorm) and AIEG's adaptive grid, which packs samples
    where the logit moves, near α = 0 here, where the gradients explode: the L1-normalised "fd"
    weights multiply those gradients and Σ ieg lands far from F(x) − F(x′); each completeness
    term ω_m·(G_m·Δ) lies between 0 and the step's own increment, so Σ ieg stays within the
    logit's path."""
    ex = tiny_llama
    kw = dict(n_steps=16, baseline="zero", **RAW)
    errors = {}
    for name, opts in (("completeness", COMPLETE), ("fd", {})):
        res = ex.attribute(text, method="aieg", **kw, **opts)
        change = res.info["F_input"] - res.info["F_baseline"]
        errors[name] = abs(float(res.scores.sum()) - change)
    assert abs(change) > 0.1  # the check is meaningful
    assert errors["completeness"] < errors["fd"], errors


def _quadratic_llama():
    """A one-layer LLaMA whose logit along a zero-baseline path is F(α) = Bα + Cα² with B·C > 0:
    attention output zeroed, a linear MLP activation (gate·up is quadratic in the input), the
    RMSNorms made linear by a huge eps. So |F′| rises along the path, the gradient at each step's
    right end over-predicts the step's increment, and no step is clipped."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = sentencepiece_like_tokenizer()
    cfg = LlamaConfig(
        num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, hidden_size=32, intermediate_size=64,
        vocab_size=len(tok), max_position_embeddings=64, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id, initializer_range=0.1, hidden_act="linear", rms_norm_eps=1e6,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).double().eval()
    layer = model.model.layers[0]
    with torch.no_grad():
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.gate_proj.weight.mul_(1e3)  # undo the input norm's 1/√eps
        layer.mlp.up_proj.weight.mul_(1e3)
        layer.mlp.down_proj.weight.mul_(1e2)  # a quadratic term comparable to the linear one
        model.lm_head.weight.mul_(1e3)  # undo the final norm's 1/√eps
    ex = aieg_fast.load_model(model, tok)
    ids, _ = ex.encode(TEXT)
    e = model.model.embed_tokens.weight[ids[-1]]
    with torch.no_grad():
        quad = layer.mlp(layer.post_attention_layernorm(e))  # h(α) = αe + α²·quad at the last position
        target = int(model.lm_head(e).argmax())
        B, C = float(model.lm_head.weight[target] @ e), float(model.lm_head.weight[target] @ quad)
        if B * C < 0:
            layer.mlp.down_proj.weight.neg_()
    assert abs(C) > 0.05 * abs(B)  # curved enough that the "fd" weights miss the change
    return ex, target


def test_exact_when_no_step_is_clipped():
    ex, target = _quadratic_llama()
    kw = dict(target=target, n_steps=9, adaptive=False, baseline="zero", **RAW)
    res = ex.attribute(TEXT, method="aieg", **kw, **COMPLETE)
    alphas = torch.tensor(res.info["alphas"], dtype=torch.float64)
    ef = torch.tensor(res.info["ef"], dtype=torch.float64)[1:] / (alphas[1:] - alphas[:-1])
    assert bool(((ef > 0) & (ef < 1 - 1e-6)).all())  # no step clipped
    change = res.info["F_input"] - res.info["F_baseline"]
    assert abs(change) > 0.01  # the check is meaningful
    assert abs(float(res.scores.sum()) - change) <= 1e-4 * abs(change)
    fd = ex.attribute(TEXT, method="aieg", **kw)
    assert abs(float(fd.scores.sum()) - change) > 0.01 * abs(change)


@pytest.mark.parametrize("opts,msg", [
    (dict(COMPLETE, ef_norm="l1"), r"ef_mode='completeness' needs ef_norm='none' \(a normalisation would undo its completeness\), got 'l1'"),
    (dict(COMPLETE, ef_sign="relu"), r"ef_mode='completeness' needs ef_sign='abs' \(its weights are never negative\), got 'relu'"),
    (dict(COMPLETE, stream_ef=False), r"ef_mode='completeness' needs stream_ef=True"),
])
def test_bad_combinations_are_refused(tiny_llama, opts, msg):
    with pytest.raises(ValueError, match=msg):
        tiny_llama.attribute(TEXT, method="aieg", n_steps=4, **opts)


def test_ef_norm_defaults_to_the_modes_own():
    """Left out, ef_norm is "none" for the completeness mode and "l1" for the others; the
    options record the value used."""
    assert aieg_fast.method_options("aieg")["ef_norm"] is None
    opts = get_method("aieg").options
    assert opts(**COMPLETE).ef_norm == "none" and opts().ef_norm == "l1" and opts(ef_mode="none").ef_norm == "l1"
    assert opts(ef_norm="none").ef_norm == "none"


@pytest.mark.parametrize("reduction", ["l2", "sum_abs"])
def test_token_reductions_run(tiny_llama, reduction):
    """The streamed integral keeps [L, d] for the non-linear reductions; both agree with "sum" on
    which tokens are fixed (0) and are finite."""
    res = tiny_llama.attribute(TEXT, method="aieg", n_steps=6, token_reduction=reduction, **COMPLETE)
    assert torch.isfinite(res.scores).all() and res.scores.abs().sum() > 0
    assert all(float(s) == 0.0 for s, a in zip(res.scores, res.attributable) if not a)
