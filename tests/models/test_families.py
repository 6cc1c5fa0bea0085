"""The family × method matrix: for every model family with a spec in tests/families/ (one tiny
random-weight config each; GQA where the family has it):

* every registered family has a spec, and every spec's family is registered;
* F equals the model's own output (the logit after any soft-capping; the class logit of a head);
* the attention captured for ``attention`` / ``scaled_attention`` / AIEG equals the model's own
  eager attention probabilities (rows sum to 1, causal, sliding windows as the model applies them);
* positions run after a cached prefix (``prefix_keys_values`` / ``hidden_last_after``, HETA's
  curvature) give the final hidden state of the whole rows, for every family with a KV cache;
* q/k/v are read where the family computes them: attention rebuilt from the captured q and k
  (RoPE, q/k norms, fused projections, the GQA mapping) equals the model's, and Σ_k P v equals the
  captured input of the output projection;
* every registered method returns finite scores, and a batch equals single calls (left and right
  padding); generation rows equal per-prefix calls;
* the attention implementation, dtype and modes are the same after every call;
* a family without attention layers (Mamba) refuses the methods that need attention, with a
  message, and runs the others.
"""
from __future__ import annotations

import functools

import pytest
import torch

import aieg_fast
from aieg_fast.core.capture import AttentionCapture, ProjectionCapture
from aieg_fast.core.model_state import model_prepared
from aieg_fast.methods.grad_ellm import expand_kv
from aieg_fast.models import adapter_for, supported_model_types
from builders import family_specs, model_state

SPECS = family_specs()
NAMES = sorted(SPECS)
METHODS = aieg_fast.list_methods()
TEXT = "the movie is good and the actors are great"
SHORT = "the film was bad"
N = 4


@functools.lru_cache(maxsize=None)
def explainer(name: str, classifier: bool = False):
    return aieg_fast.load_model(*SPECS[name].build(classifier=classifier))


def _needs_attention(method: str) -> bool:
    m = aieg_fast.get_method(method)
    return m.needs_attention(m.options())


def _refuses(ex, call):
    before = model_state(ex)
    with pytest.raises(ValueError, match=r"needs attention layers, but .* has none \(.+\); use one of \["):
        call()
    assert model_state(ex) == before


def _ids(tok):
    return torch.tensor([tok(TEXT)["input_ids"]])


def test_specs_cover_the_registry():
    assert {s.model_type for s in SPECS.values()} == set(supported_model_types())


