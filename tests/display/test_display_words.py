"""Words from the tokenizer's offsets: byte-level BPE, SentencePiece (Metaspace) and WordPiece
tokenizers; accented, CJK and emoji text read as typed (words, tokens, JSON round trip); the
marker fallback for old files; the generation word view."""
from __future__ import annotations

import json

import pytest
import torch

import aieg_fast
from aieg_fast.display.words import offset_groups, visible
from builders import byte_level_tokenizer

TEXT = "café naïve résumé 今天 😀 ok.\nIs"
WORDS = ["café", "␣", "naïve", "␣", "résumé", "␣", "今", "天", "␣", "😀", "␣", "ok.", "⏎", "Is"]


def _result(tok, text, scores=None):
    enc = tok(text, return_offsets_mapping=True, add_special_tokens=False)
    ids = enc["input_ids"]
    L = len(ids)
    return aieg_fast.Attribution(
        tokens=[tok.decode([i]) for i in ids], token_ids=ids,
        scores=torch.arange(1, L + 1, dtype=torch.float32) if scores is None else scores,
        method="saliency", target={"kind": "token", "id": 0, "text": "x"}, model="tiny",
        raw_tokens=tok.convert_ids_to_tokens(ids), text=text, offsets=[list(o) for o in enc["offset_mapping"]],
    )


def wordpiece_tokenizer():
    """BERT style WordPiece (``##`` continuation, no marker on word starts)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = ["[UNK]", "[CLS]", "[SEP]", "un", "##believ", "##able", "movie", "##s", "!", "the", "is", "great"]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]")


def test_byte_level_words_read_as_typed(tmp_path):
    tok = byte_level_tokenizer()
    res = _result(tok, TEXT)
    assert any("\ufffd" in tok.decode([i]) for i in res.token_ids)  # the tokenizer splits characters into bytes
    assert res.word_rule == "offsets"
    words, ws = res.words()
    assert words == WORDS
    assert "\ufffd" not in "".join(res.tokens) and "Ã" not in "".join(words)
    assert "".join(res.tokens) == TEXT  # the token texts concatenate to the text
    assert sum(ws) == pytest.approx(float(res.scores.sum()))
    # JSON round trip keeps text, offsets, words and the rule
    p = tmp_path / "r.json"
    res.save(p)
    d = json.loads(p.read_text(encoding="utf-8"))
    assert d["word_rule"] == "offsets" and d["words"] == WORDS and d["text"] == TEXT
    back = aieg_fast.load_attribution(p)
    assert back.words() == res.words() and back.tokens == res.tokens and back.offsets == res.offsets


def test_wordpiece_words():
    tok = wordpiece_tokenizer()
    text = "The unbelievable movies is great!"
    res = _result(tok, text)
    assert res.raw_tokens[1:4] == ["un", "##believ", "##able"]
    words, _ = res.words()
    assert [w for w in words if w != "␣"] == ["The", "unbelievable", "movies", "is", "great!"]
    # the marker rule (no Ġ/▁ markers in WordPiece) would make the sentence one word
    assert len(aieg_fast.aggregate_words(res.raw_tokens, res.scores)[0]) == 1


def test_sentencepiece_words(tiny_llama):
    res = tiny_llama.attribute("café naïve 今天 ok.\nIs", method="saliency")
    assert res.word_rule == "offsets"
    words, ws = res.words()
    assert words[0] == "<s>" and ws[0] != ws[0]  # BOS: its own word, held fixed (NaN)
    assert [w for w in words[1:] if w not in ("␣", "⏎")] == ["café", "naïve", "今", "天", "ok.", "Is"]
    labels = res.token_labels()
    assert "<unk>" not in "".join(labels[1:]) and "\ufffd" not in "".join(labels)


def test_offset_groups_rules():
    # a byte completed by the next token (empty span) joins that token's word
    assert offset_groups("ab é", [[0, 2], [2, 3], [3, 3], [3, 4]]) == [[0], [1], [2, 3]]
    # tokens without offsets (special) stand alone; an offset outside the text is an error
    assert offset_groups("ab", [None, [0, 1], [1, 2], None]) == [[0], [1, 2], [3]]
    with pytest.raises(ValueError, match="outside the text"):
        offset_groups("ab", [[0, 5]])
    assert visible(" \n") == "␣⏎" and visible(" a") == " a"


def test_old_files_fall_back_to_markers(tmp_path):
    tok = byte_level_tokenizer()
    d = _result(tok, "the movie is great").to_dict()
    for k in ("text", "offsets", "word_rule", "words", "word_scores"):
        d.pop(k)  # a file written before offsets were recorded
    p = tmp_path / "old.json"
    p.write_text(json.dumps(d), encoding="utf-8")
    old = aieg_fast.load_attribution(p)
    assert old.word_rule == "markers" and old.offsets == [] and old.text == ""
    assert old.words()[0] == ["the", "movie", "is", "great"]
    assert old.words()[0] == aieg_fast.aggregate_words(old.raw_tokens, old.scores)[0]
    old.to_html(), old.to_dict()  # every view works without offsets


def test_generation_word_view(tiny_gpt2):
    res = tiny_gpt2.attribute_generation("The capital is Paris", generated_text=".\nIs it", method="saliency")
    Lp = res.prompt_length
    T = res.scores.shape[0]
    assert res.word_rule == "offsets" and res.text == "The capital is Paris.\nIs it"
    groups = res.word_groups()
    # prompt words, then one column per generated token: no row explains a token of its own context word
    assert all(max(g) < Lp or len(g) == 1 for g in groups)
    assert not any(min(g) < Lp <= max(g) for g in groups)
    words, rows = res.words()
    assert "Paris" in words and "Paris." not in words
    labels = res.token_labels()
    assert labels[Lp:Lp + 2] == [".", "⏎"]  # the newline step has a visible label
    for t in range(T):
        for c, g in enumerate(groups):
            if g[0] >= Lp + t:  # the explained token and the future carry no score
                assert rows[t][c] != rows[t][c]


def test_greedy_generation_has_offsets(tiny_gpt2):
    res = tiny_gpt2.attribute_generation("café", max_new_tokens=3, method="saliency")
    assert res.text.startswith("café") and len(res.offsets) == len(res.tokens)
    Lp = res.prompt_length
    gen = "".join(res.text[o[0]:o[1]] for o in res.offsets[Lp:] if o)
    assert gen == res.text[len("café"):]


def _byte_tokens(tok, data: bytes):
    """Ids of the byte-level tokenizer's one-byte tokens spelling ``data``."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    chars = bytes_to_unicode()
    return [tok.convert_tokens_to_ids(chars[b]) for b in data]


