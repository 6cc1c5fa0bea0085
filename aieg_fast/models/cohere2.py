"""Cohere 2 (``Cohere2ForCausalLM``; Command R7B, Command A).

The Cohere layout (:class:`~aieg_fast.models.cohere.CohereAdapter`: interleaved RoPE, the LM
head's output times ``config.logit_scale``, a parallel block; no q/k norm) with **alternating
local and global layers** from ``config.layer_types``:

* ``"sliding_attention"`` layers attend to the last ``config.sliding_window`` positions and apply
  RoPE;
* ``"full_attention"`` layers attend to every earlier position and apply **no** rotary embedding
  (NoPE), although the decoder passes them its ``position_embeddings``.

:meth:`Cohere2Adapter.sliding_window` and :meth:`Cohere2Adapter.rotates` give both per layer, so
the attention methods see the model's masks and Grad-ELLM's λ (rebuilt from the captured q and
k) rotates only where the model does.
"""
from __future__ import annotations

from typing import Optional

from .base import layer_types_window, separate_qkv
from .cohere import CohereAdapter

__all__ = ["Cohere2Adapter"]


class Cohere2Adapter(CohereAdapter):
    architectures = ("Cohere2ForCausalLM",)

    def qkv_points(self, layer):
        return separate_qkv(self.attn_modules[layer])

    def sliding_window(self, layer: int) -> Optional[int]:
        """The window of the layers ``config.layer_types`` marks ``"sliding_attention"``."""
        return layer_types_window(self.model.config, layer)

    def rotates(self, layer: int) -> bool:
        """Only the sliding-window layers apply RoPE (the global ones are NoPE)."""
        return self.model.config.layer_types[layer] == "sliding_attention"
