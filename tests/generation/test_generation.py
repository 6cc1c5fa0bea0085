"""Per-generation-step attribution (Explainer.attribute_generation) on the tiny GPT-2 and LLaMA models."""
from __future__ import annotations

import dataclasses
import io
import json
import math

import pytest
import torch

import aieg_fast
from builders import model_state as _model_state

PROMPT = "the movie is good"
CONT = " and the actors are great"  # teacher-forced continuation; tokenizes cleanly on both tiny tokenizers
N_STEPS = 6



def _cont_ids(ex, text=CONT):
    return ex.tokenizer(text, add_special_tokens=False)["input_ids"]


def _prefix_texts(ex, text=CONT):
    """text[:end of token t-1] for t = 0..T-1: the generated text that precedes target y_t."""
    enc = ex.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ends = [e for _, e in enc["offset_mapping"]]
    return [""] + [text[: ends[t - 1]] for t in range(1, len(ends))]


# ------------------------------------------------------------------------------------------
# shape and NaN masking
# ------------------------------------------------------------------------------------------
def test_shape_and_nan_masking(tiny):
    ex = tiny
    gen = _cont_ids(ex)
    T = len(gen)
    assert T >= 3
    res = ex.attribute_generation(PROMPT, generated_text=CONT, method="integrated_gradients", n_steps=N_STEPS)
    p_ids, p_fixed = ex.encode(PROMPT)
    Lp = len(p_ids)
    assert res.scores.shape == (T, Lp + T)
    assert res.token_ids == p_ids + gen
    assert len(res.tokens) == Lp + T
    assert res.info["prompt_length"] == Lp and res.info["generated_ids"] == gen
    # default (captum): only the prompt's attributable tokens get scores, in every row
    expect = torch.tensor([not f for f in p_fixed] + [False] * T)
    for t in range(T):
        assert torch.equal(torch.isfinite(res.scores[t]), expect), t
    assert res.attributable == expect.tolist()
    # interpolate_generated: generated token j is scored in rows t > j, NaN for rows t <= j
    res2 = ex.attribute_generation(PROMPT, generated_text=CONT, method="integrated_gradients", n_steps=N_STEPS, interpolate_generated=True)
    assert res2.scores.shape == (T, Lp + T)
    for t in range(T):
        for j in range(T):
            assert math.isfinite(float(res2.scores[t, Lp + j])) == (j < t), (t, j)
        torch.testing.assert_close(torch.isfinite(res2.scores[t, :Lp]), expect[:Lp])
    assert res2.attributable == expect[:Lp].tolist() + [True] * (T - 1) + [False]


# every method: row t == attribute(prompt ⊕ y_<t, target=y_t): tests/methods/test_contract.py


def test_template_prompt(tiny_gpt2):
    ex = tiny_gpt2
    template = "review : {text} . it was"
    res = ex.attribute_generation("good film", generated_text=CONT, method="saliency", template=template)
    ids, fixed = ex.encode("good film", template)
    assert res.token_ids[: len(ids)] == ids
    finite = torch.isfinite(res.scores).any(0)[: len(ids)].tolist()
    assert finite == [not f for f in fixed]
    text_tokens = [t for t, a in zip(res.tokens, res.attributable) if a]
    assert "".join(text_tokens).strip() == "good film"


# ------------------------------------------------------------------------------------------
# teacher forcing and greedy decoding
# ------------------------------------------------------------------------------------------
def test_teacher_forcing_uses_exact_ids(tiny):
    ex = tiny
    gen = _cont_ids(ex)
    res = ex.attribute_generation(PROMPT, generated_text=CONT, method="attention")
    assert res.info["generated_ids"] == gen
    assert res.info["generated_text"] == CONT and res.info["teacher_forced"] is True
    assert res.token_ids[res.info["prompt_length"] :] == gen
    assert res.scores.shape[0] == len(gen)
    # a list of ids is used as is, even one no text tokenizes to
    ids = [gen[1], gen[0], gen[0]]
    res2 = ex.attribute_generation(PROMPT, generated_text=ids, method="attention")
    assert res2.info["generated_ids"] == ids


