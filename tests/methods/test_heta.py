"""HETA (issue 20, specs/heta.md): the batched HVPs equal one-at-a-time HVPs and a finite
difference of the gradient; grouped-query value norms equal the expanded-heads computation and
rebuild the model's attention output; the row-vector rollout equals the matrix rollout; the
information term is occlusion's KL; components, weights, windows, chunks and the last-k-layers
option behave as documented; both presets run on every family; bad options are refused."""
from __future__ import annotations

import math

import pytest
import torch

import aieg_fast
from aieg_fast.core.capture import ProjectionCapture
from aieg_fast.core.curvature import hvp_groups, rademacher_probes
from aieg_fast.core.model_state import model_prepared
from aieg_fast.core.value_flow import residual_values, rollout_rows, value_norms
from aieg_fast.methods.heta import windows
from builders import family_specs, make_tiny_llama, model_state

TEXT = "the movie is good and the actors are great"
SHORT = "the film was bad"
SPECS = family_specs()


def _attr_positions(fixed):
    return torch.tensor([i for i, f in enumerate(fixed) if not f])


# ------------------------------------------------------------------------------------------
# curvature: batched HVPs, finite differences
# ------------------------------------------------------------------------------------------
def _one_at_a_time_curvature(ex, text, target, m):
    """S_i of every attributable token the straightforward way: the whole sequence, one HVP per
    (token, probe) with a plain double backward, f = log p(target) at the last position."""
    ad = ex.adapter
    ids, fixed = ex.encode(text)
    X = ad.embeddings(torch.tensor([ids])).detach().requires_grad_(True)
    S = torch.zeros(len(ids))
    with model_prepared(ex.model, eager=True), torch.enable_grad():  # SDPA has no double backward
        f = torch.log_softmax(ad.full_logits(ad.hidden_last(X, None, None, None)).float(), -1)[0, target]
        (g,) = torch.autograd.grad(f, X, create_graph=True)
        for i in _attr_positions(fixed).tolist():
            r = rademacher_probes([i], m, X.shape[-1], 0)[0]
            for k in range(m):
                R = torch.zeros_like(X)
                R[0, i] = r[k]
                (hr,) = torch.autograd.grad(g, X, grad_outputs=R, retain_graph=True)
                S[i] += float(hr[0, i].abs().sum()) / m
    return S, fixed


@pytest.mark.parametrize("family", ["llama", "gpt2", "mamba"])
@pytest.mark.parametrize("ibs", [1, 4, 64])
def test_batched_hvps_equal_one_at_a_time(tiny_llama, tiny_gpt2, family, ibs):
    """The curvature of a padded batch, with the HVPs run after a cached prefix, several tokens
    per double backward (ibs = 64), or a token's probes split over calls (ibs = 1), equals
    one-at-a-time HVPs on the whole sequence; Mamba (no KV cache) runs whole sequences."""
    ex = {"llama": tiny_llama, "gpt2": tiny_gpt2}.get(family) or aieg_fast.load_model(*SPECS["mamba"].build(seed=1))
    m, target = 3, 5
    texts = [TEXT, SHORT]
    res = ex.attribute(texts, method="heta", components="curvature", n_probes=m, target=target, internal_batch_size=ibs,
                       padding_side="left")
    for r, text in zip(res, texts):
        S, fixed = _one_at_a_time_curvature(ex, text, target, m)
        torch.testing.assert_close(torch.tensor(r.info["curvature"]), S, atol=1e-6, rtol=1e-4)
        assert float(S[~torch.tensor(fixed)].min()) > 0 and r.info["n_hvp"] == m * (len(fixed) - sum(fixed))


def test_hvp_groups():
    # budget 40 position rows, m = 2, n = 10: a row from 2 is 8 long -> 2 tokens (32 rows); within 8 / 4 = 2 of start
    assert hvp_groups([2, 3, 4, 5, 9], 10, 2, 40, True) == [(2, [2, 3], 2), (4, [4, 5], 2), (9, [9], 2)]
    assert hvp_groups([2, 3, 9], 10, 2, 40, False) == [(0, [2], 2), (0, [3], 2), (0, [9], 2)]  # whole rows: 20 each
    assert hvp_groups([1, 8], 10, 4, 20, True) == [(1, [1], 2), (8, [8], 4)]  # 9 positions: 2 probes per call
    assert hvp_groups([0], 10, 3, 5, True) == [(0, [0], 1)]  # never fewer than one probe per call
    assert hvp_groups([], 10, 3, 50, True) == []


