"""Granite (``GraniteForCausalLM``; IBM Granite 3.x dense models).

The LLaMA layout (separate q/k/v projections, bias when ``attention_bias``, grouped-query
attention, ``rotate_half`` RoPE from the decoder's ``position_embeddings``) with four scalar
multipliers from the config, each where the model applies it:

* ``embedding_multiplier``: the decoder multiplies ``inputs_embeds`` by it before the first
  block (given ``inputs_embeds`` too), so the package's embeddings are the table's rows, as
  Hugging Face's ``inputs_embeds``, and the decoder scales them itself;
  :attr:`GraniteAdapter.token_embeddings_scale` is the multiplier (HETA's curvature is given in
  the space the blocks see, as for Gemma).
* ``attention_multiplier``: the factor on q·k before the softmax, instead of ``d^-1/2`` (the
  module's ``scaling``, which :meth:`~aieg_fast.models.base.DecoderAdapter.attention_scaling`
  reads).
* ``residual_multiplier``: scales each block's attention and MLP outputs before the residual
  add. Nothing to adapt: the attention output the methods read is the module's, before it.
* ``logits_scaling``: ``...ForCausalLM`` divides the LM head's output by it;
  :meth:`GraniteAdapter.logit_transform` does the same, so F, the log-probabilities and the
  greedy continuation are the model's own.

No sequence-classification class exists for Granite in ``transformers``.
"""
from __future__ import annotations

from .llama import LlamaAdapter

__all__ = ["GraniteAdapter"]


class GraniteAdapter(LlamaAdapter):
    architectures = ("GraniteForCausalLM",)

    @property
    def token_embeddings_scale(self) -> float:
        """``config.embedding_multiplier``: the decoder's factor on the token embeddings."""
        return float(self.model.config.embedding_multiplier)

    def logit_transform(self, z):
        """The LM head's output divided by ``config.logits_scaling``, as the model's logits."""
        return z / float(self.model.config.logits_scaling)
