"""Attention-value flow toward the predicting position: value-norm weights and the attention
rollout row of every layer, carried as row vectors (HETA's gate M_T, specs/heta.md §1).

* :func:`value_norms` — w_i^{(l,h)} = ‖v_i^{(l,h)} W_O^{(l,h)}‖₁ (Kobayashi et al., EMNLP 2020,
  "Attention is not only a weight"), each query head reading its group's KV head as the model
  does (grouped-query attention), the output projection taken from the adapter
  (:meth:`~aieg_fast.models.DecoderAdapter.output_projection`, fused projections included);
* :func:`residual_values` — the values from the residual stream before the block's norm,
  biases removed (the public HETA code's choice);
* :func:`rollout_rows` — row t of R_l = Â_l ⋯ Â_1 after every layer l, Â = ½A + ½I rows
  renormalised (Abnar & Zuidema, ACL 2020), head-mean or per head;
* :func:`flow_gate` — Σ_{l,h} ρ^{(l,h)}[i] · w_i^{(l,h)}, before normalisation.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
from torch import Tensor

__all__ = ["ROLLOUTS", "VALUE_SOURCES", "flow_gate", "residual_values", "rollout_rows", "value_norms"]

#: how heads enter the rollout: ``head_mean`` (one rollout of the head-mean attention per layer)
#: or ``per_head`` (head h of layer l chained with head h of layer l − 1)
ROLLOUTS = ("head_mean", "per_head")
#: where the value vectors of the value norms come from
VALUE_SOURCES = ("values", "residual")


def value_norms(v: Tensor, W: Tensor, n_heads: int, n_kv_heads: int, max_elements: int = 1 << 24) -> Tensor:
    """ℓ1 norms of each token's value vector pushed through each head's output projection.

    Args:
        v: Tensor[B, L, n_kv_heads·head_dim], the values of one layer (KV heads concatenated).
        W: Tensor[n_heads·head_dim, D], the output projection (``o_proj(a) = a @ W + b``).
        n_heads, n_kv_heads: query and KV heads; query head h reads KV head h // (n_heads / n_kv_heads)
            (``transformers``' ``repeat_kv``).
        max_elements: bound on the elements of one intermediate [·, L_chunk, H, D] product.

    Returns:
        Tensor[B, n_heads, L] float32: w[b, h, i] = ‖v_i^{kv(h)} W[h·hd:(h+1)·hd]‖₁.

    Raises:
        ValueError: ``n_heads`` not a multiple of ``n_kv_heads``, or widths that do not match.
    """
    B, L, width = v.shape
    if n_heads % n_kv_heads or W.shape[0] % n_heads or width * n_heads != W.shape[0] * n_kv_heads:
        raise ValueError(f"value width {width} with {n_kv_heads} KV heads does not match an output projection of "
                         f"{W.shape[0]} rows for {n_heads} heads")
    hd, D, rep = W.shape[0] // n_heads, W.shape[1], n_heads // n_kv_heads
    vv = v.float().reshape(B, L, n_kv_heads, hd)
    Wg = W.float().reshape(n_kv_heads, rep, hd, D)
    out = torch.empty(B, L, n_kv_heads, rep, dtype=torch.float32, device=v.device)
    step = max(1, max_elements // max(1, B * n_heads * D))
    for s in range(0, L, step):
        out[:, s : s + step] = torch.einsum("blkd,krdo->blkro", vv[:, s : s + step], Wg).abs().sum(-1)
    return out.reshape(B, L, n_heads).transpose(1, 2)


def residual_values(point, x: Tensor) -> Tensor:
    """The values of a layer computed from ``x`` [B, L, D] (the residual stream entering the block,
    before its norm) with the layer's value projection, biases removed: Tensor[B, L, n_kv·hd].

    Args:
        point: the (module, reader) pair the model's values are read from
            (:attr:`~aieg_fast.core.capture.ProjectionCapture.v_point`).
    """
    module, reader = point
    with torch.no_grad():
        out = module(x) - module(torch.zeros_like(x[:, :1]))
    return reader(out)["v"]


def rollout_rows(attn: Sequence[Tensor], last_index: Tensor, per_head: bool) -> Tensor:
    """Row ``last_index`` of the rollout after every layer, carried as row vectors.

    With Â_l = ½A_l + ½I (rows renormalised) and R_l = Â_l ⋯ Â_1, the row after layer l is
    ρ_l = e_t^T Â_l ⋯ Â_1. All rows are carried together from the top layer down: at layer k every
    ρ_l with l ≥ k is multiplied by Â_k (cost O(N²·L²) per head, no L×L×L products).

    Args:
        attn: per layer (first to last) Tensor[B, H, L, L] attention probabilities.
        last_index: Tensor[B] long, the predicting position t of each row.
        per_head: chain head h of layer l with head h of layer l − 1 (else the head mean).

    Returns:
        Tensor[B, H_r, N, L] float32 (H_r = H per head, else 1): ρ_l of each layer.
    """
    N = len(attn)
    B, H, L, _ = attn[0].shape
    Hr = H if per_head else 1
    dev = attn[0].device
    eye = torch.eye(L, device=dev)
    start = torch.nn.functional.one_hot(last_index.to(dev), L).float()  # [B, L]
    U = start.view(B, 1, 1, L).expand(B, Hr, N, L).clone()
    for k in reversed(range(N)):
        A = attn[k].float().nan_to_num(0.0)
        if not per_head:
            A = A.mean(1, keepdim=True)
        Ah = 0.5 * A + 0.5 * eye
        Ah = Ah / Ah.sum(-1, keepdim=True).clamp_min(1e-12)
        U[:, :, k:] = U[:, :, k:] @ Ah
    return U


def flow_gate(attn: Sequence[Tensor], norms: List[Tensor], last_index: Tensor, per_head: bool) -> Tensor:
    """Σ_{l,h} ρ^{(l,h)}[i] · w_i^{(l,h)}: Tensor[B, L] float32, before clipping and normalisation.

    Args:
        attn: per layer Tensor[B, H, L, L]. norms: per layer Tensor[B, H, L] (:func:`value_norms`).
        last_index: Tensor[B] long. per_head: see :func:`rollout_rows`.
    """
    U = rollout_rows(attn, last_index, per_head)  # [B, Hr, N, L]
    W = torch.stack([w.float() for w in norms], 2)  # [B, H, N, L]
    if per_head:
        return (U * W).sum((1, 2))
    return (U[:, 0] * W.sum(1)).sum(1)
