"""End-to-end tests of the attribution methods on tiny random-weight GPT-2 and LLaMA models."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

import aieg_fast
from builders import model_state as _model_state
from aieg_fast import reference as R

TEXT = "the movie is good and the actors are great"
SHORT = "the film was bad"



# ------------------------------------------------------------------------------------------
# IG completeness and the reductions of specs/aieg.md §6.13
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("integration", ["trapezoid", "gausslegendre"])
def test_ig_completeness(tiny, integration):
    res = tiny.attribute(TEXT, method="integrated_gradients", n_steps=256, internal_batch_size=128, integration=integration)
    diff = res.info["F_input"] - res.info["F_baseline"]
    assert abs(diff) > 1e-3  # the check is meaningful
    assert abs(float(res.scores.sum()) - diff) <= 0.01 * abs(diff)
    assert abs(res.info["convergence_delta"]) <= 0.01 * abs(diff)


def test_aieg_reduces_to_ig(tiny):
    """§6.13.1: EF off, attention 1, PosNorm off, uniform grid → IG with the same grid."""
    ig = tiny.attribute(TEXT, method="integrated_gradients", n_steps=16, integration="uniform")
    a = tiny.attribute(TEXT, method="aieg", n_steps=16, adaptive=False, ef_mode="none", attn_layers="none", posnorm="none")
    torch.testing.assert_close(a.scores, ig.scores, atol=1e-5, rtol=1e-4)


def test_idg_matches_rederived_formula(tiny_gpt2):
    """§6.13.2: IDG = Δ ⊙ (1/M) Σ_m G_m r_m δ_m on the grid the method chose."""
    ex = tiny_gpt2
    res = ex.attribute(TEXT, method="integrated_decision_gradients", n_steps=12)
    alphas = torch.tensor(res.info["alphas"])
    ids, fixed = ex.encode(TEXT)
    b = ex.build_batch([(ids, fixed)])
    ctx = ex.context(b, [res.target["id"]])
    E, Eb = b.embeds[0], b.baseline[0]
    rows = torch.zeros(len(alphas), dtype=torch.long)
    X = (Eb + alphas.view(-1, 1, 1) * (E - Eb)).requires_grad_(True)
    f = ctx.F(rows, X)
    (G,) = torch.autograd.grad(f.sum(), X)
    f = f.detach()
    r = torch.zeros_like(f)
    r[1:] = (f[1:] - f[:-1]) / (alphas[1:] - alphas[:-1])
    a_chk, widths = R.adaptive_alphas(torch.tensor(res.info["pilot_logits"]), 12, "idg_minmax")
    torch.testing.assert_close(a_chk.float(), alphas.float())
    w = torch.tensor(res.info["weights"])
    torch.testing.assert_close(w, (r * widths.float() / len(alphas)), atol=1e-5, rtol=1e-3)
    expected = ((E - Eb) * torch.einsum("m,mld->ld", w, G)).sum(-1)
    torch.testing.assert_close(res.scores, expected, atol=1e-5, rtol=1e-4)


def test_linear_model_identities():
    """§6.13.3: F = <W, Z>: abs-L1 EF gives IEG = Δ ⊙ W = IG for either sign; signed gives sign·IG."""
    torch.manual_seed(0)
    L, d, M = 5, 7, 20
    W = torch.randn(L, d, dtype=torch.float64)
    for flip in (1.0, -1.0):
        E = torch.randn(L, d, dtype=torch.float64)
        Eb = torch.randn(L, d, dtype=torch.float64)
        delta = E - Eb
        if torch.sign((W * delta).sum()) != flip:
            delta = -delta
            E = Eb + delta
        pilot = torch.tensor([float((W * (Eb + a * delta)).sum()) for a in torch.linspace(0, 1, M)], dtype=torch.float64)
        alphas, widths = R.adaptive_alphas(pilot, M)
        assert torch.allclose(widths.sum(), torch.tensor(1.0, dtype=torch.float64))
        f = torch.stack([(W * (Eb + a * delta)).sum() for a in alphas])
        G = W.expand(M, L, d)
        ig = (delta * W).sum(-1)
        ef = R.emphasis_factors(f, alphas, widths, "fd", "abs", "l1")
        torch.testing.assert_close(ef.sum(), torch.tensor(1.0, dtype=torch.float64))
        torch.testing.assert_close(R.integrate_gradients(G, ef, delta), ig)
        ef_s = R.emphasis_factors(f, alphas, widths, "fd", "signed", "l1")
        torch.testing.assert_close(R.integrate_gradients(G, ef_s, delta), flip * ig)


def test_saturation_filter():
    """§6.13.4: a sigmoidal logit along the path; gradient noise on the flat part gets EF ≈ 0."""
    torch.manual_seed(1)
    M, N, L, d = 50, 50, 3, 4
    F = lambda a: torch.sigmoid(30 * (a - 0.3)) * 5.0  # noqa: E731
    pilot = F(torch.linspace(0, 1, N, dtype=torch.float64))
    alphas, widths = R.adaptive_alphas(pilot, M)
    in_transition = ((alphas > 0.1) & (alphas < 0.5)).sum()
    assert in_transition >= 30  # samples concentrate where the logit moves
    # on the uniform grid, so that the flat part is sampled
    alphas, widths = R.uniform_alphas(M, dtype=torch.float64)
    f = F(alphas)
    ef = R.emphasis_factors(f, alphas, widths)
    flat = alphas > 0.7
    assert int(flat.sum()) >= 10
    assert float(ef[flat].sum()) < 1e-3
    delta = torch.ones(L, d, dtype=torch.float64)
    G = torch.ones(M, L, d, dtype=torch.float64)
    noisy = G.clone()
    noisy[flat] += 1e4 * torch.randn(int(flat.sum()), L, d, dtype=torch.float64)
    ieg_clean = R.integrate_gradients(G, ef, delta)
    ieg_noisy = R.integrate_gradients(noisy, ef, delta)
    assert torch.allclose(ieg_clean, ieg_noisy, rtol=0.05, atol=0.05 * float(ieg_clean.abs().max()))
    w_ig = torch.full((M,), 1.0 / M, dtype=torch.float64)
    assert (R.integrate_gradients(noisy, w_ig, delta) - R.integrate_gradients(G, w_ig, delta)).abs().max() > 10


@pytest.mark.parametrize("alloc", ["abs", "idg_minmax"])
@pytest.mark.parametrize("quirk", [False, True])
def test_idg_allocation(alloc, quirk):
    """§6.13.7: counts sum to M, α sorted in [0, 1]; δ covers the sampled bins exactly.

    The spec says "δ sums to 1"; that holds only when every pilot bin receives a sample. Bins
    left empty by the allocation (flat logit) are not covered, so Σδ = (#non-empty bins)·h.
    With ``idg_compat_quirk`` the official placement packs the non-empty bins from α = 0 and
    can give bin 0 a sample, so the last one can end one bin past 1 (Σδ ≤ N·h, α < 1 + h).
    """
    torch.manual_seed(2)
    for N, M in [(50, 50), (10, 37), (25, 5), (2, 2)]:
        pilot = torch.randn(N).cumsum(0)
        a, w = R.adaptive_alphas(pilot, M, alloc, quirk)
        assert a.numel() == M and w.numel() == M
        h = 1.0 / (N - 1)
        top = 1.0 + h - 1e-9 if quirk else 1.0
        assert torch.all(a[1:] >= a[:-1]) and float(a.min()) >= 0 and float(a.max()) <= top
        if torch.allclose(a, torch.linspace(0, 1, M)):  # degenerate pilot: uniform fallback grid
            continue
        bins = torch.unique(torch.floor(a.double() / h + 1e-3))  # tolerance for fp32 α
        assert abs(float(w.sum()) - len(bins) * h) < 1e-5
        assert float(w.sum()) <= (N * h if quirk else 1.0) + 1e-6
        if quirk and alloc == "idg_minmax":
            _assert_official_grid(pilot, M, a, w)


def _official_grid(pilot, M):
    """The grid of the official IDG code (specs/aieg.md §3.2 steps 1–4, with both quirks),
    re-derived step by step in plain Python: (alphas, widths) in the official order.

    Leftovers: bins with n_j = 0 (bin 0 included) are keyed M·π_j, the others −1; the keys are
    sorted with torch.sort (as the official code does) and reversed; the first R are *set* to 1.
    Placement: from bin 0, the start advancing by h only on non-empty bins; unplaced samples
    stay at α = 0 with width 0."""
    f = [float(v) for v in pilot]
    N = len(f)
    s = [0.0] + [(f[j] - f[j - 1]) * (N - 1) for j in range(1, N)]
    lo, hi = min(s), max(s)
    shat = [(v - lo) / (hi - lo) for v in s]
    shat[0] = 0.0
    total = float(torch.tensor(shat, dtype=torch.float64).sum())
    mp = [M * (v / total) for v in shat]
    n = [int(math.floor(v)) for v in mp]
    left = M - sum(n)
    key = torch.tensor([v if c == 0 else -1.0 for c, v in zip(n, mp)], dtype=torch.float64)
    for j in torch.sort(key).indices.flip(0)[:left].tolist():
        n[j] = 1
    h = 1.0 / (N - 1)
    alphas, widths, start = [], [], 0.0
    for c in n:
        if c == 0:
            continue
        alphas += [start + k * h / c for k in range(c)]
        widths += [h / c] * c
        start += h
    return alphas + [0.0] * (M - len(alphas)), widths + [0.0] * (M - len(widths))


def _assert_official_grid(pilot, M, a, w):
    oa, ow = _official_grid(pilot.double(), M)
    order = sorted(range(M), key=lambda i: oa[i])  # stable: the unplaced zeros after the first α = 0
    torch.testing.assert_close(a.double(), torch.tensor([oa[i] for i in order], dtype=torch.float64), rtol=0, atol=1e-6)
    torch.testing.assert_close(w.double(), torch.tensor([ow[i] for i in order], dtype=torch.float64), rtol=0, atol=1e-6)


def test_idg_quirk_minimal_case_leftovers_outnumber_empty_bins():
    """Issue 13 item 6: pilot logits [0, 1, 2.1, 3.0, 4.2], N = M = 5, official allocation.

    Slopes (N − 1 = 4): [0, 4, 4.4, 3.6, 4.8] → M·π = [0, 1.19, 1.31, 1.07, 1.43]; every bin
    j ≥ 1 gets one sample and R = 1 is left. The official code gives it to bin 0 (key 0, the
    others −1) and packs the five one-sample bins from 0: α = 0, 0.25, 0.5, 0.75, 1.0, all
    δ = 0.25. The intended mapping gives it to bin 4 (largest fractional part): α ends at 0.875.
    """
    pilot = torch.tensor([0.0, 1.0, 2.1, 3.0, 4.2], dtype=torch.float64)
    a, w = R.adaptive_alphas(pilot, 5, "idg_minmax", idg_compat_quirk=True)
    assert a.tolist() == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0], abs=1e-12)
    assert w.tolist() == pytest.approx([0.25] * 5, abs=1e-12)
    _assert_official_grid(pilot, 5, a, w)
    a0, w0 = R.adaptive_alphas(pilot, 5, "idg_minmax", idg_compat_quirk=False)
    assert a0.tolist() == pytest.approx([0.0, 0.25, 0.5, 0.75, 0.875], abs=1e-12)
    assert w0.tolist() == pytest.approx([0.25, 0.25, 0.25, 0.125, 0.125], abs=1e-12)
    # the extension, where built, places them the same way
    if aieg_fast.HAS_EXT:
        from aieg_fast import ops

        for q in (False, True):
            ea, ew = ops.adaptive_alphas(pilot, 5, "idg_minmax", q, backend="ext")
            ra, rw = R.adaptive_alphas(pilot, 5, "idg_minmax", q)
            assert torch.equal(ea, ra) and torch.equal(ew, rw)


@pytest.mark.parametrize("pilot, M, alphas, widths", [
    # linear pilot, N = 4, M = 5: M·π = 5/3 each → n = [0, 1, 1, 1], R = 2: bin 0 gets 1, then the
    # leftover "resets" bin 3 to 1 (it had 1); one sample stays unplaced at α = 0, width 0
    ([0.0, 1.0, 2.0, 3.0], 5, [0, 0, 1 / 3, 2 / 3, 1], [1 / 3, 0, 1 / 3, 1 / 3, 1 / 3]),
    # M = 8: n = [0, 2, 2, 2], R = 2: bin 0 → 1 and bin 3 reset from 2 to 1; two unplaced
    ([0.0, 1.0, 2.0, 3.0], 8, [0, 0, 0, 1 / 3, 1 / 2, 2 / 3, 5 / 6, 1], [1 / 3, 0, 0, 1 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 3]),
    # N = 3, M = 4: M·π = [0, 4/3, 8/3] → n = [0, 1, 2], R = 1 → bin 0; bin 2 starts at 1.0, past the input
    ([0.0, 1.0, 3.0], 4, [0, 0.5, 1.0, 1.25], [0.5, 0.5, 0.25, 0.25]),
])
def test_idg_quirk_official_second_quirk(pilot, M, alphas, widths):
    """When R exceeds the number of bins with no sample, the official code resets bins that had
    samples to 1 and leaves samples unplaced; packing can push the last bin past α = 1."""
    p = torch.tensor(pilot, dtype=torch.float64)
    a, w = R.adaptive_alphas(p, M, "idg_minmax", idg_compat_quirk=True)
    assert a.tolist() == pytest.approx(alphas, abs=1e-12)
    assert w.tolist() == pytest.approx(widths, abs=1e-12)
    _assert_official_grid(p, M, a, w)


def test_scale_invariance_and_attention_monotonicity():
    """§6.13.5: scaling F by c > 0 leaves EF and PosNorm unchanged; larger attention, larger score."""
    torch.manual_seed(3)
    f = torch.randn(20).cumsum(0)
    a, w = R.adaptive_alphas(f, 20)
    torch.testing.assert_close(R.emphasis_factors(3.5 * f, a, w), R.emphasis_factors(f, a, w))
    s = torch.randn(9)
    torch.testing.assert_close(R.posnorm(7.0 * s), R.posnorm(s))
    p = R.posnorm(s)
    attn = torch.rand(9)
    hi = attn.clone()
    hi[4] += 0.5
    assert (p * hi)[4] >= (p * attn)[4]


def test_fixed_positions_score_zero(tiny_llama):
    res = tiny_llama.attribute(TEXT, method="aieg", n_steps=8)
    assert res.special[0] and not res.attributable[0]  # BOS is held fixed
    assert float(res.scores[0]) == 0.0
    assert torch.all(res.scores >= 0)


# ------------------------------------------------------------------------------------------
# batches with padding
# ------------------------------------------------------------------------------------------
# batch = single calls for every method: tests/methods/test_contract.py


# ------------------------------------------------------------------------------------------
# targets, classifier head, attention implementations
# ------------------------------------------------------------------------------------------
def test_target_token_and_id(tiny_gpt2):
    tid = tiny_gpt2.tokenizer.encode(" good")
    assert len(tid) == 1
    a = tiny_gpt2.attribute(TEXT, method="saliency", target=" good")
    b = tiny_gpt2.attribute(TEXT, method="saliency", target=tid[0])
    assert a.target["id"] == b.target["id"] == tid[0]
    torch.testing.assert_close(a.scores, b.scores)
    c = tiny_gpt2.attribute(TEXT, method="saliency")
    with torch.no_grad():
        pred = int(tiny_gpt2.model(torch.tensor([c.token_ids])).logits[0, -1].argmax())
    assert c.target["id"] == pred


def test_classifier_head(tiny_gpt2_clf):
    ex = tiny_gpt2_clf
    res = ex.attribute(TEXT, method="integrated_gradients", n_steps=64, target=1)
    assert res.target["kind"] == "class" and res.target["id"] == 1
    with torch.no_grad():
        logits = ex.model(torch.tensor([res.token_ids])).logits[0]
    assert abs(res.info["F_input"] - float(logits[1])) < 1e-4
    diff = res.info["F_input"] - res.info["F_baseline"]
    assert abs(float(res.scores.sum()) - diff) <= 0.02 * abs(diff) + 1e-6
    with pytest.raises(ValueError, match="class index"):
        ex.attribute(TEXT, method="saliency", target=5)


@pytest.mark.parametrize("method", ["attention", "scaled_attention", "aieg"])
def test_attention_implementation_independent(method):
    from builders import make_tiny_llama

    results = []
    for impl in ("eager", "sdpa"):
        m, t = make_tiny_llama(seed=5)
        m.set_attn_implementation(impl)
        ex = aieg_fast.load_model(m, t)
        results.append(ex.attribute(TEXT, method=method, n_steps=8).scores)
        assert m.config._attn_implementation == impl  # restored
    torch.testing.assert_close(results[0], results[1], atol=1e-5, rtol=1e-4)
    assert torch.isfinite(results[0]).all() and results[0].abs().sum() > 0


def test_gqa_attention_matches_model():
    """The captured attention row is the model's own (grouped-query) attention output.

    Uses its own model: transformers installs lasting recording hooks on ``output_attentions=True``.
    """
    from builders import make_tiny_llama

    ex = aieg_fast.load_model(*make_tiny_llama())
    assert ex.adapter.n_kv_heads < ex.adapter.n_heads
    res = ex.attribute(TEXT, method="attention")
    m = ex.model
    m.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = m(torch.tensor([res.token_ids]), output_attentions=True)
    finally:
        m.set_attn_implementation("sdpa")
    row = out.attentions[-1][0, :, -1].mean(0)
    mask = torch.tensor(res.attributable)
    torch.testing.assert_close(res.scores[mask], row[mask], atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------------------------------------
# words, results, options
# ------------------------------------------------------------------------------------------
def test_word_aggregation_markers():
    toks = ["<s>", "▁the", "▁mov", "ie", "▁is", "Ġgre", "at", "!"]
    words, ws, t2w = aieg_fast.aggregate_words(toks, [0, 1, 2, 3, 4, 5, 6, 7], special=[True] + [False] * 7)
    assert words == ["<s>", "the", "movie", "is", "great!"]
    assert ws == [0, 1, 5, 4, 18]
    assert t2w == [0, 1, 2, 2, 3, 4, 4, 4]


def test_result_roundtrip(tmp_path, tiny_gpt2):
    res = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=8)
    p = tmp_path / "r.json"
    res.save(p)
    d = json.loads(p.read_text())
    assert len(d["tokens"]) == len(d["token_ids"]) == len(d["scores"])
    assert d["method"] == "aieg" and d["backend"] and d["model"]
    back = aieg_fast.load_attribution(p)
    torch.testing.assert_close(back.scores, res.scores)
    assert back.tokens == res.tokens and back.target == res.target
    html = res.to_html()
    assert html.count("<span") == len(res.words()[0])


def test_every_result_records_backend(tiny_gpt2):
    for meth in ("aieg", "integrated_gradients"):
        for backend in ("reference", "auto"):
            res = tiny_gpt2.attribute(TEXT, method=meth, n_steps=6, backend=backend)
            assert set(res.backend.values()) <= {"ext", "reference"}
            if backend == "reference":
                assert set(res.backend.values()) == {"reference"}
            assert "integrate_gradients" in res.backend


def test_reference_and_ext_backends_agree(tiny_gpt2):
    if not aieg_fast.HAS_EXT:
        pytest.skip("extension not built")
    for meth in ("aieg", "integrated_decision_gradients", "integrated_gradients"):
        a = tiny_gpt2.attribute(TEXT, method=meth, n_steps=10, backend="reference")
        b = tiny_gpt2.attribute(TEXT, method=meth, n_steps=10, backend="ext")
        torch.testing.assert_close(a.scores, b.scores, atol=1e-5, rtol=1e-4)


def test_ablation_switches_change_result(tiny_gpt2):
    full = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=10, preset="v1")  # each switch against one named reading
    for opts in ({"ef_mode": "none"}, {"attn_layers": "none"}, {"posnorm": "none"}, {"attn_layers": "rollout"}, {"attn_source": "path"},
                 {"ef_mode": "autograd"}, {"posnorm": "relu_max"}):
        r = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=10, preset="v1", **opts)
        assert torch.isfinite(r.scores).all()
        assert not torch.allclose(r.scores, full.scores), opts
    with pytest.raises(ValueError, match="unknown option|unexpected keyword|got an unexpected"):
        tiny_gpt2.attribute(TEXT, method="aieg", n_steps=4, not_an_option=1)


def test_internal_batch_size_does_not_change_result(tiny_gpt2):
    a = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=12, internal_batch_size=1)
    b = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=12, internal_batch_size=64)
    torch.testing.assert_close(a.scores, b.scores, atol=1e-6, rtol=1e-5)
    c = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=12, max_memory="1MB")
    torch.testing.assert_close(a.scores, c.scores, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("method", ["integrated_gradients", "aieg", "integrated_decision_gradients"])
@pytest.mark.parametrize("texts", [[TEXT, SHORT], [TEXT, TEXT]], ids=["padded", "equal-length"])
def test_chunks_across_examples(tiny_gpt2, method, texts):
    """Chunks of path points that straddle two examples (internal batch 3, 8 steps) give the
    scores of one example at a time in one chunk; the equal-length pair runs without a mask."""
    single = [tiny_gpt2.attribute(t, method=method, n_steps=8, internal_batch_size=64) for t in texts]
    batch = tiny_gpt2.attribute(texts, method=method, n_steps=8, internal_batch_size=3)
    for s, b in zip(single, batch):
        torch.testing.assert_close(b.scores, s.scores, atol=2e-5, rtol=1e-3)


def test_token_texts_are_cached_decodes(tiny_gpt2):
    ids = tiny_gpt2.encode(TEXT)[0]
    assert tiny_gpt2.token_texts(ids) == [tiny_gpt2.tokenizer.decode([i]) for i in ids]
    assert set(ids) <= set(tiny_gpt2.token_text_cache)
    assert tiny_gpt2.attribute(TEXT, method="saliency").tokens == tiny_gpt2.token_texts(ids)


def test_template_positions_are_fixed(tiny_gpt2):
    res = tiny_gpt2.attribute("good film", method="integrated_gradients", n_steps=8, template="review : {text} . it was")
    text_tokens = [t for t, a in zip(res.tokens, res.attributable) if a]
    assert "".join(text_tokens).strip() == "good film"
    assert all(float(s) == 0 for s, a in zip(res.scores, res.attributable) if not a)


# ------------------------------------------------------------------------------------------
# bad input: clear errors, model left as it was
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(text=""), "text is empty"),
        (dict(text="   "), "text is empty"),
        (dict(text=[TEXT, ""]), r"text\[1\]: text is empty"),
        (dict(text=" ".join(["good"] * 200)), r"text is \d+ tokens long, but the model accepts at most 64"),
        # the template's tokens count too: the message said "text" for a text short enough alone
        (dict(text=" ".join(["good"] * 40), template="the " * 30 + "{text} :"),
         r"text is \d+ tokens long in its template \(40 of them attributable\), but the model accepts at most 64"),
        (dict(text=TEXT, method="nope"), r"method must be one of \['integrated_gradients'"),
        (dict(text=TEXT, target="unflinchingly marvellous"), r"is not a single token: it tokenizes as"),
        (dict(text=TEXT, n_steps=1), r"n_steps must be an int >= 2 or 'auto', got 1"),
        (dict(text=TEXT, n_steps=0, method="aieg"), r"n_steps must be an int >= 2 or 'auto', got 0"),
        (dict(text=TEXT, method="aieg", ef_mode="bogus"), r"ef_mode must be one of"),
    ],
)
def test_bad_input(tiny, kwargs, match):
    before = _model_state(tiny)
    with pytest.raises(ValueError, match=match):
        tiny.attribute(**kwargs)
    assert _model_state(tiny) == before


def test_model_restored_after_exception_mid_run(tiny_gpt2, monkeypatch):
    ex = tiny_gpt2
    ex.model.train()
    params = list(ex.model.parameters())
    params[0].requires_grad_(True)
    before = _model_state(ex)

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(aieg_fast.ops, "integrate_gradients", boom)
    with pytest.raises(RuntimeError, match="boom"):
        ex.attribute(TEXT, method="aieg", n_steps=4)
    assert _model_state(ex) == before
    ex.model.eval()


def test_unsupported_architecture():
    from transformers import BertConfig, BertForMaskedLM, BloomConfig, BloomForCausalLM

    from builders import byte_level_tokenizer

    m = BertForMaskedLM(BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32, vocab_size=50))
    with pytest.raises(ValueError, match=r"model_type 'bert' \(class 'BertForMaskedLM'\) is not supported: it is an encoder model type"):
        aieg_fast.load_model(m, tokenizer=byte_level_tokenizer())
    m = BloomForCausalLM(BloomConfig(n_layer=1, hidden_size=16, n_head=2, vocab_size=50))  # a decoder without an adapter
    with pytest.raises(ValueError, match=r"model_type 'bloom' \(class 'BloomForCausalLM'\) is not supported\. Supported model_types: gpt2, llama"):
        aieg_fast.load_model(m, tokenizer=byte_level_tokenizer())


def test_list_methods():
    names = aieg_fast.list_methods()
    for n in ("aieg", "integrated_gradients", "integrated_decision_gradients", "saliency", "input_x_gradient", "attention", "scaled_attention",
              "grad_ellm", "occlusion", "heta"):
        assert n in names


def test_parse_memory():
    assert aieg_fast.parse_memory("4GB") == 4_000_000_000
    assert aieg_fast.parse_memory("512MiB") == 512 * 1024**2
    with pytest.raises(ValueError, match="max_memory"):
        aieg_fast.parse_memory("lots")
    # units in any case, negative exponents; below one byte or infinite refused (0.5 gave 0)
    assert aieg_fast.parse_memory("4GIB") == aieg_fast.parse_memory("4gib") == 4 * 1024**3
    assert aieg_fast.parse_memory("1e-3GB") == 1_000_000 and aieg_fast.parse_memory("2e9") == 2_000_000_000
    for bad in (0.5, "0.5", "1e400", float("inf"), -3, "-4GB", 0):
        with pytest.raises(ValueError, match=r"max_memory must be a finite number of at least one byte"):
            aieg_fast.parse_memory(bad)


@pytest.mark.parametrize("opts", [{}, {"ef_sign": "signed"}, {"ef_sign": "relu"}, {"ef_norm": "none"}, {"ef_mode": "none"}, {"adaptive": False}])
def test_streamed_emphasis_equals_two_pass(tiny, opts):
    """The EF computed while the gradients stream in equals the EF of a separate logits pass."""
    a = tiny.attribute(TEXT, method="aieg", n_steps=10, internal_batch_size=3, **opts)
    b = tiny.attribute(TEXT, method="aieg", n_steps=10, internal_batch_size=3, stream_ef=False, **opts)
    torch.testing.assert_close(torch.tensor(a.info["ef"]), torch.tensor(b.info["ef"]), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(torch.tensor(a.info["ieg"]), torch.tensor(b.info["ieg"]), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(a.scores, b.scores, atol=1e-6, rtol=1e-5)


def test_works_without_extension(tmp_path):
    """With the compiled extension unavailable the package imports, runs on the reference and says so."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['aieg_fast._C'] = None\n"  # makes importing aieg_fast._C fail
        "sys.path.insert(0, 'tests')\n"
        "import aieg_fast, torch\n"
        "from builders import make_tiny_gpt2\n"
        "assert not aieg_fast.HAS_EXT and aieg_fast.build_info()['ext_error']\n"
        "ex = aieg_fast.load_model(*make_tiny_gpt2())\n"
        "r = ex.attribute('the movie is good', method='aieg', n_steps=6)\n"
        "assert set(r.backend.values()) == {'reference'}, r.backend\n"
        "assert torch.isfinite(r.scores).all()\n"
        "print('ok')\n"
    )
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-2000:]


