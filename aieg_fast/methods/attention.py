"""Attention of the predicting position: last layer, mean over layers, or rollout."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .. import ops
from ..core.attention import attention_layers, attention_rows, check_attn_layers
from ..core.capture import AttentionCapture
from ..core.model_state import model_prepared
from ..core.validation import check_choice
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["Attention", "AttentionOptions"]


@dataclass(frozen=True)
class AttentionOptions(Options):
    """Options of :class:`Attention`.

    Attributes:
        attn_layers: ``"last"`` (default), ``"all"`` (mean over layers), ``"rollout"``
            (0.5·A + 0.5·I, Abnar & Zuidema 2020), or a list of layer indices.
        attn_heads: ``"mean"`` (default) or ``"max"`` over heads.
    """

    attn_layers: Any = "last"
    attn_heads: str = "mean"

    def validate(self):
        check_choice("attn_heads", self.attn_heads, ("mean", "max"))
        check_attn_layers(self.attn_layers, ("last", "all", "rollout"), "attention")


@register
class Attention(Method):
    """a_i = head-mean attention of the last (predicting) position to token i (specs/aieg.md §4, ReAGent).

    One no-grad forward with eager attention. Special/template positions are reported as 0.
    """

    name = "attention"
    doc = "Attention of the predicting position (last layer, mean over layers, or rollout)"
    gradients = False
    Options = AttentionOptions

    def needs_attention(self, opts) -> bool:
        return True

    def check_adapter(self, opts, adapter) -> None:
        attention_layers(adapter, opts.attn_layers)  # the listed layers exist

    def run(self, ctx, o):
        layers = attention_layers(ctx.adapter, o.attn_layers)
        with model_prepared(ctx.model, eager=True):
            ref = ctx.reference_forward(layers, full=o.attn_layers == "rollout", baseline=False)
            a = attention_rows(ctx.adapter, ctx.batch, ref["attn"], o.attn_layers, o.attn_heads, ctx.backend)
        a = torch.where(ctx.batch.fixed, torch.zeros_like(a), a)
        return MethodOutput(list(a), {"attn_layers": o.attn_layers, "attn_heads": o.attn_heads}, {"F_input": ref["F_input"].tolist()})

    def run_sequence(self, sctx, o):
        """One forward over the sequence; row q_t of the captured attention is step t's row."""
        layers = attention_layers(sctx.adapter, o.attn_layers)
        q = sctx.positions
        with model_prepared(sctx.model, eager=True), AttentionCapture(sctx.adapter, layers, full=True) as cap, torch.no_grad():
            F = sctx.scores(sctx.seq.embeds, input_row=0)
            attn = cap.pop()
        if o.attn_layers == "rollout":
            L = sctx.seq.ids.shape[1]
            eye = torch.eye(L, device=sctx.device)
            roll = eye.clone()
            for l in layers:
                A = attn[l][0].float()
                A = A.amax(0) if o.attn_heads == "max" else A.mean(0)
                roll = (0.5 * A + 0.5 * eye) @ roll
            rows = roll[q]
        else:
            per = []
            for l in layers:
                A = attn[l][:, :, q, :]  # [1, H, T, L]
                if o.attn_heads == "max":
                    per.append(A[0].float().amax(0))
                else:
                    per.append(ops.attention_gradient_product(A, None, None, "attention", backend=sctx.backend).float())
            rows = torch.stack(per).mean(0)
        return MethodOutput(list(rows), {"attn_layers": o.attn_layers, "attn_heads": o.attn_heads}, {"F_input": F[0].tolist()})
