"""Statistics of an evaluation: bootstrap CIs, paired tests, and the mean / CI rows of the tables.

* :func:`bootstrap_ci` — percentile bootstrap CI of a mean; :func:`bootstrap_band` — the same
  for a mean curve, point by point;
* :func:`paired_test` — two-sided p-value of a paired difference (Wilcoxon signed-rank from scipy
  when installed, else an exact / Monte-Carlo sign-flip permutation test of the mean difference
  in numpy);
* :func:`mean_ci` — n, mean and CI of the finite values;
* :func:`chance_check` — whether the model's predicted labels beat chance (one-sided exact
  binomial test against the better of the majority label and a uniform guess);
* :func:`summarise` / :func:`summarise_topk` — one row per (method, metric) or (method, k,
  metric) over the records of :mod:`aieg_fast.eval.records`, the rows of ``summary.csv`` and
  ``summary_topk.csv``; :func:`summarise_steps` — one row per (method, generated step, metric)
  over the per-step metrics of a generation run, the rows of ``summary_steps.csv``.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..core.validation import as_int, check_int
from .checks import check_seed
from .metrics import HARD_METRICS, METRICS, metric_base

__all__ = ["REFERENCE_METHOD", "bootstrap_ci", "bootstrap_band", "paired_test", "mean_ci", "chance_check", "summarise",
           "summarise_topk", "vs_reference", "summarise_steps"]

#: the method the paired tests compare against by default.
REFERENCE_METHOD = "integrated_gradients"


def bootstrap_ci(x: Sequence[float], n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> Tuple[float, float]:
    """Percentile bootstrap CI of the mean of the finite values of ``x`` (NaN / ±inf left out, as
    :func:`mean_ci` does): (low, high), NaN when fewer than 2 remain. ``level`` is a fraction in
    (0, 1) (0.95 for a 95 % interval).

    Raises:
        ValueError: ``x`` not 1-D, ``level`` outside (0, 1) (e.g. 95 for 0.95), ``n_boot`` < 1, ``seed`` not an int >= 0.
    """
    _check_level(level)
    n_boot, seed = as_int(n_boot), check_seed(seed)  # a NumPy or one-element tensor integer as an int
    check_int("n_boot", n_boot, 1)
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D sequence of numbers, got shape {x.shape}")
    x = x[np.isfinite(x)]
    if x.size < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def _check_level(level) -> None:
    """Refuse a confidence level that is not a fraction in (0, 1) (ValueError naming it)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a fraction in (0, 1) (0.95 for a 95 % interval), got {level!r}")


def bootstrap_band(curves, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> Tuple[np.ndarray, np.ndarray]:
    """Pointwise percentile bootstrap band of a mean curve.

    Args:
        curves: array-like [n, P], one curve per example (NaN entries are skipped in the means).
        n_boot: resamples of the n examples (with replacement, the same draw for every point).

    Returns:
        (lo, hi), each ndarray[P]; NaN everywhere when n < 2.
    """
    _check_level(level)
    seed = check_seed(seed)
    c = np.asarray(curves, dtype=float)
    if c.ndim != 2:
        raise ValueError(f"curves must be [n, P] (one curve per example), got shape {c.shape}")
    n, P = c.shape
    if n < 2:
        return np.full(P, np.nan), np.full(P, np.nan)
    rng = np.random.default_rng(seed)
    means = np.nanmean(c[rng.integers(0, n, size=(n_boot, n))], axis=1)  # [n_boot, P]
    a = (1 - level) / 2
    return np.nanquantile(means, a, axis=0), np.nanquantile(means, 1 - a, axis=0)


def paired_test(x: Sequence[float], y: Sequence[float], n_perm: int = 20000, seed: int = 0) -> Tuple[float, str]:
    """Two-sided p-value of a paired difference x − y, and the test's name.

    scipy installed: Wilcoxon signed-rank (zero differences dropped). Otherwise: sign-flip
    permutation test of the mean difference, exact for ≤ 16 pairs, else ``n_perm`` random flips.
    All differences zero gives p = 1. Pairs with a non-finite value are left out; none left
    gives (NaN, "none").

    Raises:
        ValueError: ``x`` and ``y`` not 1-D sequences of one length (they are pairs).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(f"x and y must be 1-D sequences of one length (paired values), got shapes {x.shape} and {y.shape}")
    d = x - y
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan"), "none"
    if np.all(np.abs(d) < 1e-15):
        return 1.0, "all differences zero"
    try:
        from scipy import stats as scipy_stats
    except ImportError:
        scipy_stats = None
    if scipy_stats is not None:
        return _wilcoxon_p(d, scipy_stats), "wilcoxon"
    obs = abs(d.mean())
    if d.size <= 16:
        signs = ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        name = "sign-flip (exact)"
    else:
        signs = np.random.default_rng(seed).choice([-1, 1], size=(n_perm, d.size))
        name = f"sign-flip ({n_perm} draws)"
    stats = np.abs((signs * d).mean(1))
    return float((np.sum(stats >= obs - 1e-12) + (0 if d.size <= 16 else 1)) / (len(stats) + (0 if d.size <= 16 else 1))), name


def _wilcoxon_p(d: np.ndarray, scipy_stats) -> float:
    """scipy's two-sided Wilcoxon signed-rank p-value of ``d`` (``wilcoxon(d).pvalue``), the same
    number sooner where scipy enumerates the sign flips: at most 13 differences with a zero or a
    tie among them. scipy then ranks each of the 2**n sign patterns one call at a time (about 1 s
    for 12 differences, so most of a small evaluation's summary). Its permutation test is given a
    statistic over all patterns at once instead: the ranks of |d| do not change under a flip, so
    the sum of the ranks of the positive differences (zeros ranked 0, as scipy drops them) is one
    product. tests/eval/test_eval_stats.py checks equality with scipy on such inputs."""
    nonzero = d != 0
    size = np.abs(d[nonzero])
    if d.size > 13 or (nonzero.all() and np.unique(size).size == size.size):
        return float(scipy_stats.wilcoxon(d).pvalue)  # exact null distribution, or the normal approximation
    ranks = np.zeros(d.shape)
    ranks[nonzero] = scipy_stats.rankdata(size)
    res = scipy_stats.permutation_test((d,), lambda s, axis: np.sum((s > 0) * ranks, axis=axis), vectorized=True,
                                       permutation_type="samples", alternative="two-sided")
    return float(res.pvalue)


def mean_ci(values: Sequence[Optional[float]], seed: int) -> dict:
    """``{"n", "mean", "ci_low", "ci_high"}`` of the finite values (None / NaN left out)."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    lo, hi = bootstrap_ci(vals, seed=seed)
    return {"n": len(vals), "mean": float(np.mean(vals)) if vals else float("nan"), "ci_low": lo, "ci_high": hi}


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X ≥ k) for X ~ Binomial(n, p), summed in log space (exact for any n)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)
            for i in range(k, n + 1)]
    top = max(logs)
    return float(min(1.0, math.exp(top) * sum(math.exp(v - top) for v in logs)))


