"""aieg_fast.ops: compiled kernels vs the pure-PyTorch reference (the spec), per op.

* ext vs reference over devices, dtypes (fp32/fp64/bf16/fp16), odd and empty shapes and
  non-contiguous inputs. Tolerance follows the low-precision rule
  max|ext − ref_fp64| ≤ 2·max|ref_dtype − ref_fp64| + atol, with ref_fp64 the reference on the
  same values upcast to fp64 and atol a few ulps of the accumulation dtype times the magnitude;
* hypothesis property tests with NaN, ±inf, constant and all-masked rows (ext == reference,
  NaN positions equal; adaptive_alphas bit-exact);
* torch.library.opcheck on sample inputs of every op;
* backend selection and argument errors (identical for both backends).
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aieg_fast
from aieg_fast import ops
from aieg_fast import reference as R

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
LOWP = (torch.bfloat16, torch.float16)

requires_ext = pytest.mark.skipif(not aieg_fast.HAS_EXT, reason=f"aieg_fast._C is not available: {aieg_fast.EXT_ERROR}")
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")],
    ),
]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _need_ext(device: str) -> None:
    if not aieg_fast.HAS_EXT:
        pytest.skip(f"aieg_fast._C is not available: {aieg_fast.EXT_ERROR}")
    if device == "cuda" and not aieg_fast.WITH_CUDA:
        pytest.skip("aieg_fast._C was built without CUDA")


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps


def _up(x):
    """The same values in fp64 (None passes through)."""
    return None if x is None else x.to(torch.float64) if x.is_floating_point() else x


def check_against_ref(ext, ref, ref64, scale: float, ulps: float = 16.0) -> None:
    """Low-precision rule: max|ext − ref64| ≤ 2·max|ref − ref64| + ulps·eps(acc)·scale; same NaN/inf."""
    assert ext.shape == ref.shape, (ext.shape, ref.shape)
    assert ext.dtype == ref.dtype, (ext.dtype, ref.dtype)
    assert ext.device == ref.device
    e, r, r64 = ext.double().cpu(), ref.double().cpu(), ref64.double().cpu()
    assert torch.equal(e.isnan(), r.isnan()), "NaN positions differ"
    fin = torch.isfinite(r)
    assert torch.equal(e[~fin & ~r.isnan()], r[~fin & ~r.isnan()]), "inf values differ"
    if fin.any():
        err = (e - r64)[fin].abs().max().item()
        ref_err = (r - r64)[fin].abs().max().item()
        atol = ulps * _eps(ref.dtype) * max(scale, 1e-30)
        assert err <= 2 * ref_err + atol, f"max|ext - ref64| = {err:.3g} > 2 * {ref_err:.3g} + {atol:.3g}"


def assert_same(ext, ref, rtol: float = 0.0, atol: float = 0.0) -> None:
    """ext == reference up to rtol/atol, NaN positions equal, same dtype/shape/device."""
    assert ext.dtype == ref.dtype and ext.shape == ref.shape and ext.device == ref.device
    torch.testing.assert_close(ext, ref, rtol=rtol, atol=atol, equal_nan=True)


def _mag(x) -> float:
    x = x.double()
    return x[torch.isfinite(x)].abs().max().item() if x.numel() and torch.isfinite(x).any() else 1.0


_vals = st.one_of(
    st.floats(-100, 100, allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from([0.0, 1.0, -1.0]),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
)


def _tensor(draw, shape, dtype, values=_vals):
    n = math.prod(shape)
    return torch.tensor(draw(st.lists(values, min_size=n, max_size=n)), dtype=torch.float64).reshape(shape).to(dtype)


# --------------------------------------------------------------------------------------------
# interpolate_path
# --------------------------------------------------------------------------------------------
@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,L,d", [(1, 1, 1), (5, 97, 33), (3, 7, 1025), (0, 4, 8), (3, 0, 8), (3, 4, 0)])
@pytest.mark.parametrize("masked", [False, True])
def test_interpolate_path(device, dtype, m, L, d, masked):
    _need_ext(device)
    g = torch.Generator().manual_seed(m * 1000 + L * 10 + d)
    e = torch.randn(L, d, generator=g).to(device, dtype)
    b = torch.randn(L, d, generator=g).to(device, dtype)
    a = torch.rand(m, generator=g, dtype=torch.float64).to(device)
    fm = (torch.rand(L, generator=g) > 0.5).to(device) if masked else None
    out = ops.interpolate_path(e, b, a, fm, backend="ext")
    # Same operation order and roundings as the reference: bit-identical.
    assert_same(out, R.interpolate_path(e, b, a, fm))


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
def test_interpolate_path_noncontiguous_and_mixed_dtypes(device):
    _need_ext(device)
    e = torch.randn(33, 97, device=device).t()  # [97, 33], transposed
    b = torch.randn(97, 66, device=device, dtype=torch.float64)[:, ::2]  # strided, other dtype
    a = torch.linspace(0, 1, 7, device=device)[::2]
    fm = torch.tensor([1, 0] * 48 + [1], device=device)  # int mask
    assert_same(ops.interpolate_path(e, b, a, fm, backend="ext"), R.interpolate_path(e, b, a, fm))


@requires_ext
@SETTINGS
@given(data=st.data(), m=st.integers(0, 4), L=st.integers(0, 4), d=st.integers(0, 9),
       dtype=st.sampled_from(FLOATS), masked=st.booleans())
def test_interpolate_path_property(data, m, L, d, dtype, masked):
    e = _tensor(data.draw, (L, d), dtype)
    b = _tensor(data.draw, (L, d), dtype)
    a = _tensor(data.draw, (m,), torch.float64)
    fm = torch.tensor(data.draw(st.lists(st.booleans(), min_size=L, max_size=L)), dtype=torch.bool) if masked else None
    assert_same(ops.interpolate_path(e, b, a, fm, backend="ext"), R.interpolate_path(e, b, a, fm))


# --------------------------------------------------------------------------------------------
# adaptive_alphas
# --------------------------------------------------------------------------------------------
def _assert_grid_equal(x, y):
    for u, v in zip(x, y):
        assert u.dtype == v.dtype and u.device == v.device and u.shape == v.shape
        assert torch.equal(u.cpu(), v.cpu()), (u, v)


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("alloc", R.ALLOC_MODES)
@pytest.mark.parametrize("quirk", [False, True])
def test_adaptive_alphas(device, dtype, alloc, quirk):
    _need_ext(device)
    g = torch.Generator().manual_seed(1)
    pilots = [
        torch.randn(17, generator=g).cumsum(0),
        torch.linspace(-2, 3, 9),  # equal slopes: M·π are exact fractions of M
        torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0, 3.0]),  # empty bins, ties
        torch.tensor([0.0, 5.0]),  # N = 2
        torch.tensor([1.0]),  # N < 2: uniform
        torch.zeros(0),
        torch.full((6,), 2.0),  # flat: uniform
        torch.tensor([0.0, 1.0, float("nan")]),  # non-finite: uniform
    ]
    for p in pilots:
        p = p.to(device, dtype)
        for M in (2, 3, 7, 50, 97):
            _assert_grid_equal(ops.adaptive_alphas(p, M, alloc, quirk, backend="ext"),
                               R.adaptive_alphas(p, M, alloc, quirk))


_pilot_values = st.one_of(
    st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, 3.0]),  # repeats make ties and exact fractions
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
)


@requires_ext
@SETTINGS
@given(
    vals=st.lists(_pilot_values, min_size=0, max_size=24),
    M=st.integers(2, 120),
    alloc=st.sampled_from(R.ALLOC_MODES),
    quirk=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_adaptive_alphas_property(vals, M, alloc, quirk, dtype):
    p = torch.tensor(vals, dtype=dtype)
    _assert_grid_equal(ops.adaptive_alphas(p, M, alloc, quirk, backend="ext"), R.adaptive_alphas(p, M, alloc, quirk))


# --------------------------------------------------------------------------------------------
# emphasis_factors
# --------------------------------------------------------------------------------------------
def _ef_settings():
    """Every (mode, sign, norm) emphasis_factors accepts ("completeness": "abs" and "none" only)."""
    for mode in R.EF_MODES:
        for sign in R.EF_SIGNS:
            for norm in R.EF_NORMS:
                if mode != "completeness" or (sign, norm) == ("abs", "none"):
                    yield mode, sign, norm


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M", [0, 1, 2, 97])
def test_emphasis_factors(device, dtype, M):
    _need_ext(device)
    g = torch.Generator().manual_seed(M)
    f = torch.randn(M, generator=g).cumsum(0).to(device, dtype)
    a, w = R.adaptive_alphas(torch.randn(12, generator=g).cumsum(0), max(M, 2))
    a, w = a[:M].to(device), w[:M].to(device)
    slopes = (torch.randn(M, generator=g) * 20).to(device, dtype)  # ratios of every kind: < 0, in [0, 1], > 1
    if M > 3:
        a[2] = a[1]  # a zero step: r = 0 there
        slopes[3] = 0  # a zero slope: no prediction, EF = 0
    for mode, sign, norm in _ef_settings():
        s = slopes if mode == "completeness" else None
        out = ops.emphasis_factors(f, a, w, mode, sign, norm, s, backend="ext")
        ref = R.emphasis_factors(f, a, w, mode, sign, norm, s)
        ref64 = R.emphasis_factors(_up(f), _up(a), _up(w), mode, sign, norm, _up(s))
        check_against_ref(out, ref, ref64, _mag(ref), ulps=64)


_ef_values = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from([0.0, 1.0, -1.0, 0.25]),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
)


@requires_ext
@SETTINGS
@given(
    data=st.lists(st.tuples(_ef_values, _ef_values, _ef_values, _ef_values), min_size=0, max_size=20),
    setting=st.sampled_from(list(_ef_settings())),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_emphasis_factors_property(data, setting, dtype):
    mode, sign, norm = setting
    f, a, w, s = (torch.tensor([t[i] for t in data], dtype=dtype) for i in range(4))
    s = s if mode == "completeness" else None
    out = ops.emphasis_factors(f, a, w, mode, sign, norm, s, backend="ext")
    ref = R.emphasis_factors(f, a, w, mode, sign, norm, s)
    assert_same(out, ref, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-30)


@pytest.mark.parametrize("backend", ["reference", pytest.param("ext", marks=requires_ext)])
def test_emphasis_factors_autograd_weighs_every_sample(backend):
    """mode="autograd" takes the slopes G_m·Δ at every sample, the first (α = 0) included, as IDG's
    original code (specs/aieg.md §3.1, §6.5): w_m = r_m·δ_m. Only "fd" has no increment before α_1."""
    r = torch.tensor([2.0, -1.0, 0.5, 3.0], dtype=torch.float64)
    a = torch.tensor([0.0, 0.25, 0.5, 0.75], dtype=torch.float64)
    d = torch.tensor([0.25, 0.25, 0.125, 0.375], dtype=torch.float64)
    w = r * d
    assert_same(ops.emphasis_factors(r, a, d, "autograd", "signed", "none", backend=backend), w / 4, rtol=1e-12, atol=0)
    assert_same(ops.emphasis_factors(r, a, d, "autograd", "abs", "l1", backend=backend), w.abs() / w.abs().sum(),
                rtol=1e-12, atol=0)
    lo, hi = w.min(), w.max()  # minmax: the extrema over every weight, then EF_1 := 0
    mm = (w - lo) / (hi - lo)
    mm[0] = 0
    assert_same(ops.emphasis_factors(r, a, d, "autograd", "minmax", "l1", backend=backend), mm / mm.sum(), rtol=1e-12, atol=0)
    fd = ops.emphasis_factors(torch.tensor([0.0, 1.0, 1.5, 1.0], dtype=torch.float64), a, d, "fd", "signed", "none", backend=backend)
    assert fd[0] == 0 and fd[1] == 4.0 * 0.25 / 4  # no increment before the first sample


@pytest.mark.parametrize("backend", ["reference", pytest.param("ext", marks=requires_ext)])
def test_emphasis_factors_completeness_cases(backend):
    """Hand-computed weights ω_m = clip(Δf_m / (s_m g_m), 0, 1)·g_m; the widths are not read."""
    a = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.0], dtype=torch.float64)
    f = torch.tensor([0.0, 1.0, 1.5, 1.0, 2.0, 3.0], dtype=torch.float64)
    s = torch.tensor([9.0, 2.0, 8.0, 4.0, 0.0, 5.0], dtype=torch.float64)
    expected = torch.tensor([
        0.0,  # m = 1: never weighted (its slope 9 is not read)
        0.25,  # Δf 1 over p = 2·0.25 = 0.5: ratio 2, clipped to 1 → ω = g
        0.0625,  # Δf 0.5 over p = 8·0.25 = 2: ratio 0.25 → 0.25·0.25
        0.0,  # Δf −0.5 over p = 1: negative ratio, clipped to 0
        0.0,  # zero slope: p = 0
        0.0,  # zero step (α repeated): p = 0
    ], dtype=torch.float64)
    for widths in (torch.full((6,), 0.3, dtype=torch.float64), torch.arange(6, dtype=torch.float64)):
        out = ops.emphasis_factors(f, a, widths, "completeness", "abs", "none", s, backend=backend)
        assert torch.equal(out, expected)
    out32 = ops.emphasis_factors(f.float(), a.float(), a.float(), "completeness", "abs", "none", s.float(), backend=backend)
    assert out32.dtype == torch.float32 and torch.equal(out32, expected.float())
    s_bad = s.clone()
    s_bad[0] = float("inf")  # non-finite input anywhere → NaN everywhere, as in the other modes
    assert ops.emphasis_factors(f, a, a, "completeness", "abs", "none", s_bad, backend=backend).isnan().all()


@pytest.mark.parametrize("backend", ["reference", pytest.param("ext", marks=requires_ext)])
def test_emphasis_factors_completeness_sums_to_the_logit_change(backend):
    """F(α) = α³ + α has a rising slope, so F′ at the right end of every sub-interval
    over-predicts the increment (ratio in (0, 1), nothing clipped) and Σ_m ω_m F′(α_m) =
    F(α_M) − F(α_1) exactly: on the uniform grid and on an adaptive grid of unequal steps that
    stops short of 1. The normalised "fd" weights and IG's widths miss it."""
    F = lambda x: x**3 + x  # noqa: E731
    dF = lambda x: 3 * x**2 + 1  # noqa: E731
    uniform = R.uniform_alphas(9, dtype=torch.float64)
    adaptive = R.adaptive_alphas(F(torch.linspace(0, 1, 7, dtype=torch.float64)), 11)
    for a, w in (uniform, adaptive):
        f, s = F(a), dF(a)
        omega = ops.emphasis_factors(f, a, w, "completeness", "abs", "none", s, backend=backend)
        g = a[1:] - a[:-1]
        ef = omega[1:] / g
        assert bool(((ef > 0) & (ef < 1)).all())  # no step clipped
        change = float(f[-1] - f[0])
        torch.testing.assert_close(float((omega * s).sum()), change, rtol=1e-12, atol=0.0)
        fd = ops.emphasis_factors(f, a, w, "fd", "abs", "l1", backend=backend)
        assert abs(float((fd * s).sum()) - change) > 0.02 * change
        assert abs(float((w * s).sum()) - change) > 0.02 * change
    assert float(adaptive[0][-1]) < 1.0 and float(adaptive[0][0]) == 0.0


