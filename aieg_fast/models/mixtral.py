"""Mixtral (``MixtralForCausalLM``, ``MixtralForSequenceClassification``; Mixtral-8x7B/8x22B):
Mistral's attention (separate bias-free q/k/v projections, grouped-query attention,
``rotate_half`` RoPE, scale head_dim^-0.5, optional sliding window) with a sparse
mixture-of-experts MLP.

What is special and how it is handled:

* Mixture of experts: a top-k router picks ``num_experts_per_tok`` of ``num_local_experts`` SwiGLU
  experts per token. It lives in the MLP, after attention, so no hook point moves; the
  explained score is the model's own logit through the routed experts (gradients flow through
  the routing weights, the expert choice is piecewise constant, as in the model). The router's
  jitter noise is applied only in training mode, and attribution runs in eval mode.
* Sliding window (``config.sliding_window``, every layer; None in the released Mixtral
  configs): as :class:`~aieg_fast.models.mistral.MistralAdapter` — exact for the methods that
  use the model's own attention; Grad-ELLM refuses a sequence longer than the window.
"""
from __future__ import annotations

from .mistral import MistralAdapter

__all__ = ["MixtralAdapter"]


class MixtralAdapter(MistralAdapter):
    architectures = ("MixtralForCausalLM", "MixtralForSequenceClassification")
