"""Qwen2 / Qwen2.5 (``Qwen2ForCausalLM``, ``Qwen2ForSequenceClassification``): the LLaMA layout
(separate q/k/v projections, grouped-query attention, ``rotate_half`` RoPE from the
``position_embeddings`` passed to every attention module, scale head_dim^-0.5, no logit
transform) with two differences:

* q/k/v projections carry a bias. q/k/v are read at the projections' outputs, bias included,
  which is what the model rotates and multiplies.
* Optional per-layer sliding windows: with ``use_sliding_window`` the layers named
  ``"sliding_attention"`` in ``config.layer_types`` (by default those with index
  ≥ ``max_window_layers``) attend only to the last ``config.sliding_window`` positions; the other
  layers are full causal. The released Qwen2/2.5 configs leave it off. Handled per layer as in
  :class:`~aieg_fast.models.mistral.MistralAdapter`: methods using the model's own attention
  are exact; Grad-ELLM refuses to read a windowed layer over a sequence longer than its window.

Small Qwen2.5 models tie the LM head to the embeddings; ``get_output_embeddings`` returns the
tied matrix, so F is unchanged.
"""
from __future__ import annotations

from typing import Optional

from .base import layer_types_window
from .mistral import MistralAdapter

__all__ = ["Qwen2Adapter"]


class Qwen2Adapter(MistralAdapter):
    architectures = ("Qwen2ForCausalLM", "Qwen2ForSequenceClassification")

    def sliding_window(self, layer: int) -> Optional[int]:
        """The window of the layers ``config.layer_types`` marks ``"sliding_attention"``."""
        return layer_types_window(self.model.config, layer)
