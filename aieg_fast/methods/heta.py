"""HETA: Hessian-Enhanced Token Attribution (specs/heta.md).

Source: Pramanik, Maliha, Bastian & Jha, "Hessian-Enhanced Token Attribution (HETA): Interpreting
Autoregressive LLMs", ICLR 2026, arXiv 2604.13258; written from ``specs/heta.md`` (the paper's
equations restated, and what the public code does differently). No code from the public
repository is used.

For the target x_T and each attributable context token i (paper Eq. 5):

    Attr_i = M_T[i] · (β·S_i + γ·I_i)

* M_T, the gate (§1, :mod:`~aieg_fast.core.value_flow`): the attention rollout row of the
  predicting position after each layer times the value-norm weights ‖v_i W_O^h‖₁, summed over
  layers and heads, clipped at 0 and normalised to sum 1;
* S_i, the curvature (§2, :mod:`~aieg_fast.core.curvature`): the mean ℓ1 norm of m
  Hessian-vector products of log p(x_T) with Rademacher probes on token i's embedding block;
* I_i, the information (§3, :mod:`~aieg_fast.core.occlusion`): KL(P(·|x) ‖ P(·|x with token i
  masked)) of the next-token distribution, the masked inputs batched.

Of the paper's options for very large models (specs/heta.md §2), the curvature of the last k
layers is ``curvature_layers``; its low-rank and Fisher approximations of the Hessian are not
offered (the public code does not implement them either, and the spec gives no formula to
follow): S is always the exact Hessian-vector product.
"""
from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from ..core.batch import Batch
from ..core.capture import AttentionCapture, ProjectionCapture, ResidualCapture, ResidualInput
from ..core.curvature import rademacher_probes, token_hvp_l1
from ..core.model_state import model_prepared
from ..core.objective import target_scores
from ..core.occlusion import occlude, occlusion_groups, reference_outputs, runs_after_prefix, spread
from ..core.path import machine_memory
from ..core.validation import check_choice, check_int, check_number
from ..core.value_flow import ROLLOUTS, VALUE_SOURCES, flow_gate, residual_values, value_norms
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["HETA", "HETAOptions", "COMPONENTS", "PRESETS", "windows"]

#: the three terms of Eq. 5
COMPONENTS = ("gate", "curvature", "information")
OBJECTIVES = ("auto", "logprob", "target_fn")
COMPONENT_NORMS = ("none", "sum")
GATE_NORMS = ("attributable", "context")

#: settings of each preset; explicit options override them
PRESETS: Dict[str, Dict[str, str]] = {
    # the paper's gate with the standard head-mean rollout and the values the model computes ([RECON])
    "paper": dict(rollout="head_mean", value_source="values", gate_norm="attributable"),
    # the public code's choices ([CODE]): per-head chaining, values from the residual stream before
    # the norm without biases, M_T normalised over every context position (special tokens included)
    "official": dict(rollout="per_head", value_source="residual", gate_norm="context"),
}


def _optional_int(name: str, value, minimum: int) -> None:
    if value is not None:
        check_int(name, value, minimum)


