"""A user's own method registered with ``aieg_fast.register`` (README, "Adding a method"): one
that makes no forward of its own still names the token it explains, a malformed output is
refused naming the method, and a malformed class is refused at registration."""
from __future__ import annotations

import contextlib
import math
import re
import dataclasses
from unittest import mock

import pytest
import torch

import aieg_fast as A


@contextlib.contextmanager
def registered(cls):
    """Register ``cls`` for the test and take it out afterwards (the contract suite runs over
    every registered method)."""
    A.register(cls)
    try:
        yield cls.name
    finally:
        if cls.name in A.METHODS:
            A.unregister(cls.name)


def _method(name, run):
    return type(f"M_{name}", (A.Method,), {"name": name, "gradients": False, "run": lambda self, ctx, o: run(ctx)})


def _ones(ctx):
    L = ctx.batch.ids.shape[1]
    return A.MethodOutput([torch.arange(L, dtype=torch.float32).masked_fill(ctx.batch.fixed[b], 0) for b in range(ctx.batch.B)])


def test_method_without_forward_explains_the_predicted_token(tiny_gpt2):
    """The target was left at id -1 (no forward filled it) and decoding it failed after the work."""
    with registered(_method("user_ones", _ones)) as name:
        a = tiny_gpt2.attribute("the movie is good", method=name)
        pred = tiny_gpt2.attribute("the movie is good", method="saliency")
        assert a.target["id"] == pred.target["id"] >= 0 and a.target["text"] == pred.target["text"]
        assert a.target_prob == pytest.approx(pred.target_prob)
        both = tiny_gpt2.attribute(["the movie is good", "bad"], method=name)
        assert [r.target["id"] for r in both][0] == pred.target["id"]


@pytest.mark.parametrize("run, err, match", [
    (lambda ctx: [torch.zeros(ctx.batch.ids.shape[1])], TypeError, r"method 'user_bad' returned list; a method returns a MethodOutput"),
    (lambda ctx: A.MethodOutput([[0.0] * ctx.batch.ids.shape[1]]), TypeError, r"scores\[0\] is list; each score entry must be a 1-D"),
    (lambda ctx: A.MethodOutput([torch.zeros(ctx.batch.ids.shape[1], 2)]), TypeError, r"scores\[0\] is a tensor of shape \(\d+, 2\)"),
    (lambda ctx: A.MethodOutput([torch.zeros(3)]), ValueError, r"1 score tensor\(s\) of length\(s\) \[3\]; expected 1 .* of length \d+"),
    (lambda ctx: A.MethodOutput([]), ValueError, r"0 score tensor\(s\) .* expected 1 \(one per example\)"),
])
def test_malformed_output_is_refused_naming_the_method(tiny_gpt2, run, err, match):
    with registered(_method("user_bad", run)) as name:
        with pytest.raises(err, match=match):
            tiny_gpt2.attribute("the movie is good", method=name)


@dataclasses.dataclass(frozen=True)
class _KOptions(A.Options):
    k: int = -5

    def validate(self):
        if self.k < 0:
            raise ValueError(f"k must be >= 0, got {self.k}")


class _NotDataclass:
    k = 1


@dataclasses.dataclass(frozen=True)
class _PlainOptions:  # a dataclass, not an aieg_fast.Options (no as_dict / validate: evaluate crashed)
    scale: float = 1.0


@dataclasses.dataclass(frozen=True)
class _SeedOptions(A.Options):  # the call's own seed= and template= would never reach them
    seed: int = 3
    template: str = "T"


class _UndecoratedOptions(A.Options):  # no @dataclass: its k would be no option
    k: int = 5


