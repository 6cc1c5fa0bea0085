"""Statistics of an evaluation (aieg_fast.eval.stats): paired tests and bootstrap CIs."""
from __future__ import annotations

import warnings

import pytest

from aieg_fast.eval import stats as E


def test_paired_test_and_bootstrap():
    p, name = E.paired_test([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0] * 6)
    assert p < 0.05 and name
    p, _ = E.paired_test([1.0, -1.0, 1.0, -1.0], [0.0] * 4)
    assert p > 0.5
    assert E.paired_test([1.0, 2.0], [1.0, 2.0])[0] == 1.0
    lo, hi = E.bootstrap_ci([1.0, 2.0, 3.0, 4.0])
    assert 1.0 <= lo < 2.5 < hi <= 4.0


def test_paired_test_is_scipys_wilcoxon_on_ties_zeros_and_large_samples():
    """paired_test enumerates the sign flips itself where scipy would (at most 13 differences, a
    zero or a tie among them): the p-value must stay scipy's wilcoxon(d).pvalue to the bit, there
    and on either side of the switch (no ties; 14 and more differences)."""
    import numpy as np
    from scipy.stats import wilcoxon

    rng = np.random.default_rng(3)
    cases = [np.array([0.5, -0.5]), np.array([0.0, 1.0, 2.0, 2.0, -3.0]), np.array([1e-3, -2e-3, 2e-3, 0.0, 0.0, 5e-3])]
    cases += [rng.integers(-3, 4, size=n) * 0.25 for n in (4, 7, 9, 12, 13, 14, 30)]
    cases += [rng.normal(size=n) for n in (3, 13, 20)]
    for d in cases:
        d = d.astype(float)
        assert E.paired_test(d, np.zeros_like(d)) == (float(wilcoxon(d).pvalue), "wilcoxon"), d


