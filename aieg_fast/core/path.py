"""The path engine: straight-line paths E′ + α(E − E′) in chunks, integration of the gradients,
emphasized integration (streamed emphasis factors), path logits and the adaptive grid.

Every function takes the call's :class:`~aieg_fast.core.context.Context`. Path points of all
examples are flattened (example by example, steps in order) and cut into chunks of
``ctx.chunk`` points; each chunk is one batched forward (and backward when gradients are
needed). Kernels: ``ops.interpolate_path``, ``ops.integrate_gradients``,
``ops.emphasis_factors``, ``ops.adaptive_alphas``.
"""
from __future__ import annotations

import os
from typing import Iterator, List, Optional, Tuple

import torch
from torch import Tensor

from .. import ops
from ..reference import uniform_alphas
from .compiled import chunk_rows
from .validation import check_positive_int, parse_memory

__all__ = [
    "TOKEN_REDUCTIONS", "reduce_tokens", "path_chunks", "integrate", "integrate_emphasized", "path_logits",
    "adaptive_grid", "emphasis", "completeness_info", "sequence_pilot_logits", "bytes_per_path_point", "chunk_size", "DEFAULT_MAX_MEMORY",
    "BYTES_PER_STEP", "check_chunk_settings", "check_step_memory", "machine_memory",
]

#: the budget for the automatic internal batch size when no ``max_memory`` is given
DEFAULT_MAX_MEMORY = "2GB"
#: memory of the per-step arrays of one path step of one example, apart from the model's own
#: activations (bounded by the chunk): grid, weights, widths, path logits and emphasis factors
#: as tensors, and the Python lists of the result's ``info`` (AIEG stores four per step)
BYTES_PER_STEP = 256