# --------------------------------------------------------------------------------------------
# integrate_gradients
# --------------------------------------------------------------------------------------------
def _integrate_check(grads, weights, delta, reduce):
    out = ops.integrate_gradients(grads, weights, delta, reduce, backend="ext")
    ref = R.integrate_gradients(grads, weights, delta, reduce)
    ref64 = R.integrate_gradients(_up(grads), _up(weights), _up(delta), reduce)
    scale = _mag(R.integrate_gradients(_up(grads).abs(), _up(weights).abs(), _up(delta).abs(), reduce))
    check_against_ref(out, ref, ref64, scale)


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,L,d", [(1, 1, 1), (5, 97, 33), (3, 2, 9000), (50, 3, 1025), (0, 4, 8), (3, 0, 8), (3, 4, 0)])
@pytest.mark.parametrize("reduce", R.INTEGRATE_REDUCES)
def test_integrate_gradients(device, dtype, m, L, d, reduce):
    _need_ext(device)
    g = torch.Generator().manual_seed(m + 7 * L + 13 * d)
    grads = torch.randn(m, L, d, generator=g).to(device, dtype)
    weights = torch.rand(m, generator=g).to(device)
    delta = torch.randn(L, d, generator=g).to(device, dtype)
    _integrate_check(grads, weights, delta, reduce)


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_integrate_gradients_noncontiguous(device, dtype):
    _need_ext(device)
    g = torch.Generator().manual_seed(3)
    grads = torch.randn(97, 6, 40, generator=g).to(device, dtype).transpose(0, 1)  # [6, 97, 40], strided m/L
    weights = torch.randn(12, generator=g, dtype=torch.float64).to(device)[::2]
    delta = torch.randn(40, 97, generator=g).to(device).t()  # [97, 40], fp32, last dim strided
    for reduce in R.INTEGRATE_REDUCES:
        _integrate_check(grads, weights, delta, reduce)
        _integrate_check(grads[:, 1:, ::3], weights, delta[1:, ::3], reduce)  # last dim strided: copied
        _integrate_check(grads[:, :, :7], weights, delta[0, :7], reduce)  # broadcast delta [7] -> [97, 7]


