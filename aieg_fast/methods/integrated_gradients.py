"""Integrated Gradients on token embeddings (Sundararajan et al., ICML 2017)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import ops
from ..core.adaptive_quadrature import AUTO_MAX_STEPS, AUTO_TOLERANCE, REFINE_RULES, integrate_auto
from ..core.path import TOKEN_REDUCTIONS, completeness_info, integrate, reduce_tokens
from ..core.quadrature import INTEGRATION_RULES, quadrature
from ..core.validation import check_choice
from ..core.vjp import each_row_vjp
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["IntegratedGradients", "IntegratedGradientsOptions"]


@dataclass(frozen=True)
class IntegratedGradientsOptions(Options):
    """Options of :class:`IntegratedGradients`.

    Attributes:
        integration: quadrature rule (:func:`~aieg_fast.core.quadrature.quadrature`), default
            ``"trapezoid"`` (Captum's ``"riemann_trapezoid"``; the ``riemann_*`` and
            ``gausslegendre`` rules are Captum's too).
        token_reduction: ``"sum"`` (default, signed), ``"l2"`` or ``"sum_abs"`` over d.
        refine: with ``n_steps="auto"``, how the trapezoid grid is refined: ``"adaptive"``
            (default: bisect the intervals with the largest errors) or ``"uniform"`` (bisect all;
            :mod:`~aieg_fast.core.adaptive_quadrature`). With an int ``n_steps`` only the default
            is accepted (another would be ignored).
    """

    integration: str = "trapezoid"
    token_reduction: str = "sum"
    refine: str = "adaptive"

    def validate(self):
        if self.integration == "riemann_trapezoid":  # Captum's name of the same rule
            raise ValueError("integration must be one of the rules of aieg_fast.quadrature; Captum's 'riemann_trapezoid' "
                             "(linspace points, trapezoid weights) is 'trapezoid' here, got 'riemann_trapezoid'")
        check_choice("integration", self.integration, INTEGRATION_RULES)
        check_choice("token_reduction", self.token_reduction, TOKEN_REDUCTIONS)
        check_choice("refine", self.refine, REFINE_RULES)


@register
class IntegratedGradients(Method):
    """Integrated Gradients: IG_i = Σ_d Δ_{i,d} Σ_m w_m ∂F/∂e_{i,d}(E′ + α_m Δ).

    Baseline E′: the reference token's embedding (PAD, else EOS) at attributable positions;
    special and template positions are held fixed (Δ = 0, score 0). ``info["convergence_delta"]``
    = Σ_i IG_i − (F(x) − F(x′)) (completeness; exact only for ``token_reduction="sum"``).
    Cost: M forward/backward passes in chunks of ``internal_batch_size`` points.

    ``n_steps="auto"`` (:func:`~aieg_fast.core.adaptive_quadrature.integrate_auto`): a trapezoid
    grid of 9 points (``max_steps`` when fewer) refined by bisection, every gradient kept, until the relative completeness
    error |Σ_i IG_i − (F(x) − F(x′))| / |F(x) − F(x′)| is within ``tolerance`` (call argument,
    default 0.05) or the next refinement would pass ``max_steps`` points (default 257). Needs
    ``integration="trapezoid"`` and ``token_reduction="sum"``. ``info`` adds ``alphas``,
    ``n_steps_used``, ``completeness_error``, ``error_history``, ``converged``, ``tolerance``,
    ``max_steps``, ``refine``; a result that did not converge is flagged (``res.degenerate``).
    """

    name = "integrated_gradients"
    doc = "Integrated Gradients on token embeddings (Sundararajan et al. 2017)"
    Options = IntegratedGradientsOptions
    multi_token_targets = True
    uses_baseline = True
    uses_steps = True
    completeness = True
    auto_steps = True

    def check_steps(self, opts, n_steps) -> None:
        """``n_steps="auto"`` refines a trapezoid grid and checks the signed token sum: it needs
        ``integration="trapezoid"`` and ``token_reduction="sum"`` (ValueError otherwise). A
        ``refine`` other than the default with an int ``n_steps`` is refused, as ``tolerance`` and
        ``max_steps`` are: it would be ignored."""
        if n_steps != "auto":
            if opts.refine != IntegratedGradientsOptions.refine:
                raise ValueError(f"refine={opts.refine!r} applies to n_steps='auto' only; got n_steps={n_steps!r}")
            return
        if opts.integration != "trapezoid":
            raise ValueError(f"n_steps='auto' refines a trapezoid grid (nested points, every gradient kept); "
                             f"integration={opts.integration!r} has no nested points: leave integration out or pass an int n_steps")
        if opts.token_reduction != "sum":
            raise ValueError(f"n_steps='auto' checks completeness, which holds for token_reduction='sum' only; "
                             f"got token_reduction={opts.token_reduction!r}: pass an int n_steps")

    def step_bytes(self, opts, n_steps: int) -> int:
        """:meth:`Method.step_bytes`, plus numpy's M×M eigenproblem of the Gauss–Legendre nodes."""
        quad = 24 * n_steps * n_steps if opts.integration == "gausslegendre" else 0
        return super().step_bytes(opts, n_steps) + quad

    def run(self, ctx, o):
        ctx.ensure_targets()
        if ctx.n_steps == "auto":
            return self._run_auto(ctx, o)
        a, w = quadrature(o.integration, ctx.n_steps, torch.float32)
        B = ctx.batch.B
        alphas, weights = [a.to(ctx.device)] * B, [w.to(ctx.device)] * B
        with ctx.timed("path"):
            scores, path = integrate(ctx, alphas, weights, o.token_reduction, return_logits=True)
        if o.integration in ("trapezoid", "uniform"):  # the grid holds α = 0 and α = 1
            F_in, F_base = torch.stack([p[-1] for p in path]), torch.stack([p[0] for p in path])
        else:
            ref = ctx.reference_forward()
            F_in, F_base = ref["F_input"], ref["F_baseline"]
        opts = {"integration": o.integration, "token_reduction": o.token_reduction, "internal_batch_size": ctx.chunk, "ref_token_id": ctx.ref_token_id}
        return MethodOutput(scores, opts, completeness_info(F_in, F_base, scores))

    def _run_auto(self, ctx, o):
        tol = AUTO_TOLERANCE if ctx.tolerance is None else ctx.tolerance
        budget = AUTO_MAX_STEPS if ctx.max_steps is None else ctx.max_steps
        with ctx.timed("path"):
            scores, path, auto = integrate_auto(ctx, tol, budget, o.refine)
        info = completeness_info(torch.stack([p[-1] for p in path]), torch.stack([p[0] for p in path]), scores)
        info.update(auto)
        opts = {"integration": o.integration, "token_reduction": o.token_reduction, "refine": o.refine,
                "tolerance": float(tol), "max_steps": budget, "internal_batch_size": ctx.chunk, "ref_token_id": ctx.ref_token_id}
        return MethodOutput(scores, opts, info)

    def run_sequence(self, sctx, o):
        """Each interpolation point is one forward over the full sequence (the prompt
        interpolated, generated tokens fixed unless interpolated too, which for step t touches
        only y_<t), giving the path logits of every step; the chunk's backward gives every
        step's gradients (:func:`~aieg_fast.core.vjp.each_row_vjp`: one backward per step on a
        CPU, one batched backward elsewhere)."""
        T, n_steps, chunk, dev = sctx.T, sctx.n_steps, sctx.chunk, sctx.device
        L, d = sctx.seq.embeds.shape[1:]
        a, w = quadrature(o.integration, n_steps, torch.float32)
        a, w = a.to(dev), w.to(dev)
        inner = "sum" if o.token_reduction == "sum" else "none"
        acc = torch.zeros((T, L) if inner == "sum" else (T, L, d), device=dev)
        E, Eb, fixed = sctx.seq.embeds[0], sctx.seq.baseline[0], sctx.seq.fixed[0]
        delta = sctx.seq.delta[0]  # float32 for low-precision embeddings
        with torch.no_grad():
            ends = sctx.scores(torch.stack([E, Eb]), input_row=0)
        batched = dev.type != "cpu"  # on a CPU one backward per step is faster (each_row_vjp)
        for s in range(0, n_steps, chunk):
            e = min(s + chunk, n_steps)
            X = ops.interpolate_path(E, Eb, a[s:e], fixed, backend=sctx.backend).requires_grad_(True)
            with torch.enable_grad():
                F = sctx.scores(X)
                for t, (G,) in each_row_vjp(F, X, T, batched):  # G [c, L, d]: step t's gradients
                    acc[t] += ops.integrate_gradients(G, w[s:e], delta, inner, backend=sctx.backend).float()
            sctx.advance(e - s)
        rows = acc if inner == "sum" else reduce_tokens(acc, o.token_reduction)
        q = sctx.positions
        d_in = ends[0] - ends[1]
        info = {
            "F_input": ends[0].tolist(),
            "F_baseline": ends[1].tolist(),
            "convergence_delta": [float(rows[t, : int(q[t]) + 1].sum() - d_in[t]) for t in range(T)],
        }
        return MethodOutput(list(rows), {"integration": o.integration, "token_reduction": o.token_reduction, "internal_batch_size": chunk}, info)
