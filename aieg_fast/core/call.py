"""The per-call settings shared by ``attribute`` and ``attribute_generation``: the explained
quantity (target function, label set, contrast token) and the baseline (kind, α range, noise
samples). Resolved and checked once, before any model work (:func:`resolve_call`)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import torch

from .baselines import baseline_rows, check_alpha_range, check_baseline, check_baseline_noise, describe_baseline, noisy_baseline, row_noise, shift_baseline
from .batch import Batch
from .diagnostics import NO_SIGNAL_KINDS, low_precision_hint, method_flags, warn_flags
from .inputs import as_id_list, per_text_ids
from .objective import LabelSet, check_target_fn, target_fn_name
from .validation import as_scalar_int, check_int

__all__ = ["CallSettings", "resolve_call", "check_label_set_use", "apply_baseline", "run_samples", "check_targets_against", "flag_rows"]


@dataclass
class CallSettings:
    """Resolved settings of one call.

    Attributes:
        target_fn: a name, :class:`~aieg_fast.core.objective.LabelSet` or callable.
        contrast: per text a resolved target dict (``{"kind", "id", "text"}``) or None.
        baseline: the user's ``baseline=`` (resolved per batch by :func:`apply_baseline`).
        alpha0: start of the path (``alpha_range[0]``). n_samples, noise, seed: baseline noise
        draws, their standard deviation (None: 0.1 × the RMS of each text's attributable input
        embeddings) and seed. row_noise: the σ of each row, in ``inputs_embeds`` units (filled
        by :func:`apply_baseline`; σ / the adapter's ``inputs_embeds_scale`` is the noise on the
        adapter's embeddings).
        record: what results store (filled by :func:`apply_baseline`).
    """

    target_fn: Any = "logit"
    contrast: List[Optional[Dict[str, Any]]] = dataclasses.field(default_factory=list)
    baseline: Any = None
    alpha0: float = 0.0
    n_samples: int = 1
    noise: Optional[float] = None
    seed: int = 0
    row_noise: List[float] = dataclasses.field(default_factory=list)
    record: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def record_of(self, b: Optional[int] = None) -> Dict[str, Any]:
        """:attr:`record` for row ``b``: with noisy baselines, ``baseline_noise`` is the row's σ
        (``b`` None: the list of every row's, as a generation's steps have)."""
        if self.n_samples == 1:
            return self.record
        return dict(self.record, baseline_noise=list(self.row_noise) if b is None else self.row_noise[b])

    def recorded_options(self, method_options: Dict[str, Any], n_steps: Optional[int], template: Optional[str],
                         b: Optional[int] = None) -> Dict[str, Any]:
        """The options a result records: the method's resolved ``method_options``, ``n_steps``
        (None for a method without a path: it is then left out), the objective's name, the
        ``template``, the label set of ``target_fn="label_logprob"`` (as given, and its ids as
        resolved) and the baseline record of row ``b`` (:meth:`record_of`)."""
        out = dict(method_options, **({} if n_steps is None else {"n_steps": n_steps}), target_fn=self.target_fn_name,
                   template=template)
        if isinstance(self.target_fn, LabelSet):
            out["label_set"], out["label_ids"] = list(self.target_fn.texts), list(self.target_fn.ids)
        return dict(out, **self.record_of(b))

    @property
    def target_fn_name(self) -> str:
        return target_fn_name(self.target_fn, any(c is not None for c in self.contrast))

    def contrast_tensor(self, device) -> Optional[torch.Tensor]:
        """Tensor[B] long of the contrast ids, or None when no text has one."""
        if all(c is None for c in self.contrast):
            return None
        if any(c is None for c in self.contrast):
            raise ValueError("contrast_target: give a contrast for every text or for none")
        return torch.tensor([c["id"] for c in self.contrast], dtype=torch.long, device=device)


def _resolve_as(ex, value, name: str, context=None):
    """``ex.resolve_target(value)`` with errors naming the argument ``name`` (e.g.
    ``contrast_target`` or ``label_set[1]``) instead of ``target``."""
    try:
        return ex.resolve_target(value, context=context)
    except (TypeError, ValueError) as err:
        msg = str(err).split("; with target_fn='logprob'")[0]  # that advice is the target's: a contrast / label is one token
        msg = name + msg[len("target"):] if msg.startswith("target") else f"{name}: {msg}"
        if name.startswith("label_set"):  # None (the prediction) is a target's value, not a label's
            msg = msg.replace("a token string, a token id or None", "a token string or a token id")
        raise type(err)(msg) from None


def check_label_set_use(target_fn, label_set) -> None:
    """Refuse a ``label_set`` given with a ``target_fn`` other than ``"label_logprob"`` (it would
    be ignored); needs no model.

    Raises:
        ValueError: names both arguments and the ``target_fn`` received.
    """
    if label_set is not None and target_fn != "label_logprob":
        raise ValueError(f"label_set is used only with target_fn='label_logprob', got target_fn={target_fn!r}")


def _as_given(label):
    """A label of ``label_set`` as the records keep it: an id as an int (a numpy or torch integer
    too), a token string as it is (an id written as a string would name another token)."""
    if isinstance(label, str):
        return label
    return int(label) if not isinstance(label, bool) and hasattr(label, "__index__") else str(label)


def _resolve_target_fn(ex, target_fn, label_set, context=None, gradients: bool = True):
    check_label_set_use(target_fn, label_set)
    if label_set is not None:
        label_set = as_id_list(label_set, "label_set")
        if isinstance(label_set, str) or not isinstance(label_set, (list, tuple)):
            raise TypeError(f"label_set must be a list of labels (token strings or ids), got {type(label_set).__name__}")
        none = next((i for i, l in enumerate(label_set) if l is None), None)
        if none is not None:
            raise TypeError(f"label_set[{none}] is None: each label is a token string or a token id, got {list(label_set)!r}")
        ids = [_resolve_as(ex, l, f"label_set[{i}]", context)["id"] for i, l in enumerate(label_set)]
        if len(set(ids)) != len(ids):
            raise ValueError(f"label_set has repeated labels: {list(label_set)} (ids {ids})")
        target_fn = LabelSet(tuple(int(i) for i in ids), tuple(_as_given(l) for l in label_set))
    elif isinstance(target_fn, str) and target_fn == "label_logprob":
        if ex.adapter.kind != "classifier":
            raise ValueError("target_fn='label_logprob' needs label_set=[...] (the label tokens)")
        n = ex.adapter.num_labels
        target_fn = LabelSet(tuple(range(n)), tuple(ex._label(i) for i in range(n)))  # all classes
    width = getattr(ex.adapter.head, "out_features", None) if callable(target_fn) else None
    check_target_fn(target_fn, width, gradients)
    return target_fn


def _special_ids(ex) -> Dict[str, Optional[int]]:
    """{"unk", "pad", "eos"} → the tokenizer's id of that token, or None (a baseline name)."""
    special = {k: getattr(ex.tokenizer, f"{k}_token_id", None) for k in ("unk", "pad", "eos")}
    return {k: (v if isinstance(v, int) else None) for k, v in special.items()}


def resolve_call(ex, method, n_texts: int, *, target_fn="logit", label_set=None, contrast_target=None, baseline=None,
                 alpha_range=None, n_baseline_samples: int = 1, baseline_noise: Optional[float] = None, seed: int = 0,
                 contexts: Optional[Sequence[str]] = None, opts=None) -> CallSettings:
    """Check and resolve the target and baseline settings of a call (before any model work).

    Args:
        ex: the :class:`~aieg_fast.Explainer` (``resolve_target``, ``adapter``, tokenizer).
        method: the :class:`~aieg_fast.methods.Method` (``uses_baseline``).
        n_texts: texts in the call (a list ``contrast_target`` has one entry per text).
        target_fn, label_set, contrast_target, baseline, alpha_range, n_baseline_samples,
            baseline_noise, seed: as ``Explainer.attribute``.
        contexts: per text the encoded prompt string: contrast tokens are tokenised as they would
            follow it, label words as they would follow the first one (None: alone).
        opts: the method's validated options, for its :meth:`~aieg_fast.methods.Method.check_target`
            (None: not checked).

    Raises:
        ValueError / TypeError: naming the argument and the value received.
    """
    contexts = list(contexts) if contexts is not None else [None] * n_texts
    baseline = as_scalar_int(baseline)  # np.int32(5), a 0-d integer tensor: the token id
    tfn = _resolve_target_fn(ex, target_fn, label_set, contexts[0] if contexts else None, getattr(method, "gradients", True))
    if contrast_target is not None and not isinstance(tfn, (str, LabelSet)):
        raise ValueError("contrast_target cannot be combined with a callable target_fn (compute the contrast inside it)")
    contrast_target = per_text_ids(contrast_target, "contrast_target")
    cts = contrast_target if isinstance(contrast_target, (list, tuple)) else [contrast_target] * n_texts
    if len(cts) != n_texts:
        entries, texts = "entry" if len(cts) == 1 else "entries", "text" if n_texts == 1 else "texts"
        raise ValueError(f"contrast_target has {len(cts)} {entries} for {n_texts} {texts}: give one per text (or one for all)")
    single = not isinstance(contrast_target, (list, tuple))
    contrast = [None if c is None else _resolve_as(ex, c, "contrast_target" if single else f"contrast_target[{i}]", ctx)
                for i, (c, ctx) in enumerate(zip(cts, contexts))]
    if opts is not None:
        method.check_target(opts, any(c is not None for c in contrast))
    alpha0 = check_alpha_range(alpha_range)
    check_int("n_baseline_samples", n_baseline_samples, 1)
    check_baseline_noise(baseline_noise, n_baseline_samples)
    check_int("seed", seed, 0, 2**64 - 1)  # what torch.Generator.manual_seed takes
    check_baseline(ex.adapter, baseline, _special_ids(ex))  # all but a [L, d] tensor's rows, before any model work
    custom = baseline is not None or alpha0 > 0 or n_baseline_samples > 1
    if custom and not getattr(method, "uses_baseline", False):
        raise ValueError(
            f"method {method.name!r} does not use a baseline; baseline, alpha_range and n_baseline_samples apply to "
            "the path methods (integrated_gradients, integrated_decision_gradients, aieg) and to the masking "
            "methods (occlusion, heta)"
        )
    if baseline is None:  # the method's own default (None: the reference token)
        baseline = getattr(method, "default_baseline", None)
    return CallSettings(tfn, contrast, baseline, alpha0, n_baseline_samples, baseline_noise, seed)


def check_targets_against(settings: CallSettings, target_ids: Sequence[Optional[int]],
                          target_texts: Optional[Sequence[Optional[str]]] = None) -> None:
    """A given target must be in the label set and differ from its contrast (ValueError, naming
    the target by its text, from ``target_texts``, and its id)."""
    tfn = settings.target_fn
    for i, t in enumerate(target_ids):
        if t is None:
            continue
        if isinstance(tfn, LabelSet) and t not in tfn.ids:
            text = target_texts[i] if target_texts is not None and i < len(target_texts) else None
            name = f"{text!r} (id {t})" if text is not None else str(t)
            raise ValueError(f"target {name} is not in label_set {list(tfn.texts)} (ids {list(tfn.ids)})")
        c = settings.contrast[i] if i < len(settings.contrast) else None
        if c is not None and c["id"] == t:
            raise ValueError(f"contrast_target equals the target (id {t}); F = z_t − z_c would be 0")


def apply_baseline(ex, batch: Batch, settings: CallSettings, uses_baseline: bool) -> Batch:
    """``batch`` with the baseline of ``settings`` (and α0 shift); fills ``settings.record``."""
    if not uses_baseline:
        settings.record = {}
        return batch
    rows, desc = baseline_rows(ex.adapter, settings.baseline, batch.lengths, ex.ref_token_id, _special_ids(ex))
    if settings.baseline is not None:
        batch = _with_rows(batch, rows)
    if settings.alpha0 > 0:
        batch = dataclasses.replace(batch, baseline=shift_baseline(batch.embeds, batch.baseline, settings.alpha0))
    if settings.n_samples > 1:
        scale = ex.adapter.inputs_embeds_scale
        settings.row_noise = [float(settings.noise)] * batch.B if settings.noise is not None else row_noise(batch, scale)
    settings.record = describe_baseline(desc, settings.alpha0, settings.n_samples, settings.noise, settings.seed)
    return batch


def _with_rows(batch: Batch, rows) -> Batch:
    Eb = batch.baseline.clone()
    for b, (r, o, n) in enumerate(zip(rows, batch.offsets, batch.lengths)):
        keep = batch.fixed[b, o : o + n].unsqueeze(-1)
        Eb[b, o : o + n] = torch.where(keep, batch.embeds[b, o : o + n], r.to(Eb.dtype).expand(n, -1))
    return dataclasses.replace(batch, baseline=Eb)


def run_samples(run, ctx, settings: CallSettings, batch_field: str = "batch", token_info=()):
    """``run(ctx)`` → (MethodOutput, used) once, or averaged over ``settings.n_samples`` noisy
    baselines (scores averaged; the per-token ``info`` entries named in ``token_info`` (the
    method's :attr:`~aieg_fast.methods.base.Method.token_info`) averaged token by token;
    ``F_baseline`` averaged, per-sample values in ``info["F_baseline_samples"]``;
    ``convergence_delta`` the mean of the draws', so the completeness check and its flag hold as
    with one baseline; entries of the path (grid, emphasis factors, path logits) are the first
    draw's). Non-finite scores are flagged by the caller (:func:`flag_rows`, whose warning names
    the baseline)."""
    if settings.n_samples == 1:
        out, used = run(ctx)
    else:
        base, scale = getattr(ctx, batch_field), ctx.adapter.inputs_embeds_scale
        outs = []
        for s in range(settings.n_samples):
            noisy = dataclasses.replace(base, baseline=noisy_baseline(base, settings.row_noise, settings.seed, s, scale))
            ctx_s = dataclasses.replace(ctx, **{batch_field: noisy}, timing={})
            if s > 0:
                ctx_s.targets, ctx_s.probs = outs[0][2].targets, outs[0][2].probs  # the first draw's prediction
            o, used = run(ctx_s)
            outs.append((o, used, ctx_s))
        out = _average([o for o, _, _ in outs], token_info)
        ctx.targets, ctx.probs = outs[0][2].targets, outs[0][2].probs
        ctx.timing.update({k: sum(c.timing.get(k, 0.0) for _, _, c in outs) for k in outs[0][2].timing})
    return out, used


def _mean(draws):
    """One entry's mean over the draws: tensors element by element (float32), lists of numbers
    item by item (an item None in any draw stays None)."""
    if all(isinstance(d, torch.Tensor) for d in draws):
        return sum(d.float() for d in draws) / len(draws)
    return [None if None in t else sum(t) / len(draws) for t in zip(*draws)]


def _average(outs, token_info=()):
    n = len(outs)
    first = outs[0]
    scores = [_mean([o.scores[b] for o in outs]) for b in range(len(first.scores))]
    info = dict(first.info)
    for key in token_info:
        rows = [o.info.get(key) for o in outs]
        if all(isinstance(r, torch.Tensor) for r in rows):  # one [B, L] tensor
            info[key] = _mean(rows)
        elif all(isinstance(r, list) for r in rows):  # per example: a tensor, or a list of numbers
            info[key] = [_mean(per) for per in zip(*rows)]
    if isinstance(first.info.get("F_baseline"), list):
        per = [o.info["F_baseline"] for o in outs]
        B = len(per[0])
        info["F_baseline_samples"] = [[p[b] for p in per] for b in range(B)]  # per example, one value per draw
        info["F_baseline"] = [sum(p[b] for p in per) / n for b in range(B)]
    deltas = [o.info.get("convergence_delta") for o in outs]
    if all(isinstance(d, list) and None not in d for d in deltas):
        # Σ s − (F_input − F_baseline) is linear in the scores and in F_baseline: the mean of the
        # draws' errors is the averaged scores' error against the averaged F_baseline
        info["convergence_delta"] = [sum(d[b] for d in deltas) / n for b in range(len(deltas[0]))]
    else:
        info.pop("convergence_delta", None)
    return dataclasses.replace(first, scores=scores, info=info)


def flag_rows(method, opts, out, rows_valid, settings: CallSettings, labels=None, adapter=None, targets=None, starts=None):
    """The degenerate-signal flags of every row of ``out`` (:func:`~aieg_fast.core.diagnostics.method_flags`),
    warned once as an :class:`~aieg_fast.core.diagnostics.AttributionWarning`.

    Args:
        method, opts: the method and its options. out: its ``MethodOutput``.
        rows_valid: per row (scores Tensor[L], attributable bool Tensor[L]).
        settings: the call's settings (the baseline named when a value is not finite).
        labels: per row what the warning calls it (``{"text": b}`` / ``{"step": t}``), or None.
        adapter: the model's :class:`~aieg_fast.models.DecoderAdapter`, or None. Its embeddings'
            dtype: for float16 / bfloat16 a completeness flag adds what low precision does to it
            and the fix (:func:`~aieg_fast.core.diagnostics.low_precision_hint`); its
            ``routed_experts``: a completeness flag on a mixture-of-experts model says that more
            steps do not remove the routing's jumps (:data:`~aieg_fast.core.diagnostics.ROUTING_NOTE`).
        targets: per row the target id explained (the prediction filled in), or None: a row
            whose target is its own contrast token (F = z_t − z_c ≡ 0: the model predicts the
            contrast) and carries no signal gets one ``zero_signal`` flag that says why, instead
            of the generic ones (attention weights, which do not use F, keep theirs).
        starts: per row where its tokens begin in its padded row (``Batch.offsets``), for a
            custom method's raw signal given over the padded row; None: 0.

    Returns:
        List (one per row) of lists of flags.
    """
    dtype = None if adapter is None else adapter.embeddings.weight.dtype
    routed = bool(getattr(adapter, "routed_experts", False))
    flags = [method_flags(method, opts, out.info, b, s, v, routed, starts[b] if starts else 0) for b, (s, v) in enumerate(rows_valid)]
    for b, c in enumerate(settings.contrast if targets is not None else []):
        if c is not None and int(targets[b]) == c["id"] and any(f["kind"] in NO_SIGNAL_KINDS for f in flags[b]):
            flags[b] = [{"kind": "zero_signal", "message": f"F = z_t − z_c ≡ 0: the model's prediction is contrast_target "
                         f"{c.get('text')!r} (id {c['id']}) itself, so the scores carry no signal; pass target= (the "
                         "token to explain against it) or another contrast_target"}]
    extra = low_precision_hint(dtype)
    if extra:
        flags = [[dict(f, message=f["message"] + extra) if f["kind"] == "completeness" else f for f in fl] for fl in flags]
    hint = method.non_finite_hint(opts, settings.record.get("baseline", "reference"), dtype)
    named = [dict(f, **(labels[b] if labels else {})) for b, fl in enumerate(flags) for f in fl]
    warn_flags(named, method.name, hint)
    return flags


def multi_token_inputs(m, call: CallSettings, tinfo, encoded, max_positions: int, device, allowed: Sequence[str]):
    """A multi-token target (every text's, same length T): (Tensor[B, T] of its ids, the texts
    with y_<T appended and held fixed); (None, encoded) otherwise. ``allowed``: the methods that
    take one (named in the error).

    Raises:
        ValueError: a method or setting that cannot take one, too many positions, or targets of
            several tokens not given for every text with one length (names the count per text).
    """
    multi = [ti for ti in tinfo if ti["kind"] == "tokens"]
    if not multi:
        return None, encoded
    if len(multi) != len(tinfo) or len({len(ti["ids"]) for ti in tinfo}) != 1:
        counts = [len(ti["ids"]) if ti["kind"] == "tokens" else 1 for ti in tinfo]
        unset = [b for b, ti in enumerate(tinfo) if ti["kind"] != "tokens" and ti["id"] is None]
        raise ValueError("target: a multi-token target must be given for every text, with the same number of tokens; "
                         f"got {counts} target tokens per text"
                         + (f" (text(s) {unset} without a target: the model's prediction, 1 token)" if unset else ""))
    if not m.multi_token_targets:
        raise ValueError(f"method {m.name!r} does not explain multi-token targets; use one of {list(allowed)}")
    if any(c is not None for c in call.contrast):
        raise ValueError("contrast_target cannot be combined with a multi-token target")
    T = len(multi[0]["ids"])
    out = [(ids + ti["ids"][:-1], fx + [True] * (T - 1)) for (ids, fx), ti in zip(encoded, tinfo)]
    if max(len(ids) for ids, _ in out) > max_positions:
        raise ValueError(f"text plus the multi-token target exceed the model's {max_positions} positions")
    for ti in tinfo:
        ti["id"] = ti["ids"][-1]  # the context's target row: the last token (F sums every step)
    return torch.tensor([ti["ids"] for ti in tinfo], dtype=torch.long, device=device), out


def target_prob(ctx, out, b: int, tid: int, kind: str) -> Optional[float]:
    """p(target) of example ``b`` when the call computed it: from the output distribution, or
    for a multi-token target exp(F(x)) = Π_t p(y_t | …)."""
    if kind == "tokens":
        f = out.info.get("F_input")
        return None if f is None else float(torch.tensor(f if not isinstance(f, list) else f[b]).exp())
    return None if ctx.probs is None else float(ctx.probs[b, tid])