def _greedy_by_hand(ex, ids, n):
    """Full forward and argmax per step (no KV cache); stops after EOS like model.generate."""
    ids = list(ids)
    out = []
    eos = ex.model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    with torch.no_grad():
        for _ in range(n):
            nxt = int(ex.model(torch.tensor([ids])).logits[0, -1].argmax())
            out.append(nxt)
            ids.append(nxt)
            if nxt in eos:
                break
    return out


def test_greedy_equals_model_generate(tiny):
    ex = tiny
    n = 5
    before = _model_state(ex)
    res = ex.attribute_generation(PROMPT, max_new_tokens=n, method="attention")
    assert _model_state(ex) == before
    p_ids, _ = ex.encode(PROMPT)
    with torch.no_grad():
        out = ex.model.generate(
            torch.tensor([p_ids]), attention_mask=torch.ones(1, len(p_ids), dtype=torch.long),
            max_new_tokens=n, do_sample=False, pad_token_id=ex.tokenizer.pad_token_id or ex.tokenizer.eos_token_id,
        )
    gen = out[0, len(p_ids) :].tolist()
    assert res.info["generated_ids"] == gen == _greedy_by_hand(ex, p_ids, n)
    assert res.info["teacher_forced"] is False
    assert res.scores.shape == (len(gen), len(p_ids) + len(gen))
    assert [s["target"]["id"] for s in res.info["steps"]] == gen


# ------------------------------------------------------------------------------------------
# result: JSON round trip, views, display
# ------------------------------------------------------------------------------------------
def test_json_roundtrip_and_display(tmp_path, tiny_llama):
    ex = tiny_llama
    res = ex.attribute_generation(PROMPT, generated_text=CONT, method="aieg", n_steps=N_STEPS, interpolate_generated=True)
    T = res.scores.shape[0]
    p = tmp_path / "gen.json"
    res.save(p)
    d = json.loads(p.read_text())
    assert len(d["scores"]) == T and all(len(r) == len(d["tokens"]) for r in d["scores"])
    assert d["scores"][0][-1] is None  # NaN written as null
    assert len(d["word_scores"]) == T and all(len(r) == len(d["words"]) for r in d["word_scores"])
    back = aieg_fast.load_attribution(p)
    assert back.scores.shape == res.scores.shape
    torch.testing.assert_close(back.scores, res.scores, equal_nan=True)
    assert back.info["generated_ids"] == res.info["generated_ids"]
    assert back.attributable == res.attributable and back.token_ids == res.token_ids
    seq = torch.tensor(res.info["sequence_scores"])
    assert seq.isnan().any()  # the case: tokens with no score (the last generated one)
    torch.testing.assert_close(torch.tensor(back.info["sequence_scores"]), seq, equal_nan=True)  # None had come back
    # views
    words, rows = res.words()
    assert len(rows) == T and all(len(r) == len(words) for r in rows)
    tops = res.top_tokens(3)
    assert len(tops) == T and all(len(tp) <= 3 for tp in tops)
    assert res.top_tokens(3, row=-1) == tops[-1] and res.top_tokens(3, row=0) == tops[0]
    for bad in (T, -T - 1, 1.0, True):
        with pytest.raises(ValueError, match=rf"row must be a generation step, an int in \[0, {T}\)"):
            res.top_tokens(3, row=bad)
    assert all(not math.isnan(v) for tp in tops for _, v in tp)
    for t in range(T):  # signed: the tokens that raised F most; absolute: that moved it most either way
        vals = [v for _, v in res.top_tokens(len(res.tokens), row=t)]
        assert vals == sorted(vals, reverse=True)
        mags = [abs(v) for _, v in res.top_tokens(len(res.tokens), row=t, absolute=True)]
        assert mags == sorted(mags, reverse=True) and sorted(mags) == sorted(abs(v) for v in vals)
    neg = dataclasses.replace(res, scores=-res.scores)  # the leading scores negative: signed ranking drops them
    assert neg.top_tokens(2, absolute=True) == [[(w, -v) for w, v in tp] for tp in res.top_tokens(2, absolute=True)]
    assert neg.top_tokens(1) != [[(w, -v) for w, v in tp] for tp in res.top_tokens(1)]
    with pytest.raises(ValueError, match="absolute must be True or False, got 'yes'"):
        res.top_tokens(3, absolute="yes")  # a str would turn it on
    # terminal heatmap: one line per generated token
    for use_words in (True, False):
        buf = io.StringIO()
        res.show(file=buf, words=use_words)
        out = buf.getvalue()
        step_lines = [l for l in out.splitlines() if "<-" in l and "mean over steps" not in l]
        assert len(step_lines) == T, out
        assert "nan" not in out
    html = res.to_html()
    assert html.count("<tr>") == T
    # 1-D results keep their shape and views
    one = ex.attribute(PROMPT, method="saliency")
    assert one.scores.dim() == 1 and not one.is_generation and res.is_generation
    assert isinstance(one.words()[1][0], float)