@requires_ext
def test_cpu_results_do_not_depend_on_thread_count():
    grads, weights, delta = torch.randn(9, 33, 9000), torch.rand(9), torch.randn(33, 9000)
    attn, grad = torch.rand(50, 3, 1, 700), torch.randn(50, 3, 1, 700)

    def run():
        return (ops.integrate_gradients(grads, weights, delta, backend="ext"),
                ops.integrate_gradients(grads, weights, delta, "none", backend="ext"),
                ops.attention_gradient_product(attn, grad, weights.repeat(6)[:50], backend="ext"))

    n = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run()
        torch.set_num_threads(max(2, n))
        many = run()
    finally:
        torch.set_num_threads(n)
    for a, b in zip(one, many):
        assert torch.equal(a, b)


@requires_ext
@SETTINGS
@given(data=st.data(), m=st.integers(0, 5), L=st.integers(0, 4), d=st.integers(0, 9),
       dtype=st.sampled_from([torch.float32, torch.float64]), reduce=st.sampled_from(R.INTEGRATE_REDUCES))
def test_integrate_gradients_property(data, m, L, d, dtype, reduce):
    grads = _tensor(data.draw, (m, L, d), dtype)
    weights = _tensor(data.draw, (m,), dtype)
    delta = _tensor(data.draw, (L, d), dtype)
    out = ops.integrate_gradients(grads, weights, delta, reduce, backend="ext")
    ref = R.integrate_gradients(grads, weights, delta, reduce)
    scale = _mag(R.integrate_gradients(grads.abs(), weights.abs(), delta.abs(), reduce))
    assert_same(out, ref, rtol=1e-5, atol=1e-5 * scale if dtype == torch.float32 else 1e-12 * scale)


# --------------------------------------------------------------------------------------------
# attention_gradient_product
# --------------------------------------------------------------------------------------------
def _agp_check(attn, grad, weights, reduce):
    out = ops.attention_gradient_product(attn, grad, weights, reduce, backend="ext")
    ref = R.attention_gradient_product(attn, grad, weights, reduce)
    ref64 = R.attention_gradient_product(_up(attn), _up(grad), _up(weights), reduce)
    g_abs = None if grad is None else _up(grad).abs()
    w_abs = None if weights is None else _up(weights).abs()
    scale = _mag(R.attention_gradient_product(_up(attn).abs(), g_abs, w_abs, reduce))
    check_against_ref(out, ref, ref64, scale)


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("B,H,Q,K", [(1, 1, 1, 1), (5, 9, 1, 97), (3, 12, 7, 1025), (50, 3, 1, 33), (4, 2, 97, 5),
                                     (0, 3, 2, 4), (2, 0, 2, 4), (2, 3, 0, 4), (2, 3, 4, 0)])
