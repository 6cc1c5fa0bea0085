"""Where each method's highest-scored token sits: the first or the last attributable position.

A check on position effects behind the faithfulness tables (RESULTS_faithfulness.md §5.1 and
§5.3): replacing a context's first token (the attention sink of these models) or the token just
before the prediction moves the output whatever the word, so a method whose top token is always
one of them can lead the hard metrics by position alone. For every method in an evaluation's
records this prints the number of explained rows (examples, or generated steps of open
generation) and the share whose top-scored attributable token is the first / last one.

    python benchmarks/top_token_position.py runs/faithfulness/gen_wikitext/records.jsonl
    python benchmarks/top_token_position.py benchmarks/faithfulness/gen_wikitext/records.jsonl.gz

Ties go to the earlier position. Rows without stored scores (the random control) are skipped.
"""
from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from pathlib import Path

from aieg_fast.eval.records import merge_record_lines


def _score_rows(method_record: dict):
    """The score vectors of one method's record: one per generated step, or the one of a
    classification example. ``None`` marks a position that is not attributable (template or
    padding) and is left out."""
    scores = method_record.get("scores")
    if not scores:
        return []
    return scores if isinstance(scores[0], list) else [scores]


def top_positions(records: dict) -> dict:
    """{method: (rows, rows whose top token is the first attributable one, ... the last one)}."""
    counts = defaultdict(lambda: [0, 0, 0])
    for rec in records.values():
        for method, mrec in rec.get("methods", {}).items():
            for row in _score_rows(mrec):
                kept = [i for i, s in enumerate(row) if s is not None]
                if not kept:
                    continue
                top = max(kept, key=lambda i: (row[i], -i))
                c = counts[method]
                c[0] += 1
                c[1] += top == kept[0]
                c[2] += top == kept[-1]
    return {m: tuple(c) for m, c in counts.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("records", type=Path, help="records.jsonl of an evaluation, or an archive (.jsonl.gz)")
    args = p.parse_args(argv)
    opener = gzip.open if args.records.suffix == ".gz" else open
    with opener(args.records, "rt", encoding="utf-8") as f:
        records = merge_record_lines(json.loads(line) for line in f if line.strip())
    print("| method | rows | top token first | top token last |")
    print("|---|---|---|---|")
    for method, (n, first, last) in top_positions(records).items():
        print(f"| {method} | {n} | {first / n:.2f} | {last / n:.2f} |")


if __name__ == "__main__":
    main()
