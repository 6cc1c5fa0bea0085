"""SmolLM3 (``SmolLM3ForCausalLM``, ``SmolLM3ForSequenceClassification``; SmolLM3-3B).

The LLaMA layout (separate q/k/v projections, grouped-query attention, ``rotate_half`` RoPE from
the decoder's ``position_embeddings``, scale ``d^-1/2``, no logit transform) with two differences:

* **NoPE layers**: ``config.no_rope_layers[i]`` is 0 for the layers that apply no rotary
  embedding at all (every fourth layer in the released model), 1 for the others. The decoder
  still passes every layer its ``position_embeddings``; :meth:`SmolLM3Adapter.rotates` says which
  layers use them, so Grad-ELLM's λ (rebuilt from the captured q and k) rotates only where the
  model does.
* Optional **sliding windows** on the layers ``config.layer_types`` marks
  ``"sliding_attention"`` (with ``use_sliding_window``; off in the released model): the model's
  mask follows ``layer_types`` and ``config.sliding_window``, and so does
  :meth:`SmolLM3Adapter.sliding_window` (:func:`~aieg_fast.models.base.layer_types_window`).
"""
from __future__ import annotations

from typing import Optional

from .base import layer_types_window
from .llama import LlamaAdapter

__all__ = ["SmolLM3Adapter"]


class SmolLM3Adapter(LlamaAdapter):
    architectures = ("SmolLM3ForCausalLM", "SmolLM3ForSequenceClassification")

    def rotates(self, layer: int) -> bool:
        """False for a NoPE layer (``config.no_rope_layers[layer]`` = 0)."""
        return bool(self.attn_modules[layer].use_rope)

    def sliding_window(self, layer: int) -> Optional[int]:
        """The window of the layers ``config.layer_types`` marks ``"sliding_attention"``."""
        return layer_types_window(self.model.config, layer)
