"""Per-token curvature from batched Hessian-vector products (HETA's S_i, specs/heta.md §2).

For a scalar f per example and the inputs X [B, L, d] (token embeddings, or the residual stream
entering a block), token i's sensitivity is

    S_i = (1/m) Σ_k ‖ Π_i H (Π_i r_k) ‖₁,   H = ∇²_X f,

r_k Rademacher ±1 vectors, Π_i the selection of token i's d-dimensional block: m exact
Hessian-vector products per token (Pearlmutter 1994: H r = ∇_X ⟨∇_X f, r⟩), each measuring the
within-token block H_ii (paper Eqs. 2–3).

Batching: every (example, token, probe) triple is one row of a batched double backward
(``torch.autograd.grad(..., is_grads_batched=True)``): one probe vector may hold one probe of
every example (the examples' Hessians are independent blocks), and a chunk of probes is one call.
The ℓ1 norms are accumulated on the device (no host synchronisation per HVP). Probes are drawn
per token from a generator seeded by (seed, the token's index in its example), so a token gets
the same probes alone, in a padded batch, or in a prefix of a longer text.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
from torch import Tensor

__all__ = ["block_hvp_l1", "rademacher_probes"]


def rademacher_probes(keys: Sequence[int], m: int, d: int, seed: int) -> Tensor:
    """±1 probes: Tensor[len(keys), m, d] float32 on the CPU; row j drawn from a generator seeded
    by (``seed``, ``keys[j]``) alone (the token's index in its example)."""
    out = torch.empty(len(keys), m, d)
    g = torch.Generator()
    for j, k in enumerate(keys):
        g.manual_seed(int(seed) * 1_000_003 + int(k))
        out[j] = torch.randint(0, 2, (m, d), generator=g).float()
    return out.mul_(2.0).sub_(1.0)


def _jobs(positions: Sequence[Tensor], probes: Sequence[Tensor]):
    """Host-side job table sorted by batched row: (row, example, position, probe index into the
    stacked probes), and the number of rows."""
    rows, exs, pos, src = [], [], [], []
    base = 0
    for b, (p, r) in enumerate(zip(positions, probes)):
        n, m = r.shape[0], r.shape[1]
        J = n * m
        rows.append(torch.arange(J))
        exs.append(torch.full((J,), b, dtype=torch.long))
        pos.append(p.cpu().repeat_interleave(m))
        src.append(base + torch.arange(J))
        base += J
    rows, exs, pos, src = (torch.cat(t) if t else torch.zeros(0, dtype=torch.long) for t in (rows, exs, pos, src))
    order = torch.argsort(rows, stable=True)
    n_rows = int(rows.max()) + 1 if rows.numel() else 0
    return rows[order], exs[order], pos[order], src[order], n_rows


def block_hvp_l1(g: Tensor, X: Tensor, positions: Sequence[Tensor], probes: Sequence[Tensor], chunk: int,
                 progress=None) -> Tuple[Tensor, List[int], int]:
    """Mean ℓ1 norm of the diagonal-block Hessian-vector products of each scored token.

    Args:
        g: Tensor[B, L, d] = ∇_X Σ_b f_b, computed with ``create_graph=True``.
        X: Tensor[B, L, d], the leaf ``g`` was taken with respect to.
        positions: per example Tensor[n_b] long, the scored positions (rows of X).
        probes: per example Tensor[n_b, m, d] (:func:`rademacher_probes`), the same m for all.
        chunk: probe rows per double backward (≥ 1).
        progress: a tqdm-like bar moved by the probes done, or None.

    Returns:
        (S Tensor[B, L] float32 — 0 at positions not scored; HVPs per example; double-backward calls).
    """
    B, L, d = X.shape
    S = torch.zeros(B, L, dtype=torch.float32, device=X.device)
    counts = [int(p.shape[0]) * int(r.shape[1]) for p, r in zip(positions, probes)]
    rows, exs, pos, src, n_rows = _jobs(positions, probes)
    if n_rows == 0:
        return S, counts, 0
    m = int(probes[0].shape[1])
    signs = torch.cat([r.reshape(-1, d) for r in probes]).to(X.device, X.dtype)[src.to(X.device)]
    bounds = torch.searchsorted(rows, torch.arange(0, n_rows + chunk, chunk)).tolist()
    dev_rows, dev_exs, dev_pos = rows.to(X.device), exs.to(X.device), pos.to(X.device)
    calls = 0
    for c, c0 in enumerate(range(0, n_rows, chunk)):
        s, e = bounds[c], bounds[c + 1]
        r, b, p = dev_rows[s:e] - c0, dev_exs[s:e], dev_pos[s:e]
        R = X.new_zeros(min(chunk, n_rows - c0), B, L, d)
        R[r, b, p] = signs[s:e]
        (HR,) = torch.autograd.grad(g, X, grad_outputs=R, is_grads_batched=True, retain_graph=True)
        S.index_put_((b, p), HR[r, b, p].float().abs().sum(-1) / m, accumulate=True)
        calls += 1
        if progress is not None:
            progress.update(e - s)
    return S, counts, calls
