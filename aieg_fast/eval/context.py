"""The per-instance context of the metrics: input, target, p(y|x), p(y|x_∅), seeds and settings.

:func:`prepare` checks an attribution and runs the two reference forwards of one instance;
:class:`MetricContext` holds the result and is shared by every metric and method of that
instance (:mod:`aieg_fast.eval.metrics`, :mod:`aieg_fast.eval.soft`).
"""
from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from ..core.model_state import model_prepared
from ..core.validation import as_int
from ..result import Attribution
from ..runs import same_setting
from .checks import check_positive_int, check_seed
from .forwards import last_logits_embeds

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = ["PROB_SPACES", "MetricContext", "prepare", "context_for", "check_ctx_settings", "check_attribution", "check_keywords", "seed_for",
           "target_probs", "step_attribution"]

PROB_SPACES = ("vocab", "labels")
_DEGENERATE_EPS = 1e-6


def check_attribution(attr) -> None:
    """Check that ``attr`` is an :class:`Attribution` the metrics can use.

    Raises:
        TypeError: not an Attribution. ValueError: scores of the wrong shape or not finite, no
            attributable position, no target id.
    """
    if not isinstance(attr, Attribution):
        raise TypeError(f"attr must be an aieg_fast Attribution, got {type(attr).__name__}")
    L = len(attr.token_ids)
    if not torch.is_tensor(attr.scores):  # assigned after the result was made: __post_init__ converts only when made
        raise TypeError(f"attr.scores must be a tensor, got {type(attr.scores).__name__}; set new scores with "
                        "dataclasses.replace(attr, scores=...), which converts a list or NumPy array")
    if attr.scores.dim() != 1 or attr.scores.numel() != L:
        step = "; a generation result is scored one step at a time: step_attribution(gen, t)" if attr.scores.dim() == 2 else ""
        raise ValueError(f"attr.scores must have one score per token ({L}), got shape {tuple(attr.scores.shape)}{step}")
    if len(attr.attributable) != L:
        raise ValueError(f"attr.attributable must have {L} entries, got {len(attr.attributable)}")
    if not any(attr.attributable):
        raise ValueError("attr has no attributable position")
    if isinstance(attr.target, dict) and attr.target.get("kind") == "tokens":
        raise ValueError(f"attr explains a multi-token target ({attr.target.get('text')!r}, ids {attr.target.get('ids')}): "
                         "the metrics score one next token's probability; attribute a single-token target, or score "
                         "generated text one step at a time (attribute_generation, then step_attribution)")
    tid = as_int(attr.target.get("id")) if isinstance(attr.target, dict) else None  # np.int64(5), torch.tensor(5) too
    if isinstance(tid, bool) or not isinstance(tid, int):
        raise ValueError(f"attr.target must hold the target id, got {attr.target!r}")
    if not torch.isfinite(attr.scores.float()).all():
        raise ValueError("attr.scores contains NaN or infinite values")


