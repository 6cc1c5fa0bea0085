"""What both training commands (train-nano, train-sentiment) share: the learning-rate schedule
and the range of their seeds."""
from __future__ import annotations

import math

import torch

__all__ = ["MAX_SEED", "check_seed", "warmup_cosine"]

#: the largest seed the training commands take (seeds are ints in [0, MAX_SEED]): ``torch.manual_seed``
#: takes no more than 64 bits and ``train_sentiment`` adds the step to its seed; ``random.Random``
#: reads -n as n.
MAX_SEED = 2**32 - 1


def check_seed(seed) -> None:
    """Raise ValueError (naming ``seed`` and the value) unless ``seed`` is an int (not a bool) in
    [0, :data:`MAX_SEED`]."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an int in [0, {MAX_SEED}], got {seed!r}")


def warmup_cosine(opt: torch.optim.Optimizer, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over the first 5 % of ``total`` optimizer steps (at least one), then cosine
    decay to 0 at step ``total``: the multiplier of the peak lr at step s is (s + 1) / w for s < w,
    else ½(1 + cos(π (s − w) / (total − w)))."""
    warm = max(1, total // 20)
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm)))
    )