@pytest.mark.parametrize("tail, spans", [
    (b"\xf0\x9fz", ["", "\ufffd", "z"]),        # a lead byte and a continuation byte, not continued
    (b"z\xf0\x9f", ["z", "", "\ufffd"]),        # left at the end
    (b"\xff\xfez", ["\ufffd", "\ufffd", "z"]),  # two bytes that are no UTF-8 at all: one each
    (b"\xe2\x82\xac", ["", "", "\u20ac"]),      # the euro sign: the token completing it
    (b"z\xff\xfe", ["z", "\ufffd", "\ufffd"]),  # the last step's fragments: one each, not both to the last
    (b"\xf0\xe2\x82\xac", ["\ufffd", "", "", "\u20ac"]),  # an orphan lead byte before a whole euro sign: its own
    (b"\xf0\x9f\xf0\x9f\x98\x80z", ["", "\ufffd", "", "", "", "\U0001f600", "z"]),
])
def test_generated_byte_fragments_keep_their_characters(tiny_gpt2, tail, spans):
    """Generated byte tokens that form no character (a lead byte not continued, or left at the
    end) decode to U+FFFD: those go to the byte tokens' own labels, the last of them first, not
    to the next token's (its column header read "\ufffd\ufffdz" while its row read "z"); bytes
    that do form one (the euro sign) give it to the token completing it, the others an empty span."""
    res = tiny_gpt2.attribute_generation("a film", generated_text=_byte_tokens(tiny_gpt2.tokenizer, tail), method="saliency")
    Lp = res.prompt_length
    assert [res.text[a:b] for a, b in res.offsets[Lp:]] == spans
    assert res.text == "a film" + tail.decode("utf-8", errors="replace")


@pytest.mark.parametrize("args, err, match", [
    ((["a", "Ġb"], [1.0, 2.0], [True]), ValueError, r"special has 1 entries but tokens has 2"),      # IndexError before
    ((["a"], [1.0], [True, False]), ValueError, r"special has 2 entries but tokens has 1"),         # accepted silently
    ((["a", "Ġb"], torch.zeros(2, 3)), ValueError, r"scores must be one number per token .* shape \(2, 3\)"),
    ((["a"], torch.tensor(1.0)), ValueError, r"scores must be one number per token .* shape \(\)"),
    ((["a", None], [1.0, 2.0]), TypeError, r"tokens must be strings .* got None at index 1"),
])
def test_aggregate_words_names_bad_input(args, err, match):
    with pytest.raises(err, match=match):
        aieg_fast.aggregate_words(*args)


