"""Cohere (``CohereForCausalLM``; Command-R, Command-R+, Aya 23 / Aya Expanse).

The LLaMA module layout (separate q/k/v projections, bias when ``attention_bias``, grouped-query
attention, scale ``d^-1/2``) with these differences, each handled here:

* **Interleaved RoPE**: the decoder's ``position_embeddings`` repeat each frequency twice in place
  (c0 c0 c1 c1 …) and the model rotates channel pairs (0,1), (2,3), … — GPT-J's convention over
  the whole head (:func:`~aieg_fast.models.gptj.rotate_every_two_rope`), not LLaMA's halves.
* Optional **q/k LayerNorm** (``use_qk_norm``, Command-R+): one bias-free LayerNorm per head
  (weights [heads, d]) on the ``[B, L, heads, d]`` q and k before RoPE; q and k are then read at
  ``q_norm`` / ``k_norm``, v at ``v_proj``.
* **Logit scale**: ``...ForCausalLM`` multiplies the LM head's output by ``config.logit_scale``
  (0.0625 in Command-R); :meth:`CohereAdapter.logit_transform` does the same, so F, the
  log-probabilities and the greedy continuation are the model's own. The head is tied to the
  embeddings, without bias.
* A parallel block (attention and MLP read one LayerNorm's output): nothing to adapt.

No sequence-classification class exists for Cohere in ``transformers``.
"""
from __future__ import annotations

from .base import merge_heads, separate_qkv, split_last
from .gptj import rotate_every_two_rope
from .llama import LlamaAdapter

__all__ = ["CohereAdapter"]


class CohereAdapter(LlamaAdapter):
    architectures = ("CohereForCausalLM",)

    def qkv_points(self, layer):
        a = self.attn_modules[layer]
        if not a.use_qk_norm:
            return separate_qkv(a)
        return [(a.q_norm, merge_heads("q")), (a.k_norm, merge_heads("k")), (a.v_proj, split_last("v"))]

    def apply_rope(self, x, cos, sin, n_heads: int):
        return rotate_every_two_rope(x, cos, sin, n_heads)

    def logit_transform(self, z):
        """The LM head's output times ``config.logit_scale``, as the model's logits."""
        return z * float(self.model.config.logit_scale)
