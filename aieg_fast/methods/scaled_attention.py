"""Scaled attention α∇α (Serrano & Smith 2019; Chrysostomou & Aletras 2022)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .. import ops
from ..core.attention import attention_layers, check_attn_layers
from ..core.capture import AttentionCapture
from ..core.model_state import model_prepared
from ..core.validation import check_choice
from ..core.vjp import rows_vjp
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["ScaledAttention", "ScaledAttentionOptions"]


@dataclass(frozen=True)
class ScaledAttentionOptions(Options):
    """Options of :class:`ScaledAttention`.

    Attributes:
        attn_layers: ``"last"`` (default), ``"all"`` (mean over layers) or a list of indices.
        reduce: ``"product_of_means"`` (default: mean_h A · mean_h ∂F/∂A) or
            ``"mean_of_products"`` (mean_h A ⊙ ∂F/∂A).
    """

    attn_layers: Any = "last"
    reduce: str = "product_of_means"

    def validate(self):
        check_choice("reduce", self.reduce, ("product_of_means", "mean_of_products"))
        check_attn_layers(self.attn_layers, ("last", "all"), "scaled_attention")


@register
class ScaledAttention(Method):
    """α∇α_i = mean_h A_{h,T,i} · mean_h ∂F/∂A_{h,T,i} at the predicting position T (specs/aieg.md §4).

    ``reduce="mean_of_products"`` gives mean_h(A ⊙ ∂A). ``attn_layers="all"`` averages layers.
    Signed; special/template positions are reported as 0. One forward (eager attention) and
    one backward that stops at the captured layers.
    """

    name = "scaled_attention"
    doc = "Scaled attention α∇α (Serrano & Smith 2019; Chrysostomou & Aletras 2022)"
    Options = ScaledAttentionOptions

    def needs_attention(self, opts) -> bool:
        return True

    def check_adapter(self, opts, adapter) -> None:
        attention_layers(adapter, opts.attn_layers)  # the listed layers exist

    def run(self, ctx, o):
        layers = attention_layers(ctx.adapter, o.attn_layers)
        B = ctx.batch.B
        with model_prepared(ctx.model, eager=True), AttentionCapture(ctx.adapter, layers, full=True, keep_graph=True) as cap:
            with torch.enable_grad():
                X = ctx.batch.embeds.clone().requires_grad_(True)
                h = ctx.hidden(ctx.all_rows(), X)
                ctx.fill_targets(h)
                f = ctx.score(h)
                attn = cap.pop()
                mats = [attn[l] for l in layers]
                grads = torch.autograd.grad(f.sum(), mats)
        per_layer = []
        li = ctx.batch.last_index
        for A, G in zip(mats, grads):
            out = []
            for b in range(B):
                Ar = A[b : b + 1, :, li[b] : li[b] + 1, :].detach()
                Gr = G[b : b + 1, :, li[b] : li[b] + 1, :]
                out.append(ops.attention_gradient_product(Ar, Gr, None, o.reduce, backend=ctx.backend)[0].float())
            per_layer.append(torch.stack(out))
        s = torch.stack(per_layer).mean(0)
        s = torch.where(ctx.batch.fixed, torch.zeros_like(s), s)
        return MethodOutput(list(s), {"attn_layers": o.attn_layers, "reduce": o.reduce}, {"F_input": f.detach().tolist()})

    def run_sequence(self, sctx, o):
        """One forward; the attention gradient of every step from one batched VJP that only runs
        back to the captured layers."""
        layers = attention_layers(sctx.adapter, o.attn_layers)
        T, q = sctx.T, sctx.positions
        with model_prepared(sctx.model, eager=True), AttentionCapture(sctx.adapter, layers, full=True, keep_graph=True) as cap:
            with torch.enable_grad():
                X = sctx.seq.embeds.clone().requires_grad_(True)
                F = sctx.scores(X, input_row=0)
                attn = cap.pop()
                mats = [attn[l] for l in layers]
                grads = rows_vjp(F, mats, T)  # each [T, 1, H, L, L]; backward stops at the captured layers
        t_idx = torch.arange(T, device=sctx.device)
        per = []
        for A, G in zip(mats, grads):
            A_rows = A.detach()[:, :, q, :]  # [1, H, T, L]
            G_rows = G[t_idx, 0].permute(1, 0, 2, 3)[:, t_idx, q, :].unsqueeze(0)  # [1, H, T, L]
            per.append(ops.attention_gradient_product(A_rows, G_rows, None, o.reduce, backend=sctx.backend).float())
        return MethodOutput(list(torch.stack(per).mean(0)), {"attn_layers": o.attn_layers, "reduce": o.reduce}, {"F_input": F[0].detach().tolist()})
