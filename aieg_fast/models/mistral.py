"""Mistral (``MistralForCausalLM``, ``MistralForSequenceClassification``; Mistral-7B v0.1–v0.3,
Mistral-Nemo): the LLaMA layout (separate bias-free q/k/v projections, grouped-query attention,
``rotate_half`` RoPE from the ``position_embeddings`` the decoder passes to every attention module,
scale head_dim^-0.5, no logit transform) plus **sliding-window attention**.

What is special and how it is handled:

* ``head_dim`` may differ from hidden/heads (Mistral-Nemo: 32 heads × 128 = 4096 ≠ 5120); the
  config always sets it and :class:`~aieg_fast.models.base.DecoderAdapter` reads it.
* Sliding window: with ``config.sliding_window = w`` (Mistral-7B-v0.1: 4096; v0.2+ and Nemo:
  None) every layer's query at index t attends only to keys t-w < i ≤ t (the mask the model
  builds with ``create_sliding_window_causal_mask``). Methods that read the model's own
  attention probabilities (attention, scaled attention, AIEG) and the gradient methods see the
  window as the model applies it, so they are exact at any length. Grad-ELLM, however, rebuilds
  its spatial weight λ from the captured q/k over every causally visible position; the core
  does not (yet) know a layer's window, so on a sequence longer than a windowed layer's window
  λ would weight positions that layer cannot attend to. The q/k/v readers of a windowed layer
  therefore refuse (ValueError) to be read over a sequence longer than the window — Grad-ELLM is
  exact up to w tokens and refuses beyond; every other method is unaffected.
  :meth:`MistralAdapter.sliding_window` gives each layer's window for that check (and for the
  core, once λ's valid positions honour it).

Not registered for ``model_type="mistral"`` yet (tests/models/test_adapters.py uses Mistral as
its example of an unsupported family); it is the base of the Mixtral and Qwen2 adapters, and
``register_adapter("mistral", MistralAdapter)`` enables it.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from torch import Tensor

from .base import QKVPoint
from .llama import LlamaAdapter

__all__ = ["MistralAdapter", "window_guard"]


def window_guard(reader: Callable[[Tensor], Dict[str, Tensor]], window: int, layer: int) -> Callable[[Tensor], Dict[str, Tensor]]:
    """``reader`` that refuses outputs longer than ``window`` positions (dim 1 of [B, L, ...]).

    q/k/v are read only by methods that rebuild attention from them (Grad-ELLM); over more than
    ``window`` positions that rebuild would attend to positions outside the layer's window.
    """

    def read(out: Tensor) -> Dict[str, Tensor]:
        L = out.shape[1]
        if L > window:
            raise ValueError(
                f"layer {layer} uses sliding-window attention (each query sees the last {window} positions) "
                f"but the sequence has {L} positions: rebuilding its attention from q/k (Grad-ELLM's λ) would "
                f"weight positions this layer cannot attend to, which aieg_fast does not support yet; use at "
                f"most {window} tokens with this method, or another method"
            )
        return reader(out)

    return read


class MistralAdapter(LlamaAdapter):
    architectures = ("MistralForCausalLM", "MistralForSequenceClassification")

    def sliding_window(self, layer: int) -> Optional[int]:
        """How many positions (the query's own included) a query of ``layer`` attends to, or
        None for full causal attention. Mistral: ``config.sliding_window`` in every layer."""
        w = getattr(self.model.config, "sliding_window", None)
        return int(w) if w else None

    def qkv_points(self, layer: int) -> List[QKVPoint]:
        points = self._qkv_points(layer)
        w = self.sliding_window(layer)
        if w is None:
            return points
        return [(module, window_guard(reader, w, layer)) for module, reader in points]

    def _qkv_points(self, layer: int) -> List[QKVPoint]:
        """The (module, reader) pairs without the window check (LLaMA's q_proj/k_proj/v_proj)."""
        return LlamaAdapter.qkv_points(self, layer)
