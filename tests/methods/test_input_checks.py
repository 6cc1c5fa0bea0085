"""Bad call settings are refused before any model work with a message naming the argument
(issue 14): huge n_steps (with the memory it would need), internal_batch_size=True, a bad
max_memory; and a token added with resize_token_embeddings is a valid target at once."""
from __future__ import annotations

import re
import warnings

import pytest
import torch

import aieg_fast
from aieg_fast.core import path as path_module
from builders import make_tiny_gpt2, make_tiny_llama, model_state

TEXT = "the movie is good"


def _no_forward(ex, monkeypatch):
    """Make any forward through the model fail, so a check that comes too late is noticed."""
    def boom(*a, **k):
        raise AssertionError("the model ran before the arguments were checked")

    monkeypatch.setattr(ex.adapter, "hidden_states", boom)
    monkeypatch.setattr(ex.adapter, "hidden_last", boom)


@pytest.mark.parametrize("method", ["integrated_gradients", "aieg", "integrated_decision_gradients"])
def test_huge_n_steps_names_the_memory(tiny_gpt2, monkeypatch, method):
    before = model_state(tiny_gpt2)
    _no_forward(tiny_gpt2, monkeypatch)
    with pytest.raises(ValueError, match=r"n_steps=1000000000000 would need about [\d.]+ [TP]B of memory .* more than this machine's"):
        tiny_gpt2.attribute(TEXT, method=method, n_steps=10**12)
    with pytest.raises(ValueError, match=r"n_steps=1000000000000 would need"):
        tiny_gpt2.attribute_generation(TEXT, max_new_tokens=2, method=method, n_steps=10**12)
    assert model_state(tiny_gpt2) == before


def test_a_huge_pilot_grid_names_its_own_option(tiny_gpt2, monkeypatch):
    """AIEG's n_pilot drives the memory there: the refusal names it (it named n_steps and
    advised n_steps well below 0)."""
    _no_forward(tiny_gpt2, monkeypatch)
    with pytest.raises(ValueError, match=r"n_pilot=1000000000 would need about .* use n_pilot well below \d+"):
        tiny_gpt2.attribute(TEXT, method="aieg", n_steps=8, n_pilot=10**9)


@pytest.mark.parametrize("method", ["integrated_decision_gradients", "aieg"])
def test_a_pilot_larger_than_the_grid_is_warned(tiny_gpt2, method):
    """n_pilot=300 with n_steps=3 put the 3 points in 1 % of the path: IDG's scores were ~50x
    smaller with no word. It is warned (IDG's authors vary N and M apart, so it is not refused)."""
    from aieg_fast import AttributionWarning

    with pytest.warns(AttributionWarning, match=r"n_pilot=300 > n_steps=3: the adaptive grid puts the 3 points over the pilot's 299 intervals"):
        tiny_gpt2.attribute(TEXT, method=method, n_pilot=300, n_steps=3)
    with pytest.warns(AttributionWarning, match=r"n_pilot=300 > n_steps=3"):
        tiny_gpt2.attribute_generation(TEXT, max_new_tokens=1, method=method, n_pilot=300, n_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AttributionWarning)
        tiny_gpt2.attribute(TEXT, method="integrated_decision_gradients", n_pilot=3, n_steps=3)


def test_gauss_legendre_counts_its_quadratic_memory(tiny_gpt2, monkeypatch):
    monkeypatch.setattr(path_module, "machine_memory", lambda: 10**9)  # a 1 GB machine
    with pytest.raises(ValueError, match=r"n_steps=20000 would need about [\d.]+ GB"):
        tiny_gpt2.attribute(TEXT, method="integrated_gradients", n_steps=20000, integration="gausslegendre")


@pytest.mark.parametrize("method", ["saliency", "aieg", "integrated_gradients"])
@pytest.mark.parametrize("bad", [True, 0, -3, 2.5, "8"])
def test_internal_batch_size_refused_up_front(tiny_gpt2, monkeypatch, method, bad):
    _no_forward(tiny_gpt2, monkeypatch)
    with pytest.raises(ValueError, match=rf"internal_batch_size must be a positive int or None, got {bad!r}"):
        tiny_gpt2.attribute(TEXT, method=method, n_steps=4, internal_batch_size=bad)
    with pytest.raises(ValueError, match="internal_batch_size must be a positive int"):
        tiny_gpt2.attribute_generation(TEXT, max_new_tokens=2, method=method, n_steps=4, internal_batch_size=bad)