@dataclass(frozen=True)
class HETAOptions(Options):
    """Options of :class:`HETA`; None takes the preset's value.

    ============ ============= ================ ==================
    preset       rollout       value_source     gate_norm
    ============ ============= ================ ==================
    ``paper``    ``head_mean`` ``values``       ``attributable``
    ``official`` ``per_head``  ``residual``     ``context``
    ============ ============= ================ ==================

    Attributes:
        preset: ``"paper"`` (default) or ``"official"`` (the public code's choices, spec §1 [CODE]).
        components: the terms computed, any of ``"gate"``, ``"curvature"``, ``"information"``
            (a list, or a comma-separated string); default all three. A missing gate counts as
            1, missing terms as 0 (the gate alone gives M_T).
        beta, gamma: weights of S and I (numbers ≥ 0; default 0.5 each, Eq. 5).
        n_probes: Rademacher probes m per token (int ≥ 1, default 10).
        objective: the f whose Hessian S measures: ``"logprob"`` (log p(target) over the
            vocabulary or the classes, the paper's; with ``contrast_target`` c,
            log p(target) − log p(c) = z_target − z_c), ``"target_fn"`` (the call's F), or
            ``"auto"`` (default: ``"logprob"`` when the call explains the plain logit, the
            package's default, else the call's F, e.g. ``label_logprob`` in ``evaluate``).
        component_norm: ``"none"`` (default, the paper's: S and I on their own scales) or
            ``"sum"`` (each divided by its sum over the attributable tokens first).
        curvature_layers: take S with respect to the residual stream entering the last k blocks
            (derivatives through those blocks only; the paper's option for very large models);
            None (default) = the token embeddings.
        gate_layers: use only the last k layers in the gate (the public code's ``layer_subset``);
            None = all.
        rollout: ``"head_mean"`` (Â = ½·mean_h A + ½I per layer) or ``"per_head"`` (head h of
            layer l chained with head h of layer l − 1).
        value_source: ``"values"`` (the values the model computes, after its norm, biases
            included, each query head reading its KV group) or ``"residual"`` (the residual
            stream before the block's norm times the value projection, biases removed).
        gate_norm: the positions M_T is normalised over: ``"attributable"`` (special and
            template tokens excluded) or ``"context"`` (every position up to the predicting one).
        window: score texts of more than ``window`` attributable tokens in windows of that many
            tokens (int ≥ 2), each with the tokens before the text (BOS, template head) and
            after it (template tail, ending at the predicting position); averaged where windows
            overlap, M_T renormalised afterwards (spec §5; the paper's long-context mode uses 512).
            None (default) = the whole input.
        window_overlap: the fraction of a window shared with the next (0 ≤ overlap < 1, default 0.5).
        probe_seed: seed of the probes (int ≥ 0).

    An option of a term that ``components`` leaves out (``n_probes`` without curvature,
    ``gate_layers`` without the gate, ``window_overlap`` without ``window``) has no effect and
    is recorded as given, as AIEG's options that do not apply: a method-wide option
    (``--method-options``) reaches every spec of the method, the ablations of single terms too.
    """

    preset: str = "paper"
    components: Any = COMPONENTS
    beta: float = 0.5
    gamma: float = 0.5
    n_probes: int = 10
    objective: str = "auto"
    component_norm: str = "none"
    curvature_layers: Optional[int] = None
    gate_layers: Optional[int] = None
    rollout: Optional[str] = None
    value_source: Optional[str] = None
    gate_norm: Optional[str] = None
    window: Optional[int] = None
    window_overlap: float = 0.5
    probe_seed: int = 0

    def validate(self):
        check_choice("preset", self.preset, tuple(PRESETS))
        self.component_set()
        check_number("beta", self.beta)
        check_number("gamma", self.gamma)
        check_int("n_probes", self.n_probes, 1)
        check_choice("objective", self.objective, OBJECTIVES)
        check_choice("component_norm", self.component_norm, COMPONENT_NORMS)
        _optional_int("curvature_layers", self.curvature_layers, 1)
        _optional_int("gate_layers", self.gate_layers, 1)
        _optional_int("window", self.window, 2)
        for name, choices in (("rollout", ROLLOUTS), ("value_source", VALUE_SOURCES), ("gate_norm", GATE_NORMS)):
            if getattr(self, name) is not None:
                check_choice(name, getattr(self, name), choices)
        check_number("window_overlap", self.window_overlap)
        if not self.window_overlap < 1:
            raise ValueError(f"window_overlap must be in [0, 1), got {self.window_overlap!r}")
        check_int("probe_seed", self.probe_seed, 0)

    def component_set(self) -> Tuple[str, ...]:
        """The components as a tuple in the order of :data:`COMPONENTS`.

        Raises:
            ValueError: empty, unknown or repeated names.
        """
        c = self.components
        items = [x.strip() for x in c.split(",") if x.strip()] if isinstance(c, str) else c
        if not isinstance(items, (list, tuple)) or not items or any(x not in COMPONENTS for x in items) or len(set(items)) != len(items):
            raise ValueError(f"components must be a non-empty list of distinct names from {list(COMPONENTS)}, got {c!r}")
        return tuple(x for x in COMPONENTS if x in items)

    def settings(self) -> Dict[str, Any]:
        """The preset with the explicit options applied."""
        s = dict(PRESETS[self.preset])
        for name in ("rollout", "value_source", "gate_norm"):
            if getattr(self, name) is not None:
                s[name] = getattr(self, name)
        return s


