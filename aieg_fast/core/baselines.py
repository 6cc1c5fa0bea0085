"""Baselines x′ of the path methods (IG, IDG, AIEG): what an input is compared against.

The path from the baseline to the input is x(α) = x′ + α (x − x′) at the attributable positions
(template, special and generated tokens stay at x). :func:`baseline_rows` turns a user's
``baseline=`` into the rows of x′:

* ``None`` / ``"reference"``: the reference token's embedding (``ref_token_id``; the default,
  DIG's convention, specs/aieg.md §6.3);
* ``"zero"``: the zero vector (Sundararajan et al. 2017's black image, specs/aieg.md §6.1);
* ``"mean"``: the mean input embedding over the whole vocabulary (computed through the
  embedding module, so models that scale embeddings are covered; specs/aieg.md §6.3's
  ``"embedding_mean"``, named as the other baselines are, by what it is of);
* ``"unk"`` / ``"pad"`` / ``"eos"``: the tokenizer's special token of that name;
* an int: that token id's embedding;
* a Tensor [d] (every attributable position) or [L, d] (one row per token of the example), in
  the space of ``model.get_input_embeddings()(ids)`` (Hugging Face's ``inputs_embeds``) for every
  family: passing the input's own embeddings gives x′ = x. Where the adapter works in an
  unscaled table (Gemma: ``inputs_embeds`` = W[ids] · √hidden_size) the tensor is divided by
  the adapter's ``inputs_embeds_scale`` here, the one place user embeddings enter.

``alpha_range=(α0, 1)`` starts the path at x(α0) instead of x′; since x(α) for α ∈ [α0, 1] is
the straight path from x(α0) to x, this equals the baseline x′ + α0 (x − x′) (IG's integral over
[α0, 1] is the integral over [0, 1] from that point), which :func:`shift_baseline` builds.

``n_baseline_samples`` > 1 averages the attributions of that many baselines x′ + σ ε (ε standard
normal, seeded), an expected-gradients-style smoothing (Erion et al. 2021, "Improving performance
of deep learning models with axiomatic attribution priors and expected gradients"; here the
distribution is noise around x′ rather than training examples). σ (``baseline_noise``, and the
σ results record) is in the same ``inputs_embeds`` units as a Tensor baseline; its default, 0.1 ×
the RMS of the text's attributable input embeddings, is relative, so the same in any space.
"""
from __future__ import annotations

import hashlib
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..models import materialized
from .diagnostics import warn
from .validation import as_real, check_number

__all__ = ["BASELINE_NAMES", "default_ref_token", "baseline_rows", "check_alpha_range", "check_baseline", "check_baseline_value", "check_baseline_noise", "describe_baseline", "noisy_baseline", "row_noise", "shift_baseline"]

#: the baselines named by a string.
BASELINE_NAMES = ("reference", "zero", "mean", "unk", "pad", "eos")


def default_ref_token(adapter, tokenizer) -> int:
    """The default reference token: PAD, else EOS, else UNK (DIG convention, specs/aieg.md
    §6.3), skipping tokens whose embedding is all zeros; when none qualifies, the lowest token
    id whose embedding is not all zeros (0 unless that row is zero too).

    A model initialised with ``padding_idx`` keeps an all-zero PAD embedding (and EOS / UNK when
    they share its id); with RMSNorm (LLaMA) a zero baseline makes gradients explode near α = 0
    (§6.3), so such a token is passed over for the next candidate.

    Returns:
        the token id (int in [0, vocab)).

    Warns:
        AttributionWarning: every row of the embedding table is zero (0 is returned; every
            token baseline then equals the zero vector).
    """
    emb = adapter.embeddings
    with materialized(emb):  # an offloaded embedding (device_map) holds its weights here only
        W = emb.weight.detach()
        for attr in ("pad_token_id", "eos_token_id", "unk_token_id"):
            v = getattr(tokenizer, attr, None)
            if isinstance(v, int) and 0 <= v < W.shape[0] and bool(W[v].abs().sum() > 0):
                return int(v)
        for s in range(0, W.shape[0], 4096):  # in chunks: no temporary the size of the table
            nonzero = (W[s : s + 4096].abs().sum(-1) > 0).nonzero()
            if nonzero.numel():
                return s + int(nonzero[0, 0])
    warn("every row of the token embedding table is zero: the reference token is 0 and a token baseline "
         "equals the zero vector; pass ref_token_id= or baseline= explicitly")
    return 0


