"""records.jsonl (aieg_fast.eval.records): strict JSON records."""
from __future__ import annotations

import json

from aieg_fast.eval.records import json_safe


def test_json_safe_records():
    rec = {"a": float("nan"), "b": [1.0, float("inf"), {"c": float("-inf")}], "d": "x", "e": 2}
    out = json.dumps(json_safe(rec), allow_nan=False)
    assert json.loads(out) == {"a": None, "b": [1.0, None, {"c": None}], "d": "x", "e": 2}