def test_missing_model_path(tmp_path):
    with pytest.raises(ValueError, match=r"hub id or a local model directory; .* is a local directory without a loadable config"):
        aieg_fast.load_model(str(tmp_path))
    # a train-sentiment folder whose training stopped: said so (it was "without a loadable config")
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "progress.json").write_text('{"step": 3, "seconds": 9.0}')
    with pytest.raises(ValueError, match=r"its training stopped at step 3 and has not finished .* rerun the same "
                                         r"`aieg-fast train-sentiment --out"):
        aieg_fast.load_model(str(tmp_path))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda ex: ex.attribute(123), r"text must be a str or a list of str, got int"),
        (lambda ex: ex.attribute(b"hello"), r"text must be a str or a list of str, got bytes"),
        (lambda ex: ex.attribute(TEXT, template=5), r"template must be a str .* got int"),
        (lambda ex: ex.attribute(TEXT, target=3.5), r"target must be a token string, a token id or None, got float 3.5"),
        (lambda ex: ex.attribute(TEXT, target=torch.tensor(3.0)), r"target must be a token string, a token id or None, got Tensor"),
        (lambda ex: ex.attribute(TEXT, target=np.bool_(True)), r"target must be a token string, a token id or None, got bool"),
    ],
)
def test_wrong_types(tiny_gpt2, call, match):
    before = _model_state(tiny_gpt2)
    with pytest.raises(TypeError, match=match):
        call(tiny_gpt2)
    assert _model_state(tiny_gpt2) == before