def check_alpha_range(alpha_range) -> float:
    """α0 of ``alpha_range`` = (α0, 1) with 0 ≤ α0 < 1 (None → 0). specs/aieg.md §6.4's ``(a, b)``
    with b = 1 only: a path that ends short of the input loses completeness (Σ scores =
    F(x) − F(x(α0)) needs the path's end at x).

    Raises:
        ValueError: anything else (names ``alpha_range`` and the value received).
    """
    if alpha_range is None:
        return 0.0
    ok = isinstance(alpha_range, (tuple, list)) and len(alpha_range) == 2
    if ok:  # np.float32(0.1), a one-element tensor: the float it holds
        alpha_range = type(alpha_range)(as_real(a) for a in alpha_range)
    ok = ok and all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in alpha_range)
    if not ok or float(alpha_range[1]) != 1.0 or not (0.0 <= float(alpha_range[0]) < 1.0):
        raise ValueError(f"alpha_range must be (alpha0, 1) with 0 <= alpha0 < 1, got {alpha_range!r}")
    return float(alpha_range[0])


def check_baseline_value(baseline, vocab_size: Optional[int] = None) -> None:
    """Check a ``baseline`` that needs no model: a name of :data:`BASELINE_NAMES` or a token id
    (≥ 0, and < ``vocab_size`` when given). None and tensors pass (a tensor's shape needs the
    model: :func:`baseline_rows`).

    Raises:
        ValueError: an unknown name, an id out of range. TypeError: another type.
    """
    if baseline is None or isinstance(baseline, Tensor):
        return
    if isinstance(baseline, str):
        if baseline not in BASELINE_NAMES:
            raise ValueError(f"baseline must be one of {list(BASELINE_NAMES)}, a token id or a tensor, got {baseline!r}")
        return
    if isinstance(baseline, int) and not isinstance(baseline, bool):
        if baseline < 0 or (vocab_size is not None and baseline >= vocab_size):
            bound = f"in [0, {vocab_size})" if vocab_size is not None else ">= 0"
            raise ValueError(f"baseline token id must be {bound}, got {baseline}")
        return
    raise TypeError(f"baseline must be None, a name, a token id or a tensor, got {type(baseline).__name__} {baseline!r:.60}")


def check_baseline_noise(baseline_noise, n_baseline_samples=None) -> None:
    """ValueError unless ``baseline_noise`` (σ of the Gaussian noise on the baseline, in
    embedding units) is None or a finite number ≥ 0, and, when ``n_baseline_samples`` is given,
    is None unless there are noisy baselines to draw (``n_baseline_samples`` > 1): a σ with one
    sample would be ignored."""
    if baseline_noise is None:
        return
    check_number("baseline_noise", baseline_noise, 0.0, optional=True)
    if n_baseline_samples is not None and not (isinstance(n_baseline_samples, int) and n_baseline_samples > 1):
        raise ValueError(f"baseline_noise={baseline_noise!r} is used only with n_baseline_samples > 1 (the noisy baselines "
                         f"it spreads), got n_baseline_samples={n_baseline_samples!r}; pass n_baseline_samples=K as well")


def _mean_embedding(adapter, chunk: int = 4096) -> Tensor:
    emb = adapter.embeddings
    V = emb.weight.shape[0]
    dev = adapter.input_device
    total = None
    with torch.no_grad():
        for s in range(0, V, chunk):
            e = emb(torch.arange(s, min(V, s + chunk), device=dev)).float().sum(0)
            total = e if total is None else total + e
    return (total / V).to(emb.weight.dtype)


