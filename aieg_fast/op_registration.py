"""What torch needs to know of the compiled operators ``torch.ops.aieg_fast.<op>`` beyond their
kernels: fake (meta) kernels giving the output's metadata only, for ``torch.compile``, export and
``torch.library.opcheck``; and a derivative that refuses, since the kernels are inference-only
(:mod:`aieg_fast.ops`' wrappers run the differentiable reference when an input needs a gradient;
a backward through a direct call of the operator raises, where it would leave ``.grad`` None)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ._ext import CPU_OPS, CUDA_OPS, HAS_EXT
from .reference import acc_dtype

__all__ = []


def _register_fake(op: str):
    """``torch.library.register_fake`` for ``op`` when the loaded extension defines it (an
    extension built before the op existed does not: the op then runs on the reference)."""
    if op in CPU_OPS or op in CUDA_OPS:
        return torch.library.register_fake(f"aieg_fast::{op}")
    return lambda fn: fn


def _one_device(op: str, **tensors: Optional[Tensor]) -> None:
    """A fake kernel's device check: PyTorch sends a call that mixes a meta tensor with real
    ones to the fake kernel, whose output (made beside the first input) would be uninitialised
    memory on that input's device; such a call is refused, naming each tensor's device."""
    devices = {name: t.device for name, t in tensors.items() if isinstance(t, Tensor)}
    torch._check(len(set(devices.values())) <= 1,
                 lambda: f"aieg_fast::{op}: every tensor should be on one device, got " +
                 ", ".join(f"{n} on {d}" for n, d in devices.items()))


if HAS_EXT:

    @torch.library.register_fake("aieg_fast::interpolate_path")
    def _interpolate_path_fake(input_embeds, baseline_embeds, alphas, fixed_mask=None):
        _one_device("interpolate_path", input_embeds=input_embeds, baseline_embeds=baseline_embeds, alphas=alphas, fixed_mask=fixed_mask)
        torch._check(input_embeds.dim() == 2, lambda: "input_embeds should be [L, d]")
        torch._check(alphas.dim() == 1, lambda: "alphas should be [m]")
        L, d = input_embeds.shape
        return input_embeds.new_empty((alphas.shape[0], L, d))

    @torch.library.register_fake("aieg_fast::adaptive_alphas")
    def _adaptive_alphas_fake(pilot_logits, n_steps, alloc="abs", idg_compat_quirk=False):
        torch._check(n_steps >= 2, lambda: f"n_steps must be >= 2, got {n_steps}")
        acc = acc_dtype(pilot_logits)
        return pilot_logits.new_empty((n_steps,), dtype=acc), pilot_logits.new_empty((n_steps,), dtype=acc)

    @torch.library.register_fake("aieg_fast::emphasis_factors")
    def _emphasis_factors_fake(path_logits, alphas, widths, mode="fd", sign="abs", norm="l1", slopes=None):
        _one_device("emphasis_factors", path_logits=path_logits, alphas=alphas, widths=widths, slopes=slopes)
        return path_logits.new_empty((path_logits.numel(),), dtype=acc_dtype(path_logits))

    @torch.library.register_fake("aieg_fast::integrate_gradients")
    def _integrate_gradients_fake(grads, weights, delta, reduce="sum"):
        _one_device("integrate_gradients", grads=grads, weights=weights, delta=delta)
        torch._check(grads.dim() == 3, lambda: "grads should be [m, L, d]")
        _, L, d = grads.shape
        return grads.new_empty((L,) if reduce == "sum" else (L, d), dtype=acc_dtype(grads))

    @torch.library.register_fake("aieg_fast::attention_gradient_product")
    def _attention_gradient_product_fake(attn, grad=None, weights=None, reduce="product_of_means"):
        _one_device("attention_gradient_product", attn=attn, grad=grad, weights=weights)
        torch._check(attn.dim() == 4, lambda: "attn should be [B, H, Q, K]")
        return attn.new_empty((attn.shape[2], attn.shape[3]), dtype=acc_dtype(attn))

    @torch.library.register_fake("aieg_fast::posnorm")
    def _posnorm_fake(scores, valid_mask=None, mode="minmax"):
        _one_device("posnorm", scores=scores, valid_mask=valid_mask)
        return scores.new_empty(scores.shape, dtype=acc_dtype(scores))

    @_register_fake("hvp_l1_mean")
    def _hvp_l1_mean_fake(hvps):
        torch._check(hvps.dim() == 3, lambda: "hvps should be [m, n, d]")
        return hvps.new_empty((hvps.shape[1],), dtype=acc_dtype(hvps))


def _refuse_derivative(op: str) -> None:
    """Register for ``op`` a backward that raises, naming the wrapper that differentiates."""
    def backward(ctx, *grads):
        raise RuntimeError(f"aieg_fast::{op} has no derivative (the compiled kernels are inference-only); call "
                           f"aieg_fast.ops.{op}, whose backend='auto' runs the differentiable reference when an input "
                           "requires grad, or detach the inputs")

    torch.library.register_autograd(f"aieg_fast::{op}", backward, setup_context=lambda ctx, inputs, output: None)


for _op in sorted(CPU_OPS | CUDA_OPS):
    _refuse_derivative(_op)
