"""What the model predicts next for one text, without attribution: :meth:`Explainer.predict`
(the top-k next tokens or classes) and :meth:`Explainer.label_probs` (the probabilities of a set
of label words, renormalised over them). Both are attached to :class:`~aieg_fast.Explainer`, as
:func:`~aieg_fast.generation.attribute_generation` is; inputs are checked before the forward."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from .core.model_state import holding_model_lock, model_prepared
from .core.tokens import token_text_after
from .core.validation import as_int, check_int

__all__ = ["predict", "label_probs"]


def _encoded(ex, text, template: Optional[str]):
    """(ids, fixed, the encoded string) of one text; checks the text and template (no model work)."""
    ids, fixed, full, _ = ex.encode_with_offsets(text, template)
    return ids, fixed, full


def _probs(ex, ids, fixed):
    """Next-token (or class) probabilities after ``ids``: Tensor[V] (one forward)."""
    batch = ex.build_batch([(ids, fixed)])
    with model_prepared(ex.model):
        return ex.context(batch).reference_forward(baseline=False)["probs"][0]


@holding_model_lock
def predict(self, text: str, template: Optional[str] = None, top_k: int = 5) -> List[Tuple[str, int, float]]:
    """The model's ``top_k`` most probable next tokens (or classes of a classification head).

    Args:
        text: one text (or a mapping of template fields); template: as for :meth:`attribute`.
        top_k: how many, an int ≥ 1 (fewer when the vocabulary or class set is smaller).

    Returns:
        [(token text or class name, id, probability in [0, 1])], most probable first; a token's
        text as it reads after the prompt (its leading space kept: :func:`~aieg_fast.core.tokens.token_text_after`).

    Raises:
        ValueError: ``top_k`` not an int ≥ 1; an empty text or a bad template (named).
    """
    top_k = as_int(top_k)  # a NumPy or one-element tensor integer as an int
    check_int("top_k", top_k, 1)
    p = _probs(self, *_encoded(self, text, template)[:2])
    vals, idx = p.topk(min(top_k, p.numel()))
    names = [token_text_after(self.tokenizer, int(i)) if self.adapter.kind == "causal_lm" else self._label(int(i)) for i in idx]
    return [(n, int(i), float(v)) for n, i, v in zip(names, idx, vals)]


@holding_model_lock
def label_probs(self, text: str, labels: Sequence[str], template: Optional[str] = None) -> List[float]:
    """Probabilities of single-token ``labels`` at the next position, renormalised over them
    (each label tokenised as it would follow the prompt, :meth:`resolve_target`).

    Args:
        text: one text (or a mapping of template fields); template: as for :meth:`attribute`.
        labels: a list of ≥ 2 distinct label words (e.g. ``[" negative", " positive"]``), or
            class indices / names for a classification head.

    Returns:
        List[float], one probability per label (summing to 1), in the order of ``labels``.

    Raises:
        TypeError: ``labels`` a str (a list of words is meant) or not a sequence; a label that
            is neither a str nor an int (e.g. a float or None), named ``labels[i]`` with its value.
        ValueError: fewer than 2 labels, two labels of the same token, a label that is not a
            single token (named ``labels[i]``, with its value).
    """
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise TypeError(f"labels must be a list of label words, e.g. [' negative', ' positive'], got {type(labels).__name__} {labels!r}")
    if len(labels) < 2:
        raise ValueError(f"labels needs at least 2 label words to renormalise over, got {list(labels)!r}")
    ids, fixed, full = _encoded(self, text, template)
    tids = []
    for i, label in enumerate(labels):
        if label is None:  # resolve_target's "the model's prediction", not a label
            raise TypeError(f"labels[{i}] = None: a label must be a token string or id (a class index or name for a classifier)")
        try:
            tids.append(self.resolve_target(label, context=full)["id"])
        except (ValueError, TypeError) as err:
            raise type(err)(f"labels[{i}] = {label!r}: {err}") from None
    if len(set(tids)) < len(tids):
        dup = [labels[i] for i, t in enumerate(tids) if tids.count(t) > 1]
        raise ValueError(f"labels {dup!r} are the same token (id {max(set(tids), key=tids.count)}): give distinct labels")
    p = _probs(self, ids, fixed)[tids]
    return (p / p.sum()).tolist()