# ------------------------------------------------------------------------------------------
# bad input: clear errors, model unchanged
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(prompt=PROMPT, max_new_tokens=0), r"max_new_tokens must be a positive int, got 0"),
        (dict(prompt=PROMPT, max_new_tokens=-3), r"max_new_tokens must be a positive int, got -3"),
        (dict(prompt=PROMPT, max_new_tokens=2.5), r"max_new_tokens must be a positive int"),
        (dict(prompt=""), r"text is empty"),
        (dict(prompt="   "), r"text is empty"),
        (dict(prompt=PROMPT, generated_text=""), r"generated_text is empty"),
        (dict(prompt=PROMPT, generated_text=[]), r"generated_text is an empty list"),
        (dict(prompt=PROMPT, generated_text=" and more", max_new_tokens=2),
         r"max_new_tokens=2 decodes a continuation, but generated_text gives one"),
        (dict(prompt=PROMPT, max_new_tokens=200), r"exceed the model's 64 positions"),
        (dict(prompt=PROMPT, method="nope"), r"method must be one of"),
        (dict(prompt=PROMPT, n_steps=1), r"n_steps must be an int >= 2, got 1"),
        (dict(prompt=PROMPT, method="aieg", ef_mode="bogus"), r"ef_mode must be one of"),
        (dict(prompt=PROMPT, bogus_option=1), r"unknown option"),
        (dict(prompt=PROMPT, compile=True), r"compile=True: attribute_generation runs uncompiled"),
        (dict(prompt=PROMPT, interpolate_generated="no"), r"interpolate_generated must be True or False, got 'no'"),
        (dict(prompt=PROMPT, shared="no"), r"shared must be True or False, got 'no'"),
        (dict(prompt=PROMPT, progress=1), r"progress must be True or False, got 1"),
    ],
)
def test_bad_input(tiny, kwargs, match):
    before = _model_state(tiny)
    with pytest.raises(ValueError, match=match):
        tiny.attribute_generation(**kwargs)
    assert _model_state(tiny) == before


def test_classifier_is_rejected(tiny_gpt2_clf):
    before = _model_state(tiny_gpt2_clf)
    with pytest.raises(ValueError, match="causal language model"):
        tiny_gpt2_clf.attribute_generation(PROMPT)
    assert _model_state(tiny_gpt2_clf) == before


def test_model_restored_after_generation(tiny_gpt2):
    ex = tiny_gpt2
    ex.model.train()
    params = list(ex.model.parameters())
    params[0].requires_grad_(True)
    before = _model_state(ex)
    try:
        ex.attribute_generation(PROMPT, max_new_tokens=2, method="aieg", n_steps=4)
        assert _model_state(ex) == before
    finally:
        params[0].requires_grad_(False)
        ex.model.eval()