def test_bootstrap_band_and_pi_soft_figure():
    import numpy as np

    from aieg_fast.eval.report import pi_soft_figure

    rng = np.random.default_rng(0)
    curves = rng.uniform(0, 1, size=(40, 3))
    lo, hi = E.bootstrap_band(curves)
    mean = curves.mean(0)
    assert lo.shape == hi.shape == (3,) and np.all(lo < mean) and np.all(mean < hi)
    # a band of n examples narrows as n grows, and vanishes for identical curves
    lo2, hi2 = E.bootstrap_band(np.tile(curves, (16, 1)))
    assert np.all(hi2 - lo2 < hi - lo)
    clo, chi = E.bootstrap_band(np.full((5, 3), 0.25))
    assert np.allclose(clo, 0.25) and np.allclose(chi, 0.25)
    assert np.isnan(E.bootstrap_band(curves[:1])[0]).all()
    pis = [0.25, 0.5, 0.75]
    recs = [{"methods": {"ig": {"pi_soft_nc_curve": list(c), "pi_soft_ns_curve": list(1 - c)}},
             "controls": {"uniform": {"pi_soft_nc_curve": [0.5] * 3, "pi_soft_ns_curve": [0.5] * 3}}} for c in curves]
    fig = pi_soft_figure(recs, ["ig"], pis)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["ig (n=40)", "uniform (n=40)"]
    assert len(fig.axes[0].collections) == 2  # one band per curve
    degenerate = {"methods": {"ig": {"pi_soft_nc_curve": [None] * 3, "pi_soft_ns_curve": [None] * 3}},
                  "controls": {"uniform": {"pi_soft_nc_curve": [0.5] * 3, "pi_soft_ns_curve": [0.5] * 3}}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "Mean of empty slice" from an all-None curve
        fig = pi_soft_figure(recs + [degenerate], ["ig"], pis)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["ig (n=40)", "uniform (n=41)"]  # n as in the tables: the degenerate curve is left out


def test_pi_soft_figure_stays_readable_with_many_methods():
    """With two dozen methods (the study's run) every curve has its own colour and style, and the
    legend lies below the axes instead of over the NS panel."""
    import matplotlib

    matplotlib.use("Agg")
    from aieg_fast.eval.report import pi_soft_figure

    names = [f"m{i}" for i in range(24)]
    recs = [{"methods": {m: {"pi_soft_nc_curve": [0.5, 0.4], "pi_soft_ns_curve": [0.5, 0.6]} for m in names},
             "controls": {"uniform": {"pi_soft_nc_curve": [0.5] * 2, "pi_soft_ns_curve": [0.5] * 2}}}]
    fig = pi_soft_figure(recs, names, [0.3, 0.7])
    looks = {(tuple(ln.get_color()) if not isinstance(ln.get_color(), str) else ln.get_color(), ln.get_linestyle())
             for ln in fig.axes[1].get_lines()}
    assert len(fig.axes[1].get_lines()) == 25 and len(looks) == 25
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend_box = fig.legends[0].get_window_extent(renderer)
    for ax in fig.axes:
        assert legend_box.y1 <= ax.get_window_extent(renderer).y0  # below every axes, not over one
    assert fig.axes[1].get_legend() is None


def test_chance_check_against_majority_and_uniform_guess():
    """Chance is the better of the majority label and 1/k; the p-value is the exact binomial
    tail (checked against scipy when installed, and by hand on a tiny case)."""
    from aieg_fast.eval import chance_check, chance_lines

    def recs(labels, preds, k=2):
        return [{"label": y, "pred_label": p, "label_probs": [1 / k] * k} for y, p in zip(labels, preds)]

    always_yes = chance_check(recs([1] * 62 + [0] * 38, [1] * 100))  # the majority answer: 62 % right, at chance
    assert always_yes["accuracy"] == 0.62 and always_yes["chance"] == 0.62 and always_yes["at_chance"]
    good = chance_check(recs([1] * 62 + [0] * 38, [1] * 62 + [0] * 30 + [1] * 8))
    assert good["accuracy"] == 0.92 and not good["at_chance"] and good["p"] < 1e-6
    tiny = chance_check(recs([0, 1, 1], [0, 1, 1], k=3))  # chance = 2/3 (majority); P(X >= 3) = (2/3)^3
    assert tiny["chance"] == pytest.approx(2 / 3) and tiny["p"] == pytest.approx((2 / 3) ** 3) and tiny["at_chance"]
    scipy_stats = pytest.importorskip("scipy.stats")
    assert good["p"] == pytest.approx(scipy_stats.binomtest(92, 100, 0.62, alternative="greater").pvalue, rel=1e-9)
    assert chance_check([])["n"] == 0 and chance_lines([]) == []
    text = "\n".join(chance_lines(recs([1] * 62 + [0] * 38, [1] * 100)))
    assert "against chance 0.620" in text and "**The accuracy is not above chance**" in text
    assert "not above chance" not in "\n".join(chance_lines(recs([1] * 62 + [0] * 38, [1] * 62 + [0] * 38)))


def test_summarise_topk_paired_tests_at_each_k():
    """summarise_topk's paired test of a method against the reference at a k uses that k's values
    only, over the records where both are finite; the reference row has no test."""
    import math

    ref = [0.10, 0.20, 0.30, 0.40, 0.50, 0.60]
    ahead = [v + 0.1 * (i + 1) for i, v in enumerate(ref)]  # ahead at k = 0.1, level at k = 0.3
    recs = [{"methods": {"ig": {"topk_sweep": {"0.1": {"comprehensiveness": r}, "0.3": {"comprehensiveness": r}}},
                         "occ": {"topk_sweep": {"0.1": {"comprehensiveness": a}, "0.3": {"comprehensiveness": r}}}}}
            for r, a in zip(ref, ahead)]
    recs[0]["methods"]["occ"]["topk_sweep"]["0.1"]["comprehensiveness"] = float("nan")  # left out of the pairs
    rows = {(r["method"], r["topk"], r["metric"]): r for r in E.summarise_topk(recs, ["ig", "occ"], [0.1, 0.3], reference="ig")}
    at1 = rows[("occ", 0.1, "comprehensiveness")]
    assert at1["n"] == 5 and at1["reference"] == "ig"
    assert at1["mean_diff"] == pytest.approx(sum(0.1 * (i + 1) for i in range(1, 6)) / 5)
    assert at1["p_vs_reference"] == pytest.approx(E.paired_test(ahead[1:], ref[1:])[0])
    assert rows[("occ", 0.3, "comprehensiveness")]["p_vs_reference"] == 1.0  # every difference zero
    assert rows[("occ", 0.3, "comprehensiveness")]["mean_diff"] == 0.0
    own = rows[("ig", 0.1, "comprehensiveness")]
    assert own["reference"] == "" and math.isnan(own["p_vs_reference"]) and math.isnan(own["mean_diff"])
    # no test when the reference is not among the methods
    alone = E.summarise_topk(recs, ["occ"], [0.1], reference="ig")
    assert all(r["reference"] == "" and math.isnan(r["p_vs_reference"]) for r in alone)


def test_summary_names_the_tests_in_words():
    from aieg_fast.eval.report import write_summary

    rows = [{"method": m, "metric": "log_odds", "better": "lower", "n": 3, "mean": 0.1, "ci_low": 0.0, "ci_high": 0.2,
             "p_vs_reference": p, "reference": "ig" if m != "ig" else "", "test": t}
            for m, p, t in (("ig", float("nan"), ""), ("a", 0.01, "wilcoxon"), ("b", 1.0, "all differences zero"))]
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        md = write_summary(Path(d), rows, {"model": "m", "dataset": "d", "seed": 0, "topk": 0.2, "metrics": "hard",
                                                 "n_steps": 4, "max_tokens": None, "prob_space": "labels"}, [], "ig")
    assert "p < 0.05 / p < 0.01 (wilcoxon; p = 1 where every difference is zero; each p uncorrected for the number of comparisons)." in md


def test_vs_reference_names_the_reference_only_when_a_test_ran():
    """One finite pair is too few for a test: no reference name, NaN p and mean difference (the
    summary tables would otherwise show a reference that nothing was tested against)."""
    import math

    one = E.vs_reference([(0.5, 0.2), (float("nan"), 0.1), (None, 0.3)], "occ", "ig", ["ig", "occ"])
    assert one["reference"] == "" and one["test"] == "" and math.isnan(one["p_vs_reference"]) and math.isnan(one["mean_diff"])
    two = E.vs_reference([(0.5, 0.2), (0.7, 0.3), (float("inf"), 0.1)], "occ", "ig", ["ig", "occ"])
    assert two["reference"] == "ig" and two["mean_diff"] == pytest.approx(0.35)
    assert two["p_vs_reference"] == pytest.approx(E.paired_test([0.5, 0.7], [0.2, 0.3])[0])
    rows = E.summarise([{"methods": {"ig": {"log_odds": -1.0}, "occ": {"log_odds": -2.0}}}], ["ig", "occ"], reference="ig",
                       metrics=["log_odds"])
    assert [r["reference"] for r in rows] == ["", ""]


def test_longra_summary_tests_methods_against_the_reference_but_not_the_uniform_bound(tmp_path):
    from aieg_fast.eval.longra_report import summarise_longra

    ranks = {"ig": [1, 2, 1, 3], "sal": [4, 5, 3, 6]}
    recs = [{"id": f"t{i}", "n_attributable": 8, "distractor_share": 0.25,
             "methods": {m: {"relative_top1": float(v[i] <= 1), "relative_rank": float(v[i]), "distractor_mass": 0.1 * v[i]}
                         for m, v in ranks.items()}} for i in range(4)]
    config = {"ks": [1], "seed": 0, "model": "m", "dataset": "d", "target_fn": "logprob", "n_steps": 4}
    rows = {(r["method"], r["metric"]): r for r in summarise_longra(tmp_path, recs, ["ig", "sal"], config, "ig", plot=False)["rows"]}
    sal = rows[("sal", "relative_rank")]
    assert sal["reference"] == "ig" and sal["mean_diff"] == pytest.approx(2.75)
    assert sal["p_vs_reference"] == pytest.approx(E.paired_test(ranks["sal"], ranks["ig"])[0])
    uni = rows[("uniform", "relative_rank")]
    assert uni["mean"] == pytest.approx(4.5) and uni["reference"] == "" and uni["test"] == ""
    assert "mean_diff" in (tmp_path / "summary.csv").read_text().splitlines()[0]


def test_bad_statistics_inputs_refused_and_nan_left_out():
    """Pairs of two lengths were broadcast into an unpaired test (or a raw numpy error); level=95
    gave numpy's quantile error; one NaN made the bootstrap interval NaN."""
    with pytest.raises(ValueError, match=r"x and y must be 1-D sequences of one length .* shapes \(3,\) and \(1,\)"):
        E.paired_test([1, 2, 3], [0])
    with pytest.raises(ValueError, match=r"shapes \(3,\) and \(2,\)"):
        E.paired_test([1, 2, 3], [0, 1])
    with pytest.raises(ValueError, match=r"level must be a fraction in \(0, 1\) .* got 95"):
        E.bootstrap_ci([1.0, 2.0, 3.0], level=95)
    with pytest.raises(ValueError, match=r"level must be a fraction"):
        E.bootstrap_band([[1.0, 2.0], [2.0, 3.0]], level=0)
    assert E.bootstrap_ci([1.0, 2.0, 3.0, 4.0, float("nan")]) == E.bootstrap_ci([1.0, 2.0, 3.0, 4.0])


def test_summarise_rows_say_how_many_pairs_the_test_used():
    """A row's n counts the method's finite values; its test only the records where the reference
    is finite too: the rows now carry that count (n_pairs) and the test's mean difference."""
    recs = [{"methods": {"sal": {"log_odds": v}, "ig": {"log_odds": w}}} for v, w in [(1.0, 0.5), (2.0, float("nan")), (3.0, 1.0)]]
    rows = E.summarise(recs, ["sal", "ig"], reference="ig", metrics=["log_odds"])
    sal = next(r for r in rows if r["method"] == "sal")
    assert sal["n"] == 3 and sal["n_pairs"] == 2 and sal["mean_diff"] == pytest.approx(1.25)


def test_step_table_marks_a_step_without_values_with_a_dash(tmp_path):
    """A step at which no example has a value (every one's step degenerate: NaN soft metrics) is
    ``–`` in summary.md's per-step table, as missing values are in the other tables (it printed
    ``nan`` beside ``n`` = 0); summary_steps.csv keeps n = 0 and nan, as summary.csv does."""
    import csv

    from aieg_fast.eval.report import step_lines

    nan = float("nan")
    records = [{"methods": {m: {"steps": [{"pi_soft_nc_auc": nan}, {"pi_soft_nc_auc": v}]} for m in ("saliency", "aieg")}}
               for v in (0.25, 0.75)]
    lines = step_lines(tmp_path, records, ["saliency", "aieg", "uniform"], ["pi_soft_nc_auc"])
    table = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]] for ln in lines if ln.startswith("| ")}
    assert table["n"] == ["0", "2"] and table["saliency"] == table["aieg"] == ["–", "0.500"], lines
    assert not any("nan" in ln for ln in lines)
    rows = list(csv.DictReader((tmp_path / "summary_steps.csv").open()))
    first = next(r for r in rows if r["method"] == "saliency" and r["step"] == "0")
    assert first["n"] == "0" and first["mean"] == "nan"