def test_numpy_and_tensor_integer_targets_are_token_ids(tiny_gpt2):
    """A target id from numpy or torch (``logits.argmax()``) explains the same token as the int."""
    want = tiny_gpt2.attribute(TEXT, target=7, method="saliency")
    for t in (np.int64(7), np.int32(7), torch.tensor(7), torch.tensor([7])):
        got = tiny_gpt2.attribute(TEXT, target=t, method="saliency")
        assert got.target["id"] == 7 and isinstance(got.target["id"], int)
        torch.testing.assert_close(got.scores, want.scores)


def test_numpy_and_tensor_integer_settings_are_ints(tiny_gpt2):
    """n_steps, internal_batch_size, n_baseline_samples and seed from numpy or torch (a loop over
    np.arange) were refused as "must be an int"; they are read as the ints they hold, in both
    calls, and recorded as Python ints."""
    kw = dict(method="integrated_gradients", n_steps=4, internal_batch_size=2, n_baseline_samples=2, seed=3)
    want = tiny_gpt2.attribute(TEXT, **kw)
    for cast in (np.int64, np.int32, torch.tensor):
        got = tiny_gpt2.attribute(TEXT, **{k: cast(v) if isinstance(v, int) else v for k, v in kw.items()})
        torch.testing.assert_close(got.scores, want.scores, rtol=0, atol=0)
        json.dumps(got.to_dict())
    gen = dict(method="saliency", max_new_tokens=2, n_steps=4, seed=1)
    want = aieg_fast.attribute_generation(tiny_gpt2, TEXT, **gen)
    got = aieg_fast.attribute_generation(tiny_gpt2, TEXT, **{k: np.int64(v) if isinstance(v, int) else v for k, v in gen.items()})
    assert got.token_ids == want.token_ids and torch.equal(got.scores.nan_to_num(), want.scores.nan_to_num())
    with pytest.raises(ValueError, match=r"n_steps must be an int >= 2 or 'auto', got np.float64\(4.0\)"):
        tiny_gpt2.attribute(TEXT, method="integrated_gradients", n_steps=np.float64(4.0))


