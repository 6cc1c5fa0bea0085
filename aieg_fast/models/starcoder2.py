"""StarCoder2 (``Starcoder2ForCausalLM``, ``Starcoder2ForSequenceClassification``; StarCoder2-3B,
7B, 15B).

The Mistral layout (:class:`~aieg_fast.models.mistral.MistralAdapter`): separate q/k/v
projections (with a bias when ``use_bias``, as released), grouped-query attention, ``rotate_half``
RoPE from the decoder's ``position_embeddings``, scale ``d^-1/2`` and **sliding-window attention**
on every layer when ``config.sliding_window`` is set (4096 in the released models). The
differences from Mistral need no adapting: LayerNorm instead of RMSNorm, a GELU MLP
(``c_fc``/``c_proj``), dropout after the output projection (off in eval mode), and an LM head
tied to the embeddings in the smaller models, without bias or logit transform.
"""
from __future__ import annotations

from .mistral import MistralAdapter

__all__ = ["Starcoder2Adapter"]


class Starcoder2Adapter(MistralAdapter):
    architectures = ("Starcoder2ForCausalLM", "Starcoder2ForSequenceClassification")
