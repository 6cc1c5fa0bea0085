"""Gemma 2 (``Gemma2ForCausalLM``, ``Gemma2ForSequenceClassification``): Gemma's layout and
embedding scaling (see :mod:`.gemma`; handled the same way) plus

* **query_pre_attn_scalar**: attention logits are scaled by ``query_pre_attn_scalar ** -0.5``,
  not ``head_dim ** -0.5`` (27B: 144 vs 128). :meth:`attention_scaling` returns the attention
  module's ``scaling``, which the model sets to exactly that.
* **attention logit soft-capping** ``c·tanh(s/c)`` (``attn_logit_softcapping``) before the
  mask and softmax, inside eager attention: the probabilities captured from the attention
  module's output already include it; the cap is exposed as :attr:`attn_logit_softcap` for
  consumers that rebuild attention from q and k.
* **final logit soft-capping** (``final_logit_softcapping``) on the LM head:
  :class:`~.base.DecoderAdapter` reads that config attribute into ``logit_softcap``, so F is the
  capped logit the model returns. The classification head is not capped (nor is F there).
* **sandwich norms** (RMSNorm after attention and after the MLP, before the residual add):
  ``post_o`` is the attention module's output, i.e. after ``o_proj`` and before
  ``post_attention_layernorm``; ``pre_o`` the input of ``o_proj``. Nothing else reads them.
* **alternating sliding-window / global layers** (``layer_types``, ``sliding_window``): the
  decoder builds one mask per layer type; the captured probabilities are the model's, windowed
  where the layer is, and q/k/v are read before the mask, so nothing has to be rebuilt.
"""
from __future__ import annotations

from typing import Optional

from .base import layer_types_window
from .gemma import GemmaAdapter

__all__ = ["Gemma2Adapter"]


class Gemma2Adapter(GemmaAdapter):
    architectures = ("Gemma2ForCausalLM", "Gemma2ForSequenceClassification")
    has_rope = True

    def __init__(self, model):
        super().__init__(model)
        cap = getattr(model.config, "attn_logit_softcapping", None)
        #: c of the attention-logit soft-capping c·tanh(s/c) the model applies, or None
        self.attn_logit_softcap = float(cap) if cap else None

    def sliding_window(self, layer: int) -> Optional[int]:
        """The window of the layers ``config.layer_types`` marks ``"sliding_attention"`` (the
        even layers of the released models)."""
        return layer_types_window(self.model.config, layer)

    def attention_scaling(self, layer: int) -> float:
        """``query_pre_attn_scalar ** -0.5`` (the attention module's ``scaling``)."""
        a = self.attn_modules[layer]
        s = getattr(a, "scaling", None)
        return float(s) if s is not None else float(self.model.config.query_pre_attn_scalar) ** -0.5