def test_max_memory_refused_up_front(tiny_gpt2, monkeypatch):
    _no_forward(tiny_gpt2, monkeypatch)
    with pytest.raises(ValueError, match="max_memory must be bytes or a string like '4GB', got 'lots'"):
        tiny_gpt2.attribute(TEXT, method="saliency", max_memory="lots")
    for bad in (float("nan"), float("inf"), "1e", "nanGB"):  # were: cannot convert float NaN to integer, ...
        with pytest.raises(ValueError, match="max_memory must be"):
            tiny_gpt2.attribute(TEXT, method="saliency", max_memory=bad)
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 18446744073709551615\], got 1180591620717411303424"):
        tiny_gpt2.attribute(TEXT, method="integrated_gradients", n_baseline_samples=2, seed=2**70)  # was an OverflowError


@pytest.mark.parametrize("make", [make_tiny_gpt2, make_tiny_llama], ids=["gpt2-tied", "llama-untied"])
def test_token_added_after_resize_is_a_valid_target(make):
    """The vocabulary size, the output head (replaced on an untied model) and the special ids are
    read on each use, not cached at load."""
    model, tok = make()
    ex = aieg_fast.load_model(model, tok)
    ex.attribute(TEXT, method="saliency")  # caches filled
    tok.add_tokens(["<newword>"])
    tok.add_special_tokens({"additional_special_tokens": ["<mark>"]})
    model.resize_token_embeddings(len(tok))
    new = tok.convert_tokens_to_ids("<newword>")
    res = ex.attribute(TEXT, method="saliency", target=new)
    assert res.target["id"] == new and torch.isfinite(res.scores).all()
    logits = model(torch.tensor([res.token_ids])).logits[0, -1]
    res = ex.attribute(TEXT, method="saliency", target="<newword>", target_fn="logit")
    assert abs(res.info["F_input"] - float(logits[new])) < 1e-4  # F read from the new head
    mark = tok.convert_tokens_to_ids("<mark>")
    with pytest.warns(aieg_fast.AttributionWarning, match="typed as text"):
        res = ex.attribute("the <mark> movie", method="saliency")
    assert mark in res.token_ids and not res.attributable[res.token_ids.index(mark)]


@pytest.mark.parametrize("labels, err, match", [
    (" good", TypeError, r"labels must be a list of label words.*got str ' good'"),
    ([" good"], ValueError, r"at least 2 label words"),
    ([], ValueError, r"at least 2 label words"),
    ([" good", " good"], ValueError, r"labels \[' good', ' good'\] are the same token"),
    ([" good", " not a token"], ValueError, r"labels\[1\] = ' not a token': .*single token"),
    ([1.5, 2.5], TypeError, r"^labels\[0\] = 1.5: target must be a token string, a token id or None, got float"),
    ([" good", None], TypeError, r"^labels\[1\] = None: a label must be a token string or id"),
])
def test_label_probs_refuses_bad_labels_before_the_forward(tiny_gpt2, monkeypatch, labels, err, match):
    _no_forward(tiny_gpt2, monkeypatch)
    with pytest.raises(err, match=match):
        tiny_gpt2.label_probs(TEXT, labels)


def test_predict_and_label_probs(tiny_gpt2, monkeypatch):
    p = tiny_gpt2.label_probs(TEXT, [" good", " bad"])
    assert len(p) == 2 and sum(p) == pytest.approx(1.0) and all(0 < x < 1 for x in p)
    top = tiny_gpt2.predict(TEXT, top_k=3)
    assert len(top) == 3 and [t[2] for t in top] == sorted((t[2] for t in top), reverse=True)
    _no_forward(tiny_gpt2, monkeypatch)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=rf"top_k must be a positive int, got {bad!r}"):
            tiny_gpt2.predict(TEXT, top_k=bad)


@pytest.mark.parametrize("method, value, match", [
    ("attention", [], r"attn_layers must be 'last', 'all', 'rollout' or a non-empty list of layer indices for the attention method, got \[\]"),
    ("attention", "none", r"'last', 'all', 'rollout' or .* for the attention method, got 'none'"),
    ("scaled_attention", "rollout", r"attn_layers must be 'last', 'all' or .* for the scaled_attention method, got 'rollout'"),
    ("aieg", "first", r"attn_layers must be 'last', 'all', 'rollout', 'none' or a non-empty list"),
])
def test_attn_layers_message_lists_the_method_own_choices(tiny_gpt2, monkeypatch, method, value, match):
    _no_forward(tiny_gpt2, monkeypatch)
    with pytest.raises(ValueError, match=match):
        tiny_gpt2.attribute(TEXT, method=method, attn_layers=value)


