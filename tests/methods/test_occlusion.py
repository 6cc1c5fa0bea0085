"""Occlusion (issue 20): equal to a plain loop of masked forwards through the model itself, for
tokens, words and spans, both measures, every replacement kind; batched chunks and padding do not
change it; generation rows from the shared forwards equal per-prefix calls; bad options refused."""
from __future__ import annotations

import math
from unittest import mock

import pytest
import torch

from aieg_fast.core.occlusion import kl_divergence, occlusion_groups, spread
from aieg_fast.display.words import offset_groups
from builders import model_state

TEXT = "the movie is good and the actors are great"
SHORT = "the film was bad"


def _logits(ex, X):
    with torch.no_grad():
        return ex.model(inputs_embeds=X.unsqueeze(0)).logits[0, -1].float()


def _loop(ex, text, target, row, sets, measure):
    """Plain loop: one model forward per masked set of positions; the change of the target
    logit (or the KL of the next-token distribution)."""
    ids, fixed = ex.encode(text)
    E = ex.adapter.embeddings(torch.tensor(ids)).detach()
    z0 = _logits(ex, E)
    out = []
    for s in sets:
        X = E.clone()
        X[s] = row
        z = _logits(ex, X)
        if measure == "kl":
            out.append(float((torch.softmax(z0, -1) * (torch.log_softmax(z0, -1) - torch.log_softmax(z, -1))).sum()))
        else:
            out.append(float(z0[target] - z[target]))
    return out, fixed


def _tokens_from_sets(L, sets, vals):
    acc, cnt = torch.zeros(L), torch.zeros(L)
    for s, v in zip(sets, vals):
        acc[s] += v
        cnt[s] += 1
    return torch.where(cnt > 0, acc / cnt.clamp_min(1), torch.zeros(L))


@pytest.mark.parametrize("measure", ["delta", "kl"])
@pytest.mark.parametrize("baseline", [None, "zero", "mean", "unk"])
def test_token_occlusion_equals_a_plain_loop(tiny, measure, baseline):
    ex = tiny
    res = ex.attribute(TEXT, method="occlusion", target=5, measure=measure, baseline=baseline, internal_batch_size=3)
    W = ex.adapter.embeddings.weight.detach()
    row = {None: W[ex.ref_token_id], "zero": torch.zeros(W.shape[1]), "mean": W.mean(0), "unk": W[ex.tokenizer.unk_token_id]}[baseline]
    ids, fixed = ex.encode(TEXT)
    sets = [[i] for i, f in enumerate(fixed) if not f]
    vals, _ = _loop(ex, TEXT, 5, row, sets, measure)
    torch.testing.assert_close(res.scores, _tokens_from_sets(len(ids), sets, vals), atol=1e-5, rtol=1e-4)
    assert res.options["baseline"].split(":")[0] == (baseline or "reference")
    assert res.info["n_forwards"] == len(sets) + 2  # the masked inputs, the input, the prefix (KV) forward


def test_word_occlusion_masks_each_word_together(tiny_gpt2):
    ex = tiny_gpt2
    text = "unflinchingly bleak and desperate"  # words of several tokens in the tiny vocabulary
    res = ex.attribute(text, method="occlusion", target=3, granularity="word")
    words, _ = res.words()
    ids, fixed = ex.encode(text)
    # the words as the result shows them, from the offsets rule
    sets = [[i for i in g if not fixed[i]] for g in offset_groups(res.text, res.offsets, res.special)]
    sets = [s for s in sets if s]
    assert any(len(s) > 1 for s in sets)
    vals, _ = _loop(ex, text, 3, ex.adapter.embeddings.weight[ex.ref_token_id].detach(), sets, "delta")
    torch.testing.assert_close(res.scores, _tokens_from_sets(len(ids), sets, vals), atol=1e-5, rtol=1e-4)
    for s in sets:  # every token of a word has the word's score
        assert len(set(round(float(res.scores[i]), 6) for i in s)) == 1
    assert len(words) >= len(sets)
    # the word view shows each word's effect once (not once per token), as do the views built on it
    by_first = {g[0]: k for k, g in enumerate(res.word_groups())}
    word_vals = res.words()[1]
    for s, v in zip(sets, vals):
        assert word_vals[by_first[s[0]]] == pytest.approx(float(v), abs=1e-5)
    assert res.words("sum")[1][by_first[max(sets, key=len)[0]]] == pytest.approx(float(vals[sets.index(max(sets, key=len))]) * max(len(s) for s in sets), abs=1e-4)
    pd = pytest.importorskip("pandas")
    assert isinstance(res.to_dataframe(words=True), pd.DataFrame)
    assert res.to_dataframe(words=True)["score"].tolist() == pytest.approx(word_vals, nan_ok=True)


