"""Word grouping: from the tokenizer's character offsets into the encoded string (rule
``"offsets"``), or from the marker characters of the raw tokens (rule ``"markers"``, for slow
tokenizers and results saved before offsets were recorded); display text of tokens and words."""
from __future__ import annotations

import math
import re
import unicodedata
from typing import List, Optional, Sequence

import torch

__all__ = ["UNSAFE_CHARACTERS", "printable", "aggregate_words", "describe_target", "describe_step_target", "offset_groups", "marker_groups", "reads_as_bytes", "word_markers", "group_text", "reduce_groups", "visible", "token_display_texts",
           "token_word_index", "word_groups_of"]

#: what each word-start marker stands for: byte-level BPE's space and newline (Ġ, Ċ),
#: SentencePiece's space (▁), and the characters themselves
_MARKER_TEXT = {"Ġ": " ", "▁": " ", "Ċ": "\n", " ": " ", "\n": "\n", "\t": "\t"}
#: byte-level BPE's tab (ĉ): not a marker among SentencePiece tokens (there the Esperanto letter)
_BYTE_TAB = {"ĉ": "\t"}


def word_markers(tokens: Sequence[str]) -> dict:
    """The word-start markers of raw ``tokens`` and the whitespace each stands for (Ġ, ▁, Ċ and
    the characters themselves; with ĉ, byte-level BPE's tab, unless a ▁ among them says the
    tokens are SentencePiece's). Computed once per token list by the callers of
    :func:`marker_text`."""
    return _MARKER_TEXT if any("▁" in t for t in tokens) else {**_MARKER_TEXT, **_BYTE_TAB}


#: characters a terminal or a browser would act on instead of showing: C0 / C1 controls (ESC starts
#: colour and cursor sequences) but tab and newline, and the bidirectional overrides and isolates
#: (they reverse the order in which the rest of a line is drawn), and the noncharacters U+FFFE /
#: U+FFFF (no valid XML: an SVG plot holding one does not parse); the body of a regex character class
UNSAFE_CHARACTERS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufffe\uffff"
_UNSAFE = re.compile(f"[{UNSAFE_CHARACTERS}]")