def test_numpy_and_tensor_ids_are_ids(tiny_gpt2):
    """numpy integers and arrays in input_ids, 1-D id tensors / arrays as generated_text and
    label_set are the ids they hold (they were refused); other dtypes and shapes are named."""
    import numpy as np

    ex = tiny_gpt2
    plain = ex.attribute(input_ids=[5, 6, 7], method="saliency", target=3)
    for ids in ([np.int64(5), np.int32(6), 7], np.array([5, 6, 7]), np.array([[5, 6, 7]])):
        got = ex.attribute(input_ids=ids, method="saliency", target=3)
        got = got[0] if isinstance(got, list) else got
        assert got.token_ids == [5, 6, 7] and torch.equal(got.scores, plain.scores)
    assert ex.attribute(input_ids=[np.array([5, 6, 7]), np.array([5, 6])], method="saliency", target=3)[1].token_ids == [5, 6]
    with pytest.raises(TypeError, match=r"input_ids\[0\] must be an int token id, got np.True_"):
        ex.attribute(input_ids=[np.bool_(True), 5], method="saliency")
    gen = ex.attribute_generation("the movie", generated_text=torch.tensor([5, 6]), method="saliency")
    assert gen.info["generated_ids"] == [5, 6]
    with pytest.raises(TypeError, match=r"generated_text as a tensor must hold 1-D integer token ids, got dtype torch.int64 and shape \(1, 2\)"):
        ex.attribute_generation("the movie", generated_text=torch.tensor([[5, 6]]), method="saliency")
    by_list = ex.attribute("the movie", method="saliency", target_fn="label_logprob", label_set=[5, 6])
    for ls in (torch.tensor([5, 6]), np.array([5, 6])):
        got = ex.attribute("the movie", method="saliency", target_fn="label_logprob", label_set=ls)
        assert got.target == by_list.target and torch.equal(got.scores, by_list.scores)
    with pytest.raises(TypeError, match=r"label_set as a tensor must hold 1-D integer token ids, got dtype torch.float32"):
        ex.attribute("the movie", method="saliency", target_fn="label_logprob", label_set=torch.tensor([5.0, 6.0]))


def test_a_label_set_entry_that_is_no_label_is_named(tiny_gpt2):
    """None in label_set (a target's "the prediction", no label) was a bare int() TypeError; a
    float entry's message offered None as a choice."""
    with pytest.raises(TypeError, match=r"label_set\[0\] is None: each label is a token string or a token id, got \[None, 5\]"):
        tiny_gpt2.attribute("the movie", target_fn="label_logprob", label_set=[None, 5], method="saliency")
    with pytest.raises(TypeError, match=r"label_set\[1\] must be a token string or a token id, got float"):
        tiny_gpt2.attribute("the movie", target_fn="label_logprob", label_set=[5, 6.0], method="saliency")


def test_generation_of_a_list_of_prompts_names_prompt(tiny_gpt2):
    with pytest.raises(TypeError, match=r"prompt must be a str .* got list; a generation explains one prompt"):
        tiny_gpt2.attribute_generation(["a b", "c"], method="saliency")


def test_tokens_the_model_has_no_embedding_for_are_named():
    """A tokenizer larger than the model's embeddings (tokens added, the model not resized):
    a text or target holding such a token is refused naming it and both sizes (before, an
    IndexError from the embedding); generated text too."""
    m, t = make_tiny_gpt2()
    m.resize_token_embeddings(64)
    ex = aieg_fast.load_model(m, t)
    high = next(i for i in range(64, len(t)) if t.decode([i]).strip())
    word = t.decode([high])
    with pytest.raises(ValueError, match=r"text: token .* \(id \d+, position \d+\) is not a token of this model: its embeddings have "
                                         r"64 rows and the tokenizer \d+ entries"):
        ex.attribute("the" + word, method="saliency")
    with pytest.raises(ValueError, match=r"target: token .* is not a token of this model"):
        ex.attribute(t.decode([5, 6]), target=word, method="saliency")
    with pytest.raises(ValueError, match=r"is not a token of this model"):
        ex.attribute_generation(t.decode([5, 6]), generated_text=word, method="saliency")


def test_a_model_on_the_meta_device_is_refused_at_load():
    """Weights on the meta device that nothing loads (shapes without values) are refused at
    load, naming a parameter (it was a RuntimeError from Tensor.item())."""
    m, t = make_tiny_gpt2()
    with pytest.raises(ValueError, match=r"model: parameter 'transformer\.wte\.weight' is on the meta device"):
        aieg_fast.load_model(m.to("meta"), t)


