"""Grad-ELLM (aieg_fast/grad_ellm.py) on the tiny GPT-2 and LLaMA models (specs/grad_ellm.md §5.1)."""
from __future__ import annotations

import math

import pytest
import torch

from builders import model_state as _model_state
from aieg_fast.methods import grad_ellm as GE
from aieg_fast.models.llama import rotate_half_rope

TEXT = "the movie is good and the actors are great"
SHORT = "the film was bad"
PROMPT = "the movie is good"
CONT = " and the actors are great"
PRESETS = ["consistent", "paper_v1", "corrected"]



def _no_param_grads(ex):
    return all(p.grad is None for p in ex.model.parameters())


# ------------------------------------------------------------------------------------------
# model left as it was
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", PRESETS)
def test_model_restored_and_no_param_grads(tiny, preset):
    ex = tiny
    before = _model_state(ex)
    ex.attribute(TEXT, method="grad_ellm", preset=preset, n_layers=2)
    assert _model_state(ex) == before
    assert _no_param_grads(ex)


def test_model_restored_after_exception(tiny, monkeypatch):
    ex = tiny
    before = _model_state(ex)

    def boom(*a, **k):  # fails after the hooks are in place and the forward has run
        raise RuntimeError("boom")

    monkeypatch.setattr(ex.adapter, "target_scores", boom)
    with pytest.raises(RuntimeError, match="boom"):
        ex.attribute(TEXT, method="grad_ellm", target=5)
    monkeypatch.undo()
    assert _model_state(ex) == before
    assert _no_param_grads(ex)
    # and the model still works normally
    res = ex.attribute(TEXT, method="grad_ellm")
    assert torch.isfinite(res.scores).all()


def test_bad_options(tiny_llama):
    ex = tiny_llama
    hooks = _model_state(ex)[3]  # transformers adds its own output-capturing hooks on a first call asking for hidden states
    with pytest.raises(ValueError, match="preset"):
        ex.attribute(TEXT, method="grad_ellm", preset="nope")
    with pytest.raises(ValueError, match="n_layers"):
        ex.attribute(TEXT, method="grad_ellm", n_layers=0)
    with pytest.raises(ValueError, match="n_layers"):
        ex.attribute(TEXT, method="grad_ellm", n_layers=3)
    with pytest.raises(ValueError, match="pre_o"):
        ex.attribute(TEXT, method="grad_ellm", lambda_mode="per_head_cosine_minmax", grad_source="post_o")
    with pytest.raises(ValueError, match="lambda_mode"):
        ex.attribute(TEXT, method="grad_ellm", lambda_mode="cosine")
    assert _model_state(ex)[3] == hooks


# ------------------------------------------------------------------------------------------
# batches with padding
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("preset", PRESETS)
def test_batch_equals_single(tiny, preset, padding_side):
    texts = [TEXT, SHORT]
    single = [tiny.attribute(t, method="grad_ellm", preset=preset, n_layers=2) for t in texts]
    batch = tiny.attribute(texts, method="grad_ellm", preset=preset, n_layers=2, padding_side=padding_side)
    for s, b in zip(single, batch):
        assert s.token_ids == b.token_ids and s.target == b.target
        torch.testing.assert_close(b.scores, s.scores, atol=2e-5, rtol=1e-3)


# ------------------------------------------------------------------------------------------
# KV expansion
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("lambda_mode", ["cosine_minmax", "per_head_cosine_minmax"])
def test_legacy_equals_grouped_on_mha(tiny_gpt2, n_layers, lambda_mode):
    ex = tiny_gpt2
    kw = dict(method="grad_ellm", n_layers=n_layers, lambda_mode=lambda_mode, grad_source="pre_o")
    a = ex.attribute(TEXT, kv_expansion="legacy", **kw)
    b = ex.attribute(TEXT, kv_expansion="grouped", **kw)
    assert float(a.scores.abs().sum()) > 0
    torch.testing.assert_close(a.scores, b.scores, atol=0, rtol=0)


def test_legacy_differs_from_grouped_with_gqa(tiny_llama):
    a = tiny_llama.attribute(TEXT, method="grad_ellm", kv_expansion="legacy")
    b = tiny_llama.attribute(TEXT, method="grad_ellm", kv_expansion="grouped")
    assert not torch.allclose(a.scores, b.scores)


