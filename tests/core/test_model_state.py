"""Exact model-state restore (issue 14): per submodule training flags, requires_grad, attention
implementation, dtypes, hooks and gradients come back as they were, also after an exception in
the middle of a call; a model in training mode is explained in eval mode, with a warning."""
from __future__ import annotations

import pytest
import torch

import aieg_fast
import aieg_fast.core.context as context_module
from aieg_fast import AttributionWarning
from builders import make_tiny_gpt2, make_tiny_llama

TEXT = "the movie is good and the actors are great"


def full_state(model):
    """Everything a call must leave unchanged, per submodule and per parameter."""
    return {
        "training": {n: m.training for n, m in model.named_modules()},
        "params": {n: (p.requires_grad, p.dtype, p.device, p.grad is None) for n, p in model.named_parameters()},
        "buffers": {n: b.dtype for n, b in model.named_buffers()},
        "attn": model.config._attn_implementation,
        "hooks": {n: (len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks)) for n, m in model.named_modules()},
        "grad_enabled": torch.is_grad_enabled(),
    }


def _mixed(make):
    """A model whose blocks are in mixed train/eval modes, with mixed requires_grad, on SDPA."""
    model, tok = make()
    model.train()
    blocks = model.transformer.h if hasattr(model, "transformer") else model.model.layers
    blocks[0].eval()  # block 0 in eval, block 1 (and the rest) in training mode
    for i, p in enumerate(model.parameters()):
        p.requires_grad_(i % 3 != 0)
    model.config._attn_implementation = "sdpa"
    return aieg_fast.load_model(model, tok)


@pytest.mark.parametrize("make", [make_tiny_gpt2, make_tiny_llama], ids=["gpt2", "llama"])
def test_mixed_modes_restored_per_submodule(make):
    ex = _mixed(make)
    before = full_state(ex.model)
    with pytest.warns(AttributionWarning, match="training mode"):
        for method in ("aieg", "grad_ellm", "attention", "integrated_gradients"):
            ex.attribute(TEXT, method=method, n_steps=4)
            assert full_state(ex.model) == before, method
        ex.attribute_generation("the movie is", max_new_tokens=2, method="aieg", n_steps=4)
    assert full_state(ex.model) == before


def test_restored_after_exception_while_eager(monkeypatch):
    """An exception raised while AIEG holds eager attention (in its attention capture) leaves
    every flag, the SDPA implementation and no hook behind."""
    ex = _mixed(make_tiny_gpt2)
    before = full_state(ex.model)

    def boom(self):
        assert ex.model.config._attn_implementation == "eager"  # raised inside the switch
        raise RuntimeError("boom")

    monkeypatch.setattr(context_module.AttentionCapture, "pop", boom)
    with pytest.warns(AttributionWarning, match="training mode"), pytest.raises(RuntimeError, match="boom"):
        ex.attribute(TEXT, method="aieg", n_steps=4)
    assert full_state(ex.model) == before


def test_training_mode_is_explained_in_eval_mode():
    """Dropout in training mode is not silently ignored: the call warns, and the scores are the
    eval-mode (deterministic) scores."""
    model, tok = make_tiny_gpt2()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.5
    ex = aieg_fast.load_model(model, tok)
    ref = ex.attribute(TEXT, method="saliency").scores
    model.train()
    with pytest.warns(AttributionWarning, match=r"training mode \(\d+ modules, \d+ dropout layers active\).*eval mode"):
        got = ex.attribute(TEXT, method="saliency").scores
    torch.testing.assert_close(got, ref)
    assert all(m.training for m in model.modules())


def test_module_added_after_first_call_is_switched_too():
    """A dropout module added after the first call (as a LoRA injection would) is switched to
    eval mode as well: the module lists are made again when a module is registered."""
    model, tok = make_tiny_gpt2()
    ex = aieg_fast.load_model(model, tok)
    ref = ex.attribute(TEXT, method="saliency").scores
    model.transformer.h[0].mlp.dropout = torch.nn.Dropout(p=0.9)  # a new module, in training mode
    assert model.transformer.h[0].mlp.dropout.training
    with pytest.warns(AttributionWarning, match="training mode"):
        got = ex.attribute(TEXT, method="saliency").scores
    torch.testing.assert_close(got, ref)
    assert model.transformer.h[0].mlp.dropout.training


def test_a_module_put_in_place_without_registering_is_switched_too():
    """A module set through ``_modules[...]`` (as quantisation and tracing tools replace modules;
    torch's registration hooks do not see it) and a parameter set through ``_parameters[...]``
    are switched to eval mode / frozen for the call too (kept lists missed them on GPT-2, whose
    forward registers nothing: dropout ran, and two equal calls differed, without a warning)."""
    model, tok = make_tiny_gpt2()
    ex = aieg_fast.load_model(model, tok)
    ref = ex.attribute(TEXT, method="saliency").scores
    model.transformer.h[0].mlp._modules["dropout"] = torch.nn.Dropout(p=0.9)  # training mode, unregistered
    lin = model.transformer.h[1].mlp.c_fc
    lin._parameters["bias"] = torch.nn.Parameter(lin.bias.detach().clone())  # requires_grad, unregistered
    seen = []
    handle = lin.register_forward_pre_hook(lambda mod, args: seen.append(mod.bias.requires_grad))
    try:
        with pytest.warns(AttributionWarning, match="training mode"):
            got = ex.attribute(TEXT, method="saliency").scores
    finally:
        handle.remove()
    torch.testing.assert_close(got, ref)
    assert seen and not any(seen)  # frozen during the call
    assert model.transformer.h[0].mlp.dropout.training and lin.bias.requires_grad  # given back


def test_dtype_and_device_untouched():
    model, tok = make_tiny_gpt2()
    model.to(torch.float64)
    ex = aieg_fast.load_model(model, tok)
    before = full_state(model)
    res = ex.attribute(TEXT, method="integrated_gradients", n_steps=4)
    assert torch.isfinite(res.scores).all()
    assert full_state(model) == before and next(model.parameters()).dtype == torch.float64
