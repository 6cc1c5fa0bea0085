"""GPT-NeoX / Pythia (``GPTNeoXForCausalLM``, ``GPTNeoXForSequenceClassification``).

What is special and how the adapter handles it:

* **Fused, per-head interleaved q/k/v.** One projection ``attention.query_key_value`` outputs
  ``3·hidden``; the model views it as ``[B, L, H, 3·d]`` and chunks the last dimension, so the
  layout is ``[q_0 k_0 v_0 | q_1 k_1 v_1 | …]`` (per head), *not* ``[Q | K | V]`` as GPT-2's
  ``c_attn``. The q/k/v reader (:func:`split_interleaved_qkv`) splits it exactly so. No
  grouped-query attention (``n_kv_heads = n_heads``).
* **Partial rotary** (``rotary_pct`` → ``rope_parameters["partial_rotary_factor"]``, 0.25 in
  Pythia): only the first ``rotary_ndims ≈ d·pct`` channels of every head are rotated
  (``rotate_half`` convention within those channels), the rest pass through. The model's
  ``position_embeddings`` (cos, sin) cover only the rotated channels; :meth:`rope_tables`
  extends them to the whole head (cos = 1, sin = 0 on the pass-through channels, so the tables
  have the documented ``[B, L, head_dim]`` shape) and :func:`partial_rotate_half_rope` rotates
  the first ``rotary_ndims`` channels of each head exactly as ``apply_rotary_pos_emb`` does.
* **Parallel residual** (``use_parallel_residual``, Pythia): ``x + attn(ln1(x)) + mlp(ln2(x))``.
  Nothing to adapt: attributions read the attention module (its output / the input of its
  output projection ``dense``) and the decoder's final hidden state, which are the same either way.
* Decoder ``gpt_neox`` (``embed_in``, ``layers``, ``final_layer_norm``); attention
  ``layers[i].attention`` (returns ``(output, probabilities)``), output projection ``dense``;
  scale ``d^-1/2`` (the module's ``scaling``). LM head ``lm_head`` (untied in Pythia), no bias,
  no logit transform.
"""
from __future__ import annotations

from .base import DecoderAdapter
from .llama import full_head_rope_tables, partial_rotate_half_rope

__all__ = ["GPTNeoXAdapter", "split_interleaved_qkv"]


def split_interleaved_qkv(n_heads: int, head_dim: int):
    """A q/k/v reader for a fused projection laid out per head as ``[q_h k_h v_h]`` (GPT-NeoX):
    output Tensor[B, L, H·3·d] → q, k, v Tensor[B, L, H·d] each."""

    def read(out):
        x = out.reshape(*out.shape[:-1], n_heads, 3, head_dim)
        return {name: x[..., i, :].reshape(*out.shape[:-1], n_heads * head_dim) for i, name in enumerate("qkv")}

    return read


class GPTNeoXAdapter(DecoderAdapter):
    architectures = ("GPTNeoXForCausalLM", "GPTNeoXForSequenceClassification")
    has_rope = True

    def __init__(self, model):
        super().__init__(model)
        self.head_dim = int(self.attn_modules[0].head_size)  # the model's hidden // heads
        # the model rotates as many channels as its (cos, sin) tables have (``apply_rotary_pos_emb``
        # reads ``cos.shape[-1]``): 2·len(inv_freq), which is ``rotary_ndims`` rounded up to even
        self.rotary_ndims = 2 * int(self.base.rotary_emb.inv_freq.numel())

    def decoder(self, model):
        return model.gpt_neox

    def blocks(self, base):
        return base.layers

    def attention(self, block):
        return block.attention

    def qkv_points(self, layer):
        return [(self.attn_modules[layer].query_key_value, split_interleaved_qkv(self.n_heads, self.head_dim))]

    def o_proj(self, layer):
        return self.attn_modules[layer].dense

    def config_sizes(self, cfg):
        return cfg.num_attention_heads, cfg.num_attention_heads, cfg.hidden_size, cfg.max_position_embeddings

    def rope_tables(self, args, kwargs):
        # GPTNeoXAttention.forward(hidden_states, attention_mask, layer_past, position_embeddings, ...)
        pe = kwargs.get("position_embeddings")
        if pe is None and len(args) > 3:
            pe = args[3]
        if pe is None:
            raise RuntimeError("the attention module received no position_embeddings (RoPE tables)")
        return full_head_rope_tables(pe[0], pe[1], self.head_dim)

    def apply_rope(self, x, cos, sin, n_heads: int):
        return partial_rotate_half_rope(x, cos, sin, n_heads, self.rotary_ndims)
