"""aieg_fast.verify.spearman / compare_scores: the agreement numbers `aieg-fast verify` and the
benchmarks print must be Spearman's rho (ties averaged), with the constant cases defined."""
import pytest
import torch
from scipy.stats import spearmanr

from aieg_fast.eval.run_checks import check_methods as evaluate_methods
from aieg_fast.verify import compare_scores, spearman, within_tolerance


def test_spearman_matches_scipy_with_ties_and_flattens():
    a = torch.tensor([[0.1, 0.5], [0.5, -2.0]])
    b = torch.tensor([3.0, 1.0, 2.0, 2.0])
    assert abs(spearman(a, b) - spearmanr(a.flatten().numpy(), b.numpy()).statistic) < 1e-12
    assert spearman(b, -b) == -1.0 and spearman(b, 2 * b + 1) == 1.0


def test_spearman_constant_and_tiny_inputs():
    z = torch.zeros(5)
    assert spearman(z, z) == 1.0  # equal constants agree
    assert spearman(z, torch.arange(5.0)) == 0.0  # one side constant: no agreement
    assert spearman(torch.tensor([1.0]), torch.tensor([7.0])) == 1.0


def test_compare_scores_reports_abs_rel_and_rank_agreement():
    ref = torch.tensor([1.0, -2.0, 4.0])
    mad, rel, rho = compare_scores(ref, ref + torch.tensor([0.0, 0.5, 0.0]))
    assert (mad, rel, rho) == (0.5, 0.125, 1.0)


def test_verify_marks_methods_without_kernels_and_checks_first(tiny_gpt2_dir, monkeypatch):
    import io

    from aieg_fast import ops, verify as V

    if ops.unavailable_reason("cpu", None) is not None:
        pytest.skip("no CPU extension")
    buf = io.StringIO()
    assert V.verify(str(tiny_gpt2_dir), methods="saliency, integrated_gradients", n_steps=4, texts=["a good movie"], file=buf) == 0
    rows = {line.split()[0]: line for line in buf.getvalue().splitlines()[2:]}
    assert rows["saliency"].endswith("n/a (no kernel op: both runs are the reference)")
    assert rows["integrated_gradients"].endswith("ok")

    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(V, "load_model", refuse)
    for kw, match in ((dict(methods="aieg,nosuch"), "method must be one of"), (dict(n_steps=1), "n_steps must be an int >= 2"),
                      (dict(texts=[""]), "text is empty")):
        with pytest.raises(ValueError, match=match):
            V.verify(str(tiny_gpt2_dir), **{"n_steps": 4, **kw})
    with pytest.raises(ValueError, match="texts is empty: give at least one text, or leave texts out for"):  # was: the two default sentences, silently
        V.verify(str(tiny_gpt2_dir), n_steps=4, texts=[])


def test_verify_lists_methods_a_family_cannot_run_as_na(monkeypatch):
    """On a model without attention (Mamba) the methods that need it are rows of their own,
    n/a, and the others are still checked (verify stopped at the first with an error)."""
    import io

    import aieg_fast
    from aieg_fast import ops, verify as V
    from builders import family_specs

    if ops.unavailable_reason("cpu", None) is not None:
        pytest.skip("no CPU extension")
    spec = family_specs().get("mamba")
    if spec is None:
        pytest.skip("transformers has no Mamba here")
    ex = aieg_fast.load_model(*spec.build())
    monkeypatch.setattr(V, "load_model", lambda model=None, **kw: ex)
    buf = io.StringIO()
    assert V.verify("mamba", methods="attention,integrated_gradients,aieg,heta", n_steps=4, texts=["a good movie"], file=buf) == 0
    rows = {line.split()[0]: line for line in buf.getvalue().splitlines()[2:]}
    assert "n/a (needs attention layers; MambaForCausalLM has none)" in rows["attention"]
    assert rows["integrated_gradients"].endswith("ok")
    assert rows["aieg:attn_layers=none"].endswith("ok")  # AIEG's attention-free reading, as on Mamba it runs (was n/a)
    # the label is a spec evaluate --methods takes: the comma of the value quoted (it split the list there)
    label = 'heta:components="curvature,information"'
    assert rows[label].endswith("ok") and evaluate_methods(label, label)[1][label] == ("heta", {"components": "curvature,information"})