def test_summary_names_methods_equal_to_rounding(tmp_path):
    """Two methods whose metric values differ only by float rounding (about 1e-5: the batched
    forwards of the same top k) are the same method for that metric, yet the paired test ranks
    those differences and can star one and not the other (RESULTS_faithfulness §2: V3 and V3
    without PosNorm). summary.md names such pairs and the metrics they share; a real difference
    on one example, or a value missing for one method, keeps a pair out."""
    import numpy as np

    from aieg_fast.eval.report import write_summary

    rng = np.random.default_rng(0)
    records = []
    for i in range(30):
        base = float(rng.normal())
        methods = {
            "ig": {"log_odds": float(rng.normal()), "comprehensiveness": float(rng.normal())},
            "a": {"log_odds": base, "comprehensiveness": 0.5},
            "a_noise": {"log_odds": base + float(rng.uniform(-2e-5, 2e-5)), "comprehensiveness": 0.5 + (0.3 if i == 7 else 0.0)},
            "a_gap": {"log_odds": base + (1e-3 if i == 3 else 0.0), "comprehensiveness": 0.5},
            "a_missing": {"log_odds": base if i else None, "comprehensiveness": 0.5},
        }
        records.append({"id": str(i), "label": 0, "pred_label": 0, "degenerate": False, "methods": methods})
    names = list(records[0]["methods"])
    rows = E.summarise(records, names, 0, "ig", metrics=["log_odds", "comprehensiveness"])
    md = write_summary(tmp_path, rows, {"model": "m", "dataset": "d", "seed": 0, "topk": 0.2, "metrics": "hard",
                                        "n_steps": 4, "max_tokens": None, "prob_space": "labels"}, records, "ig")
    line = next(x for x in md.splitlines() if x.startswith("Equal to 0.0001 (each of these metrics differs by at most"))
    assert "a = a_noise on log_odds (largest difference" in line
    assert "a = a_missing on comprehensiveness (" in line  # log_odds missing on one example for a_missing only
    assert "a = a_gap on comprehensiveness (largest difference 0.0e+00)" in line  # 1e-3 on one example: not on log_odds
    assert "a = a_noise on log_odds, comprehensiveness" not in line  # 0.3 apart on one example
    assert "ig =" not in line and "= ig " not in line


