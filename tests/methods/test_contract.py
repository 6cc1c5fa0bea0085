"""The contract every registered method keeps, checked for each name in ``list_methods()`` (and,
for most checks, for the option settings of ``CASES`` that take a code path of their own):

* a batch equals single calls (left and right padding);
* fixed positions (special and template tokens) score 0;
* the model is left exactly as it was: after a normal call, after an exception inside the call,
  and per submodule (blocks in mixed train/eval modes get each block's mode back);
* the recorded backend is what ran;
* the JSON round trip holds;
* generation rows equal per-prefix calls (shared and per-context paths).
"""
from __future__ import annotations

import pytest
import torch

import aieg_fast
from aieg_fast import reference
from builders import model_state

METHODS = aieg_fast.list_methods()
TEXT = "the movie is good and the actors are great"
SHORT = "the film was bad"
TEMPLATE = "Review: {text} Answer:"
N = 6
OPS = ("interpolate_path", "adaptive_alphas", "emphasis_factors", "integrate_gradients", "attention_gradient_product", "posnorm", "hvp_l1_mean")
#: (method, options): every method with its defaults, plus option settings that take a code path
#: of their own (AIEG's completeness weights come from the gradient pass's slopes)
CASES = [(m, {}) for m in METHODS] + [("aieg", {"ef_mode": "completeness"})]
CASE_IDS = [m + "".join(f":{k}={v}" for k, v in o.items()) for m, o in CASES]


@pytest.fixture(params=["gpt2", "llama", "clf"])
def any_model(request, tiny_gpt2, tiny_llama, tiny_gpt2_clf):
    return {"gpt2": tiny_gpt2, "llama": tiny_llama, "clf": tiny_gpt2_clf}[request.param]


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("method,opts", CASES, ids=CASE_IDS)
def test_batch_equals_single(any_model, method, opts, padding_side):
    ex = any_model
    texts = [TEXT, SHORT]
    single = [ex.attribute(t, method=method, n_steps=N, **opts) for t in texts]
    batch = ex.attribute(texts, method=method, n_steps=N, padding_side=padding_side, **opts)
    for s, b in zip(single, batch):
        assert s.token_ids == b.token_ids and s.target == b.target
        torch.testing.assert_close(b.scores, s.scores, atol=2e-5, rtol=1e-3)
        per_token = _per_token_info(s)  # AIEG's ieg / attention were the padded row, shifted by left padding
        assert set(_per_token_info(b)) >= set(per_token)
        for k, v in per_token.items():
            torch.testing.assert_close(torch.tensor(b.info[k], dtype=torch.float64), v, atol=2e-5, rtol=1e-3, msg=lambda m, k=k: f"info[{k!r}]: {m}")


