"""Tokenisation edges, one function each, on a ``transformers`` tokenizer (no model):

* :func:`one_bos` — exactly one BOS at the start, whatever the text holds (a prompt that starts
  with the BOS string, a chat template rendered to text, gets no second BOS);
* :func:`typed_specials` — special-token strings typed in the user's text (the tokenizer reads
  them as special tokens, which are held fixed);
* :func:`unknown_pieces` — pieces of a text the tokenizer can only encode as its unknown token
  (a tokenizer without byte fallback: an emoji, a rare script);
* :func:`token_text_after` — the text one token adds after other text (its leading space kept
  where decoding it alone drops it, as SentencePiece does);
* :func:`continuation` — a target or forced continuation tokenised as the model would produce it
  after the prompt (no spurious leading piece such as SentencePiece's lone ``▁``), and whether
  the prompt/target boundary merges (the prompt's own tokens change when the text follows it).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

__all__ = ["check_in_vocab", "one_bos", "typed_specials", "unknown_pieces", "continuation", "merge_message", "encoding_warnings", "unknown_message",
           "token_text_after"]


def one_bos(ids: List[int], offsets: Optional[list], bos_id: Optional[int]) -> Tuple[List[int], Optional[list]]:
    """``ids`` (and their ``offsets``) with a leading run of BOS tokens cut to one.

    A tokenizer that adds BOS gives ``[BOS, BOS, ...]`` for a text that starts with the BOS
    string; the added one (the first) is dropped, the typed one kept.

    Args:
        ids: token ids. offsets: per token (start, end), or None. bos_id: the BOS id, or None.

    Returns:
        (ids, offsets) — new lists; unchanged when there is no repeated BOS.
    """
    k = 0
    while bos_id is not None and k < len(ids) and ids[k] == bos_id:
        k += 1
    if k <= 1 or k == len(ids):
        return list(ids), None if offsets is None else list(offsets)
    return list(ids[k - 1:]), None if offsets is None else list(offsets[k - 1:])


def typed_specials(tokenizer, text: str, ids: Sequence[int], leading_bos_ok: bool) -> List[str]:
    """The special-token strings typed in ``text`` that the tokenizer turned into their special
    token (found in ``ids``), in order of first appearance.

    Args:
        tokenizer: the tokenizer (its ``all_special_tokens``, ``bos_token``).
        text: the user's text (not the template).
        ids: the encoded ids of the prompt that holds ``text``.
        leading_bos_ok: BOS strings at the very start of ``text`` do not count (the text starts
            the prompt, and they become the one BOS the model gets anyway).
    """
    found = []
    bos = getattr(tokenizer, "bos_token", None)
    present = None  # the ids as a set, made when a special string is typed at all
    for s in getattr(tokenizer, "all_special_tokens", None) or []:
        if not s or s not in text:
            continue
        present = set(int(i) for i in ids) if present is None else present
        positions = [i for i in range(len(text)) if text.startswith(s, i)]
        if leading_bos_ok and s == bos:  # the leading run of BOS strings becomes the one BOS (one_bos)
            lead = 0
            while text.startswith(s, lead):
                lead += len(s)
            positions = [p for p in positions if p >= lead]
        tid = tokenizer.convert_tokens_to_ids(s)
        if positions and isinstance(tid, int) and tid in present:
            found.append((positions[0], s))
    return [s for _, s in sorted(found)]


def unknown_pieces(tokenizer, text: str, ids: Sequence[int], offsets: Optional[Sequence]) -> List[Optional[str]]:
    """The pieces of ``text`` that became the tokenizer's unknown token, in order (each once).

    Args:
        tokenizer: the tokenizer (its ``unk_token_id``, ``unk_token``).
        text: the string that was encoded. ids: its ids.
        offsets: per id its ``(start, end)`` in ``text``, or None (a slow tokenizer).

    Returns:
        The characters behind each unknown-token id (an unknown-token string typed in the text
        does not count: :func:`typed_specials` names those); None for each one without
        offsets. Empty for a tokenizer without an unknown token or for a text without one.
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return []
    typed = getattr(tokenizer, "unk_token", None)
    found: List[Optional[str]] = []
    for k, i in enumerate(ids):
        if int(i) != unk:
            continue
        if offsets is None or k >= len(offsets) or offsets[k] is None:
            found.append(None)
            continue
        piece = text[int(offsets[k][0]): int(offsets[k][1])]
        if piece and piece != typed and piece not in found:
            found.append(piece)
    return found


