"""Gemma 3 text (``Gemma3ForCausalLM`` on a ``Gemma3TextConfig``, ``model_type="gemma3_text"``;
``Gemma3TextForSequenceClassification``): Gemma 2's layout (embedding scaling handled as in
:mod:`.gemma`, ``query_pre_attn_scalar``, sandwich norms, sliding-window / global layers, an
optional final logit soft-capping read by :class:`~.base.DecoderAdapter` from
``final_logit_softcapping``) with

* **q/k norms**: RMSNorm over each head's ``head_dim`` channels of q and k
  (``q_norm``/``k_norm``, applied to ``[B, heads, L, head_dim]`` after the projections and
  before RoPE). q and k are read at the *outputs of the norms* and brought back to
  ``[B, L, heads·head_dim]``; v is read at ``v_proj``.
* **local and global RoPE bases per layer type** (``rope_parameters[layer_type]``; e.g. 10 k for
  sliding-window layers, 1 M and linear scaling for global ones): the decoder computes one
  (cos, sin) pair per layer type and passes each layer its own, so :meth:`rope_tables` (read
  from the attention module's ``position_embeddings`` argument) is per layer by construction.
* **no attention-logit soft-capping**: the model ignores ``attn_logit_softcapping``
  (``Gemma3Attention`` never passes it on), so :attr:`attn_logit_softcap` is None whatever the
  config says.

Bidirectional configurations (``use_bidirectional_attention=True``, EmbeddingGemma) are refused.
"""
from __future__ import annotations

from .base import merge_heads, split_last
from .gemma2 import Gemma2Adapter

__all__ = ["Gemma3TextAdapter"]


class Gemma3TextAdapter(Gemma2Adapter):
    architectures = ("Gemma3ForCausalLM", "Gemma3TextForSequenceClassification")
    has_rope = True

    def __init__(self, model):
        super().__init__(model)
        self.attn_logit_softcap = None  # Gemma3Attention does not apply it

    def qkv_points(self, layer):
        a = self.attn_modules[layer]
        return [(a.q_norm, merge_heads("q", heads_first=True)), (a.k_norm, merge_heads("k", heads_first=True)),
                (a.v_proj, split_last("v"))]
