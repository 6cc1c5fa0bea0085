"""Phi-3 (``Phi3ForCausalLM``, ``Phi3ForSequenceClassification``; Phi-3/3.5 mini and medium,
Phi-4-mini): the LLaMA layout with

* **fused qkv_proj**: one projection whose output is ``[q (heads·d) | k (kv_heads·d) |
  v (kv_heads·d)]``, split by plain slicing (no per-head interleaving), as
  ``Phi3Attention.forward`` does; grouped-query head counts from the config (Phi-3-medium 40/10,
  Phi-4-mini 24/8).
* **fused gate_up_proj** in the MLP (``chunk(2)`` into gate and up): no method reads the MLP.
* **partial rotary** (``rope_parameters["partial_rotary_factor"]``, 0.75 in Phi-4-mini): only the
  first ``rotary_dim = cos.shape[-1]`` channels of each head are rotated (``rotate_half`` within
  them), the rest pass through; :func:`partial_rotate_half_rope` does exactly that, with
  ``rotary_dim`` read from the tables.
* **LongRoPE / su scaling** (128k models): short/long factors and the attention factor are folded
  into the (cos, sin) the decoder passes to each attention module, which is where
  :meth:`rope_tables` reads them.
* **sliding window** (``sliding_window``, e.g. 2047 in Phi-3-mini-4k) on every layer: applied by
  the decoder's mask; the captured probabilities are the model's.
* residual dropouts (``resid_pdrop``): inactive in eval mode, which the package enforces.
"""
from __future__ import annotations

from typing import Optional

from .base import config_window, split_last
from .llama import LlamaAdapter, partial_rotate_half_rope

__all__ = ["Phi3Adapter"]


class Phi3Adapter(LlamaAdapter):
    architectures = ("Phi3ForCausalLM", "Phi3ForSequenceClassification")
    has_rope = True

    def qkv_points(self, layer):
        qw, kvw = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        return [(self.attn_modules[layer].qkv_proj, split_last("qkv", (qw, kvw, kvw)))]

    def sliding_window(self, layer: int) -> Optional[int]:
        """``config.sliding_window`` on every layer (the model's one mask), or None."""
        return config_window(self.model.config)

    def apply_rope(self, x, cos, sin, n_heads: int):
        return partial_rotate_half_rope(x, cos, sin, n_heads)