@pytest.mark.parametrize("width,stride", [(2, 1), (3, 2), (3, 3)])
def test_span_occlusion_averages_the_windows(tiny_llama, width, stride):
    ex = tiny_llama
    res = ex.attribute(TEXT, method="occlusion", target=5, granularity="span", span_width=width, span_stride=stride, measure="kl")
    ids, fixed = ex.encode(TEXT)
    attr = [i for i, f in enumerate(fixed) if not f]
    sets = [attr[a : a + width] for a in range(0, len(attr), stride)]
    vals, _ = _loop(ex, TEXT, 5, ex.adapter.embeddings.weight[ex.ref_token_id].detach(), sets, "kl")
    torch.testing.assert_close(res.scores, _tokens_from_sets(len(ids), sets, vals), atol=1e-6, rtol=1e-4)
    assert res.options["span_width"] == width and res.options["span_stride"] == stride


def test_groups_and_spread():
    fixed = torch.tensor([True, False, False, True, False, False])
    g = occlusion_groups(fixed, "span", 2, 1)
    assert g.int().tolist() == [[0, 1, 1, 0, 0, 0], [0, 0, 1, 0, 1, 0], [0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 1]]
    words = torch.tensor([-1, 0, 0, -1, 1, 2])
    assert occlusion_groups(fixed, "word", word_ids=words).int().tolist() == [[0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1]]
    s = spread(g, torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert s.tolist() == [0.0, 1.0, 1.5, 0.0, 2.5, 3.5]
    with pytest.raises(ValueError, match="word_ids"):
        occlusion_groups(fixed, "word")
    p = torch.log_softmax(torch.tensor([[0.0, 1.0, -50.0]]), -1)
    assert float(kl_divergence(p, p)) == 0.0
    # a -inf logit (a masked token) has p = 0: its term is 0, not 0 * (-inf) = NaN
    masked, q = torch.log_softmax(torch.tensor([0.0, -math.inf, 1.0]), -1), torch.log_softmax(torch.tensor([0.5, 0.0, 1.0]), -1)
    want = sum(math.exp(a) * (a - b) for a, b in zip(masked.tolist(), q.tolist()) if a > -math.inf)
    assert float(kl_divergence(masked, q)) == pytest.approx(want, rel=1e-6) and want > 0
    assert float(kl_divergence(q, masked)) == math.inf  # q puts mass where p has none
    assert math.isnan(float(kl_divergence(torch.full((3,), math.nan), q)))  # a non-finite reference stays NaN (flagged)


@pytest.mark.parametrize("side", ["left", "right"])
def test_batch_and_chunks_do_not_change_scores(tiny_llama, side):
    ex = tiny_llama
    single = [ex.attribute(t, method="occlusion", granularity="word", measure="kl") for t in (TEXT, SHORT)]
    batch = ex.attribute([TEXT, SHORT], method="occlusion", granularity="word", measure="kl", padding_side=side, internal_batch_size=2)
    for s, b in zip(single, batch):
        torch.testing.assert_close(b.scores, s.scores, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("granularity", ["word", "span"])
def test_generation_shared_equals_per_context(tiny, granularity):
    ex = tiny
    kw = dict(generated_text=" and the actors", method="occlusion", granularity=granularity, interpolate_generated=True,
              **(dict(span_width=2) if granularity == "span" else {}))
    shared = ex.attribute_generation("the movie is good", **kw)
    per = ex.attribute_generation("the movie is good", shared=False, **kw)
    torch.testing.assert_close(shared.scores, per.scores, equal_nan=True, atol=1e-6, rtol=1e-4)
    assert shared.scores.shape[0] >= 2 and torch.isfinite(shared.scores[-1, 1:]).any()


def test_kl_generation_rows_equal_prefix_calls(tiny_llama):
    ex = tiny_llama
    cont = " and the actors"
    enc = ex.tokenizer(cont, add_special_tokens=False, return_offsets_mapping=True)
    ids = enc["input_ids"][:3]
    gen = ex.attribute_generation("the movie is good", generated_text=ids, method="occlusion", measure="kl")
    for t, y in enumerate(ids):
        prefix = cont[: enc["offset_mapping"][t - 1][1]] if t else ""
        single = ex.attribute("the movie is good", method="occlusion", measure="kl", target=y, template="{text}" + prefix)
        assert single.token_ids == ex.encode("the movie is good")[0] + ids[:t]
        attr = torch.tensor(single.attributable)
        torch.testing.assert_close(gen.scores[t, : len(single.scores)][attr], single.scores[attr], atol=1e-6, rtol=1e-4)


def test_bad_options_are_refused_before_any_work(tiny_llama):
    ex = tiny_llama
    before = model_state(ex)
    for kw, msg in [(dict(granularity="sentence"), "granularity"), (dict(measure="l2"), "measure"),
                    (dict(granularity="span", span_width=2, span_stride=3), "span_stride"),
                    (dict(granularity="span", span_width=0), "span_width"),
                    (dict(span_width=5), r"span_width applies to granularity='span' only; got granularity='token' with span_width=5"),
                    (dict(granularity="word", span_width=2, span_stride=1), r"span_width and span_stride apply to granularity='span'")]:
        with pytest.raises(ValueError, match=msg):
            ex.attribute(TEXT, method="occlusion", **kw)
    with pytest.raises(ValueError, match="single-token target"):
        ex.attribute(TEXT, method="occlusion", measure="kl", target=" good and", target_fn="logprob")
    with pytest.raises(ValueError, match="measure='kl' compares the whole next-token distributions, so it has no contrast"):
        ex.attribute(TEXT, method="occlusion", measure="kl", target=5, contrast_target=6)  # before: the contrast ignored, recorded
    for shared in (True, False):  # a generation's steps too, on the shared path as on each step's own, before decoding
        with pytest.raises(ValueError, match="measure='kl' compares the whole next-token distributions, so it has no contrast"), \
                mock.patch.object(ex.model, "generate", side_effect=AssertionError("decoded before the options were checked")):
            ex.attribute_generation(TEXT, max_new_tokens=2, method="occlusion", measure="kl", contrast_target=6, shared=shared)
    assert model_state(ex) == before


def test_multi_token_target_delta(tiny_llama):
    """measure='delta' explains F = Σ_t log p(y_t | …): the change of that sum per masked token."""
    ex = tiny_llama
    res = ex.attribute(SHORT, method="occlusion", target=" good and", target_fn="logprob")
    ids, fixed = ex.encode(SHORT)
    y = ex.tokenizer(" good and", add_special_tokens=False)["input_ids"]
    E = ex.adapter.embeddings(torch.tensor(ids + y[:-1])).detach()

    def F(X):
        with torch.no_grad():
            lp = torch.log_softmax(ex.model(inputs_embeds=X.unsqueeze(0)).logits[0].float(), -1)
        return float(sum(lp[len(ids) - 1 + t, y[t]] for t in range(len(y))))

    row = ex.adapter.embeddings.weight[ex.ref_token_id].detach()
    for i, f in enumerate(fixed):
        if not f:
            X = E.clone()
            X[i] = row
            assert float(res.scores[i]) == pytest.approx(F(E) - F(X), abs=1e-4)
