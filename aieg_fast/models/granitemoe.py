"""Granite-MoE (``GraniteMoeForCausalLM``; Granite 3.0 1B-A400M, 3B-A800M): the Granite layout
and multipliers (:class:`~aieg_fast.models.granite.GraniteAdapter`: ``embedding_multiplier``,
``attention_multiplier``, ``residual_multiplier``, ``logits_scaling``) with a top-k mixture of
experts in each MLP (``num_local_experts``, ``num_experts_per_tok``). Nothing else to adapt: the
experts sit outside attention; IG's completeness error keeps the jumps of F where the routing
switches (:func:`~aieg_fast.models.base.routes_experts`)."""
from __future__ import annotations

from .granite import GraniteAdapter

__all__ = ["GraniteMoeAdapter"]


class GraniteMoeAdapter(GraniteAdapter):
    architectures = ("GraniteMoeForCausalLM",)