def chance_check(records: Sequence[dict], alpha: float = 0.05) -> dict:
    """Whether the predicted labels of ``records`` beat chance.

    Chance is the better of always answering the most frequent gold label of the records and
    guessing one of the k labels at random (1/k; k = the length of ``label_probs``). The test is
    the one-sided exact binomial test of the number of correct predictions against chance. A
    model at chance does not decide from the text, so its attributions cannot be faithful to a
    decision and the faithfulness metrics cannot separate methods.

    Args:
        records: evaluation records with ``label``, ``pred_label`` and ``label_probs``.
        alpha: the level below which the accuracy counts as above chance.

    Returns:
        ``{"n", "accuracy", "chance", "majority", "p", "at_chance"}`` (NaN and False for no record).
    """
    n = len(records)
    if n == 0:
        return {"n": 0, "accuracy": float("nan"), "chance": float("nan"), "majority": float("nan"), "p": float("nan"),
                "at_chance": False}
    correct = sum(int(r["pred_label"] == r["label"]) for r in records)
    labels = [r["label"] for r in records]
    majority = max(labels.count(v) for v in set(labels)) / n
    k = max(len(r.get("label_probs") or [0, 0]) for r in records)
    chance = max(majority, 1.0 / k)
    p = _binomial_tail(correct, n, chance)
    return {"n": n, "accuracy": correct / n, "chance": chance, "majority": majority, "p": p, "at_chance": p >= alpha}


def vs_reference(pairs: Sequence[Tuple[Optional[float], Optional[float]]], method: str, reference: str,
                 methods: Sequence[str], seed: int = 0) -> dict:
    """The paired test of one method against the reference method over the records.

    Args:
        pairs: one ``(value of method, value of reference)`` per record, in the metric's own
            unit (nats for log-odds, probability for the others); None or non-finite values leave
            the pair out.
        method: the method the values belong to.
        reference: the method compared against.
        methods: the run's methods; without ``reference`` among them there is no test.
        seed: seed of the permutation test when scipy is missing (:func:`paired_test`).

    Returns:
        ``{"mean_diff", "p_vs_reference", "reference", "test", "n_pairs"}``: the mean of method −
        reference, the two-sided uncorrected p-value, the reference's name and the test's name,
        over the ``n_pairs`` pairs where both values are finite (fewer than the method's own n
        where the reference's value is missing or not finite); NaN, NaN, "" and "" when no test
        ran (``method`` is the reference, ``reference`` is not among ``methods``, or fewer than
        two pairs remain).
    """
    out = {"mean_diff": float("nan"), "p_vs_reference": float("nan"), "reference": "", "test": "", "n_pairs": 0}
    if method == reference or reference not in methods:
        return out
    both = [(v, w) for v, w in pairs if v is not None and w is not None and math.isfinite(v) and math.isfinite(w)]
    out["n_pairs"] = len(both)
    if len(both) >= 2:
        out["mean_diff"] = float(np.mean([v - w for v, w in both]))
        out["p_vs_reference"], out["test"] = paired_test([v for v, _ in both], [w for _, w in both], seed=seed)
        out["reference"] = reference
    return out


