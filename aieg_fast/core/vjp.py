"""Batched per-row vector-Jacobian products, and F of every step of one sequence from one forward."""
from __future__ import annotations

import torch
from typing import Optional

from torch import Tensor

from .objective import target_scores

__all__ = ["rows_vjp", "each_row_vjp", "sequence_scores", "sequence_input_gradients"]


def rows_vjp(F: Tensor, inputs, T: int):
    """Per-step gradients of Σ_c F[c, t] with respect to ``inputs``.

    Args:
        F: Tensor[c, T], T scalar outputs per sequence.
        inputs: tensors F depends on.
        T: number of steps (columns of F).

    Returns:
        Tuple of Tensor[T, *input.shape], one per input (``torch.autograd.grad`` with
        ``is_grads_batched=True``: one backward serves all T rows).
    """
    go = torch.zeros((T,) + tuple(F.shape), device=F.device, dtype=F.dtype)
    idx = torch.arange(T, device=F.device)
    go[idx, :, idx] = 1.0
    return torch.autograd.grad(F, inputs, grad_outputs=go, is_grads_batched=True)


def each_row_vjp(F: Tensor, inputs, T: int, batched: bool):
    """The gradients of :func:`rows_vjp`, yielded one step at a time.

    Args:
        F: Tensor[c, T], T scalar outputs per sequence. inputs: tensors F depends on. T: the
            number of steps.
        batched: True: one batched backward (:func:`rows_vjp`), sliced per step. False: one
            backward per step over the shared graph (kept until the last step), with the
            cotangent 1 on column t. On one CPU thread the per-step backwards took 0.81× the
            time of the batched one for generation IG on SmolLM2 (T = 16 steps × 10 path
            points × 79 positions; medians of three alternating pairs, 0.74–0.86;
            ``benchmarks/profile_generation_ig.py``, benchmarks/RESULTS.md "Per-call work and
            generation IG"): the batched backward's elementwise work runs on T times larger
            tensors, which outgrow the cache. They also never hold T copies of the gradients
            at once.

    Yields:
        (t, tuple of Tensor shaped as each input), for t = 0 … T − 1.
    """
    if batched:
        grads = rows_vjp(F, inputs, T)
        for t in range(T):
            yield t, tuple(g[t] for g in grads)
        return
    for t in range(T):
        go = torch.zeros_like(F)
        go[:, t] = 1.0
        yield t, torch.autograd.grad(F, inputs, grad_outputs=go, retain_graph=t < T - 1)


def sequence_scores(adapter, X: Tensor, q: Tensor, y: Tensor, target_fn, contrast: Optional[Tensor] = None,
                    return_hidden: bool = False):
    """F of every step for each unpadded sequence in X, from one forward (causal masking makes
    position q[t] see exactly its prefix).

    Args:
        adapter: the model's adapter.
        X: Tensor[c, L, d] input embeddings (c copies / path points of one sequence).
        q: Tensor[T] long, the predicting position of step t; y: Tensor[T] long, its target.
        target_fn: as :func:`~aieg_fast.core.objective.target_scores`; contrast: Tensor[1] long
            contrast id subtracted at every step, or None.
        return_hidden: also return the final hidden states at the predicting positions.

    Returns:
        Tensor[c, T] float32; with ``return_hidden``, (that, Tensor[c, T, D] in the model's dtype).
    """
    c, L, _ = X.shape
    mask = torch.ones(c, L, dtype=torch.long, device=X.device)
    pos = torch.arange(L, device=X.device).expand(c, L)
    h = adapter.hidden_states(X, mask, pos)[:, q]
    T = q.numel()
    F = target_scores(adapter, h.reshape(c * T, -1), y.repeat(c), target_fn, contrast).float().view(c, T)
    return (F, h) if return_hidden else F


def sequence_input_gradients(sctx):
    """∂F_t/∂E of every generation step from one forward over the sequence and one batched VJP.

    Args:
        sctx: the :class:`~aieg_fast.core.context.SequenceContext`.

    Returns:
        (G Tensor[T, L, d] float32, F Tensor[T] — each step's target score).
    """
    X = sctx.seq.embeds.clone().requires_grad_(True)
    with torch.enable_grad():
        F = sctx.scores(X, input_row=0)
        (G,) = rows_vjp(F, X, sctx.T)
    return G[:, 0].float(), F[0].detach()