def printable(s: str) -> str:
    """``s`` with the characters a terminal or a browser would act on written as escapes
    (``\\x1b``, ``\\u202e``), so a token cannot move the cursor, recolour the screen or reverse
    the line (and the tokens, colours and values after it) in the terminal and HTML views."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", s)


def aggregate_words(tokens: List[str], scores, special: Optional[List[bool]] = None, reduce: str = "sum"):
    """Group sub-word tokens into words and aggregate their scores.

    A new word starts at a token whose raw form begins with a word marker — byte-level BPE
    ``"Ġ"`` (space) / ``"Ċ"`` (newline) / ``"ĉ"`` (tab, unless a ▁ among the tokens says they are
    SentencePiece's, where it is a letter), SentencePiece ``"▁"``, or a literal
    space, newline or tab — and at every special token and the token after one. A word's text
    has its markers turned back into that whitespace, stripped (a newline alone: ``"\\n"``);
    byte-level BPE tokens (:func:`reads_as_bytes`) are read as the text their bytes spell.
    Source: reconstruction (the AIEG paper reports word-level scores without a rule), see
    specs/aieg.md §6.1.

    Args:
        tokens (List[str]): raw token strings (``tokenizer.convert_ids_to_tokens``).
        scores (Tensor[L] or list): token scores; NaN entries are skipped in the aggregate.
        special (List[bool], optional): special-token flags.
        reduce: ``"sum"`` (default), ``"mean"`` or ``"max"``.

    Returns:
        (words: List[str], word_scores: List[float], token_to_word: List[int]).

    Raises:
        ValueError: unknown ``reduce``; ``scores`` not one number per token (another length, or
            not 1-D); ``special`` of another length than ``tokens``.
        TypeError: a token that is not a str.
    """
    if reduce not in ("sum", "mean", "max"):
        raise ValueError(f"reduce must be 'sum', 'mean' or 'max', got {reduce!r}")
    bad = next((i for i, t in enumerate(tokens) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"tokens must be strings (raw token strings), got {tokens[bad]!r} at index {bad}")
    arr = torch.as_tensor(scores.detach().cpu() if torch.is_tensor(scores) else scores, dtype=torch.float64) \
        if not isinstance(scores, (str, bytes)) else None
    if arr is None or arr.dim() != 1:
        raise ValueError(f"scores must be one number per token (a 1-D tensor or list), got "
                         f"{'shape ' + str(tuple(arr.shape)) if arr is not None else repr(scores)}")
    vals = arr.tolist()
    if len(vals) != len(tokens):
        raise ValueError(f"scores has {len(vals)} entries but tokens has {len(tokens)}")
    if special is not None and len(special) != len(tokens):
        raise ValueError(f"special has {len(special)} entries but tokens has {len(tokens)}")
    groups = marker_groups(tokens, special)
    words, tok2word, markers, byte_level = [], [0] * len(tokens), word_markers(tokens), reads_as_bytes(tokens)
    for g_idx, g in enumerate(groups):
        words.append(marker_text(tokens, g, markers, byte_level))
        for i in g:
            tok2word[i] = g_idx
    return words, reduce_groups(groups, vals, reduce), tok2word


def marker_groups(tokens: Sequence[str], special: Optional[Sequence[bool]] = None,
                  fixed: Optional[Sequence[bool]] = None) -> List[List[int]]:
    """Token indices of each word by the marker rule (see :func:`aggregate_words`).

    Args:
        tokens: raw token strings. special: special-token flags (optional).
        fixed: held-fixed flags (optional; None: either, as :func:`offset_groups` reads them):
            a word never spans a held-fixed token and an attributed one (template text typed
            against the text is a word of its own).

    Returns:
        List of groups (lists of consecutive token indices), covering every token once.
    """
    special = list(special) if special else [False] * len(tokens)
    fixed = list(fixed) if fixed else [False] * len(tokens)
    groups: List[List[int]] = []
    held = None  # the held-fixed state of the last group (None: not known yet)
    markers = tuple(word_markers(tokens))
    for i, tok in enumerate(tokens):
        if i == 0 or special[i] or special[i - 1] or not _same_side(fixed[i], held) or tok.startswith(markers):
            groups.append([i])
            held = fixed[i]
        else:
            groups[-1].append(i)
            held = fixed[i] if held is None else held
    return groups


def _same_side(fixed: Optional[bool], held: Optional[bool]) -> bool:
    """Whether a token (held fixed or not, None: either) may join a word whose tokens are (None:
    not known yet)."""
    return fixed is None or held is None or fixed == held


def _byte_alphabet() -> dict:
    """Byte-level BPE's alphabet (GPT-2, LLaMA 3, Qwen, SmolLM, ...): the character that stands
    for each byte in its raw tokens → the byte. Printable Latin-1 bytes stand for themselves;
    the other 68 (controls, space, NBSP, soft hyphen, ...) take U+0100 onwards in byte order
    (so a space is ``Ġ``, a newline ``Ċ``). Source: the byte-level BPE of GPT-2 (Radford et al.
    2019), as Hugging Face tokenizers' ByteLevel pre-tokenizer implements it."""
    own = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    moved = [b for b in range(256) if b not in own]
    return {**{chr(b): b for b in own}, **{chr(0x100 + i): b for i, b in enumerate(moved)}}


_BYTES = _byte_alphabet()


def byte_level_text(raw: str) -> Optional[str]:
    """``raw`` (byte-level BPE tokens joined) as the text its bytes spell, or None when it is not
    such a string: a character outside the alphabet, or bytes that are not whole UTF-8
    characters (a SentencePiece ``café``, whose ``é`` alone is no UTF-8)."""
    try:
        return bytes(_BYTES[ch] for ch in raw).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return None


#: control characters a byte-level reading of tokens without a text to check against may not hold
#: (tab, newline and CR LF may): SentencePiece's 'ę' and 'č' are byte-level's stand-ins for 0x19, 0x0d
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def reads_as_bytes(raw_tokens: Sequence[str], text: Optional[str] = None) -> bool:
    """Whether ``raw_tokens`` are byte-level BPE tokens (GPT-2, LLaMA 3, Qwen, SmolLM, ...), whose
    words :func:`marker_text` reads as the UTF-8 text their bytes spell: no ``▁`` among them, each
    character one of byte-level BPE's 256, and their bytes spell UTF-8 text (a character cut at
    either end, a result cut mid-emoji, aside) that begins ``text`` (whitespace aside: a
    tokenizer's clean-up moves spaces) when one is given (a result's
    :attr:`~aieg_fast.result.Attribution.text`; ``input_ids=`` results hold the tokenizer's
    decoding; a generation's prompt tokens begin it), else a text without control characters but
    tab, newline and CR LF. The raw tokens alone cannot always tell: without a text, SentencePiece
    tokens typed as a Latin-1 pair (``Â£``) read as one character."""
    if any("▁" in t for t in raw_tokens):
        return False
    try:
        data = bytes(_BYTES[ch] for t in raw_tokens for ch in t)
    except KeyError:
        return False
    spelt = data.decode("utf-8", errors="replace").strip("\ufffd")  # a character cut at an end
    if "\ufffd" in spelt:
        return False
    if text:
        return "".join(text.split()).strip("\ufffd").startswith("".join(spelt.split()))
    return not _CONTROLS.search(spelt.replace("\r\n", "\n"))


def marker_text(tokens: Sequence[str], group: Sequence[int], markers: Optional[dict] = None,
                byte_level: bool = False) -> str:
    """Display text of a marker-rule word: markers turned back into the whitespace they stand
    for (space, newline, tab), stripped; a whitespace-only word kept (:func:`visible` shows it
    as ``⏎``, ``⇥``, as the offsets rule's). ``markers``: :func:`word_markers` of ``tokens``
    (worked out here when None; a caller labelling every word passes it once). ``byte_level``
    (:func:`reads_as_bytes` of the tokens): the word is read as the UTF-8 text its bytes spell
    (:func:`byte_level_text`: ``cafÃ©`` is ``café``, ``ðŁįķ`` 🍕), as typed, where they spell one."""
    text = "".join(tokens[i] for i in group)
    decoded = byte_level_text(text) if byte_level else None
    if decoded is not None:
        return decoded.strip() or decoded
    for m, ch in (markers if markers is not None else word_markers(tokens)).items():
        text = text.replace(m, ch)
    return text.strip() or text


def reduce_groups(groups: Sequence[Sequence[int]], vals: Sequence[float], reduce: str = "sum") -> List[float]:
    """One value per group: the sum / mean / max of its non-NaN values (NaN when it has none).

    Raises:
        ValueError: unknown ``reduce``.
    """
    if reduce not in ("sum", "mean", "max"):
        raise ValueError(f"reduce must be 'sum', 'mean' or 'max', got {reduce!r}")
    out = []
    for g in groups:
        vs = [float(vals[i]) for i in g if not math.isnan(float(vals[i]))]
        if not vs:
            out.append(float("nan"))
        elif reduce == "sum":
            out.append(sum(vs))
        elif reduce == "mean":
            out.append(sum(vs) / len(vs))
        else:
            out.append(max(vs))
    return out


# ------------------------------------------------------------------ offsets rule
#: characters that are a word each (CJK ideographs, kana, CJK punctuation): scripts written without spaces
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_SYMBOLS = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}


