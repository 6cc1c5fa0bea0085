"""OLMo 2 (``Olmo2ForCausalLM``, ``Olmo2ForSequenceClassification``; also OLMo-2-style models
such as OLMo-2-1B/7B/13B/32B).

LLaMA module layout and RoPE (``model.layers[i].self_attn`` with separate
``q_proj``/``k_proj``/``v_proj``/``o_proj``, ``rotate_half`` RoPE from the decoder's
``position_embeddings``, grouped-query attention in the larger models) with these differences:

* **q/k RMSNorm over the full projection width**: ``q = q_norm(q_proj(x))`` with one RMSNorm over
  all ``heads·d`` query channels (not per head), ``k = k_norm(k_proj(x))`` over all ``kv_heads·d``
  channels, both before the heads are split and before RoPE. q and k are read at the outputs of
  ``q_norm`` and ``k_norm``; v at ``v_proj`` (not normalised).
* **Post-norm blocks** (``x + norm(attn(x))``, ``x + norm(mlp(x))``: the RMSNorms sit after the
  attention and the MLP): nothing to adapt — the attention module's output (``post_o``) and the
  input of ``o_proj`` (``pre_o``) are still the attention output, before the post-attention norm.
* Scale ``d^-1/2`` (the module's ``scaling``); LM head without bias or logit transform.
"""
from __future__ import annotations

from .base import split_last
from .llama import LlamaAdapter

__all__ = ["Olmo2Adapter"]


class Olmo2Adapter(LlamaAdapter):
    architectures = ("Olmo2ForCausalLM", "Olmo2ForSequenceClassification")
    has_rope = True

    def qkv_points(self, layer):
        a = self.attn_modules[layer]
        return [(a.q_norm, split_last("q")), (a.k_norm, split_last("k")), (a.v_proj, split_last("v"))]
