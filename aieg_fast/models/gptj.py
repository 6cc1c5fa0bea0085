"""GPT-J (``GPTJForCausalLM``, ``GPTJForSequenceClassification``; GPT-J-6B and its fine-tunes).

What is special and how the adapter handles it:

* **Interleaved ("rotate every two") partial rotary.** GPT-J rotates only the first
  ``config.rotary_dim`` channels of every q/k head (64 of 256 in GPT-J-6B) and pairs channels
  (0,1), (2,3), … — not LLaMA's ``rotate_half`` halves. The model passes its attention modules
  ``position_embeddings = (sin, cos)`` (note the order), each [B, L, rotary_dim/2];
  :meth:`GPTJAdapter.rope_tables` returns them as the ``(cos, sin)`` [B, L, head_dim] that
  :class:`~aieg_fast.models.base.DecoderAdapter` promises: each frequency repeated twice
  (``repeat_interleave``, as the model does) and the pass-through channels padded with cos = 1,
  sin = 0, so :func:`rotate_every_two_rope` over the whole head rotates the first ``rotary_dim``
  channels exactly as the model and leaves the others unchanged (x·1 + r·0 = x, bit for bit).
* **Parallel attention and MLP** (both read ``ln_1``'s output; the block adds both to the
  residual). Nothing to do: the attention output is the attention module's ``output[0]``
  (``post_o``) and its ``out_proj`` input (``pre_o``), as in any family.
* Separate q/k/v projections without bias (read at ``q_proj``/``k_proj``/``v_proj``, before
  the rotary), no GQA, scale head_dim^-0.5 (the module's ``scaling``), LM head with a bias
  (applied by :meth:`~aieg_fast.models.base.DecoderAdapter.target_scores`), no logit soft-capping.
"""
from __future__ import annotations

import torch

from .base import DecoderAdapter, separate_qkv

__all__ = ["GPTJAdapter", "rotate_every_two_rope"]


def rotate_every_two_rope(x, cos, sin, n_heads: int):
    """RoPE as GPT-J applies it (interleaved pairs (0,1), (2,3), …) to x: Tensor[B, L, n_heads·d].

    ``cos``/``sin``: Tensor[B, L, d] with each frequency repeated twice in place (c0 c0 c1 c1 …);
    channels that are not rotated carry cos = 1, sin = 0.
    """
    B, L, D = x.shape
    d = D // n_heads
    xh = x.reshape(B, L, n_heads, d)
    c, s = cos.unsqueeze(2).to(x.dtype), sin.unsqueeze(2).to(x.dtype)
    rot = torch.stack((-xh[..., 1::2], xh[..., ::2]), dim=-1).flatten(-2)
    return (xh * c + rot * s).reshape(B, L, D)


class GPTJAdapter(DecoderAdapter):
    architectures = ("GPTJForCausalLM", "GPTJForSequenceClassification")
    has_rope = True

    def decoder(self, model):
        return model.transformer

    def blocks(self, base):
        return base.h

    def attention(self, block):
        return block.attn

    def qkv_points(self, layer):
        return separate_qkv(self.attn_modules[layer])

    def o_proj(self, layer):
        return self.attn_modules[layer].out_proj

    def config_sizes(self, cfg):
        return cfg.n_head, cfg.n_head, cfg.n_embd, cfg.n_positions

    def rope_tables(self, args, kwargs):
        pe = kwargs.get("position_embeddings")
        if pe is None and len(args) > 1 and isinstance(args[1], (tuple, list)):
            pe = args[1]
        if pe is None:
            # transformers before 5.16: the attention module gathers its tables itself from its
            # ``embed_positions`` buffer at ``position_ids`` ([sin | cos], each rotary_dim/2 wide)
            pos = kwargs.get("position_ids", args[3] if len(args) > 3 else None)
            if pos is None:
                raise RuntimeError("the attention module received neither position_embeddings nor position_ids (rotary tables)")
            table = self.attn_modules[0].embed_positions.to(pos.device)
            sincos = table[pos]
            pe = sincos.split(sincos.shape[-1] // 2, dim=-1)
        sin, cos = pe  # GPT-J's order; each [B, L, rotary_dim/2]
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
        rest = self.head_dim - cos.shape[-1]  # channels GPT-J passes through unrotated
        if rest > 0:
            cos = torch.cat((cos, cos.new_ones(*cos.shape[:-1], rest)), -1)
            sin = torch.cat((sin, sin.new_zeros(*sin.shape[:-1], rest)), -1)
        return cos, sin

    def apply_rope(self, x, cos, sin, n_heads: int):
        return rotate_every_two_rope(x, cos, sin, n_heads)