def test_verify_raises_a_check_adapter_refusal_not_na(tiny_gpt2):
    """A method whose defaults the model refuses in check_adapter (not for want of attention) was
    listed as "n/a (needs attention layers; GPT2LMHeadModel has none)" with exit code 0:
    verify took every ValueError of check_model for the attention refusal."""
    import io
    from dataclasses import dataclass

    import aieg_fast
    from aieg_fast import verify as V

    if not V.HAS_EXT:
        pytest.skip("no extension")

    @dataclass(frozen=True)
    class DeepOptions(aieg_fast.Options):
        depth: int = 4

    class Deep(aieg_fast.Method):
        name, doc, Options = "deep_test_method", "refuses models with fewer than 4 layers", DeepOptions

        def check_adapter(self, opts, adapter):
            if opts.depth > adapter.n_layers:
                raise ValueError(f"depth must be at most the model's {adapter.n_layers} layers, got {opts.depth}")

        def run(self, ctx, o):
            raise AssertionError("not reached")

    aieg_fast.register(Deep)
    try:
        buf = io.StringIO()
        with pytest.raises(ValueError, match="depth must be at most the model's 2 layers, got 4"):
            V.verify(tiny_gpt2, methods="deep_test_method", n_steps=4, texts=["a good movie"], file=buf)
        assert "n/a" not in buf.getvalue()
    finally:
        aieg_fast.unregister("deep_test_method")


def test_within_tolerance_is_relative_to_the_largest_score():
    """The tolerance scales with the scores: a 0.2 % error on scores of 1e-3 is a mismatch
    (verify's former absolute 1e-4 let it through), NaN must sit at the same places."""

    ref = torch.tensor([6e-3, -2e-3, 1e-3])
    assert within_tolerance(ref, ref * (1 + 1e-6), 1e-5)
    assert not within_tolerance(ref, ref * 1.002, 1e-5)
    assert torch.allclose(ref, ref * 1.002, atol=1e-4, rtol=1e-3)  # what verify used to accept
    assert within_tolerance(ref * 1e6, ref * 1e6 + 1e-3, 1e-5)  # the same relative size on large scores
    nan = torch.tensor([float("nan"), 1.0])
    assert within_tolerance(nan, nan.clone(), 1e-5) and not within_tolerance(nan, torch.tensor([0.0, 1.0]), 1e-5)
    assert within_tolerance(torch.zeros(3), torch.zeros(3), 1e-5) and not within_tolerance(torch.zeros(3), torch.full((3,), 1e-12), 1e-5)


@pytest.mark.parametrize("op, wrong, methods", [
    ("integrate_gradients", "scaled", "integrated_gradients"),  # 0.1 % too large: within the former rtol
    ("attention_gradient_product", "unweighted", "aieg"),  # only AIEG's path-attention reading (v3) reaches the weights
    # modes that only KERNEL_READINGS reach (verify passed both wrong kernels before)
    ("attention_gradient_product", "mean_of_products_scaled", "scaled_attention"),
    ("posnorm", "abs_sum_scaled", "aieg"),
])
def test_verify_catches_a_slightly_wrong_kernel(tiny_gpt2_dir, op, wrong, methods):
    """A CPU kernel replaced by a wrong one (through torch.library) must make verify fail; both
    wrong kernels passed before (absolute tolerance, AIEG with its default reading only)."""
    import io

    from aieg_fast import ops, reference as R, verify as V

    if ops.unavailable_reason("cpu", None) is not None:
        pytest.skip("no CPU extension")
    def agp(a, g=None, w=None, reduce="product_of_means"):
        return (1.001 if reduce == "mean_of_products" else 1.0) * R.attention_gradient_product(a, g, w, reduce)

    def posnorm(s, m=None, mode="minmax"):
        return (1.001 if mode == "abs_sum" else 1.0) * R.posnorm(s, m, mode)

    kernels = {"scaled": lambda g, w, d, reduce="sum": 1.001 * R.integrate_gradients(g, w, d, reduce),
               "unweighted": lambda a, g=None, w=None, reduce="product_of_means": R.attention_gradient_product(a, g, None, reduce),
               "mean_of_products_scaled": agp, "abs_sum_scaled": posnorm}
    buf = io.StringIO()
    assert V.verify(str(tiny_gpt2_dir), methods=methods, n_steps=6, file=buf) == 0  # the real kernel agrees
    lib = torch.library.Library("aieg_fast", "IMPL")
    try:
        lib.impl(op, kernels[wrong], "CPU", allow_override=True)
        assert V.verify(str(tiny_gpt2_dir), methods=methods, n_steps=6, file=buf) == 1, buf.getvalue()
    finally:
        lib._destroy()
    assert "MISMATCH" in buf.getvalue()


