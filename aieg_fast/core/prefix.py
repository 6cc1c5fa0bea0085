"""Copies of a sequence that differ from some position on, run after the shared prefix.

In a causal decoder, positions before s do not depend on the inputs at s or later. A copy of a
sequence that changes positions ≥ s (a masked token, a perturbed embedding) therefore only needs
the model on positions s … n − 1, the keys and values of positions 0 … s − 1 being those of the
unchanged sequence (one forward keeps them:
:meth:`~aieg_fast.models.DecoderAdapter.prefix_keys_values`; the copies then run with
:meth:`~aieg_fast.models.DecoderAdapter.hidden_last_after`). Over the positions of a sequence
this halves the work on average. Occlusion's masked inputs and HETA's Hessian-vector products
are batched this way; :func:`prefix_batches` decides which copies share a forward.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

__all__ = ["prefix_batches"]


def prefix_batches(starts: Sequence[int], n: int, copies: int, budget: int) -> List[Tuple[int, List[int]]]:
    """Batches of items whose copies run after a shared prefix: (start, item indices).

    Item j needs ``copies`` rows of positions ``starts[j]`` … n − 1. Consecutive items (``starts``
    ascending) share one batch whose rows all start at its first item's position, while the batch
    holds at most ``budget`` positions (copies · items · (n − start)) and every item starts within
    a quarter of the rows' length of that position (positions computed for nothing stay below a
    quarter). An item whose copies alone exceed the budget is a batch of its own.

    Args:
        starts: the first changed position of each item, ascending, each in [0, n).
        n: the sequence length. copies: rows per item (≥ 1). budget: positions per batch.

    Returns:
        list of (start, [item indices]) in item order, covering every item once.
    """
    out: List[Tuple[int, List[int]]] = []
    for j, p in enumerate(starts):
        if out:
            start, items = out[-1]
            width = n - start
            if copies * (len(items) + 1) * width <= budget and 4 * (p - start) <= width:
                items.append(j)
                continue
        out.append((int(p), [j]))
    return out
