"""Typed wrappers over the compiled aieg_fast kernels, with the pure-PyTorch reference as fallback.

Each wrapper has the signature of the function of the same name in :mod:`aieg_fast.reference`
plus a keyword ``backend``:

* ``"auto"`` (default): the extension when it is loaded and has a kernel for the inputs' device
  (CPU always; CUDA only in a CUDA build) and no input needs a gradient, else the reference;
* ``"ext"``: the extension, or RuntimeError saying why it is unavailable;
* ``"reference"``: :mod:`aieg_fast.reference`.

Wrappers return only the tensor(s), like the reference. Which backend each wrapper actually ran is
reported to every active :func:`recording` block (a context variable, so threads and nested calls
keep their own records); :func:`resolve_backend` tells in advance what a call would run. Arguments are checked here, before
dispatch, so both backends raise the same ValueError/TypeError for bad input. The kernels are
inference-only (no autograd formula is registered); ``"auto"`` therefore picks the reference
when grad mode is on and an input requires grad, or when an input carries a forward-mode tangent
(``torch.func.jvp``, ``torch.autograd.forward_ad``), and ``"ext"`` refuses both.

The compiled operators are also reachable directly as ``torch.ops.aieg_fast.<op>``, without the
wrappers' argument checks; :mod:`aieg_fast.op_registration` gives torch their fake (meta)
kernels, so that ``torch.compile`` and ``torch.library.opcheck`` work, and a derivative that
refuses (a backward through a direct call raises instead of leaving ``.grad`` None).
"""
from __future__ import annotations

import contextlib
import contextvars
from numbers import Integral
from typing import Dict, Iterator, Optional, Tuple

import torch
from torch import Tensor
from torch.autograd import forward_ad

from . import reference
from . import op_registration  # noqa: F401  (the compiled operators' fake kernels and derivative, registered with torch)
from ._ext import CPU_OPS, CUDA_OPS, EXT_ERROR, HAS_EXT, WITH_CUDA

__all__ = [
    "BACKENDS",
    "MAX_GRID_POINTS",
    "resolve_backend",
    "recording",
    "record_used",
    "unavailable_reason",
    "interpolate_path",
    "adaptive_alphas",
    "emphasis_factors",
    "integrate_gradients",
    "attention_gradient_product",
    "posnorm",
    "hvp_l1_mean",
]

BACKENDS = ("auto", "ext", "reference")
#: the most points :func:`adaptive_alphas` lays out (each point is a forward and a backward pass
#: of the model: ten million is far past any path; a larger M only exhausted memory)
MAX_GRID_POINTS = 10_000_000
_KERNEL_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------------------------
# Backend selection
# --------------------------------------------------------------------------------------------
def unavailable_reason(device_type: str, op: Optional[str]) -> Optional[str]:
    """Why the extension cannot run ``op`` on ``device_type``, or None when it can."""
    if not HAS_EXT:
        return f"the compiled extension aieg_fast._C is not available ({EXT_ERROR})"
    if device_type == "cpu":
        if op is not None and op not in CPU_OPS:
            return f"this build of aieg_fast._C has no CPU kernel for {op}"
        return None
    if device_type == "cuda":
        if not WITH_CUDA:
            return "aieg_fast._C was built without CUDA (rebuild with AIEG_FAST_CUDA=1 on a CUDA machine)"
        if op is not None and op not in CUDA_OPS:
            return f"this build of aieg_fast._C has no CUDA kernel for {op}"
        return None
    return f"aieg_fast._C has kernels for cpu and cuda tensors only, got device type {device_type!r}"