def step_attribution(gen: Attribution, t: int) -> Attribution:
    """Step t of a generation result as the next-token attribution the metrics take.

    Row t of :meth:`Explainer.attribute_generation`'s result explains the generated token y_t
    from its context c_t = prompt ⊕ y_<t. The returned attribution has that context as its
    input (``token_ids`` = the first L_p + t ids), the row's scores on it, y_t as its target
    (``target["id"]``), and as ``attributable`` the positions the row attributes: the prompt's
    text tokens, and the generated tokens y_<t when the generation was attributed with
    ``interpolate_generated=True``. These are the positions the metrics perturb
    (:func:`prepare`); the others (template, special tokens, a generated prefix held fixed)
    are kept as they are, and their NaN scores become 0.

    Args:
        gen: a generation :class:`Attribution` (``scores`` Tensor[T, L_p + T]).
        t: the step, 0 ≤ t < T.

    Returns:
        An :class:`Attribution` with ``scores`` Tensor[L_p + t] and target ``{"kind": "token",
        "id": y_t, "text", "step": t}`` (specs/grad_ellm.md §5.3, item 6: generation has one
        instance per generated step); its ``text`` and ``offsets`` are the generation's up to the
        context's end, so its words are grouped by their characters as the generation's views
        group the prompt's (but the prompt's last word, which joins the generated tokens of the
        context where they go on without a space: the views split prompt and generation).

    Raises:
        ValueError: ``gen`` is not a generation result, or ``t`` is out of range.
    """
    if not isinstance(gen, Attribution) or not gen.is_generation:
        raise ValueError(f"gen must be a generation Attribution (2-D scores), got {type(gen).__name__}")
    T, t = gen.scores.shape[0], as_int(t)  # a NumPy or one-element tensor integer as an int
    if isinstance(t, bool) or not isinstance(t, int) or not (0 <= t < T):
        raise ValueError(f"t must be a step in [0, {T}), got {t!r}")
    n = gen.prompt_length + t
    eligible = list(gen.attributable[:n])
    row = gen.scores[t, :n]
    row = torch.where(torch.tensor(eligible, dtype=torch.bool), row, torch.zeros_like(row))
    y = int((gen.info.get("generated_ids") or gen.token_ids[gen.prompt_length:])[t])  # the ids after the prompt
    offsets = list(gen.offsets[:n])  # words grouped as in the generation's own views (by offsets where it has them)
    ends = [o[1] for o in offsets if o is not None]
    return Attribution(
        tokens=gen.tokens[:n], token_ids=list(gen.token_ids[:n]), scores=row, method=gen.method,
        target={"kind": "token", "id": y, "text": gen.tokens[n], "step": t}, options=gen.options, model=gen.model,
        attributable=eligible, raw_tokens=gen.raw_tokens[:n], special=gen.special[:n],
        degenerate=[f for f in gen.degenerate if f.get("step") == t],
        text=gen.text[: max(ends)] if offsets and ends else "", offsets=offsets if offsets and ends else [],
    )


def seed_for(seed: int, instance_id, tag: str) -> int:
    """A 60-bit seed derived from (seed, instance_id, tag) by SHA-256 (the same on every machine)."""
    h = hashlib.sha256(f"{int(seed)}|{instance_id}|{tag}".encode()).hexdigest()
    return int(h[:15], 16)


@dataclass
class MetricContext:
    """What every metric of one instance shares: input, target, p(y|x), p(y|x_∅), settings.

    Build it once with :func:`prepare` and pass ``ctx=`` to the metric functions to avoid
    recomputing the reference forwards for each method. ``tie_seed`` seeds the random order of
    equal scores in the top-k of the hard metrics (derived from (seed, instance_id), so every
    method of the instance gets the same tie order).
    """

    token_ids: List[int]
    eligible: Tensor  # [L] bool: positions that may be perturbed (attributable)
    target: int
    prob_space: str
    label_ids: Optional[List[int]]
    p: float  # p(y | x)
    p0: float  # p(y | x_∅): eligible token embeddings zeroed
    embeds: Tensor  # [L, d]
    seed: int
    instance_id: object
    batch_size: int
    tie_seed: int = 0
    #: p(y | masked input) already computed for this instance, keyed by the draws' tag and the
    #: exact keep probabilities (:func:`~aieg_fast.eval.soft.soft_probs`): two soft maps (or two
    #: methods) that give the same keep probabilities share one batched forward.
    probs_memo: Dict[Tuple, Tensor] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def degenerate(self) -> bool:
        """True when the empty input is at least as likely as the full one (soft metrics undefined)."""
        return (self.p - self.p0) < _DEGENERATE_EPS


def target_probs(logits: Tensor, target: int, prob_space: str, label_ids: Optional[List[int]]) -> Tensor:
    """p(target) per row of ``logits`` [R, V]: softmax over all outputs (``"vocab"``) or over
    ``label_ids`` (``"labels"``). Returns Tensor[R]."""
    if prob_space == "vocab":
        return torch.softmax(logits, -1)[:, target]
    sub = logits[:, label_ids]
    return torch.softmax(sub, -1)[:, label_ids.index(target)]


