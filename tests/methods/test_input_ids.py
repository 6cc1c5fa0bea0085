"""``attribute(input_ids=...)`` (issue 18): token ids skip tokenisation and give the scores of
the text they encode; special tokens are held fixed; bad ids are refused, naming the position,
before any model work."""
from __future__ import annotations

import pytest
import torch

from builders import model_state

TEXT = "the movie is good and the actors are great"
SHORT = "the film was bad"


@pytest.mark.parametrize("method", ["integrated_gradients", "saliency", "aieg"])
def test_ids_equal_text(tiny, method):
    ids, fixed = tiny.encode(TEXT)
    by_text = tiny.attribute(TEXT, method=method, n_steps=8)
    for given in (ids, torch.tensor(ids)):
        by_ids = tiny.attribute(input_ids=given, method=method, n_steps=8)
        assert by_ids.token_ids == by_text.token_ids and by_ids.attributable == by_text.attributable
        assert by_ids.target == by_text.target
        torch.testing.assert_close(by_ids.scores, by_text.scores)
    assert by_ids.attributable == [not f for f in fixed]


def test_special_tokens_in_ids_are_held_fixed(tiny_llama):
    ids, _ = tiny_llama.encode(TEXT)
    assert ids[0] == tiny_llama.tokenizer.bos_token_id
    res = tiny_llama.attribute(input_ids=ids, method="integrated_gradients", n_steps=4)
    assert res.attributable[0] is False and all(res.attributable[1:])
    assert float(res.scores[0]) == 0.0


def test_batches_of_ids_equal_batches_of_text(tiny_gpt2):
    texts = [TEXT, SHORT]
    rows = [tiny_gpt2.encode(t)[0] for t in texts]
    by_text = tiny_gpt2.attribute(texts, method="integrated_gradients", n_steps=8, target=[" good", " bad"])
    by_ids = tiny_gpt2.attribute(input_ids=rows, method="integrated_gradients", n_steps=8, target=[" good", " bad"])
    for a, b in zip(by_ids, by_text):
        assert a.token_ids == b.token_ids
        torch.testing.assert_close(a.scores, b.scores)
    same_len = torch.tensor([rows[0][:5], rows[0][3:8]])
    two = tiny_gpt2.attribute(input_ids=same_len, method="saliency")
    assert [r.token_ids for r in two] == same_len.tolist()


def test_ids_with_auto_steps(tiny_gpt2):
    ids, _ = tiny_gpt2.encode(TEXT)
    a = tiny_gpt2.attribute(input_ids=ids, method="integrated_gradients", n_steps="auto", tolerance=1e-3)
    b = tiny_gpt2.attribute(TEXT, method="integrated_gradients", n_steps="auto", tolerance=1e-3)
    assert a.info["alphas"] == b.info["alphas"]
    torch.testing.assert_close(a.scores, b.scores)


@pytest.mark.parametrize("given, err, match", [
    ([1, 2, 10**6], ValueError, r"input_ids\[2\] = 1000000 is not a token id of this model: ids are in \[0, \d+\)"),
    ([1, -1], ValueError, r"input_ids\[1\] = -1 is not a token id"),
    ([[1, 2], [3, 400]], ValueError, r"input_ids\[1\]\[1\] = 400 is not a token id"),
    ([1, 2.0], TypeError, r"input_ids\[1\] must be an int token id, got 2.0 \(float\)"),
    ([1, True], TypeError, r"input_ids\[1\] must be an int token id, got True"),
    (["the"], TypeError, r"input_ids\[0\] must be an int token id, got 'the'"),
    ([], ValueError, r"input_ids is empty"),
    ([[1, 2], []], ValueError, r"input_ids\[1\] is empty"),
    (torch.tensor([1.0, 2.0]), TypeError, r"input_ids must hold integer token ids, got a tensor of dtype torch.float32"),
    (torch.zeros(1, 2, 3, dtype=torch.long), ValueError, r"input_ids must be 1-D \[L\] or 2-D \[B, L\], got shape \(1, 2, 3\)"),
    ("the movie", TypeError, r"input_ids must be a list of token ids, a list of such lists or a LongTensor, got str"),
    ([5] * 100, ValueError, r"input_ids is 100 tokens long, but the model accepts at most 64 positions"),
    ([0, 0], ValueError, r"input_ids has no attributable token: all 2 are special tokens"),
    ([torch.tensor(4), torch.tensor(6)], TypeError, r"input_ids\[0\] must be an int token id, got tensor\(4\)"),
])
def test_bad_ids_are_refused(tiny_gpt2, given, err, match):
    before = model_state(tiny_gpt2)
    with pytest.raises(err, match=match):
        tiny_gpt2.attribute(input_ids=given, method="integrated_gradients", n_steps=4)
    assert model_state(tiny_gpt2) == before