def windows(n: int, size: Optional[int], overlap: float) -> List[Tuple[int, int]]:
    """[start, end) windows over n tokens: ``size`` tokens each, a new one every
    max(1, ⌊size·(1 − overlap)⌋) tokens, the last one ending at n; one window when n ≤ size."""
    if size is None or n <= size:
        return [(0, n)]
    stride = max(1, int(size * (1.0 - overlap)))
    out, start = [], 0
    while True:
        end = min(start + size, n)
        out.append((start, end))
        if end == n:
            return out
        start += stride


# ============================================================================================
# the three components on one batch
# ============================================================================================
def _gate(ctx, s, layers, cap, proj, resid) -> Tensor:
    """M_T before normalisation from the captures of the reference forward: Tensor[B, L]."""
    ad = ctx.adapter
    attn = cap.pop()
    norms = []
    for l in layers:
        v = proj.v[l] if s["value_source"] == "values" else residual_values(proj.v_point[l], resid.inputs[l])
        norms.append(value_norms(v, ad.output_projection(l), ad.n_heads, ad.n_kv_heads))
    return flow_gate([attn[l] for l in layers], norms, ctx.batch.last_index, s["rollout"] == "per_head")


def _normalise_gate(ctx, gate: Tensor, how: str) -> Tensor:
    """Clip at 0 and normalise over the attributable (or all context) positions; uniform when 0."""
    b = ctx.batch
    pos = torch.arange(b.ids.shape[1], device=ctx.device)
    context = b.attention_mask.bool() & (pos.unsqueeze(0) <= b.last_index.unsqueeze(1))
    keep = (~b.fixed) if how == "attributable" else context
    g = torch.where(keep, gate.clamp_min(0.0), torch.zeros_like(gate))
    Z = g.sum(-1, keepdim=True)
    uniform = keep.float() / keep.float().sum(-1, keepdim=True).clamp_min(1.0)
    return torch.where(Z > 0, g / Z.clamp_min(1e-30), uniform)


def _objective(ctx, h: Tensor, objective: str, rows: Tensor) -> Tensor:
    """f of final hidden states ``h`` [G, D] of example rows ``rows`` [G]: Tensor[G] float32."""
    if objective == "logprob":
        pick = (lambda t: t[rows]) if ctx.batch.B > 1 else (lambda t: t)  # noqa: E731  (B = 1: one target broadcasts)
        contrast = None if ctx.contrast is None else pick(ctx.contrast)
        return target_scores(ctx.adapter, h, pick(ctx.targets), "logprob", contrast).float()
    return ctx.score(h, rows)


