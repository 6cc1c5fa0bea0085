"""The learning-rate schedule both training commands use (train-nano, train-sentiment)."""
from __future__ import annotations

import math

import torch

__all__ = ["warmup_cosine"]


def warmup_cosine(opt: torch.optim.Optimizer, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over the first 5 % of ``total`` optimizer steps (at least one), then cosine
    decay to 0 at step ``total``: the multiplier of the peak lr at step s is (s + 1) / w for s < w,
    else ½(1 + cos(π (s − w) / (total − w)))."""
    warm = max(1, total // 20)
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm)))
    )