def prepare(
    ex: Explainer,
    attr: Attribution,
    *,
    prob_space: Optional[str] = None,
    label_ids=None,
    seed: int = 0,
    instance_id=0,
    batch_size: int = 64,
) -> MetricContext:
    """Reference forwards of one instance: p(y|x) and p(y|x_∅) in one batched call.

    Args:
        ex: the explainer whose model produced ``attr``.
        attr: an attribution (its ``token_ids``, ``attributable`` and ``target["id"]`` are used).
        prob_space: ``"vocab"`` (softmax over all outputs), ``"labels"`` (softmax over
            ``label_ids``) or None (default): ``"labels"`` when ``label_ids`` are given (or
            taken from ``attr``, below), else ``"vocab"``.
        label_ids: label token ids or single-token strings (class indices for a classifier):
            at least two, no two alike, the target among them; ignored with ``"vocab"``. None,
            with ``prob_space`` None or ``"labels"``: an attribution explained with
            ``target_fn="label_logprob"`` is scored over the label ids it recorded, and a
            contrast attribution (``contrast_target=``) over its target and contrast (the
            probability each explained; ``prob_space="vocab"`` scores p(target) over the whole
            vocabulary instead); ``"labels"`` needs them given otherwise.
        seed, instance_id: seed of the common random numbers of the soft metrics and of the
            top-k tie order (``tie_seed``).
        batch_size: rows per forward.

    Raises:
        TypeError: ``label_ids`` not a list, or an entry neither an int nor a str (named).
        ValueError: bad ``prob_space`` / ``label_ids`` (an id out of range, a string that is not
            one token, a repeat, fewer than two: ``label_ids[i]`` named) / ``batch_size``, an attribution without
            target or attributable positions, one made by another model (``attr.model`` is
            not ``ex.name`` nor a path of the same folder; both named), or ``token_ids`` that do
            not fit the model.
    """
    check_attribution(attr)
    if attr.model and ex.name and not same_setting(attr.model, ex.name):  # its ids would be read by another vocabulary
        raise ValueError(f"attr was made by model {attr.model!r}, not by this explainer's {ex.name!r}: the metrics run its "
                         "tokens through ex's model; pass the explainer that made it (the same model under another name: "
                         "set attr.model = ex.name)")
    if prob_space != "vocab" and label_ids is None:
        label_ids = _explained_labels(attr)
    if prob_space is None:
        prob_space = "labels" if label_ids is not None else "vocab"
    if prob_space not in PROB_SPACES:
        raise ValueError(f"prob_space must be one of {list(PROB_SPACES)} or None, got {prob_space!r}")
    batch_size = check_positive_int("batch_size", batch_size)
    check_seed(seed)
    target = int(attr.target["id"])
    n_out = ex.adapter.num_labels if ex.adapter.kind == "classifier" else ex.vocab_size
    if not (0 <= target < n_out):
        raise ValueError(f"attr.target id {target} is out of range for this model ({n_out} outputs)")
    if any(not (0 <= int(i) < ex.vocab_size) for i in attr.token_ids):
        raise ValueError("attr.token_ids contains ids outside the model's vocabulary")
    if prob_space == "labels":
        if label_ids is None:
            raise ValueError("label_ids must be given (token ids or single-token strings) when prob_space='labels'")
        label_ids = _label_id_list(ex, attr, label_ids, n_out)
        if target not in label_ids:
            raise ValueError(f"label_ids {label_ids} must contain the attribution target {target}")
    else:
        label_ids = None
    ids = torch.tensor(attr.token_ids, dtype=torch.long, device=ex.device)
    eligible = torch.tensor(attr.attributable, dtype=torch.bool, device=ex.device)
    with model_prepared(ex.model), torch.no_grad():
        E = ex.adapter.embeddings(ids).detach()
        E0 = torch.where(eligible.unsqueeze(-1), torch.zeros_like(E), E)
        pr = target_probs(last_logits_embeds(ex, torch.stack([E, E0]), batch_size), target, prob_space, label_ids)
    return MetricContext(
        token_ids=[int(i) for i in attr.token_ids], eligible=eligible, target=target, prob_space=prob_space,
        label_ids=label_ids, p=float(pr[0]), p0=float(pr[1]), embeds=E, seed=int(seed), instance_id=instance_id,
        batch_size=batch_size, tie_seed=seed_for(seed, instance_id, "topk_ties"),
    )


