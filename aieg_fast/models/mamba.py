"""Mamba (``MambaForCausalLM``): a state-space model without attention layers.

The decoder stack is ``model.backbone`` (embeddings → Mamba mixer blocks → final norm); there are
no attention probabilities, q/k/v or output projection to read, so methods that need attention
(``attention``, ``scaled_attention``, ``grad_ellm``, ``aieg`` with its attention term) are refused
with a message; the methods that need only embeddings and logits (IG, IDG, saliency,
input×gradient, ``aieg`` with ``attn_layers="none"``) work. The backbone takes the attention mask
(it zeroes padded positions before the convolution and the scan) and no position ids; it has no
position limit.
"""
from __future__ import annotations

from .base import DecoderAdapter

__all__ = ["MambaAdapter"]

#: no limit on the number of positions (a recurrence)
NO_POSITION_LIMIT = 2**31 - 1


class MambaAdapter(DecoderAdapter):
    architectures = ("MambaForCausalLM",)
    has_attention = False
    has_kv_cache = False
    attention_free_reason = "a state-space model: selective-scan (Mamba) blocks, no attention layers"

    def decoder(self, model):
        return model.backbone

    def blocks(self, base):
        return base.layers

    def config_sizes(self, cfg):
        return 0, 0, cfg.hidden_size, NO_POSITION_LIMIT

    def hidden_states(self, inputs_embeds, attention_mask=None, position_ids=None):
        """Final hidden states [B, L, hidden]; ``position_ids`` are not used (no positions)."""
        out = self.base(inputs_embeds=inputs_embeds, attention_mask=attention_mask, use_cache=False)
        h = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]  # a tuple with return_dict=False
        return h.to(inputs_embeds.device)
