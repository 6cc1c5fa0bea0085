"""Attention rows of the predicting position from captured probabilities (specs/aieg.md §4)."""
from __future__ import annotations

import re
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from .. import ops

__all__ = ["ATTN_LAYER_CHOICES", "attention_layers", "attention_rows", "check_attn_layers"]

#: named layer selections; a list of layer indices is accepted too
ATTN_LAYER_CHOICES = ("last", "all", "rollout", "none")


def attention_layers(adapter, attn_layers) -> List[int]:
    """The layer indices of an ``attn_layers`` selection: ``"last"``, ``"all"``, ``"rollout"``
    (all layers) or a list of indices (negative indices count from the end).

    Raises:
        ValueError: another value, or an index outside [-n_layers, n_layers) (names that range).
    """
    n = adapter.n_layers
    if attn_layers == "last":
        return [n - 1]
    if attn_layers in ("all", "rollout"):
        return list(range(n))
    if isinstance(attn_layers, (list, tuple)) and attn_layers and all(isinstance(l, int) for l in attn_layers):
        bad = [l for l in attn_layers if not (-n <= l < n)]
        if bad:
            raise ValueError(f"attn_layers has layer indices out of range [{-n}, {n}) (the model has {n} layers; "
                             f"negative indices count from the end): {bad}")
        return sorted({l % n for l in attn_layers})
    raise ValueError(f"attn_layers must be 'last', 'all', 'rollout', 'none' or a list of layer indices, got {attn_layers!r}")


def check_attn_layers(attn_layers, choices: Sequence[str] = ATTN_LAYER_CHOICES, method: Optional[str] = None) -> None:
    """Model-independent check of an ``attn_layers`` value (the range is checked at run time).

    Args:
        attn_layers: the value given. choices: the named selections the method takes (a
            non-empty list of ints is always allowed). method: named in the error.

    Raises:
        ValueError: names the method's choices and the value received.
    """
    if isinstance(attn_layers, str) and attn_layers in choices:
        return
    if isinstance(attn_layers, (list, tuple)) and attn_layers and all(isinstance(l, int) and not isinstance(l, bool) for l in attn_layers):
        return
    names = ", ".join(repr(c) for c in choices)
    raise ValueError(f"attn_layers must be {names} or a non-empty list of layer indices"
                     + (f" for the {method} method" if method else "") + f", got {attn_layers!r}" + _list_hint(attn_layers))


def _list_hint(value) -> str:
    """For layer indices given as a comma string (``"0,1"``, what ``--option attn_layers=0,1``
    gives) or one int: how the list is written (JSON, as ``--option`` reads it); "" otherwise."""
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+(\s*,\s*-?\d+)*\s*", value):
        items = [int(x) for x in value.split(",")]
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    else:
        return ""
    spelled = "[" + ",".join(map(str, items)) + "]"
    return f"; a list of layers is written as JSON: attn_layers={spelled} (on the command line --option attn_layers={spelled})"


def attention_rows(adapter, batch, attn, attn_layers, attn_heads: str, backend: str) -> Tensor:
    """Attention row of the predicting position, Tensor[B, L], from captured probabilities.

    Args:
        adapter: the model's adapter; batch: the :class:`~aieg_fast.core.batch.Batch`.
        attn: layer → Tensor[B, H, L] rows at ``batch.last_index`` (or [B, H, L, L] matrices
            for ``attn_layers="rollout"``).
        attn_layers: the selection (:func:`attention_layers`); rows are averaged over layers,
            or rolled out (0.5·A + 0.5·I, Abnar & Zuidema 2020).
        attn_heads: ``"mean"`` or ``"max"`` over heads.
        backend: kernel backend of ``attention_gradient_product``.
    """
    layers = attention_layers(adapter, attn_layers)
    if attn_layers == "rollout":
        B, L = batch.ids.shape
        dev = batch.ids.device
        eye = torch.eye(L, device=dev)
        roll = eye.expand(B, L, L).clone()
        for l in layers:
            A = attn[l].float()
            A = A.amax(1) if attn_heads == "max" else A.mean(1)
            roll = torch.bmm(0.5 * A + 0.5 * eye, roll)
        return roll[torch.arange(B, device=dev), batch.last_index]
    rows = []
    for l in layers:
        A = attn[l]  # [B, H, K]
        if attn_heads == "max":
            rows.append(A.float().amax(1))
        else:
            per_b = [
                ops.attention_gradient_product(A[b : b + 1].unsqueeze(2), None, None, "attention", backend=backend)[0]
                for b in range(A.shape[0])
            ]
            rows.append(torch.stack(per_b).float())
    return torch.stack(rows).mean(0)
