"""OLMo 3 (``Olmo3ForCausalLM``, ``Olmo3ForSequenceClassification``; Olmo-3-7B / 32B).

The OLMo 2 layout (:class:`~aieg_fast.models.olmo2.Olmo2Adapter`: q/k RMSNorm over the full
projection width before RoPE, read at ``q_norm`` / ``k_norm``; post-norm blocks) with
**per-layer sliding windows**: the layers ``config.layer_types`` marks ``"sliding_attention"``
(three of every four in the released models) attend to the last ``config.sliding_window``
positions, the others are full causal. Handled per layer as for Qwen2
(:func:`~aieg_fast.models.base.layer_types_window`): methods reading the model's attention see
the window it applies; Grad-ELLM restricts λ of a windowed layer to the keys its query sees.
"""
from __future__ import annotations

from typing import Optional

from .base import layer_types_window
from .olmo2 import Olmo2Adapter

__all__ = ["Olmo3Adapter"]


class Olmo3Adapter(Olmo2Adapter):
    architectures = ("Olmo3ForCausalLM", "Olmo3ForSequenceClassification")

    def sliding_window(self, layer: int) -> Optional[int]:
        """The window of the layers ``config.layer_types`` marks ``"sliding_attention"``."""
        return layer_types_window(self.model.config, layer)