def encoding_warnings(tokenizer, text, full: str, ids: Sequence[int], offsets: Optional[Sequence],
                      leading_bos_ok: bool) -> List[str]:
    """The warnings of an encoded prompt: special-token strings typed in it
    (:func:`typed_specials`) and pieces that became the unknown token (:func:`unknown_pieces`;
    both are held fixed, not attributed).

    Args:
        tokenizer: the tokenizer. text: the user's text (a str, or a mapping of fields).
        full: the encoded string (the template filled in). ids, offsets: its ids and their
            ``(start, end)`` in ``full`` (None without offsets). leading_bos_ok: as :func:`typed_specials`.
    """
    out = []
    typed = typed_specials(tokenizer, text if isinstance(text, str) else "\n".join(text.values()), ids, leading_bos_ok)
    if typed:
        out.append(f"text holds {typed}, typed as text: the tokenizer reads each as its special token, which is held fixed "
                   "(not attributed) while the text around it is attributed (a chat template's role words and system prompt "
                   "too); remove it from the text, or hold such markup fixed in a template (a chat model's conversation: "
                   "aieg_fast.chat_template; on the command line, explain --chat)")
    unknown = unknown_pieces(tokenizer, full, ids, offsets)
    if unknown:
        out.append(f"text has {_pieces(unknown)} that the tokenizer can only encode as its unknown token "
                   f"{getattr(tokenizer, 'unk_token', None)!r}, held fixed (not attributed): the model sees only that token there")
    return out


def _pieces(unknown: Sequence[Optional[str]]) -> str:
    named = [p for p in unknown if p is not None]
    return f"characters {named}" if named else f"{len(unknown)} piece(s)"


def unknown_message(tokenizer, unknown: Sequence[Optional[str]], what: str) -> str:
    """The warning for a forced continuation ``what`` with pieces that became the unknown token
    (:func:`unknown_pieces`): its steps at those tokens explain the unknown token, not the text."""
    return (f"{what} has {_pieces(unknown)} that the tokenizer can only encode as its unknown token "
            f"{getattr(tokenizer, 'unk_token', None)!r}: the steps at those tokens explain the model's score of "
            f"{getattr(tokenizer, 'unk_token', None)!r}, not of the text")


def token_text_after(tokenizer, token_id: int) -> str:
    """The text token ``token_id`` adds when it follows other text: ``" great"`` for
    SentencePiece's ``▁great``, whose decoding alone drops the space (``"great"``), as a target
    typed as ``" great"`` reads; byte-level BPE (GPT-2, SmolLM2) decodes it so already.

    Decodes the token after an anchor token (the last of ``"a"``) and takes the anchor's text
    off; the token's decoding alone when that does not end in it (a tokenizer that rewrites
    the pair) or there is no anchor.
    """
    alone = tokenizer.decode([int(token_id)])
    anchor = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    if not anchor:
        return alone
    head = tokenizer.decode(anchor[-1:])
    both = tokenizer.decode([anchor[-1], int(token_id)])
    after = both[len(head):] if both.startswith(head) else ""
    return after if after and after.endswith(alone) else alone


