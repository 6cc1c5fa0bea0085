"""StableLM (``StableLmForCausalLM``, ``StableLmForSequenceClassification``; StableLM-3B-4E1T,
StableLM 2).

LLaMA module layout (``model.layers[i].self_attn`` with ``q_proj``/``k_proj``/``v_proj``/``o_proj``,
grouped-query attention) with these differences, each handled here:

* **Partial rotary** (``rope_parameters["partial_rotary_factor"]``, 0.25 in the released models):
  only the first ``rotary_ndims = int(d·factor)`` channels of every head are rotated
  (``rotate_half`` within those channels); the ``position_embeddings`` (cos, sin) the decoder
  passes cover only them. As for GPT-NeoX, :meth:`rope_tables` extends the tables to the whole
  head (identity on the pass-through channels) and :meth:`apply_rope` rotates the first
  ``rotary_ndims`` channels of each head (:func:`~.llama.partial_rotate_half_rope`).
* **Optional per-head q/k LayerNorm** (``qk_layernorm``, StableLM 2 12B): after the projections
  the model views q and k as ``[B, heads, L, d]`` and applies one LayerNorm *per head*
  (``q_layernorm`` over the query heads, ``k_layernorm`` over the KV heads) before RoPE. With it,
  q and k are read at the outputs of ``q_layernorm``/``k_layernorm`` (transposed back to
  ``[B, L, heads·d]``); without it, at ``q_proj``/``k_proj``. v is always read at ``v_proj``.
* **Optional parallel residual** (``use_parallel_residual``): ``x + attn(ln(x)) + mlp(ln(x))``.
  Nothing to adapt (attributions read the attention module and the final hidden state).
* ``StableLmAttention.forward`` takes ``position_embeddings`` as its 7th argument (the decoder
  passes it by keyword); :meth:`rope_tables` accepts either. Scale ``d^-1/2`` (the module's
  ``scaling``); LM head without bias or logit transform.
"""
from __future__ import annotations

from .base import merge_heads, split_last
from .llama import LlamaAdapter, full_head_rope_tables, partial_rotate_half_rope

__all__ = ["StableLmAdapter"]


class StableLmAdapter(LlamaAdapter):
    architectures = ("StableLmForCausalLM", "StableLmForSequenceClassification")
    has_rope = True

    def __init__(self, model):
        super().__init__(model)
        self.head_dim = int(self.attn_modules[0].head_dim)  # the model's hidden // heads, whatever the config says
        self.rotary_ndims = int(self.attn_modules[0].rotary_ndims)
        self.qk_layernorm = bool(self.attn_modules[0].qk_layernorm)

    def qkv_points(self, layer):
        a = self.attn_modules[layer]
        if a.qk_layernorm:
            qk = [(a.q_layernorm, merge_heads("q", heads_first=True)), (a.k_layernorm, merge_heads("k", heads_first=True))]
        else:
            qk = [(a.q_proj, split_last("q")), (a.k_proj, split_last("k"))]
        return qk + [(a.v_proj, split_last("v"))]

    def rope_tables(self, args, kwargs):
        # StableLmAttention.forward(hidden_states, attention_mask, position_ids, cache,
        #                           output_attentions, use_cache, position_embeddings, ...)
        pe = kwargs.get("position_embeddings")
        if pe is None and len(args) > 6:
            pe = args[6]
        if pe is None:
            raise RuntimeError("the attention module received no position_embeddings (RoPE tables)")
        return full_head_rope_tables(pe[0], pe[1], self.head_dim)

    def apply_rope(self, x, cos, sin, n_heads: int):
        return partial_rotate_half_rope(x, cos, sin, n_heads, self.rotary_ndims)