@pytest.mark.parametrize("reduce", R.AGP_REDUCES)
def test_attention_gradient_product(device, dtype, B, H, Q, K, reduce):
    _need_ext(device)
    g = torch.Generator().manual_seed(B + 3 * H + 5 * Q + 7 * K)
    attn = torch.rand(B, H, Q, K, generator=g).to(device, dtype)
    grad = torch.randn(B, H, Q, K, generator=g).to(device, dtype)
    weights = torch.rand(B, generator=g).to(device) if B % 2 else None
    _agp_check(attn, grad, weights, reduce)


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_attention_gradient_product_noncontiguous(device, dtype):
    _need_ext(device)
    g = torch.Generator().manual_seed(5)
    attn = torch.rand(6, 4, 33, 33, generator=g).to(device, dtype)
    grad = torch.randn(6, 4, 33, 33, generator=g).to(device)  # fp32 grad with fp16 attn: cast
    for reduce in R.AGP_REDUCES:
        _agp_check(attn[:, :, -1:], grad[:, :, -1:], None, reduce)  # last query row, strided
        _agp_check(attn.transpose(2, 3), grad.transpose(2, 3), None, reduce)  # last dim strided: copied
        _agp_check(attn.permute(1, 0, 2, 3), grad.permute(1, 0, 2, 3), torch.rand(4, device=device), reduce)
    _agp_check(attn, None, None, "attention")


@requires_ext
@SETTINGS
@given(data=st.data(), B=st.integers(0, 4), H=st.integers(0, 3), Q=st.integers(0, 3), K=st.integers(0, 6),
       dtype=st.sampled_from([torch.float32, torch.float64]), reduce=st.sampled_from(R.AGP_REDUCES),
       weighted=st.booleans())
def test_attention_gradient_product_property(data, B, H, Q, K, dtype, reduce, weighted):
    attn = _tensor(data.draw, (B, H, Q, K), dtype)
    grad = _tensor(data.draw, (B, H, Q, K), dtype)
    weights = _tensor(data.draw, (B,), dtype) if weighted else None
    out = ops.attention_gradient_product(attn, grad, weights, reduce, backend="ext")
    ref = R.attention_gradient_product(attn, grad, weights, reduce)
    w_abs = None if weights is None else weights.abs()
    scale = _mag(R.attention_gradient_product(attn.abs(), grad.abs(), w_abs, reduce))
    assert_same(out, ref, rtol=1e-5, atol=1e-5 * scale if dtype == torch.float32 else 1e-12 * scale)


# --------------------------------------------------------------------------------------------
# posnorm
# --------------------------------------------------------------------------------------------
@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1,), (97,), (3, 1025), (2, 3, 33), (0,), (4, 0), (0, 5)])
@pytest.mark.parametrize("masked", [False, True])
def test_posnorm(device, dtype, shape, masked):
    _need_ext(device)
    g = torch.Generator().manual_seed(sum(shape) + masked)
    scores = torch.randn(shape, generator=g).to(device, dtype)
    mask = (torch.rand(shape, generator=g) > 0.3).to(device) if masked else None
    if masked and len(shape) > 1 and shape[0] > 1 and shape[-1] > 0:
        mask[0] = False  # an all-masked row
        scores[1, ..., 0] = float("nan")
    for mode in R.POSNORM_MODES:
        out = ops.posnorm(scores, mask, mode, backend="ext")
        if shape[-1] == 0:
            # No position at all: every backend (and the reference) returns the empty result.
            assert_same(out, R.posnorm(scores, mask, mode))
            assert_same(out, ops.posnorm(scores, mask, mode, backend="reference"))
            assert out.shape == scores.shape and out.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
            continue
        ref = R.posnorm(scores, mask, mode)
        check_against_ref(out, ref, ref, _mag(ref), ulps=8)


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
def test_posnorm_noncontiguous_broadcast_mask(device):
    _need_ext(device)
    scores = torch.randn(40, 6, device=device).t()  # [6, 40]
    mask = torch.arange(40, device=device) % 3 != 0  # [40], broadcast over rows
    for mode in R.POSNORM_MODES:
        assert_same(ops.posnorm(scores, mask, mode, backend="ext"), R.posnorm(scores, mask, mode), rtol=1e-6)
        assert_same(ops.posnorm(scores[:, ::2], None, mode, backend="ext"), R.posnorm(scores[:, ::2], None, mode),
                    rtol=1e-6)


_pn_values = st.one_of(
    st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from([0.0, 1.0, -1.0, 2.0]),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
)


@requires_ext
@SETTINGS
@given(data=st.data(), rows=st.integers(0, 4), L=st.integers(0, 9), mode=st.sampled_from(R.POSNORM_MODES),
       dtype=st.sampled_from([torch.float32, torch.float64]), masked=st.booleans(), constant=st.booleans())
def test_posnorm_property(data, rows, L, mode, dtype, masked, constant):
    scores = _tensor(data.draw, (rows, L), dtype, _pn_values)
    if constant and rows:
        scores[0] = 3.0  # a constant row
    mask = None
    if masked:
        mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=rows * L, max_size=rows * L)),
                            dtype=torch.bool).reshape(rows, L)
        if rows:
            mask[-1] = False  # an all-masked row
    out = ops.posnorm(scores, mask, mode, backend="ext")
    ref = ops.posnorm(scores, mask, mode, backend="reference")  # the reference itself raises for L = 0
    if L:
        assert_same(ref, R.posnorm(scores, mask, mode))
    assert_same(out, ref, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-30)


# --------------------------------------------------------------------------------------------
# hvp_l1_mean
# --------------------------------------------------------------------------------------------
def _hvp_check(x):
    """ext vs the reference on the same values, with the low-precision rule against fp64."""
    out = ops.hvp_l1_mean(x, backend="ext")
    ref = R.hvp_l1_mean(x)
    check_against_ref(out, ref, R.hvp_l1_mean(_up(x)), _mag(ref), ulps=8)
    return out


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,d", [(1, 1, 1), (10, 7, 576), (3, 97, 33), (2, 5, 1025), (4, 0, 8), (3, 4, 0), (1, 3, 7)])
def test_hvp_l1_mean(device, dtype, m, n, d):
    _need_ext(device)
    g = torch.Generator().manual_seed(m * 1000 + n * 10 + d)
    x = torch.randn(m, n, d, generator=g).to(device, dtype)
    out = _hvp_check(x)
    assert out.shape == (n,) and out.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    if d == 0:
        assert torch.equal(out, torch.zeros(n, dtype=out.dtype, device=device))


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_hvp_l1_mean_noncontiguous(device, dtype):
    _need_ext(device)
    base = torch.randn(13, 10, 66, device=device).to(dtype)  # [n, m, d]
    _hvp_check(base.transpose(0, 1))  # [m, n, d] with permuted outer strides: read in place
    _hvp_check(base.transpose(0, 1)[:, 2:11:3])  # strided tokens
    _hvp_check(base.transpose(0, 1)[..., ::2])  # last dim strided: copied once
    _hvp_check(base.permute(2, 0, 1)[:5])  # every stride permuted


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
def test_hvp_l1_mean_nonfinite(device):
    _need_ext(device)
    x = torch.randn(3, 4, 9, device=device)
    x[1, 0, 2] = float("nan")
    x[0, 1, 5] = -float("inf")
    x[2, 2, 0], x[2, 2, 1] = float("inf"), float("nan")
    out = ops.hvp_l1_mean(x, backend="ext")
    assert_same(out.isnan(), R.hvp_l1_mean(x).isnan())
    assert out[0].isnan() and out[1] == float("inf") and out[2].isnan() and torch.isfinite(out[3])