def test_a_missing_local_path_is_refused_without_the_hub(tmp_path, monkeypatch):
    """load_model("runs/my-model") with a typo went through transformers' hub retries first (no network here)
    before "could not be loaded from the hub"; a name that can only be a local path is refused at
    once, naming the nearest folder. A hub id (org/name) still goes to transformers, also where a
    folder named like its org is here and the model is in the hub cache."""
    import huggingface_hub
    import transformers

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "cachedorg").mkdir()
    asked = []

    def offline(name, *args, **kwargs):
        asked.append(name)
        raise OSError("offline")

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", offline)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache",
                        lambda repo, filename, **kw: "/cache/config.json" if repo.startswith("cachedorg/") else None)
    for name in ("runs/my-model", "./my-model", str(tmp_path / "gone" / "m"), "a/b/c", "~nosuchuser12345/m", "runs/my model"):
        with pytest.raises(ValueError, match=rf"model {re.escape(repr(name))} reads as a local path and nothing is there"):
            aieg_fast.load_model(name)
    with pytest.raises(ValueError, match=r"tokenizer 'runs/tok' reads as a local path"):
        aieg_fast.load_model("someorg/some-model", tokenizer="runs/tok")  # refused before the model is looked for
    assert not asked
    for name in ("someorg/some-model", "cachedorg/model.v2"):  # hub ids: no folder 'someorg'; a cached model
        with pytest.raises(ValueError, match="could not be loaded from the hub"):
            aieg_fast.load_model(name)
    assert asked == ["someorg/some-model", "cachedorg/model.v2"]


