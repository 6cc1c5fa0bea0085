"""No confident map from no signal (issue 14): a zero, constant or non-finite raw signal, a
normalisation that stretches a flat raw signal (AIEG's PosNorm), and a large IG completeness
error each warn with AttributionWarning, are flagged in ``res.degenerate``, survive a JSON round
trip, and are drawn as what they are (no colour, the reason said)."""
from __future__ import annotations

import io
import warnings

import pytest
import torch

import aieg_fast
from aieg_fast import AttributionWarning, NonFiniteAttributionWarning
from aieg_fast.core.diagnostics import auto_steps_flag, completeness_flag, signal_flags
from aieg_fast.display.scale import make_scale

TEXT = "the movie is good and the actors are great"


def zero_F(logits):
    return logits[:, 0] * 0.0  # F constant: every gradient is 0


def nan_F(logits):
    return logits[:, 0] * float("nan")  # a NaN in the model's output


def _kinds(res):
    return [f["kind"] for f in res.degenerate]


def test_aieg_posnorm_on_zero_signal_is_flagged_inflated(tiny_gpt2):
    """Raw IEG all 0: PosNorm maps it to 1 and the scores are the attention row; flagged."""
    with pytest.warns(AttributionWarning, match=r"aieg: \[inflated\] .*info\['ieg'\]: 0 at every attributable token .*; PosNorm"):
        res = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=4, target_fn=zero_F, posnorm="minmax")
    assert _kinds(res) == ["inflated"]
    att = torch.tensor(res.info["attention"])
    valid = torch.tensor(res.attributable)
    torch.testing.assert_close(res.scores[valid], att[valid])  # what the flag says: the attention row alone
    plain = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=4, target_fn=zero_F, posnorm="none")
    assert _kinds(plain) == ["zero_signal"]
    relu = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=4, target_fn=zero_F, posnorm="relu_max")
    assert _kinds(relu) == ["zero_signal"] and bool((relu.scores == 0).all())  # relu_max leaves 0 at 0: nothing inflated


@pytest.mark.parametrize("method", ["grad_ellm", "saliency", "integrated_gradients", "input_x_gradient"])
def test_all_zero_maps_are_flagged(tiny_gpt2, method):
    with pytest.warns(AttributionWarning, match=rf"{method}: \[zero_signal\]"):
        res = tiny_gpt2.attribute(TEXT, method=method, n_steps=4, target_fn=zero_F)
    assert _kinds(res) == ["zero_signal"]


def test_nan_output_is_flagged_and_drawn_as_such(tiny_gpt2):
    with pytest.warns(NonFiniteAttributionWarning, match=r"F\(x\) = nan is not finite"):
        res = tiny_gpt2.attribute(TEXT, method="saliency", target_fn=nan_F)
    assert _kinds(res) == ["non_finite"]
    assert issubclass(NonFiniteAttributionWarning, RuntimeWarning) and issubclass(NonFiniteAttributionWarning, AttributionWarning)
    buf = io.StringIO()
    res.show(file=buf, width=120)
    assert "no signal (non_finite)" in buf.getvalue()
    assert "no signal (non_finite)" in res.to_html()


def test_large_completeness_error_is_flagged_but_coloured(tiny_llama):
    """A zero baseline through RMSNorm (README): IG's completeness error is several times
    F(x) − F(x′); flagged, and the views keep the colours with a caution."""
    with pytest.warns(AttributionWarning, match=r"\[completeness\] IG completeness error"):
        res = tiny_llama.attribute(TEXT, method="integrated_gradients", n_steps=16, baseline="zero")
    assert _kinds(res) == ["completeness"]
    scale = make_scale(res.scores.tolist(), res.degenerate)
    assert not scale.note and "completeness" in scale.legend
    ok = tiny_llama.attribute(TEXT, method="integrated_gradients", n_steps=50)
    assert ok.degenerate == []


