"""Tokenisation edges (issue 14): exactly one BOS whatever the prompt holds (single, batched,
templates, chat templates rendered to text); special-token strings typed in the text are
warned; targets and forced continuations are tokenised as the model would produce them after
the prompt, with a warning when the boundary merges."""
from __future__ import annotations

import re
import warnings

import pytest
import torch

from aieg_fast import AttributionWarning
from aieg_fast.core.tokens import continuation, one_bos

TEXT = "the movie is good"


def _bos_count(res, ex):
    return sum(i == ex.tokenizer.bos_token_id for i in res.token_ids)


def _no_attribution_warning(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error", AttributionWarning)
        return fn()


def test_typed_bos_gives_one_bos_single_and_batched(tiny_llama):
    ex = tiny_llama
    plain = ex.attribute(TEXT, method="saliency")
    typed = _no_attribution_warning(lambda: ex.attribute("<s>" + TEXT, method="saliency"))
    assert _bos_count(plain, ex) == 1 and _bos_count(typed, ex) == 1
    assert typed.token_ids == plain.token_ids
    torch.testing.assert_close(typed.scores, plain.scores)
    for side in ("right", "left"):
        batch = _no_attribution_warning(lambda: ex.attribute(["<s>" + TEXT, "<s><s>the film was bad", "the film"], method="saliency",
                                                             padding_side=side))
        assert [_bos_count(r, ex) for r in batch] == [1, 1, 1]
        torch.testing.assert_close(batch[0].scores, plain.scores, atol=1e-5, rtol=1e-4)


def test_one_bos_with_templates_and_chat_templates(tiny_llama):
    ex = tiny_llama
    tok = ex.tokenizer
    res = ex.attribute(TEXT, method="saliency", template="<s>Review: {text} Answer:")
    assert _bos_count(res, ex) == 1 and res.token_ids[0] == tok.bos_token_id
    old = getattr(tok, "chat_template", None)
    tok.chat_template = "{{ bos_token }}{% for m in messages %}{{ m['role'] }} , {{ m['content'] }} . {% endfor %}"
    try:
        rendered = tok.apply_chat_template([{"role": "user", "content": TEXT}], tokenize=False)
        assert rendered.startswith("<s>")
        as_text = _no_attribution_warning(lambda: ex.attribute(rendered, method="saliency"))
        as_template = tok.apply_chat_template([{"role": "user", "content": "{text}"}], tokenize=False)
        in_template = ex.attribute(TEXT, method="saliency", template=as_template)
    finally:
        tok.chat_template = old
    assert _bos_count(as_text, ex) == 1 and _bos_count(in_template, ex) == 1
    assert as_text.token_ids == in_template.token_ids


def test_one_bos_helper():
    assert one_bos([1, 1, 1, 5], [(0, 0), (0, 3), (3, 6), (6, 9)], 1) == ([1, 5], [(3, 6), (6, 9)])
    assert one_bos([1, 5, 1], None, 1) == ([1, 5, 1], None)
    assert one_bos([5, 6], None, None) == ([5, 6], None)


@pytest.mark.parametrize("fixture, special", [("tiny_gpt2", "<|endoftext|>"), ("tiny_llama", "<s>")])
def test_typed_special_token_is_warned_and_held_fixed(request, fixture, special):
    ex = request.getfixturevalue(fixture)
    with pytest.warns(AttributionWarning, match=r"text holds \[.*\], typed as text: .* held fixed"):
        res = ex.attribute(f"the {special} movie", method="saliency")
    sid = ex.tokenizer.convert_tokens_to_ids(special)
    k = [i for i, t in enumerate(res.token_ids) if t == sid][-1]
    assert not res.attributable[k] and float(res.scores[k]) == 0.0


def test_special_token_in_template_is_not_warned(tiny_gpt2):
    _no_attribution_warning(lambda: tiny_gpt2.attribute(TEXT, method="saliency", template="<|endoftext|>Review: {text}"))


def test_target_tokenised_in_context_sentencepiece(tiny_llama):
    """With a SentencePiece tokenizer, "od" after the prompt is the piece 'od' (alone it is
    ['▁', 'od']); " good" is '▁good'; "good" glued to "is" is not one token in context."""
    ex = tiny_llama
    tok = ex.tokenizer
    assert tok.convert_ids_to_tokens(tok.encode("od", add_special_tokens=False)) == ["▁", "od"]
    res = _no_attribution_warning(lambda: ex.attribute("the movie is", method="saliency", target="od"))
    assert tok.convert_ids_to_tokens([res.target["id"]]) == ["od"]
    res = ex.attribute("the movie is", method="saliency", target=" good")
    assert tok.convert_ids_to_tokens([res.target["id"]]) == ["▁good"]
    with pytest.raises(ValueError, match=r"is not a single token: it tokenizes as \['g', 'ood'\].* after the prompt"):
        ex.attribute("the movie is", method="saliency", target="good")


def test_forced_continuation_tokenised_in_context(tiny_llama):
    ex = tiny_llama
    tok = ex.tokenizer
    gen = _no_attribution_warning(lambda: ex.attribute_generation("the movie is", generated_text="od", method="saliency"))
    assert tok.convert_ids_to_tokens(gen.info["generated_ids"]) == ["od"]
    assert gen.text == "the movie isod" and gen.offsets[-1] == [12, 14]


def test_boundary_merge_is_warned(tiny_llama):
    """"od" after "... go" merges into '▁good': warned, and taken alone without the lone '▁'."""
    ex = tiny_llama
    tok = ex.tokenizer
    with pytest.warns(AttributionWarning, match=r"generated_text 'od' merges with the end of the prompt"):
        gen = ex.attribute_generation("the movie is go", generated_text="od", method="saliency")
    assert tok.convert_ids_to_tokens(gen.info["generated_ids"]) == ["od"]
    with pytest.warns(AttributionWarning, match=r"target 'od' merges with the end of the prompt"):
        res = ex.attribute("the movie is go", method="saliency", target="od")
    assert tok.convert_ids_to_tokens([res.target["id"]]) == ["od"]


def test_byte_level_targets_unchanged(tiny_gpt2):
    tok = tiny_gpt2.tokenizer
    res = _no_attribution_warning(lambda: tiny_gpt2.attribute(TEXT, method="saliency", target=" great"))
    assert [res.target["id"]] == tok.encode(" great", add_special_tokens=False)
    ids, _, merged = continuation(tok, "the movie is", " good and great")
    assert ids == tok.encode(" good and great", add_special_tokens=False) and not merged


def test_characters_the_tokenizer_cannot_encode_are_warned(tiny_llama, tiny_gpt2):
    """A tokenizer without byte fallback turns an emoji into its unknown token: in the prompt that
    position is held fixed, in a forced continuation its step explains the unknown token; both
    are said (names the characters). A typed "<unk>" is the typed-special warning's, and a
    byte-level tokenizer never warns."""
    ex = tiny_llama
    with pytest.warns(AttributionWarning, match=r"text has characters \['🙂'\] that the tokenizer can only encode as its unknown token '<unk>', held fixed"):
        res = ex.attribute("the movie is 🙂 good", method="saliency")
    unk = [k for k, i in enumerate(res.token_ids) if i == ex.tokenizer.unk_token_id]
    assert unk and all(not res.attributable[k] for k in unk)
    with pytest.warns(AttributionWarning, match=r"generated_text has characters \['🙂', 'q'\] .* explain the model's score of '<unk>'"):
        ex.attribute_generation("the movie is", generated_text=" good 🙂 zq", method="saliency")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ex.attribute("the movie is <unk> good", method="saliency")
    assert [str(w.message) for w in caught if "unknown token" in str(w.message)] == []
    assert any("typed as text" in str(w.message) for w in caught)
    _no_attribution_warning(lambda: tiny_gpt2.attribute("the movie is 🙂 good", method="saliency"))
    _no_attribution_warning(lambda: tiny_gpt2.attribute_generation("the movie is", generated_text=" 🙂", method="saliency"))


def test_unknown_pieces_helper(tiny_llama):
    from aieg_fast.core.tokens import unknown_pieces

    tok = tiny_llama.tokenizer
    text = "x good x 🙂"
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert unknown_pieces(tok, text, enc["input_ids"], enc["offset_mapping"]) == ["x", "🙂"]  # each once, in order
    assert unknown_pieces(tok, text, enc["input_ids"], None) == [None, None, None]
    assert unknown_pieces(tok, "good", tok("good", add_special_tokens=False)["input_ids"], None) == []


def test_target_given_by_id_reads_as_typed(tiny_llama, tiny_gpt2):
    """SentencePiece decodes ▁great alone as "great": a target given by id, the prediction and a
    generated step read " great", as the same target typed as text does."""
    from aieg_fast.core.tokens import token_text_after

    for ex in (tiny_llama, tiny_gpt2):
        i = ex.tokenizer(" great", add_special_tokens=False)["input_ids"][-1]
        assert token_text_after(ex.tokenizer, i) == " great"
        by_text = ex.attribute(TEXT, method="saliency", target=" great")
        by_id = ex.attribute(TEXT, method="saliency", target=i)
        assert by_text.target["text"] == by_id.target["text"] == " great"
        gen = ex.attribute_generation("the movie is", generated_text=[i], method="saliency")
        assert gen.info["steps"][0]["target"]["text"] == " great"
        assert (" great", i) in [(n, j) for n, j, _ in ex.predict("the movie is", top_k=ex.vocab_size)]
    assert tiny_llama.tokenizer.decode([tiny_llama.tokenizer.convert_tokens_to_ids("▁great")]) == "great"  # the cause
    assert token_text_after(tiny_gpt2.tokenizer, tiny_gpt2.tokenizer.convert_tokens_to_ids("reat")) == "reat"  # no space added


def test_special_token_typed_in_generated_text_is_warned(tiny_gpt2):
    """A special-token string typed in generated_text becomes that token (here EOS): warned, as
    in a prompt (it was silent)."""
    eos = tiny_gpt2.tokenizer.eos_token
    with pytest.warns(AttributionWarning, match=rf"generated_text holds \['{re.escape(eos)}'\], typed as text"):
        res = tiny_gpt2.attribute_generation("the movie is", generated_text=f" good{eos} and", method="saliency")
    assert tiny_gpt2.tokenizer.eos_token_id in res.info["generated_ids"]
