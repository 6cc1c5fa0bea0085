"""Input × gradient per token (Shrikumar et al., 2016)."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.path import TOKEN_REDUCTIONS, reduce_tokens
from ..core.validation import check_choice
from ..core.vjp import sequence_input_gradients
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["InputXGradient", "InputXGradientOptions"]


@dataclass(frozen=True)
class InputXGradientOptions(Options):
    """Options of :class:`InputXGradient`.

    Attributes:
        token_reduction: ``"sum"`` (default, signed), ``"l2"`` or ``"sum_abs"`` over d.
    """

    token_reduction: str = "sum"

    def validate(self):
        check_choice("token_reduction", self.token_reduction, TOKEN_REDUCTIONS)


@register
class InputXGradient(Method):
    """InputXGradient_i = Σ_d e_{i,d} ∂F/∂e_{i,d} (signed; ``token_reduction`` sum / l2 / sum_abs).

    One forward and one backward; a missing target is the prediction of the same forward.
    """

    name = "input_x_gradient"
    doc = "Input x gradient (Shrikumar et al. 2016), summed over the embedding"
    Options = InputXGradientOptions
    multi_token_targets = True

    def run(self, ctx, o):
        with ctx.timed("gradient"):
            g, F_in = ctx.gradient_at_input()
        s = reduce_tokens(g.float() * ctx.batch.embeds.float(), o.token_reduction)
        s = s.masked_fill(ctx.batch.fixed, 0.0)
        return MethodOutput(list(s), {"token_reduction": o.token_reduction}, {"F_input": F_in.tolist()})

    def run_sequence(self, sctx, o):
        """Every step's input gradient from one forward and one batched VJP, times the input."""
        G, F = sequence_input_gradients(sctx)
        rows = reduce_tokens(G * sctx.seq.embeds[0].float(), o.token_reduction)
        return MethodOutput(list(rows), {"token_reduction": o.token_reduction}, {"F_input": F.tolist()})
