"""What is explained: contrast targets, the label-set log-probability, user callables,
multi-token targets and generation step probabilities (issue 13), against plain forwards."""
from __future__ import annotations

import re
import warnings

import pytest
import torch

from builders import model_state

TEXT = "the movie is good and the actors are great"


def _last_logits(ex, text):
    ids = torch.tensor([ex.encode(text)[0]])
    with torch.no_grad():
        return ex.model(input_ids=ids).logits[0, -1].float()


def _two_tokens(ex, text):
    z = _last_logits(ex, text)
    top = z.topk(3).indices.tolist()
    return top[1], top[2]


@pytest.mark.parametrize("method", ["integrated_gradients", "saliency"])
def test_contrast_F_is_logit_difference(tiny, method):
    t, c = _two_tokens(tiny, TEXT)
    z = _last_logits(tiny, TEXT)
    res = tiny.attribute(TEXT, method=method, target=t, contrast_target=c, n_steps=8)
    torch.testing.assert_close(torch.tensor(res.info["F_input"]), z[t] - z[c], atol=1e-4, rtol=1e-4)
    assert res.target["contrast_id"] == c and res.options["target_fn"] == "logit-contrast"


def test_contrast_prob_difference_and_completeness(tiny):
    t, c = _two_tokens(tiny, TEXT)
    p = torch.softmax(_last_logits(tiny, TEXT), -1)
    res = tiny.attribute(TEXT, method="integrated_gradients", target=t, contrast_target=c, target_fn="prob", n_steps=256)
    torch.testing.assert_close(torch.tensor(res.info["F_input"]), p[t] - p[c], atol=1e-5, rtol=1e-4)
    diff = res.info["F_input"] - res.info["F_baseline"]
    assert abs(float(res.scores.sum()) - diff) <= 0.02 * abs(diff) + 1e-6


def test_contrast_scores_are_difference_of_gradient_maps(tiny):
    """Saliency is linear in F: the contrast map is the difference of the two maps."""
    t, c = _two_tokens(tiny, TEXT)
    a = tiny.attribute(TEXT, method="input_x_gradient", target=t)
    b = tiny.attribute(TEXT, method="input_x_gradient", target=c)
    ab = tiny.attribute(TEXT, method="input_x_gradient", target=t, contrast_target=c)
    torch.testing.assert_close(ab.scores, a.scores - b.scores, atol=1e-5, rtol=1e-4)


def test_label_logprob_is_renormalised_log_probability(tiny):
    labels = [5, 17, 42]
    z = _last_logits(tiny, TEXT)
    logp = torch.log_softmax(z[labels], -1)
    res = tiny.attribute(TEXT, method="saliency", target=17, target_fn="label_logprob", label_set=labels)
    torch.testing.assert_close(torch.tensor(res.info["F_input"]), logp[1], atol=1e-5, rtol=1e-4)
    pred = tiny.attribute(TEXT, method="saliency", target_fn="label_logprob", label_set=labels)
    assert pred.target["id"] == labels[int(logp.argmax())]  # the prediction is taken within the set
    # ids are recorded as ids (they were recorded as the strings '5', '17', '42': other tokens on a replay)
    assert pred.options["label_set"] == labels
    for given in (torch.tensor(labels), [torch.tensor(5), 17, 42]):
        assert tiny.attribute(TEXT, method="saliency", target_fn="label_logprob", label_set=given).options["label_set"] == labels
    again = tiny.attribute(TEXT, method="saliency", target_fn="label_logprob", label_set=pred.options["label_set"])
    assert again.target["id"] == pred.target["id"] and again.info["F_input"] == pred.info["F_input"]