def _label_id_list(ex: Explainer, attr: Attribution, label_ids, n_out: int) -> List[int]:
    """``label_ids`` as ids: strings resolved by the tokenizer, each an int in [0, n_out), no
    two alike, at least two (a softmax over one label is 1 whatever the input).

    Raises:
        TypeError / ValueError: naming ``label_ids[i]`` and what it holds."""
    if isinstance(label_ids, (str, bytes)) or not hasattr(label_ids, "__len__"):
        raise TypeError(f"label_ids must be a list of token ids or single-token strings, got {type(label_ids).__name__}")
    ids = []
    for i, lab in enumerate(label_ids):
        if isinstance(lab, str):
            try:
                ids.append(int(ex.resolve_target(lab, context=attr.text or None)["id"]))
            except ValueError as err:
                raise ValueError(f"label_ids[{i}]: {err}") from None
        elif isinstance(lab, bool) or not isinstance(as_int(lab), int):
            raise TypeError(f"label_ids[{i}] must be a token id (int) or a single-token string, got {lab!r}")
        elif not 0 <= as_int(lab) < n_out:
            raise ValueError(f"label_ids[{i}] must be an id in [0, {n_out}) (the model's outputs), got {lab!r}")
        else:
            ids.append(as_int(lab))
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"label_ids names the same output more than once (ids {twice}): {list(label_ids)!r}")
    if len(ids) < 2:
        raise ValueError(f"label_ids needs at least 2 labels to renormalise over, got {list(label_ids)!r} (a softmax "
                         "over one output is 1 whatever the input: every metric would be 0)")
    return ids


def _explained_labels(attr: Attribution) -> Optional[list]:
    """The outputs an attribution's explained quantity compares: the target and contrast ids of
    a contrast attribution (z_target − z_contrast is log p(target) over the two, renormalised),
    the ids a ``target_fn="label_logprob"`` attribution recorded (``label_ids``), else (a result
    saved before they were) its ``label_set`` when no two entries repeat (a classifier's class
    names may); None for other attributions."""
    contrast = (attr.target or {}).get("contrast_id")
    if contrast is not None:
        return [int(attr.target["id"]), int(contrast)]
    opts = attr.options or {}
    if opts.get("target_fn") != "label_logprob":
        return None
    if opts.get("label_ids"):
        return [int(i) for i in opts["label_ids"]]  # as resolved when explained: after the batch's first text
    labels = opts.get("label_set") or None
    return list(labels) if labels and len({(type(x), x) for x in labels}) == len(labels) else None


def context_for(ex, attr, ctx: Optional[MetricContext], prepare_kw: dict) -> MetricContext:
    """``ctx`` after checking that it was prepared for ``attr``, or :func:`prepare` (``prepare_kw``).

    Raises:
        ValueError: as :func:`check_ctx_settings`; ``ctx`` prepared for another input, target or
            attributable positions.
    """
    if ctx is None:
        return prepare(ex, attr, **prepare_kw)
    check_ctx_settings(prepare_kw)
    check_attribution(attr)
    if list(map(int, attr.token_ids)) != ctx.token_ids or int(attr.target["id"]) != ctx.target:
        raise ValueError("ctx was prepared for another input or target than attr")
    if attr.attributable != ctx.eligible.tolist():
        raise ValueError("ctx was prepared with other attributable positions than attr")
    return ctx


def check_ctx_settings(prepare_kw: dict) -> None:
    """Refuse settings of :func:`prepare` (``seed``, ``prob_space``, ...) given beside a ``ctx``,
    which already fixed them: they would be ignored.

    Raises:
        ValueError: names the settings.
    """
    if prepare_kw:
        raise ValueError(f"ctx was prepared with its own settings; {sorted(prepare_kw)} would be ignored: pass them to "
                         "prepare() when making ctx, or leave ctx out")


def check_keywords(caller: str, kw: dict, *takers, but=()) -> None:
    """Refuse a keyword of ``kw`` that none of the functions ``takers`` takes (``ex``, ``attr``
    and the names in ``but``, which ``caller`` sets itself, aside), naming ``caller`` (the
    function the user called) where Python would name the inner function it passes ``**kw`` to
    (``prepare() got an unexpected keyword argument``).

    Raises:
        TypeError: ``"<caller>() got an unexpected keyword argument 'foo'"``, with the keywords
            it takes.
    """
    if not kw:  # the usual call: nothing to look up (the metrics call each other with ctx= alone)
        return
    taken = {n for f in takers for n, p in inspect.signature(f).parameters.items()
             if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)} - {"ex", "attr", *but}
    unknown = [k for k in kw if k not in taken]
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}; it takes {sorted(taken)}")