def _curvature(ctx, s, m: int, seed: int):
    """S per position (Tensor[B, L], 0 where not scored), HVPs per example, double-backward calls.

    Per example (its unpadded positions up to the predicting one): one forward keeps the keys and
    values of every layer (and, with ``curvature_layers``, the residual stream entering the first
    block differentiated), then each scored token's HVPs run on the positions from that token on
    (:func:`~aieg_fast.core.curvature.token_hvp_l1`; the whole sequence for a family without a KV
    cache). The Hessian is of the token embeddings the decoder works with: an adapter in an
    unscaled table (Gemma, ×√d inside the model) has its S divided by the scale squared
    (``token_embeddings_scale``), as ``curvature_layers = n_layers`` measures it."""
    ad, b = ctx.adapter, ctx.batch
    S = torch.zeros(b.ids.shape, dtype=torch.float32, device=ctx.device)
    counts, calls = [], 0
    prefix = ad.has_kv_cache
    top = ad.n_layers - s["curvature_layers"] if s["curvature_layers"] else None
    budget = ctx.chunk * b.ids.shape[1]  # position rows per double backward, as chunk full-length rows
    fixed, lasts = b.fixed.cpu(), b.last_index.tolist()
    for i in range(b.B):
        o, last = b.offsets[i], int(lasts[i])
        E = b.embeds[i, o : last + 1].detach()
        scored = [p - o for p in range(o, last + 1) if not bool(fixed[i, p])]
        counts.append(len(scored) * m)
        if not scored:
            continue
        with contextlib.ExitStack() as stack, torch.no_grad():
            cap = stack.enter_context(ResidualCapture(ad, [top])) if top is not None else None
            kv = ad.prefix_keys_values(E.unsqueeze(0)) if prefix else None
            if cap is not None and kv is None:
                ad.hidden_last(E.unsqueeze(0), None, None, None)
            X = cap.inputs[top][0] if cap is not None else E

        def objective(start: int, rows: Tensor, i=i, E=E, kv=kv) -> Tensor:
            G = rows.shape[0]
            of = torch.full((G,), i, dtype=torch.long, device=ctx.device)
            if top is None:
                return _objective(ctx, ad.hidden_last_after(kv, start, rows), s["objective"], of)
            with ResidualInput(ad, top, rows):
                h = ad.hidden_last_after(kv, start, E[start:].unsqueeze(0).expand(G, -1, -1))
            return _objective(ctx, h, s["objective"], of)

        probes = rademacher_probes(scored, m, X.shape[-1], seed)
        Si, c = token_hvp_l1(objective, X, scored, probes, budget, prefix, ctx.backend, ctx.progress)
        if top is None:  # H in the decoder's token-embedding space: the table's H / c² (Gemma's √d)
            Si = Si / ad.token_embeddings_scale ** 2
        S[i, torch.tensor(scored, device=ctx.device) + o] = Si
        calls += c
    return S, counts, calls


def _components(ctx, s, m: int, seed: int) -> Dict[str, Any]:
    """Gate, curvature and information of ``ctx.batch`` (the ones in ``s["components"]``)."""
    ad, b = ctx.adapter, ctx.batch
    comps = s["components"]
    n_attr = (~b.fixed).sum(-1).tolist()

    def kept(a: int, runs: bool) -> int:  # the forward per example that keeps its prefix (keys and values, residuals)
        return int(runs and a > 0)

    out: Dict[str, Any] = {"n_forwards": [1] * b.B, "n_hvp": [0] * b.B, "hvp_batches": 0}
    layers = list(range(ad.n_layers - (s["gate_layers"] or ad.n_layers), ad.n_layers)) if "gate" in comps else []
    with ctx.timed("reference_gate"), contextlib.ExitStack() as stack:
        cap = proj = resid = None
        if layers:
            cap = stack.enter_context(AttentionCapture(ad, layers, full=True))
            proj = stack.enter_context(ProjectionCapture(ad, layers, None, False))
            if s["value_source"] == "residual":
                resid = stack.enter_context(ResidualCapture(ad, layers))
        ref = reference_outputs(ctx, "kl")
    out["F_input"] = ref["F"]
    out["target_logprob"] = ref["logp"].gather(-1, ctx.targets.view(-1, 1).expand(b.B, 1)).squeeze(-1)
    if layers:
        with ctx.timed("gate"):
            out["gate"] = _normalise_gate(ctx, _gate(ctx, s, layers, cap, proj, resid), s["gate_norm"])
    if "information" in comps:
        with ctx.timed("information"):
            groups = [occlusion_groups(b.fixed[i], "token") for i in range(b.B)]
            kl = occlude(ctx, groups, "kl", ref)
            out["information"] = torch.stack([spread(g, v) for g, v in zip(groups, kl)])
        out["n_forwards"] = [n + a + kept(a, runs_after_prefix(ctx)) for n, a in zip(out["n_forwards"], n_attr)]
    if "curvature" in comps:
        with ctx.timed("curvature"):
            out["curvature"], out["n_hvp"], out["hvp_batches"] = _curvature(ctx, s, m, seed)
        # _curvature's first forward per example: the KV cache, or the residuals with curvature_layers
        runs = ad.has_kv_cache or bool(s["curvature_layers"])
        out["n_forwards"] = [n + a + kept(a, runs) for n, a in zip(out["n_forwards"], n_attr)]
    return out


