"""AIEG's named readings (``preset``, aieg_fast.methods.aieg.PRESETS): a preset is exactly its
options, explicit options win, the options record what ran, and a bad name is refused first."""
from __future__ import annotations

import pytest
import torch

import aieg_fast
from aieg_fast.methods import get_method
from aieg_fast.methods.aieg import PRESETS

TEXT = "the movie is good and the actors are great"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_preset_is_its_options(tiny_llama, preset):
    named = tiny_llama.attribute(TEXT, method="aieg", n_steps=6, preset=preset)
    spelled = tiny_llama.attribute(TEXT, method="aieg", n_steps=6, **PRESETS[preset])
    assert torch.equal(named.scores, spelled.scores)
    for name, value in PRESETS[preset].items():
        assert named.options[name] == value  # the options record the values used
    assert named.options["preset"] == preset


def test_presets_differ_and_v2_is_the_default(tiny_llama):
    default = tiny_llama.attribute(TEXT, method="aieg", n_steps=6)
    runs = {p: tiny_llama.attribute(TEXT, method="aieg", n_steps=6, preset=p) for p in ("v1", "v2", "v3")}
    assert torch.equal(default.scores, runs["v2"].scores) and default.options["preset"] == "v2"
    assert not torch.allclose(runs["v1"].scores, runs["v2"].scores)
    assert not torch.allclose(runs["v2"].scores, runs["v3"].scores)
    # relu_max: tokens with negative evidence score 0
    for p in ("v2", "v3"):
        ieg = torch.tensor(runs[p].info["ieg"], dtype=torch.float32)
        assert bool((runs[p].scores[ieg < 0] == 0).all())


def test_explicit_options_override_the_preset():
    opts = get_method("aieg").options
    o = opts(preset="v3", posnorm="minmax")
    assert (o.posnorm, o.attn_source) == ("minmax", "path")
    assert opts().posnorm == "relu_max" and opts().attn_source == "input"
    assert opts(preset="v1").posnorm == "minmax" and opts(preset="v1").attn_source == "input"
    assert aieg_fast.method_options("aieg")["preset"] == "v2"


def test_a_path_preset_with_rollout_takes_the_inputs_attention():
    opts = get_method("aieg").options
    o = opts(preset="v3", attn_layers="rollout")
    assert (o.posnorm, o.attn_source) == ("relu_max", "input")
    with pytest.raises(ValueError, match="rollout"):
        opts(preset="v3", attn_layers="rollout", attn_source="path")  # asked for explicitly: refused


def test_unknown_preset_is_refused_by_name(tiny_llama):
    with pytest.raises(ValueError, match="preset"):
        tiny_llama.attribute(TEXT, method="aieg", n_steps=4, preset="v9")
