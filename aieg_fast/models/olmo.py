"""OLMo (``OlmoForCausalLM``, ``OlmoForSequenceClassification``; OLMo-1B/7B ``-hf``).

LLaMA module layout and RoPE (``model.layers[i].self_attn`` with separate
``q_proj``/``k_proj``/``v_proj``/``o_proj``, ``rotate_half`` RoPE from the decoder's
``position_embeddings``, optional grouped-query attention) with these differences:

* **q/k/v clipping** (``clip_qkv``, e.g. 8 in OLMo-7B-0424): right after the projections the
  model clamps q, k and v in place to ``[-clip_qkv, clip_qkv]``, before the heads are split and
  RoPE is applied. The readers apply the same clamp to the projection outputs, so q/k/v are what
  attention uses (and do not depend on whether the in-place clamp has already hit the tensor the
  hook saw). ``clip_qkv=None`` reads the projections as they are.
* **Non-parametric LayerNorm** (no weight, no bias) in the blocks and the final norm, and no
  biases in the projections by default: nothing to adapt (the decoder's output is read as is).
* Scale ``d^-1/2`` (the module's ``scaling``); LM head without bias or logit transform.
"""
from __future__ import annotations

from .llama import LlamaAdapter

__all__ = ["OlmoAdapter", "clipped"]


def clipped(name: str, clip: float):
    """A q/k/v reader for a projection whose output the model clamps to ``[-clip, clip]``."""

    def read(out):
        return {name: out.clamp(-clip, clip)}

    return read


class OlmoAdapter(LlamaAdapter):
    architectures = ("OlmoForCausalLM", "OlmoForSequenceClassification")
    has_rope = True

    def __init__(self, model):
        super().__init__(model)
        clip = getattr(model.config, "clip_qkv", None)
        self.clip_qkv = None if clip is None else float(clip)

    def qkv_points(self, layer):
        a = self.attn_modules[layer]
        if self.clip_qkv is None:
            return super().qkv_points(layer)
        c = self.clip_qkv
        return [(a.q_proj, clipped("q", c)), (a.k_proj, clipped("k", c)), (a.v_proj, clipped("v", c))]
