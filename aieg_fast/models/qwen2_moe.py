"""Qwen2-MoE (``Qwen2MoeForCausalLM``, ``Qwen2MoeForSequenceClassification``; Qwen1.5-MoE,
Qwen2-57B-A14B): Qwen2's attention (q/k/v projections with bias when ``qkv_bias``, grouped-query
attention, ``rotate_half`` RoPE, scale head_dim^-0.5) with a mixture-of-experts MLP.

What is special and how it is handled:

* Mixture of experts with a shared expert: a top-k router over ``num_experts`` experts plus a
  sigmoid-gated shared expert; layers in ``mlp_only_layers`` or off ``decoder_sparse_step`` use a
  dense MLP. All of it is after attention: no hook point moves and F is the model's own logit
  (gradients through the routing weights; the expert choice is piecewise constant).
* Sliding windows: with ``use_sliding_window`` the config marks every other layer below
  ``max_window_layers`` ``"sliding_attention"`` in ``layer_types`` (without it the config sets
  ``sliding_window = 0`` and no layer slides). Read per layer from ``layer_types`` exactly as
  :class:`~aieg_fast.models.qwen2.Qwen2Adapter`; Grad-ELLM refuses a windowed layer over a
  sequence longer than its window, the other methods are exact.
"""
from __future__ import annotations

from .qwen2 import Qwen2Adapter

__all__ = ["Qwen2MoeAdapter"]


class Qwen2MoeAdapter(Qwen2Adapter):
    architectures = ("Qwen2MoeForCausalLM", "Qwen2MoeForSequenceClassification")