# ============================================================================================
# windows over long inputs
# ============================================================================================
def _window_rows(b: Batch, i: int, size: int, overlap: float) -> List[List[int]]:
    """Positions of each window of example i: the tokens before the text, a window of its
    attributable span, the tokens after the text up to the predicting position."""
    last = int(b.last_index[i])
    attr = [p for p in range(b.offsets[i], last + 1) if not bool(b.fixed[i, p])]
    head = list(range(b.offsets[i], attr[0]))
    tail = list(range(attr[-1] + 1, last + 1))
    return [head + list(range(attr[s], attr[e - 1] + 1)) + tail for s, e in windows(len(attr), size, overlap)]


def _window_batch(b: Batch, rows: List[Tuple[int, List[int]]]) -> Batch:
    """A right-padded batch of windows (example, positions), positions renumbered from 0."""
    n, L = len(rows), max(len(p) for _, p in rows)
    dev = b.ids.device
    idx = torch.zeros(n, L, dtype=torch.long, device=dev)
    src = torch.tensor([i for i, _ in rows], device=dev)
    mask = torch.zeros(n, L, dtype=torch.long, device=dev)
    for w, (_, p) in enumerate(rows):
        idx[w, : len(p)] = torch.tensor(p, device=dev)
        mask[w, : len(p)] = 1
    pad = mask == 0
    take = lambda t: t[src.view(-1, 1), idx]  # noqa: E731
    fixed = take(b.fixed) | pad
    lengths = tuple(len(p) for _, p in rows)
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    return Batch(take(b.ids), mask, pos, torch.tensor([k - 1 for k in lengths], device=dev), fixed,
                 take(b.embeds), take(b.baseline), lengths, (0,) * n)


def _windowed(ctx, s, m: int, seed: int, size: int, overlap: float) -> Dict[str, Any]:
    """The components averaged over the windows of each example (spec §5)."""
    b = ctx.batch
    with torch.no_grad():
        ref = reference_outputs(ctx, "kl")
    rows = [(i, p) for i in range(b.B) for p in _window_rows(b, i, size, overlap)]
    src = torch.tensor([i for i, _ in rows], device=ctx.device)
    sub = dataclasses.replace(ctx, batch=_window_batch(b, rows), targets=ctx.targets[src], probs=None, word_ids=None, _chunk=None,
                              contrast=None if ctx.contrast is None else ctx.contrast.expand(b.B)[src])
    part = _components(sub, s, m, seed)
    out: Dict[str, Any] = {"F_input": ref["F"], "hvp_batches": part["hvp_batches"],
                           "target_logprob": ref["logp"].gather(-1, ctx.targets.view(-1, 1)).squeeze(-1),
                           "n_forwards": [1] * b.B, "n_hvp": [0] * b.B}
    count = torch.zeros(b.ids.shape, device=ctx.device)
    acc = {k: torch.zeros(b.ids.shape, device=ctx.device) for k in COMPONENTS if k in part}
    for w, (i, p) in enumerate(rows):
        pt = torch.tensor(p, device=ctx.device)
        count[i, pt] += 1
        for k in acc:
            acc[k][i, pt] += part[k][w, : len(p)]
        out["n_forwards"][i] += part["n_forwards"][w]
        out["n_hvp"][i] += part["n_hvp"][w]
    for k in acc:
        out[k] = torch.where(count > 0, acc[k] / count.clamp_min(1.0), torch.zeros_like(acc[k]))
    if "gate" in out:
        out["gate"] = _normalise_gate(ctx, out["gate"], s["gate_norm"])
    return out


# ============================================================================================
# the method
# ============================================================================================
def _scaled(x: Tensor, keep: Tensor, how: str) -> Tensor:
    if how == "none":
        return x
    Z = torch.where(keep, x, torch.zeros_like(x)).sum(-1, keepdim=True)
    return torch.where(Z > 0, x / Z.clamp_min(1e-30), torch.zeros_like(x))