def _per_token_info(r):
    """The ``info`` entries of a result that hold one float per token (last axis)."""
    out = {}
    for k, v in r.info.items():
        try:
            t = torch.tensor(v, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            continue
        if t.dim() >= 1 and t.shape[-1] == len(r.tokens):
            out[k] = t
    return out


@pytest.mark.parametrize("method,opts", CASES, ids=CASE_IDS)
def test_fixed_positions_score_zero(tiny_llama, method, opts):
    res = tiny_llama.attribute(SHORT, method=method, n_steps=N, template=TEMPLATE, **opts)
    fixed = [not a for a in res.attributable]
    assert res.special[0] and fixed[0]  # BOS
    assert sum(fixed) > 2  # template tokens are fixed too
    assert all(float(s) == 0.0 for s, f in zip(res.scores, fixed) if f)
    assert any(float(s) != 0.0 for s, f in zip(res.scores, fixed) if not f)


def _mixed_modes(ex):
    """Top module in training mode, the first block in eval mode, one parameter trainable."""
    ex.model.train()
    ex.adapter.layers[0].eval()
    first = next(ex.model.parameters())
    first.requires_grad_(True)
    return first


def _restore_defaults(ex, first):
    first.requires_grad_(False)
    ex.model.eval()


@pytest.mark.parametrize("method,opts", CASES, ids=CASE_IDS)
def test_model_left_as_it_was(tiny, method, opts):
    ex = tiny
    first = _mixed_modes(ex)
    try:
        before = model_state(ex)
        assert any(before[1]) and not all(before[1])  # the modes really are mixed
        ex.attribute(TEXT, method=method, n_steps=N, **opts)
        assert model_state(ex) == before
        gen = ex.attribute_generation("the movie is", generated_text=" good and", method=method, n_steps=N, **opts)
        assert model_state(ex) == before and gen.scores.shape[0] >= 2
    finally:
        _restore_defaults(ex, first)


@pytest.mark.parametrize("method", METHODS)
def test_model_left_as_it_was_after_an_exception(tiny, method):
    ex = tiny
    first = _mixed_modes(ex)
    calls = {"n": 0}

    def fail_late(module, args, output):
        calls["n"] += 1
        if calls["n"] >= 2:  # let the first forward through, fail inside the method's work
            raise RuntimeError("injected failure")

    handle = ex.adapter.layers[-1].register_forward_hook(fail_late)
    try:
        before = model_state(ex)
        with pytest.raises(RuntimeError, match="injected failure"):
            ex.attribute([TEXT, SHORT], method=method, n_steps=N, internal_batch_size=2)
            ex.attribute([TEXT, SHORT], method=method, n_steps=N, internal_batch_size=2)  # single-forward methods fail here
        assert model_state(ex) == before
    finally:
        handle.remove()
        _restore_defaults(ex, first)


@pytest.mark.parametrize("backend", ["reference", "auto", "ext"])
@pytest.mark.parametrize("method,opts", CASES, ids=CASE_IDS)
def test_recorded_backend_is_what_ran(tiny_llama, method, opts, backend, monkeypatch):
    if backend == "ext" and not aieg_fast.HAS_EXT:
        pytest.skip("extension not built")
    ran = {}
    for op in OPS:
        fn = getattr(reference, op)

        def spy(*a, _op=op, _fn=fn, **k):
            ran[_op] = "reference"
            return _fn(*a, **k)

        monkeypatch.setattr(reference, op, spy)
    res = tiny_llama.attribute(TEXT, method=method, n_steps=N, backend=backend, **opts)
    gen = tiny_llama.attribute_generation("the movie is", generated_text=" good and", method=method, n_steps=N, backend=backend, **opts)
    for r in (res, gen):
        # an op recorded as "reference" ran its reference; one recorded as "ext" did not
        for op, b in r.backend.items():
            assert op in OPS and b in ("ext", "reference")
        if backend == "reference":
            assert set(r.backend.values()) <= {"reference"}
        if backend == "ext":
            assert set(r.backend.values()) <= {"ext"}
    # every op whose reference ran is recorded in one of the two results as "reference"
    recorded_ref = {op for r in (res, gen) for op, b in r.backend.items() if b == "reference"}
    assert set(ran) == recorded_ref
    if not aieg_fast.HAS_EXT:
        assert all(b == "reference" for r in (res, gen) for b in r.backend.values())


@pytest.mark.parametrize("method", METHODS)
def test_recorded_backend_per_call(tiny_llama, method):
    """Two calls with different backends record what each ran (no leaking between calls)."""
    a = tiny_llama.attribute(TEXT, method=method, n_steps=N, backend="reference")
    b = tiny_llama.attribute(TEXT, method=method, n_steps=N, backend="auto")
    assert set(a.backend) == set(b.backend)
    assert set(a.backend.values()) <= {"reference"}
    if aieg_fast.HAS_EXT and b.backend:
        assert "ext" in set(b.backend.values())


@pytest.mark.parametrize("method,opts", CASES, ids=CASE_IDS)
def test_json_round_trip(tmp_path, tiny_gpt2, method, opts):
    for res in (tiny_gpt2.attribute(TEXT, method=method, n_steps=N, **opts),
                tiny_gpt2.attribute_generation("the movie is", generated_text=" good and", method=method, n_steps=N, **opts)):
        p = tmp_path / "r.json"
        res.save(p)
        back = aieg_fast.load_attribution(p)
        torch.testing.assert_close(back.scores, res.scores, equal_nan=True)
        assert back.tokens == res.tokens and back.token_ids == res.token_ids and back.target == res.target
        assert back.method == method and back.backend == res.backend and back.attributable == res.attributable
        assert back.options == res.options


def _cont_ids(ex, text):
    return ex.tokenizer(text, add_special_tokens=False)["input_ids"]


def _prefix_texts(ex, text):
    """text[:end of token t-1] for t = 0..T-1: the generated text that precedes target y_t."""
    enc = ex.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ends = [e for _, e in enc["offset_mapping"]]
    return [""] + [text[: ends[t - 1]] for t in range(1, len(ends))]


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("interpolate_generated", [False, True])
@pytest.mark.parametrize("method,opts", CASES, ids=CASE_IDS)
def test_generation_rows_equal_per_prefix_calls(tiny, method, opts, interpolate_generated, shared):
    ex = tiny
    prompt, cont = "the movie is good", " and the actors are great"
    gen = _cont_ids(ex, cont)[:3]
    prefixes = _prefix_texts(ex, cont)[:3]
    res = ex.attribute_generation(prompt, generated_text=gen, method=method, n_steps=N,
                                  interpolate_generated=interpolate_generated, shared=shared, **opts)
    p_ids, _ = ex.encode(prompt)
    Lp = len(p_ids)
    assert res.info["generated_ids"] == gen
    for t, y in enumerate(gen):
        if interpolate_generated:
            single = ex.attribute(prompt + prefixes[t], method=method, target=y, n_steps=N, **opts)
        else:
            # template tokens are held fixed: the generated prefix sits in the template
            single = ex.attribute(prompt, method=method, target=y, n_steps=N, template="{text}" + prefixes[t], **opts)
        assert single.token_ids == p_ids + gen[:t]  # same ids, so the comparison is exact
        n = Lp + t
        row = res.scores[t]
        assert torch.isnan(row[n:]).all()
        attr = torch.tensor(single.attributable)
        assert torch.equal(torch.isfinite(row[:n]), attr)
        torch.testing.assert_close(row[:n][attr], single.scores[attr], atol=1e-5, rtol=1e-4)
        assert res.info["steps"][t]["target"]["id"] == y


@pytest.mark.parametrize("method", aieg_fast.list_methods())
def test_a_progress_bar_only_for_methods_that_move_it(tiny_gpt2, capsys, method):
    """progress=True draws a bar for the methods that move it (path points, masked copies,
    probes, rows) and none for the one-pass ones, which drew an empty "saliency: 0pt" bar: the
    bar is drawn at its first move."""
    moves = method in ("integrated_gradients", "integrated_decision_gradients", "aieg", "occlusion", "grad_ellm", "heta")
    capsys.readouterr()
    tiny_gpt2.attribute("the movie is good", method=method, n_steps=4, progress=True)
    tiny_gpt2.attribute_generation("the movie is", generated_text=" good", method=method, n_steps=4, progress=True)
    err = capsys.readouterr().err
    assert (method in err) == moves, err[-300:]