def machine_memory() -> int:
    """Physical memory of this machine in bytes (2**40 when the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 2**40


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} PB"


def check_step_memory(method, opts, n_steps: int, rows: int) -> None:
    """Refuse, before any work, a call whose per-step arrays alone (the ``method``'s
    ``step_bytes(opts, n_steps)`` × ``rows`` examples or generation steps) exceed this machine's
    memory (:func:`machine_memory`), naming the grid that drives it (``method.largest_grid``:
    ``n_steps``, or a pilot grid's option such as AIEG's ``n_pilot``).

    Raises:
        ValueError: names that option and its value, the memory it would need and the memory there is.
    """
    have = machine_memory()
    need = method.step_bytes(opts, n_steps) * rows
    if need > have:
        setting, steps = method.largest_grid(opts, n_steps)
        per = need / max(rows, 1) / max(steps, 1)
        fit = int(have / max(rows, 1) / max(per, 1))
        raise ValueError(
            f"{setting}={steps} would need about {_size(need)} of memory for its per-step arrays alone "
            f"({rows} row(s) × {steps} steps × about {_size(per)} per step), more than this machine's {_size(have)}; "
            f"use {setting} well below {fit} (50 to 300 is usual)"
        )


def check_chunk_settings(internal_batch_size, max_memory) -> None:
    """``internal_batch_size`` a positive int (not a bool) or None, ``max_memory`` parseable
    (:func:`~aieg_fast.core.validation.parse_memory`) or None; checked before any work.

    Raises:
        ValueError: naming the argument and the value.
    """
    check_positive_int("internal_batch_size", internal_batch_size, optional=True)
    if max_memory is not None:
        parse_memory(max_memory)


def bytes_per_path_point(adapter, L: int) -> int:
    """Estimated autograd memory of one interpolation point of length L (bytes).

    Estimate: per layer, about 16 activations of width ``hidden`` per token (attention
    projections, norms, MLP with its 4x-wide intermediate), plus the L×L attention
    probabilities of every head when the model runs eager attention (SDPA kernels do not
    keep them), in the parameter dtype, and the embeddings' gradient.
    Used by the automatic ``internal_batch_size`` (``max_memory``).
    """
    esize = adapter.embeddings.weight.element_size()
    per_layer = L * adapter.hidden_size * 16
    if getattr(adapter.model.config, "_attn_implementation", None) == "eager":
        per_layer += adapter.n_heads * L * L * 2  # eager attention keeps the probabilities for the backward
    return int(esize * (adapter.n_layers * per_layer + 4 * L * adapter.hidden_size)) + 1


def chunk_size(adapter, L: int, internal_batch_size, max_memory) -> int:
    """Path points per forward/backward: ``internal_batch_size``, or what fits ``max_memory``.

    Raises:
        ValueError: ``internal_batch_size`` not a positive int or None; a bad ``max_memory``.
    """
    check_chunk_settings(internal_batch_size, None)
    if internal_batch_size is not None:
        return internal_batch_size
    budget = parse_memory(max_memory if max_memory is not None else DEFAULT_MAX_MEMORY)
    return max(1, budget // bytes_per_path_point(adapter, L))


#: how a per-dimension attribution [L, d] becomes one score per token
TOKEN_REDUCTIONS = ("sum", "l2", "sum_abs")


def reduce_tokens(x: Tensor, reduce: str) -> Tensor:
    """[..., L, d] → [..., L]: ``"sum"`` (signed; a [L] input is returned as is), ``"l2"`` or ``"sum_abs"``."""
    if reduce == "sum":
        return x if x.dim() == 1 else x.sum(-1)
    if reduce == "l2":
        return x.norm(dim=-1)
    return x.abs().sum(-1)


def path_chunks(ctx, alphas: List[Tensor], need_grad: bool) -> Iterator[Tuple[int, slice, Tensor, Optional[Tensor]]]:
    """Yield (example b, step slice, F [n], grads [n, L, d] or None) over the path, in chunks.

    Within a chunk the steps of one example are contiguous, so each piece is yielded with a
    ``slice`` of step indices (views, no index tensors per chunk). With ``ctx.compiled`` each
    chunk's forward and backward run through the compiled stack, in the row counts of
    :func:`~aieg_fast.core.compiled.chunk_rows`.
    """
    batch, chunk, dev, comp = ctx.batch, ctx.chunk, ctx.device, ctx.compiled
    sizes = [a.numel() for a in alphas]
    starts = [0]
    for n in sizes:
        starts.append(starts[-1] + n)
    # the example of each path point; a single example needs none (plain batch, one target)
    rows_all = None if batch.B == 1 else torch.repeat_interleave(torch.arange(batch.B, device=dev), torch.tensor(sizes, device=dev))
    pieces = chunk_rows(starts[-1], chunk) if comp is not None else [(s, min(s + chunk, starts[-1]), 0) for s in range(0, starts[-1], chunk)]
    for s, e, n_rows in pieces:
        groups = [(b, slice(max(s, starts[b]) - starts[b], min(e, starts[b + 1]) - starts[b]))
                  for b in range(batch.B) if starts[b] < e and starts[b + 1] > s]
        pts = [ops.interpolate_path(batch.embeds[b], batch.baseline[b], alphas[b][ms], batch.fixed[b], backend=ctx.backend) for b, ms in groups]
        X = pts[0] if len(pts) == 1 else torch.cat(pts, 0)
        rows = None if rows_all is None else rows_all[s:e]
        if comp is not None:
            f, g = comp.forward(ctx, rows, X, n_rows, need_grad)
        elif need_grad:
            X.requires_grad_(True)
            with torch.enable_grad():
                f = ctx.F(rows, X)
                (g,) = torch.autograd.grad(f.sum(), X)
        else:
            with torch.no_grad():
                f = ctx.F(rows, X)
            g = None
        f = f.detach()
        pos = 0
        for b, ms in groups:
            n = ms.stop - ms.start
            yield b, ms, f[pos : pos + n], None if g is None else g[pos : pos + n]
            pos += n
        ctx.advance(e - s)


def integrate(ctx, alphas: List[Tensor], weights: List[Tensor], reduce: str, return_logits: bool = False):
    """Σ_m w_m G_m ⊙ Δ per example, token-reduced: list of Tensor[L]; with ``return_logits``
    also the path logits (list of Tensor[M])."""
    batch, dev = ctx.batch, ctx.device
    B, L = batch.ids.shape
    d = batch.embeds.shape[-1]
    inner = "sum" if reduce == "sum" else "none"
    acc = [torch.zeros((L,) if inner == "sum" else (L, d), dtype=torch.float32, device=dev) for _ in range(B)]
    delta = batch.delta
    path = [torch.zeros(a.numel(), dtype=torch.float32, device=dev) for a in alphas]
    for b, ms, f, g in path_chunks(ctx, alphas, True):
        path[b][ms] = f
        w = weights[b][ms].to(torch.float32)
        acc[b] += ops.integrate_gradients(g, w, delta[b], inner, backend=ctx.backend).to(torch.float32)
    scores = [reduce_tokens(a, reduce) for a in acc]
    return (scores, path) if return_logits else scores


def integrate_emphasized(ctx, alphas, widths, ef_mode: str, ef_sign: str, ef_norm: str, reduce: str):
    """Σ_m EF_m G_m ⊙ Δ in one gradient pass, the EF computed as the path logits arrive.

    The raw weight of step m needs only f_{m−1} and f_m (specs/aieg.md §6.5), and the L1
    normalisation is one global divisor, so the chunks are integrated with raw weights and
    divided at the end. This saves the forward-only pass over the main grid that
    :func:`emphasis` needs. The raw weights come from ``ops.emphasis_factors`` on the chunk
    with the previous step prepended (``norm="none"`` returns w/M', undone here). Supports
    ``ef_mode`` fd / none / completeness and ``ef_sign`` abs / signed / relu (``minmax`` needs
    the global min and max and goes through :func:`emphasis`). ``"completeness"`` also needs
    the slope s_m = G_m·Δ of each step, taken here from the same gradients; its weights are
    used as they are (no normalisation).

    Returns:
        (ieg list of Tensor[L], ef list of Tensor[M], path logits list of Tensor[M])
    """
    batch, dev, backend = ctx.batch, ctx.device, ctx.backend
    B, L = batch.ids.shape
    d = batch.embeds.shape[-1]
    inner = "sum" if reduce == "sum" else "none"
    shape = (L,) if inner == "sum" else (L, d)
    complete = ef_mode == "completeness"
    U = [torch.zeros(shape, dtype=torch.float32, device=dev) for _ in range(B)]
    V = [torch.zeros(shape, dtype=torch.float32, device=dev) for _ in range(B)]
    raw = [torch.zeros(a.numel(), dtype=torch.float32, device=dev) for a in alphas]
    path = [torch.zeros(a.numel(), dtype=torch.float32, device=dev) for a in alphas]
    slopes = [torch.zeros(a.numel(), dtype=torch.float32, device=dev) for a in alphas] if complete else None
    delta = batch.delta
    for b, ms, f, g in path_chunks(ctx, alphas, True):
        path[b][ms] = f
        lo = max(ms.start - 1, 0)  # prepend the previous step so its increment is known
        if complete:  # the slope s_m = G_m·Δ of each step, from the same gradients
            slopes[b][ms] = (g.float() * delta[b].float()).sum((-2, -1))
        w = ops.emphasis_factors(path[b][lo : ms.stop], alphas[b][lo : ms.stop], widths[b][lo : ms.stop], ef_mode,
                                 "abs" if complete else ef_sign, "none", slopes[b][lo : ms.stop] if complete else None,
                                 backend=backend).float()[ms.start - lo :]
        if not complete:  # norm="none" returns w/M' (M' the steps given): undone here
            w = w * (ms.stop - lo)
        raw[b][ms] = w
        U[b] += ops.integrate_gradients(g, w, delta[b], inner, backend=backend).float()
        if ef_norm == "l1":
            M = alphas[b].numel()
            V[b] += ops.integrate_gradients(g, torch.full((ms.stop - ms.start,), 1.0 / M, device=dev), delta[b], inner, backend=backend).float()
    ieg, efs = [], []
    for b in range(B):
        M = alphas[b].numel()
        if not bool(torch.isfinite(path[b]).all()) or (complete and not bool(torch.isfinite(slopes[b]).all())):
            efs.append(torch.full((M,), float("nan"), device=dev))  # the op's rule: non-finite inputs → NaN EF
            ieg.append(torch.full(shape[:1], float("nan"), device=dev))
            continue
        if complete:
            efs.append(raw[b])
            acc = U[b]
        elif ef_norm == "none":
            efs.append(raw[b] / M)
            acc = U[b] / M
        else:
            tot = raw[b].abs().sum()
            if bool(tot > 0):
                efs.append(raw[b] / tot)
                acc = U[b] / tot
            else:  # flat logit: EF = 1/M (IG on the grid)
                efs.append(torch.full((M,), 1.0 / M, device=dev))
                acc = V[b]
        ieg.append(reduce_tokens(acc, reduce))
    return ieg, efs, path


def path_logits(ctx, alphas: List[Tensor]) -> List[Tensor]:
    """F along the path without gradients: per example Tensor[M] float32."""
    out = [torch.empty(a.numel(), dtype=torch.float32, device=ctx.device) for a in alphas]
    for b, ms, f, _ in path_chunks(ctx, alphas, False):
        out[b][ms] = f
    return out


def adaptive_grid(ctx, n_pilot: int, adaptive: bool, alloc: str, idg_compat_quirk: bool):
    """IDG grid per example (specs/aieg.md §3.2): a pilot pass of ``n_pilot`` forward-only
    points (or ``ctx.pilot_logits`` when the caller computed them) and adaptive allocation of
    ``ctx.n_steps`` points, or the uniform grid when not ``adaptive``.

    Returns:
        (alphas list of Tensor[M], widths list of Tensor[M], pilot logits list of Tensor[N] or None)
    """
    if not adaptive:
        a, w = uniform_alphas(ctx.n_steps, device=ctx.device)
        return [a] * ctx.batch.B, [w] * ctx.batch.B, None
    with ctx.timed("pilot"):
        if ctx.pilot_logits is not None and all(p.numel() == n_pilot for p in ctx.pilot_logits):
            pilot = list(ctx.pilot_logits)
        else:
            pa = torch.linspace(0, 1, n_pilot, device=ctx.device)
            pilot = path_logits(ctx, [pa] * ctx.batch.B)
        alphas, widths = [], []
        for b in range(ctx.batch.B):
            a, w = ops.adaptive_alphas(pilot[b], ctx.n_steps, alloc, idg_compat_quirk, backend=ctx.backend)
            alphas.append(a.to(torch.float32))
            widths.append(w.to(torch.float32))
    return alphas, widths, pilot


def sequence_pilot_logits(sctx, n_pilot: int) -> List[Tensor]:
    """Pilot logits of every generation step from N forwards over the full sequence (one
    :class:`~aieg_fast.core.context.SequenceContext`; no autograd): list of T Tensor[N], the
    pilot of step t at ``linspace(0, 1, N)``, as :func:`adaptive_grid` would compute it on the
    step's own prefix (causal masking)."""
    pa = torch.linspace(0, 1, n_pilot, device=sctx.device)
    E, Eb, fixed = sctx.seq.embeds[0], sctx.seq.baseline[0], sctx.seq.fixed[0]
    out = []
    for s in range(0, n_pilot, sctx.chunk):
        e = min(s + sctx.chunk, n_pilot)
        out.append(sctx.scores(ops.interpolate_path(E, Eb, pa[s:e], fixed, backend=sctx.backend)))
        sctx.advance(e - s)
    P = torch.cat(out, 0)  # [N, T]
    return [P[:, t].contiguous() for t in range(P.shape[1])]


def emphasis(ctx, alphas, widths, ef_mode: str, ef_sign: str, ef_norm: str):
    """Path logits at the main grid (no autograd) and the emphasis factors of each example
    (``ops.emphasis_factors``, specs/aieg.md §6.5). Returns (efs, path logits or None)."""
    with ctx.timed("path_logits"):
        if ef_mode == "none":
            path = None
            efs = [ops.emphasis_factors(widths[b], alphas[b], widths[b], "none", ef_sign, ef_norm, backend=ctx.backend) for b in range(ctx.batch.B)]
        else:
            path = path_logits(ctx, alphas)
            efs = [ops.emphasis_factors(path[b], alphas[b], widths[b], ef_mode, ef_sign, ef_norm, backend=ctx.backend) for b in range(ctx.batch.B)]
    return efs, path


def completeness_info(F_input: Tensor, F_baseline: Tensor, scores) -> dict:
    """F(x), F(x′) and the completeness delta Σ_i s_i − (F(x) − F(x′)) per example."""
    d_in = F_input - F_baseline
    return {
        "F_input": F_input.tolist(),
        "F_baseline": F_baseline.tolist(),
        "convergence_delta": [float(scores[b].sum() - d_in[b]) for b in range(len(scores))],
    }