def test_sound_results_are_not_flagged(tiny):
    with warnings.catch_warnings():
        warnings.simplefilter("error", AttributionWarning)
        for method in ("aieg", "integrated_gradients", "saliency", "attention"):
            res = tiny.attribute(TEXT, method=method, n_steps=32)
            assert res.degenerate == [], (method, res.degenerate)


def test_flags_survive_json_and_show_in_every_view(tiny_gpt2, tmp_path):
    with pytest.warns(AttributionWarning):
        res = tiny_gpt2.attribute(TEXT, method="aieg", n_steps=4, target_fn=zero_F, posnorm="minmax")
    res.save(tmp_path / "r.json")
    back = aieg_fast.load_attribution(tmp_path / "r.json")
    assert back.degenerate == res.degenerate
    buf = io.StringIO()
    back.show(file=buf, width=200)
    text = buf.getvalue()
    assert "scale: no signal (inflated)" in text and "[+" not in text  # no per-word values: nothing to compare
    html = back.to_html()
    assert "no signal (inflated)" in html and "background: rgb(255,255,255)" in html
    fig = back.plot()
    assert "no signal" in fig.axes[0].get_title()


def test_generation_rows_flagged_per_step(tiny_gpt2):
    with pytest.warns(AttributionWarning, match=r"\[inflated step 0\].*\[inflated step 1\]"):
        gen = tiny_gpt2.attribute_generation("the movie is", max_new_tokens=2, method="aieg", n_steps=4, target_fn=zero_F,
                                         posnorm="minmax")
    assert [(f["kind"], f["step"]) for f in gen.degenerate] == [("inflated", 0), ("inflated", 1)]
    buf = io.StringIO()
    gen.show(file=buf, width=200)
    lines = [l for l in buf.getvalue().splitlines() if "<-" in l]
    assert all("no signal" in l for l in lines)  # both steps and their mean say so
    html = gen.to_html()
    assert html.count("(no signal)") == 2


def test_signal_flag_rules():
    valid = torch.tensor([True, True, True, False])
    assert signal_flags(torch.tensor([0.0, 0.0, 0.0, 5.0]), valid)[0]["kind"] == "zero_signal"
    assert signal_flags(torch.tensor([2.0, 2.0, 2.0, 0.0]), valid)[0]["kind"] == "constant_signal"
    assert signal_flags(torch.tensor([2.0, 2.0 + 1e-9, 2.0, 0.0]), valid, normalisation="PosNorm (minmax)")[0]["kind"] == "inflated"
    assert signal_flags(torch.tensor([1.0, float("nan"), 2.0, 0.0]), valid)[0]["kind"] == "non_finite"
    assert signal_flags(torch.tensor([1.0, 2.0, 3.0, 0.0]), valid) == []
    assert signal_flags(torch.tensor([3.0, 0.0, 0.0, 0.0]), torch.tensor([True, False, False, False])) == []  # one token
    assert completeness_flag(0.5, 2.0, 1.0)[0]["kind"] == "completeness"
    assert completeness_flag(0.05, 2.0, 1.0) == [] and completeness_flag(5e-5, 1e-4, 0.0) == []
    # a mixture-of-experts model: the routing's jumps are not removed by more steps, the advice says so
    assert "raise n_steps" in completeness_flag(0.5, 2.0, 1.0)[0]["message"]
    routed = completeness_flag(0.5, 2.0, 1.0, routed=True)[0]["message"]
    assert "more steps do not remove" in routed and "raise n_steps" not in routed
    info = {"converged": False, "completeness_error": 0.15, "tolerance": 0.05, "n_steps_used": 17, "max_steps": 17}
    assert "raise max_steps" in auto_steps_flag(info, 0)[0]["message"]
    routed = auto_steps_flag(info, 0, routed=True)[0]["message"]
    assert "more steps do not remove" in routed and "raise max_steps" not in routed


def test_every_flag_kind_has_a_meaning():
    """Summaries that count flags by kind (attribute-dataset's) say what each means."""
    from aieg_fast.core.diagnostics import FLAG_KINDS, FLAG_MEANINGS

    assert list(FLAG_MEANINGS) == list(FLAG_KINDS) and all(FLAG_MEANINGS.values())
