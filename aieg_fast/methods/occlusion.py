"""Occlusion (leave-one-out): how much the output changes when a token, a word or a span is replaced.

Sources: Zeiler & Fergus, ECCV 2014 (occlusion); Li, Monroe & Jurafsky 2016, "Understanding
Neural Networks through Representation Erasure" (leave-one-out on words); the names follow
Captum's ``Occlusion`` / ``FeatureAblation`` and Inseq's ``occlusion``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.occlusion import (GRANULARITIES, MEASURES, occlude, occlusion_groups, reference_outputs, runs_after_prefix,
                              sequence_occlude, spread)
from ..core.validation import check_choice, check_int
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["Occlusion", "OcclusionOptions"]


@dataclass(frozen=True)
class OcclusionOptions(Options):
    """Options of :class:`Occlusion`.

    Attributes:
        granularity: ``"token"`` (default: leave one token out), ``"word"`` (the attributable
            tokens of a word together; words as the result's word view groups them, from the
            tokenizer's character offsets) or ``"span"`` (``span_width`` consecutive
            attributable tokens, a window every ``span_stride`` tokens; a token's score is the
            mean over the windows that contain it).
        span_width: tokens per span (int ≥ 1; ``"span"`` only).
        span_stride: tokens between span starts (1 ≤ stride ≤ span_width; ``"span"`` only).
        measure: ``"delta"`` (default, F(x) − F(x masked), in F's units) or ``"kl"``
            (KL(P(·|x) ‖ P(·|x masked)) of the output distribution at the predicting position, nats).
    """

    granularity: str = "token"
    span_width: int = 3
    span_stride: int = 1
    measure: str = "delta"

    def validate(self):
        check_choice("granularity", self.granularity, GRANULARITIES)
        check_choice("measure", self.measure, MEASURES)
        check_int("span_width", self.span_width, 1)
        check_int("span_stride", self.span_stride, 1)
        if self.span_stride > self.span_width:
            raise ValueError(f"span_stride must be <= span_width ({self.span_width}) so every token is in a span, got {self.span_stride}")


@register
class Occlusion(Method):
    """Occlusion_i = mean over the groups g ∋ i of  F(x) − F(x with g replaced)  (``measure="delta"``)
    or KL(P(·|x) ‖ P(·|x with g replaced))  (``"kl"``).

    The replacement is the call's ``baseline=`` (:mod:`~aieg_fast.core.baselines`: by default
    the reference token's embedding, else ``"zero"``, ``"mean"``, ``"unk"``, a token id, a
    tensor); ``alpha_range=(α0, 1)`` replaces by x′ + α0 (x − x′) and ``n_baseline_samples``
    averages noisy replacements. Special and template tokens are never masked (score 0).

    Cost: one forward on the input plus one forward per group (n for tokens), no gradients,
    batched ``internal_batch_size`` masked inputs per forward; for a family with a KV cache and a
    single-token target, one more forward keeps the input's keys and values and each masked
    input runs only the positions from its group's first token on (about half the positions on
    average; same scores). Generation: one forward per
    masked group over the whole sequence serves every step (causal masking).

    ``info``: ``F_input`` (F on the input), ``n_forwards`` (forwards per example over whole or
    partial inputs: the masked ones plus one, plus the prefix forward when there is one).

    Raises:
        ValueError: ``measure="kl"`` with a multi-token target (the KL of which step is ambiguous),
            or with a ``contrast_target`` (the KL has none).
    """

    name = "occlusion"
    doc = "Occlusion / leave-one-out: output change when tokens, words or spans are replaced (Zeiler & Fergus 2014)"
    Options = OcclusionOptions
    uses_baseline = True
    gradients = False
    multi_token_targets = True

    @classmethod
    def options(cls, **values):
        """Validated options; ``span_width`` / ``span_stride`` given with a granularity other than
        ``"span"`` are refused (ValueError), as they would be ignored."""
        opts = super().options(**values)
        given = [k for k in ("span_width", "span_stride") if k in values]
        if given and opts.granularity != "span":
            verb = "applies" if len(given) == 1 else "apply"
            raise ValueError(f"{' and '.join(given)} {verb} to granularity='span' only; got granularity={opts.granularity!r} "
                             f"with {', '.join(f'{k}={values[k]!r}' for k in given)}")
        return opts

    def needs_words(self, opts) -> bool:
        return opts.granularity == "word"

    def _options(self, o):
        out = {"granularity": o.granularity, "measure": o.measure}
        if o.granularity == "span":
            out.update(span_width=o.span_width, span_stride=o.span_stride)
        return out

    def check_target(self, opts, contrast: bool) -> None:
        """``measure="kl"`` has no contrast (ValueError)."""
        if opts.measure == "kl" and contrast:
            raise ValueError("measure='kl' compares the whole next-token distributions, so it has no contrast: drop "
                             "contrast_target, or use measure='delta' to explain z_target − z_contrast")

    def run(self, ctx, o):
        if o.measure == "kl" and ctx.step_ids is not None:
            raise ValueError("measure='kl' needs a single-token target; use measure='delta' for a multi-token target")
        self.check_target(o, ctx.contrast is not None)
        batch = ctx.batch
        fixed = batch.fixed.cpu()
        words = None if ctx.word_ids is None else ctx.word_ids.cpu()
        groups = [occlusion_groups(fixed[b], o.granularity, o.span_width, o.span_stride, None if words is None else words[b])
                  for b in range(batch.B)]
        with ctx.timed("reference_forward"):
            ref = reference_outputs(ctx, o.measure)
        with ctx.timed("occlusion"):
            per_group = occlude(ctx, groups, o.measure, ref)
        scores = [spread(g, v) for g, v in zip(groups, per_group)]
        opts = dict(self._options(o), internal_batch_size=ctx.chunk)
        prefix = runs_after_prefix(ctx)
        info = {"F_input": ref["F"].tolist(), "n_forwards": [int(g.shape[0]) + 1 + int(prefix and g.shape[0] > 0) for g in groups]}
        return MethodOutput(scores, opts, info)

    def run_sequence(self, sctx, o):
        """Every step's row from one forward per masked group over the whole sequence."""
        self.check_target(o, sctx.contrast is not None)
        groups = occlusion_groups(sctx.seq.fixed[0], o.granularity, o.span_width, o.span_stride,
                                  None if sctx.word_ids is None else sctx.word_ids[0])
        per_group, F0 = sequence_occlude(sctx, groups, o.measure)
        rows = spread(groups, per_group)  # [T, L]
        info = {"F_input": F0.tolist(), "n_forwards": int(groups.shape[0]) + 1}
        return MethodOutput(list(rows), dict(self._options(o), internal_batch_size=sctx.chunk), info)