@requires_ext
def test_hvp_l1_mean_does_not_depend_on_thread_count():
    x = torch.randn(10, 40, 3000)
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.hvp_l1_mean(x, backend="ext")
        torch.set_num_threads(max(2, n))
        many = ops.hvp_l1_mean(x, backend="ext")
    finally:
        torch.set_num_threads(n)
    assert torch.equal(one, many)


def test_hvp_l1_mean_gradient_runs_on_the_reference():
    """The kernel has no autograd formula: under grad "auto" runs the reference, whose gradient
    is sign(x)/m; in float64 it passes gradcheck."""
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    with ops.recording() as used:
        y = ops.hvp_l1_mean(x)
    assert used == {"hvp_l1_mean": "reference"}
    (gx,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(gx, x.detach().sign() / 3)
    assert torch.autograd.gradcheck(lambda t: ops.hvp_l1_mean(t), (x,))


@requires_ext
@SETTINGS
@given(data=st.data(), m=st.integers(1, 4), n=st.integers(0, 4), d=st.integers(0, 19), dtype=st.sampled_from(FLOATS))
def test_hvp_l1_mean_property(data, m, n, d, dtype):
    x = _tensor(data.draw, (m, n, d), dtype)
    out = ops.hvp_l1_mean(x, backend="ext")
    ref = R.hvp_l1_mean(x)
    assert torch.equal(out.isnan(), ref.isnan())
    assert torch.equal(out.isinf(), ref.isinf())
    fin = torch.isfinite(ref)
    torch.testing.assert_close(out[fin], ref[fin], rtol=1e-5 if dtype != torch.float64 else 1e-12, atol=1e-30)


# --------------------------------------------------------------------------------------------
# opcheck: schema, fake kernel, autograd registration, AOT dispatch
# --------------------------------------------------------------------------------------------
def _samples(device):
    g = torch.Generator().manual_seed(0)

    def rn(*s):
        return torch.randn(*s, generator=g).to(device)

    yield "interpolate_path", (rn(5, 7), rn(5, 7), torch.rand(3, generator=g).to(device), None)
    yield "interpolate_path", (rn(5, 7).double(), rn(5, 7).double(), torch.rand(3).to(device),
                               torch.tensor([True, False, True, False, False], device=device))
    yield "adaptive_alphas", (rn(9).cumsum(0), 12, "abs", False)
    yield "adaptive_alphas", (rn(9).double(), 5, "idg_minmax", True)
    yield "emphasis_factors", (rn(6), torch.linspace(0, 1, 6, device=device), torch.full((6,), 0.2, device=device),
                               "fd", "abs", "l1")
    yield "emphasis_factors", (rn(6).double(), torch.linspace(0, 1, 6, device=device), torch.full((6,), 0.2, device=device),
                               "completeness", "abs", "none", rn(6))
    yield "integrate_gradients", (rn(4, 5, 7), torch.rand(4).to(device), rn(5, 7), "sum")
    yield "integrate_gradients", (rn(4, 5, 7).bfloat16(), torch.rand(4).to(device), rn(5, 7), "none")
    yield "attention_gradient_product", (torch.rand(3, 2, 4, 5).to(device), rn(3, 2, 4, 5), None, "product_of_means")
    yield "attention_gradient_product", (torch.rand(3, 2, 1, 5).to(device), None, torch.rand(3).to(device),
                                         "attention")
    yield "posnorm", (rn(3, 8), None, "minmax")
    yield "posnorm", (rn(3, 8).half(), torch.rand(3, 8).to(device) > 0.5, "abs_sum")
    yield "hvp_l1_mean", (rn(10, 4, 33),)
    yield "hvp_l1_mean", (rn(5, 3, 2).transpose(0, 2).bfloat16(),)


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    _need_ext(device)
    for name, args in _samples(device):
        torch.library.opcheck(getattr(torch.ops.aieg_fast, name).default, args)


@requires_ext
def test_direct_calls_mixing_meta_tensors_are_refused():
    """Called directly, an op whose other tensor is on the meta device went to the fake kernel,
    which returned uninitialised memory on the input's device with no error."""
    E = torch.ones(30, 40)
    meta = torch.rand(2, device="meta")
    with pytest.raises(RuntimeError, match=r"interpolate_path: every tensor should be on one device.*alphas on meta"):
        torch.ops.aieg_fast.interpolate_path(E, E, meta)
    with pytest.raises(RuntimeError, match=r"integrate_gradients: every tensor should be on one device.*weights on meta"):
        torch.ops.aieg_fast.integrate_gradients(torch.randn(2, 3, 4), meta, torch.randn(3, 4), "sum")
    with pytest.raises(RuntimeError, match=r"posnorm: every tensor should be on one device"):
        torch.ops.aieg_fast.posnorm(torch.randn(2, 5), torch.ones(2, 5, dtype=torch.bool, device="meta"), "minmax")
    out = torch.ops.aieg_fast.interpolate_path(E.to("meta"), E.to("meta"), meta)  # all on meta: shapes only
    assert out.device.type == "meta" and out.shape == (2, 30, 40)


@requires_ext
@pytest.mark.parametrize("name", ["integrate_gradients", "hvp_l1_mean"])
def test_backward_through_a_direct_call_raises(name):
    """The kernels have no derivative: a backward through a direct call of the operator raises,
    naming the wrapper (it left .grad None, with only a deprecation warning of PyTorch); the
    wrapper differentiates through the reference."""
    x = torch.randn(2, 3, 4, requires_grad=True)
    args = (x, torch.rand(2), torch.randn(3, 4), "sum") if name == "integrate_gradients" else (x,)
    out = getattr(torch.ops.aieg_fast, name)(*args)
    with pytest.raises(RuntimeError, match=rf"aieg_fast::{name} has no derivative.*aieg_fast\.ops\.{name}"):
        out.sum().backward()
    getattr(ops, name)(*args).sum().backward()
    assert x.grad is not None and bool(x.grad.abs().sum() > 0)


@requires_ext
@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    """The fake kernels let torch.compile trace the ops without graph breaks."""
    _need_ext(device)

    def f(grads, weights, delta, attn, grad, scores):
        s = torch.ops.aieg_fast.integrate_gradients(grads, weights, delta, "sum")
        a = torch.ops.aieg_fast.attention_gradient_product(attn, grad, weights, "product_of_means")
        return torch.ops.aieg_fast.posnorm(s + a.sum(0) + scores, None, "minmax")

    args = (torch.randn(3, 4, 5, device=device), torch.rand(3, device=device), torch.randn(4, 5, device=device),
            torch.rand(3, 2, 1, 4, device=device), torch.randn(3, 2, 1, 4, device=device), torch.randn(4, device=device))
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(*args), f(*args))


