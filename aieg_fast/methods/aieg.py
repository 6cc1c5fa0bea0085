"""AIEG: Attended Integrated and Emphasized Gradients (Pramanik et al., ICLR 2025 submission,
withdrawn). The paper's equations are not public; this follows the written reconstruction in
specs/aieg.md §6 (each choice is an option)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch

from .. import ops
from ..core.attention import attention_layers, attention_rows, check_attn_layers
from ..core.capture import AttentionCapture
from ..core.model_state import model_prepared
from ..core.path import TOKEN_REDUCTIONS, adaptive_grid, emphasis, integrate, integrate_emphasized, path_chunks
from ..core.validation import check_bool, check_choice, check_int
from ..reference import ALLOC_MODES, EF_MODES, EF_NORMS, EF_SIGNS, POSNORM_MODES
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["AIEG", "AIEGOptions", "FINAL_NORMS", "PRESETS"]

FINAL_NORMS = ("none", "sum", "l2")

#: Named readings of AIEG (the ids of issue 19's study, benchmarks/RESULTS_faithfulness.md §4);
#: options given explicitly override them. ``"v2"`` (default since the study): PosNorm on
#: positive evidence only (``relu_max``: tokens with negative evidence get 0 instead of a
#: positive score), attention at the input; the AIEG reading with the best test criterion of the
#: study's eight, significantly more faithful than v1 on four of five models (it does not beat
#: IG). ``"v1"`` (the default before): the reconstruction as first written, PosNorm min-max
#: before the attention product. ``"v3"``: v2 with attention averaged along the path (the
#: study's dev selection).
PRESETS: Dict[str, Dict[str, str]] = {
    "v1": dict(posnorm="minmax", attn_source="input"),
    "v2": dict(posnorm="relu_max", attn_source="input"),
    "v3": dict(posnorm="relu_max", attn_source="path"),
}


@dataclass(frozen=True)
class AIEGOptions(Options):
    """Options of :class:`AIEG` (spec sections in specs/aieg.md).

    Attributes:
        preset: a named reading (:data:`PRESETS`): ``"v2"`` (default), ``"v1"`` (the default
            until issue 19's study, which found it the least faithful of eight readings; pass
            it to reproduce earlier scores) or ``"v3"``; it sets ``posnorm`` and
            ``attn_source`` where they are not given (the options record the values used).
        n_pilot: pilot points N ≥ 2 of the adaptive grid (default ``n_steps``) (§6.4).
        adaptive: IDG adaptive grid (True) or uniform (§6.4). alloc: ``"abs"`` (allocation
            ∝ |slope|, default) or ``"idg_minmax"``. idg_compat_quirk: the official IDG
            code's leftover allocation and placement (§3.2; see
            :func:`aieg_fast.reference.adaptive_alphas`).
        ef_mode: ``"fd"`` (finite-difference logit increments, default), ``"autograd"``
            (G_m·Δ slopes at every sample, α_1 included, IDG's original code), ``"none"``
            (§6.5), ``"completeness"``
            (issue 19's V8, a reconstruction: step m gets ω_m = clip(Δf_m/p_m, 0, 1)·g_m, the
            actual logit increment Δf_m = f_m − f_{m−1} over g_m = α_m − α_{m−1} against the
            gradient's prediction p_m = (G_m·Δ)·g_m, ω_1 = 0, no normalisation; where no step
            is clipped Σ_i ieg_i = F(γ(α_M)) − F(γ(α_1)), which is F(x) − F(x′) on the uniform
            grid (``adaptive=False``); the adaptive grid's samples are left ends of their
            sub-steps, so it stops at α_M = 1 − δ_M and that last sub-step is left out; see
            :func:`aieg_fast.reference.emphasis_factors`). ef_sign: ``"abs"``, ``"signed"``,
            ``"relu"``, ``"minmax"`` (of the weights r_m·δ_m, not of the slopes r_m as the spec's
            table writes: see :func:`aieg_fast.reference.emphasis_factors`). ef_norm: ``"l1"`` or
            ``"none"``; left out (None), the mode's own: ``"l1"``, and ``"none"`` for ``"completeness"`` (the options record the
            value used). ``"completeness"`` needs ``ef_sign="abs"`` (its weights are never
            negative), ``ef_norm="none"`` and ``stream_ef=True`` (its weights need the gradient
            pass's slopes); other values are refused.
        attn_layers: ``"last"``, ``"all"``, ``"rollout"``, a list of layers, or ``"none"``
            (attention = 1) (§6.7). attn_heads: ``"mean"`` or ``"max"``. attn_source:
            ``"input"`` (α = 1) or ``"path"`` (|EF|-weighted mean along the path); None: the
            preset's, except ``"input"`` with ``attn_layers="rollout"`` (rollout along the
            path is not defined; ``attn_source="path"`` with it is refused).
            attn_exclude_first / attn_renorm: renormalise over positions ≥ 1 / attributable.
        posnorm: ``"minmax"``, ``"relu_max"``, ``"abs_sum"``, ``"none"`` (§6.8; None: the
            preset's); posnorm_stage:
            ``"ieg"`` (before × attention) or ``"final"`` (on ieg·a).
        final_norm: ``"none"``, ``"sum"``, ``"l2"`` (§6.9).
        token_reduction: ``"sum"``, ``"l2"``, ``"sum_abs"`` (§6.6).
        stream_ef: EF from the gradient pass's own path logits (engineering; same result).
    """

    preset: str = "v2"
    n_pilot: Optional[int] = None
    adaptive: bool = True
    alloc: str = "abs"
    idg_compat_quirk: bool = False
    ef_mode: str = "fd"
    ef_sign: str = "abs"
    ef_norm: Optional[str] = None
    attn_layers: Any = "last"
    attn_heads: str = "mean"
    attn_source: Optional[str] = None
    attn_exclude_first: bool = False
    attn_renorm: bool = False
    posnorm: Optional[str] = None
    posnorm_stage: str = "ieg"
    final_norm: str = "none"
    token_reduction: str = "sum"
    stream_ef: bool = True

    def __post_init__(self):
        check_choice("preset", self.preset, tuple(PRESETS))
        for name, value in PRESETS[self.preset].items():  # the preset's value where none is given
            if getattr(self, name) is None:
                if name == "attn_source" and isinstance(self.attn_layers, str) and self.attn_layers == "rollout":
                    value = "input"  # rollout is defined on the input's attention only
                object.__setattr__(self, name, value)
        if self.ef_norm is None:  # the mode's own normalisation (recorded as the value used)
            object.__setattr__(self, "ef_norm", "none" if self.ef_mode == "completeness" else "l1")
        super().__post_init__()

    def validate(self):
        check_choice("alloc", self.alloc, ALLOC_MODES)
        check_choice("ef_mode", self.ef_mode, EF_MODES)
        check_choice("ef_sign", self.ef_sign, EF_SIGNS)
        check_choice("ef_norm", self.ef_norm, EF_NORMS)
        check_choice("attn_heads", self.attn_heads, ("mean", "max"))
        check_choice("attn_source", self.attn_source, ("input", "path"))
        check_choice("posnorm", self.posnorm, POSNORM_MODES)
        check_choice("posnorm_stage", self.posnorm_stage, ("ieg", "final"))
        check_choice("final_norm", self.final_norm, FINAL_NORMS)
        check_choice("token_reduction", self.token_reduction, TOKEN_REDUCTIONS)
        check_attn_layers(self.attn_layers)
        if self.n_pilot is not None:
            check_int("n_pilot", self.n_pilot, 2)
        for name in ("adaptive", "idg_compat_quirk", "attn_exclude_first", "attn_renorm", "stream_ef"):
            check_bool(name, getattr(self, name))
        if self.ef_mode == "autograd" and self.token_reduction != "sum":
            raise ValueError(f"ef_mode='autograd' supports token_reduction='sum' only, got {self.token_reduction!r}")
        if self.ef_mode == "completeness":
            if self.ef_norm != "none":
                raise ValueError(f"ef_mode='completeness' needs ef_norm='none' (a normalisation would undo its completeness), got {self.ef_norm!r}")
            if self.ef_sign != "abs":
                raise ValueError(f"ef_mode='completeness' needs ef_sign='abs' (its weights are never negative), got {self.ef_sign!r}")
            if not self.stream_ef:
                raise ValueError("ef_mode='completeness' needs stream_ef=True (its weights need the slopes of the gradient pass), got False")
        if self.attn_source == "path" and self.attn_layers == "rollout":
            raise ValueError("attn_source='path' does not support attn_layers='rollout'")


@register
class AIEG(Method):
    """AIEG_i = PosNorm(ieg)_i · a_i over attributable tokens; 0 elsewhere (specs/aieg.md §6, §9).

    * Grid (§6.4): IDG adaptive sampling from a pilot pass of ``n_pilot`` points (default M)
      with allocation ∝ |slope| (``alloc="abs"``), or uniform (``adaptive=False``).
    * Emphasis factor (§6.5): EF_m = |w_m| / Σ|w|, w_m = (f_m − f_{m−1}) δ_m/(α_m − α_{m−1}),
      w_1 = 0, from the path logits (forward-only pass); flat logit → 1/M (IG).
      ``ef_mode`` ∈ {fd, autograd, none, completeness}, ``ef_sign`` ∈ {abs, signed, relu,
      minmax}, ``ef_norm`` ∈ {l1, none}. ``ef_mode="completeness"`` (never normalised)
      weights step m by clip(Δf_m/((G_m·Δ)·g_m), 0, 1)·g_m, which damps steps whose gradient
      over-predicts the logit's change and, where no step is clipped, keeps Σ_i ieg_i equal to
      the logit's change along the grid (see :class:`AIEGOptions`).
    * IEG (§6.6): ieg_i = Σ_d Δ_{i,d} Σ_m EF_m G_{m,i,d} (``token_reduction`` sum / l2 / sum_abs).
    * Attention (§6.7): a_i = head-mean last-layer attention of the predicting position at
      α = 1 (``attn_layers`` last / all / rollout / [layers] / none = 1; ``attn_heads`` mean /
      max; ``attn_source`` input / path = |EF|-weighted mean along the path;
      ``attn_exclude_first``, ``attn_renorm`` renormalise over positions ≥ 1 / attributable).
    * PosNorm (§6.8): over attributable tokens before × attention (``posnorm`` relu_max, the
      default preset's / minmax, v1's / abs_sum / none; ``posnorm_stage="final"`` applies it to
      ieg·a instead).
    * ``final_norm`` (§6.9): none / sum / l2. ``"sum"`` divides by |Σ_i s_i|, so the scores sum
      to ±1 (−1 where the sum is negative, e.g. ``posnorm="none"``; the spec's "sums to 1"
      assumes a positive sum) and the order is kept.
    * ``stream_ef`` (engineering): compute the EF from the path logits of the gradient pass as
      it goes (default). False runs a forward-only pass over the grid first and then the
      gradient pass (same result, one more forward per step); ``ef_sign="minmax"`` always does.

    Cost: N pilot forwards + M forward/backward passes (+ one forward for the attention).
    Eager attention (which keeps L×L probabilities per head for the backward) is switched on
    only around the forwards that capture attention; the pilot and gradient passes use the
    model's own kernel.

    Ablations (§6.12): ``ef_mode="none"`` (no EF), ``attn_layers="none"`` (no attention),
    ``posnorm="none"`` (no PosNorm). With all three and ``adaptive=False`` AIEG equals
    ``integrated_gradients(integration="uniform")``.

    ``info`` holds ``ieg`` (raw signed scores), ``posnorm``, ``attention`` (these three over the
    example's own tokens, index i at token i; a generation step: its context), ``alphas``,
    ``ef``, ``path_logits`` (the grid's logits where the EF read them from the gradient pass
    or a forward pass of their own; None with ``ef_mode="autograd"``, and with ``ef_mode="none"``
    where the EF is not streamed: ``stream_ef=False`` or ``ef_sign="minmax"``), ``pilot_logits``,
    ``F_input``, ``F_baseline``.

    Options that do not apply are accepted and recorded as given, not used (recorded study
    settings combine them): ``n_pilot``, ``alloc``, ``idg_compat_quirk`` with
    ``adaptive=False``; ``attn_heads``, ``attn_source``, ``attn_exclude_first``, ``attn_renorm``
    with ``attn_layers="none"``; ``ef_sign`` with ``ef_mode="none"`` (``"minmax"`` only moves the
    gradient pass off the stream, as ``stream_ef=False``: the same scores to rounding).
    """

    name = "aieg"
    without_attention = "attn_layers='none'"
    doc = "Attended Integrated and Emphasized Gradients (reconstruction, specs/aieg.md §6)"
    Options = AIEGOptions
    uses_baseline = True
    uses_steps = True
    shares_pilot = True
    pilot_option = "n_pilot"
    raw_signal = "ieg"
    token_info = ("ieg", "posnorm", "attention")
    auto_steps_refusal = (
        "its weights follow the logit's slope along the path, so its scores do not sum to F(x) − F(x′) and "
        "completeness gives no error to refine against; pass an int n_steps (50 is usual), or use "
        "integrated_gradients with n_steps='auto'"
    )

    def normalisation(self, opts):
        parts = [f"PosNorm ({opts.posnorm})"] if opts.posnorm != "none" else []
        if opts.final_norm != "none":
            parts.append(f"final_norm={opts.final_norm!r}")
        return " and ".join(parts) or None

    def needs_attention(self, opts) -> bool:
        return opts.attn_layers != "none"

    def check_adapter(self, opts, adapter) -> None:
        if opts.attn_layers != "none":
            attention_layers(adapter, opts.attn_layers)  # the listed layers exist

    def run(self, ctx, o):
        use_attn = o.attn_layers != "none"
        layers = attention_layers(ctx.adapter, o.attn_layers) if use_attn else None
        n_pilot = ctx.n_steps if o.n_pilot is None else o.n_pilot
        ref = None
        if use_attn and o.attn_source == "input":  # one forward at α = 1 for the attention (and the prediction)
            with model_prepared(ctx.model, eager=True):
                ref = ctx.reference_forward(layers, full=o.attn_layers == "rollout", baseline=False)
        else:
            ctx.ensure_targets()
        alphas, pilot, ieg, efs, path = _path(ctx, o, n_pilot)
        a = _attention(ctx, o, layers, ref, alphas, efs)
        ieg_t = torch.stack(ieg)
        valid = ~ctx.batch.fixed
        if o.posnorm_stage == "ieg":
            p = ops.posnorm(ieg_t, valid, o.posnorm, backend=ctx.backend).float()
            scores = p * a
        else:
            p = ops.posnorm(ieg_t * a, valid, o.posnorm, backend=ctx.backend).float()
            scores = p
        scores = torch.where(valid, scores, torch.zeros_like(scores))
        if o.final_norm == "sum":
            scores = scores / scores.sum(-1, keepdim=True).abs().clamp_min(1e-30)
        elif o.final_norm == "l2":
            scores = scores / scores.norm(dim=-1, keepdim=True).clamp_min(1e-30)
        ends = pilot if pilot is not None else path  # both grids hold α = 0 and α = 1
        if ends is None:
            r = ctx.reference_forward()
            F_in, F_base = r["F_input"], r["F_baseline"]
        else:
            F_in, F_base = torch.stack([e[-1] for e in ends]), torch.stack([e[0] for e in ends])
        cut = ctx.batch.per_example  # per-token entries over each example's own tokens
        info = {
            "F_input": F_in.tolist(), "F_baseline": F_base.tolist(),
            "ieg": cut(ieg_t), "posnorm": cut(p), "attention": cut(a), "alphas": [x.tolist() for x in alphas],
            "ef": [e.tolist() for e in efs],
            "path_logits": [x.tolist() for x in path] if path is not None else None,
            "pilot_logits": [x.tolist() for x in pilot] if pilot is not None else None,
        }
        opts = dict(o.as_dict(), n_pilot=n_pilot, internal_batch_size=ctx.chunk, ref_token_id=ctx.ref_token_id)
        del opts["stream_ef"]  # an engineering switch with the same result, not a setting of the scores
        return MethodOutput(list(scores), opts, info)


def _path(ctx, o, n_pilot):
    """(alphas, pilot logits, ieg, efs, path logits): the grid and the emphasised path integral.
    Inside :meth:`Explainer.shared_paths` a variant with the same grid and EF options on the same
    input reuses them (the options after the path do not enter the key); the reused tensors
    are only read."""
    shareable = ctx.path_memo is not None and ctx.pilot_logits is None  # a caller's pilot is not in the key
    key = ctx.memo_key("aieg", n_pilot, o.adaptive, o.alloc, o.idg_compat_quirk, o.ef_mode, o.ef_sign, o.ef_norm,
                       o.token_reduction, o.stream_ef) if shareable else None
    if key is not None and key in ctx.path_memo:
        out, used, compiled = ctx.path_memo[key]
        ops.record_used(used)  # the backends that computed the reused path
        ctx.compile_report["graphs"] += [g for g in compiled if g not in ctx.compile_report["graphs"]]
        ctx.timing["pilot"] = ctx.timing["path"] = 0.0
        return out
    n_graphs = len(ctx.compile_report["graphs"])
    with ops.recording() as used:
        alphas, widths, pilot = adaptive_grid(ctx, n_pilot, o.adaptive, o.alloc, o.idg_compat_quirk)
        with ctx.timed("path"):
            if o.ef_mode == "autograd":
                ieg, efs, path = _autograd_ef(ctx, alphas, widths, o.ef_sign, o.ef_norm)
            elif o.ef_sign == "minmax" or not o.stream_ef:
                efs, path = emphasis(ctx, alphas, widths, o.ef_mode, o.ef_sign, o.ef_norm)
                ieg = integrate(ctx, alphas, efs, o.token_reduction)
            else:
                ieg, efs, path = integrate_emphasized(ctx, alphas, widths, o.ef_mode, o.ef_sign, o.ef_norm, o.token_reduction)
    out = (alphas, pilot, ieg, efs, path)
    if key is not None:
        ctx.path_memo[key] = (out, dict(used), [list(g) for g in ctx.compile_report["graphs"][n_graphs:]])
    return out


def _attention(ctx, o, layers, ref, alphas, efs):
    """The attention term a: Tensor[B, L] (ones when ``attn_layers="none"``)."""
    B, L = ctx.batch.ids.shape
    if layers is None:
        return torch.ones(B, L, device=ctx.device)
    if o.attn_source == "input":
        a = attention_rows(ctx.adapter, ctx.batch, ref["attn"], o.attn_layers, o.attn_heads, ctx.backend)
    else:
        with model_prepared(ctx.model, eager=True):
            a = _path_attention(ctx, alphas, efs, layers, o.attn_heads)
    if o.attn_exclude_first:
        a = a.clone()
        first = torch.tensor(ctx.batch.offsets, device=ctx.device)
        a[torch.arange(B, device=ctx.device), first] = 0
        a = a / a.sum(-1, keepdim=True).clamp_min(1e-30)
    if o.attn_renorm:
        a = torch.where(~ctx.batch.fixed, a, torch.zeros_like(a))
        a = a / a.sum(-1, keepdim=True).clamp_min(1e-30)
    return a


def _autograd_ef(ctx, alphas, widths, ef_sign, ef_norm):
    """EF from autograd slopes r_m = G_m·Δ (IDG's original code): per-step token contributions are kept."""
    B, L = ctx.batch.ids.shape
    contrib = [torch.zeros(a.numel(), L, device=ctx.device) for a in alphas]
    delta = ctx.batch.delta
    for b, ms, f, g in path_chunks(ctx, alphas, True):
        contrib[b][ms] = (g.float() * delta[b].float()).sum(-1)
    efs, ieg = [], []
    for b in range(B):
        r = contrib[b].sum(-1)
        ef = ops.emphasis_factors(r, alphas[b], widths[b], "autograd", ef_sign, ef_norm, backend=ctx.backend).float()
        efs.append(ef)
        ieg.append(ef @ contrib[b])
    return ieg, efs, None


def _path_attention(ctx, alphas, efs, layers, attn_heads):
    """|EF|-weighted mean of the attention rows along the path (``attn_source="path"``)."""
    batch, chunk, dev = ctx.batch, ctx.chunk, ctx.device
    heads = 1 if attn_heads == "max" else ctx.adapter.n_heads
    rows_per_b = [torch.zeros(a.numel(), heads, batch.ids.shape[1], device=dev) for a in alphas]
    with AttentionCapture(ctx.adapter, layers) as cap:
        for b in range(batch.B):
            for s in range(0, alphas[b].numel(), chunk):
                ms = list(range(s, min(s + chunk, alphas[b].numel())))
                X = ops.interpolate_path(batch.embeds[b], batch.baseline[b], alphas[b][ms], batch.fixed[b], backend=ctx.backend)
                rows = torch.full((len(ms),), b, device=dev, dtype=torch.long)
                cap.last_index = batch.last_index[rows]
                with torch.no_grad():
                    ctx.hidden(rows, X)
                got = cap.pop()
                A = torch.stack([got[l].float() for l in layers])  # [layers, points, H, L]
                if attn_heads == "max":  # each layer's maximum over heads, then the layers' mean (as "input")
                    A = A.amax(2, keepdim=True)
                rows_per_b[b][ms] = A.mean(0)
    out = []
    for b in range(batch.B):
        w = efs[b].abs().float()
        w = w / w.sum().clamp_min(1e-30)
        if attn_heads == "max":
            out.append((w.view(-1, 1) * rows_per_b[b][:, 0]).sum(0))
        else:
            out.append(ops.attention_gradient_product(rows_per_b[b].unsqueeze(2), None, w, "attention", backend=ctx.backend)[0].float())
    return torch.stack(out)