@pytest.mark.parametrize("attrs, err, match", [
    ({"name": 123}, TypeError, r"name must be a str, got 123"),
    ({"name": "my:method"}, ValueError, r"name 'my:method' holds whitespace or one of"),
    ({"name": " sal "}, ValueError, r"holds whitespace"),
    ({"name": "user_nd", "Options": _NotDataclass}, TypeError, r"Options must be a dataclass"),
    ({"name": "user_k", "Options": _KOptions}, ValueError, r"its default options are refused by its own checks \(k must be >= 0, got -5\)"),
    ({"name": "user_plain", "Options": _PlainOptions}, TypeError, r"Options must be a dataclass subclassing aieg_fast.Options"),
    ({"name": "user_undec", "Options": _UndecoratedOptions}, TypeError, r"Options must be a dataclass subclassing"),
    ({"name": "user_seed", "Options": _SeedOptions}, ValueError,
     r"option\(s\) \['seed', 'template'\] named like keywords of Explainer.attribute"),
])
def test_malformed_method_refused_at_registration(attrs, err, match):
    cls = type("Bad", (A.Method,), {"run": lambda self, ctx, o: _ones(ctx), **attrs})
    before = A.list_methods()
    with pytest.raises(err, match=match):
        A.register(cls)
    assert A.list_methods() == before


@pytest.mark.parametrize("attrs", [{}, {"run": None}, {"run_sequence": lambda self, sctx, o: None}])
def test_a_method_without_run_is_refused_at_registration(attrs):
    """A Method subclass that did not override run was registered, and every call to it failed
    with NotImplementedError."""
    cls = type("NoRun", (A.Method,), {"name": "user_norun", "gradients": False, **attrs})
    before = A.list_methods()
    with pytest.raises(TypeError, match=r"^NoRun does not define run\(self, ctx, opts\) -> MethodOutput"):
        A.register(cls)
    assert A.list_methods() == before
    assert all(type(m).run is not A.Method.run for m in A.METHODS.values())  # the package's methods define it


def test_unregister_lets_a_new_version_take_the_name(tiny_gpt2):
    """A notebook cell registering a method again was refused ("already registered") with no way
    to take the first version out but the private dict; unregister frees the name."""
    first = _method("user_again", _ones)
    A.register(first)
    try:
        with pytest.raises(ValueError, match=r"already registered .*aieg_fast.unregister\('user_again'\) removes it"):
            A.register(_method("user_again", _ones))
        A.unregister("user_again")
        assert "user_again" not in A.list_methods()
        second = _method("user_again", lambda ctx: A.MethodOutput([torch.ones(ctx.batch.ids.shape[1])]))
        A.register(second)
        assert type(A.get_method("user_again")) is second
    finally:
        A.METHODS.pop("user_again", None)
    with pytest.raises(ValueError, match=r"no method is registered as 'user_again'; registered: \['integrated_gradients'"):
        A.unregister("user_again")


def test_fixed_positions_score_zero_even_when_the_method_gives_nan_there(tiny_llama):
    """IG with a non-finite F gave NaN at held-fixed positions (Δ = 0 times a NaN gradient);
    the contract says they hold 0, whatever the method computed."""
    def nan_everywhere(ctx):
        L = ctx.batch.ids.shape[1]
        return A.MethodOutput([torch.full((L,), float("nan")) for _ in range(ctx.batch.B)])

    with registered(_method("user_nan", nan_everywhere)) as name:
        with pytest.warns(A.NonFiniteAttributionWarning):
            a = tiny_llama.attribute("the movie is good", method=name)
    fixed = [not x for x in a.attributable]
    assert any(fixed) and all(float(s) == 0.0 for s, f in zip(a.scores, fixed) if f)
    assert all(math.isnan(float(s)) for s, f in zip(a.scores, fixed) if not f)


