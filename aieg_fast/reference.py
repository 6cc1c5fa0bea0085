"""Pure-PyTorch reference of every aieg_fast op.

This module is the executable specification of the kernels in ``csrc/``: the C++ and CUDA
kernels are transcribed from these functions, the attribution methods fall back to them when the
extension is missing, and the tests use them as the oracle. Each op has the same name here, in
``csrc/`` (``<op>.cpp``, ``cpu/<op>_cpu.cpp``, ``cuda/<op>_kernel.cu``) and in :mod:`aieg_fast.ops`.

Equations refer to ``specs/aieg.md`` (a reconstruction of the unpublished AIEG paper; section
numbers are given as "§x"), to IDG (Walker et al., AAAI 2024) and, for ``hvp_l1_mean``, to
``specs/heta.md`` (HETA, Pramanik et al., ICLR 2026).

Non-finite inputs have a defined result, documented per op (never silent garbage).

Few argument checks here: the option choices the equations branch on and the shapes and ranges
they need (``n_steps`` ≥ 2, equal lengths, ``[m, n, d]``), so that the specification stays the
equations; a wrong type or device fails however torch fails. ``aieg_fast.ops.<op>(...,
backend="reference")`` runs the same code after every argument check, each error naming the
argument and the value.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

__all__ = [
    "acc_dtype",
    "interpolate_path",
    "adaptive_alphas",
    "uniform_alphas",
    "emphasis_factors",
    "check_emphasis_options",
    "integrate_gradients",
    "attention_gradient_product",
    "posnorm",
    "hvp_l1_mean",
    "EF_MODES",
    "EF_SIGNS",
    "EF_NORMS",
    "ALLOC_MODES",
    "POSNORM_MODES",
    "AGP_REDUCES",
    "INTEGRATE_REDUCES",
]

EF_MODES = ("fd", "autograd", "none", "completeness")
EF_SIGNS = ("abs", "signed", "relu", "minmax")
EF_NORMS = ("l1", "none")
ALLOC_MODES = ("abs", "idg_minmax")
POSNORM_MODES = ("minmax", "relu_max", "abs_sum", "none")
AGP_REDUCES = ("product_of_means", "mean_of_products", "attention")
INTEGRATE_REDUCES = ("sum", "none")


def _check_choice(name: str, value: str, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def acc_dtype(t: Tensor) -> torch.dtype:
    """Accumulation dtype: float64 stays float64, everything else accumulates in float32."""
    return torch.float64 if t.dtype == torch.float64 else torch.float32


# --------------------------------------------------------------------------------------------
# interpolate_path
# --------------------------------------------------------------------------------------------
def interpolate_path(
    input_embeds: Tensor,
    baseline_embeds: Tensor,
    alphas: Tensor,
    fixed_mask: Optional[Tensor] = None,
) -> Tensor:
    """Points on the straight-line path γ(α) = E′ + α (E − E′) (spec §6.3).

    Args:
        input_embeds (Tensor[L, d]): token embeddings E of the input.
        baseline_embeds (Tensor[L, d]): baseline embeddings E′ (same device; another dtype is
            cast to the accumulation dtype).
        alphas (Tensor[m]): path positions, usually in [0, 1] (not checked: α outside it
            extrapolates the line; any float dtype, cast to the accumulation dtype).
        fixed_mask (Tensor[L] of bool, optional): positions held fixed; they copy ``input_embeds``
            for every α (BOS, template and other special tokens).

    Returns:
        Tensor[m, L, d] in the embeddings' dtype. Computed as ``E′ + α·(E − E′)`` in the
        accumulation dtype (fp32, or fp64 for fp64 inputs), so α = 0 gives E′ and α = 1 gives E
        up to one rounding. NaN/inf in the inputs propagate elementwise.
    """
    acc = acc_dtype(input_embeds)
    e = input_embeds.to(acc)
    b = baseline_embeds.to(acc)
    a = alphas.to(device=e.device, dtype=acc)
    out = b.unsqueeze(0) + a.view(-1, 1, 1) * (e - b).unsqueeze(0)
    if fixed_mask is not None:
        out = torch.where(fixed_mask.to(torch.bool).view(1, -1, 1), e.unsqueeze(0), out)
    return out.to(input_embeds.dtype)


# --------------------------------------------------------------------------------------------
# Sampling grids
# --------------------------------------------------------------------------------------------
def uniform_alphas(n_steps: int, dtype=torch.float32, device=None) -> Tuple[Tensor, Tensor]:
    """The uniform AIEG/IDG grid (spec §6.4, ``adaptive=False``).

    Returns:
        (alphas Tensor[M], widths Tensor[M]): α_m = (m − 1)/(M − 1), δ_m = 1/(M − 1).
    """
    if n_steps < 2:
        raise ValueError(f"n_steps must be >= 2, got {n_steps}")
    alphas = torch.linspace(0.0, 1.0, n_steps, dtype=dtype, device=device)
    widths = torch.full((n_steps,), 1.0 / (n_steps - 1), dtype=dtype, device=device)
    return alphas, widths


def adaptive_alphas(
    pilot_logits: Tensor, n_steps: int, alloc: str = "abs", idg_compat_quirk: bool = False
) -> Tuple[Tensor, Tensor]:
    """IDG adaptive sampling: allocate ``n_steps`` samples where the pilot logit moves (spec §3.2, §6.4).

    The pilot logits f̃_j are taken at α̃_j = j/(N − 1), j = 0…N − 1. Slopes s̃_0 = 0,
    s̃_j = (f̃_j − f̃_{j−1})(N − 1). Bin j ≥ 1 covers [α̃_{j−1}, α̃_j] (width h = 1/(N − 1)).

    * ``alloc="abs"`` (default, reconstruction §6.4): π_j ∝ |s̃_j|, π_0 = 0.
    * ``alloc="idg_minmax"`` (official IDG): ŝ = (s̃ − min s̃)/(max s̃ − min s̃), ŝ_0 := 0, π = ŝ/Σŝ.

    Integer allocation (IDG): n_j = ⌊M π_j⌋; the R = M − Σn_j leftover samples go one each to the
    empty bins j ≥ 1 with the largest M π_j (ties to the lower index); if R exceeds the number of
    empty bins, the rest go to the bins with the largest fractional part of M π_j, then
    round-robin from bin 1. Placement: bin j gets n_j left-endpoint samples α̃_{j−1} + k·h/n_j
    with width δ = h/n_j (the *intended* mapping; Σ n_j = M).

    ``idg_compat_quirk=True`` reproduces the official code (``getAlphaParameters`` of
    chasewalker26/Integrated-Decision-Gradients, specs/aieg.md §3.2 steps 3–4) step by step:

    * leftovers: every bin with n_j = 0 *including bin 0* (M π_0 = 0) is a candidate, and the
      others are keyed −1; the keys are sorted with ``torch.sort`` (not stable) and the order is
      reversed; the first R bins get n_j := 1 (set, not incremented). So when R exceeds the
      number of empty bins j ≥ 1, bin 0 gets a sample, and beyond that, bins that already held
      samples are *reset* to 1, so Σ n_j < M;
    * placement: bins are visited from 0 and the start offset advances by h only on non-empty
      bins, so the k-th non-empty bin covers [(k − 1)h, kh) and later bins shift toward 0;
      when bin 0 holds a sample and no other bin is empty, the last bin starts at α = 1 and its
      further samples lie past the input (α < 1 + h);
    * the M − Σ n_j samples left unplaced keep α = 0 with width 0 (the official arrays start as
      zeros).

    Remaining differences from the official code: the allocation is computed here in fp64 (the
    official code works in its logits' fp32, so a count can differ where M π_j lies within fp32
    rounding of an integer); exact ties of the keys are ordered as ``torch.sort`` orders them on
    the CPU (the official evaluation sorts on the GPU, whose order of ties is not specified);
    α = start + k·h/n_j is computed in fp64 rather than with an fp32 ``linspace``; the grid is
    returned sorted, while the official arrays keep the unplaced α = 0 samples at the end (the
    finite-difference weights are the same either way, all 0 at α = 0). With two or
    more unplaced samples the official finite-difference slope divides 0 by 0 and its
    attribution is NaN; here those samples get weight 0 (r_m = 0 where α_m = α_{m−1}, see
    :func:`emphasis_factors`).

    Degenerate cases: N < 2, all slopes equal (π undefined), any non-finite pilot logit, or
    slopes that overflow to ±inf → the uniform grid of :func:`uniform_alphas`.

    Args:
        pilot_logits (Tensor[N]): target logit along the pilot grid.
        n_steps (int): M ≥ 2, the number of main samples.

    Returns:
        (alphas Tensor[M], widths Tensor[M]) on ``pilot_logits``' device, in fp32 (fp64 for an
        fp64 pilot); alphas are sorted ascending (stable) in [0, 1) ([0, 1 + h) with the quirk)
        and Σ widths = (number of non-empty bins)·h ≤ 1 (≤ N·h with the quirk; = 1 when every
        bin j ≥ 1 gets a sample; specs/aieg.md §6.13.7 says "= 1", which does not hold when
        flat bins get none). The uniform fallback above instead gives :func:`uniform_alphas`'
        grid: α in [0, 1] and Σ widths = M / (M − 1). The allocation is computed in fp64 on the
        CPU (it is O(N + M) scalar work).
    """
    _check_choice("alloc", alloc, ALLOC_MODES)
    if n_steps < 2:
        raise ValueError(f"n_steps must be >= 2, got {n_steps}")
    out_dtype = acc_dtype(pilot_logits)
    device = pilot_logits.device
    f = pilot_logits.detach().to(device="cpu", dtype=torch.float64).reshape(-1)
    N = f.numel()
    M = int(n_steps)
    if N < 2 or not bool(torch.isfinite(f).all()):
        return uniform_alphas(M, dtype=out_dtype, device=device)
    s = torch.zeros(N, dtype=torch.float64)
    s[1:] = (f[1:] - f[:-1]) * (N - 1)
    if alloc == "abs":
        shat = s.abs()
    else:
        lo, hi = s.min(), s.max()
        if not bool(hi > lo):
            return uniform_alphas(M, dtype=out_dtype, device=device)
        shat = (s - lo) / (hi - lo)
    shat[0] = 0.0
    total = shat.sum()
    if not bool(total > 0):
        return uniform_alphas(M, dtype=out_dtype, device=device)
    pi = shat / total
    if not bool(torch.isfinite(pi).all()):  # slopes overflowed (finite logits near ±1e308)
        return uniform_alphas(M, dtype=out_dtype, device=device)
    mp = M * pi
    n = torch.floor(mp).to(torch.int64)
    n[0] = 0
    R = M - int(n.sum())
    if idg_compat_quirk:
        n = _official_leftovers(mp, n, R)
    elif R > 0:
        n = _intended_leftovers(mp, n, R)
    return _place(n, M, idg_compat_quirk, device, out_dtype)


def _intended_leftovers(mp: Tensor, n: Tensor, R: int) -> Tensor:
    """Counts after the R leftovers of the intended allocation (see :func:`adaptive_alphas`)."""
    N = n.numel()
    empty = [j for j in range(1, N) if int(n[j]) == 0]
    # largest M*pi first, ties to the lower index (stable sort on the negated key)
    empty.sort(key=lambda j: (-float(mp[j]), j))
    for j in empty[:R]:
        n[j] = 1
    R -= min(R, len(empty))
    if R > 0:
        frac = mp - torch.floor(mp)
        order = sorted(range(1, N), key=lambda j: (-float(frac[j]), j))
        k = 0
        while R > 0:
            n[order[k % len(order)]] += 1
            R -= 1
            k += 1
    return n


def _official_leftovers(mp: Tensor, n: Tensor, R: int) -> Tensor:
    """Counts after the R leftovers of the official IDG code: bins with samples keyed −1, the
    keys sorted by ``torch.sort`` (CPU, not stable) and reversed, the first R bins set to 1."""
    key = torch.where(n != 0, torch.full_like(mp, -1.0), mp)
    order = torch.sort(key).indices.flip(0)
    n[order[:R]] = 1
    return n


def _place(n: Tensor, M: int, quirk: bool, device, out_dtype) -> Tuple[Tensor, Tensor]:
    """Alphas and widths of the counts ``n`` [N] (intended mapping, or the official placement
    with ``quirk``: bins from 0, the offset advancing only on non-empty bins, unplaced samples
    at α = 0 with width 0), sorted by α (stable)."""
    N = n.numel()
    h = 1.0 / (N - 1)
    alphas, widths = [], []
    placed = 0  # non-empty bins so far: the official start offset is placed·h
    for j in range(0 if quirk else 1, N):
        nj = int(n[j])
        if nj == 0:
            continue
        left = placed * h if quirk else (j - 1) * h
        placed += 1
        for k in range(nj):
            alphas.append(left + k * h / nj)
            widths.append(h / nj)
    alphas += [0.0] * (M - len(alphas))  # official quirk only: unplaced samples
    widths += [0.0] * (M - len(widths))
    a = torch.tensor(alphas, dtype=torch.float64)
    w = torch.tensor(widths, dtype=torch.float64)
    a, order = torch.sort(a, stable=True)
    w = w[order]
    return a.to(device=device, dtype=out_dtype), w.to(device=device, dtype=out_dtype)


# --------------------------------------------------------------------------------------------
# emphasis_factors
# --------------------------------------------------------------------------------------------
def check_emphasis_options(mode: str, sign: str, norm: str, slopes: Optional[Tensor]) -> None:
    """The option combinations :func:`emphasis_factors` accepts (checked by the reference, by
    ``ops.emphasis_factors`` and, in the same words, by the compiled op).

    Raises:
        ValueError: ``mode``, ``sign`` or ``norm`` not among the choices; ``slopes`` missing for
            ``mode="completeness"`` or given for another mode; ``sign`` other than ``"abs"`` or
            ``norm`` other than ``"none"`` with ``mode="completeness"``.
    """
    _check_choice("mode", mode, EF_MODES)
    _check_choice("sign", sign, EF_SIGNS)
    _check_choice("norm", norm, EF_NORMS)
    if mode != "completeness":
        if slopes is not None:
            raise ValueError(f"slopes is only read by mode='completeness', got a tensor with mode={mode!r}")
        return
    if slopes is None:
        raise ValueError("slopes (the autograd slopes G_m·Δ) is required for mode='completeness', got None")
    if sign != "abs":
        raise ValueError(f"sign must be 'abs' for mode='completeness' (its weights are never negative), got {sign!r}")
    if norm != "none":
        raise ValueError(
            f"norm must be 'none' for mode='completeness' (a normalisation would undo its completeness), got {norm!r}"
        )


def emphasis_factors(
    path_logits: Tensor,
    alphas: Tensor,
    widths: Tensor,
    mode: str = "fd",
    sign: str = "abs",
    norm: str = "l1",
    slopes: Optional[Tensor] = None,
) -> Tensor:
    """Emphasis factors EF_m from logit jumps along the path (spec §6.5, IDG §3.1).

    Raw weights (``mode="fd"``, the default): w_1 = 0 and
    w_m = r_m·δ_m with r_m = (f_m − f_{m−1}) / (α_m − α_{m−1}) (r_m = 0 where α_m = α_{m−1}),
    i.e. the logit increment since the previous sample. ``mode="autograd"``: ``path_logits`` holds
    the slopes r_m = G_m·Δ (IDG's original code, §3.1), w_m = r_m·δ_m at every sample, α_1 included.
    ``mode="none"``: w_m = δ_m (plain IG weights on the same grid; ``sign`` is ignored).

    Sign (``sign``): ``"abs"`` |w| (default; keeps IG's sign convention, §6.5), ``"signed"`` w
    (IDG semantics), ``"relu"`` max(w, 0), ``"minmax"`` (w − min w)/(max w − min w), EF_1 := 0, of
    w = r·δ, not r as the spec's table has it (deliberately: the adaptive grid crowds samples where
    the logit moves, and r alone would count such a region once per sample; same on uniform grids).

    Normalisation (``norm``): ``"l1"`` w / Σ|w| (Σ EF = 1 for the non-negative signs), ``"none"``
    w / M (IDG's raw weights with its 1/M mean).

    ``mode="completeness"`` (issue 19's V8; a reconstruction in the spirit of §6.5, not from the
    AIEG paper): damps the steps where the gradient over-predicts the logit's increment and,
    where no step is clipped, keeps Σ_m ω_m s_m equal to the logit's change along the grid. It
    needs ``slopes`` s_m = G_m·Δ (the gradient at α_m times the input-minus-baseline difference,
    summed over tokens and embedding dimensions: dF(γ(α))/dα by autograd). Each sample carries
    the sub-interval that ends at it, [α_{m−1}, α_m] of length g_m = α_m − α_{m−1}, the
    interval ``"fd"`` takes its increment over:

    * actual increment Δf_m = f_m − f_{m−1}; the gradient's prediction of it p_m = s_m·g_m;
    * EF_m = clip(Δf_m / p_m, 0, 1), EF_m = 0 where p_m = 0 (a zero step or a zero slope), and
      EF_1 = 0 (as in ``"fd"``: the gradient at α_1, the baseline on grids that start at 0,
      where near-baseline gradients explode, never enters);
    * returned: the integration weights ω_m = EF_m·g_m (not EF_m itself), with no normalisation.

    Where nothing is clipped (0 ≤ Δf_m/p_m ≤ 1 for m ≥ 2, no p_m = 0 with Δf_m ≠ 0),
    ω_m·s_m = Δf_m, so Σ_m ω_m s_m = f_M − f_1 = F(γ(α_M)) − F(γ(α_1)) exactly: F(x) − F(x′)
    on a grid from α = 0 to α = 1 (the uniform grid). In every case ω_m·s_m lies between 0 and
    Δf_m. A clipped step keeps at most IG's own weight g_m (EF = 1), so an increment that the
    gradient at the step's right end does not see (a jump inside the step, e.g. the first step
    from a zero baseline) is mostly lost; a step whose gradient disagrees in sign with the
    logit's change gets 0. ``widths`` are not read by this mode: on the adaptive grid δ_m is
    the width of the sub-step *after* α_m, which differs from g_m at bin boundaries and after
    bins without samples; a prediction s_m·δ_m would set the increment over g_m against a slope
    times another length, and clip even a linear F there. ``sign`` must be ``"abs"`` (ω ≥ 0
    already) and ``norm`` ``"none"`` (no 1/M either: ω already carries the step length); other
    values are refused.

    Degenerate cases: with ``norm="l1"``, if Σ|w| = 0 (flat logit, no rising interval for ``relu``,
    constant ``minmax``; spec §6.5's ε is 0: a fixed ε would depend on the logit's scale) every EF
    is 1/M, which reduces to IG on the grid. If any input value is NaN or ±inf (``slopes``
    included), every EF is NaN. Finite logits whose increments overflow the accumulation dtype
    (|f| near 3e38 in float32, a diverged model) give inf or NaN factors, not rescaled (:func:`posnorm` is).

    Args:
        path_logits (Tensor[M]): target logit f_m = F(γ(α_m)) (or slopes, for ``"autograd"``).
        alphas (Tensor[M]): path positions in increasing order (not checked: unsorted ones give negative
            finite-difference steps, so "signed" weights of the wrong sign).
        widths (Tensor[M]): sub-step widths δ_m.
        mode: "fd", "autograd", "none" or "completeness".
        sign: "abs", "signed", "relu" or "minmax".
        norm: "l1" or "none".
        slopes (Tensor[M], optional): s_m = G_m·Δ, for (and only for) ``mode="completeness"``.

    Returns:
        Tensor[M] in the accumulation dtype (fp64 for fp64 logits, else fp32).

    Raises:
        ValueError: a bad combination of options (see :func:`check_emphasis_options`), or
            inputs of different lengths.
    """
    check_emphasis_options(mode, sign, norm, slopes)
    acc = acc_dtype(path_logits)
    f = path_logits.to(acc).reshape(-1)
    a = alphas.to(device=f.device, dtype=acc).reshape(-1)
    d = widths.to(device=f.device, dtype=acc).reshape(-1)
    s = None if slopes is None else slopes.to(device=f.device, dtype=acc).reshape(-1)
    M = f.numel()
    if a.numel() != M or d.numel() != M or (s is not None and s.numel() != M):
        got = f"{M}, {a.numel()}, {d.numel()}" + ("" if s is None else f", {s.numel()}")
        names = "path_logits, alphas and widths" if s is None else "path_logits, alphas, widths and slopes"
        raise ValueError(f"{names} must have the same length, got {got}")
    if M == 0:
        return f.new_zeros(0)
    finite = torch.isfinite(f).all() & torch.isfinite(a).all() & torch.isfinite(d).all()
    if s is not None:
        finite &= torch.isfinite(s).all()
    if not bool(finite):
        return torch.full((M,), float("nan"), dtype=acc, device=f.device)
    if mode == "completeness":
        return _completeness_weights(f, a, s)
    if mode == "none":
        w = d.clone()
    else:
        if mode == "fd":
            r = torch.zeros_like(f)
            da = a[1:] - a[:-1]
            df = f[1:] - f[:-1]
            r[1:] = torch.where(da != 0, df / torch.where(da != 0, da, torch.ones_like(da)), torch.zeros_like(df))
        else:  # autograd: the slopes are given, at every sample (the first one included)
            r = f.clone()
        w = r * d
        if sign == "abs":
            w = w.abs()
        elif sign == "relu":
            w = w.clamp_min(0)
        elif sign == "minmax":
            lo, hi = w.min(), w.max()
            w = (w - lo) / (hi - lo) if bool(hi > lo) else torch.zeros_like(w)
            w[0] = 0.0
    if norm == "none":
        return w / M
    total = w.abs().sum()
    if not bool(total > 0):
        return torch.full((M,), 1.0 / M, dtype=acc, device=f.device)
    return w / total


def _completeness_weights(f: Tensor, a: Tensor, s: Tensor) -> Tensor:
    """ω_m = clip((f_m − f_{m−1}) / (s_m g_m), 0, 1)·g_m, g_m = α_m − α_{m−1}; ω_1 = 0 and ω_m = 0
    where s_m g_m = 0 (``mode="completeness"`` of :func:`emphasis_factors`; finite inputs)."""
    w = torch.zeros_like(f)
    g = a[1:] - a[:-1]
    p = s[1:] * g
    ratio = (f[1:] - f[:-1]) / torch.where(p != 0, p, torch.ones_like(p))
    w[1:] = torch.where(p != 0, ratio.clamp(0.0, 1.0), torch.zeros_like(p)) * g
    return w


# --------------------------------------------------------------------------------------------
# integrate_gradients
# --------------------------------------------------------------------------------------------
def integrate_gradients(grads: Tensor, weights: Tensor, delta: Tensor, reduce: str = "sum") -> Tensor:
    """Weighted path integral Δ ⊙ Σ_m w_m G_m, reduced over the embedding dimension (spec §6.6).

    ieg_{i,d} = Δ_{i,d} · Σ_m w_m · G_{m,i,d}; ``reduce="sum"`` returns ieg_i = Σ_d ieg_{i,d}
    (DIG, captum), ``reduce="none"`` the [L, d] array. The op is linear in ``grads``, so chunks
    of the path can be integrated separately and their results added.

    Args:
        grads (Tensor[m, L, d]): gradients ∇F at the path points (any float dtype).
        weights (Tensor[m]): per-step weights (IG quadrature weights, or EF).
        delta (Tensor[L, d]): Δ = E − E′.

    Returns:
        Tensor[L] (or Tensor[L, d]) in the accumulation dtype (fp32; fp64 for fp64 grads).
        NaN/inf propagate as in the arithmetic. ``m = 0`` gives zeros.
    """
    _check_choice("reduce", reduce, INTEGRATE_REDUCES)
    acc = acc_dtype(grads)
    g = grads.to(acc)
    w = weights.to(device=g.device, dtype=acc)
    dl = delta.to(device=g.device, dtype=acc)
    s = torch.einsum("m,mld->ld", w, g) if g.shape[0] > 0 else torch.zeros(dl.shape, dtype=acc, device=g.device)
    out = dl * s
    return out.sum(-1) if reduce == "sum" else out


# --------------------------------------------------------------------------------------------
# attention_gradient_product
# --------------------------------------------------------------------------------------------
def attention_gradient_product(
    attn: Tensor,
    grad: Optional[Tensor] = None,
    weights: Optional[Tensor] = None,
    reduce: str = "product_of_means",
) -> Tensor:
    """Scaled attention α∇α and head-mean attention, weighted over a batch of path steps (spec §4).

    * ``"product_of_means"`` (Chrysostomou & Aletras): Σ_b w_b · mean_h A_b · mean_h ∂A_b;
    * ``"mean_of_products"``: Σ_b w_b · mean_h (A_b ⊙ ∂A_b);
    * ``"attention"``: Σ_b w_b · mean_h A_b (``grad`` is ignored and may be None).

    Args:
        attn (Tensor[B, H, Q, K]): post-softmax attention probabilities.
        grad (Tensor[B, H, Q, K], optional): ∂F/∂attn; required unless ``reduce="attention"``.
        weights (Tensor[B], optional): per-batch weights (EF along the path); default all ones.

    Returns:
        Tensor[Q, K] in the accumulation dtype. Pass ``attn[:, :, -1:]`` for the last query row.
        NaN/inf propagate as in the arithmetic.
    """
    _check_choice("reduce", reduce, AGP_REDUCES)
    acc = acc_dtype(attn)
    A = attn.to(acc)
    B = A.shape[0]
    w = torch.ones(B, dtype=acc, device=A.device) if weights is None else weights.to(device=A.device, dtype=acc)
    if reduce == "attention":
        per_b = A.mean(1)
    else:
        if grad is None:
            raise ValueError(f"grad is required for reduce={reduce!r}, got None")
        G = grad.to(device=A.device, dtype=acc)
        per_b = A.mean(1) * G.mean(1) if reduce == "product_of_means" else (A * G).mean(1)
    return torch.einsum("b,bqk->qk", w, per_b)


# --------------------------------------------------------------------------------------------
# posnorm
# --------------------------------------------------------------------------------------------
def posnorm(scores: Tensor, valid_mask: Optional[Tensor] = None, mode: str = "minmax") -> Tensor:
    """PosNorm: normalise token scores over the attributable positions (spec §6.8).

    Over the valid set P of each row (last dimension):

    * ``"minmax"`` (default): p_i = (s_i − min_P s)/(max_P s − min_P s); if |P| = 1 or
      max = min, p_i = 1 (the spec's + ε, §6.8, is 0 here, so the largest p is 1 at any scale;
      a row flat up to rounding is stretched all the same and flagged ``"inflated"`` by
      :mod:`aieg_fast.core.diagnostics`);
    * ``"relu_max"``: p_i = max(s_i, 0)/max_P s; if max_P s ≤ 0, p_i = 0;
    * ``"abs_sum"``: p_i = |s_i| / Σ_P |s|; if the sum is 0, p_i = 1/|P|;
    * ``"none"``: p_i = s_i.

    Invalid positions get 0. A row with no valid position is all 0. A row with a NaN or ±inf
    among its valid scores gets NaN at every valid position (the row is undefined). Finite scores
    whose range or sum overflows the accumulation dtype (|s| near 3e38 in float32) are normalised
    all the same: the range from halved values, the sum in float64.

    Args:
        scores (Tensor[..., L]): token scores.
        valid_mask (Tensor[..., L] of bool, optional): attributable positions; default all.

    Returns:
        Tensor[..., L] in the accumulation dtype (fp32; fp64 for fp64 scores).
    """
    _check_choice("mode", mode, POSNORM_MODES)
    acc = acc_dtype(scores)
    s = scores.to(acc)
    if s.shape[-1] == 0:  # no position at all: nothing to normalise
        return s.clone()
    valid = torch.ones_like(s, dtype=torch.bool) if valid_mask is None else valid_mask.to(torch.bool).expand_as(s)
    zero = torch.zeros_like(s)
    nonfinite_row = (~torch.isfinite(s) & valid).any(-1, keepdim=True)
    s_clean = torch.where(valid & torch.isfinite(s), s, zero)
    count = valid.sum(-1, keepdim=True)
    if mode == "none":
        out = s_clean
    elif mode == "minmax":
        inf = torch.full_like(s, float("inf"))
        lo = torch.where(valid, s_clean, inf).amin(-1, keepdim=True)
        hi = torch.where(valid, s_clean, -inf).amax(-1, keepdim=True)
        rng = hi - lo
        safe = torch.where(rng > 0, rng, torch.ones_like(rng))
        out = torch.where(rng > 0, (s_clean - lo) / safe, torch.ones_like(s))
        big = torch.isinf(rng)  # finite extremes whose range overflows: the same ratio from halves
        if bool(big.any()):
            halves = (s_clean * 0.5 - lo * 0.5) / torch.where(big, hi * 0.5 - lo * 0.5, torch.ones_like(rng))
            out = torch.where(big, halves, out)
    elif mode == "relu_max":
        hi = torch.where(valid, s_clean, torch.full_like(s, -float("inf"))).amax(-1, keepdim=True)
        safe = torch.where(hi > 0, hi, torch.ones_like(hi))
        out = torch.where(hi > 0, s_clean.clamp_min(0) / safe, zero)
    else:  # abs_sum
        tot = s_clean.abs().sum(-1, keepdim=True)
        safe = torch.where(tot > 0, tot, torch.ones_like(tot))
        uniform = 1.0 / count.clamp_min(1).to(acc)
        out = torch.where(tot > 0, s_clean.abs() / safe, uniform.expand_as(s))
        big = torch.isinf(tot)  # a sum past the accumulation dtype's range: the shares in float64
        if bool(big.any()):
            a64 = s_clean.abs().double()
            out = torch.where(big, (a64 / a64.sum(-1, keepdim=True)).to(acc), out)
    out = torch.where(valid, out, zero)
    out = torch.where(nonfinite_row & valid, torch.full_like(out, float("nan")), out)
    return out


# --------------------------------------------------------------------------------------------
# hvp_l1_mean
# --------------------------------------------------------------------------------------------
def hvp_l1_mean(hvps: Tensor) -> Tensor:
    """Mean ℓ1 norm of each token's Hessian-vector products over the probes: HETA's curvature
    S_i (``specs/heta.md`` §2; Pramanik et al., ICLR 2026, Eqs. 2–3).

    S_i = (1/m) Σ_k Σ_j |hvps[k, i, j]|, where ``hvps[k, i]`` = Π_i H (Π_i r_k), token i's block
    of the k-th probe's Hessian-vector product. The ℓ1 norm of each probe's block is summed in
    the accumulation dtype, then the m norms are added and divided by m.

    Args:
        hvps (Tensor[m, n, d]): m ≥ 1 probes × n tokens × d embedding dimensions (any float dtype).

    Returns:
        Tensor[n] in the accumulation dtype (fp32; fp64 for fp64 input), ≥ 0. A NaN gives NaN
        for its token, an infinity +inf; d = 0 gives zeros.

    Raises:
        ValueError: not a 3-D tensor, or m = 0 (no probe: the mean is undefined).
    """
    if hvps.dim() != 3:
        raise ValueError(f"hvps should have shape [m, n, d], got shape {list(hvps.shape)}")
    m = hvps.shape[0]
    if m == 0:
        raise ValueError(f"hvps should hold at least one probe (m >= 1), got shape {list(hvps.shape)}")
    acc = acc_dtype(hvps)
    return hvps.to(acc).abs().sum(-1).sum(0) / m
