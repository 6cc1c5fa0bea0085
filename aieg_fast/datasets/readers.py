"""Readers of the dataset files of the registry (:data:`aieg_fast.datasets.DATASETS`), each
checking every line and naming the file and line of what it refuses.

* :func:`read_sst2_tsv` — GLUE-style ``sentence<TAB>label`` files (SST-2);
* :func:`read_jsonl` — ``{"text", "label"}`` JSON lines (the IMDb sample);
* :func:`read_boolq` — the BoolQ dev set (``question``, ``passage``, ``title``, ``label``, ``idx``);
* :func:`read_longra` — LongRA instances (``prompt``, ``target``, ``relative``, ``distractor``);
* :func:`read_generation` — prompts with optional reference continuations (TellMeWhy, WikiBio,
  the WikiText prompts).

Every reader opens UTF-8 text, gzipped when the name ends in ``.gz``.
"""
from __future__ import annotations

import gzip
import json
from typing import Callable, Dict, Iterator, List, Optional, Tuple

__all__ = ["text_lines", "read_sst2_tsv", "read_jsonl", "read_json_objects", "read_boolq", "read_longra", "read_generation"]


def text_lines(path) -> Iterator[Tuple[int, str]]:
    """(line number, text without the newline) of a UTF-8 text file (gzipped when it ends in
    ``.gz``), each line decoded on its own so that a bad byte is reported with its line.

    Raises:
        ValueError: a line that is not UTF-8 (names the file, the line and the byte offset).
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        for no, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{path}: line {no} is not UTF-8 text (byte {err.start}: {raw[err.start:err.start + 4]!r}); "
                                 "save the file as UTF-8") from None
            yield no, line.rstrip("\r\n")


def read_sst2_tsv(path) -> List[Tuple[str, int]]:
    """(sentence, label) pairs of a GLUE-style ``sentence<TAB>label`` file with a header line.

    The files are unquoted, so each line is split on its last TAB.

    Raises:
        ValueError: a line that is not ``sentence<TAB>0|1``, or not UTF-8 (names the file and line).
    """
    rows = []
    for no, line in text_lines(path):
        if no == 1:
            continue  # the header
        if not line:
            continue
        parts = line.rsplit("\t", 1)
        if len(parts) != 2 or parts[1].strip() not in ("0", "1"):
            raise ValueError(
                f"{path}: line {no} is not 'sentence<TAB>label' with label 0 or 1: {line[:80]!r}"
            )
        rows.append((parts[0], int(parts[1])))
    return rows


def read_json_objects(path, required: Dict[str, Optional[tuple]], check: Optional[Callable[[dict], Optional[str]]] = None) -> List[dict]:
    """The JSON objects of a JSON-lines file (blank lines skipped), each checked to hold the
    ``required`` keys with values of the given types, then by ``check``.

    Args:
        path: the file (gzipped when it ends in ``.gz``).
        required: key → accepted types (e.g. ``(str, type(None))``; a bool is accepted only when
            ``bool`` is listed), or None to ask only that the key is there.
        check: ``object -> None`` or what is wrong with it (said after the file and line).

    Raises:
        ValueError: a line that is not UTF-8, not JSON, not an object, without a required key,
            with a value of another type, or refused by ``check`` (names the file, the line and
            the key).
    """
    rows = []
    for no, line in text_lines(path):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: line {no} is not JSON ({err.msg} at column {err.colno}): {line[:80]!r}") from None
        if not isinstance(r, dict):
            raise ValueError(f"{path}: line {no} is not a JSON object with {', '.join(repr(k) for k in required)}: {line[:80]!r}")
        missing = [k for k in required if k not in r]
        if missing:
            raise ValueError(f"{path}: line {no} has no {' and no '.join(repr(k) for k in missing)} key (keys: {sorted(r)})")
        for k, types in required.items():
            if types is not None and (not isinstance(r[k], types) or (isinstance(r[k], bool) and bool not in types)):
                want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
                raise ValueError(f"{path}: line {no}: {k!r} must be {want}, got {type(r[k]).__name__} {str(r[k])[:40]!r}")
        problem = check(r) if check is not None else None
        if problem:
            raise ValueError(f"{path}: line {no} {problem}")
        rows.append(r)
    return rows


def _text_and_label(r: dict) -> Optional[str]:
    label = r["label"]
    if not isinstance(r["text"], str) or isinstance(label, bool) or label not in (0, 1):
        return f"needs a string 'text' and a 'label' of 0 or 1, got text {type(r['text']).__name__}, label {label!r}"
    return None


def read_jsonl(path) -> List[Tuple[str, int]]:
    """(text, label) pairs of a JSON-lines file whose objects hold ``"text"`` (a string) and
    ``"label"`` (0 or 1) (the IMDb sample; blank lines are skipped).

    Raises:
        ValueError: a line that is not UTF-8, not a JSON object, without ``text`` or ``label``,
            or with a wrong type (names the file and line).
    """
    return [(r["text"], int(r["label"])) for r in read_json_objects(path, {"text": None, "label": None}, _text_and_label)]


def read_boolq(path) -> List[dict]:
    """The BoolQ records of a JSON-lines file: ``{"idx", "question", "title", "passage",
    "label"}`` (label 1 = yes / true, 0 = no / false; ``title`` optional), in file order.

    Source: Clark et al., *BoolQ*, NAACL 2019; the SuperGLUE dev copy, title split off the
    passage (``aieg_fast/data/README.md``).

    Raises:
        ValueError: a line without ``idx`` (int), ``question`` / ``passage`` (str) or a ``label``
            of 0 or 1, or not JSON / UTF-8 (names the file and line).
    """
    return read_json_objects(path, {"idx": (int,), "question": (str,), "passage": (str,), "label": (int,)},
                             lambda r: None if r["label"] in (0, 1) else f"(idx {r['idx']}): 'label' must be 0 (no) or 1 (yes), got {r['label']!r}")


def _longra_row(r: dict) -> Optional[str]:
    """Fill in a LongRA row's distractor and reference; what is wrong with it, or None."""
    p = r["prompt"]
    if not isinstance(r.get("distractor"), str):
        if "(" not in p or ")." not in p[p.index("("):]:
            return f"({r['id']}) has no 'distractor' and its prompt no '(...).' clause"
        r["distractor"] = p[p.index("("): p.index(").", p.index("(")) + 2]
    for k in ("distractor", "relative"):
        if r[k] not in p:
            return f"({r['id']}): its {k} {r[k]!r} is not in its prompt"
    if not isinstance(r.get("reference"), str) or not r["reference"].strip():
        r["reference"] = " " + r["target"]
    return None