def test_infinities_compare_as_values_at_their_places():
    """±inf at the same places with the same sign agree (identical tensors with an inf were a
    MISMATCH, and compare_scores gave NaN); at other places or of the other sign they do not."""
    inf = float("inf")
    a = torch.tensor([1.0, inf, -inf, 2.0])
    assert within_tolerance(a, a.clone(), 1e-5) and compare_scores(a, a.clone()) == pytest.approx((0.0, 0.0, 1.0))
    assert not within_tolerance(a, torch.tensor([1.0, -inf, -inf, 2.0]), 1e-5)
    assert not within_tolerance(a, torch.tensor([1.0, 3.0, -inf, 2.0]), 1e-5)
    assert compare_scores(a, torch.tensor([1.0, 3.0, -inf, 2.0])) == (float("inf"), float("inf"), 0.0)


def test_compare_scores_with_nan():
    """NaN at other places is an infinite difference (the table printed 0 and Spearman 1 beside
    MISMATCH); NaN at the same places is left out of the numbers."""
    nan = float("nan")
    assert compare_scores(torch.tensor([nan, 1.0, 2.0]), torch.tensor([1.0, 1.0, 2.0])) == (float("inf"), float("inf"), 0.0)
    assert compare_scores(torch.tensor([nan, 1.0, 2.0]), torch.tensor([nan, 1.5, 2.0])) == pytest.approx((0.5, 0.25, 1.0))


def test_verify_takes_a_loaded_model_and_its_dtype(tiny_llama, capsys):
    """An Explainer is verified as it is (it was refused as "not a hub id"); on a CPU a
    half-precision model gets the float32 tolerance (1e-2 let a kernel 0.5 % off pass: the
    kernels accumulate in float32 and the CPU repeats its numbers); load arguments beside it
    are refused."""
    import io

    from aieg_fast import load_model, ops, reference as R, verify as V

    if ops.unavailable_reason("cpu", None) is not None:
        pytest.skip("no CPU extension")
    half = load_model(tiny_llama.model.to(torch.bfloat16), tiny_llama.tokenizer)
    buf = io.StringIO()
    lib = torch.library.Library("aieg_fast", "IMPL")
    try:
        assert V.verify(half, methods="integrated_gradients", n_steps=4, texts=["a good movie"], file=buf) == 0
        lib.impl("integrate_gradients", lambda g, w, d, reduce="sum": 1.005 * R.integrate_gradients(g, w, d, reduce),
                 "CPU", allow_override=True)
        assert V.verify(half, methods="integrated_gradients", n_steps=4, texts=["a good movie"], file=io.StringIO()) == 1
    finally:
        lib._destroy()
        tiny_llama.model.to(torch.float32)
    assert "(bfloat16 on cpu)" in buf.getvalue().splitlines()[0] and "tolerance: 1e-05 of max |score|" in buf.getvalue().splitlines()[0]
    with pytest.raises(ValueError, match="not with an Explainer"):
        V.verify(tiny_llama, methods="saliency", dtype="bfloat16")


def test_verify_writes_no_attribution_cautions(tiny_gpt2_dir):
    """verify compares two backends: IG's completeness caution at few steps (one per row and
    text, on stderr) is not its subject and is not written."""
    import io
    import warnings

    from aieg_fast import AttributionWarning, ops, verify as V

    if ops.unavailable_reason("cpu", None) is not None:
        pytest.skip("no CPU extension")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert V.verify(str(tiny_gpt2_dir), methods="integrated_gradients", n_steps=2, texts=["a good movie"], file=io.StringIO()) == 0
    assert not [w for w in seen if issubclass(w.category, AttributionWarning)]