def test_expand_kv_toy():
    # 2 KV heads of width 2: a = (a0, a1), b = (b0, b1); 4 query heads
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    torch.testing.assert_close(GE.expand_kv(x, 4, 2, "legacy"), torch.tensor([1.0, 2, 3, 4, 1, 2, 3, 4]))
    torch.testing.assert_close(GE.expand_kv(x, 4, 2, "grouped"), torch.tensor([1.0, 2, 1, 2, 3, 4, 3, 4]))
    assert GE.expand_kv(x, 2, 2, "legacy") is x


def test_grouped_mapping_matches_model_attention(tiny_llama):
    """Per-head probabilities rebuilt from captured q/k (RoPE via the model's rotary embedding,
    ``grouped`` KV expansion) equal the eager model's attention row of the last position."""
    ex = tiny_llama
    model = ex.model
    ad = ex.adapter
    ids = torch.tensor([ex.encode(TEXT)[0]])
    S = ids.shape[1]
    old = model.config._attn_implementation
    model.set_attn_implementation("eager")
    store = {}
    attn = ad.attn_modules[-1]
    hs = [
        attn.q_proj.register_forward_hook(lambda m, i, o: store.__setitem__("q", o.detach())),
        attn.k_proj.register_forward_hook(lambda m, i, o: store.__setitem__("k", o.detach())),
    ]
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_attentions=True, use_cache=False)
            pos = torch.arange(S).unsqueeze(0)
            cos, sin = model.model.rotary_emb(store["q"], pos)
    finally:
        for h in hs:
            h.remove()
        model.set_attn_implementation(old)
    probs = out.attentions[-1][0, :, -1, :]  # [H, S]
    H, Hkv, d = ad.n_heads, ad.n_kv_heads, attn.head_dim
    assert H != Hkv  # the test needs grouped-query attention
    q = rotate_half_rope(store["q"], cos, sin, H)[0, -1].view(H, d)
    k_rot = rotate_half_rope(store["k"], cos, sin, Hkv)[0]

    def rebuilt(mode):
        k = GE.expand_kv(k_rot, H, Hkv, mode).view(S, H, d)
        logits = torch.einsum("hd,shd->hs", q, k) * attn.scaling
        return torch.softmax(logits, -1)

    torch.testing.assert_close(rebuilt("grouped"), probs, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(rebuilt("legacy"), probs, atol=1e-3)


# ------------------------------------------------------------------------------------------
# literal reference of the supplied equations (straightforward loops, batch of one)
# ------------------------------------------------------------------------------------------
def _literal_reference(ex, text, target, *, layers, lambda_mode, grad_source, kv_expansion, relu, rope):
    """Grad-ELLM for one LLaMA example, written out position by position and channel by channel."""
    model = ex.model
    ids = torch.tensor([ex.encode(text)[0]])
    S = ids.shape[1]
    cfg = model.config
    H, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
    d = cfg.hidden_size // H
    rep = H // Hkv
    store = {l: {} for l in layers}
    handles = []
    for l in layers:
        attn = model.model.layers[l].self_attn

        def save(name, l=l):
            def hook(m, i, o):
                store[l][name] = o
            return hook

        handles.append(attn.q_proj.register_forward_hook(save("q")))
        handles.append(attn.k_proj.register_forward_hook(save("k")))
        handles.append(attn.v_proj.register_forward_hook(save("v")))
        if grad_source == "post_o":
            handles.append(attn.register_forward_hook(lambda m, i, o, l=l: store[l].__setitem__("A", o[0])))
        else:
            handles.append(attn.o_proj.register_forward_pre_hook(lambda m, a, l=l: store[l].__setitem__("A", a[0])))
    try:
        logit = model(input_ids=ids, use_cache=False).logits[0, -1, target]
        grads = torch.autograd.grad(logit, [store[l]["A"] for l in layers])
        cos_t, sin_t = model.model.rotary_emb(ids.float(), torch.arange(S).unsqueeze(0))
    finally:
        for h in handles:
            h.remove()
    cos_t, sin_t = cos_t[0].tolist(), sin_t[0].tolist()

    def rotate(vec, n_heads, pos):
        if not rope:
            return list(vec)
        out = []
        for h in range(n_heads):
            x = vec[h * d : (h + 1) * d]
            for j in range(d):
                r = -x[j + d // 2] if j < d // 2 else x[j - d // 2]
                out.append(x[j] * cos_t[pos][j] + r * sin_t[pos][j])
        return out

    def expanded(vec, c):
        h, j = divmod(c, d)
        if kv_expansion == "legacy":
            return vec[c % (Hkv * d)]
        return vec[(h // rep) * d + j]

    def minmax(xs):
        lo, hi = min(xs), max(xs)
        return [0.0] * len(xs) if hi == lo else [(x - lo) / (hi - lo) for x in xs]

    D = H * d
    total = [0.0] * S
    for l, G in zip(layers, grads):
        q = rotate(store[l]["q"][0, -1].tolist(), H, S - 1)
        K = [rotate(store[l]["k"][0, i].tolist(), Hkv, i) for i in range(S)]
        V = [store[l]["v"][0, i].tolist() for i in range(S)]
        g = G[0, -1].tolist()
        if lambda_mode == "cosine_minmax":
            nq = math.sqrt(sum(x * x for x in q))
            cs = []
            for i in range(S):
                kk = [expanded(K[i], c) for c in range(D)]
                cs.append(sum(q[c] * kk[c] for c in range(D)) / (nq * math.sqrt(sum(x * x for x in kk))))
            lam = minmax(cs)
            s = [lam[i] * sum(g[c] * expanded(V[i], c) for c in range(D)) for i in range(S)]
        else:  # per_head_cosine_minmax
            lam_h = []
            for h in range(H):
                qh = q[h * d : (h + 1) * d]
                cs = []
                for i in range(S):
                    kh = [expanded(K[i], c) for c in range(h * d, (h + 1) * d)]
                    dot = sum(a * b for a, b in zip(qh, kh))
                    cs.append(dot / (math.sqrt(sum(a * a for a in qh)) * math.sqrt(sum(b * b for b in kh))))
                lam_h.append(minmax(cs))
            s = []
            for i in range(S):
                acc = 0.0
                for h in range(H):
                    acc += lam_h[h][i] * sum(g[c] * expanded(V[i], c) for c in range(h * d, (h + 1) * d))
                s.append(acc)
        total = [t + (max(x, 0.0) if relu == "per_layer" else x) for t, x in zip(total, s)]
    if relu == "after_sum":
        total = [max(x, 0.0) for x in total]
    return torch.tensor(total, dtype=torch.float32)


REF_CASES = {
    "default": dict(),
    "consistent_two_layers": dict(preset="consistent", n_layers=2),
    "paper_v1": dict(preset="paper_v1"),
    "corrected": dict(preset="corrected"),
    "paper_v1_two_layers": dict(preset="paper_v1", n_layers=2),
    "corrected_two_layers_after_sum": dict(preset="corrected", n_layers=2, relu="after_sum"),
    "corrected_no_rope_legacy": dict(preset="corrected", rope=False, kv_expansion="legacy"),
}


@pytest.mark.parametrize("case", list(REF_CASES))
def test_matches_literal_reference(tiny_llama, case):
    ex = tiny_llama
    opts = REF_CASES[case]
    res = ex.attribute(TEXT, method="grad_ellm", **opts)
    o = res.options
    N = ex.adapter.n_layers
    assert o["layers"] == list(range(N - o["n_layers"], N))
    ref = _literal_reference(
        ex, TEXT, res.target["id"], layers=o["layers"], lambda_mode=o["lambda_mode"], grad_source=o["grad_source"],
        kv_expansion=o["kv_expansion"], relu=o["relu"], rope=o["rope"],
    )
    attr = torch.tensor(res.attributable)
    assert not attr[0] and float(res.scores[0]) == 0.0  # BOS is fixed and scores 0
    assert float(ref[attr].abs().sum()) > 0
    torch.testing.assert_close(res.scores[attr], ref[attr], atol=1e-5, rtol=1e-4)
    assert _no_param_grads(ex)


def test_preset_settings(tiny_llama):
    def resolved(**kw):
        o = tiny_llama.attribute(TEXT, method="grad_ellm", **kw).options
        return o["preset"], (o["n_layers"], o["lambda_mode"], o["grad_source"], o["kv_expansion"], o["relu"], o["rope"])

    # the default pairs pre-o_proj gradients with pre-o_proj values, KV heads as the model maps them
    assert resolved() == ("consistent", (1, "cosine_minmax", "pre_o", "grouped", "per_layer", False))
    assert GE.GradELLMOptions().preset == "consistent"
    # paper_v1: the public port's pairing (post-o_proj gradient, legacy KV tiling)
    assert resolved(preset="paper_v1") == ("paper_v1", (1, "cosine_minmax", "post_o", "legacy", "per_layer", False))
    assert resolved(preset="corrected") == ("corrected", (1, "per_head_cosine_minmax", "pre_o", "grouped", "per_layer", True))
    # consistent = paper_v1 with only grad_source and kv_expansion changed
    diff = {k for k in GE.PRESETS["paper_v1"] if GE.PRESETS["paper_v1"][k] != GE.PRESETS["consistent"][k]}
    assert diff == {"grad_source", "kv_expansion"}


def _gpt2_pre_and_post_o_scores(ex, text, target):
    """Last-layer Grad-ELLM of the tiny GPT-2 (MHA, no RoPE) from tensors captured here with
    plain hooks: λ = min-max of cos(q_t, k_i), times V·g with g the gradient of the target logit
    at the input of ``c_proj`` (pre_o) or at the attention output (post_o). Returns (pre, post)."""
    model = ex.model
    ids = torch.tensor([ex.encode(text)[0]])
    attn = model.transformer.h[-1].attn
    store = {}
    hs = [
        attn.c_attn.register_forward_hook(lambda m, i, o: store.__setitem__("qkv", o)),
        attn.c_proj.register_forward_pre_hook(lambda m, a: store.__setitem__("pre", a[0])),
        attn.register_forward_hook(lambda m, i, o: store.__setitem__("post", o[0])),
    ]
    try:
        logit = model(input_ids=ids, use_cache=False).logits[0, -1, target]
        g_pre, g_post = torch.autograd.grad(logit, [store["pre"], store["post"]])
    finally:
        for h in hs:
            h.remove()
    q, k, v = store["qkv"].detach()[0].split(model.config.n_embd, dim=-1)
    cos = torch.nn.functional.cosine_similarity(q[-1:], k, dim=-1)
    lam = (cos - cos.min()) / (cos.max() - cos.min())
    return [(lam * (v @ g[0, -1])).clamp_min(0) for g in (g_pre, g_post)]


def test_default_pairs_pre_o_gradient_paper_v1_post_o(tiny_gpt2):
    """The default (consistent) is λ·(V g) with g taken before the output projection, the
    channels V lives in; paper_v1 takes g after it. Checked against tensors captured here."""
    ex = tiny_gpt2
    default = ex.attribute(TEXT, method="grad_ellm")
    paper = ex.attribute(TEXT, method="grad_ellm", preset="paper_v1")
    assert default.target == paper.target
    pre, post = _gpt2_pre_and_post_o_scores(ex, TEXT, default.target["id"])
    assert all(default.attributable) and float(pre.sum()) > 0 and float(post.sum()) > 0
    torch.testing.assert_close(default.scores, pre, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(paper.scores, post, atol=1e-5, rtol=1e-4)
    # the two pairings give different scores on this model, so the checks above tell them apart
    assert not torch.allclose(pre, post, atol=1e-3, rtol=1e-2)
    # on GPT-2 (no GQA, no RoPE) the presets differ only in grad_source
    same = ex.attribute(TEXT, method="grad_ellm", preset="paper_v1", grad_source="pre_o")
    torch.testing.assert_close(same.scores, default.scores, atol=0, rtol=0)


def test_default_runs_where_query_width_differs_from_hidden():
    """A Qwen3 with head_dim 16 (query width 64, hidden 32): the default (pre_o) runs and equals
    its batch; paper_v1 (post_o) is refused with a message naming pre_o."""
    from builders import family_specs

    import aieg_fast

    ex = aieg_fast.load_model(*family_specs()["qwen3-wide_heads"].build())
    ad = ex.adapter
    assert ad.n_heads * ad.head_dim != ad.hidden_size
    single = [ex.attribute(t, method="grad_ellm") for t in (TEXT, SHORT)]
    batch = ex.attribute([TEXT, SHORT], method="grad_ellm", padding_side="left")
    for s, b in zip(single, batch):
        pre_relu = torch.tensor(s.info["layer_scores"])
        assert torch.isfinite(s.scores).all() and float(pre_relu.abs().sum()) > 0
        torch.testing.assert_close(b.scores, s.scores, atol=2e-5, rtol=1e-3)
    with pytest.raises(ValueError, match="query width 64 != hidden size 32; use grad_source='pre_o'"):
        ex.attribute(TEXT, method="grad_ellm", preset="paper_v1")


# ------------------------------------------------------------------------------------------
# λ on hand-computed toys
# ------------------------------------------------------------------------------------------
def test_lambda_minmax_toy():
    q = torch.tensor([[1.0, 0.0]])
    k = torch.tensor([[[2.0, 0.0], [0.0, 3.0], [-1.0, 0.0], [5.0, 5.0]]])
    valid = torch.tensor([[True, True, True, False]])
    # cos = (1, 0, -1), the 4th key is invisible -> min-max (1, 0.5, 0) and 0
    lam = GE.spatial_weights(q, k, valid, "cosine_minmax", n_heads=1)
    torch.testing.assert_close(lam, torch.tensor([[1.0, 0.5, 0.0, 0.0]]))
    # softmax over the full width: logits q·k/√2 = (2, 0, -1)/√2
    sm = GE.spatial_weights(q, k, valid, "softmax", n_heads=1)
    e = torch.exp(torch.tensor([2.0, 0.0, -1.0]) / math.sqrt(2))
    torch.testing.assert_close(sm, torch.cat([e / e.sum(), torch.zeros(1)]).unsqueeze(0))
    # two heads of width 1: head 0 sees (2, 0, -1), head 1 sees (0, 3, 0) against q = (1, 1)
    q2 = torch.tensor([[1.0, 1.0]])
    ph = GE.spatial_weights(q2, k, valid, "per_head_cosine_minmax", n_heads=2)
    # per-head cosine of 1-d vectors is the sign: head 0 (1, 0, -1) -> (1, .5, 0); head 1 (0, 1, 0)
    torch.testing.assert_close(ph, torch.tensor([[[1.0, 0.5, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]]))
    hm = GE.spatial_weights(q2, k, valid, "headmean_minmax", n_heads=2, scaling=0.5)
    # mean over heads of (2, 0, -1) and (0, 3, 0) = (1, 1.5, -0.5) -> (0.75, 1, 0)
    torch.testing.assert_close(hm, torch.tensor([[0.75, 1.0, 0.0, 0.0]]))
    # with the model's attention-logit soft-cap c = 1 (Gemma-2): per-head scaled logits
    # (1, 0, -0.5) and (0, 1.5, 0) -> tanh -> head mean -> min-max
    capped = GE.spatial_weights(q2, k, valid, "headmean_minmax", n_heads=2, scaling=0.5, softcap=1.0)
    m = (torch.tanh(torch.tensor([1.0, 0.0, -0.5])) + torch.tanh(torch.tensor([0.0, 1.5, 0.0]))) / 2
    expect = (m - m.min()) / (m.max() - m.min())
    torch.testing.assert_close(capped, torch.cat([expect, torch.zeros(1)]).unsqueeze(0))
    assert not torch.allclose(capped, hm)


def test_constant_similarity_gives_zeros(tiny_gpt2):
    k = torch.tensor([[[1.0, 2.0], [2.0, 4.0], [0.5, 1.0]]])
    lam = GE.spatial_weights(torch.tensor([[3.0, -1.0]]), k, torch.ones(1, 3, dtype=torch.bool), "cosine_minmax", 1)
    assert torch.equal(lam, torch.zeros(1, 3))
    assert torch.equal(GE.masked_minmax(torch.tensor([2.0, 4.0, 3.0]), torch.tensor([True, True, True])), torch.tensor([0.0, 1.0, 0.5]))
    # a one-token prompt (no BOS on the GPT-2 tokenizer): the only key -> λ = 0 -> score 0
    res = tiny_gpt2.attribute("the", method="grad_ellm")
    assert len(res.token_ids) == 1 and res.attributable == [True]
    assert torch.equal(res.scores, torch.zeros(1))


# ------------------------------------------------------------------------------------------
# scores, attention implementations
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "opts",
    [
        dict(preset="paper_v1"),
        dict(preset="corrected", n_layers="all"),
        dict(lambda_mode="softmax", n_layers=2, relu="after_sum"),
        dict(lambda_mode="headmean_minmax", grad_source="pre_o", kv_expansion="grouped"),
    ],
)
def test_scores_nonnegative_finite(tiny, opts):
    res = tiny.attribute([TEXT, SHORT], method="grad_ellm", **opts)
    assert any(float(r.scores.sum()) > 0 for r in res)  # a random model may give all-negative s for one text
    for r in res:
        assert torch.isfinite(r.scores).all() and (r.scores >= 0).all()
        fixed = ~torch.tensor(r.attributable)
        assert torch.equal(r.scores[fixed], torch.zeros(int(fixed.sum())))
        assert math.isfinite(r.info["F_input"]) and 0 < r.info["target_prob"] <= 1


@pytest.mark.parametrize("preset", PRESETS)
def test_sdpa_equals_eager(tiny, preset):
    ex = tiny
    old = ex.model.config._attn_implementation
    assert old == "sdpa"
    a = ex.attribute([TEXT, SHORT], method="grad_ellm", preset=preset, n_layers=2, padding_side="left")
    ex.model.set_attn_implementation("eager")
    try:
        b = ex.attribute([TEXT, SHORT], method="grad_ellm", preset=preset, n_layers=2, padding_side="left")
    finally:
        ex.model.set_attn_implementation(old)
    for x, y in zip(a, b):
        torch.testing.assert_close(x.scores, y.scores, atol=2e-5, rtol=1e-3)


# ------------------------------------------------------------------------------------------
# per-step generation
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", PRESETS)
def test_generation_rows_equal_prefix_calls(tiny_llama, preset):
    ex = tiny_llama
    gen = ex.tokenizer(CONT, add_special_tokens=False)["input_ids"]
    enc = ex.tokenizer(CONT, add_special_tokens=False, return_offsets_mapping=True)
    ends = [e for _, e in enc["offset_mapping"]]
    prefixes = [""] + [CONT[: ends[t - 1]] for t in range(1, len(ends))]
    res = ex.attribute_generation(PROMPT, generated_text=gen, method="grad_ellm", preset=preset, interpolate_generated=True)
    Lp = len(ex.encode(PROMPT)[0])
    assert res.scores.shape == (len(gen), Lp + len(gen))
    assert res.options["preset"] == preset
    for t, y in enumerate(gen):
        single = ex.attribute(PROMPT + prefixes[t], method="grad_ellm", target=y, preset=preset)
        assert single.token_ids == res.token_ids[: Lp + t]
        row = res.scores[t, : Lp + t]
        attr = torch.tensor(single.attributable)
        torch.testing.assert_close(row[attr], single.scores[attr], atol=1e-5, rtol=1e-4)
        assert torch.isnan(res.scores[t, Lp + t :]).all()


def test_generation_greedy(tiny_llama):
    ex = tiny_llama
    before = _model_state(ex)
    res = ex.attribute_generation(PROMPT, max_new_tokens=3, method="grad_ellm")
    assert res.scores.shape[0] == len(res.info["generated_ids"]) >= 1
    vals = res.scores[torch.isfinite(res.scores)]
    assert vals.numel() > 0 and (vals >= 0).all()
    assert _model_state(ex) == before and _no_param_grads(ex)


def test_rope_recorded_as_applied(tiny_gpt2, tiny_llama):
    """rope=True on a model without RoPE (GPT-2) applies none: the record says so; a RoPE model
    records what it was asked."""
    off = tiny_gpt2.attribute("the movie was", method="grad_ellm", rope=True)
    on = tiny_gpt2.attribute("the movie was", method="grad_ellm", rope=False)
    assert off.options["rope"] is False
    torch.testing.assert_close(torch.as_tensor(off.scores), torch.as_tensor(on.scores))
    assert tiny_llama.attribute("the movie was", method="grad_ellm", rope=True).options["rope"] is True