def _char_units(text: str) -> List[int]:
    """Per character: its word unit (-1 for whitespace). A unit is a run of non-whitespace
    characters; each CJK character is a unit of its own."""
    units, cur, prev_run = [], -1, False
    for ch in text:
        if ch.isspace():
            units.append(-1)
            prev_run = False
        elif _CJK.match(ch):
            cur += 1
            units.append(cur)
            prev_run = False
        else:
            if not prev_run:
                cur += 1
            units.append(cur)
            prev_run = True
    return units


def offset_groups(text: str, offsets: Sequence[Optional[Sequence[int]]], special: Optional[Sequence[bool]] = None,
                  fixed: Optional[Sequence[bool]] = None) -> List[List[int]]:
    """Token indices of each word by the offsets rule.

    Words are the whitespace-separated runs of ``text`` (each CJK character a word of its own);
    a token joins the word of its characters (tokens sharing a word are grouped, whatever the
    tokenizer: WordPiece ``##``, SentencePiece ``▁``, byte-level ``Ġ``); a whitespace-only token
    (a space, a newline) is a word of its own; a token without offsets (a special token) is a
    word of its own; a token with an empty span (a byte completed by the next token) joins the
    next token's word.

    Args:
        text: the string the offsets point into.
        offsets: per token ``[start, end)`` or None.
        special: special-token flags (optional): a special token with offsets (UNK) is grouped
            by its characters; one with an empty span stands alone.
        fixed: held-fixed flags (optional): a word never spans a held-fixed token and an
            attributed one (template text, or a special token typed in the text, against a word
            is a word of its own); None for a token that may sit on either side (an
            unknown-character token, see :func:`word_groups_of`).

    Returns:
        List of groups of consecutive token indices, covering every token once.

    Raises:
        ValueError: an offset outside ``text``.
    """
    special = list(special) if special else [False] * len(offsets)
    fixed = list(fixed) if fixed else [False] * len(offsets)
    units = _char_units(text)
    groups: List[List[int]] = []
    last_units: set = set()
    held = None  # the held-fixed state of the last group (None: not known yet)
    pending: List[int] = []  # empty-span tokens waiting for the next token
    last_end = -1  # where the last group's characters end
    for i, off in enumerate(offsets):
        if off is None:
            groups.extend([[j] for j in pending] + [[i]])
            pending, last_units, held, last_end = [], set(), None, -1
            continue
        s, e = int(off[0]), int(off[1])
        if not (0 <= s <= e <= len(text)):
            raise ValueError(f"token {i} has offsets {list(off)} outside the text (length {len(text)})")
        if s == e and special[i]:
            groups.extend([[j] for j in pending] + [[i]])
            pending, last_units, held, last_end = [], set(), None, -1
            continue
        if s == e:
            pending.append(i)
            continue
        mine = {u for u in units[s:e] if u >= 0}
        # a word's characters, or the same character again (one character's bytes over two
        # tokens: an ideographic space has no word units of its own)
        if ((mine and mine & last_units) or s < last_end) and groups and _same_side(fixed[i], held):
            groups[-1].extend(pending + [i])
            last_units |= mine
            held = fixed[i] if held is None else held
        else:
            groups.append(pending + [i])
            last_units, held = mine, fixed[i]
        last_end = max(last_end, e)
        pending = []
    if pending:
        if groups and not special[groups[-1][-1]]:
            groups[-1].extend(pending)
        else:
            groups.append(pending)
    return groups