def test_check_target_refuses_before_any_work_in_both_calls(tiny_gpt2):
    """A method's check_target hook (README, "Adding a method") is called by attribute and by
    attribute_generation before the model runs."""
    def no_contrast(self, opts, contrast):
        if contrast:
            raise ValueError("user_nocontrast has no contrast")

    def never(ctx):
        raise AssertionError("the method ran before its target was checked")

    cls = type("M_nocontrast", (A.Method,), {"name": "user_nocontrast", "gradients": False, "check_target": no_contrast,
                                             "run": lambda self, ctx, o: never(ctx)})
    ex = tiny_gpt2
    with registered(cls) as name, mock.patch.object(ex.model, "generate", side_effect=AssertionError("decoded first")):
        with pytest.raises(ValueError, match="user_nocontrast has no contrast"):
            ex.attribute("the movie is good", method=name, target=5, contrast_target=6)
        with pytest.raises(ValueError, match="user_nocontrast has no contrast"):
            ex.attribute_generation("the movie is good", max_new_tokens=2, method=name, contrast_target=6)


def test_a_raw_signal_over_the_padded_row_is_read_at_the_example_under_left_padding(tiny_gpt2):
    """A custom method may give its raw signal (``raw_signal``) over the padded row; the flags
    read it from the row's start, which under left padding is padding: a sound row was flagged
    ``zero_signal``."""
    def padded_raw(ctx):
        L = ctx.batch.ids.shape[1]
        raw = [torch.arange(1, L + 1, dtype=torch.float32).masked_fill(ctx.batch.fixed[b], 0) for b in range(ctx.batch.B)]
        return A.MethodOutput([r / r.max() for r in raw], {}, {"raw": [r.tolist() for r in raw]})

    cls = type("M_user_raw", (A.Method,), {"name": "user_raw", "gradients": False, "raw_signal": "raw",
                                           "run": lambda self, ctx, o: padded_raw(ctx)})
    with registered(cls) as name:
        for side in ("right", "left"):
            res = tiny_gpt2.attribute(["the movie is good and the actors are great", "the film"], method=name, padding_side=side)
            assert [r.degenerate for r in res] == [[], []], side


def test_a_raw_signal_shorter_than_the_tokens_does_not_lose_the_result(tiny_gpt2):
    """A raw signal of another length than the example's tokens raised IndexError in the flags,
    after the work: the result was lost. It is not read."""
    cls = type("M_user_short", (A.Method,), {"name": "user_short", "gradients": False, "raw_signal": "raw",
                                             "run": lambda self, ctx, o: A.MethodOutput(_ones(ctx).scores, {}, {"raw": [[1.0, 2.0]] * ctx.batch.B})})
    with registered(cls) as name:
        res = tiny_gpt2.attribute("the movie is good and the actors are great", method=name)
    assert res.degenerate == [] and res.scores.numel() == len(res.tokens)


def test_the_call_keywords_reserved_for_options_are_the_calls_own():
    """register refuses options named like the keywords of attribute / attribute_generation: the
    list must be theirs."""
    import inspect

    from aieg_fast.methods.registry import CALL_KEYWORDS

    own = {n for f in (A.Explainer.attribute, A.Explainer.attribute_generation)
           for n, p in inspect.signature(f).parameters.items() if p.kind is not p.VAR_KEYWORD}
    assert CALL_KEYWORDS == own


def test_a_raw_signal_as_one_padded_tensor_is_read_per_row(tiny_gpt2):
    """A raw signal given as one [B, L] tensor (not a list per example) was read from the start
    of the flattened tensor for every row: row 1's zero signal went unflagged."""
    def tensor_raw(ctx):
        out = _ones(ctx)
        raw = torch.stack(out.scores).clone()
        raw[1] = 0.0
        return A.MethodOutput(out.scores, {}, {"raw": raw})

    cls = type("M_user_traw", (A.Method,), {"name": "user_traw", "gradients": False, "raw_signal": "raw",
                                            "run": lambda self, ctx, o: tensor_raw(ctx)})
    with registered(cls) as name:
        res = tiny_gpt2.attribute(["the movie is good and the actors are great", "the film"], method=name)
    assert res[0].degenerate == [] and [f["kind"] for f in res[1].degenerate] == ["zero_signal"]