def test_targets_as_a_tensor_give_one_per_text(tiny):
    """A 1-D id tensor (or numpy array) of targets or contrasts is one per text, as a list is;
    it was refused as "neither a str nor an int"."""
    import numpy as np

    texts = [TEXT, "the film is bad"]
    (t0, c0), (t1, c1) = _two_tokens(tiny, texts[0]), _two_tokens(tiny, texts[1])
    want = tiny.attribute(texts, method="saliency", target=[t0, t1], contrast_target=[c0, c1])
    for target, contrast in ((torch.tensor([t0, t1]), torch.tensor([c0, c1])), (np.array([t0, t1]), np.array([c0, c1]))):
        got = tiny.attribute(texts, method="saliency", target=target, contrast_target=contrast)
        assert [g.target["id"] for g in got] == [t0, t1] and [g.target["contrast_id"] for g in got] == [c0, c1]
        for g, w in zip(got, want):
            torch.testing.assert_close(g.scores, w.scores)
    with pytest.raises(ValueError, match="target has 2 entries for 1 text"):
        tiny.attribute(TEXT, method="saliency", target=torch.tensor([t0, t1]))
    with pytest.raises(TypeError, match="target as a tensor must hold 1-D integer token ids"):
        tiny.attribute(texts, method="saliency", target=torch.tensor([1.0, 2.0]))


def test_label_set_checks_before_work(tiny):
    before = model_state(tiny)
    with pytest.raises(ValueError, match="not in label_set"):
        tiny.attribute(TEXT, method="saliency", target=3, target_fn="label_logprob", label_set=[5, 17])
    text = tiny.token_texts([3])[0]  # the target named as typed, with its id
    with pytest.raises(ValueError, match=rf"target {re.escape(repr(text))} \(id 3\) is not in label_set"):
        tiny.attribute(TEXT, method="saliency", target=text, target_fn="label_logprob", label_set=[5, 17])
    with pytest.raises(ValueError, match="label_set is used only"):
        tiny.attribute(TEXT, method="saliency", label_set=[5, 17])
    with pytest.raises(ValueError, match="needs label_set"):
        tiny.attribute(TEXT, method="saliency", target_fn="label_logprob")
    with pytest.raises(ValueError, match="repeated"):
        tiny.attribute(TEXT, method="saliency", target_fn="label_logprob", label_set=[5, 5])
    with pytest.raises(ValueError, match="equals the target"):
        tiny.attribute(TEXT, method="saliency", target=5, contrast_target=5)
    with pytest.raises(ValueError, match="target_fn must be one of"):
        tiny.attribute(TEXT, method="saliency", target_fn="logits")
    assert model_state(tiny) == before


def test_callable_target_fn_matches_named(tiny):
    def logprob_of_7(logits):
        return torch.log_softmax(logits, -1)[:, 7]

    a = tiny.attribute(TEXT, method="integrated_gradients", target=7, target_fn="logprob", n_steps=16)
    b = tiny.attribute(TEXT, method="integrated_gradients", target_fn=logprob_of_7, n_steps=16)
    torch.testing.assert_close(b.scores, a.scores, atol=1e-5, rtol=1e-4)
    assert b.options["target_fn"] == "custom:logprob_of_7"
    with pytest.raises(ValueError, match="returned"):
        tiny.attribute(TEXT, method="saliency", target_fn=lambda z: z[:, :2])


def test_classifier_contrast(tiny_gpt2_clf):
    ex = tiny_gpt2_clf
    ids = torch.tensor([ex.encode(TEXT)[0]])
    with torch.no_grad():
        z = ex.model(input_ids=ids).logits[0].float()
    res = ex.attribute(TEXT, method="saliency", target=1, contrast_target=0)
    torch.testing.assert_close(torch.tensor(res.info["F_input"]), z[1] - z[0], atol=1e-5, rtol=1e-4)


