"""Batches of token sequences: right padding of id lists, and the attribution batch type."""
from __future__ import annotations

from typing import Tuple

import torch

__all__ = ["right_pad"]


def right_pad(seqs, pad_id: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token id sequences into (ids Tensor[B, L_max] long, mask Tensor[B, L_max] long).

    ``mask`` is 1 on real tokens and 0 on padding; ``pad_id`` fills the padding.
    """
    L = max(len(q) for q in seqs)
    ids = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    for b, q in enumerate(seqs):
        ids[b, : len(q)] = torch.tensor(list(q), dtype=torch.long)
        mask[b, : len(q)] = 1
    return ids, mask


