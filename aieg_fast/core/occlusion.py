"""Occlusion: replace groups of tokens and measure how the output changes, all masked inputs batched.

A group is a set of attributable positions of one example (one token, the tokens of one word,
or a span of consecutive attributable tokens). Masking a group writes the baseline rows E′ of
the batch (the ``baseline=`` kinds of :mod:`~aieg_fast.core.baselines`: the reference token,
zero, the mean embedding, UNK, ...) at its positions, everything else stays. The masked inputs
of every group of every example are stacked and run in chunks of ``ctx.chunk`` rows, without
gradients; per group the change is

* ``"delta"``: F(x) − F(x with the group masked), F the call's explained quantity
  (:meth:`Context.F`), as Captum's ``FeatureAblation`` / ``Occlusion`` (original − ablated);
* ``"kl"``: KL(P(·|x) ‖ P(·|x with the group masked)) over the whole output distribution at the
  predicting position (nats), HETA's information term (specs/heta.md §3, paper Eq. 4).

A token's score is the mean over the groups that contain it (one group for tokens and words;
sliding spans overlap, as Captum's ``Occlusion`` averages its windows).

A masked input equals the input before its group's first position, so for a family with a KV
cache each one runs from that position on, after the example's cached prefix
(:mod:`~aieg_fast.core.prefix`): about half the positions of whole forwards, same results.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import torch
from torch import Tensor

from .prefix import prefix_batches

__all__ = ["GRANULARITIES", "MEASURES", "kl_divergence", "occlude", "occlusion_groups", "reference_outputs",
           "runs_after_prefix", "sequence_occlude", "spread"]

#: what one masked group is
GRANULARITIES = ("token", "word", "span")
#: how the change of the output is measured
MEASURES = ("delta", "kl")


def occlusion_groups(fixed: Tensor, granularity: str, span_width: int = 3, span_stride: int = 1,
                     word_ids: Optional[Tensor] = None) -> Tensor:
    """The groups masked together in one example.

    Args:
        fixed: bool Tensor[L], positions that are never masked (special, template, padding).
        granularity: ``"token"`` (one group per attributable token), ``"word"`` (the attributable
            tokens of one word, from ``word_ids``) or ``"span"`` (windows of ``span_width``
            consecutive attributable tokens starting every ``span_stride`` tokens, the last ones
            cut at the end of the text).
        word_ids: Tensor[L] long, the word index of each position (−1 where fixed); needed for
            ``"word"``.

    Returns:
        bool Tensor[G, L] on the CPU, one row per group, in text order.

    Raises:
        ValueError: ``"word"`` without ``word_ids``; an unknown granularity.
    """
    fixed = fixed.detach().cpu()
    L = fixed.numel()
    pos = (~fixed).nonzero().flatten().tolist()
    if granularity == "token":
        sets = [[p] for p in pos]
    elif granularity == "span":
        sets = [pos[a : a + span_width] for a in range(0, len(pos), span_stride)]
    elif granularity == "word":
        if word_ids is None:
            raise ValueError("granularity='word' needs the word of each token (word_ids), which this call did not provide")
        wid = word_ids.detach().cpu().tolist()
        by_word: Dict[int, List[int]] = {}
        for p in pos:
            by_word.setdefault(int(wid[p]), []).append(p)
        sets = list(by_word.values())
    else:
        raise ValueError(f"granularity must be one of {list(GRANULARITIES)}, got {granularity!r}")
    groups = torch.zeros(len(sets), L, dtype=torch.bool)
    for g, s in enumerate(sets):
        groups[g, s] = True
    return groups


def spread(groups: Tensor, values: Tensor) -> Tensor:
    """Token scores from group scores: the mean over the groups containing each token, 0 where none.

    Args:
        groups: bool Tensor[G, L]. values: Tensor[G] (or Tensor[G, T], one column per step).

    Returns:
        Tensor[L] (or Tensor[T, L]) float32.
    """
    g = groups.to(values.device, torch.float32)
    count = g.sum(0)
    num = values.float().transpose(0, -1) @ g if values.dim() > 1 else values.float() @ g
    return torch.where(count > 0, num / count.clamp_min(1.0), torch.zeros_like(num))


def kl_divergence(logp: Tensor, logq: Tensor) -> Tensor:
    """KL(P ‖ Q) = Σ_v p_v (log p_v − log q_v) over the last dimension, from log-probabilities;
    a term where p_v = 0 is 0 (also where log p_v = −inf: a masked or −inf logit, whose product
    0 · (−inf) would be NaN; a NaN stays NaN). Tensor[...] float32, nats (+inf where q_v = 0 < p_v)."""
    logp = logp.float()
    p = logp.exp()
    return torch.where(logp == float("-inf"), torch.zeros_like(p), p * (logp - logq.float())).sum(-1).clamp_min(0.0)


def reference_outputs(ctx, measure: str) -> Dict[str, Tensor]:
    """One no-grad forward on the inputs: fills missing targets (the prediction), ``F`` Tensor[B]
    (the call's F) and, for ``measure="kl"``, ``logp`` Tensor[B, V] (log-probabilities at the
    predicting position); sets ``ctx.probs`` for a single-token target."""
    with torch.no_grad():
        h = ctx.hidden(ctx.all_rows(), ctx.batch.embeds)
        out: Dict[str, Tensor] = {}
        logits = ctx.fill_targets(h)  # None for a multi-token target
        if logits is not None and measure == "kl":
            out["logp"] = torch.log_softmax(logits, -1)
        out["F"] = ctx.score(h)
    return out


def occlude(ctx, groups: List[Tensor], measure: str, ref: Dict[str, Tensor]) -> List[Tensor]:
    """The change of the output when each group is masked, all groups of all examples batched.

    Args:
        ctx: the call's :class:`~aieg_fast.core.context.Context` (batch with its baseline rows,
            targets filled, ``chunk`` rows per forward).
        groups: per example bool Tensor[G_b, L] (:func:`occlusion_groups`).
        measure: ``"delta"`` or ``"kl"`` (module docstring).
        ref: :func:`reference_outputs` of the same call.

    Returns:
        per example Tensor[G_b] float32 (logit / log-prob units for ``"delta"``, nats for ``"kl"``).
    """
    batch, dev = ctx.batch, ctx.device
    sizes = [int(g.shape[0]) for g in groups]
    if sum(sizes) == 0:
        return [torch.zeros(0, device=dev) for _ in groups]
    if runs_after_prefix(ctx):
        return [_occlude_after_prefix(ctx, b, g, measure, ref) for b, g in enumerate(groups)]
    rows = torch.cat([torch.full((n,), b, dtype=torch.long) for b, n in enumerate(sizes)]).to(dev)
    masks = torch.cat(list(groups), 0).to(dev)
    out = []
    with torch.no_grad():
        for s in range(0, masks.shape[0], ctx.chunk):
            r, m = rows[s : s + ctx.chunk], masks[s : s + ctx.chunk]
            X = torch.where(m.unsqueeze(-1), batch.baseline[r], batch.embeds[r])
            h = ctx.hidden(r, X)
            if measure == "kl":
                out.append(kl_divergence(ref["logp"][r], torch.log_softmax(ctx.adapter.full_logits(h).float(), -1)))
            else:
                out.append(ref["F"][r] - ctx.score(h, r))
            ctx.advance(int(r.shape[0]))
    return list(torch.cat(out).split(sizes))


def runs_after_prefix(ctx) -> bool:
    """Whether :func:`occlude` runs each masked input after the example's cached prefix (a
    single-token target and a family with a KV cache), which costs one more forward per example
    with a group (the one keeping the keys and values)."""
    return ctx.step_ids is None and ctx.adapter.has_kv_cache


def _occlude_after_prefix(ctx, b: int, groups: Tensor, measure: str, ref: Dict[str, Tensor]) -> Tensor:
    """:func:`occlude` for example ``b`` (single-token target, a family with a KV cache): one
    forward keeps the keys and values of its unpadded positions; each masked input runs from its
    group's first position on, batched by :func:`~aieg_fast.core.prefix.prefix_batches` within
    ``ctx.chunk`` whole-length rows. Tensor[G] float32."""
    batch, dev, ad = ctx.batch, ctx.device, ctx.adapter
    G = int(groups.shape[0])
    if G == 0:
        return torch.zeros(0, device=dev)
    o, last = batch.offsets[b], int(batch.last_index[b])
    E, Eb = batch.embeds[b, o : last + 1], batch.baseline[b, o : last + 1]
    masks = groups[:, o : last + 1].to(dev)
    n = E.shape[0]
    first = masks.float().argmax(-1).cpu()  # a group's first masked position
    order = torch.argsort(first, stable=True).tolist()
    out = torch.empty(G, dtype=torch.float32, device=dev)
    with torch.no_grad():
        kv = ad.prefix_keys_values(E.unsqueeze(0))
        for start, items in prefix_batches(first[order].tolist(), n, 1, ctx.chunk * batch.ids.shape[1]):
            idx = torch.tensor([order[j] for j in items], device=dev)
            m = masks[idx, start:].unsqueeze(-1)
            h = ad.hidden_last_after(kv, start, torch.where(m, Eb[start:], E[start:]))
            rows = torch.full((len(items),), b, dtype=torch.long, device=dev)
            if measure == "kl":
                out[idx] = kl_divergence(ref["logp"][rows], torch.log_softmax(ad.full_logits(h).float(), -1))
            else:
                out[idx] = (ref["F"][rows] - ctx.score(h, rows)).float()
            ctx.advance(len(items))
    return out


def _step_hidden(adapter, X: Tensor, q: Tensor) -> Tensor:
    """Final hidden states of unpadded rows X [c, L, d] at positions q [T]: Tensor[c, T, D]."""
    c, L, _ = X.shape
    mask = torch.ones(c, L, dtype=torch.long, device=X.device)
    pos = torch.arange(L, device=X.device).expand(c, L)
    return adapter.hidden_states(X, mask, pos)[:, q]


def sequence_occlude(sctx, groups: Tensor, measure: str):
    """Occlusion of every generation step from one forward per masked input (causal masking:
    position q_t sees exactly its prefix, so masking a group changes step t only through the
    group's positions before q_t + 1).

    Args:
        sctx: the :class:`~aieg_fast.core.context.SequenceContext`.
        groups: bool Tensor[G, L] over the whole sequence. measure: ``"delta"`` or ``"kl"``.

    Returns:
        (Tensor[G, T] the change at every step, Tensor[T] F of every step on the unmasked sequence).
    """
    seq, q = sctx.seq, sctx.positions
    E, Eb = seq.embeds[0], seq.baseline[0]
    ad = sctx.adapter
    masks = groups.to(sctx.device)
    out = []
    with torch.no_grad():
        F0 = sctx.scores(E.unsqueeze(0))[0]
        logp0 = torch.log_softmax(ad.full_logits(_step_hidden(ad, E.unsqueeze(0), q)[0]).float(), -1) if measure == "kl" else None
        for s in range(0, masks.shape[0], sctx.chunk):
            m = masks[s : s + sctx.chunk]
            X = torch.where(m.unsqueeze(-1), Eb, E)
            if measure == "kl":
                out.append(kl_divergence(logp0, torch.log_softmax(ad.full_logits(_step_hidden(ad, X, q)).float(), -1)))
            else:
                out.append(F0.unsqueeze(0) - sctx.scores(X))
            sctx.advance(int(m.shape[0]))
    G = torch.cat(out) if out else torch.zeros(0, q.numel(), device=sctx.device)
    return G, F0
