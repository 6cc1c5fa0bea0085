"""benchmarks/top_token_position.py: the share of rows whose top-scored token is the first /
last attributable one, on hand-built records where the answer is known."""
import gzip
import importlib.util
import json
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "top_token_position", Path(__file__).resolve().parents[2] / "benchmarks" / "top_token_position.py")
top_token_position = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(top_token_position)


def _records():
    # example a: a generation record split over two lines (head, then one method), two steps;
    # None marks positions that are not attributable (padding after the step's context).
    head = {"id": "a", "steps": [{}, {}], "methods": {}}
    gen = {"id": "a", "methods": {"m": {"scores": [[0.9, 0.1, 0.2, None], [0.1, 0.2, 0.3, 0.8]]}}}
    # example b: a classification record; its first position is a template token (None).
    cls = {"id": "b", "methods": {"m": {"scores": [None, 0.5, 0.1, 0.2]},
                                  "random": {"log_odds": 0.0}}}  # no stored scores: skipped
    return [head, gen, cls]


def test_counts_first_and_last_attributable_positions(tmp_path, capsys):
    path = tmp_path / "records.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in _records())
    top_token_position.main([str(path)])
    out = capsys.readouterr().out
    # rows: step 0 (top first), step 1 (top last), example b (top = position 1, its first attributable)
    assert "| m | 3 | 0.67 | 0.33 |" in out
    assert "random" not in out


def test_ties_go_to_the_earlier_position():
    recs = {"x": {"id": "x", "methods": {"m": {"scores": [0.5, 0.1, 0.5]}}}}
    assert top_token_position.top_positions(recs) == {"m": (1, 1, 0)}
