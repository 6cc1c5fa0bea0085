"""Qwen3-MoE (``Qwen3MoeForCausalLM``, ``Qwen3MoeForSequenceClassification``; Qwen3-30B-A3B,
Qwen3-235B-A22B): Qwen3's attention (per-head RMS q/k norms before ``rotate_half`` RoPE, read at
``q_norm``/``k_norm``; grouped-query attention; config ``head_dim``; scale head_dim^-0.5) with a
mixture-of-experts MLP.

What is special and how it is handled:

* Mixture of experts (top-k of ``num_experts``, no shared expert; ``mlp_only_layers`` /
  ``decoder_sparse_step`` choose dense layers): after attention, so no hook point moves and F is
  the model's own logit.
* Sliding window: unlike Qwen3, the model builds ONE mask for all layers — a sliding-window mask
  over every layer whenever ``config.sliding_window`` is set (``use_sliding_window``; off in the
  released models), ignoring ``max_window_layers``. :meth:`Qwen3MoeAdapter.sliding_window`
  follows the model, not ``layer_types``; Grad-ELLM refuses a sequence longer than the window,
  the other methods are exact.
"""
from __future__ import annotations

from typing import Optional

from .mistral import MistralAdapter
from .qwen3 import Qwen3Adapter

__all__ = ["Qwen3MoeAdapter"]


class Qwen3MoeAdapter(Qwen3Adapter):
    architectures = ("Qwen3MoeForCausalLM", "Qwen3MoeForSequenceClassification")

    def sliding_window(self, layer: int) -> Optional[int]:
        """``config.sliding_window`` in every layer (the model's single mask), or None."""
        return MistralAdapter.sliding_window(self, layer)