def test_a_raw_signal_of_one_row_is_shared_by_every_row(tiny_gpt2):
    """A [1, L] raw signal is one for every row (as any non-list info entry), not row 0 of a
    batch: reading it per row raised IndexError for row 1, after the work."""
    def shared_raw(ctx):
        out = _ones(ctx)
        return A.MethodOutput(out.scores, {}, {"raw": out.scores[0].unsqueeze(0)})

    cls = type("M_user_sraw", (A.Method,), {"name": "user_sraw", "gradients": False, "raw_signal": "raw",
                                            "run": lambda self, ctx, o: shared_raw(ctx)})
    with registered(cls) as name:
        res = tiny_gpt2.attribute(["the movie is good and the actors are great", "the film"], method=name)
    assert len(res) == 2


@pytest.mark.parametrize("as_tensor", [True, False])
def test_token_info_of_tensors_is_averaged_over_noisy_baselines(tiny_gpt2, as_tensor):
    """token_info given as one [B, L] tensor, or a tensor per example, kept the first draw only
    (and per example came back as 0-d tensors)."""
    def delta(ctx):
        d = [(ctx.batch.embeds[b] - ctx.batch.baseline[b]).sum(-1).float() for b in range(ctx.batch.B)]
        return A.MethodOutput(d, {}, {"raw": torch.stack(d) if as_tensor else list(d)})

    cls = type("M_user_delta", (A.Method,), {"name": "user_delta", "gradients": False, "uses_baseline": True,
                                             "token_info": ("raw",), "run": lambda self, ctx, o: delta(ctx)})
    with registered(cls) as name:
        res = tiny_gpt2.attribute("the movie is good", method=name, n_baseline_samples=3, seed=1)
    raw = res.info["raw"]
    assert isinstance(raw, torch.Tensor)  # per example too: one tensor, not a list of 0-d tensors
    raw = raw[0] if as_tensor else raw
    raw = torch.as_tensor(raw)[: len(res.tokens)]
    torch.testing.assert_close(raw.float(), res.scores.float(), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", [[], {"saliency": 1}, 5, None])
def test_get_method_of_a_name_that_is_not_a_str_lists_the_methods(name):
    """get_method([]) raised "unhashable type: 'list'"."""
    with pytest.raises(ValueError, match=rf"^method must be one of \['integrated_gradients', .*\], got {re.escape(repr(name))}$"):
        A.get_method(name)


def test_a_users_method_that_moves_the_bar_draws_it(tiny_gpt2, capsys):
    """The bar is drawn at its first move: a registered method that advances it (as the path
    engine does) gets one without declaring anything, one that does not gets none."""

    def moving(ctx):
        for _ in range(5):
            ctx.advance(1)
        return _ones(ctx)

    with registered(_method("user_moving", moving)) as moves, registered(_method("user_still", _ones)) as still:
        capsys.readouterr()
        tiny_gpt2.attribute("the movie is good", method=moves, progress=True)
        tiny_gpt2.attribute("the movie is good", method=still, progress=True)
        err = capsys.readouterr().err
    assert "user_moving" in err and "user_still" not in err


def test_a_users_method_reaches_the_bars_tqdm_interface(tiny_gpt2, capsys):
    """ctx.progress is "a tqdm-like bar": a registered method that sets its total or postfix got
    an AttributeError from the bar drawn at its first move ('_FirstMoveBar' object has no
    attribute 'set_postfix'); those reach the tqdm bar, drawn at that use."""

    def described(ctx):
        if ctx.progress is not None:
            ctx.progress.total = 2
            ctx.progress.set_postfix(stage="one")
            ctx.advance(2)
        return _ones(ctx)

    with registered(_method("user_described", described)) as name:
        capsys.readouterr()
        tiny_gpt2.attribute("the movie is good", method=name, progress=True)
        err = capsys.readouterr().err
    assert "user_described" in err and "/2 [" in err and "stage=one" in err, err[-300:]