@pytest.mark.parametrize("kwargs, match", [
    (dict(text=TEXT, input_ids=[1, 2]), r"give either text or input_ids .*, not both"),
    (dict(), r"give either text or input_ids .*, not neither"),
    (dict(input_ids=[1, 2], template="Q: {text}"), r"template applies to text; with input_ids"),
    (dict(input_ids=[[1, 2], [3, 4]], target=[" good"]), r"target has 1 entry for 2 id sequences: give one target per input"),
    (dict(text=TEXT, progress="yes"), r"progress must be True or False, got 'yes'"),
])
def test_text_or_ids(tiny_gpt2, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tiny_gpt2.attribute(method="saliency", **kwargs)


def _padded(tok, side: str):
    """The tokenizer's padded [2, L] output of TEXT and SHORT, padded on ``side``."""
    tok.padding_side = side
    try:
        return tok([TEXT, SHORT], padding=True, return_tensors="pt")
    finally:
        tok.padding_side = "right"


def test_padded_tensor_batch_is_refused(tiny_llama):
    """A tokenizer's padded [B, L] output would make the pads input (there is no attention mask):
    refused before any work, naming the row; the same rows as a list of lists run and equal texts."""
    for side in ("right", "left"):
        enc = _padded(tiny_llama.tokenizer, side)
        with pytest.raises(ValueError, match=r"input_ids\[1\] (ends|starts) with \d+ padding token"):
            tiny_llama.attribute(input_ids=enc["input_ids"], method="saliency")
    rows = [tiny_llama.encode(t)[0] for t in (TEXT, SHORT)]
    by_ids = tiny_llama.attribute(input_ids=rows, method="saliency")
    assert [r.target for r in by_ids] == [r.target for r in tiny_llama.attribute([TEXT, SHORT], method="saliency")]


def test_pad_that_is_also_eos_is_refused_only_as_a_run():
    from aieg_fast.core.inputs import check_no_padding

    check_no_padding(torch.tensor([[5, 6, 0], [5, 7, 0]]), pad_id=0, bos_eos_ids=(0, 0))  # one EOS at the end: a prompt may hold it
    with pytest.raises(ValueError, match=r"input_ids\[0\] ends with 2 padding"):
        check_no_padding(torch.tensor([[5, 0, 0], [5, 6, 7]]), pad_id=0, bos_eos_ids=(0, 0))
    check_no_padding([[5, 0, 0], [5]], pad_id=0, bos_eos_ids=(0, 0))  # lists are not padded by the caller
    check_no_padding(torch.tensor([[0, 5, 6], [0, 5, 7]]), pad_id=0, bos_eos_ids=(0, 0))  # every row starts with BOS
    with pytest.raises(ValueError, match=r"input_ids\[0\] ends with 1 padding token\(s\) \(id 0\): a \[B, L\]"):
        check_no_padding(torch.tensor([[5, 6, 0], [5, 7, 0]]), pad_id=0, bos_eos_ids=(1, 2))  # a pad of its own: no "other rows"


def test_one_pad_that_is_also_eos_is_refused_where_other_rows_have_none(tiny_gpt2):
    """GPT-2's pad is <|endoftext|>: rows one token apart, padded by the tokenizer, were
    accepted and the pad was read as input (another prediction explained)."""
    tok = tiny_gpt2.tokenizer
    pad_before = tok.pad_token
    tok.pad_token = tok.eos_token
    try:
        for side, where in (("left", "starts"), ("right", "ends")):
            tok.padding_side = side
            ids = tok("the cat sat")["input_ids"]
            enc = tok.pad({"input_ids": [ids, ids[:-1]]}, return_tensors="pt")
            assert int((1 - enc["attention_mask"]).sum()) == 1  # one pad, in row 1
            with pytest.raises(ValueError, match=rf"input_ids\[1\] {where} with 1 padding token\(s\) .* where other rows have none"):
                tiny_gpt2.attribute(input_ids=enc["input_ids"], method="saliency")
    finally:
        tok.pad_token, tok.padding_side = pad_before, "right"


def test_text_item_errors_name_the_item(tiny_gpt2):
    with pytest.raises(TypeError, match=r"text\[1\] must be a str .*got int"):
        tiny_gpt2.attribute(["good", 3], method="saliency")
    with pytest.raises(TypeError, match=r"entry 'passage' holds a int"):
        tiny_gpt2.attribute({"passage": 3}, template="{passage}", method="saliency")


def test_template_field_missing_from_the_text_is_refused(tiny_gpt2):
    with pytest.raises(ValueError, match=r"template names field\(s\) \['question'\] that text does not give"):
        tiny_gpt2.attribute({"passage": "the movie is good"}, template="{passage}\nQuestion: {question}?\nAnswer:",
                            method="saliency")
    res = tiny_gpt2.attribute({"passage": "the movie is good"}, template='{passage} {"k": 1} {}', method="saliency")
    assert res.text.endswith('{"k": 1} {}')  # braces that name no field stay text
    # a str text with a template naming another field: refused as for a mapping (it was kept as
    # literal text, while evaluate read it as a column); braces that name nothing stay text
    with pytest.raises(ValueError, match=r"template names field\(s\) \['other'\] besides \{text\}"):
        tiny_gpt2.attribute("the movie is good", template="{text} {other}", method="saliency")
    assert tiny_gpt2.attribute("the movie", template="{text} {{x}} {}", method="saliency").text == "the movie {{x}} {}"


def test_classifier_sequence_ending_with_its_pad_is_refused(tiny_gpt2_clf):
    """A classification head pools at the last token that is not its pad token; a sequence
    ending with that token would be explained at another position than the model's own logits
    come from (before: F differed from the model's logit, silently). Without it, F is the
    model's logit."""
    ex = tiny_gpt2_clf
    pad = ex.model.config.pad_token_id
    assert isinstance(pad, int)
    body = [i for i in (4, 6, 7, 8) if i != pad]
    with pytest.raises(ValueError, match=rf"sequence 0 ends with the model's pad token \(id {pad}, config.pad_token_id\)"):
        ex.attribute(input_ids=body + [pad], method="saliency", target=1)
    res = ex.attribute(input_ids=body, method="saliency", target=1)
    with torch.no_grad():
        own = ex.model(torch.tensor([body])).logits[0, 1]
    assert res.info["F_input"] == pytest.approx(float(own), abs=1e-5)


def test_a_list_of_numpy_integers_is_one_sequence(tiny_gpt2):
    """numpy integer scalars in a list are token ids (before: read as rows of a batch, a
    TypeError "'int' object is not iterable")."""
    np = pytest.importorskip("numpy")
    a = tiny_gpt2.attribute(input_ids=[np.int64(4), np.int64(6), np.int32(7)], method="saliency")
    b = tiny_gpt2.attribute(input_ids=[4, 6, 7], method="saliency")
    assert a.token_ids == [4, 6, 7] and torch.equal(a.scores, b.scores)


def test_a_tokenizers_output_is_taken_with_its_padding_taken_off(tiny_llama):
    """A tokenizer's output (BatchEncoding; transformers 5's apply_chat_template returns one) was
    refused as input_ids: its ids are taken, and its attention_mask takes the padding off each
    row, so a padded batch equals its rows given as lists."""
    tok = tiny_llama.tokenizer
    rows = [tiny_llama.encode(t)[0] for t in (TEXT, SHORT)]
    expected = tiny_llama.attribute(input_ids=rows, method="saliency")
    for side in ("right", "left"):
        enc = _padded(tok, side)
        got = tiny_llama.attribute(input_ids=enc, method="saliency")
        assert [r.token_ids for r in got] == rows
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.scores, e.scores)
    masked = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"].bool()}  # a bool mask too
    assert [r.token_ids for r in tiny_llama.attribute(input_ids=masked, method="saliency")] == rows
    one = tiny_llama.attribute(input_ids=tok(TEXT), method="saliency")  # lists, one sequence
    assert one.token_ids == rows[0] and torch.equal(one.scores, tiny_llama.attribute(input_ids=rows[0], method="saliency").scores)
    with pytest.raises(TypeError, match=r"input_ids is a dict without an 'input_ids' entry \(keys \['ids'\]\)"):
        tiny_llama.attribute(input_ids={"ids": rows[0]}, method="saliency")
    with pytest.raises(ValueError, match=r"input_ids\['attention_mask'\] has another shape"):
        tiny_llama.attribute(input_ids={"input_ids": rows[0], "attention_mask": [1]}, method="saliency")