def test_invisible_and_combining_tokens_are_shown():
    """A token that is only a zero-width joiner or space printed as nothing (an empty-looking cell),
    and a lone combining accent merged into the padding before it, shifting its table row."""
    res = aieg_fast.Attribution(
        tokens=["a", "\u200d", "\u200b", "\u0301", "b\u0301"], token_ids=[1, 2, 3, 4, 5],
        scores=torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5]), method="saliency", target={"kind": "token", "id": 0, "text": "x"},
        model="tiny")
    assert res.token_labels() == ["a", "\\u200d", "\\u200b", "\u25cc\u0301", "b\u0301"]
    import io

    buf = io.StringIO()
    res.show(file=buf, words=False, width=80)
    assert "\\u200d" in buf.getvalue() and "\u25cc\u0301" in buf.getvalue()


def prepend_tokenizer():
    """Llama-2 / Mistral style: a Prepend("▁") normalizer (the space before the text), spaces as
    ``▁``, BPE with byte fallback (``<0xC3>``)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast

    from builders import CORPUS

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def test_prepended_space_token_reads_as_a_space():
    """The lone ``▁`` a Prepend normalizer puts before "é" or "x" has the offsets of the first
    character: the tokens view gave it that character (and its score) and the character's own
    tokens ``◌``. It reads ``␣``, as a ``▁`` inside the text does, and joins its word."""
    tok = prepend_tokenizer()
    res = _result(tok, "é movie")
    assert res.raw_tokens[:4] == ["▁", "<0xC3>", "<0xA9>", "▁"]
    assert res.token_labels()[:4] == ["␣", "é", "◌", "␣"]
    assert res.tokens[1] == "é" and "\ufffd" not in "".join(res.tokens)
    assert res.word_labels()[:3] == ["é", "␣", "movie"] and res.word_groups()[0] == [0, 1, 2]
    x = _result(tok, "x")
    assert x.raw_tokens == ["▁", "<0x78>"] and x.token_labels() == ["␣", "x"] and x.word_labels() == ["x"]


def test_words_end_at_held_fixed_text(tiny_gpt2):
    """A special token typed in the text, or template text with no space before the text, was
    merged with the words beside it into one word, unbracketed, scored as theirs: a word now
    ends where held-fixed text starts, and the held-fixed text is bracketed."""
    import io

    with pytest.warns(aieg_fast.AttributionWarning, match="typed as text"):
        typed = tiny_gpt2.attribute("the movie<|endoftext|>is good", method="saliency")
    assert typed.word_labels() == ["the", "␣", "movie", "<|endoftext|>", "is", "good"]
    buf = io.StringIO()
    typed.show(file=buf)
    assert "movie[" in buf.getvalue() and " [<|endoftext|>] is[" in buf.getvalue()
    templ = tiny_gpt2.attribute("good movie", method="saliency", template="Review:{text}!")
    words, scores = templ.words()
    assert words == ["Review:", "good", "␣", "movie", "!"]
    assert [s != s for s in scores] == [True, False, False, False, True]  # the template: held fixed (NaN)
    assert templ.to_html().count('<span class="aieg-w aieg-fixed"') == 2
    old = templ.to_dict()
    old.pop("offsets")  # the marker rule (a result saved without offsets) ends words there too
    assert aieg_fast.Attribution.from_dict(old).words()[0][:2] == ["Review:", "good"]


def test_other_whitespace_tokens_are_shown_as_escapes():
    """A token that is a no-break, thin or ideographic space was shown as itself: an empty-looking
    label (only space, newline, tab and carriage return had symbols)."""
    assert visible("\u00a0") == "\\xa0" and visible("\u3000") == "\\u3000" and visible(" \u2009\n") == "␣\\u2009⏎"
    res = aieg_fast.Attribution(tokens=["a", "\u00a0", "b", "\u3000"], token_ids=[1, 2, 3, 4], scores=torch.tensor([0.1, 0.2, 0.3, 0.4]),
                                method="saliency", target={"kind": "token", "id": 0, "text": "x"})
    assert res.token_labels() == ["a", "\\xa0", "b", "\\u3000"]


def test_two_space_tokens_on_one_space_both_read_as_spaces():
    """A continuation tokenized ``▁ ▁ <0xC3> <0xA9> !`` maps both ``▁`` onto its one space: the
    second read ``◌`` (a token without a character), a generated step shown as nothing."""
    tok = prepend_tokenizer()
    text = "the movie é!"
    ids = tok("the movie", add_special_tokens=False)["input_ids"]
    gen = [tok.convert_tokens_to_ids(t) for t in ("▁", "▁", "<0xC3>", "<0xA9>", "<0x21>")]
    offsets = [list(o) for o in tok("the movie", add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]
    offsets += [[9, 10], [9, 10], [10, 11], [10, 11], [11, 12]]
    res = aieg_fast.Attribution(tokens=[tok.decode([i]) for i in ids + gen], token_ids=ids + gen, scores=torch.ones(len(ids) + 5),
                                method="saliency", target={"kind": "token", "id": 0, "text": "x"},
                                raw_tokens=tok.convert_ids_to_tokens(ids + gen), text=text, offsets=offsets)
    assert res.token_labels()[len(ids):] == ["␣", "␣", "é", "◌", "!"]


def test_word_occlusion_masks_the_words_the_view_shows(tiny_gpt2):
    """Occlusion by word masks the words the view shows: with a special token typed between two
    words ("movie<|endoftext|>is") the view shows "movie" and "is" apart, and each is left out on
    its own (they were masked together: the view showed one score twice)."""
    with pytest.warns(aieg_fast.AttributionWarning, match="typed as text"):
        res = tiny_gpt2.attribute("the movie<|endoftext|>is good", method="occlusion", granularity="word")
    groups, labels = res.word_groups(), res.word_labels()
    movie, is_ = groups[labels.index("movie")], groups[labels.index("is")]
    assert float(res.scores[movie[0]]) != pytest.approx(float(res.scores[is_[0]]), abs=1e-6)


def test_unknown_character_tokens_sit_on_either_side_of_held_fixed_text(tiny_llama):
    """The tiny LLaMA's tokenizer has no "R", ":" or "S" (UNK, held fixed): a template's UNK
    tokens were taken for attributed ones, so "Review:" fell apart into "R", "R", "eview", ":"
    once words ended at held-fixed text; the words are those of before."""
    res = tiny_llama.attribute("good movie", method="saliency", template="Review: {text}\nSentiment:")
    assert res.word_labels() == ["<s>", "Review:", "good", "movie", "⏎", "Sentiment:"]
    glued = tiny_llama.attribute("good movie", method="saliency", template="review:{text}!")
    assert glued.word_labels()[:3] == ["<s>", "review:", "good"]


def test_a_typed_lower_one_eighth_block_is_shown_as_itself():
    """A "▁" typed in the text (its span holds "▁") is that character, not the space a
    normalizer puts before the text."""
    res = _result(prepend_tokenizer(), "a ▁ b")
    assert res.token_labels() == ["a ", "▁", "␣", "b"]
    first = _result(prepend_tokenizer(), "▁x")  # the normalizer's space and the typed ▁ share the first offsets
    assert first.token_labels() == ["␣", "▁", "x"]


def test_one_whitespace_character_over_two_byte_tokens_is_one_word():
    """An ideographic space (3 UTF-8 bytes) split over two byte-level tokens, both spanning it:
    it was two words, each with a share of its score (a character of letters split so was one)."""
    assert offset_groups("a\u3000b", [[0, 1], [1, 2], [1, 2], [2, 3]]) == [[0], [1, 2], [3]]
    assert offset_groups("a\u2028b", [[0, 1], [1, 2], [1, 2], [2, 3]]) == [[0], [1, 2], [3]]
    assert offset_groups("a  b", [[0, 1], [1, 2], [2, 3], [3, 4]]) == [[0], [1], [2], [3]]  # two spaces: two words


def test_marker_words_show_newlines_and_tabs_as_the_offsets_rule_does():
    """Without offsets (input_ids=, old files) a newline showed as a literal backslash-n and
    byte-level BPE's tab byte (ĉ) as itself: 'movie', '\\nĉis'."""
    tokens = ["the", "Ġmovie", "Ċ", "ĉ", "is", "Ġgood"]
    words, _, _ = aieg_fast.aggregate_words(tokens, torch.ones(len(tokens)))
    res = aieg_fast.Attribution(tokens=tokens, token_ids=list(range(6)), scores=torch.ones(6), method="saliency",
                                target={"kind": "token", "id": 0, "text": "x"}, raw_tokens=tokens)
    assert res.word_rule == "markers"
    assert res.word_labels() == ["the", "movie", "⏎", "is", "good"] and words[:2] == ["the", "movie"]


