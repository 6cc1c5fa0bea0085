"""Batches of token sequences: the attribution batch type, building it, and right padding of id lists."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import torch
from torch import Tensor

from .validation import check_choice

__all__ = ["Batch", "build_batch", "right_pad"]


@dataclass(frozen=True)
class Batch:
    """Inputs of one attribution call, padded to a common length L (targets live in the Context).

    Attributes:
        ids, attention_mask, position_ids: Tensor[B, L] (long).
        last_index: Tensor[B], the predicting position of each row.
        fixed: bool Tensor[B, L], positions not interpolated and not attributed (special and
            template tokens, padding).
        embeds, baseline: Tensor[B, L, d], the token embeddings E and the baseline E′ (E′ = E at
            fixed positions, the reference token's embedding elsewhere).
        lengths, offsets: each example's token count and where it starts in its padded row.
    """

    ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    last_index: Tensor
    fixed: Tensor
    embeds: Tensor
    baseline: Tensor
    lengths: Tuple[int, ...]
    offsets: Tuple[int, ...]

    @property
    def B(self) -> int:
        return self.ids.shape[0]

    @property
    def plain(self) -> bool:
        """Every row unpadded (positions 0…L-1, last index L-1): the model runs without a mask."""
        return all(n == self.ids.shape[1] for n in self.lengths)

    @property
    def spans(self) -> List[slice]:
        """Each example's own positions in its padded row (``offsets[b]`` to ``offsets[b] + lengths[b]``)."""
        return [slice(o, o + n) for o, n in zip(self.offsets, self.lengths)]

    def per_example(self, values: Tensor) -> list:
        """Each example's own positions of ``values`` (Tensor[B, ..., L], over the padded rows)
        as nested lists, for a method's per-token ``info``: entry b has ``lengths[b]`` values on
        the last axis, index i at the example's token i whatever the padding side."""
        return [values[b, ..., r].tolist() for b, r in enumerate(self.spans)]

    @property
    def delta(self) -> Tensor:
        """E − E′: Tensor[B, L, d]; float32 for float16 / bfloat16 embeddings (the difference of
        two low-precision rows is computed and kept in float32, as the integration uses it)."""
        if self.embeds.dtype in (torch.float16, torch.bfloat16):
            return self.embeds.float() - self.baseline.float()
        return self.embeds - self.baseline


def build_batch(adapter, encoded: Sequence[Tuple[List[int], List[bool]]], pad_id: int, ref_token_id: int,
                padding_side: str = "right", device=None) -> Batch:
    """Pad encoded examples into a :class:`Batch` with embeddings and baselines.

    Args:
        adapter: the model's :class:`~aieg_fast.models.DecoderAdapter` (its ``embeddings``).
        encoded: per example (token ids, fixed flags), as :meth:`Explainer.encode` returns.
        pad_id: the id written into padding positions (never attended to).
        ref_token_id: the baseline token; its embedding is E′ at attributable positions (DIG
            convention, specs/aieg.md §6.3).
        padding_side: ``"right"`` or ``"left"``.
        device: where the tensors go (default: the embeddings' device).

    Raises:
        ValueError: unknown ``padding_side``, no examples, a classifier's sequence that ends
            with its pad token (:meth:`~aieg_fast.models.DecoderAdapter.check_pooled_position`),
            rows on both sides of a LongRoPE model's switch length
            (:meth:`~aieg_fast.models.DecoderAdapter.check_rope_switch`).
    """
    check_choice("padding_side", padding_side, ("left", "right"))
    if not encoded:
        raise ValueError("encoded has no examples")
    adapter.check_pooled_position([ids for ids, _ in encoded])
    adapter.check_rope_switch([len(ids) for ids, _ in encoded])
    emb = adapter.embeddings
    dev = adapter.input_device if device is None else device
    L = max(len(ids) for ids, _ in encoded)
    # each row as Python lists first, then one tensor per field (a few tensor ops in all,
    # whatever B is: this runs on every call)
    rows_ids, rows_mask, rows_fixed, offsets, lengths = [], [], [], [], []
    for ids, fx in encoded:
        n, pad = len(ids), L - len(ids)
        off = 0 if padding_side == "right" else pad
        real = ([int(i) for i in ids], [1] * n, [bool(f) for f in fx])
        padding = ([pad_id] * pad, [0] * pad, [True] * pad)
        for rows, r, p in zip((rows_ids, rows_mask, rows_fixed), real, padding):
            rows.append(p + r if off else r + p)
        offsets.append(off)
        lengths.append(n)
    ids_t = torch.tensor(rows_ids, dtype=torch.long, device=dev)
    mask = torch.tensor(rows_mask, dtype=torch.long, device=dev)
    fixed = torch.tensor(rows_fixed, dtype=torch.bool, device=dev)
    position_ids = (mask.cumsum(-1) - 1).clamp_min(0)
    last_index = torch.tensor([o + n - 1 for o, n in zip(offsets, lengths)], device=dev)
    with torch.no_grad():
        # the reference token's row looked up with the inputs, through the embedding module, as
        # E, so any scaling inside it applies to E′ too
        both = emb(torch.cat([ids_t.reshape(-1), torch.tensor([ref_token_id], device=dev)])).detach()
        E, ref = both[:-1].view(len(encoded), L, -1), both[-1]
        Eb = torch.where(fixed.unsqueeze(-1), E, ref.view(1, 1, -1).expand_as(E))
    return Batch(ids_t, mask, position_ids, last_index, fixed, E, Eb, tuple(lengths), tuple(offsets))


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