def test_generation_contrast_and_step_probs(tiny_gpt2):
    ex = tiny_gpt2
    prompt = "the film was"
    res = ex.attribute_generation(prompt, max_new_tokens=3, method="saliency", contrast_target=11)
    gen = res.info["generated_ids"]
    pids = ex.encode(prompt)[0]
    ids = torch.tensor([pids + gen])
    with torch.no_grad():
        z = ex.model(input_ids=ids).logits[0].float()
    Lp = len(pids)
    for t, y in enumerate(gen):
        zt = z[Lp - 1 + t]
        assert res.info["steps"][t]["F_input"] == pytest.approx(float(zt[y] - zt[11]), abs=1e-4)
        assert res.info["step_probs"][t] == pytest.approx(float(torch.softmax(zt, -1)[y]), abs=1e-6)
    assert res.options["contrast_target"] == ex.token_texts([11])[0]


def _multi_target(ex):
    """A target string of at least two tokens."""
    for cand in (" good film", " the actors are", " great movie"):
        if len(ex.tokenizer.encode(cand, add_special_tokens=False)) >= 2:
            return cand
    raise AssertionError("no multi-token candidate")


def test_multi_token_target_is_sum_of_logprobs(tiny):
    tgt = _multi_target(tiny)
    y = tiny.tokenizer.encode(tgt, add_special_tokens=False)
    ids = tiny.encode(TEXT)[0]
    with torch.no_grad():
        z = tiny.model(input_ids=torch.tensor([ids + y[:-1]])).logits[0].float()
    logp = sum(float(torch.log_softmax(z[len(ids) - 1 + t], -1)[y[t]]) for t in range(len(y)))
    res = tiny.attribute(TEXT, method="integrated_gradients", target=tgt, target_fn="logprob", n_steps=128, integration="gausslegendre")
    assert res.info["F_input"] == pytest.approx(logp, abs=1e-4)
    assert res.token_ids == ids and res.target["kind"] == "tokens" and res.target["ids"] == y  # scores over the text only
    assert res.target_prob == pytest.approx(float(torch.tensor(logp).exp()), rel=1e-4)
    diff = res.info["F_input"] - res.info["F_baseline"]
    assert abs(float(res.scores.sum()) - diff) <= 0.01 * abs(diff)


@pytest.mark.parametrize("method", ["input_x_gradient", "integrated_gradients"])
def test_multi_token_target_equals_sum_of_generation_rows(tiny_gpt2, method):
    """Both methods (signed sum over d) are linear in F on a shared path: the multi-token map is the sum over the
    teacher-forced generation rows (prompt columns)."""
    ex = tiny_gpt2
    tgt = _multi_target(ex)
    kw = dict(method=method, target_fn="logprob", n_steps=16)
    multi = ex.attribute(TEXT, target=tgt, **kw)
    gen = ex.attribute_generation(TEXT, generated_text=tgt, **kw)
    Lp = len(multi.token_ids)
    torch.testing.assert_close(multi.scores, gen.scores[:, :Lp].nansum(0), atol=1e-5, rtol=1e-4)


def test_multi_token_target_refusals(tiny_gpt2):
    ex = tiny_gpt2
    tgt = _multi_target(ex)
    with pytest.raises(ValueError, match="not a single token"):
        ex.attribute(TEXT, method="saliency", target=tgt)  # needs target_fn="logprob"
    with pytest.raises(ValueError, match="does not explain multi-token"):
        ex.attribute(TEXT, method="attention", target=tgt, target_fn="logprob")
    with pytest.raises(ValueError, match="every text"):
        ex.attribute([TEXT, TEXT], method="saliency", target=[tgt, " a"], target_fn="logprob")