def test_probes_depend_on_seed_and_token_index_only():
    a = rademacher_probes([0, 1, 2], 4, 8, 3)
    b = rademacher_probes([2], 4, 8, 3)
    assert set(a.unique().tolist()) == {-1.0, 1.0}
    assert torch.equal(a[2], b[0]) and not torch.equal(a[0], a[1])
    assert not torch.equal(rademacher_probes([2], 4, 8, 4), b)


def test_curvature_equals_finite_differences_of_the_gradient():
    """S_i from the batched double backward equals (1/m) Σ_k ‖[∇f(x + εr_k) − ∇f(x − εr_k)]_i / 2ε‖₁
    on a float64 model (f = log p(target)); a wrong block, probe or scale is off by O(1)."""
    model, tok = make_tiny_llama(seed=2)
    ex = aieg_fast.load_model(model.double(), tok)
    m, target = 3, 5
    res = ex.attribute(TEXT, method="heta", components="curvature", target=target, n_probes=m)
    ids, fixed = ex.encode(TEXT)
    E = ex.adapter.embeddings(torch.tensor(ids)).detach()

    def grad(X):
        X = X.clone().requires_grad_(True)
        with torch.enable_grad():
            lp = torch.log_softmax(ex.model(inputs_embeds=X.unsqueeze(0)).logits[0, -1], -1)[target]
            return torch.autograd.grad(lp, X)[0]

    eps = 1e-4
    for i in _attr_positions(fixed).tolist():
        r = rademacher_probes([i], m, E.shape[-1], 0)[0].double()
        fd = 0.0
        for k in range(m):
            R = torch.zeros_like(E)
            R[i] = r[k]
            fd += float(((grad(E + eps * R) - grad(E - eps * R))[i] / (2 * eps)).abs().sum()) / m
        # F's log-softmax runs in float32 (the package's target_scores), hence 5e-4 and not 1e-8
        assert res.info["curvature"][i] == pytest.approx(fd, rel=5e-4)
    assert all(res.info["curvature"][i] == 0.0 for i, f in enumerate(fixed) if f)


@pytest.mark.parametrize("which", ["gpt2", "llama"])
def test_curvature_on_all_layers_equals_the_embeddings(tiny_gpt2, tiny_llama, which):
    """The residual stream entering block 0 is the embeddings (plus fixed positions for GPT-2),
    so curvature_layers = n_layers gives the embedding curvature."""
    ex = tiny_gpt2 if which == "gpt2" else tiny_llama
    a = ex.attribute(TEXT, method="heta", components="curvature", n_probes=2)
    b = ex.attribute(TEXT, method="heta", components="curvature", n_probes=2, curvature_layers=ex.adapter.n_layers)
    c = ex.attribute(TEXT, method="heta", components="curvature", n_probes=2, curvature_layers=1)
    torch.testing.assert_close(torch.tensor(b.info["curvature"]), torch.tensor(a.info["curvature"]), atol=1e-5, rtol=1e-4)
    assert not torch.allclose(torch.tensor(c.info["curvature"]), torch.tensor(a.info["curvature"]), rtol=1e-2)