def summarise(records: Sequence[dict], methods: Sequence[str], seed: int = 0, reference: str = REFERENCE_METHOD,
              metrics: Optional[Sequence[str]] = None) -> List[dict]:
    """Rows (method, metric, n, mean, CI, paired p-value vs ``reference``) over records.

    One row per method and metric of ``metrics`` (default: every metric of
    :data:`~aieg_fast.eval.metrics.METRICS`), plus the ``uniform`` control's π-Soft rows (the
    control ignores the scores, so its value is the same under every soft map). Keys:
    ``method``, ``metric``, ``better``, ``n``, ``mean``, ``ci_low``, ``ci_high``,
    ``p_vs_reference`` (NaN without a test), ``reference`` ("" without a test), ``test``, and
    the test's ``mean_diff`` (method − reference) and ``n_pairs`` (the records where both are
    finite: the test's n, which can be below ``n``).

    Raises:
        ValueError: a name in ``metrics`` that is not in :data:`~aieg_fast.eval.metrics.METRICS`.
    """
    metrics = list(METRICS) if metrics is None else list(metrics)
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise ValueError(f"metrics has unknown name(s) {bad}; choose from {list(METRICS)}")
    rows = []
    names = list(methods) + ["uniform"]
    for m in names:
        for metric in metrics:
            better = METRICS[metric]
            if m == "uniform" and not metric.startswith("pi_soft"):
                continue
            if m == "uniform":
                get = lambda r, key=metric_base(metric): r.get("controls", {}).get("uniform", {}).get(key)  # noqa: E731
            else:
                get = lambda r, key=metric: r["methods"].get(m, {}).get(key)  # noqa: E731
            pairs = [(get(r), r["methods"].get(reference, {}).get(metric)) for r in records]
            test = vs_reference(pairs, m, reference, methods, seed)
            rows.append({"method": m, "metric": metric, "better": better, **mean_ci([v for v, _ in pairs], seed), **test})
    return rows


def summarise_topk(records: Sequence[dict], methods: Sequence[str], ks: Sequence[float], seed: int = 0,
                   reference: str = REFERENCE_METHOD) -> List[dict]:
    """Rows (method, k, metric, n, mean, CI, paired test vs ``reference`` at the same k) of the
    top-k sweep stored in the records (``methods[m]["topk_sweep"][f"{k:g}"][metric]``).

    Keys: ``method``, ``topk``, ``metric``, ``better`` ("higher" / "lower"), ``n``, ``mean``, ``ci_low``, ``ci_high``,
    ``mean_diff`` (mean of method − reference over the records where both are finite: nats for
    log-odds, probability for comprehensiveness and sufficiency), ``p_vs_reference`` (two-sided,
    uncorrected: :func:`paired_test`), ``reference`` and ``test``; NaN / "" without a test (the
    reference itself, or ``reference`` not among ``methods``), as in :func:`summarise`.
    """
    rows = []
    for m in methods:
        for k in ks:
            key = f"{k:g}"
            for metric in HARD_METRICS:
                get = lambda r, name: r["methods"].get(name, {}).get("topk_sweep", {}).get(key, {}).get(metric)  # noqa: E731
                pairs = [(get(r, m), get(r, reference)) for r in records]
                rows.append({"method": m, "topk": k, "metric": metric, "better": METRICS[metric],
                             **mean_ci([v for v, _ in pairs], seed),
                             **vs_reference(pairs, m, reference, methods, seed)})
    return rows


def summarise_steps(records: Sequence[dict], methods: Sequence[str], metrics: Sequence[str], seed: int = 0) -> List[dict]:
    """Rows (method, step, metric, n, mean, CI) of the per-step metrics of a generation run.

    Each record's ``methods[m]["steps"]`` holds one dict of metrics per generated step t (0 =
    the first generated token; :func:`~aieg_fast.eval.generation_runner.evaluate_generation`).
    Step t's row covers the examples that generated at least t + 1 tokens; NaN (a degenerate
    step's soft metrics) and missing values are left out. The CI resamples examples.

    Raises:
        ValueError: a name in ``metrics`` that is not in :data:`~aieg_fast.eval.metrics.METRICS`.
    """
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise ValueError(f"metrics has unknown name(s) {bad}; choose from {list(METRICS)}")
    rows = []
    for m in methods:
        steps = [r["methods"].get(m, {}).get("steps") or [] for r in records]
        for t in range(max((len(s) for s in steps), default=0)):
            for metric in metrics:
                vals = [s[t].get(metric) for s in steps if len(s) > t]
                rows.append({"method": m, "step": t, "metric": metric, "better": METRICS[metric], **mean_ci(vals, seed)})
    return rows
