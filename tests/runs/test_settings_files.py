"""A run's settings files in its folder (config.json, methods.json) that are not a run's: not
JSON, not an object, a model's config.json, a methods.json entry that is no options. Each is
refused naming the file, before anything in the folder changes (runs.read_settings); they gave
json's bare "Expecting value", an AttributeError traceback, or a list of every setting as a
difference, after config.json was written."""
from __future__ import annotations

import json

import pytest

from aieg_fast import eval as E
from aieg_fast.dataset_attribution import attribute_dataset

KW = dict(n_steps=4, n_samples=1, pis=(0.5,), progress=False, plot=False, labels=(10, 11), template="{text} :", metrics="hard",
          methods="saliency", n=1)


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("name, content, why", [
    ("config.json", "not json", r"it is not JSON: Expecting value"),
    ("config.json", "[1]", r"it holds a JSON list, where a run writes an object"),
    ("config.json", '{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}', r"it holds none of a run's settings \(its keys: architectures, model_type\)"),
    ("methods.json", "[1, 2]", r"it holds a JSON list"),
    ("methods.json", '{"saliency": 5}', r"its entry 'saliency' is 5, not the options of a method"),
])
@pytest.mark.parametrize("with_results", [True, False])
def test_evaluate_refuses_a_settings_file_that_is_not_a_runs(tiny_gpt2, tmp_path, name, content, why, with_results):
    out = tmp_path / "run"
    out.mkdir()
    (out / name).write_text(content)
    if name == "methods.json":
        (out / "config.json").write_text('{"topk": 0.2}')
    if with_results:
        (out / "model.safetensors").write_bytes(b"weights")
    before = _files(out)
    with pytest.raises(ValueError, match=rf"out_dir '.*run': its {name} is not the settings file of a run \({why}.*use another out_dir"):
        E.evaluate(tiny_gpt2, out_dir=out, **KW)
    assert _files(out) == before  # nothing written, nothing replaced (config.json was written first)


def test_attribute_dataset_refuses_a_config_json_that_is_not_an_object(tiny_gpt2, tmp_path):
    rows = tmp_path / "d.jsonl"
    rows.write_text('{"text": "a fine film"}\n')
    out = tmp_path / "o"
    out.mkdir()
    (out / "config.json").write_text("[1]")  # an AttributeError ('list' object has no attribute 'get') before
    (out / "attributions.jsonl").write_text(json.dumps({"id": 0}) + "\n")
    with pytest.raises(ValueError, match=r"its config.json is not the settings file of a run \(it holds a JSON list"):
        attribute_dataset(rows, out, tiny_gpt2, method="saliency", progress=False)


def test_an_empty_out_dir_is_named_as_such(tiny_gpt2, tmp_path, monkeypatch):
    """out_dir "" was read as the working directory: a run there was refused as a folder holding
    results (its files) without config.json."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("a user's file")
    with pytest.raises(ValueError, match=r"out_dir is empty \(''\); name a folder for the results"):
        attribute_dataset(["a film"], "", tiny_gpt2, method="saliency", progress=False)
    with pytest.raises(ValueError, match=r"out_dir is empty \(''\); name a folder for the results"):
        E.evaluate(tiny_gpt2, out_dir="", **KW)