@pytest.mark.parametrize("method", ["integrated_gradients", "saliency", "input_x_gradient", "attention", "scaled_attention", "aieg", "grad_ellm"])
def test_shared_path_equals_context_batch(tiny_llama, method):
    """The shared teacher-forced forward gives the same rows as the batch of T contexts, and the
    same step probabilities (read from the hidden states the shared forward kept, where the
    method keeps them, and from a forward of their own otherwise)."""
    kw = dict(generated_text=" the movie is good", method=method, n_steps=6)
    a = tiny_llama.attribute_generation("a positive review", shared=True, **kw)
    b = tiny_llama.attribute_generation("a positive review", shared=False, **kw)
    assert a.token_ids == b.token_ids
    torch.testing.assert_close(a.scores, b.scores, atol=1e-5, rtol=1e-4, equal_nan=True)
    torch.testing.assert_close(torch.tensor(a.info["step_probs"]), torch.tensor(b.info["step_probs"]), atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("preset", ["consistent", "paper_v1", "corrected"])
def test_shared_grad_ellm_two_layers(tiny_llama, preset):
    kw = dict(generated_text=" the movie is good", method="grad_ellm", preset=preset, n_layers=2)
    a = tiny_llama.attribute_generation("a positive review", shared=True, **kw)
    b = tiny_llama.attribute_generation("a positive review", shared=False, **kw)
    torch.testing.assert_close(a.scores, b.scores, atol=1e-5, rtol=1e-4, equal_nan=True)


def test_continuation_ids_default_and_given_text(tiny):
    """continuation_ids decodes 8 tokens by default (unless EOS comes first), takes a given
    continuation as it is, or its first max_new_tokens tokens, which alone must fit the model's
    positions (attribute_generation refuses the two together)."""
    from aieg_fast.generation import DEFAULT_MAX_NEW_TOKENS, continuation_ids

    ids = continuation_ids(tiny, PROMPT)
    assert len(ids) == DEFAULT_MAX_NEW_TOKENS or ids[-1] == tiny.tokenizer.eos_token_id
    assert continuation_ids(tiny, PROMPT, 3) == ids[:3]
    assert continuation_ids(tiny, PROMPT, generated_text=[5, 6, 7]) == [5, 6, 7]
    assert continuation_ids(tiny, PROMPT, 2, generated_text=[5, 6, 7]) == [5, 6]
    limit = tiny.adapter.max_positions
    too_long = [5] * limit
    with pytest.raises(ValueError, match=r"plus generated_text \(\d+ tokens\) exceed"):
        continuation_ids(tiny, PROMPT, generated_text=too_long)
    assert continuation_ids(tiny, PROMPT, 4, generated_text=too_long) == [5] * 4
    with pytest.raises(ValueError, match="max_new_tokens must be a positive int, got 0"):
        continuation_ids(tiny, PROMPT, 0, generated_text=[5, 6, 7])
    with pytest.raises(ValueError, match=r"max_new_tokens=3 decodes a continuation, but generated_text gives one.*"
                                         r"continuation_ids\(ex, prompt, n, generated_text=text\)"):
        tiny.attribute_generation(PROMPT, max_new_tokens=3, generated_text=[5, 6, 7])


@pytest.mark.parametrize("method, kw", [("integrated_decision_gradients", {}), ("integrated_gradients", {"shared": False})])
def test_steps_make_no_forward_for_p_target(tiny_gpt2, method, kw):
    """A generation's step probabilities come from their own forward: the steps' batch made one
    more no-grad forward over every step for p(target), which nothing read."""
    res = tiny_gpt2.attribute_generation(PROMPT, generated_text=CONT, method=method, n_steps=4, **kw)
    assert "predict" not in res.timing and len(res.info["step_probs"]) == res.scores.shape[0]


def test_word_occlusion_masks_each_generated_token_on_its_own(tiny_gpt2):
    """The view gives each generated token a column of its own: with interpolate_generated a
    continuation of the prompt's last word ("unflinch" + "ingly") was masked with that word, so
    the view showed one score in several columns."""
    res = tiny_gpt2.attribute_generation("the movie is bad and unflinch", generated_text="ingly bleak", method="occlusion",
                                         granularity="word", interpolate_generated=True)
    n, last = res.prompt_length, res.scores[-1]
    assert float(last[n]) != pytest.approx(float(last[n - 1]), abs=1e-6)
    assert float(last[n]) != pytest.approx(float(last[n + 1]), abs=1e-6)


def test_greedy_under_return_dict_false_says_what_to_do(tiny_llama):
    # transformers 5's own forward of LLaMA breaks when config.return_dict is False; the
    # greedy continuation names the setting and the two ways out, and the model is left as it was
    ex = tiny_llama
    ex.model.config.return_dict = False
    try:
        before = _model_state(ex)
        with pytest.raises(RuntimeError, match=r"config\.return_dict=False.*generated_text="):
            ex.attribute_generation(PROMPT, max_new_tokens=2, method="saliency")
        assert _model_state(ex) == before
        res = ex.attribute_generation(PROMPT, generated_text=CONT, method="saliency")
        assert res.scores.shape[0] == len(_cont_ids(ex))
    finally:
        ex.model.config.return_dict = True


@pytest.mark.parametrize("stored", [dict(repetition_penalty=1.3), dict(no_repeat_ngram_size=1), dict(suppress_tokens="the first greedy token"),
                                    dict(return_dict_in_generate=True, output_scores=True), dict(num_return_sequences=2)])
def test_greedy_ignores_generation_settings_stored_with_the_model(tiny_llama, stored):
    # the continuation explained is the argmax at every step, whatever model.generation_config
    # holds; that config is given back as it was
    ex = tiny_llama
    prompt = "the movie is good and the actors"  # its greedy continuation repeats a token
    p_ids, _ = ex.encode(prompt)
    expected = _greedy_by_hand(ex, p_ids, 6)
    cfg = ex.model.generation_config
    old = {k: getattr(cfg, k, None) for k in stored}
    stored = {k: expected[:1] if v == "the first greedy token" else v for k, v in stored.items()}
    for k, v in stored.items():
        setattr(cfg, k, v)
    try:
        assert aieg_fast.generation.continuation_ids(ex, prompt, 6) == expected
        assert ex.model.generation_config is cfg and all(getattr(cfg, k) == v for k, v in stored.items())
    finally:
        for k, v in old.items():
            setattr(cfg, k, v)


def test_a_given_text_is_cut_with_a_slow_tokenizer_too():
    """A slow (Python) tokenizer gives no offsets: the cut of a given continuation still takes
    its first tokens (it failed on the missing offsets)."""
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizer

    words = ["<unk>", "</s>", "the", "movie", "is", "good", "and", "actors", "are", "great"]

    class WordTokenizer(PreTrainedTokenizer):
        vocab_files_names = {}

        def __init__(self, **kw):
            self.vocab = {w: i for i, w in enumerate(words)}
            super().__init__(unk_token="<unk>", eos_token="</s>", **kw)

        @property
        def vocab_size(self):
            return len(words)

        def get_vocab(self):
            return dict(self.vocab)

        def _tokenize(self, text, **kw):
            return text.split()

        def _convert_token_to_id(self, token):
            return self.vocab.get(token, 0)

        def _convert_id_to_token(self, i):
            return words[i]

        def convert_tokens_to_string(self, tokens):
            return " ".join(tokens)

        def save_vocabulary(self, *args, **kw):
            return ()

    tok = WordTokenizer()
    assert not tok.is_fast
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=len(words), n_positions=64, eos_token_id=1, bos_token_id=1, pad_token_id=1)
    ex = aieg_fast.load_model(GPT2LMHeadModel(cfg).eval(), tok)
    whole = aieg_fast.generation.continuation_ids(ex, "the movie is", generated_text=" good and the actors")
    assert len(whole) == 4 and aieg_fast.generation.continuation_ids(ex, "the movie is", 2, generated_text=" good and the actors") == whole[:2]
