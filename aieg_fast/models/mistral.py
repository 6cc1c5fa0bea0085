"""Mistral (``MistralForCausalLM``, ``MistralForSequenceClassification``; Mistral-7B v0.1–v0.3,
Mistral-Nemo): the LLaMA layout (separate bias-free q/k/v projections, grouped-query attention,
``rotate_half`` RoPE from the ``position_embeddings`` the decoder passes to every attention module,
scale head_dim^-0.5, no logit transform) plus **sliding-window attention**.

What is special and how it is handled:

* ``head_dim`` may differ from hidden/heads (Mistral-Nemo: 32 heads × 128 = 4096 ≠ 5120); the
  config always sets it and :class:`~aieg_fast.models.base.DecoderAdapter` reads it.
* Sliding window: with ``config.sliding_window = w`` (Mistral-7B-v0.1: 4096; v0.2+ and Nemo:
  None) every layer's query at index t attends only to keys t-w < i ≤ t (the mask the model
  builds with ``create_sliding_window_causal_mask``). Methods that read the model's own
  attention probabilities (attention, scaled attention, AIEG) and the gradient methods see the
  window as the model applies it. Grad-ELLM rebuilds its spatial weight λ from the captured q/k;
  :meth:`MistralAdapter.sliding_window` gives each layer's window, and λ's valid positions
  honour it (:mod:`aieg_fast.methods.grad_ellm`).
"""
from __future__ import annotations

from typing import Optional

from .base import config_window
from .llama import LlamaAdapter

__all__ = ["MistralAdapter"]


class MistralAdapter(LlamaAdapter):
    architectures = ("MistralForCausalLM", "MistralForSequenceClassification")

    def sliding_window(self, layer: int) -> Optional[int]:
        """How many positions (the query's own included) a query of ``layer`` attends to, or
        None for full causal attention. Mistral: ``config.sliding_window`` in every layer."""
        return config_window(self.model.config)