def _token_row(adapter, token_id: int) -> Tensor:
    emb = adapter.embeddings
    with torch.no_grad():
        return emb(torch.tensor([token_id], device=adapter.input_device))[0].detach()


def check_baseline(adapter, baseline, special: Dict[str, Optional[int]]) -> None:
    """Everything of ``baseline`` that :func:`baseline_rows` checks but the texts' lengths, before
    any model work: a name (and the special token it needs), a token id in the vocabulary, a
    tensor of floating values (an integer, bool or complex tensor is no embedding: a token id
    is an int or a 0-d integer tensor), finite, of shape [d] or [L, d].

    Raises:
        ValueError / TypeError: as :func:`baseline_rows`, naming ``baseline`` and the value.
    """
    if baseline is None:
        return
    check_baseline_value(baseline, adapter.embeddings.weight.shape[0])
    if isinstance(baseline, str) and baseline in ("unk", "pad", "eos") and special.get(baseline) is None:
        raise ValueError(f"baseline={baseline!r}: the tokenizer has no {baseline} token")
    if not isinstance(baseline, Tensor):
        return
    if not baseline.is_floating_point():
        raise TypeError(f"baseline tensor must hold embeddings (floating values), got dtype {baseline.dtype}; a token id is "
                        "an int (or a 0-d integer tensor)")
    d = adapter.embeddings.weight.shape[1]
    if not (baseline.dim() in (1, 2) and baseline.shape[-1] == d):
        raise ValueError(f"baseline tensor must be [d] or [L, d] with d = {d}, got shape {tuple(baseline.shape)}")
    dtype = adapter.embeddings.weight.dtype
    if not bool(torch.isfinite(baseline).all()):
        raise ValueError("baseline tensor has non-finite values")
    if not bool(torch.isfinite(baseline.to(dtype)).all()):  # 1e300 in float64: inf in the model's float32
        raise ValueError(f"baseline tensor has values beyond the model's {dtype} range (largest |value| "
                         f"{float(baseline.abs().max()):.3g}): they would be infinite")


def baseline_rows(adapter, baseline, lengths: Sequence[int], ref_token_id: int, special: Dict[str, Optional[int]]) -> Tuple[List[Tensor], str]:
    """The baseline rows of each example and a description for the records.

    Args:
        adapter: the model's adapter (its ``embeddings`` and ``vocab_size``).
        baseline: see the module docstring (a tensor: [d] or [L, d], in the units of
            ``model.get_input_embeddings()(ids)``).
        lengths: token count of each example (for an [L, d] tensor).
        ref_token_id: the reference token (``None`` / ``"reference"``).
        special: ``{"unk": id or None, "pad": ..., "eos": ...}`` from the tokenizer.

    Returns:
        (per example Tensor[d] or Tensor[n_i, d], description such as ``"reference:0"``,
        ``"zero"``, ``"mean"``, ``"eos:2"``, ``"token:17"``, ``"tensor[d]"``).

    Raises:
        ValueError / TypeError: an unknown name, a special token the tokenizer lacks, an id out
            of range, a tensor of the wrong shape or with non-finite values.
    """
    d = adapter.embeddings.weight.shape[1]
    if baseline is None or (isinstance(baseline, str) and baseline == "reference"):
        return [_token_row(adapter, ref_token_id)] * len(lengths), f"reference:{ref_token_id}"
    check_baseline(adapter, baseline, special)
    if isinstance(baseline, str):
        if baseline == "zero":
            return [torch.zeros(d, dtype=adapter.embeddings.weight.dtype, device=adapter.input_device)] * len(lengths), "zero"
        if baseline == "mean":
            return [_mean_embedding(adapter)] * len(lengths), "mean"
        tid = special[baseline]  # present: check_baseline
        return [_token_row(adapter, int(tid))] * len(lengths), f"{baseline}:{int(tid)}"
    if isinstance(baseline, int) and not isinstance(baseline, bool):
        return [_token_row(adapter, baseline)] * len(lengths), f"token:{baseline}"
    t = baseline.detach().to(adapter.input_device)  # a floating, finite [d] or [L, d] tensor: the rest is refused above
    dtype = adapter.embeddings.weight.dtype
    scale = adapter.inputs_embeds_scale  # inputs_embeds space → the adapter's (Gemma's unscaled table)
    t = t.to(dtype) if scale == 1.0 else (t.to(torch.promote_types(dtype, torch.float32)) / scale).to(dtype)
    if t.dim() == 1 and t.shape[0] == d:
        return [t] * len(lengths), "tensor[d]"
    if t.dim() == 2 and t.shape[1] == d:
        bad = [n for n in lengths if n != t.shape[0]]
        if bad:
            raise ValueError(f"baseline tensor [L, d] must have one row per token; it has {t.shape[0]} rows, the text has {bad[0]} tokens")
        return [t] * len(lengths), "tensor[L,d]"


