"""Integer settings given as NumPy scalars or 0-d integer tensors (a value from ``np.arange`` or
``logits.argmax()``) are read as the Python ints they hold, in every setting that takes an int:
the call's own (``max_steps``, ``baseline`` as a token id), method options (``n_pilot``,
``span_width``, ``attn_layers`` items) and ``attribute_dataset``'s (``batch_size``, its options),
and are recorded as Python ints. Bools and floats stay refused. A layer index out of range names
the range accepted, negative indices included. On the tiny random GPT-2."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from aieg_fast.dataset_attribution import RECORDS_FILE, attribute_dataset

TEXT = "the movie is good"

#: (call settings, the same with NumPy / tensor integers)
CASES = {
    "baseline": (dict(method="integrated_gradients", n_steps=4, baseline=5),
                 dict(method="integrated_gradients", n_steps=4, baseline=np.int32(5))),
    "baseline_tensor": (dict(method="integrated_gradients", n_steps=4, baseline=5),
                        dict(method="integrated_gradients", n_steps=4, baseline=torch.tensor(5))),
    "max_steps": (dict(method="integrated_gradients", n_steps="auto", max_steps=20),
                  dict(method="integrated_gradients", n_steps="auto", max_steps=np.int64(20))),
    "n_pilot": (dict(method="integrated_decision_gradients", n_steps=4, n_pilot=4),
                dict(method="integrated_decision_gradients", n_steps=4, n_pilot=np.int64(4))),
    "span_width": (dict(method="occlusion", granularity="span", span_width=2, span_stride=1),
                   dict(method="occlusion", granularity="span", span_width=np.int64(2), span_stride=torch.tensor(1))),
    "attn_layers": (dict(method="attention", attn_layers=[1, -2]),
                    dict(method="attention", attn_layers=[np.int64(1), torch.tensor(-2)])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_numpy_and_tensor_integers_are_read_as_ints(tiny_gpt2, case):
    plain, other = CASES[case]
    want = tiny_gpt2.attribute(TEXT, **plain)
    got = tiny_gpt2.attribute(TEXT, **other)
    torch.testing.assert_close(got.scores, want.scores, rtol=0, atol=0)
    assert got.options == want.options
    json.dumps(got.to_dict())  # plain ints: JSON takes them


def test_generation_takes_a_numpy_baseline(tiny_gpt2):
    kw = dict(method="integrated_gradients", n_steps=4, generated_text=[5, 6])
    want = tiny_gpt2.attribute_generation(TEXT, baseline=5, **kw)
    for b in (np.int64(5), torch.tensor(5)):
        got = tiny_gpt2.attribute_generation(TEXT, baseline=b, **kw)
        assert torch.equal(got.scores.nan_to_num(), want.scores.nan_to_num()) and got.options == want.options


@pytest.mark.parametrize("bad, match", [
    (dict(method="integrated_gradients", n_steps="auto", max_steps=np.float64(20.0)), r"max_steps must be an int >= 2, got np.float64\(20.0\)"),
    (dict(method="integrated_decision_gradients", n_steps=4, n_pilot=np.bool_(True)), r"n_pilot must be an int >= 2, got True"),
    (dict(method="occlusion", granularity="span", span_width=torch.tensor(2.0)), r"span_width must be a positive int, got tensor\(2.\)"),
    (dict(method="attention", attn_layers=[True]), r"attn_layers must be .* got \[True\]"),
    # a tensor of one or more dimensions is no scalar: refused as passed, not shown as the int it holds
    (dict(method="attention", attn_layers=torch.tensor([1])), r"attn_layers must be .* got tensor\(\[1\]\)$"),
    (dict(method="attention", attn_layers=[torch.tensor([1])]), r"attn_layers must be .* got \[tensor\(\[1\]\)\]$"),
])
def test_bools_and_floats_stay_refused(tiny_gpt2, bad, match):
    with pytest.raises(ValueError, match=match):
        tiny_gpt2.attribute(TEXT, **bad)


def test_attribute_dataset_takes_numpy_integers_and_records_ints(tiny_gpt2, tmp_path):
    kw = dict(method="integrated_decision_gradients", progress=False)
    attribute_dataset(["the movie is good", "bad"], tmp_path / "a", tiny_gpt2, batch_size=2, n_steps=4, baseline=5,
                      options={"n_pilot": 3}, **kw)
    attribute_dataset(["the movie is good", "bad"], tmp_path / "b", tiny_gpt2, batch_size=np.int64(2), n_steps=np.int64(4),
                      baseline=np.int32(5), internal_batch_size=torch.tensor(8), options={"n_pilot": np.int64(3)}, **kw)
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    assert config["batch_size"] == 2 and config["n_steps"] == 4 and config["baseline"] == 5 and config["options"] == {"n_pilot": 3}
    a, b = [[json.loads(line) for line in (tmp_path / d / RECORDS_FILE).read_text().splitlines()] for d in "ab"]
    assert [r["scores"] for r in a] == [r["scores"] for r in b] and [r["batch"] for r in b] == [{"first": 0, "size": 2}] * 2


@pytest.mark.parametrize("method", ["attention", "scaled_attention", "aieg"])
def test_a_layer_out_of_range_names_the_accepted_range(tiny_gpt2, method):
    """Negative layer indices are accepted (-1 is the last layer): the refusal of one out of
    range gives [-n, n), not [0, n)."""
    tiny_gpt2.attribute(TEXT, method=method, attn_layers=[-2], **({"n_steps": 4} if method == "aieg" else {}))
    with pytest.raises(ValueError, match=r"attn_layers has layer indices out of range \[-2, 2\) .*: \[-3, 2\]"):
        tiny_gpt2.attribute(TEXT, method=method, attn_layers=[-3, 2, 1], **({"n_steps": 4} if method == "aieg" else {}))