def word_groups_of(text: str, offsets, raw_tokens: Sequence[str], special: Sequence[bool],
                   fixed: Optional[Sequence[bool]] = None) -> List[List[int]]:
    """Token indices of each word as the views group them: the offsets rule
    (:func:`offset_groups`) when ``offsets`` are given (one per token), else the marker rule
    (:func:`marker_groups`) on ``raw_tokens``. With ``fixed`` (held-fixed flags) a word never
    spans a held-fixed token and an attributed one (template text or a special token typed
    against a word is a word of its own); an unknown-character token (UNK: a special token
    whose span's text is not its own, held fixed wherever it is) sits on either side: it joins
    the word before it in its run of text (so a template's UNK stays in the template's word, but
    a text's first character typed right after template text, when UNK, joins the template's)."""
    if fixed and offsets:
        fixed = [None if sp and o is not None and text[o[0]:o[1]] != raw else f
                 for f, sp, o, raw in zip(fixed, special, offsets, raw_tokens)]
    return offset_groups(text, offsets, special, fixed) if offsets else marker_groups(raw_tokens, special, fixed)


def token_word_index(text: str, offsets, raw_tokens: Sequence[str], special: Sequence[bool],
                     fixed: Optional[Sequence[bool]] = None) -> List[int]:
    """The word index of each token, words as :func:`word_groups_of` groups them: the words a
    result's word view shows, so word-level methods mask what the user sees."""
    index = [0] * len(raw_tokens)
    for g, members in enumerate(word_groups_of(text, offsets, raw_tokens, special, fixed)):
        for i in members:
            index[i] = g
    return index


