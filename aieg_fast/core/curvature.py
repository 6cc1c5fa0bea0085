"""Per-token curvature from batched Hessian-vector products (HETA's S_i, specs/heta.md §2).

For a scalar f of one sequence and its inputs X [n, d] (token embeddings, or the residual
stream entering a block), token i's sensitivity is

    S_i = (1/m) Σ_k ‖ Π_i H (Π_i r_k) ‖₁,   H = ∇²_X f,

r_k Rademacher ±1 vectors, Π_i the selection of token i's d-dimensional block: m exact
Hessian-vector products per token (Pearlmutter 1994: H r = ∇ ⟨∇f, r⟩), each measuring the
within-token block H_ii (paper Eqs. 2–3).

Only the block H_ii is needed, so f is differentiated with respect to token i's row alone, as
f_i(x) = f(X with row i replaced by x); the other rows are constants. In a causal decoder the
positions before i do not depend on x, so f_i needs the model only on positions i … n − 1, the
keys and values of the positions before i being those of the unperturbed sequence: the caller's
``objective(start, rows)`` runs ``rows`` (positions ``start`` …) after such a prefix (a KV cache,
:meth:`~aieg_fast.models.DecoderAdapter.hidden_last_after`). The cost of token i's HVPs is that
of n − i positions, about half of the whole sequence on average.

Batching: the m probes of a token are one batched double backward
(``torch.autograd.grad(..., is_grads_batched=True)``), and consecutive tokens share one call as
separate rows starting at the first one's position (each row's leaf is its own token's
embedding, so the rows' Hessians are independent), as :func:`~aieg_fast.core.prefix.prefix_batches`
groups them. The ℓ1 norms are reduced by the fused
``hvp_l1_mean`` kernel (:func:`aieg_fast.ops.hvp_l1_mean`) on the device, without a host
synchronisation per HVP. Probes are drawn per token from a generator seeded by (seed, the
token's index in its example), so a token gets the same probes alone, in a padded batch, or in a
prefix of a longer text.
"""
from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import torch
from torch import Tensor

from .. import ops
from .prefix import prefix_batches

__all__ = ["hvp_groups", "rademacher_probes", "token_hvp_l1"]


def rademacher_probes(keys: Sequence[int], m: int, d: int, seed: int) -> Tensor:
    """±1 probes: Tensor[len(keys), m, d] float32 on the CPU; row j drawn from a generator seeded
    by (``seed``, ``keys[j]``) alone (the token's index in its example)."""
    out = torch.empty(len(keys), m, d)
    g = torch.Generator()
    for j, k in enumerate(keys):
        g.manual_seed(int(seed) * 1_000_003 + int(k))
        out[j] = torch.randint(0, 2, (m, d), generator=g).float()
    return out.mul_(2.0).sub_(1.0)


def hvp_groups(positions: Sequence[int], n: int, m: int, budget: int, prefix: bool) -> List[Tuple[int, List[int], int]]:
    """How the scored tokens of one sequence are batched: (start, tokens, probes per call).

    With a prefix, consecutive tokens share double backwards as
    :func:`~aieg_fast.core.prefix.prefix_batches` groups them (m rows per token, ``budget``
    position rows per call); without one, every token's rows are the whole sequence and each
    token is a group of its own. A token whose m probes alone exceed the budget has its probes
    split over several calls (``probes per call`` < m, at least 1).
    """
    if prefix:
        batches = [(start, [positions[j] for j in items]) for start, items in prefix_batches(positions, n, m, budget)]
    else:
        batches = [(0, [p]) for p in positions]
    return [(start, toks, m if len(toks) > 1 else max(1, min(m, budget // max(1, n - start)))) for start, toks in batches]


def token_hvp_l1(objective: Callable[[int, Tensor], Tensor], X: Tensor, positions: Sequence[int], probes: Tensor,
                 budget: int, prefix: bool, backend: str = "auto", progress=None) -> Tuple[Tensor, int]:
    """S_i of the scored tokens of one sequence (module docstring).

    Args:
        objective: ``(start, rows)`` → Tensor[G] — f of each row of ``rows`` [G, n − start, d],
            rows being positions ``start`` … n − 1 of X (some with one token changed) that
            follow the unperturbed positions 0 … start − 1; differentiable in ``rows``.
        X: Tensor[n, d], the sequence's inputs (no padding).
        positions: the scored positions, ascending.
        probes: Tensor[len(positions), m, d] (:func:`rademacher_probes`).
        budget: position rows one double backward may hold (m probes of a token over n − i
            positions count m·(n − i)).
        prefix: whether ``objective`` accepts ``start`` > 0 (a KV cache), else every row is the
            whole sequence.
        backend: kernel backend of the ℓ1 reduction (``hvp_l1_mean``).
        progress: a tqdm-like bar moved by the probes done, or None.

    Returns:
        (Tensor[len(positions)] float32 S of each position; double-backward calls).
    """
    n, d = X.shape
    m = int(probes.shape[1]) if probes.dim() == 3 else 0
    S = torch.zeros(len(positions), dtype=torch.float32, device=X.device)
    if not len(positions) or m == 0:
        return S, 0
    index = {p: j for j, p in enumerate(positions)}
    calls = 0
    for start, toks, per in hvp_groups(list(positions), n, m, budget, prefix):
        G, rel = len(toks), torch.tensor(toks, device=X.device) - start
        with torch.enable_grad():
            leaf = X[toks].detach().clone().requires_grad_(True)  # [G, d]: each row's own token
            at = torch.zeros(G, n - start, 1, dtype=torch.bool, device=X.device)
            at[torch.arange(G, device=X.device), rel] = True
            rows = torch.where(at, leaf.unsqueeze(1), X[start:].detach().unsqueeze(0))
            f = objective(start, rows)
            (g,) = torch.autograd.grad(f.sum(), leaf, create_graph=True)
        R = probes[[index[p] for p in toks]].to(X.device, X.dtype).transpose(0, 1)  # [m, G, d]
        total = torch.zeros(G, dtype=torch.float32, device=X.device)
        for k0 in range(0, m, per):
            k1 = min(m, k0 + per)
            with torch.enable_grad():
                (HR,) = torch.autograd.grad(g, leaf, grad_outputs=R[k0:k1], is_grads_batched=True, retain_graph=k1 < m)
            total += ops.hvp_l1_mean(HR, backend=backend).float() * ((k1 - k0) / m)
            calls += 1
            if progress is not None:
                progress.update(G * (k1 - k0))
        S[[index[p] for p in toks]] = total
    return S, calls
