"""Saliency: the gradient magnitude of F per token (Simonyan et al., 2014)."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.path import reduce_tokens
from ..core.validation import check_choice
from ..core.vjp import sequence_input_gradients
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["Saliency", "SaliencyOptions"]


@dataclass(frozen=True)
class SaliencyOptions(Options):
    """Options of :class:`Saliency`.

    Attributes:
        token_reduction: ``"l2"`` (default, ‖∂F/∂e_i‖₂) or ``"sum_abs"`` (Σ_d |∂F/∂e_{i,d}|).
    """

    token_reduction: str = "l2"

    def validate(self):
        check_choice("token_reduction", self.token_reduction, ("l2", "sum_abs"))


@register
class Saliency(Method):
    """Saliency_i = ‖∂F/∂e_i‖₂ (``token_reduction="l2"``, default) or Σ_d |∂F/∂e_{i,d}| (``"sum_abs"``).

    One forward and one backward; a missing target is the prediction of the same forward.
    """

    name = "saliency"
    doc = "Gradient magnitude (Simonyan et al. 2014), L2 norm over the embedding"
    Options = SaliencyOptions
    multi_token_targets = True

    def run(self, ctx, o):
        with ctx.timed("gradient"):
            g, F_in = ctx.gradient_at_input()
        s = reduce_tokens(g.float(), o.token_reduction)
        s = s.masked_fill(ctx.batch.fixed, 0.0)
        return MethodOutput(list(s), {"token_reduction": o.token_reduction}, {"F_input": F_in.tolist()})

    def run_sequence(self, sctx, o):
        """Every step's input gradient from one forward and one batched VJP."""
        G, F = sequence_input_gradients(sctx)
        return MethodOutput(list(reduce_tokens(G, o.token_reduction)), {"token_reduction": o.token_reduction}, {"F_input": F.tolist()})
