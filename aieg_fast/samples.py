"""Small real data shipped with the package (see aieg_fast/data/README.md for the source)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

__all__ = ["sst2_sample", "read_sst2_tsv", "SENTIMENT_TEMPLATE", "SENTIMENT_LABELS"]

_DIR = Path(__file__).with_name("data")

#: Zero-shot sentiment prompt for a causal LM; ``{text}`` is the attributed span.
SENTIMENT_TEMPLATE = "Review: {text}\nIs this review positive or negative? Answer:"
#: Label words (single tokens for GPT-2 and SmolLM2 tokenizers), index = SST-2 label.
SENTIMENT_LABELS = (" negative", " positive")


def read_sst2_tsv(path) -> List[Tuple[str, int]]:
    """(sentence, label) pairs of a GLUE-style ``sentence<TAB>label`` file with a header line.

    The files are unquoted, so each line is split on its last TAB.

    Raises:
        ValueError: a line that is not ``sentence<TAB>0|1`` (names the file and line).
    """
    rows = []
    with open(path, encoding="utf-8") as fh:
        next(fh, None)
        for no, line in enumerate(fh, start=2):
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.rsplit("\t", 1)
            if len(parts) != 2 or parts[1].strip() not in ("0", "1"):
                raise ValueError(
                    f"{path}: line {no} is not 'sentence<TAB>label' with label 0 or 1: {line[:80]!r}"
                )
            rows.append((parts[0], int(parts[1])))
    return rows


def sst2_sample() -> List[Tuple[str, int]]:
    """The 24 SST-2 dev sentences shipped with the package, as (sentence, label) pairs."""
    return read_sst2_tsv(_DIR / "sst2_dev_sample.tsv")
