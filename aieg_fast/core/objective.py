"""The explained quantity F: which function of the model's output an attribution explains.

Every method attributes a scalar F per example, computed from the final hidden state at the
predicting position. :func:`target_scores` is the one place F is computed; its ``target_fn`` is

* ``"logit"`` (default): the target's logit z_t (soft-capped where the model caps logits);
* ``"logprob"`` / ``"prob"``: log p_t / p_t over the whole vocabulary (or the classes);
* ``"label_logprob"`` (a :class:`LabelSet`): log p_t renormalised over a set of label ids,
  log softmax(z[labels])[t]: the log-probability that label-set metrics score (comprehensiveness,
  sufficiency, log-odds in :mod:`aieg_fast.eval` renormalise over the label words);
* a callable ``fn(logits Tensor[n, V] float32) -> Tensor[n]``: any user function of the logits.

With a contrast token c (``contrast``), F becomes a difference (Inseq's ``contrast_logits_diff``
and ``contrast_prob_diff``): z_t − z_c for ``"logit"``, ``"logprob"`` and ``"label_logprob"``
(the log-normaliser cancels, so all three give the logit difference), p_t − p_c for ``"prob"``.
A callable target takes no contrast.

Source: Yin & Neubig 2022, "Interpreting Language Models with Contrastive Explanations" (the
contrastive target); Sarti et al. 2023, Inseq (the names).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple, Union

import torch
from torch import Tensor

from .model_state import running_user_code

__all__ = ["LabelSet", "NAMED_TARGET_FNS", "TargetFn", "check_target_fn", "predicted", "target_fn_name", "target_scores"]

#: the target functions named by a string.
NAMED_TARGET_FNS = ("logit", "logprob", "prob", "label_logprob")


@dataclass(frozen=True)
class LabelSet:
    """``target_fn="label_logprob"`` resolved: log p(target) renormalised over ``ids``.

    Attributes:
        ids: the label token ids (or class indices), in label order; the target must be one.
        texts: the labels as the user gave them (for records): token strings, or ids as ints.
    """

    ids: Tuple[int, ...]
    texts: Tuple[Union[str, int], ...] = ()

    def index(self, targets: Tensor) -> Tensor:
        """Position of each target id in :attr:`ids`: Tensor[n] long (−1 when absent)."""
        ids = torch.tensor(self.ids, device=targets.device)
        hit = targets.view(-1, 1) == ids.view(1, -1)
        return torch.where(hit.any(-1), hit.float().argmax(-1), torch.full_like(targets, -1))


TargetFn = Union[str, LabelSet, Callable[[Tensor], Tensor]]


def check_target_fn(target_fn, width: Optional[int] = None, gradients: bool = True) -> None:
    """Raise ValueError / TypeError for a ``target_fn`` that is none of the accepted kinds
    (a name of :data:`NAMED_TARGET_FNS` other than ``"label_logprob"``, which needs a label set
    and arrives as a :class:`LabelSet`; a :class:`LabelSet`; a callable). With ``width`` (the
    number of logits), a callable is tried once on zero logits [2, width] that require grad: it
    must return a float Tensor[2], which for a method that takes ``gradients`` depends
    differentiably on them (not detached, not an integer), so a wrong one is refused before any
    model work."""
    if isinstance(target_fn, str):
        if target_fn not in NAMED_TARGET_FNS:
            raise ValueError(f"target_fn must be one of {list(NAMED_TARGET_FNS)} or a callable, got {target_fn!r}")
        return
    if isinstance(target_fn, LabelSet):
        if len(target_fn.ids) < 2:
            raise ValueError(f"label_set must hold at least 2 labels, got {list(target_fn.texts or target_fn.ids)}")
        return
    if not callable(target_fn):
        raise TypeError(f"target_fn must be a str or a callable logits Tensor[n, V] -> Tensor[n], got {type(target_fn).__name__}")
    if width is None:
        return
    z = torch.zeros(2, width, requires_grad=True)
    with torch.enable_grad():
        out = target_fn(z)
    _check_custom_output(out, 2)
    if not out.is_floating_point() or (gradients and not out.requires_grad):
        why = f"dtype {out.dtype}" if not out.is_floating_point() else "no gradient (detached, or computed outside autograd)"
        raise ValueError(f"target_fn must return a float Tensor [n] differentiable in the logits, got one with {why}")


def target_fn_name(target_fn, contrast: bool = False) -> str:
    """How results record ``target_fn``: its name (``"custom:<function name>"`` for a callable),
    with ``"-contrast"`` appended when a contrast token is subtracted."""
    if isinstance(target_fn, str):
        name = target_fn
    elif isinstance(target_fn, LabelSet):
        name = "label_logprob"
    else:
        name = "custom:" + getattr(target_fn, "__name__", type(target_fn).__name__)
    return name + ("-contrast" if contrast else "")


def _custom(adapter, hidden: Tensor, fn) -> Tensor:
    logits = adapter.full_logits(hidden).float()
    with running_user_code(adapter.model):
        out = fn(logits)
    _check_custom_output(out, hidden.shape[0])
    return out.float()


def _check_custom_output(out, n: int) -> None:
    """Raise ValueError unless a callable ``target_fn`` returned a Tensor [n]."""
    if not isinstance(out, Tensor) or out.shape != (n,):
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"target_fn must map logits [n, V] to a Tensor [n]; for n = {n} it returned {got}")


def target_scores(adapter, hidden: Tensor, targets: Tensor, target_fn: TargetFn = "logit",
                  contrast: Optional[Tensor] = None) -> Tensor:
    """F for each row of ``hidden``.

    Args:
        adapter: the model's :class:`~aieg_fast.models.DecoderAdapter`.
        hidden: Tensor[n, D], final hidden states at the predicting positions.
        targets: Tensor[n] (or [1], shared) long, the target ids.
        target_fn: see the module docstring.
        contrast: Tensor[n] (or [1]) long contrast ids, or None.

    Returns:
        Tensor[n] float32 (units: logits, log-probabilities or probabilities).

    Raises:
        ValueError: a callable returning the wrong shape; a target outside the label set.
    """
    if not isinstance(target_fn, (str, LabelSet)):
        return _custom(adapter, hidden, target_fn)
    if isinstance(target_fn, LabelSet):
        if contrast is not None:  # log-normaliser cancels: the logit difference
            return (adapter.target_scores(hidden, targets, "logit") - adapter.target_scores(hidden, contrast, "logit")).float()
        pos = target_fn.index(targets)
        if bool((pos < 0).any()):
            raise ValueError(f"target must be one of the label_set ids {list(target_fn.ids)}, got {targets.tolist()}")
        ids = torch.tensor(target_fn.ids, device=hidden.device)
        logits = adapter.full_logits(hidden).float()[:, ids]
        return torch.log_softmax(logits, -1).gather(-1, pos.view(-1, 1).expand(hidden.shape[0], 1)).squeeze(-1)
    if contrast is None:
        return adapter.target_scores(hidden, targets, target_fn).float()
    if target_fn == "prob":
        return (adapter.target_scores(hidden, targets, "prob") - adapter.target_scores(hidden, contrast, "prob")).float()
    return (adapter.target_scores(hidden, targets, "logit").float() - adapter.target_scores(hidden, contrast, "logit").float())


def predicted(logits: Tensor, target_fn: TargetFn) -> Tensor:
    """The model's prediction from logits [n, V]: the argmax over the label set for a
    :class:`LabelSet`, else over all outputs. Tensor[n] long."""
    if isinstance(target_fn, LabelSet):
        ids = torch.tensor(target_fn.ids, device=logits.device)
        return ids[logits[:, ids].argmax(-1)]
    return logits.argmax(-1)
