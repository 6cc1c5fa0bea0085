"""records.jsonl (aieg_fast.eval.records): strict JSON records."""
from __future__ import annotations

import json

from aieg_fast.eval.records import json_safe


def test_json_safe_records():
    rec = {"a": float("nan"), "b": [1.0, float("inf"), {"c": float("-inf")}], "d": "x", "e": 2}
    out = json.dumps(json_safe(rec), allow_nan=False)
    assert json.loads(out) == {"a": None, "b": [1.0, None, {"c": None}], "d": "x", "e": 2}


def test_records_of_several_machines_say_so():
    """A run resumed on other machines mixed their results without a word: in bfloat16 CPUs with
    and without bfloat16 units round otherwise. Lines name their machine; a method added by a line
    of another machine keeps it when lines merge, and the summary counts both and warns in
    bfloat16 (not in float32, nor for one machine)."""
    import torch

    from aieg_fast.eval.records import merge_record_lines
    from aieg_fast.eval.report import machine_lines
    from aieg_fast.runs.machine import cpu_model, machine_tag

    tag = machine_tag()
    assert tag.startswith(cpu_model() + "; ") and f"torch {torch.__version__}" in tag and cpu_model()
    # x86 names its model and flags; Arm has no model name and calls its flags Features (bf16 units there)
    from aieg_fast.runs.machine import parse_cpuinfo

    x86 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx512f avx512_bf16\n\nprocessor\t: 1\nmodel name\t: other\n"
    assert parse_cpuinfo(x86) == ("AMD EPYC", frozenset({"fpu", "avx512f", "avx512_bf16"}))
    arm = "processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"
    assert parse_cpuinfo(arm) == ("", frozenset({"fp", "asimd", "sve", "bf16", "i8mm"})) and parse_cpuinfo("") == ("", frozenset())
    lines = [{"id": "a", "methods": {"ig": {"log_odds": 1.0}}, "machine": "A"},
             {"id": "b", "methods": {"ig": {"log_odds": 2.0}}, "machine": "B"},
             {"id": "a", "methods": {"occlusion": {"log_odds": 3.0}}, "controls": {"u": {"x": 1}}, "machine": "B"},
             {"id": "b", "methods": {"saliency": {"log_odds": 4.0}}, "machine": "B"},
             {"id": "c", "methods": {"ig": {"log_odds": 5.0}}}]
    recs = merge_record_lines(lines)
    assert recs["a"]["machine"] == "A" and recs["a"]["methods"]["occlusion"]["machine"] == "B"
    assert recs["a"]["controls"]["u"]["machine"] == "B" and "machine" not in recs["a"]["methods"]["ig"]
    assert "machine" not in recs["b"]["methods"]["saliency"]  # the record's own machine
    text = machine_lines(list(recs.values()), "bfloat16")[1]
    assert text.startswith("Computed on: 1 record(s) on 'A'; 1 record(s) on 'B'; 1 record(s) from before records named "
                           "their machine; added later: 2 method result(s) on 'B'.")
    assert "round otherwise" in text
    assert "round otherwise" not in machine_lines(list(recs.values()), "float32")[1]
    assert "round otherwise" not in machine_lines([recs["b"]], "bfloat16")[1] and machine_lines([], "bfloat16") == []
    # records from before machines were named are no second machine (a run resumed on one machine
    # after the change warned of machines that round otherwise)
    assert "round otherwise" not in machine_lines([recs["b"], recs["c"]], "bfloat16")[1]


def test_append_record_keeps_the_machine_of_a_copied_record(tmp_path):
    """A record computed elsewhere and appended here (benchmarks/topk_sweep.py copies records)
    was tagged with this machine."""
    from aieg_fast.eval.records import append_record, read_records
    from aieg_fast.runs.machine import machine_tag

    path = tmp_path / "records.jsonl"
    append_record(path, {"id": "a", "methods": {}, "machine": "elsewhere"})
    append_record(path, {"id": "b", "methods": {}})
    recs = read_records(path)
    assert recs["a"]["machine"] == "elsewhere" and recs["b"]["machine"] == machine_tag()