def test_a_model_folder_under_home_is_read_with_the_tilde(tmp_path, monkeypatch):
    """load_model("~/tiny") of a folder that is there failed: transformers took the name as it is."""
    from builders import make_tiny_gpt2

    m, tok = make_tiny_gpt2()
    m.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    monkeypatch.setenv("HOME", str(tmp_path))
    ex = aieg_fast.load_model("~/tiny", tokenizer="~/tiny")
    assert ex.model.config.n_layer == m.config.n_layer
    # what evaluate finds out without loading reads ~ as load_model does (model_kind was None, and a
    # training record there was not found: evaluate's trained-rows check was skipped)
    from aieg_fast.models import TRAINING_RECORD, model_kind, training_folder

    (tmp_path / "tiny" / TRAINING_RECORD).write_text("{}")
    assert model_kind("~/tiny") == "causal_lm" and training_folder("~/tiny") == tmp_path / "tiny"
    with pytest.raises(ValueError, match=r"reads as a local path and nothing is there; the nearest folder that exists is '/'$"):
        aieg_fast.load_model("/no-such-folder-here")  # no hint about hub ids for an absolute path


def test_load_model_wrong_type():
    with pytest.raises(TypeError, match=r"model must be None, a hub id or local directory .* got int"):
        aieg_fast.load_model(123)