@pytest.mark.parametrize("head", ["lm", "classifier"])
@pytest.mark.parametrize("name", NAMES)
def test_F_equals_model_output(name, head):
    spec = SPECS[name]
    if head == "classifier" and spec.classifier is None:
        pytest.skip(f"{name} has no sequence-classification head in transformers")
    ex = explainer(name, head == "classifier")
    ad = ex.adapter
    ids = _ids(ex.tokenizer)
    with torch.no_grad():
        out = ex.model(ids).logits
        logits = out[0, -1] if ad.kind == "causal_lm" else out[0]
        h = ad.hidden_last(ad.embeddings(ids), None, None, None)
        torch.testing.assert_close(ad.full_logits(h)[0], logits, atol=1e-5, rtol=1e-5)
        for t in (0, 1, int(logits.argmax())):
            torch.testing.assert_close(ad.target_scores(h, torch.tensor([t]))[0], logits[t], atol=1e-5, rtol=1e-5)
    res = ex.attribute(TEXT, method="saliency")
    assert res.token_ids == ids[0].tolist()
    assert abs(res.info["F_input"] - float(logits[res.target["id"]])) < 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_rows_after_a_cached_prefix_equal_whole_rows(name):
    """hidden_last_after(kv, s, rows) = hidden_last of the whole rows, for rows that change one
    position ≥ s (two rows, so the cache is shared across a batch), under eager attention and the
    model's own implementation;
    a family without a KV cache says so."""
    ex = explainer(name)
    ad = ex.adapter
    if not ad.has_kv_cache:
        with pytest.raises(NotImplementedError, match="keeps no per-position keys and values"):
            ad.prefix_keys_values(ad.embeddings(_ids(ex.tokenizer)))
        return
    E = ad.embeddings(_ids(ex.tokenizer)).detach()
    n = E.shape[1]
    for eager in (True, False):  # eager, and the model's own implementation (SDPA where it has it)
        with model_prepared(ex.model, eager=eager), torch.no_grad():
            kv = ad.prefix_keys_values(E)
            for s in (0, 1, n // 2, n - 1):
                whole = E.expand(2, -1, -1).clone()
                whole[1, max(s, n - 2)] *= -0.5
                got = ad.hidden_last_after(kv, s, whole[:, s:])
                torch.testing.assert_close(got, ad.hidden_last(whole, None, None, None), atol=1e-5, rtol=1e-5)
                assert not torch.allclose(got[0], got[1])


@pytest.mark.parametrize("name", NAMES)
def test_captured_attention_equals_eager(name):
    model, tok = SPECS[name].build()  # its own model: output_attentions leaves hooks behind
    ad = adapter_for(model)
    if not ad.has_attention:
        pytest.skip(f"{name} has no attention layers ({ad.attention_free_reason})")
    model.set_attn_implementation("eager")
    ids = _ids(tok)
    L = ids.shape[1]
    layers = list(range(ad.n_layers))
    with AttentionCapture(ad, layers, full=True) as cap, torch.no_grad():
        model(ids)
        got = cap.pop()
    with torch.no_grad():
        ref = model(ids, output_attentions=True).attentions
    causal = torch.ones(L, L, dtype=torch.bool).triu(1)
    for l in layers:
        torch.testing.assert_close(got[l], ref[l], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(got[l].sum(-1), torch.ones_like(got[l][..., 0]), atol=1e-5, rtol=1e-5)
        assert float(got[l][..., causal].abs().max()) == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_qkv_read_where_the_family_computes_them(name):
    spec = SPECS[name]
    model, tok = spec.build(seed=1)
    ad = adapter_for(model)
    if not ad.has_attention:
        pytest.skip(f"{name} has no attention layers ({ad.attention_free_reason})")
    model.set_attn_implementation("eager")
    ids = _ids(tok)
    L, H, Hkv, d = ids.shape[1], ad.n_heads, ad.n_kv_heads, ad.head_dim
    layers = list(range(ad.n_layers))
    with ProjectionCapture(ad, layers, "pre_o", ad.has_rope) as cap, torch.no_grad():
        P_all = model(ids, output_attentions=True).attentions
        q, k, v, pe = cap.projections(layers)
        A = dict(cap.A)
    cap_logits = ad.attn_logit_softcap
    idx = torch.arange(L)
    for l in layers:
        P = P_all[l][0]  # [H, L, L]
        # the window the adapter declares is the one the model applies (keys t - w < i <= t)
        w = ad.sliding_window(l)
        seen = (idx[None, :] <= idx[:, None]) & ((idx[None, :] > idx[:, None] - w) if w else True)
        assert torch.equal(P > 0, seen.expand_as(P)), f"layer {l}: sliding_window() = {w} is not the model's mask"
        vx = expand_kv(v[l], H, Hkv, "grouped")[0].view(L, H, d)
        av = torch.einsum("hqk,khd->qhd", P, vx).reshape(L, H * d)
        torch.testing.assert_close(A[l][0], av, atol=1e-5, rtol=1e-4)
        if not spec.qk_rebuild:
            continue
        ql, kl = q[l], k[l]
        if ad.rotates(l):
            cos, sin = pe[l]
            ql, kl = ad.apply_rope(ql, cos, sin, H), ad.apply_rope(kl, cos, sin, Hkv)
        qh = ql[0].view(L, H, d).transpose(0, 1)
        kh = expand_kv(kl, H, Hkv, "grouped")[0].view(L, H, d).transpose(0, 1)
        s = (qh @ kh.transpose(1, 2)) * ad.attention_scaling(l)
        if cap_logits:
            s = torch.tanh(s / cap_logits) * cap_logits
        s = s.masked_fill(P == 0, float("-inf"))  # the model's own mask (causal, sliding window)
        torch.testing.assert_close(torch.softmax(s, -1), P, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", NAMES)
def test_every_method_batch_equals_single(name, method):
    ex = explainer(name)
    if _needs_attention(method) and not ex.adapter.has_attention:
        _refuses(ex, lambda: ex.attribute([TEXT, SHORT], method=method, n_steps=N))
        return
    before = model_state(ex) + ([p.dtype for p in ex.model.parameters()],)
    single = [ex.attribute(t, method=method, n_steps=N) for t in (TEXT, SHORT)]
    for s in single:
        # non-zero scores, or (Grad-ELLM, whose ReLU may zero a random model's row) non-zero
        # layer scores before the ReLU: the method saw a signal either way
        pre_relu = torch.tensor(s.info.get("layer_scores") or [[0.0]])
        assert torch.isfinite(s.scores).all() and (s.scores.abs().sum() > 0 or pre_relu.abs().sum() > 0)
    for side in ("right", "left"):
        batch = ex.attribute([TEXT, SHORT], method=method, n_steps=N, padding_side=side)
        for s, b in zip(single, batch):
            assert s.token_ids == b.token_ids and s.target == b.target
            torch.testing.assert_close(b.scores, s.scores, atol=2e-5, rtol=1e-3)
    assert model_state(ex) + ([p.dtype for p in ex.model.parameters()],) == before


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", NAMES)
def test_generation_rows_equal_per_prefix_calls(name, method):
    ex = explainer(name)
    prompt = "the movie is good"
    if _needs_attention(method) and not ex.adapter.has_attention:
        _refuses(ex, lambda: ex.attribute_generation(prompt, generated_text=" and", method=method, n_steps=N))
        return
    enc = ex.tokenizer(" and the actors", add_special_tokens=False, return_offsets_mapping=True)
    gen = enc["input_ids"][:2]
    prefix = " and the actors"[: enc["offset_mapping"][0][1]]  # the text of the first generated token
    res = ex.attribute_generation(prompt, generated_text=gen, method=method, n_steps=N)
    p_ids, _ = ex.encode(prompt)
    Lp = len(p_ids)
    for t, y in enumerate(gen):
        single = ex.attribute(prompt, method=method, target=y, n_steps=N, template="{text}" + (prefix if t else ""))
        assert single.token_ids == p_ids + gen[:t]
        attr = torch.tensor(single.attributable)
        torch.testing.assert_close(res.scores[t, : Lp + t][attr], single.scores[attr], atol=1e-5, rtol=1e-4)


def test_attention_free_family_runs_aieg_without_attention():
    names = [n for n in NAMES if not explainer(n).adapter.has_attention]
    assert names, "no attention-free family to check"
    for n in names:
        ex = explainer(n)
        res = ex.attribute(TEXT, method="aieg", n_steps=N, attn_layers="none")
        assert torch.isfinite(res.scores).all() and res.scores.abs().sum() > 0


@pytest.mark.parametrize("name", NAMES)
def test_hidden_states_with_return_dict_false(name):
    """A model whose config sets return_dict=False returns tuples: the hidden states are read the
    same (Mamba's adapter read .last_hidden_state only)."""
    model, tok = SPECS[name].build()
    ad = adapter_for(model)
    E = ad.embeddings(_ids(tok))
    with torch.no_grad():
        want = ad.hidden_states(E)
        model.config.return_dict = False
        torch.testing.assert_close(ad.hidden_states(E), want)