def _check_probe_memory(n_tokens: int, m: int, d: int) -> None:
    """Refuse, before any work, ``m`` probes per token whose array alone
    (:func:`~aieg_fast.core.curvature.rademacher_probes`: ``n_tokens`` × m × d float32 values)
    exceeds this machine's memory (:func:`~aieg_fast.core.path.machine_memory`).

    Raises:
        ValueError: names ``n_probes``, the memory it would need and the memory there is.
    """
    need, have = 4 * n_tokens * m * d, machine_memory()
    if need > have:
        fit = max(1, have // max(4 * n_tokens * d, 1))
        raise ValueError(f"n_probes={m} would need about {need / 1e9:.3g} GB for the probes alone ({n_tokens} tokens × {m} "
                         f"probes × {d} values × 4 bytes), more than this machine's {have / 1e9:.3g} GB; use n_probes well "
                         f"below {fit} (the paper's preset uses 10)")

@register
class HETA(Method):
    """HETA_i = M_T[i] · (β·S_i + γ·I_i) (specs/heta.md §4, paper Eq. 5), ≥ 0.

    Per example (attributable context tokens i, predicting position t, target x_T):

    * M_T (gate, §1): ρ_l, the rollout row of t after layer l (Â = ½A + ½I, rows renormalised;
      head-mean or per head, :data:`PRESETS`), times w_i^{(l,h)} = ‖v_i W_O^h‖₁, summed over
      layers and heads, clipped at 0, normalised to sum 1 (uniform when all are 0). Rows carried
      as vectors: O(H·N²·L²) for N layers, no L×L matrix products.
    * S_i (curvature, §2): (1/m) Σ_k ‖Π_i ∇²f (Π_i r_k)‖₁ with f = log p(x_T) (``objective``),
      m = ``n_probes`` Rademacher probes on token i's block. f is differentiated with respect to
      token i's row only, on the positions from i on after the example's cached keys and values
      (causal attention: the positions before i do not depend on it); the m probes of a token,
      and of neighbouring tokens, run as one batched double backward within
      ``internal_batch_size`` whole-length rows (or what fits ``max_memory``), and the ℓ1 norms
      are reduced by the ``hvp_l1_mean`` kernel (:mod:`~aieg_fast.core.curvature`).
    * I_i (information, §3): KL(P(·|x) ‖ P(·|x with token i replaced)), the replacement the
      call's ``baseline=`` (default ``"zero"``, the public code's mask; ``"mean"``, ``"unk"``,
      the reference token, a tensor, or noise with ``n_baseline_samples``; with ``alpha_range=(a, 1)``
      token i becomes x′ + a·(x − x′), as in occlusion), the n masked inputs
      batched, each run from its token on after the cached prefix (:mod:`~aieg_fast.core.occlusion`).

    Cost per target (n scored tokens of a sequence of L): one forward with the attention
    captured; n masked forwards; per token one forward with graph and its create-graph backward
    and m HVPs (each about two backward passes), all of them on the L − i positions from token i
    on (about half of L on average; whole sequences for a family without a KV cache, Mamba);
    one forward per example keeping its keys and values for each of the last two. Eager
    attention is used throughout (SDPA has no double backward). Memory: the gate keeps the
    attention of every gate layer (H·N·L² values per example) and a double backward holds about
    ``internal_batch_size`` whole-length copies of the backward's activations; use ``window``
    for long inputs. ``timing``: ``reference_gate``, ``gate``, ``information``, ``curvature``.

    ``info`` (per example; token lists over the example's tokens): ``gate``, ``curvature``,
    ``information`` (the computed components, before β, γ), ``F_input``, ``target_logprob``,
    ``n_hvp``, ``n_forwards`` (forwards over whole or partial rows: the reference, the masked
    inputs, one curvature row per token, and the prefix forwards); shared: ``hvp_batches``
    (double-backward calls).

    Differences from the public code (``preset="official"`` keeps the first three): see
    :class:`HETAOptions` and the README; its grouped-query value norms use a wrong head width,
    ours read each query head's KV group in both presets; its KL clamps probabilities at 1e-10,
    ours is exact; its windows drop BOS and template tokens, ours keep them.

    Raises:
        ValueError: ``curvature_layers`` / ``gate_layers`` above the model's layers; a
            multi-token target.
    """

    name = "heta"
    token_info = ("gate", "curvature", "information")
    without_attention = "components='curvature,information'"
    doc = "HETA: attention-value gate x (Hessian sensitivity + KL of masking) (Pramanik et al., ICLR 2026)"
    Options = HETAOptions
    uses_baseline = True
    default_baseline = "zero"

    def non_finite_hint(self, opts, baseline: str, dtype) -> str:
        """For float16 weights with the curvature term: its second derivatives overflow float16
        on some models (OPT, Falcon: the scores all NaN whatever the baseline), and what to do;
        else the baseline hint of the information term's mask."""
        if dtype == torch.float16 and "curvature" in opts.component_set():
            return ("; the curvature term (second derivatives) can overflow float16 on this model: load it in bfloat16 or "
                    "float32, or leave the term out (components='gate,information')")
        return super().non_finite_hint(opts, baseline, dtype)

    def needs_attention(self, opts) -> bool:
        return "gate" in opts.component_set()

    def check_adapter(self, opts, adapter) -> None:
        for name in ("curvature_layers", "gate_layers"):
            k = getattr(opts, name)
            if k is not None and k > adapter.n_layers:
                raise ValueError(f"{name} must be at most the model's {adapter.n_layers} layers, got {k}")
        if "curvature" in opts.component_set():  # probes that overflow memory for one token, before any work
            _check_probe_memory(1, opts.n_probes, adapter.hidden_size)

    def _settings(self, ctx, o) -> Dict[str, Any]:
        ad = ctx.adapter
        self.check_adapter(o, ad)
        if ctx.step_ids is not None:
            raise ValueError("heta explains a single target token")
        if "curvature" in o.component_set():
            _check_probe_memory(int((~ctx.batch.fixed).sum(-1).max()), o.n_probes, ad.hidden_size)
        s = dict(o.settings(), components=o.component_set(), curvature_layers=o.curvature_layers, gate_layers=o.gate_layers)
        auto = isinstance(ctx.target_fn, str) and ctx.target_fn == "logit"
        s["objective"] = o.objective if o.objective != "auto" else ("logprob" if auto else "target_fn")
        return s

    def run(self, ctx, o):
        s = self._settings(ctx, o)
        b = ctx.batch
        with model_prepared(ctx.model, eager=ctx.adapter.has_attention):
            big = o.window is not None and int((~b.fixed).sum(-1).max()) > o.window
            if big:
                ctx.ensure_targets()
                parts = _windowed(ctx, s, o.n_probes, o.probe_seed, o.window, o.window_overlap)
            else:
                parts = _components(ctx, s, o.n_probes, o.probe_seed)
        keep = ~b.fixed
        term = torch.zeros(b.ids.shape, device=ctx.device)
        if "curvature" in parts:
            term = term + o.beta * _scaled(parts["curvature"], keep, o.component_norm)
        if "information" in parts:
            term = term + o.gamma * _scaled(parts["information"], keep, o.component_norm)
        if "curvature" not in parts and "information" not in parts:
            term = torch.ones_like(term)
        scores = parts["gate"] * term if "gate" in parts else term
        scores = torch.where(keep, scores, torch.zeros_like(scores))
        info = {k: b.per_example(parts[k]) for k in COMPONENTS if k in parts}
        info.update(F_input=parts["F_input"].tolist(), target_logprob=parts["target_logprob"].tolist(),
                    n_hvp=list(parts["n_hvp"]), n_forwards=list(parts["n_forwards"]), hvp_batches=int(parts["hvp_batches"]))
        opts = dict(s, components=list(s["components"]), preset=o.preset, beta=o.beta, gamma=o.gamma, n_probes=o.n_probes,
                    component_norm=o.component_norm, window=o.window, window_overlap=o.window_overlap, probe_seed=o.probe_seed,
                    internal_batch_size=ctx.chunk, windowed=bool(big))
        return MethodOutput(list(scores), opts, info)