def test_n_steps_is_recorded_only_by_methods_that_take_steps(tiny_gpt2):
    """A result records n_steps only for a path method; saliency, occlusion, attention, HETA ...
    take none (they recorded the unused default, 50, as if it were used)."""
    for method in ("saliency", "occlusion", "attention", "heta", "grad_ellm"):
        assert "n_steps" not in tiny_gpt2.attribute(TEXT, method=method).options, method
        assert "n_steps" not in tiny_gpt2.attribute_generation(TEXT, max_new_tokens=1, method=method).options, method
    assert tiny_gpt2.attribute(TEXT, method="integrated_gradients", n_steps=6).options["n_steps"] == 6
    assert tiny_gpt2.attribute_generation(TEXT, max_new_tokens=1, method="aieg", n_steps=6).options["n_steps"] == 6


def test_a_text_utf8_cannot_encode_is_named(tiny_gpt2):
    """A lone surrogate (from a decode with errors='surrogateescape'): the tokenizer raised a
    TypeError that named no argument."""
    with pytest.raises(ValueError, match=r"text holds '\\ud800' at character 1, which UTF-8 cannot encode"):
        tiny_gpt2.attribute("a\ud800b", method="saliency")
    with pytest.raises(ValueError, match=r"text\[1\]\['review'\] holds '\\udcff' at character 0"):
        tiny_gpt2.attribute([{"review": "fine"}, {"review": "\udcff bad"}], method="saliency", template="{review} :")


@pytest.mark.parametrize("kw, hint", [
    (dict(baselines="zero"), "baselines is Captum's / Inseq's name: here it is baseline"),
    (dict(contrast_targets=" bad"), "contrast_targets is Captum's / Inseq's name: here it is contrast_target"),
    (dict(nt_samples=3), "nt_samples is Captum's / Inseq's name: here it is n_baseline_samples"),
    (dict(n_step=4), "n_step: did you mean n_steps?"),
    (dict(integratoin="uniform"), "integratoin: did you mean integration?"),
])
def test_a_peer_library_name_or_a_near_miss_is_pointed_to_the_name_here(tiny_gpt2, kw, hint):
    """A Captum or Inseq user's baselines= / contrast_targets= (or a typo) got a list of the
    method's options, none of which it was, and no word of the call's own setting."""
    before = model_state(tiny_gpt2)
    with pytest.raises(ValueError, match=rf"unknown option\(s\) .*; {re.escape(hint)}$"):
        tiny_gpt2.attribute("the movie is good", method="integrated_gradients", **kw)
    assert model_state(tiny_gpt2) == before


@pytest.mark.parametrize("baseline, err, match", [
    ("bogus", ValueError, r"baseline must be one of \['reference', 'zero', 'mean', 'unk', 'pad', 'eos'\]"),
    (10**6, ValueError, r"baseline token id must be in \[0, \d+\), got 1000000"),
    (torch.zeros(7), ValueError, r"baseline tensor must be \[d\] or \[L, d\] with d = 32, got shape \(7,\)"),
    (torch.full((32,), float("nan")), ValueError, r"baseline tensor has non-finite values"),
    (torch.arange(32), TypeError, r"baseline tensor must hold embeddings \(floating values\), got dtype torch.int64; a token id"),
    (torch.ones(32, dtype=torch.bool), TypeError, r"got dtype torch.bool"),
    (1.5, TypeError, r"baseline must be None, a name, a token id or a tensor, got float 1.5"),  # the value named too
    (torch.full((32,), 1e300, dtype=torch.float64), ValueError, r"beyond the model's torch.float32 range .* 1e\+300"),
])
def test_a_bad_baseline_is_refused_before_any_model_work(tiny_gpt2, baseline, err, match):
    """attribute_generation checked the baseline only after greedy decoding (the whole
    generate), attribute after the embedding lookup; integer and bool tensors of width d were
    cast to embeddings silently."""
    calls = []
    handle = tiny_gpt2.model.get_input_embeddings().register_forward_pre_hook(lambda mod, args: calls.append(1))
    try:
        with pytest.raises(err, match=match):
            tiny_gpt2.attribute_generation("the movie is", max_new_tokens=3, method="integrated_gradients", baseline=baseline)
        with pytest.raises(err, match=match):
            tiny_gpt2.attribute("the movie is", method="integrated_gradients", baseline=baseline)
    finally:
        handle.remove()
    assert calls == []


def test_heta_probes_that_cannot_fit_are_refused_before_generation(tiny_gpt2):
    calls = []
    handle = tiny_gpt2.model.get_input_embeddings().register_forward_pre_hook(lambda mod, args: calls.append(1))
    try:
        with pytest.raises(ValueError, match=r"n_probes=1000000000000 would need about .* GB for the probes alone"):
            tiny_gpt2.attribute_generation("the movie is", max_new_tokens=3, method="heta", n_probes=10**12)
    finally:
        handle.remove()
    assert calls == []
