"""OPT (``OPTForCausalLM``, ``OPTForSequenceClassification``; facebook/opt-125m … opt-66b, Galactica).

What is special and how the adapter handles it:

* **Learned absolute positions with an offset of 2** (row ``position + 2`` of
  ``embed_positions``), added inside the decoder. The decoder takes ``inputs_embeds`` (the
  token embeddings, ``embed_tokens``) and ``position_ids`` (0-based; the offset is added by the
  model) — the positions aieg_fast passes (0… over the real tokens of each row, as the model
  derives them from the attention mask when none are given). No rotary: q/k carry no position.
* **Pre- or post-layer norm** (``do_layer_norm_before``: True for every size but opt-350m, whose
  blocks normalise after the residual and which has no final layer norm) and, in opt-350m,
  **projected word embeddings** (``word_embed_proj_dim`` ≠ ``hidden_size``: ``project_in``
  after the token embeddings, ``project_out`` before the LM head). All of it happens inside the
  decoder stack ``model.model.decoder``, whose ``last_hidden_state`` is what the head reads
  (after ``project_out``), so F and the attention points need nothing more.
* **q scaled after q_proj**: the model computes ``q = q_proj(x)·head_dim^-0.5`` and then
  attention with scale 1. The adapter reads q at ``q_proj``'s output (before that
  multiplication) and reports :meth:`OPTAdapter.attention_scaling` = head_dim^-0.5, so
  softmax(q·k·scaling) is the model's attention (tested) and the captured q is the raw
  projection, as for every other family (Grad-ELLM's ``softmax`` λ divides raw q·k by √D).
* Separate q/k/v projections with bias, output projection ``out_proj``, no GQA, LM head
  without bias (tied to the token embeddings), no logit soft-capping.
"""
from __future__ import annotations

from .base import DecoderAdapter, separate_qkv

__all__ = ["OPTAdapter"]


class OPTAdapter(DecoderAdapter):
    architectures = ("OPTForCausalLM", "OPTForSequenceClassification")
    has_rope = False

    def decoder(self, model):
        return model.model.decoder

    def blocks(self, base):
        return base.layers

    def attention(self, block):
        return block.self_attn

    def qkv_points(self, layer):
        return separate_qkv(self.attn_modules[layer])

    def o_proj(self, layer):
        return self.attn_modules[layer].out_proj

    def config_sizes(self, cfg):
        return cfg.num_attention_heads, cfg.num_attention_heads, cfg.hidden_size, cfg.max_position_embeddings

    def attention_scaling(self, layer):
        # OPT multiplies q_proj's output by this before q·k (and calls attention with scale 1)
        return float(self.attn_modules[layer].scaling)