def describe_baseline(description: str, alpha0: float, n_samples: int, noise: Optional[float], seed: int) -> Dict[str, object]:
    """The record of the baseline of one call (stored in the result's options)."""
    rec: Dict[str, object] = {"baseline": description, "alpha_range": [alpha0, 1.0], "n_baseline_samples": n_samples}
    if n_samples > 1:
        rec.update(baseline_noise=noise, baseline_seed=seed)
    return rec


def shift_baseline(embeds: Tensor, baseline: Tensor, alpha0: float) -> Tensor:
    """x′ + α0 (x − x′): the baseline whose straight path to x is x(α), α ∈ [α0, 1]."""
    return baseline if alpha0 == 0.0 else baseline + alpha0 * (embeds - baseline)


def row_noise(batch, scale: float = 1.0) -> List[float]:
    """The default σ of the baseline noise of each row of ``batch``: 0.1 × the RMS of the row's
    attributable input embeddings (0.0 for a row without any), a row's own, as its draws are;
    in ``inputs_embeds`` units (× ``scale``, the adapter's ``inputs_embeds_scale``: the batch
    holds the adapter's embeddings)."""
    out = []
    for b in range(batch.B):
        E = batch.embeds[b][~batch.fixed[b]]
        out.append(0.1 * float(E.float().pow(2).mean().sqrt()) * scale if E.numel() else 0.0)
    return out


def noisy_baseline(batch, sigmas: Sequence[float], seed: int, sample: int, scale: float = 1.0) -> Tensor:
    """x′ + σ_b ε at the attributable positions of ``batch`` (a :class:`~aieg_fast.core.batch.Batch`;
    fixed positions and padding stay x′): Tensor[B, L, d] in the baseline's dtype and device.
    ``sigmas`` are in ``inputs_embeds`` units: the noise added to the adapter's embeddings is
    σ_b / ``scale`` (the adapter's ``inputs_embeds_scale``).
    With ``alpha_range`` the batch's baseline is already the path's start x(α0)
    (:func:`shift_baseline`), so the noise is σ where the integral begins (a choice: noise on x′
    before the shift would be (1 − α0)·σ there).

    Each row's ε ~ N(0, 1) [n, d] is drawn for its own n tokens from a CPU generator seeded by
    (``seed``, ``sample``, the row's token ids), and scaled by its own σ (``sigmas``, one per
    row), so a text gets the same baselines alone, in any batch, at any place in it, with either
    padding side and on every device.
    """
    base = batch.baseline
    eps = torch.zeros(base.shape, dtype=torch.float32)
    ids = batch.ids.cpu()
    for b, (n, off) in enumerate(zip(batch.lengths, batch.offsets)):
        row = ids[b, off : off + n].tolist()
        key = hashlib.sha256(f"{int(seed)}|{int(sample)}|{','.join(map(str, row))}".encode()).hexdigest()
        g = torch.Generator().manual_seed(int(key[:15], 16))
        eps[b, off : off + n] = (float(sigmas[b]) / scale) * torch.randn((n, base.shape[-1]), generator=g, dtype=torch.float32)
    eps = eps.to(base.device, base.dtype)
    return torch.where(batch.fixed.unsqueeze(-1), base, base + eps)