def test_target_errors_name_the_argument(tiny_gpt2, tiny_gpt2_clf):
    """A bad contrast or label is named as the argument it came in (not as ``target``), a bool
    class is refused like a bool token, and the model is left as it was."""
    before = model_state(tiny_gpt2)
    with pytest.raises(ValueError, match=r"^contrast_target ' not a token' is not a single token"):
        tiny_gpt2.attribute(TEXT, method="saliency", target=" good", contrast_target=" not a token")
    with pytest.raises(ValueError, match=r"^contrast_target\[1\] ' not a token' is not a single token"):
        tiny_gpt2.attribute([TEXT, TEXT], method="saliency", contrast_target=[" bad", " not a token"])
    with pytest.raises(ValueError, match=r"^label_set\[0\] ' not a token' is not a single token"):
        tiny_gpt2.attribute(TEXT, method="saliency", target_fn="label_logprob", label_set=[" not a token", " bad"])
    # the target's advice (target_fn='logprob' sums several tokens) does not hold for a contrast: it was given, with logprob set
    with pytest.raises(ValueError, match="is not a single token") as err:
        tiny_gpt2.attribute(TEXT, method="saliency", target=" not a token", target_fn="logprob", contrast_target=" not a token")
    assert "target_fn='logprob'" not in str(err.value) and str(err.value).startswith("contrast_target")
    with pytest.raises(ValueError, match=r"^target is empty: pass a token string, a token id, or None"):  # was "tokenizes as []"
        tiny_gpt2.attribute(TEXT, method="saliency", target="")
    assert model_state(tiny_gpt2) == before
    for bad in (True, 1.0):
        with pytest.raises(TypeError, match=r"target must be a class index \(int\) or a label name \(str\), got"):
            tiny_gpt2_clf.attribute(TEXT, method="saliency", target=bad)


@pytest.mark.parametrize("fn, match", [
    (lambda z: z[:, 0].detach(), r"differentiable in the logits, got one with no gradient"),
    (lambda z: z.argmax(-1), r"differentiable in the logits, got one with dtype torch.int64"),
    (lambda z: z[:, :2], r"returned \(2, 2\)"),
])
def test_callable_target_fn_is_tried_before_the_model(tiny_gpt2, monkeypatch, fn, match):
    def boom(*a, **k):
        raise AssertionError("the model ran before target_fn was checked")

    monkeypatch.setattr(tiny_gpt2.adapter, "hidden_states", boom)
    monkeypatch.setattr(tiny_gpt2.adapter, "hidden_last", boom)
    with pytest.raises(ValueError, match=match):
        tiny_gpt2.attribute(TEXT, method="integrated_gradients", target_fn=fn, n_steps=4)


def test_detached_target_fn_is_fine_for_occlusion(tiny_gpt2):
    res = tiny_gpt2.attribute(TEXT, method="occlusion", target_fn=lambda z: z[:, 5].detach())
    assert bool(torch.isfinite(res.scores).all())


def test_inference_mode_refuses_gradient_methods_only(tiny_gpt2):
    before = model_state(tiny_gpt2)
    with torch.inference_mode():
        with pytest.raises(RuntimeError, match=r"method 'saliency' takes gradients, which torch.inference_mode\(\) turns off"):
            tiny_gpt2.attribute(TEXT, method="saliency")
        with pytest.raises(RuntimeError, match=r"takes gradients"):
            tiny_gpt2.attribute_generation("the movie", max_new_tokens=1, method="integrated_gradients", n_steps=4)
        res = tiny_gpt2.attribute(TEXT, method="attention")
    assert bool(torch.isfinite(res.scores).all()) and model_state(tiny_gpt2) == before
    with torch.no_grad():  # gradients are turned back on inside
        assert bool(torch.isfinite(tiny_gpt2.attribute(TEXT, method="saliency").scores).all())