def read_longra(path) -> List[dict]:
    """LongRA instances (Vafa et al. 2021, as ReAGent rebuilt them): ``{"id", "prompt",
    "target", "reference", "relative", "distractor", ...}``: the prompt stops before the final
    word ``target``, whose antecedent ``relative`` sits before the clause ``distractor``;
    ``reference`` is the text that follows the prompt (``" " + target`` when absent).

    A row without ``distractor`` (ReAGent's own files give token indices instead) gets the
    prompt's parenthesised clause, from ``"("`` to the first ``")."``, which is how every
    template of the set writes it.

    Raises:
        ValueError: a line without string ``id``, ``prompt``, ``target``, ``relative``; a
            distractor or relative word that is not in the prompt; not JSON / UTF-8 (names the
            file and line).
    """
    return read_json_objects(path, {k: (str,) for k in ("id", "prompt", "target", "relative")}, _longra_row)


def _generation_row(r: dict) -> Optional[str]:
    """Fill in a generation row's reference(s); what is wrong with it, or None."""
    ref, refs = r.get("reference"), r.get("references")
    if ref is not None and not isinstance(ref, str):
        return f"({r['id']}): 'reference' must be a string or null, got {type(ref).__name__}"
    if refs is not None and not (isinstance(refs, list) and all(isinstance(x, str) for x in refs)):
        return f"({r['id']}): 'references' must be a list of strings, got {refs!r:.60}"
    r["reference"] = ref
    r["references"] = list(refs) if refs is not None else ([ref] if ref is not None else [])
    return None


def read_generation(path) -> List[dict]:
    """Prompts of an open-generation dataset: ``{"id", "prompt", "reference", "references",
    ...}``; ``reference`` (a str, or None when there is none) and ``references`` (a list, empty
    when there is none) are filled in when absent.

    Raises:
        ValueError: a line without a string ``id`` and ``prompt``, a ``reference`` that is not a
            string or null, ``references`` that is not a list, or not JSON / UTF-8 (names the
            file and line).
    """
    return read_json_objects(path, {"id": (str,), "prompt": (str,)}, _generation_row)