def resolve_backend(backend: str, *tensors: Optional[Tensor], op: Optional[str] = None) -> str:
    """The backend ("ext" or "reference") that a wrapper called with these tensors runs.

    Args:
        backend: "auto", "ext" or "reference".
        *tensors: the op's tensor arguments (None entries are ignored); the first one sets the device.
        op: optional op name, to also check that this build has a kernel for it.

    Raises:
        ValueError: unknown ``backend``.
        RuntimeError: ``backend="ext"`` while the extension cannot run (the message says why), or
            with an input that requires grad or carries a forward-mode tangent (``torch.func.jvp``,
            ``torch.autograd.forward_ad`` duals): the kernels have no autograd formula.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if backend == "reference":
        return "reference"
    present = [t for t in tensors if isinstance(t, Tensor)]
    device_type = present[0].device.type if present else "cpu"
    reason = unavailable_reason(device_type, op)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in present)
    tangent = any(forward_ad.unpack_dual(t).tangent is not None for t in present)  # forward AD: torch.func.jvp, duals
    if backend == "ext":
        if reason is not None:
            raise RuntimeError(f"backend='ext' requested{' for ' + op if op else ''} but {reason}")
        if grad or tangent:  # the kernels have no autograd formula: the output would carry no gradient
            raise RuntimeError(f"backend='ext'{' for ' + op if op else ''}: an input "
                               f"{'carries a forward-mode tangent' if tangent else 'requires grad'}, and the kernels have no "
                               "autograd formula (its gradient would silently be lost); use backend='reference' or 'auto' "
                               "(which picks the reference then), or detach the inputs")
        return "ext"
    if reason is not None:
        return "reference"
    if grad or tangent:
        return "reference"  # the kernels have no autograd formula
    return "ext"


# the dicts of the active recording() blocks, innermost last
_RECORDERS: "contextvars.ContextVar[Tuple[Dict[str, str], ...]]" = contextvars.ContextVar("aieg_fast_op_recorders", default=())


@contextlib.contextmanager
def recording() -> Iterator[Dict[str, str]]:
    """Record the backend each op wrapper actually runs inside the block.

    Yields a dict ``{op name: "ext" | "reference"}`` filled as wrappers run (the last call of
    an op wins). Blocks nest: an op is recorded in every enclosing block. The record is a
    context variable, so concurrent threads keep separate records.

    Example::

        with ops.recording() as used:
            ops.posnorm(scores)
        used  # {"posnorm": "ext"}
    """
    rec: Dict[str, str] = {}
    token = _RECORDERS.set(_RECORDERS.get() + (rec,))
    try:
        yield rec
    finally:
        _RECORDERS.reset(token)


def record_used(used: Dict[str, str]) -> None:
    """Report ``{op: backend}`` to the active :func:`recording` blocks as if those ops had run:
    for a result reused from an earlier call (``Explainer.shared_paths``), whose ops ran then."""
    for rec in _RECORDERS.get():
        rec.update(used)


def _dispatch(backend: str, *tensors: Optional[Tensor], op: str) -> str:
    """:func:`resolve_backend` for a wrapper about to run ``op``; reports the choice to the
    active :func:`recording` blocks."""
    used = resolve_backend(backend, *tensors, op=op)
    for rec in _RECORDERS.get():
        rec[op] = used
    return used


# --------------------------------------------------------------------------------------------
# Argument checks (identical for both backends)
# --------------------------------------------------------------------------------------------
def _check_choice(name: str, value, choices) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def _check_tensor(x, name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} should be a torch.Tensor, got {type(x).__name__}")


def _check_float(x, name: str) -> None:
    """Tensors the kernels read in their own dtype: float32, float64, float16 or bfloat16."""
    _check_tensor(x, name)
    if x.dtype not in _KERNEL_DTYPES:
        raise TypeError(f"{name} should be a float32, float64, float16 or bfloat16 tensor, got dtype {x.dtype}")


def _check_real(x, name: str) -> None:
    """Tensors that are cast to the accumulation dtype first: any real (non-complex, non-bool) dtype."""
    _check_tensor(x, name)
    if x.is_complex() or x.dtype == torch.bool:
        raise TypeError(f"{name} should be a real-valued tensor, got dtype {x.dtype}")


def _check_has_values(x: Tensor, name: str, op: str) -> None:
    """Refuse a tensor on the meta device for an op whose result depends on the values."""
    if x.device.type == "meta":
        raise ValueError(f"{name} is on the meta device, which holds no values; {op} depends on them")


def _check_mask(x, name: str) -> None:
    """A mask of positions: bool, or 0/1 integers (a float mask is refused: 0.5 or NaN would be
    read as True)."""
    _check_tensor(x, name)
    if x.is_floating_point() or x.is_complex():
        raise TypeError(f"{name} should be a bool (or 0/1 integer) tensor, got dtype {x.dtype}")


def _moved(x: Tensor, name: str, device: torch.device, op: str) -> Tensor:
    """``x`` on ``device`` (the op's first tensor's); one on the meta device, which has no values
    to move, is refused by name."""
    if x.device != device:
        _check_has_values(x, name, op)
    return x.to(device)


def _check_shape(ok: bool, name: str, expected: str, x: Tensor) -> None:
    if not ok:
        raise ValueError(f"{name} should have shape {expected}, got shape {list(x.shape)}")


def _broadcastable(small: Tensor, shape) -> bool:
    """Whether ``small.expand(shape)`` works."""
    if small.dim() > len(shape):
        return False
    return all(s == 1 or s == b for s, b in zip(reversed(small.shape), reversed(tuple(shape))))


def _on(x: Optional[Tensor], device: torch.device) -> Optional[Tensor]:
    return None if x is None else x.to(device)




# --------------------------------------------------------------------------------------------
# Wrappers
# --------------------------------------------------------------------------------------------
def interpolate_path(
    input_embeds: Tensor,
    baseline_embeds: Tensor,
    alphas: Tensor,
    fixed_mask: Optional[Tensor] = None,
    *,
    backend: str = "auto",
) -> Tensor:
    """Points on the straight-line path γ(α) = E′ + α (E − E′) (see :func:`reference.interpolate_path`;
    specs/aieg.md §6.3).

    Args:
        input_embeds (Tensor[L, d]): embeddings E (float32/float64/float16/bfloat16).
        baseline_embeds (Tensor[L, d]): baseline embeddings E′ (cast to the accumulation dtype
            if its dtype differs from ``input_embeds``').
        alphas (Tensor[m]): path positions (any shape with m elements; any real dtype).
        fixed_mask (Tensor[L] of bool, or of 0/1 integers, optional): positions that copy
            ``input_embeds`` (nonzero: fixed; a floating-point mask is refused).
        backend: "auto", "ext" or "reference".

    Returns:
        Tensor[m, L, d] in ``input_embeds``' dtype.

    Raises:
        TypeError: a non-tensor, ``input_embeds`` not float32/float64/float16/bfloat16, a
            complex or bool ``baseline_embeds`` / ``alphas``, a floating-point ``fixed_mask``.
        ValueError: shapes other than above; an argument on the meta device (no values) next to
            another device's ``input_embeds``; an unknown ``backend``.
        RuntimeError: ``backend="ext"`` where the extension cannot run this call (as
            :func:`resolve_backend` says).
    """
    _check_float(input_embeds, "input_embeds")
    _check_real(baseline_embeds, "baseline_embeds")
    _check_real(alphas, "alphas")
    _check_shape(input_embeds.dim() == 2, "input_embeds", "[L, d]", input_embeds)
    L, d = input_embeds.shape
    _check_shape(tuple(baseline_embeds.shape) == (L, d), "baseline_embeds", f"[{L}, {d}] (like input_embeds)",
                 baseline_embeds)
    dev = input_embeds.device
    op = "interpolate_path"
    baseline_embeds, alphas = _moved(baseline_embeds, "baseline_embeds", dev, op), _moved(alphas, "alphas", dev, op).reshape(-1)
    if fixed_mask is not None:
        _check_mask(fixed_mask, "fixed_mask")
        _check_shape(fixed_mask.dim() == 1 and fixed_mask.numel() == L, "fixed_mask", f"[{L}]", fixed_mask)
        fixed_mask = _moved(fixed_mask, "fixed_mask", dev, op).reshape(-1)
    used = _dispatch(backend, input_embeds, baseline_embeds, alphas, fixed_mask, op=op)
    if used == "reference":
        return reference.interpolate_path(input_embeds, baseline_embeds, alphas, fixed_mask)
    return torch.ops.aieg_fast.interpolate_path.default(input_embeds, baseline_embeds, alphas, fixed_mask)


def adaptive_alphas(
    pilot_logits: Tensor,
    n_steps: int,
    alloc: str = "abs",
    idg_compat_quirk: bool = False,
    *,
    backend: str = "auto",
) -> Tuple[Tensor, Tensor]:
    """IDG adaptive sampling grid (see :func:`reference.adaptive_alphas`; specs/aieg.md §3.2, §6.4).

    The allocation is O(N + M) scalar work and runs on the host for every backend and device
    (the N pilot values are copied to the host, as in the reference).

    Args:
        pilot_logits (Tensor[N]): target logit along the pilot grid (any shape with N elements).
        n_steps (int): M ≥ 2.
        alloc: "abs" or "idg_minmax".
        idg_compat_quirk: reproduce the official IDG code's allocation and placement.
        backend: "auto", "ext" or "reference".

    Returns:
        (alphas Tensor[M], widths Tensor[M]) on ``pilot_logits``' device, float32 (float64 for a
        float64 pilot).

    Raises:
        TypeError: ``pilot_logits`` not a real tensor, ``n_steps`` not an int,
            ``idg_compat_quirk`` not a bool. ValueError: ``alloc`` unknown, ``n_steps`` outside
            [2, :data:`MAX_GRID_POINTS`], ``pilot_logits`` on the meta device (the grid depends
            on its values, which that device does not hold), an unknown ``backend``.
        RuntimeError: ``backend="ext"`` where the extension cannot run this call (as
            :func:`resolve_backend` says).
    """
    _check_choice("alloc", alloc, reference.ALLOC_MODES)
    _check_real(pilot_logits, "pilot_logits")
    _check_has_values(pilot_logits, "pilot_logits", "adaptive_alphas")
    if isinstance(n_steps, bool) or not isinstance(n_steps, Integral):
        raise TypeError(f"n_steps should be an int, got {type(n_steps).__name__} {n_steps!r}")
    if not 2 <= n_steps <= MAX_GRID_POINTS:
        raise ValueError(f"n_steps must be in [2, {MAX_GRID_POINTS}], got {n_steps}")
    if not isinstance(idg_compat_quirk, bool):
        raise TypeError(f"idg_compat_quirk should be True or False, got {idg_compat_quirk!r}")
    pilot = pilot_logits.detach().reshape(-1)
    if _dispatch(backend, pilot, op="adaptive_alphas") == "reference":
        return reference.adaptive_alphas(pilot, int(n_steps), alloc, bool(idg_compat_quirk))
    return torch.ops.aieg_fast.adaptive_alphas.default(pilot, int(n_steps), alloc, bool(idg_compat_quirk))


def emphasis_factors(
    path_logits: Tensor,
    alphas: Tensor,
    widths: Tensor,
    mode: str = "fd",
    sign: str = "abs",
    norm: str = "l1",
    slopes: Optional[Tensor] = None,
    *,
    backend: str = "auto",
) -> Tensor:
    """Emphasis factors EF_m from logit jumps along the path (see :func:`reference.emphasis_factors`;
    specs/aieg.md §6.5).

    Args:
        path_logits (Tensor[M]): target logit at each path point (slopes for ``mode="autograd"``).
        alphas (Tensor[M]): sorted path positions.
        widths (Tensor[M]): sub-step widths.
        mode: "fd", "autograd", "none" or "completeness".
        sign: "abs", "signed", "relu" or "minmax" ("abs" only for "completeness").
        norm: "l1" or "none" ("none" only for "completeness").
        slopes (Tensor[M], optional): autograd slopes G_m·Δ, required by ``mode="completeness"``
            (which then returns the integration weights ω_m) and refused by the other modes.
        backend: "auto", "ext" or "reference".

    Returns:
        Tensor[M], float32 (float64 for float64 logits).

    Raises:
        ValueError: a bad option or combination (:func:`reference.check_emphasis_options`),
            inputs of different lengths, an input on the meta device (the factors depend on the
            values), an unknown ``backend``. TypeError: a non-tensor or complex/bool input.
        RuntimeError: ``backend="ext"`` where the extension cannot run this call (as
            :func:`resolve_backend` says).
    """
    reference.check_emphasis_options(mode, sign, norm, slopes)
    named = [(path_logits, "path_logits"), (alphas, "alphas"), (widths, "widths")]
    for x, name in named + ([] if slopes is None else [(slopes, "slopes")]):
        _check_real(x, name)
        _check_has_values(x, name, "emphasis_factors")
    for x, name in named + ([] if slopes is None else [(slopes, "slopes")]):
        _check_shape(x.dim() == 1, name, "[M]", x)
    M = path_logits.numel()
    if alphas.numel() != M or widths.numel() != M or (slopes is not None and slopes.numel() != M):
        if slopes is None:
            raise ValueError(
                f"path_logits, alphas and widths must have the same length, got {M}, {alphas.numel()}, {widths.numel()}"
            )
        raise ValueError(
            f"path_logits, alphas, widths and slopes must have the same length, got {M}, {alphas.numel()}, "
            f"{widths.numel()}, {slopes.numel()}"
        )
    dev = path_logits.device
    f, a, w = path_logits.reshape(-1), alphas.to(dev).reshape(-1), widths.to(dev).reshape(-1)
    s = None if slopes is None else slopes.to(dev).reshape(-1)
    if _dispatch(backend, f, a, w, s, op="emphasis_factors") == "reference":
        return reference.emphasis_factors(f, a, w, mode, sign, norm, s)
    return torch.ops.aieg_fast.emphasis_factors.default(f, a, w, mode, sign, norm, s)


def integrate_gradients(
    grads: Tensor,
    weights: Tensor,
    delta: Tensor,
    reduce: str = "sum",
    *,
    backend: str = "auto",
) -> Tensor:
    """Fused path integral Δ ⊙ Σ_m w_m G_m, reduced over d (see :func:`reference.integrate_gradients`;
    specs/aieg.md §6.6).

    The kernel reads ``grads`` once, in its own dtype, with fp32 accumulation (fp64 for fp64).
    Non-contiguous ``grads`` are read through their strides when the last dimension is
    contiguous, otherwise copied once. The kernel adds the path steps in another order than the
    reference (four at a time on the CPU), so finite results agree to rounding, but where the
    accumulator overflows one may give NaN (inf − inf) where the other gives ±inf. With
    ``reduce="sum"`` the CPU kernel adds the embedding dimensions in float64, the reference and
    the CUDA kernel in float32: terms near 3e38 whose float32 partial sums overflow give ±inf
    there and a finite sum on the CPU.

    Args:
        grads (Tensor[m, L, d]): gradients at the path points.
        weights (Tensor[m]): per-step weights.
        delta (Tensor[L, d]): Δ = E − E′ (or anything broadcastable to [L, d]).
        reduce: "sum" (Tensor[L]) or "none" (Tensor[L, d]).
        backend: "auto", "ext" or "reference".

    Returns:
        Tensor[L] or Tensor[L, d], float32 (float64 for float64 grads).

    Raises:
        TypeError: a non-tensor, ``grads`` not of a kernel dtype, a complex or bool ``weights`` /
            ``delta``. ValueError: shapes other than above, ``weights`` / ``delta`` on the meta
            device (no values) next to another device's ``grads``, an unknown ``reduce`` or ``backend``.
        RuntimeError: ``backend="ext"`` where the extension cannot run this call (as
            :func:`resolve_backend` says).
    """
    _check_choice("reduce", reduce, reference.INTEGRATE_REDUCES)
    _check_float(grads, "grads")
    _check_real(weights, "weights")
    _check_real(delta, "delta")
    _check_shape(grads.dim() == 3, "grads", "[m, L, d]", grads)
    m, L, d = grads.shape
    _check_shape(weights.dim() == 1 and weights.shape[0] == m, "weights", f"[{m}] (m of grads)", weights)
    _check_shape(delta.dim() <= 2 and _broadcastable(delta, (L, d)), "delta", f"[{L}, {d}] (L, d of grads)", delta)
    dev = grads.device
    weights, delta = _moved(weights, "weights", dev, "integrate_gradients"), _moved(delta, "delta", dev, "integrate_gradients").expand(L, d)
    if _dispatch(backend, grads, weights, delta, op="integrate_gradients") == "reference":
        return reference.integrate_gradients(grads, weights, delta, reduce)
    return torch.ops.aieg_fast.integrate_gradients.default(grads, weights, delta, reduce)


def attention_gradient_product(
    attn: Tensor,
    grad: Optional[Tensor] = None,
    weights: Optional[Tensor] = None,
    reduce: str = "product_of_means",
    *,
    backend: str = "auto",
) -> Tensor:
    """Scaled attention α∇α / head-mean attention over a batch (see
    :func:`reference.attention_gradient_product`; specs/aieg.md §4).

    Args:
        attn (Tensor[B, H, Q, K]): attention probabilities (``attn[:, :, -1:]`` for the last
            query row is read through its strides, without a copy).
        grad (Tensor[B, H, Q, K], optional): ∂F/∂attn; required unless ``reduce="attention"``
            (then it is ignored).
        weights (Tensor[B], optional): per-batch weights; default all ones.
        reduce: "product_of_means", "mean_of_products" or "attention".
        backend: "auto", "ext" or "reference".

    Returns:
        Tensor[Q, K], float32 (float64 for float64 attn); NaN for H = 0 under a head mean.

    Raises:
        TypeError: a non-tensor, ``attn`` not of a kernel dtype, a complex or bool ``grad`` /
            ``weights``. ValueError: shapes other than above, ``grad`` / ``weights`` on the meta device
            (no values) next to another device's ``attn``, ``grad`` missing where ``reduce``
            needs it, an unknown ``reduce`` or ``backend``.
        RuntimeError: ``backend="ext"`` where the extension cannot run this call (as
            :func:`resolve_backend` says).
    """
    _check_choice("reduce", reduce, reference.AGP_REDUCES)
    _check_float(attn, "attn")
    _check_shape(attn.dim() == 4, "attn", "[B, H, Q, K]", attn)
    B = attn.shape[0]
    dev = attn.device
    if reduce == "attention":
        grad = None
    else:
        if grad is None:
            raise ValueError(f"grad is required for reduce={reduce!r}, got None")
        _check_real(grad, "grad")
        _check_shape(grad.shape == attn.shape, "grad", f"{list(attn.shape)} (like attn)", grad)
        grad = _moved(grad, "grad", dev, "attention_gradient_product")
    if weights is not None:
        _check_real(weights, "weights")
        _check_shape(weights.dim() == 1 and weights.shape[0] == B, "weights", f"[{B}] (B of attn)", weights)
        weights = _moved(weights, "weights", dev, "attention_gradient_product")
    if _dispatch(backend, attn, grad, weights, op="attention_gradient_product") == "reference":
        return reference.attention_gradient_product(attn, grad, weights, reduce)
    return torch.ops.aieg_fast.attention_gradient_product.default(attn, grad, weights, reduce)


def posnorm(
    scores: Tensor,
    valid_mask: Optional[Tensor] = None,
    mode: str = "minmax",
    *,
    backend: str = "auto",
) -> Tensor:
    """PosNorm over the attributable positions of each row (see :func:`reference.posnorm`;
    specs/aieg.md §6.8).

    Args:
        scores (Tensor[..., L]): token scores.
        valid_mask (Tensor[..., L] of bool, or of 0/1 integers, optional): attributable
            positions, broadcastable to ``scores``; default all.
        mode: "minmax", "relu_max", "abs_sum" or "none".
        backend: "auto", "ext" or "reference".

    Returns:
        Tensor[..., L], float32 (float64 for float64 scores); empty for L = 0.

    Raises:
        TypeError: a non-tensor, ``scores`` not of a kernel dtype, a floating-point or complex
            ``valid_mask``. ValueError: ``scores`` 0-d or on the meta device, ``valid_mask`` not
            broadcastable to it or on the meta device, an unknown ``mode`` or ``backend``.
        RuntimeError: ``backend="ext"`` where the extension cannot run this call (as
            :func:`resolve_backend` says).
    """
    _check_choice("mode", mode, reference.POSNORM_MODES)
    _check_float(scores, "scores")
    _check_shape(scores.dim() >= 1, "scores", "[..., L]", scores)
    _check_has_values(scores, "scores", "posnorm")
    if valid_mask is not None:
        _check_mask(valid_mask, "valid_mask")
        _check_shape(_broadcastable(valid_mask, scores.shape), "valid_mask",
                     f"broadcastable to {list(scores.shape)} (scores)", valid_mask)
        valid_mask = _moved(valid_mask, "valid_mask", scores.device, "posnorm")
    if _dispatch(backend, scores, valid_mask, op="posnorm") == "reference":
        return reference.posnorm(scores, valid_mask, mode)
    return torch.ops.aieg_fast.posnorm.default(scores, valid_mask, mode)


def hvp_l1_mean(hvps: Tensor, *, backend: str = "auto") -> Tensor:
    """Mean over probes of the ℓ1 norm of each token's HVP block, HETA's S_i (see
    :func:`reference.hvp_l1_mean`; specs/heta.md §2).

    The kernel reads ``hvps`` once, in its own dtype, and sums in fp64 before rounding to the
    accumulation dtype (the reference sums in the accumulation dtype: the results agree to a few
    ulps of it). Non-contiguous ``hvps`` are read through their strides when the last dimension
    is contiguous, otherwise copied once.

    Args:
        hvps (Tensor[m, n, d]): m ≥ 1 probes × n tokens × d dimensions (float32/float64/float16/bfloat16).
        backend: "auto", "ext" or "reference".

    Returns:
        Tensor[n], float32 (float64 for float64 hvps).

    Raises:
        TypeError: ``hvps`` not a float tensor. ValueError: not [m, n, d], m = 0, an unknown ``backend``.
        RuntimeError: ``backend="ext"`` where the extension cannot run this call (as
            :func:`resolve_backend` says).
    """
    _check_float(hvps, "hvps")
    _check_shape(hvps.dim() == 3, "hvps", "[m, n, d]", hvps)
    if hvps.shape[0] == 0:
        raise ValueError(f"hvps should hold at least one probe (m >= 1), got shape {list(hvps.shape)}")
    if _dispatch(backend, hvps, op="hvp_l1_mean") == "reference":
        return reference.hvp_l1_mean(hvps)
    return torch.ops.aieg_fast.hvp_l1_mean.default(hvps)