def test_rounding_twins_named_once_whatever_the_order_and_nan_on_both_sides_passed_over():
    """A method equal to another on every metric is named once, beside the first of them in the
    methods' order, even when a third method equal to both on some metrics comes first; an
    example where both have NaN (a degenerate soft metric) is passed over, one NaN against a
    number makes them differ."""
    from aieg_fast.eval.report import rounding_twin_lines

    records = []
    for i in range(6):
        v = float(i) / 7
        records.append({"methods": {
            "partial": {"log_odds": v, "soft_nc": v + 1.0},
            "x": {"log_odds": v, "soft_nc": float("nan") if i == 2 else v},
            "x_copy": {"log_odds": v + 1e-6, "soft_nc": float("nan") if i == 2 else v},
            "x_half_nan": {"log_odds": v, "soft_nc": float("nan") if i in (2, 4) else v},
        }})
    line = rounding_twin_lines(records, ["partial", "x", "x_copy", "x_half_nan"], ["log_odds", "soft_nc"])[1]
    pairs = line.split(": ", 1)[1].split(". Read")[0].split("; ")
    assert [p.split(" (")[0] for p in pairs] == [
        "partial = x on log_odds", "partial = x_half_nan on log_odds", "x = x_copy on every metric",
        "x = x_half_nan on log_odds"]  # x_copy is named beside x only
    assert rounding_twin_lines(records, ["x", "x_half_nan"], ["soft_nc"]) == []


@pytest.mark.parametrize("seed", [-1, 1.5, "0"])
def test_a_bootstrap_seed_is_named(seed):
    """numpy's own messages ("expected non-negative integer", SeedSequence's TypeError) did not
    name seed."""
    with pytest.raises(ValueError, match=rf"seed must be an int >= 0, got {seed!r}"):
        E.bootstrap_ci([1.0, 2.0, 3.0], seed=seed)
    with pytest.raises(ValueError, match=r"seed must be an int >= 0"):
        E.bootstrap_band([[1.0, 2.0], [3.0, 4.0]], seed=seed)
