"""GPT-BigCode (``GPTBigCodeForCausalLM``, ``GPTBigCodeForSequenceClassification``; StarCoder,
StarCoderBase, SantaCoder, WizardCoder).

The GPT-2 layout (:class:`~aieg_fast.models.gpt2.GPT2Adapter`: ``transformer.h[i].attn``, learned
absolute positions added inside the model, fused q/k/v projection ``c_attn``, output projection
``c_proj``, no RoPE) with ``nn.Linear`` projections instead of GPT-2's ``Conv1D`` and two
layouts of ``c_attn``, each read as the model splits it:

* **multi-query** (``multi_query``, the released models): one key/value head shared by all query
  heads; ``c_attn``'s output is ``[q (hidden) | k (head_dim) | v (head_dim)]``;
* multi-head (``multi_query=False``): ``c_attn``'s output is laid out per head as
  ``[q_h k_h v_h]`` (as GPT-NeoX's, :func:`~aieg_fast.models.gpt_neox.split_interleaved_qkv`).

The scale on q·k is ``head_dim^-1/2``, or 1 with ``scale_attn_weights=False`` (the module's
``scaling``). LM head tied to the embeddings, without bias or logit transform. The model's
``attention_softmax_in_fp32`` settings only matter in half precision.
"""
from __future__ import annotations

from .base import split_last
from .gpt2 import GPT2Adapter
from .gpt_neox import split_interleaved_qkv

__all__ = ["GPTBigCodeAdapter"]


class GPTBigCodeAdapter(GPT2Adapter):
    architectures = ("GPTBigCodeForCausalLM", "GPTBigCodeForSequenceClassification")

    def qkv_points(self, layer):
        a = self.attn_modules[layer]
        if a.multi_query:
            return [(a.c_attn, split_last("qkv", (a.embed_dim, a.kv_dim, a.kv_dim)))]
        return [(a.c_attn, split_interleaved_qkv(self.n_heads, self.head_dim))]

    def config_sizes(self, cfg):
        return cfg.n_head, 1 if cfg.multi_query else cfg.n_head, cfg.n_embd, cfg.n_positions
