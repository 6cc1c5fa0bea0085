"""Qwen3 (``Qwen3ForCausalLM``, ``Qwen3ForSequenceClassification``): the LLaMA layout (separate
q/k/v projections, bias when ``attention_bias``, grouped-query attention, ``rotate_half`` RoPE
from the ``position_embeddings`` passed to every attention module, scale head_dim^-0.5, no logit
transform) with **per-head RMS norms on q and k before RoPE**.

What is special and how it is handled:

* q/k norms: the model computes ``q_norm(q_proj(x).view(B, L, H, d))`` and the same for k with
  ``k_norm`` (RMSNorm over each head's d channels, learned weight), then applies RoPE. q and k
  are therefore read at the outputs of ``q_norm`` / ``k_norm`` ([B, L, heads, d], flattened to
  [B, L, heads·d]); v at ``v_proj``.
* ``head_dim`` is a config field (128 in the released models, so the query width differs from
  the hidden size, e.g. Qwen3-0.6B: 16 × 128 = 2048 ≠ 1024); the base adapter reads it.
* Optional per-layer sliding windows (``use_sliding_window``; layers ≥ ``max_window_layers`` in
  ``layer_types``; off in the released models): as :class:`~aieg_fast.models.qwen2.Qwen2Adapter`.
"""
from __future__ import annotations

from typing import List

from .base import QKVPoint, merge_heads, split_last
from .qwen2 import Qwen2Adapter

__all__ = ["Qwen3Adapter"]


class Qwen3Adapter(Qwen2Adapter):
    architectures = ("Qwen3ForCausalLM", "Qwen3ForSequenceClassification")

    def qkv_points(self, layer: int) -> List[QKVPoint]:
        a = self.attn_modules[layer]
        return [(a.q_norm, merge_heads("q")), (a.k_norm, merge_heads("k")), (a.v_proj, split_last("v"))]