def continuation(tokenizer, context: str, text: str, offsets: bool = False):
    """Token ids of ``text`` as the tokenizer splits it right after ``context``.

    ``context + text`` is tokenised (without special tokens); when the tokens of ``context``
    alone are a prefix of it, the rest are the ids of ``text`` in context: with a
    SentencePiece tokenizer ``"good"`` after ``"the movie is"`` is the piece ``good`` (the model
    would write ``isgood``), not ``▁good``, and ``"od"`` is ``od``, not ``['▁', 'od']``.
    Otherwise the boundary merges (the last tokens of ``context`` change when ``text``
    follows: ``"od"`` after ``"the movie is go"``), and ``text`` is tokenised alone, without a
    leading piece that holds none of its characters (``['od']``, not ``['▁', 'od']``).

    Args:
        tokenizer: the tokenizer. context: the prompt (template filled in). text: the target or
            continuation. offsets: also return each token's (start, end) in ``text`` (needs a
            fast tokenizer).

    Returns:
        (ids List[int], offsets List[(start, end)] or None, merged bool).
    """
    want = bool(offsets) and bool(getattr(tokenizer, "is_fast", False))
    p = list(tokenizer(context, add_special_tokens=False)["input_ids"]) if context else []
    enc = tokenizer(context + text, add_special_tokens=False, return_offsets_mapping=want)
    f = list(enc["input_ids"])
    if len(f) > len(p) and f[: len(p)] == p:
        n = len(context)
        offs = [(max(int(s) - n, 0), max(int(e) - n, 0)) for s, e in enc["offset_mapping"][len(p):]] if want else None
        return [int(i) for i in f[len(p):]], offs, False
    alone = tokenizer(text, add_special_tokens=False, return_offsets_mapping=want)
    ids = [int(i) for i in alone["input_ids"]]
    offs = [(int(s), int(e)) for s, e in alone["offset_mapping"]] if want else None
    k = 0  # a leading piece with no character of the text (SentencePiece's lone "▁" before "od") is dropped
    while k + 1 < len(ids) and not text[:1].isspace() and not tokenizer.decode([ids[k]]).strip():
        k += 1
    return ids[k:], None if offs is None else offs[k:], True


def merge_message(tokenizer, context: str, text: str, alone: Sequence[int], what: str = "target") -> str:
    """The warning for a ``text`` (named ``what``) whose boundary with ``context`` merges: the
    tokens around the boundary in context, and the ids taken instead (``alone``)."""
    both = list(tokenizer(context + text, add_special_tokens=False)["input_ids"])
    own = list(tokenizer(context, add_special_tokens=False)["input_ids"])
    k = 0
    while k < min(len(both), len(own)) and both[k] == own[k]:
        k += 1
    return (f"{what} {text!r} merges with the end of the prompt: the prompt ...{context[-20:]!r} ends in "
            f"{tokenizer.convert_ids_to_tokens(own[k:])} alone but in {tokenizer.convert_ids_to_tokens(both[k:])} with "
            f"{what} after it; {what} is taken as tokenised alone: {tokenizer.convert_ids_to_tokens(list(alone))} "
            f"(ids {list(alone)}); pass token ids to choose others")


def check_in_vocab(tokenizer, ids: Sequence[int], vocab_size: int, what: str) -> None:
    """Refuse token ids the tokenizer gave that the model has no embedding for (a tokenizer with
    tokens added and a model not resized to it), naming ``what`` (``"text"``, ``"target"``),
    the first such token and both sizes.

    Raises:
        ValueError: an id ≥ ``vocab_size`` (the model's embedding rows).
    """
    bad = next(((k, int(i)) for k, i in enumerate(ids) if int(i) >= vocab_size), None)
    if bad is not None:
        k, i = bad
        piece = tokenizer.convert_ids_to_tokens(i)
        raise ValueError(f"{what}: token {piece!r} (id {i}, position {k}) is not a token of this model: its embeddings have "
                         f"{vocab_size} rows and the tokenizer {len(tokenizer)} entries. Resize the model to its tokenizer "
                         "(model.resize_token_embeddings(len(tokenizer))) or use the tokenizer it was trained with")