@requires_ext
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_kernels_run_on_the_current_stream():
    """Inputs written on a side stream after a long spin must be seen by the kernel on that stream."""
    _need_ext("cuda")
    side = torch.cuda.Stream()
    grads = torch.zeros(8, 64, 256, device="cuda")
    weights = torch.ones(8, device="cuda")
    delta = torch.ones(64, 256, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keep the side stream busy
        grads.fill_(1.0)
        out = ops.integrate_gradients(grads, weights, delta, backend="ext")
        pn = ops.posnorm(out.unsqueeze(0), None, "abs_sum", backend="ext")
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full((64,), 8.0 * 256, device="cuda"))
    torch.testing.assert_close(pn, torch.full((1, 64), 1 / 64, device="cuda"))


# --------------------------------------------------------------------------------------------
# Backend selection and argument errors
# --------------------------------------------------------------------------------------------
def _all_calls():
    """One valid call per op: (name, args)."""
    a, w = R.uniform_alphas(6)
    yield "interpolate_path", (torch.randn(4, 3), torch.zeros(4, 3), a, torch.tensor([1, 0, 0, 1]))
    yield "adaptive_alphas", (torch.randn(7).cumsum(0), 9, "idg_minmax", True)
    yield "emphasis_factors", (torch.randn(6).cumsum(0), a, w, "fd", "relu", "l1")
    yield "emphasis_factors", (torch.randn(6).cumsum(0), a, w, "completeness", "abs", "none", torch.randn(6))
    yield "integrate_gradients", (torch.randn(6, 4, 3), w, torch.randn(4, 3), "none")
    yield "attention_gradient_product", (torch.rand(2, 3, 1, 5), torch.randn(2, 3, 1, 5), None, "mean_of_products")
    yield "posnorm", (torch.randn(2, 5), torch.tensor([True, True, False, True, True]), "relu_max")
    yield "hvp_l1_mean", (torch.randn(3, 4, 6),)


@pytest.mark.parametrize("name,args", list(_all_calls()), ids=[c[0] for c in _all_calls()])
def test_reference_backend_equals_reference_module(name, args):
    out = getattr(ops, name)(*args, backend="reference")
    ref = getattr(R, name)(*args)
    for o, r in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
        assert torch.equal(o, r)


@pytest.mark.parametrize("name,args", list(_all_calls()), ids=[c[0] for c in _all_calls()])
def test_ext_backend_without_extension_raises(monkeypatch, name, args):
    monkeypatch.setattr(ops, "HAS_EXT", False)
    monkeypatch.setattr(ops, "EXT_ERROR", "ImportError: no _C here")
    with pytest.raises(RuntimeError, match=r"aieg_fast\._C is not available \(ImportError: no _C here\)"):
        getattr(ops, name)(*args, backend="ext")
    assert ops.resolve_backend("auto", args[0]) == "reference"
    out = getattr(ops, name)(*args)  # auto falls back to the reference
    ref = getattr(R, name)(*args)
    for o, r in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
        assert torch.equal(o, r)


def test_resolve_backend():
    x = torch.zeros(3)
    assert ops.resolve_backend("reference", x) == "reference"
    assert ops.resolve_backend("auto", x) == ("ext" if aieg_fast.HAS_EXT else "reference")
    assert ops.resolve_backend("auto", x.requires_grad_()) == "reference"  # kernels have no autograd
    with torch.no_grad():
        assert ops.resolve_backend("auto", x) == ("ext" if aieg_fast.HAS_EXT else "reference")
    assert ops.resolve_backend("auto", torch.zeros(3, device="meta")) == "reference"
    with pytest.raises(ValueError, match=r"backend must be one of \['auto', 'ext', 'reference'\], got 'gpu'"):
        ops.resolve_backend("gpu", x)
    if aieg_fast.HAS_EXT:
        with pytest.raises(RuntimeError, match="cpu and cuda tensors only, got device type 'meta'"):
            ops.resolve_backend("ext", torch.zeros(3, device="meta"))
        if not aieg_fast.WITH_CUDA:
            assert "built without CUDA" in ops.unavailable_reason("cuda", None)


@requires_ext
def test_forward_mode_ad_runs_the_reference():
    """A forward-mode tangent (torch.func.jvp, a forward_ad dual) does not set requires_grad: "auto"
    ran the kernel and the tangent came back 0 (or none); it picks the reference now, "ext" refuses."""
    import torch.autograd.forward_ad as fwAD

    h = torch.tensor([[[1.0, -2.0], [0.5, 0.0]]], dtype=torch.float64)
    t = torch.ones_like(h)
    with ops.recording() as used:
        _, tan = torch.func.jvp(lambda x: ops.hvp_l1_mean(x), (h,), (t,))
    _, want = torch.func.jvp(lambda x: R.hvp_l1_mean(x), (h,), (t,))
    assert used == {"hvp_l1_mean": "reference"} and torch.equal(tan, want) and bool(want.abs().sum() > 0)
    x = torch.randn(2, 5, dtype=torch.float64)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        assert ops.resolve_backend("auto", dual) == "reference"
        assert fwAD.unpack_dual(ops.posnorm(dual, mode="none")).tangent is not None
        with pytest.raises(RuntimeError, match="an input carries a forward-mode tangent"):
            ops.posnorm(dual, mode="none", backend="ext")