def test_the_letter_c_circumflex_is_a_tab_marker_in_byte_level_tokens_only():
    """ĉ is byte-level BPE's tab byte, and a letter elsewhere (Esperanto): SentencePiece words
    keep it."""
    assert aieg_fast.aggregate_words(["▁Mi", "▁vol", "as", "▁a", "ĉ", "eti"], torch.ones(6))[0] == ["Mi", "volas", "aĉeti"]
    assert aieg_fast.aggregate_words(["▁ĉ", "iu", "j"], torch.ones(3))[0] == ["ĉiuj"]
    assert aieg_fast.aggregate_words(["the", "Ċ", "ĉ", "is"], torch.ones(4))[0] == ["the", "\n", "is"]
    assert aieg_fast.aggregate_words(["a", "ĉ", "b"], torch.ones(3))[0] == ["a", "b"]  # tab-separated, no Ġ or Ċ


def test_marker_words_of_byte_level_tokens_read_as_typed():
    """Without offsets (input_ids=, slow tokenizers, files saved before offsets) the words of
    byte-level BPE tokens showed their bytes' stand-in characters: 'cafÃ©', 'ðŁĺĢ' for 'café',
    '😀'. They are read as the text their bytes spell when the tokens are byte-level: their bytes
    spell the result's text, or, without one, a text without control characters; tokens of other
    tokenizers whose letters are byte-level stand-ins (SentencePiece's 'ę' is byte 0x19's) keep
    their letters."""
    from tokenizers import pre_tokenizers

    from aieg_fast.display.words import byte_level_text

    tok = byte_level_tokenizer()

    def words(raw, text):
        return aieg_fast.Attribution(tokens=list(raw), token_ids=list(range(len(raw))), scores=torch.ones(len(raw)),
                                     method="saliency", target={"kind": "token", "id": 0, "text": "x"}, raw_tokens=list(raw),
                                     text=text).word_labels()

    for text, want in [("café naïve résumé 😀 ok.", ["café", "naïve", "résumé", "😀", "ok."]),
                       ("Mojibake: café shows as cafÃ©", ["Mojibake:", "café", "shows", "as", "cafÃ©"])]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        raw = tok.convert_ids_to_tokens(ids)
        assert any("Ã" in t for t in raw)  # the tokens hold the stand-ins this test is about
        assert words(raw, tok.decode(ids)) == want
        assert words(raw, None) == words(raw, "") == want  # no text (a generation's prompt on a slow tokenizer, old files)
        assert aieg_fast.aggregate_words(raw, torch.ones(len(raw)))[0] == want
    # a result cut inside a character (input_ids= ending mid-emoji) keeps reading its other words as typed
    ids = tok("café naïve 😀", add_special_tokens=False)["input_ids"]
    raw = tok.convert_ids_to_tokens(ids)
    cut = next(k for k in range(len(ids), 0, -1) if "\ufffd" in tok.decode(ids[:k]))
    for text in (tok.decode(ids[:cut]), None):
        assert words(raw[:cut], text)[:2] == ["café", "naïve"], text
    # a generation's prompt is read from its own tokens: generated tokens that spell no UTF-8 (a stray
    # continuation byte 'Ł') do not decide it
    n = raw.index("ð")  # the prompt: 'café naïve '
    gen_raw = raw[:n] + ["Ł", "a"]
    gen = aieg_fast.Attribution(tokens=gen_raw, token_ids=list(range(n + 2)), scores=torch.ones(2, n + 2), method="saliency",
                                target={"kind": "generation", "id": None, "ids": [0, 1], "text": ""}, raw_tokens=gen_raw,
                                text="", info={"prompt_length": n})
    assert gen.word_labels()[:2] == ["café", "naïve"]
    # the alphabet is the tokenizers library's: its byte-level form of any text reads back as that text
    chars = "".join(chr(c) for c in [*range(1, 0x800), *range(0x800, 0xD800, 7), *range(0xE000, 0x10000, 7)]) + "😀𝄞"
    (mapped, _), = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(chars)
    assert mapped != chars and byte_level_text(mapped) == chars
    assert byte_level_text("".join(pre_tokenizers.ByteLevel.alphabet())) is None  # 256 lone bytes are no UTF-8 text
    # not byte-level: letters that are stand-ins of byte-level BPE (ę: 0x19, č: 0x0d), a Latin-1 pair typed as such
    for text in ("Dziękuję", None):
        assert words(["Dzi", "ę", "kuj", "ę"], text) == ["Dziękuję"]
        assert words(["č", "esky"], text and "česky") == ["česky"]
    assert words(["Â£", "5"], "Â£5") == ["Â£5"]
    assert words(["hello", "čĊ", "Ġworld"], None) == ["hello", "world"]  # CR LF is whitespace: byte-level still
    assert aieg_fast.aggregate_words(["▁caf", "é", "▁na", "ï", "ve"], torch.ones(5))[0] == ["café", "naïve"]
