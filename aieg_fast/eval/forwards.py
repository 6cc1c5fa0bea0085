"""Batched forwards to the logits at the last position, the model calls of every metric.

Both go through the explainer's adapter (``embeddings``, ``hidden_last``, ``full_logits``), so
they serve causal LMs and classification heads alike. Callers wrap them in
:func:`~aieg_fast.core.model_state.model_prepared` and ``torch.no_grad()``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch
from torch import Tensor

from ..core.batch import right_pad

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = ["last_logits_ids", "last_logits_embeds"]


def last_logits_ids(ex: Explainer, seqs: Sequence[Sequence[int]], batch_size: int) -> Tensor:
    """Output logits at the last position of each id sequence: Tensor[B, V] (float32).

    Sequences of different lengths are right-padded (with ``ex.ref_token_id``; the padding is
    masked and comes after the last real token, so its value does not matter); position ids
    count real tokens only; for a LongRoPE model, sequences up to its switch length and longer
    ones go through separate forwards (:attr:`~aieg_fast.models.DecoderAdapter.rope_switch`).
    V is the vocabulary, or the classes of a classification head.

    Args:
        ex: the explainer. seqs: B token id lists. batch_size: rows per forward.

    Raises:
        ValueError: an empty sequence (a model has no output for no input).
    """
    empty = [i for i, q in enumerate(seqs) if len(q) == 0]
    if empty:
        raise ValueError(f"seqs: sequence(s) {empty[:5]} are empty; a model needs at least one token to predict the next")
    out, order = [], []
    dev = ex.device
    switch = ex.adapter.rope_switch
    groups = [range(len(seqs))] if switch is None else [[i for i, q in enumerate(seqs) if (len(q) > switch) == side]
                                                        for side in (False, True)]
    for group in groups:
        for s in range(0, len(group), batch_size):
            rows = list(group[s : s + batch_size])
            ids, mask = right_pad([seqs[i] for i in rows], ex.ref_token_id)
            ids, mask = ids.to(dev), mask.to(dev)
            pos = (mask.cumsum(-1) - 1).clamp_min(0)
            last = mask.sum(-1) - 1
            E = ex.adapter.embeddings(ids)
            h = ex.adapter.hidden_last(E, mask, pos, last)
            out.append(ex.adapter.full_logits(h).float())
            order += rows
    logits = torch.cat(out, 0)
    return logits if switch is None else logits[torch.tensor(order, device=logits.device).argsort()]


def last_logits_embeds(ex: Explainer, E: Tensor, batch_size: int) -> Tensor:
    """Output logits at the last position for embeddings E [B, L, d] of full-length inputs:
    Tensor[B, V] (float32), ``batch_size`` rows per forward."""
    out = []
    B, L, _ = E.shape
    for s in range(0, B, batch_size):
        X = E[s : s + batch_size]
        n = X.shape[0]
        mask = torch.ones((n, L), dtype=torch.long, device=X.device)
        pos = torch.arange(L, device=X.device).expand(n, L)
        last = torch.full((n,), L - 1, dtype=torch.long, device=X.device)
        h = ex.adapter.hidden_last(X, mask, pos, last)
        out.append(ex.adapter.full_logits(h).float())
    return torch.cat(out, 0)