_BAD = [
    ("integrate_gradients", (torch.randn(2, 3, 4), torch.rand(2), torch.randn(3, 4), "mean"), ValueError,
     r"reduce must be one of \['sum', 'none'\], got 'mean'"),
    ("integrate_gradients", (torch.randn(3, 4), torch.rand(2), torch.randn(3, 4)), ValueError,
     r"grads should have shape \[m, L, d\], got shape \[3, 4\]"),
    ("integrate_gradients", (torch.randn(2, 3, 4), torch.rand(5), torch.randn(3, 4)), ValueError,
     r"weights should have shape \[2\] \(m of grads\), got shape \[5\]"),
    ("integrate_gradients", (torch.randn(2, 3, 4), torch.rand(2), torch.randn(2, 4)), ValueError,
     r"delta should have shape \[3, 4\]"),
    ("integrate_gradients", (torch.ones(2, 3, 4, dtype=torch.int64), torch.rand(2), torch.randn(3, 4)), TypeError,
     r"grads should be a float32, float64, float16 or bfloat16 tensor, got dtype torch.int64"),
    ("attention_gradient_product", (torch.rand(2, 3, 1, 5), None, None, "product_of_means"), ValueError,
     r"grad is required for reduce='product_of_means', got None"),
    ("attention_gradient_product", (torch.rand(2, 3, 1, 5), torch.rand(2, 3, 2, 5)), ValueError,
     r"grad should have shape \[2, 3, 1, 5\] \(like attn\), got shape \[2, 3, 2, 5\]"),
    ("attention_gradient_product", (torch.rand(2, 3, 1, 5), None, torch.rand(3), "attention"), ValueError,
     r"weights should have shape \[2\] \(B of attn\), got shape \[3\]"),
    ("posnorm", (torch.randn(2, 5), None, "max"), ValueError,
     r"mode must be one of \['minmax', 'relu_max', 'abs_sum', 'none'\], got 'max'"),
    ("posnorm", (torch.randn(2, 5), torch.ones(3, 5, dtype=torch.bool)), ValueError,
     r"valid_mask should have shape broadcastable to \[2, 5\] \(scores\), got shape \[3, 5\]"),
    ("posnorm", ("scores",), TypeError, r"scores should be a torch.Tensor, got str"),
    ("emphasis_factors", (torch.randn(4), torch.rand(3), torch.rand(4)), ValueError,
     r"path_logits, alphas and widths must have the same length, got 4, 3, 4"),
    ("emphasis_factors", (torch.randn(4), torch.rand(4), torch.rand(4), "fd", "neg"), ValueError,
     r"sign must be one of \['abs', 'signed', 'relu', 'minmax'\], got 'neg'"),
    ("emphasis_factors", (torch.randn(4), torch.rand(4), torch.rand(4), "completeness", "abs", "none"), ValueError,
     r"slopes \(the autograd slopes G_m·Δ\) is required for mode='completeness', got None"),
    ("emphasis_factors", (torch.randn(4), torch.rand(4), torch.rand(4), "fd", "abs", "l1", torch.randn(4)), ValueError,
     r"slopes is only read by mode='completeness', got a tensor with mode='fd'"),
    ("emphasis_factors", (torch.randn(4), torch.rand(4), torch.rand(4), "completeness", "relu", "none", torch.randn(4)),
     ValueError, r"sign must be 'abs' for mode='completeness' \(its weights are never negative\), got 'relu'"),
    ("emphasis_factors", (torch.randn(4), torch.rand(4), torch.rand(4), "completeness", "abs", "l1", torch.randn(4)),
     ValueError, r"norm must be 'none' for mode='completeness' \(a normalisation would undo its completeness\), got 'l1'"),
    ("emphasis_factors", (torch.randn(4), torch.rand(4), torch.rand(4), "completeness", "abs", "none", torch.randn(3)),
     ValueError, r"path_logits, alphas, widths and slopes must have the same length, got 4, 4, 4, 3"),
    ("emphasis_factors", (torch.randn(4), torch.rand(4), torch.rand(4), "completeness", "abs", "none", "s"), TypeError,
     r"slopes should be a torch.Tensor, got str"),
    ("adaptive_alphas", (torch.randn(4), 1), ValueError, r"n_steps must be in \[2, 10000000\], got 1"),
    # a huge grid exhausted memory (the reference built Python lists until the process was killed)
    ("adaptive_alphas", (torch.randn(4), 2**40), ValueError, r"n_steps must be in \[2, 10000000\], got 1099511627776"),
    # any truthy value was read as True: the official code's quirky grid without a word
    ("adaptive_alphas", (torch.randn(4), 8, "idg_minmax", "no"), TypeError, r"idg_compat_quirk should be True or False, got 'no'"),
    ("adaptive_alphas", (torch.randn(4, device="meta"), 8), ValueError,
     r"pilot_logits is on the meta device, which holds no values; adaptive_alphas depends on them"),
    ("emphasis_factors", (torch.randn(4, device="meta"), torch.rand(4), torch.rand(4)), ValueError,
     r"path_logits is on the meta device, which holds no values; emphasis_factors depends on them"),
    ("adaptive_alphas", (torch.randn(4), 5.0), TypeError, r"n_steps should be an int, got float 5.0$"),  # the value too
    ("adaptive_alphas", (torch.randn(4), "8"), TypeError, r"n_steps should be an int, got str '8'$"),
    ("adaptive_alphas", (torch.randn(4), 5, "rel"), ValueError,
     r"alloc must be one of \['abs', 'idg_minmax'\], got 'rel'"),
    ("interpolate_path", (torch.randn(4, 3), torch.randn(4, 2), torch.rand(3)), ValueError,
     r"baseline_embeds should have shape \[4, 3\] \(like input_embeds\), got shape \[4, 2\]"),
    ("interpolate_path", (torch.randn(4, 3), torch.randn(4, 3), torch.rand(3), torch.ones(3, dtype=torch.bool)), ValueError,
     r"fixed_mask should have shape \[4\], got shape \[3\]"),
    ("interpolate_path", (torch.randn(4, 3), torch.randn(4, 3), torch.rand(3), torch.ones(4, 1, dtype=torch.bool)), ValueError,
     r"fixed_mask should have shape \[4\], got shape \[4, 1\]"),
    ("interpolate_path", (torch.randn(4, 3), torch.randn(4, 3), torch.rand(3), torch.tensor([0.5, 0.0, 0.0, 0.0])), TypeError,
     r"fixed_mask should be a bool \(or 0/1 integer\) tensor, got dtype torch.float32"),
    ("emphasis_factors", (torch.randn(2, 3), torch.rand(6), torch.rand(6)), ValueError,
     r"path_logits should have shape \[M\], got shape \[2, 3\]"),
    # a float mask: 0.5 or NaN was read as attributable (interpolate_path refused it already)
    ("posnorm", (torch.randn(4), torch.tensor([0.0, 0.5, float("nan"), 0.1])), TypeError,
     r"valid_mask should be a bool \(or 0/1 integer\) tensor, got dtype torch.float32"),
    # a meta-device argument beside CPU tensors: "Cannot copy out of meta tensor; no data!", naming nothing
    ("interpolate_path", (torch.randn(4, 3), torch.randn(4, 3, device="meta"), torch.rand(3)), ValueError,
     r"baseline_embeds is on the meta device, which holds no values; interpolate_path depends on them"),
    ("integrate_gradients", (torch.randn(2, 3, 4), torch.rand(2, device="meta"), torch.randn(3, 4)), ValueError,
     r"weights is on the meta device, which holds no values; integrate_gradients depends on them"),
    ("attention_gradient_product", (torch.rand(2, 3, 1, 5), torch.rand(2, 3, 1, 5, device="meta")), ValueError,
     r"grad is on the meta device, which holds no values; attention_gradient_product depends on them"),
    ("posnorm", (torch.randn(4), torch.ones(4, dtype=torch.bool, device="meta")), ValueError,
     r"valid_mask is on the meta device, which holds no values; posnorm depends on them"),
    # the reference failed in Tensor.item(), naming nothing
    ("posnorm", (torch.randn(4, device="meta"),), ValueError,
     r"scores is on the meta device, which holds no values; posnorm depends on them"),
    ("hvp_l1_mean", (torch.randn(4, 3),), ValueError, r"hvps should have shape \[m, n, d\], got shape \[4, 3\]"),
    ("hvp_l1_mean", (torch.randn(0, 3, 2),), ValueError,
     r"hvps should hold at least one probe \(m >= 1\), got shape \[0, 3, 2\]"),
    ("hvp_l1_mean", (torch.ones(2, 3, 4, dtype=torch.int32),), TypeError,
     r"hvps should be a float32, float64, float16 or bfloat16 tensor, got dtype torch.int32"),
]


