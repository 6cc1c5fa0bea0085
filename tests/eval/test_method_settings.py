"""A run folder records the options each method spec was computed with (``methods.json`` for
evaluate, ``option_values`` in attribute-dataset's ``config.json``), so a default that changes
between versions (AIEG's preset) never puts records of two readings under one name; folders
from before the record are read with the former defaults (registry.FORMER_DEFAULTS)."""
from __future__ import annotations

import json

import pytest

from aieg_fast import eval as E
from aieg_fast.dataset_attribution import RECORDS_FILE as DATASET_RECORDS
from aieg_fast.dataset_attribution import attribute_dataset
from aieg_fast.methods import registry
from aieg_fast.runs import METHODS_FILE

KW = dict(dataset="sst2-sample", out_dir=None, n_steps=4, n_samples=1, pis=(0.5,), progress=False, plot=False,
          labels=(10, 11), template="{text} :", max_tokens=20, metrics="hard")


def _run(model, out, methods, n=2, **kw):
    return E.evaluate(model, **{**KW, "out_dir": out, "methods": methods, "n": n, **kw})


def test_resolved_options_fill_presets_and_former_defaults(monkeypatch):
    now = registry.resolved_options("aieg", {})
    assert now["preset"] == registry.method_options("aieg")["preset"] and now["posnorm"] in ("minmax", "relu_max")
    monkeypatch.setitem(registry.FORMER_DEFAULTS, "aieg", {"preset": "v3"})
    former = registry.resolved_options("aieg", {}, former=True)
    assert (former["preset"], former["posnorm"], former["attn_source"]) == ("v3", "relu_max", "path")
    pinned = registry.resolved_options("aieg", {"preset": "v1"}, former=True)  # explicit options win
    assert (pinned["posnorm"], pinned["attn_source"]) == ("minmax", "input")
    assert json.loads(json.dumps(former)) == former  # as it is written to methods.json


def test_methods_json_recorded_and_a_changed_reading_refused(tiny_gpt2, tmp_path):
    out = tmp_path / "o"
    _run(tiny_gpt2, out, "aieg,integrated_gradients")
    rec = json.loads((out / METHODS_FILE).read_text())
    assert set(rec) == {"aieg", "integrated_gradients"} and rec["aieg"] == registry.resolved_options("aieg", {})
    # the same folder after a release in which 'aieg' resolves to other options
    rec["aieg"]["posnorm"] = "abs_sum"
    (out / METHODS_FILE).write_text(json.dumps(rec))
    before = (out / "records.jsonl").read_bytes()
    with pytest.raises(ValueError, match=r"records of 'aieg' computed with other options \(posnorm: 'abs_sum' recorded"):
        _run(tiny_gpt2, out, "aieg", n=3)
    assert (out / "records.jsonl").read_bytes() == before  # nothing computed, nothing lost
    # a method whose options did not change still resumes; a new spec is added to the record
    r = _run(tiny_gpt2, out, "integrated_gradients,saliency", n=3)
    assert r["computed"] == 3 and set(json.loads((out / METHODS_FILE).read_text())) == {"aieg", "integrated_gradients", "saliency"}


def test_folder_from_before_methods_json_is_read_with_former_defaults(tiny_gpt2, tmp_path, monkeypatch):
    out = tmp_path / "o"
    _run(tiny_gpt2, out, "aieg,integrated_gradients")
    (out / METHODS_FILE).unlink()  # a folder written before methods.json existed
    # suppose the former default was another preset than today's: its 'aieg' records are that reading
    other = "v3" if registry.method_options("aieg")["preset"] == "v1" else "v1"
    monkeypatch.setitem(registry.FORMER_DEFAULTS, "aieg", {"preset": other})
    r = _run(tiny_gpt2, out, "integrated_gradients", n=3)  # a resume without 'aieg' is accepted ...
    assert r["computed"] == 1
    rec = json.loads((out / METHODS_FILE).read_text())
    assert rec["aieg"]["preset"] == other  # ... and records what the folder's 'aieg' records are
    with pytest.raises(ValueError, match=rf"records of 'aieg'.*preset: '{other}' recorded"):
        _run(tiny_gpt2, out, "aieg", n=3)
    r = _run(tiny_gpt2, out, f"aieg:preset={other}", n=3)  # the former reading by name: computed afresh
    assert r["computed"] == 3


def test_attribute_dataset_records_option_values(tiny_gpt2, tmp_path, monkeypatch):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in ("the movie is good", "a bad film")), encoding="utf-8")
    out = tmp_path / "o"
    attribute_dataset(data, out, tiny_gpt2, method="aieg", n_steps=4, progress=False, limit=1)
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    assert cfg["option_values"] == registry.resolved_options("aieg", {})
    # a folder from before option_values, whose former default differs from today's: refused, nothing lost
    del cfg["option_values"]
    cfg_path.write_text(json.dumps(cfg))
    other = "v3" if registry.method_options("aieg")["preset"] == "v1" else "v1"
    monkeypatch.setitem(registry.FORMER_DEFAULTS, "aieg", {"preset": other})
    before = (out / DATASET_RECORDS).read_bytes()
    with pytest.raises(ValueError, match=r"other settings \(option_values: {'preset': 'v1', 'posnorm': 'minmax'} recorded, "
                                           r"{'preset': 'v2', 'posnorm': 'relu_max'} now\)"):
        attribute_dataset(data, out, tiny_gpt2, method="aieg", n_steps=4, progress=False)
    assert (out / DATASET_RECORDS).read_bytes() == before
    assert json.loads(cfg_path.read_text())["option_values"]["preset"] == other
    # the same folder when the former default is today's: it resumes
    monkeypatch.setitem(registry.FORMER_DEFAULTS, "aieg", {"preset": registry.method_options("aieg")["preset"]})
    cfg_path.write_text(json.dumps(cfg))  # cfg: still without option_values
    assert attribute_dataset(data, out, tiny_gpt2, method="aieg", n_steps=4, progress=False)["computed"] == 1