# ------------------------------------------------------------------------------------------
# gate: value norms, rollout
# ------------------------------------------------------------------------------------------
def _expanded_norms(v, W, H, Hkv):
    """Each query head h given its own copy of KV head h // (H / Hkv), then one head at a time."""
    B, L, _ = v.shape
    hd = W.shape[0] // H
    vh = v.view(B, L, Hkv, hd).repeat_interleave(H // Hkv, dim=2)  # [B, L, H, hd]
    return torch.stack([(vh[:, :, h] @ W[h * hd : (h + 1) * hd]).abs().sum(-1) for h in range(H)], 1)


def test_gqa_value_norms_equal_expanded_heads():
    g = torch.Generator().manual_seed(0)
    B, L, H, Hkv, hd, D = 2, 5, 6, 2, 4, 7
    v = torch.randn(B, L, Hkv * hd, generator=g)
    W = torch.randn(H * hd, D, generator=g)
    got = value_norms(v, W, H, Hkv, max_elements=20)  # small chunks on purpose
    torch.testing.assert_close(got, _expanded_norms(v, W, H, Hkv))
    tiled = torch.cat([v] * (H // Hkv), -1)  # the other mapping (query head h reads KV head h mod Hkv) differs
    assert not torch.allclose(got, _expanded_norms(tiled, W, H, H))
    with pytest.raises(ValueError, match="does not match"):
        value_norms(v, W, 5, Hkv)


ATTN_FAMILIES = [n for n in sorted(SPECS) if n != "mamba"]


@pytest.mark.parametrize("name", ATTN_FAMILIES)
def test_value_norm_pieces_rebuild_the_attention_output(name):
    """Σ_h Σ_i P[h, t, i] · (v_i^{kv(h)} W_O^h) + bias equals the attention module's output: the
    captured values, the grouped-query mapping and the output projection are the model's."""
    model, tok = SPECS[name].build(seed=1)
    ex = aieg_fast.load_model(model, tok)
    ad = ex.adapter
    model.set_attn_implementation("eager")
    ids = torch.tensor([tok(TEXT)["input_ids"]])
    layers = list(range(ad.n_layers))
    H, Hkv, hd = ad.n_heads, ad.n_kv_heads, ad.head_dim
    with ProjectionCapture(ad, layers, "post_o", False) as cap, torch.no_grad():
        P = model(ids, output_attentions=True).attentions
        out = {l: cap.A[l].detach() for l in layers}
        v = dict(cap.v)
    for l in layers:
        W = ad.output_projection(l)
        vh = v[l][0].view(-1, Hkv, hd).repeat_interleave(H // Hkv, dim=1)  # [L, H, hd]
        per = torch.einsum("lhd,hdo->lho", vh, W.view(H, hd, -1))  # v_i^{kv(h)} W_O^h
        bias = ad.o_proj(l)(torch.zeros(1, H * hd))[0].detach()
        rebuilt = torch.einsum("hti,iho->to", P[l][0], per) + bias
        torch.testing.assert_close(rebuilt, out[l][0], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(value_norms(v[l], W, H, Hkv)[0], per.abs().sum(-1).t(), atol=1e-5, rtol=1e-5)


def test_residual_values_are_the_value_projection_without_bias(tiny_llama):
    ex = tiny_llama
    ad = ex.adapter
    ids = torch.tensor([ex.tokenizer(TEXT)["input_ids"]])
    with ProjectionCapture(ad, [1], None, False) as cap, torch.no_grad():
        hs = ex.model(ids, output_hidden_states=True).hidden_states
        point = cap.v_point[1]
    x = hs[1]  # the residual stream entering block 1
    torch.testing.assert_close(residual_values(point, x), x @ ad.attn_modules[1].v_proj.weight.t())


def _matrix_rollout(attn, t, per_head):
    rows = []
    H, L = attn[0].shape[1], attn[0].shape[-1]
    R = torch.eye(L).expand(H if per_head else 1, L, L)
    for A in attn:
        A = A[0] if per_head else A[0].mean(0, keepdim=True)
        Ah = 0.5 * A + 0.5 * torch.eye(L)
        R = (Ah / Ah.sum(-1, keepdim=True)) @ R
        rows.append(R[:, t])
    return torch.stack(rows, 1)  # [Hr, N, L]


@pytest.mark.parametrize("per_head", [False, True])
def test_row_vector_rollout_equals_the_matrix_rollout(per_head):
    g = torch.Generator().manual_seed(1)
    L, H, N = 7, 3, 4
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool))
    attn = [torch.softmax(torch.randn(1, H, L, L, generator=g).masked_fill(~causal, float("-inf")), -1) for _ in range(N)]
    for t in (L - 1, 3):
        got = rollout_rows(attn, torch.tensor([t]), per_head)[0]
        torch.testing.assert_close(got, _matrix_rollout(attn, t, per_head), atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------------------------------------
# the method
# ------------------------------------------------------------------------------------------
def test_components_weights_and_norms(tiny_llama):
    ex = tiny_llama
    full = ex.attribute(TEXT, method="heta", n_probes=2)
    keep = torch.tensor(full.attributable)
    M, S, I = (torch.tensor(full.info[k]) for k in ("gate", "curvature", "information"))
    torch.testing.assert_close(full.scores, torch.where(keep, M * (0.5 * S + 0.5 * I), torch.zeros_like(M)))
    assert float(M[keep].sum()) == pytest.approx(1.0, abs=1e-5) and float(full.scores.min()) >= 0
    gate = ex.attribute(TEXT, method="heta", components="gate")
    torch.testing.assert_close(gate.scores, M)
    assert gate.info["n_hvp"] == 0 and "curvature" not in gate.info
    w = ex.attribute(TEXT, method="heta", n_probes=2, components=["curvature", "information"], beta=2.0, gamma=0.0)
    torch.testing.assert_close(w.scores, torch.where(keep, 2.0 * S, torch.zeros_like(S)), atol=1e-5, rtol=1e-5)
    n = ex.attribute(TEXT, method="heta", n_probes=2, component_norm="sum")
    torch.testing.assert_close(n.scores, torch.where(keep, M * (0.5 * S / S[keep].sum() + 0.5 * I / I[keep].sum()), torch.zeros_like(M)))


def test_information_is_occlusion_kl_with_a_zero_mask(tiny_gpt2):
    ex = tiny_gpt2
    h = ex.attribute(TEXT, method="heta", components="information")
    o = ex.attribute(TEXT, method="occlusion", measure="kl", baseline="zero")
    torch.testing.assert_close(torch.tensor(h.info["information"]), o.scores)
    assert h.options["baseline"] == "zero"
    u = ex.attribute(TEXT, method="heta", components="information", baseline="mean")
    torch.testing.assert_close(u.scores, 0.5 * ex.attribute(TEXT, method="occlusion", measure="kl", baseline="mean").scores)


def test_counts_chunks_and_options_recorded(tiny_llama):
    ex = tiny_llama
    a = ex.attribute(TEXT, method="heta", n_probes=3, internal_batch_size=4)
    b = ex.attribute(TEXT, method="heta", n_probes=3)
    torch.testing.assert_close(a.scores, b.scores, atol=1e-6, rtol=1e-5)
    n, L = sum(a.attributable), len(a.attributable)
    plan = hvp_groups([i for i in range(L) if a.attributable[i]], L, 3, 4 * L, True)
    # the reference forward; n masked inputs and n curvature rows, each after a prefix forward
    assert a.info["n_hvp"] == 3 * n and a.info["n_forwards"] == 2 * n + 3
    assert a.info["hvp_batches"] == sum(math.ceil(3 / per) for _, _, per in plan) < 3 * n
    assert a.options["preset"] == "paper" and a.options["rollout"] == "head_mean" and a.options["objective"] == "logprob"
    o = ex.attribute(TEXT, method="heta", n_probes=3, preset="official")
    assert (o.options["rollout"], o.options["value_source"], o.options["gate_norm"]) == ("per_head", "residual", "context")
    assert not torch.allclose(o.scores, b.scores)
    assert ex.attribute(TEXT, method="heta", n_probes=3, probe_seed=1).info["curvature"] != b.info["curvature"]


def test_objective_follows_the_call(tiny_llama):
    ex = tiny_llama
    lp = ex.attribute(TEXT, method="heta", components="curvature", n_probes=2, target=5, target_fn="logprob")
    auto = ex.attribute(TEXT, method="heta", components="curvature", n_probes=2, target=5)
    logit = ex.attribute(TEXT, method="heta", components="curvature", n_probes=2, target=5, objective="target_fn")
    torch.testing.assert_close(lp.scores, auto.scores)
    assert lp.options["objective"] == "target_fn" and auto.options["objective"] == "logprob"
    assert not torch.allclose(logit.scores, auto.scores)


def test_windows():
    assert windows(10, 4, 0.5) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert windows(10, 4, 0.0) == [(0, 4), (4, 8), (8, 10)]
    assert windows(3, 4, 0.5) == [(0, 3)] and windows(5, None, 0.5) == [(0, 5)]


def test_windowed_scores(tiny_llama):
    ex = tiny_llama
    whole = ex.attribute(TEXT, method="heta", n_probes=2)
    n = sum(whole.attributable)
    same = ex.attribute(TEXT, method="heta", n_probes=2, window=n)
    torch.testing.assert_close(same.scores, whole.scores)
    assert not same.options["windowed"]
    win = ex.attribute([TEXT, SHORT], method="heta", n_probes=2, window=4, window_overlap=0.5, template="Review: {text} Answer:")
    for r in win:
        k = sum(r.attributable)
        sizes = [e - s for s, e in windows(k, 4, 0.5)]
        assert r.options["windowed"] and r.info["n_hvp"] == 2 * sum(sizes)
        keep = torch.tensor(r.attributable)
        assert torch.isfinite(r.scores).all() and bool((r.scores[keep] > 0).all())
        assert sum(r.info["gate"][i] for i in range(len(keep)) if keep[i]) == pytest.approx(1.0, abs=1e-5)
    assert not torch.allclose(win[0].scores, ex.attribute(TEXT, method="heta", n_probes=2, template="Review: {text} Answer:").scores)


def test_bad_options_are_refused_before_any_work(tiny_llama):
    ex = tiny_llama
    before = model_state(ex)
    cases = [(dict(n_probes=0), "n_probes"), (dict(components="gate,foo"), "components"), (dict(components=[]), "components"),
             (dict(components=["gate", "gate"]), "components"), (dict(beta=-1), "beta"), (dict(gamma=True), "gamma"),
             (dict(window=1), "window"), (dict(window_overlap=1.0), "window_overlap"), (dict(rollout="sum"), "rollout"),
             (dict(objective="logit"), "objective"), (dict(preset="v2"), "preset"), (dict(curvature_layers=3), "curvature_layers"),
             (dict(gate_layers=0), "gate_layers"),
             (dict(n_probes=10**9), r"n_probes=1000000000 would need about .* GB for the probes alone")]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            ex.attribute(TEXT, method="heta", **kw)
    with pytest.raises(ValueError, match="single target token|multi-token"):
        ex.attribute(TEXT, method="heta", target=" good and", target_fn="logprob")
    assert model_state(ex) == before


@pytest.mark.parametrize("preset", ["paper", "official"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_both_presets_on_every_family(name, preset):
    ex = aieg_fast.load_model(*SPECS[name].build())
    kw = dict(method="heta", preset=preset, n_probes=2)
    if not ex.adapter.has_attention:
        # the refusal names the options that run without attention, which the next call uses
        with pytest.raises(ValueError, match=r"needs attention layers.*or heta with components='curvature,information'"):
            ex.attribute(TEXT, **kw)
        kw["components"] = "curvature,information"
    single = [ex.attribute(t, **kw) for t in (TEXT, SHORT)]
    batch = ex.attribute([TEXT, SHORT], padding_side="left", **kw)
    for s, b in zip(single, batch):
        keep = torch.tensor(s.attributable)
        assert torch.isfinite(s.scores).all() and float(s.scores.min()) >= 0 and float(s.scores[keep].sum()) > 0
        torch.testing.assert_close(b.scores, s.scores, atol=2e-5, rtol=1e-3)


def test_float16_curvature_nan_warning_names_the_cause():
    """On a float16 OPT, HETA's curvature term (second derivatives) overflows and the scores are
    NaN whatever the baseline: the warning says so and what to do (it said to try another
    baseline, which cannot help)."""
    import transformers as T

    from builders import byte_level_tokenizer

    tk = byte_level_tokenizer()
    torch.manual_seed(0)
    cfg = T.OPTConfig(vocab_size=len(tk), hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                      max_position_embeddings=64, word_embed_proj_dim=16, pad_token_id=0, bos_token_id=0, eos_token_id=0)
    ex = aieg_fast.load_model(T.OPTForCausalLM(cfg).half(), tk)
    with pytest.warns(aieg_fast.NonFiniteAttributionWarning, match=r"the curvature term \(second derivatives\) can overflow "
                                                                     r"float16 on this model: load it in bfloat16 or float32"):
        res = ex.attribute(TEXT, method="heta", n_probes=2)
    assert not bool(torch.isfinite(res.scores).all())
    heta = aieg_fast.get_method("heta")
    assert "try baseline='mean'" in heta.non_finite_hint(heta.options(components="gate,information"), "zero", torch.float16)


@pytest.mark.parametrize("family", ["gemma", "gemma2", "granite"])
def test_gemma_curvature_is_of_the_scaled_embeddings(family):
    """Gemma's adapter works in its unscaled embedding table (× √d inside the model), Granite's
    in the table its decoder multiplies by ``embedding_multiplier``; the curvature is of the
    embeddings the decoder receives, as curvature_layers = n_layers measures it, not d (or the
    multiplier squared) times larger (which would tip the S / I mix towards S)."""
    ex = aieg_fast.load_model(*family_specs()[family].build(seed=1))
    a = ex.attribute(TEXT, method="heta", components="curvature", n_probes=2, target=7)
    b = ex.attribute(TEXT, method="heta", components="curvature", n_probes=2, target=7,
                     curvature_layers=ex.adapter.n_layers)
    cfg = ex.model.config
    scale = cfg.embedding_multiplier if family == "granite" else cfg.hidden_size ** 0.5
    assert scale != 1 and ex.adapter.token_embeddings_scale == pytest.approx(scale, rel=1e-2)
    torch.testing.assert_close(torch.tensor(a.info["curvature"]), torch.tensor(b.info["curvature"]), atol=1e-6, rtol=1e-4)


def test_options_of_a_term_left_out_have_no_effect(tiny_llama):
    """Documented (README, HETAOptions): an option of a term that components leaves out changes
    nothing, so a method-wide option reaches the single-term ablation specs without refusing them."""
    text = "the film was bad"
    a = tiny_llama.attribute(text, method="heta", components="gate,information")
    b = tiny_llama.attribute(text, method="heta", components="gate,information", curvature_layers=1, n_probes=3, beta=7.0)
    assert torch.equal(a.scores, b.scores) and b.options["n_probes"] == 3
