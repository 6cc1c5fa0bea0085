"""Gemma (``GemmaForCausalLM``, ``GemmaForSequenceClassification``): the LLaMA module layout
(separate q/k/v projections, multi-query / grouped-query attention, ``rotate_half`` RoPE from the
``position_embeddings`` the decoder passes to every attention module), a GeGLU MLP
(``gelu_pytorch_tanh``), RMSNorm scaling by ``1 + weight``, tied input / output embeddings, and
**token embeddings multiplied by √hidden_size inside the model**.

The embedding scale is what needs care. Recent ``transformers`` apply it inside the embedding
module (``GemmaTextScaledWordEmbedding``: ``embed_tokens(ids) = W[ids] · embed_scale``), so the
decoder does *not* scale ``inputs_embeds``; older releases kept a plain ``nn.Embedding`` and
scaled ``inputs_embeds`` in the decoder's forward. The package reads E (``embeddings(ids)``) and
the baseline E′ (a row of ``embeddings.weight``, the reference token) in one space, so the adapter
works in the space of the embedding table W in both cases:

* ``embeddings`` looks rows of W up unscaled (:class:`UnscaledEmbedding`, ``weight`` is the
  model's own parameter, nothing is copied), so E and E′ are both rows of W;
* :meth:`GemmaAdapter.decoder_inputs` multiplies the embeddings by the module's ``embed_scale``
  (in the module's dtype rule, ``W[ids] · embed_scale.to(dtype)``) before the decoder when the
  embedding module carries the scale; with the older layout the decoder scales them itself.

A user's Tensor ``baseline`` (and ``baseline_noise`` σ) is in the space of
``model.get_input_embeddings()(ids)``, as for every family; :attr:`GemmaAdapter.inputs_embeds_scale`
is the factor :mod:`aieg_fast.core.baselines` divides it by to reach the table's space.

So F(E) is exactly the model's output (bit for bit on the real input; to rounding with a hook on
the embedding module, whose output is divided by the scale), and since the scale is a
constant linear map, path methods with a straight path (IG, IDG, AIEG) and input × gradient give
the same scores as in the scaled space with the correspondingly scaled baseline; saliency scales
uniformly by √hidden_size.

Bidirectional configurations (``use_bidirectional_attention``, embedding models) are refused:
every method here assumes causal attention.
"""
from __future__ import annotations

import torch
from torch import nn

from .base import is_hooked, materialized
from .llama import LlamaAdapter

__all__ = ["GemmaAdapter", "UnscaledEmbedding"]


class UnscaledEmbedding(nn.Module):
    """Rows of a (scaled) embedding module's table, without the scale: ``W[ids]``.

    ``weight`` is the wrapped module's parameter itself (same tensor, no copy); ``embed_scale``
    the wrapped module's scale buffer (or None). Not part of the model; the model's module is
    called when a hook is on it (:meth:`forward`).
    """

    def __init__(self, inner: nn.Embedding):
        super().__init__()
        self.inner = inner

    @property
    def weight(self) -> nn.Parameter:
        return self.inner.weight

    @property
    def view_of(self) -> nn.Module:
        """The model's module (:func:`~.base.materialized` and :func:`~.base.execution_device`
        read its accelerate hook: an embedding offloaded by ``device_map``)."""
        return self.inner

    @property
    def embed_scale(self):
        return getattr(self.inner, "embed_scale", None)

    def forward(self, input_ids):
        """``W[ids]``: Tensor[..., d] for ids [...]. With a hook on the model's module
        (:func:`~.base.is_hooked`: a steering vector added to its output) the module is called, as
        the model calls it, and its output divided by ``embed_scale`` (the decoder input
        multiplies it back: the hooked output, to rounding)."""
        if is_hooked(self.inner):
            out = self.inner(input_ids)
            return out / self.embed_scale.to(device=out.device, dtype=out.dtype)
        with materialized(self.inner):  # an offloaded embedding (device_map) holds its weights here only
            return nn.Embedding.forward(self.inner, input_ids)


class GemmaAdapter(LlamaAdapter):
    architectures = ("GemmaForCausalLM", "GemmaForSequenceClassification")
    has_rope = True

    @classmethod
    def check_config(cls, config) -> None:
        if getattr(config, "use_bidirectional_attention", False):
            raise ValueError(f"model_type {config.model_type!r} with use_bidirectional_attention=True is not causal; "
                             "attributions need a causal decoder")

    def __init__(self, model):
        super().__init__(model)
        #: whether the adapter scales inputs_embeds (the embedding module carries the scale);
        #: False: the decoder scales them itself (older transformers)
        self.scales_inputs = getattr(model.get_input_embeddings(), "embed_scale", None) is not None
        self._unscaled = None

    @property
    def embeddings(self) -> nn.Module:
        """The token embedding module, unscaled (:class:`UnscaledEmbedding`) when it carries the
        scale; read from the model on each use."""
        inner = self.model.get_input_embeddings()
        if not self.scales_inputs:
            return inner
        if self._unscaled is None or self._unscaled.inner is not inner:
            self._unscaled = UnscaledEmbedding(inner)
        return self._unscaled

    @property
    def inputs_embeds_scale(self) -> float:
        """The embedding module's ``embed_scale`` (√hidden_size, in the weights' dtype as the model
        applies it) when the module carries it: ``get_input_embeddings()(ids)`` = W[ids] · scale;
        1.0 with the older layout (the module looks W up, the decoder scales)."""
        if not self.scales_inputs:
            return 1.0
        emb = self.embeddings
        return float(emb.embed_scale.to(emb.weight.dtype))

    @property
    def token_embeddings_scale(self) -> float:
        """√hidden_size in the weights' dtype, as the model applies it: the module's
        ``embed_scale``, or with the older layout the decoder's own ``hidden_size ** 0.5``."""
        if self.scales_inputs:
            return self.inputs_embeds_scale
        w = self.embeddings.weight
        return float(torch.tensor(self.hidden_size ** 0.5, dtype=w.dtype))

    def decoder_inputs(self, inputs_embeds):
        """E = rows of W times the embedding scale when the embedding module, not the decoder,
        carries it (else E unchanged: the decoder scales it)."""
        if self.scales_inputs:
            s = self.embeddings.embed_scale  # read per call: the buffer follows .to(device/dtype)
            inputs_embeds = inputs_embeds * s.to(device=inputs_embeds.device, dtype=inputs_embeds.dtype)
        return inputs_embeds
