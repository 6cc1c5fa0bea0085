"""LLaMA family (``LlamaForCausalLM``, ``LlamaForSequenceClassification``; SmolLM2 included):
separate q/k/v projections, grouped-query attention, RoPE applied inside attention from the
``position_embeddings`` (cos, sin) the decoder passes to every attention module."""
from __future__ import annotations

from typing import Optional

import torch

from .base import DecoderAdapter, separate_qkv

__all__ = ["LlamaAdapter", "rotate_half_rope", "partial_rotate_half_rope", "full_head_rope_tables"]


def rotate_half_rope(x, cos, sin, n_heads: int):
    """RoPE as LLaMA applies it (``rotate_half`` convention) to x: Tensor[B, L, n_heads·d].

    ``cos``/``sin``: Tensor[B, L, d], the layer's ``position_embeddings``.
    """
    B, L, D = x.shape
    d = D // n_heads
    xh = x.reshape(B, L, n_heads, d)
    c, s = cos.unsqueeze(2).to(x.dtype), sin.unsqueeze(2).to(x.dtype)
    rot = torch.cat((-xh[..., d // 2 :], xh[..., : d // 2]), dim=-1)
    return (xh * c + rot * s).reshape(B, L, D)


def full_head_rope_tables(cos, sin, head_dim: int):
    """Extend partial-rotary (cos, sin) Tensor[B, L, r] to the whole head Tensor[B, L, head_dim]:
    cos = 1 and sin = 0 on the pass-through channels r…head_dim-1."""
    r = cos.shape[-1]
    if r == head_dim:
        return cos, sin
    pad = cos.shape[:-1] + (head_dim - r,)
    return torch.cat((cos, cos.new_ones(pad)), -1), torch.cat((sin, sin.new_zeros(pad)), -1)


def partial_rotate_half_rope(x, cos, sin, n_heads: int, rotary_ndims: Optional[int] = None):
    """RoPE on the first ``rotary_ndims`` channels of every head (``rotate_half`` convention within
    them), the rest unchanged — GPT-NeoX / StableLM / Phi-3 ``apply_rotary_pos_emb``.

    Args:
        x: Tensor[B, L, n_heads·d]. cos, sin: Tensor[B, L, rotary_ndims] (the model's tables) or
            Tensor[B, L, d] (the full-head tables of :func:`full_head_rope_tables`).
        rotary_ndims: rotated channels per head (default ``cos.shape[-1]``).
    """
    B, L, D = x.shape
    d = D // n_heads
    r = cos.shape[-1] if rotary_ndims is None else rotary_ndims
    if r == d:
        return rotate_half_rope(x, cos, sin, n_heads)
    xh = x.reshape(B, L, n_heads, d)
    rot = rotate_half_rope(xh[..., :r].reshape(B, L, n_heads * r), cos[..., :r], sin[..., :r], n_heads)
    return torch.cat((rot.reshape(B, L, n_heads, r), xh[..., r:]), -1).reshape(B, L, D)


class LlamaAdapter(DecoderAdapter):
    architectures = ("LlamaForCausalLM", "LlamaForSequenceClassification")
    has_rope = True

    def decoder(self, model):
        return model.model

    def blocks(self, base):
        return base.layers

    def attention(self, block):
        return block.self_attn

    def qkv_points(self, layer):
        return separate_qkv(self.attn_modules[layer])

    def o_proj(self, layer):
        return self.attn_modules[layer].o_proj

    def config_sizes(self, cfg):
        n_kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        return cfg.num_attention_heads, n_kv, cfg.hidden_size, cfg.max_position_embeddings

    def rope_tables(self, args, kwargs):
        pe = kwargs.get("position_embeddings")
        if pe is None and len(args) > 1:
            pe = args[1]
        if pe is None:
            raise RuntimeError("the attention module received no position_embeddings (RoPE tables)")
        return pe[0], pe[1]

    def apply_rope(self, x, cos, sin, n_heads: int):
        return rotate_half_rope(x, cos, sin, n_heads)