def _escape(c: str) -> str:
    """``c`` as an escape: ``\\xa0`` below U+0100, ``\\u3000`` above."""
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def visible(s: str) -> str:
    """``s`` with whitespace made visible (``␣`` space, ``⏎`` newline, ``⇥`` tab, ``␍`` carriage
    return; other whitespace, such as a no-break or ideographic space, as escapes: ``\\xa0``,
    ``\\u3000``) when it is whitespace only; invisible format characters only (zero-width
    joiner or space, word joiner, BOM) as escapes (``\\u200d``); a leading combining mark on a
    dotted circle (``◌́``, as Unicode shows one alone), so it cannot merge into what is drawn
    before it; other text is returned unchanged."""
    if s and not s.strip():
        return "".join(_SYMBOLS.get(c) or _escape(c) for c in s)
    if s and all(unicodedata.category(c) == "Cf" for c in s):
        return "".join(f"\\u{ord(c):04x}" for c in s)
    if s and unicodedata.category(s[0]) in ("Mn", "Me", "Mc"):
        return "\u25cc" + s
    return s


def group_text(text: str, offsets: Sequence[Optional[Sequence[int]]], group: Sequence[int], tokens: Optional[Sequence[str]] = None) -> str:
    """Display text of a word: its characters in ``text`` (from the first token's start to the
    last token's end), stripped, or the visible symbols of a whitespace-only word.

    Tokens without offsets (special tokens) fall back to ``tokens[i]``; an empty word gives ``""``.
    """
    spans = [offsets[i] for i in group if offsets[i] is not None and offsets[i][1] > offsets[i][0]]
    if not spans:
        return "".join(tokens[i] for i in group) if tokens is not None and any(offsets[i] is None for i in group) else ""
    raw = text[min(s for s, _ in spans) : max(e for _, e in spans)]
    return raw.strip() or visible(raw)


def token_display_texts(text: str, offsets: Sequence[Optional[Sequence[int]]], fallback: Sequence[str],
                        raw: Optional[Sequence[str]] = None) -> List[str]:
    """Text of each token from ``text``: its span, with the whitespace between it and the
    previous token prepended (so the pieces concatenate to the text, but for the space a
    normalizer puts before it, below); a token whose characters were already given to an
    earlier token (bytes of one character) gets ``""``; tokens without offsets keep
    ``fallback[i]``. A token whose raw form (``raw[i]``) is ``▁`` markers only, and whose span
    is not that ``▁`` typed in the text (or is, but the next token starts there too), is that
    many spaces: those its span holds, or, where it holds no whitespace, the space a Metaspace
    or Prepend normalizer puts before the text (its offsets are the first character's), which
    leaves the characters to the tokens that carry them; a second ``▁`` on one space (a
    generated continuation) is a space too, not ``""``."""
    out, covered = [], 0
    for i, off in enumerate(offsets):
        if off is None:
            out.append(fallback[i])
            continue
        s, e = int(off[0]), int(off[1])
        here = i + 1 < len(offsets) and offsets[i + 1] is not None and int(offsets[i + 1][0]) == s  # a later token carries it
        if raw is not None and raw[i] and not raw[i].strip("▁") and (text[s:e] != raw[i] or here):  # spaces, not a typed ▁
            out.append(" " * len(raw[i]))
            covered = max(covered, e) if text[s:e].isspace() else covered
            continue
        start = max(s, covered)
        gap = text[covered:start] if covered < start and not text[covered:start].strip() else ""
        out.append(gap + text[start:e] if e > start else "")
        covered = max(covered, e)
    return out