def test_bad_input_found_by_a_new_user(tiny_gpt2):
    """A template with {text} twice, an out-of-range ref_token_id and a target for generation are
    refused with messages naming them, before any work."""
    from builders import make_tiny_gpt2

    with pytest.raises(ValueError, match="exactly once"):
        tiny_gpt2.attribute(TEXT, method="saliency", template="{text} and {text}")
    with pytest.raises(ValueError, match=r"ref_token_id must be a token id in \[0, \d+\), got 10000000"):
        aieg_fast.load_model(*make_tiny_gpt2(), ref_token_id=10**7)
    with pytest.raises(ValueError, match=r"ref_token_id must be a token id in \[0, \d+\), got -1"):
        aieg_fast.load_model(*make_tiny_gpt2(), ref_token_id=-1)
    with pytest.raises(ValueError, match="targets are the generated tokens"):
        tiny_gpt2.attribute_generation("the movie", method="saliency", target=" good", max_new_tokens=2)


@pytest.mark.parametrize("attn_heads", ["max", "mean"])
def test_path_attention_at_the_input_equals_the_input_attention(tiny_llama, attn_heads):
    """With the input itself as the baseline every path point is the input, so the path source's
    weighted mean of attention rows is the input's attention row: the same head and layer
    reductions in both sources (each layer's head maximum, then the layers' mean)."""
    ids = tiny_llama.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    own = tiny_llama.model.get_input_embeddings()(ids)[0].detach()
    kw = dict(method="aieg", n_steps=6, attn_heads=attn_heads, attn_layers="all", baseline=own)
    path = tiny_llama.attribute(TEXT, attn_source="path", **kw).info["attention"]
    inp = tiny_llama.attribute(TEXT, attn_source="input", **kw).info["attention"]
    torch.testing.assert_close(torch.tensor(path), torch.tensor(inp), atol=1e-6, rtol=1e-5)


def test_noisy_baselines_average_the_per_token_info_as_the_scores(tiny_llama):
    """With n_baseline_samples the scores are the draws' mean; AIEG's per-token info (ieg,
    posnorm) is averaged too, so scores = posnorm × attention (input attention, the same in
    every draw) still holds, as with one baseline."""
    kw = dict(method="aieg", n_steps=6, n_baseline_samples=3, seed=5)
    res = tiny_llama.attribute(TEXT, **kw)
    one = tiny_llama.attribute(TEXT, method="aieg", n_steps=6)
    torch.testing.assert_close(torch.tensor(one.info["posnorm"]) * torch.tensor(one.info["attention"]), one.scores,
                               atol=1e-6, rtol=1e-5, equal_nan=True)  # the identity, with one baseline
    product = torch.tensor(res.info["posnorm"]) * torch.tensor(res.info["attention"])
    torch.testing.assert_close(product, res.scores, atol=1e-6, rtol=1e-5, equal_nan=True)
