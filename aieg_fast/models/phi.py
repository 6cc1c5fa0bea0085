"""Phi (``PhiForCausalLM``, ``PhiForSequenceClassification``; Phi-1, Phi-1.5, Phi-2).

The StableLM layout (:class:`~aieg_fast.models.stablelm.StableLmAdapter`): separate q/k/v
projections, here with a bias, **partial rotary** (``partial_rotary_factor``, 0.4 in Phi-2: the
first 32 of 80 channels of every head, ``rotate_half`` within them; the decoder's
``position_embeddings`` cover only those channels and are extended to the whole head), an
optional **per-head q/k LayerNorm** (``qk_layernorm``: one LayerNorm over each head's d channels
on the ``[B, heads, L, d]`` q and k before RoPE; q and k are then read at its outputs) and a
**parallel block** (attention and MLP both read one LayerNorm's output: nothing to adapt). What
differs from StableLM:

* the output projection is ``dense`` (not ``o_proj``), with a bias;
* ``position_embeddings`` is the attention module's 2nd argument, as in LLaMA;
* the LM head has a bias (:meth:`~aieg_fast.models.base.DecoderAdapter.target_scores` adds the
  target's entry), after the decoder's ``final_layernorm``; no logit transform. Scale
  ``d^-1/2`` (the module's ``scaling``).
"""
from __future__ import annotations

from .llama import LlamaAdapter, full_head_rope_tables
from .stablelm import StableLmAdapter

__all__ = ["PhiAdapter"]


class PhiAdapter(StableLmAdapter):
    architectures = ("PhiForCausalLM", "PhiForSequenceClassification")

    def o_proj(self, layer):
        return self.attn_modules[layer].dense

    def rope_tables(self, args, kwargs):
        cos, sin = LlamaAdapter.rope_tables(self, args, kwargs)  # the 2nd argument, as in LLaMA
        return full_head_rope_tables(cos, sin, self.head_dim)