def test_predicted_target_equal_to_the_contrast_is_named(tiny):
    """target=None with a contrast the model predicts: F = z_t − z_c ≡ 0. The warning and
    res.degenerate say that (not a generic "zero signal"), per text in a batch; attention
    weights (which do not use F) are not flagged for it."""
    from aieg_fast import AttributionWarning

    pred = tiny.attribute(TEXT, method="saliency").target["id"]
    with pytest.warns(AttributionWarning, match=rf"prediction is contrast_target .* \(id {pred}\) itself"):
        res = tiny.attribute(TEXT, method="integrated_gradients", contrast_target=pred, n_steps=6)
    assert res.target["id"] == res.target["contrast_id"] == pred
    assert [f["kind"] for f in res.degenerate] == ["zero_signal"] and "pass target=" in res.degenerate[0]["message"]
    other = next(i for i in (5, 6, 7) if i != pred)
    with pytest.warns(AttributionWarning, match=r"text 1\] F = z_t − z_c ≡ 0"):
        both = tiny.attribute([TEXT, TEXT], method="saliency", contrast_target=[other, pred])
    assert both[0].degenerate == [] and "prediction is contrast_target" in both[1].degenerate[0]["message"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        att = tiny.attribute(TEXT, method="attention", contrast_target=pred)
    assert not any("contrast_target" in str(w.message) for w in caught) and float(att.scores.abs().sum()) > 0


@pytest.mark.parametrize("method", ["scaled_attention", "grad_ellm", "aieg", "integrated_gradients"])
def test_a_call_from_inside_target_fn_is_refused(tiny_gpt2, method):
    """A target_fn that calls the explainer it is running under is refused with a clear error
    (the nested call ran in the middle of the outer one and broke it with internal errors);
    the model is given back as it was, and calls after it work."""
    before = model_state(tiny_gpt2)

    def nested(logits):
        tiny_gpt2.attribute("bad film", method="attention")
        return logits[:, 20]

    with pytest.raises(RuntimeError, match=r"attribute\(\) was called from inside a target_fn of a call on the same model"):
        tiny_gpt2.attribute("the movie is very good and fun", method=method, target_fn=nested, n_steps=4)
    assert model_state(tiny_gpt2) == before
    fine = tiny_gpt2.attribute("the movie is very good and fun", method=method, target_fn=lambda z: z[:, 20], n_steps=4)
    assert bool(torch.isfinite(fine.scores).all())


@pytest.mark.parametrize("method", ["integrated_gradients", "integrated_decision_gradients", "aieg", "saliency",
                                    "input_x_gradient", "scaled_attention", "attention", "grad_ellm", "occlusion"])
def test_every_method_reports_p_target_of_a_given_target(tiny_gpt2, method):
    """p(target) of a given (not predicted) target is the model's probability of it, for every
    method and each text of a batch: the methods whose path scores only the target (IG, IDG,
    saliency, ...) reported None, so views and dataset records lacked it for some methods."""
    texts = [TEXT, "a dull and tired film"]
    tgt = [_two_tokens(tiny_gpt2, t)[0] for t in texts]
    kw = {"n_steps": 4} if method in ("integrated_gradients", "integrated_decision_gradients", "aieg") else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tiny_gpt2.attribute(texts, method=method, target=tgt, **kw)
    for r, text, t in zip(res, texts, tgt):
        assert r.target_prob == pytest.approx(float(torch.softmax(_last_logits(tiny_gpt2, text), -1)[t]), rel=1e-4)


def test_multi_token_targets_of_different_lengths_name_the_counts(tiny_gpt2):
    """Multi-token targets of a batch must have one length: the refusal gives the number of
    target tokens of each text (it gave none), and names a text without a target."""
    kw = dict(target_fn="logprob", method="integrated_gradients", n_steps=4)
    texts, targets = ["the movie", "a film"], [" good film", " very bad film"]
    counts = [len(tiny_gpt2.attribute(x, target=t, **kw).target["ids"]) for x, t in zip(texts, targets)]
    assert counts[0] != counts[1]
    with pytest.raises(ValueError, match=re.escape(f"with the same number of tokens; got {counts} target tokens per text")):
        tiny_gpt2.attribute(texts, target=targets, **kw)
    with pytest.raises(ValueError, match=re.escape(f"got [{counts[0]}, 1] target tokens per text (text(s) [1] without a target: "
                                                   "the model's prediction, 1 token)")):
        tiny_gpt2.attribute(texts, target=[targets[0], None], **kw)
