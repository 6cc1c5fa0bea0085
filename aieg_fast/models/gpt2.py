"""GPT-2 (``GPT2LMHeadModel``, ``GPT2ForSequenceClassification``): learned absolute positions
added inside the model, fused q/k/v projection ``c_attn``, output projection ``c_proj``."""
from __future__ import annotations

from .base import DecoderAdapter, split_last

__all__ = ["GPT2Adapter"]


class GPT2Adapter(DecoderAdapter):
    architectures = ("GPT2LMHeadModel", "GPT2ForSequenceClassification")
    has_rope = False

    def decoder(self, model):
        return model.transformer

    def blocks(self, base):
        return base.h

    def attention(self, block):
        return block.attn

    def qkv_points(self, layer):
        D = self.hidden_size
        return [(self.attn_modules[layer].c_attn, split_last("qkv", (D, D, D)))]

    def o_proj(self, layer):
        return self.attn_modules[layer].c_proj

    def config_sizes(self, cfg):
        return cfg.n_head, cfg.n_head, cfg.n_embd, cfg.n_positions