def _custom_fn(attr) -> str:
    """The recorded name of a user's ``target_fn`` (``"custom:<name>"``), else ''."""
    fn = str((attr.options or {}).get("target_fn") or "")
    return fn if fn.startswith("custom:") else ""


def target_probability(attr):
    """p(target) as the views print it: the result's ``target_prob`` (or ``info["target_prob"]``),
    None when unknown or when F is a user's function of the logits (no one token is explained)."""
    prob = attr.target_prob if attr.target_prob is not None else attr.info.get("target_prob")
    return prob if isinstance(prob, (int, float)) and not _custom_fn(attr) else None


def _token_label(text, token_id) -> str:
    """A target token as views name it: its text quoted, with its id when the text holds U+FFFD
    (a byte of a UTF-8 character decodes to it, so two such tokens would read alike); the id
    when there is no text."""
    if text is None:
        return repr(token_id)
    return repr(text) + (f" (id {token_id})" if "\ufffd" in str(text) and token_id is not None else "")


def describe_target(attr) -> str:
    """The target as views print it: ``' positive'``, ``' positive' vs ' negative'`` with a
    contrast token, and the explained F when it is not the logit (``[label_logprob]``); for a
    user's ``target_fn`` only its name (``F = custom:<name>``): the token is not what it explains."""
    custom = _custom_fn(attr)
    if custom:
        return f"F = {custom}"
    t = attr.target
    out = _token_label(t.get("text"), t.get("id"))
    if t.get("contrast_text") is not None or t.get("contrast_id") is not None:
        out += " vs " + _token_label(t.get("contrast_text"), t.get("contrast_id"))
    return out + _fn_suffix(attr)


def describe_step_target(attr) -> str:
    """What each step of a generation result explains when it is not its token's logit, as views
    print it after "generation of T tokens": ``each token vs ' bad'`` with a contrast token,
    ``each token [logprob]`` for another F, ``F = custom:<name>`` for a user's ``target_fn``;
    "" for the logit."""
    custom = _custom_fn(attr)
    if custom:
        return f"F = {custom}"
    c = (attr.options or {}).get("contrast_target")
    out = "" if c is None else " vs " + (_token_label(c, None) if isinstance(c, str) else _token_label(None, c))
    out += _fn_suffix(attr)
    return f"each token{out}" if out else ""


def _fn_suffix(attr) -> str:
    """`` [fn]`` for an explained F other than the logit (and its contrast), else ''; for
    ``label_logprob`` with the label set: `` [label_logprob of ' yes', ' no']``."""
    fn = (attr.options or {}).get("target_fn")
    if not fn or fn in ("logit", "logit-contrast"):
        return ""
    labels = (attr.options or {}).get("label_set") if fn == "label_logprob" else None
    if isinstance(labels, (list, tuple)) and labels:
        named = [_token_label(l, None) if isinstance(l, str) else _token_label(None, l) for l in labels[:6]]
        more = f" and {len(labels) - 6} more" if len(labels) > 6 else ""  # a header line, not the whole set
        return f" [{fn} of {', '.join(named)}{more}]"
    return f" [{fn}]"