@pytest.mark.parametrize("backend", ["reference", pytest.param("ext", marks=requires_ext)])
@pytest.mark.parametrize("name,args,exc,msg", _BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(_BAD)])
def test_argument_errors_identical_for_both_backends(backend, name, args, exc, msg):
    with pytest.raises(exc, match=msg):
        getattr(ops, name)(*args, backend=backend)


@requires_ext
def test_compiled_op_checks_arguments_too():
    with pytest.raises(ValueError, match=r"reduce must be one of \['sum', 'none'\], got 'mean'"):
        torch.ops.aieg_fast.integrate_gradients(torch.randn(2, 3, 4), torch.rand(2), torch.randn(3, 4), "mean")
    with pytest.raises(ValueError, match=r"weights should have shape \[2\]"):
        torch.ops.aieg_fast.integrate_gradients(torch.randn(2, 3, 4), torch.rand(3), torch.randn(3, 4))
    ef = torch.ops.aieg_fast.emphasis_factors
    x = torch.rand(4)
    with pytest.raises(ValueError, match=r"slopes \(the autograd slopes G_m·Δ\) is required for mode='completeness', got None"):
        ef(x, x, x, "completeness", "abs", "none")
    with pytest.raises(ValueError, match=r"slopes is only read by mode='completeness', got a tensor with mode='autograd'"):
        ef(x, x, x, "autograd", "abs", "l1", x)
    with pytest.raises(ValueError, match=r"sign must be 'abs' for mode='completeness' \(its weights are never negative\), got 'minmax'"):
        ef(x, x, x, "completeness", "minmax", "none", x)
    with pytest.raises(ValueError, match=r"norm must be 'none' for mode='completeness' \(a normalisation would undo its completeness\), got 'l1'"):
        ef(x, x, x, "completeness", "abs", "l1", x)
    with pytest.raises(ValueError, match=r"path_logits, alphas, widths and slopes must have the same length, got 4, 4, 4, 5"):
        ef(x, x, x, "completeness", "abs", "none", torch.rand(5))
    with pytest.raises(TypeError, match="attn should be a float32"):
        torch.ops.aieg_fast.attention_gradient_product(torch.ones(1, 1, 1, 1, dtype=torch.int32), None, None,
                                                       "attention")
    with pytest.raises(ValueError, match=r"hvps should hold at least one probe \(m >= 1\)"):
        torch.ops.aieg_fast.hvp_l1_mean(torch.randn(0, 3, 2))


def test_build_info_never_raises():
    info = aieg_fast.build_info()
    assert info["has_ext"] == aieg_fast.HAS_EXT
    if aieg_fast.HAS_EXT:
        assert info["ext_error"] is None
        assert set(info["cpu_ops"]) == {"interpolate_path", "adaptive_alphas", "emphasis_factors",
                                        "integrate_gradients", "attention_gradient_product", "posnorm", "hvp_l1_mean"}
        assert isinstance(info["with_cuda"], bool)
    else:
        assert info["ext_error"]


def test_ext_refuses_inputs_that_require_grad():
    """The kernels have no autograd formula: backend='ext' refuses rather than lose the gradient;
    'auto' runs the reference, whose gradient is right."""
    if ops.unavailable_reason("cpu", "interpolate_path") is not None:
        pytest.skip("no CPU extension")
    e = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"backend='ext' for interpolate_path: an input requires grad"):
        ops.interpolate_path(e, torch.zeros(3, 4), torch.rand(2), backend="ext")
    ops.interpolate_path(e, torch.zeros(3, 4), torch.tensor([0.5, 1.0]), backend="auto").sum().backward()
    assert e.grad is not None and torch.allclose(e.grad, torch.full((3, 4), 1.5))
    with torch.no_grad():  # no gradient asked: the kernel runs
        ops.interpolate_path(e, torch.zeros(3, 4), torch.rand(2), backend="ext")


def test_quadrature_checks_its_arguments():
    """n_steps < 2, a float or a bool gave raw ZeroDivisionError / IndexError / TypeError; an
    integer dtype returned weights [0, 0, 0] (the docstring promises Σ weights = 1)."""
    a, w = aieg_fast.quadrature("trapezoid", 3, torch.float32)
    assert a.dtype == torch.float32 and float(w.sum()) == pytest.approx(1.0)
    for bad in (1, 0, -1, 2.5, "5", None, True):
        with pytest.raises(ValueError, match=r"n_steps must be an int >= 2, got"):
            aieg_fast.quadrature("trapezoid", bad)
    for bad in (torch.int64, "float32"):
        with pytest.raises(TypeError, match=r"dtype must be a floating-point torch.dtype"):
            aieg_fast.quadrature("trapezoid", 3, bad)
    with pytest.raises(ValueError, match=r"rule must be one of \['trapezoid'"):  # named as help() shows it
        aieg_fast.quadrature("simpson", 3)


def test_captums_riemann_trapezoid_is_pointed_to_trapezoid(tiny_gpt2):
    """A Captum user's integration="riemann_trapezoid" got a bare list of rules; the refusal says
    it is "trapezoid" here, before any work."""
    with pytest.raises(ValueError, match=r"Captum's 'riemann_trapezoid' .* is 'trapezoid' here"):
        tiny_gpt2.attribute("the movie is good", method="integrated_gradients", integration="riemann_trapezoid")


@pytest.mark.parametrize("backend", ["reference", pytest.param("ext", marks=requires_ext)])
def test_posnorm_finite_scores_whose_range_or_sum_overflows(backend):
    """Finite scores near float32's limit gave NaN (a range of inf: inf/inf) or zeros (a sum of
    inf), while the reference promises a defined result for every input."""
    x = torch.tensor([[-3e38, 3e38, 0.0, 1.0]])
    torch.testing.assert_close(ops.posnorm(x, backend=backend), torch.tensor([[0.0, 1.0, 0.5, 0.5]]))
    big = ops.posnorm(torch.tensor([[3e38, 3e38, 3e38, 1.0]]), mode="abs_sum", backend=backend)
    torch.testing.assert_close(big[0, :3], torch.full((3,), 1 / 3))
    assert 0 < float(big[0, 3]) < 1e-38
    assert torch.equal(ops.posnorm(x, backend=backend), R.posnorm(x))  # the kernel follows its spec
