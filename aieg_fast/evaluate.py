"""Faithfulness evaluation of attribution methods over a sentiment dataset.

:func:`evaluate` runs each method on the first ``n`` examples of a dataset with the sentiment
prompt (:data:`~aieg_fast.samples.SENTIMENT_TEMPLATE`), targets the model's predicted label word
(" negative" / " positive", argmax over the two), scores every attribution with
:mod:`aieg_fast.metrics` and writes to ``out_dir``:

* ``records.jsonl`` — one JSON line per example, appended as soon as the example is done; a
  rerun skips the example ids already there (resume after an interrupt);
* ``config.json`` — the settings; a rerun with other settings in the same folder is refused;
* ``summary.md`` / ``summary.csv`` — mean and 95 % bootstrap CI per metric and method, and a
  paired test of each method against ``integrated_gradients`` (Wilcoxon signed-rank from scipy
  when installed, else an exact / Monte-Carlo sign-flip permutation test of the mean
  difference in numpy);
* ``pi_soft_curves.png`` — mean π-Soft-NC / NS curves (needs matplotlib; skipped with a note).

Datasets: ``sst2-sample`` (24 sentences shipped in the package), ``sst2-dev``, ``sst2-test``,
``imdb`` (files of the evaluation data folder: ``data_dir``, else ``$AIEG_FAST_DATA``, else the
copies shipped in ``aieg_fast/data``: full SST-2 dev and test, the first 200 IMDb reviews; see
:func:`dataset_path`).
"""
from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import metrics as M
from .samples import SENTIMENT_LABELS, SENTIMENT_TEMPLATE

__all__ = ["evaluate", "load_dataset", "DATASETS", "METRICS", "summarise", "paired_test"]

DATASETS = {
    "sst2-sample": None,
    "sst2-dev": "sst2_dev.tsv",
    "sst2-test": "sst2_test.tsv",
    "imdb": "imdb_test_sample.jsonl",
}
#: metric name → which direction is better.
METRICS = {
    "log_odds": "lower",
    "comprehensiveness": "higher",
    "sufficiency": "lower",
    "soft_nc": "higher",
    "soft_ns": "higher",
    "pi_soft_nc_auc": "higher",
    "pi_soft_ns_auc": "higher",
}
CONTROLS = ("random",)  # methods that are controls, not attribution methods
REFERENCE_METHOD = "integrated_gradients"
#: default top-k fractions of the k sweep (specs/aieg.md §7: 5 / 10 / 20 / 30 %).
TOPK_SWEEP = (0.05, 0.10, 0.20, 0.30)


def parse_method_spec(spec: str) -> Tuple[str, dict]:
    """Split a method spec ``name[:option=value[:option=value ...]]`` into (name, options).

    Values are read as JSON when they parse (``n_pilot=10``, ``adaptive=false``), else kept as
    strings (``ef_mode=none``). Example: ``aieg:ef_mode=none`` is AIEG without the emphasis
    factor; the spec string is the method's name in the records and tables.

    Raises:
        ValueError: an option without ``=``, an empty name.
    """
    parts = [p.strip() for p in str(spec).split(":")]
    name, opts = parts[0], {}
    if not name:
        raise ValueError(f"methods has an empty method name in {spec!r}")
    for part in parts[1:]:
        if "=" not in part:
            raise ValueError(f"methods: option {part!r} of {spec!r} must be NAME=VALUE")
        k, v = part.split("=", 1)
        if k.strip() in opts:
            raise ValueError(f"methods: option {k.strip()!r} is given twice in {spec!r}")
        opts[k.strip()] = option_value(v.strip())
    return name, opts


def option_value(text: str):
    """A method option's value from text: JSON when it parses (``4``, ``false``, ``[0, 1]``),
    else the text itself (``none``, ``last``). Shared by method specs and ``--option``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _json_safe(x):
    """Replace NaN / inf floats by None so that records.jsonl is strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


# ============================================================================================
# data
# ============================================================================================
def _data_dir(data_dir) -> Optional[Path]:
    """The evaluation data folder asked for: ``data_dir``, else ``$AIEG_FAST_DATA``, else None."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get("AIEG_FAST_DATA")
    return Path(env) if env else None


#: copies shipped in aieg_fast/data (source and checksums in its README.md): the full SST-2
#: dev and test sets, and the first 200 reviews (balanced) of the IMDb test sample.
SHIPPED = {
    "sst2-dev": "sst2_dev.tsv",
    "sst2-test": "sst2_test.tsv",
    "imdb": "imdb_test_sample_200.jsonl",
}


def dataset_path(name: str, data_dir=None) -> Path:
    """The file a dataset is read from.

    Order: ``data_dir`` when given (only there); else ``$AIEG_FAST_DATA`` when set (only there);
    else the copy shipped in the package (:data:`SHIPPED`; for IMDb the first 200 reviews of
    the 2,000-review sample, whose file ``imdb_test_sample.jsonl`` a data folder can hold).

    Raises:
        ValueError: unknown name. FileNotFoundError: the file is not in the folder asked for.
    """
    if name not in DATASETS or DATASETS[name] is None:
        raise ValueError(f"dataset must be one of {[k for k, v in DATASETS.items() if v]}, got {name!r}")
    fname = DATASETS[name]
    folder = _data_dir(data_dir)
    if folder is None:
        return Path(__file__).resolve().parent / "data" / SHIPPED[name]
    path = folder / fname
    if not path.is_file():
        raise FileNotFoundError(
            f"dataset {name!r} needs {fname} in {folder}, which is missing; pass --data-dir DIR "
            f"(or set AIEG_FAST_DATA) to the folder holding the evaluation data, or leave both unset "
            f"to use the copy shipped with the package"
        )
    return path


def load_dataset(name: str, data_dir=None) -> List[Tuple[str, int]]:
    """(text, label) pairs of a dataset, in file order (file chosen by :func:`dataset_path`).

    Raises:
        ValueError: unknown name. FileNotFoundError: the data file is missing (names the
            folder searched and how to point to another).
    """
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {list(DATASETS)}, got {name!r}")
    if name == "sst2-sample":
        from .samples import sst2_sample

        return sst2_sample()
    path = dataset_path(name, data_dir)
    if path.suffix != ".jsonl":
        from .samples import read_sst2_tsv

        return read_sst2_tsv(path)
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                rows.append((r["text"], int(r["label"])))
    return rows


def _truncate(ex, text: str, max_tokens: Optional[int]) -> str:
    if max_tokens is None:
        return text
    ids = ex.tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) <= max_tokens:
        return text
    return ex.tokenizer.decode(ids[:max_tokens])


# ============================================================================================
# statistics
# ============================================================================================
def bootstrap_ci(x: Sequence[float], n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> Tuple[float, float]:
    """Percentile bootstrap CI of the mean (NaN when fewer than 2 values)."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def paired_test(x: Sequence[float], y: Sequence[float], n_perm: int = 20000, seed: int = 0) -> Tuple[float, str]:
    """Two-sided p-value of a paired difference x − y, and the test's name.

    scipy installed: Wilcoxon signed-rank (zero differences dropped). Otherwise: sign-flip
    permutation test of the mean difference, exact for ≤ 16 pairs, else ``n_perm`` random flips.
    All differences zero gives p = 1.
    """
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan"), "none"
    if np.all(np.abs(d) < 1e-15):
        return 1.0, "all differences zero"
    try:
        from scipy.stats import wilcoxon
    except ImportError:
        wilcoxon = None
    if wilcoxon is not None:
        return float(wilcoxon(d).pvalue), "wilcoxon"
    obs = abs(d.mean())
    if d.size <= 16:
        signs = ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        name = "sign-flip (exact)"
    else:
        signs = np.random.default_rng(seed).choice([-1, 1], size=(n_perm, d.size))
        name = f"sign-flip ({n_perm} draws)"
    stats = np.abs((signs * d).mean(1))
    return float((np.sum(stats >= obs - 1e-12) + (0 if d.size <= 16 else 1)) / (len(stats) + (0 if d.size <= 16 else 1))), name


def _records(path: Path) -> Dict[str, dict]:
    """Records by example id; a later line for the same id adds methods to the earlier one."""
    out: Dict[str, dict] = {}
    if not path.exists():
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interrupt
            if r["id"] in out:
                out[r["id"]]["methods"].update(r["methods"])
                out[r["id"]]["controls"].update(r.get("controls", {}))
            else:
                out[r["id"]] = r
    return out


def summarise(records: Sequence[dict], methods: Sequence[str], seed: int = 0, reference: str = REFERENCE_METHOD) -> List[dict]:
    """Rows (method, metric, n, mean, CI, paired p-value vs ``reference``) over records."""
    rows = []
    names = list(methods) + ["uniform"]
    for m in names:
        for metric, better in METRICS.items():
            if m == "uniform" and not metric.startswith("pi_soft"):
                continue
            get = (lambda r: r.get("controls", {}).get("uniform", {}).get(metric)) if m == "uniform" else (lambda r: r["methods"].get(m, {}).get(metric))
            pairs = [(get(r), r["methods"].get(reference, {}).get(metric)) for r in records]
            stat = _mean_ci([v for v, _ in pairs], seed)
            p, test = float("nan"), ""
            if m != reference and reference in methods:
                both = [(v, w) for v, w in pairs if v is not None and w is not None and math.isfinite(v) and math.isfinite(w)]
                if len(both) >= 2:
                    p, test = paired_test([v for v, _ in both], [w for _, w in both], seed=seed)
            rows.append({
                "method": m, "metric": metric, "better": better, **stat,
                "p_vs_reference": p, "reference": reference if m != reference and reference in methods else "", "test": test,
            })
    return rows


def _mean_ci(values: Sequence[Optional[float]], seed: int) -> dict:
    """``{"n", "mean", "ci_low", "ci_high"}`` of the finite values (None / NaN left out)."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    lo, hi = bootstrap_ci(vals, seed=seed)
    return {"n": len(vals), "mean": float(np.mean(vals)) if vals else float("nan"), "ci_low": lo, "ci_high": hi}


def _write_csv(path: Path, rows: List[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def summarise_topk(records: Sequence[dict], methods: Sequence[str], ks: Sequence[float], seed: int = 0) -> List[dict]:
    """Rows (method, k, metric, n, mean, CI) of the top-k sweep stored in the records."""
    rows = []
    for m in methods:
        for k in ks:
            key = f"{k:g}"
            for metric in ("log_odds", "comprehensiveness", "sufficiency"):
                vals = [r["methods"].get(m, {}).get("topk_sweep", {}).get(key, {}).get(metric) for r in records]
                rows.append({"method": m, "topk": k, "metric": metric, **_mean_ci(vals, seed)})
    return rows


def _sweep_lines(out: Path, rows: List[dict], ks: Sequence[float], records: Optional[Sequence[dict]] = None) -> List[str]:
    _write_csv(out / "summary_topk.csv", rows)
    by = {(r["method"], r["topk"], r["metric"]): r for r in rows}
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = ["", "Top-k sweep (mean [95 % bootstrap CI]; k = fraction of the attributable tokens; "
             "int(k · |attributable|) tokens are removed, none when that is 0 — those examples count as 0):"]
    if records is not None and methods:
        cells = []
        for k in ks:
            counts = [r["methods"].get(methods[0], {}).get("topk_sweep", {}).get(f"{k:g}", {}).get("k") for r in records]
            counts = [c for c in counts if c is not None]
            if counts:
                cells.append(f"k = {k:g}: {np.mean(counts):.1f} removed on average, 0 for {sum(c == 0 for c in counts)} of {len(counts)}")
        if cells:
            lines += ["", "Tokens removed per example — " + "; ".join(cells) + "."]
    for metric in ("log_odds", "comprehensiveness", "sufficiency"):
        arrow = "↑" if METRICS[metric] == "higher" else "↓"
        lines += ["", f"| {metric} {arrow} | " + " | ".join(f"k = {k:g}" for k in ks) + " |", "|---|" + "---|" * len(ks)]
        for m in methods:
            cells = [by[(m, k, metric)] for k in ks]
            lines.append(f"| {m} | " + " | ".join(f"{_fmt(c['mean'])} [{_fmt(c['ci_low'])}, {_fmt(c['ci_high'])}]" for c in cells) + " |")
    return lines


def _fmt(v, nd=3):
    return "nan" if v is None or not math.isfinite(v) else f"{v:.{nd}f}"


def _write_summary(out: Path, rows: List[dict], config: dict, records: Sequence[dict], reference: str = REFERENCE_METHOD) -> str:
    _write_csv(out / "summary.csv", rows)
    # metrics / methods with no value at all (e.g. the soft metrics with metrics="hard") are left out
    metrics = [k for k in METRICS if any(r["metric"] == k and r["n"] > 0 for r in rows)] or list(METRICS)
    methods = list(dict.fromkeys(r["method"] for r in rows if r["n"] > 0 or r["method"] != "uniform"))
    by = {(r["method"], r["metric"]): r for r in rows}
    n = len(records)
    acc = np.mean([r["pred_label"] == r["label"] for r in records]) if records else float("nan")
    n_deg = sum(bool(r.get("degenerate")) for r in records)
    tests = sorted({r["test"] for r in rows if r["test"]})
    hard = config.get("metrics", "all") == "hard"
    soft_info = "" if hard else (
        f"degenerate for soft metrics (p(y|x_∅) ≥ p(y|x)): {n_deg}; soft samples K = {config['n_samples']}; "
        f"π grid = {config['pis']}; "
    )
    lines = [
        f"# Faithfulness: {config['model']} on {config['dataset']}",
        "",
        f"n = {n} examples; accuracy of the predicted label = {_fmt(float(acc))}; {soft_info}top-k = {config['topk']}; "
        f"n_steps = {config['n_steps']}; max_tokens = {config['max_tokens']}; seed = {config['seed']}; "
        f"prob_space = {config['prob_space']}" + ("; hard metrics only." if hard else "."),
        "",
        "Mean [95 % bootstrap CI]. Arrows: ↑ higher is better, ↓ lower is better. "
        + (
            f"`*` / `**`: paired test against {reference} p < 0.05 / p < 0.01 ({', '.join(tests) or 'no test'})."
            if reference in methods
            else f"No paired tests: {reference} is not among the methods."
        ),
        "",
        "| method | " + " | ".join(f"{m} {'↑' if METRICS[m] == 'higher' else '↓'}" for m in metrics) + " |",
        "|---|" + "---|" * len(metrics),
    ]
    for m in methods:
        cells = []
        for metric in metrics:
            r = by.get((m, metric))
            if r is None:
                cells.append("–")
                continue
            star = ""
            if math.isfinite(r["p_vs_reference"]):
                star = "**" if r["p_vs_reference"] < 0.01 else ("*" if r["p_vs_reference"] < 0.05 else "")
            cells.append(f"{_fmt(r['mean'])}{star} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    if reference in methods:
        lines += ["", f"p-values of the paired test against {reference}:", "",
                  "| method | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    for m in methods if reference in methods else []:
        if m == reference:
            continue
        lines.append(f"| {m} | " + " | ".join(_fmt(by[(m, k)]["p_vs_reference"]) if (m, k) in by else "–" for k in metrics) + " |")
    ks = config.get("topk_sweep")
    if ks:
        real = [m for m in methods if m != "uniform"]
        lines += _sweep_lines(out, summarise_topk(records, real, ks, config["seed"]), ks, records)
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text, encoding="utf-8")
    return text


def _plot(out: Path, records: Sequence[dict], methods: Sequence[str], pis: Sequence[float]) -> Optional[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; skipping the π-Soft plot (pip install matplotlib)")
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, c, ends in ((axes[0], "nc", (1.0, 0.0)), (axes[1], "ns", (0.0, 1.0))):
        for m in list(methods) + ["uniform"]:
            curves = [
                (r["controls"].get("uniform", {}) if m == "uniform" else r["methods"].get(m, {})).get(f"pi_soft_{c}_curve")
                for r in records
            ]
            curves = np.array([cv for cv in curves if cv is not None], dtype=float)
            if curves.size == 0:
                continue
            mean = np.nanmean(curves, 0)
            ax.plot([0.0] + list(pis) + [1.0], [ends[0]] + list(mean) + [ends[1]], marker="o", ms=3, label=m,
                    linestyle="--" if m in ("uniform", "random") else "-")
        ax.set_xlabel("expected retention π")
        ax.set_ylabel(f"π-Soft-{c.upper()}")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    path = out / "pi_soft_curves.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ============================================================================================
# main entry
# ============================================================================================
def evaluate(
    model=None,
    dataset: str = "sst2-sample",
    methods: Union[str, Sequence[str]] = ("aieg", "integrated_gradients", "random"),
    n: int = 20,
    max_tokens: Optional[int] = None,
    out_dir: Union[str, Path] = "faithfulness_out",
    seed: int = 0,
    topk: float = 0.20,
    *,
    topk_sweep: Optional[Sequence[float]] = None,
    metrics: str = "all",
    start: int = 0,
    reference: str = REFERENCE_METHOD,
    n_steps: int = 20,
    n_samples: int = 4,
    pis: Sequence[float] = M.DEFAULT_PI_GRID,
    prob_space: str = "vocab",
    normalise: str = "minmax",
    data_dir=None,
    template: Optional[str] = None,
    labels: Optional[Sequence[Union[str, int]]] = None,
    internal_batch_size: Optional[int] = None,
    method_options: Optional[Dict[str, dict]] = None,
    progress: bool = True,
    plot: bool = True,
) -> dict:
    """Evaluate attribution methods with every metric of :mod:`aieg_fast.metrics`.

    Args:
        model: an :class:`~aieg_fast.attribution.Explainer`, a model id / folder, or None
            (embedded SmolLM2-135M-Instruct).
        dataset: ``sst2-sample``, ``sst2-dev``, ``sst2-test`` or ``imdb``.
        methods: attribution method specs (a list or a comma-separated string): a method name,
            optionally with options as ``name:option=value[:option=value]`` (e.g.
            ``aieg:ef_mode=none`` for the ablation without emphasis factor; see
            :func:`parse_method_spec`); ``random`` is the random-scores control. The ``uniform``
            π-Soft control is always computed.
        n: number of examples (the first n of the dataset).
        reference: the method the paired tests compare against (default
            ``integrated_gradients``; e.g. ``aieg`` for an ablation table). Not part of the
            recorded settings: rerun with another reference to re-summarise.
        start: compute only examples ``start … n-1`` (the summary covers those found in the
            records); shards of one run can go to separate folders and their ``records.jsonl``
            files be concatenated into one folder with the same ``config.json``.
        max_tokens: truncate each text to this many tokens (AIEG's 50 / 200 / 400 buckets).
        out_dir: output folder (records, summary, plot); reused to resume.
        seed: seed of the random control, the soft-metric draws and the bootstrap.
        topk: fraction of attributable tokens for the hard metrics (default 0.20).
        topk_sweep: extra top-k fractions for log-odds / comprehensiveness / sufficiency (e.g.
            :data:`TOPK_SWEEP` = 5 / 10 / 20 / 30 %), reported in a second table; None: none.
        metrics: ``"all"`` (default) or ``"hard"``: log-odds, comprehensiveness and sufficiency
            only (the AIEG paper's metrics), skipping the Soft-NC/NS and π-Soft forwards, which
            cost about 10× more on long inputs.
        n_steps: path steps of the path methods. n_samples: Bernoulli draws K per soft point.
        pis: π grid. prob_space: ``"vocab"`` or ``"labels"`` (softmax over the label words).
        normalise: score normalisation of Soft-NC / NS. data_dir: evaluation data folder.
        template, labels: prompt and label words (single tokens or token ids; index = dataset
            label). Defaults: for a causal LM :data:`~aieg_fast.samples.SENTIMENT_TEMPLATE` and
            :data:`~aieg_fast.samples.SENTIMENT_LABELS`; for a classification head no template
            and the class indices 0 (negative), 1 (positive).
        method_options: per-method options, e.g. ``{"aieg": {"ef_mode": "none"}}``.

    Returns:
        ``{"rows", "summary_md", "computed", "skipped", "out_dir", "plot"}``; ``computed``
        counts the examples computed in this call, ``skipped`` those found in the records.

    Raises:
        ValueError: bad arguments (each names the argument), settings that differ from those
            already recorded in ``out_dir``. FileNotFoundError: missing data file.
    """
    from .attribution import Explainer, list_methods, load_model, method_options as _allowed

    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    methods = list(dict.fromkeys(methods))
    if not methods:
        raise ValueError("methods must name at least one method")
    if reference != REFERENCE_METHOD and reference not in methods:
        raise ValueError(f"reference must be one of the methods {methods}, got {reference!r}")
    specs = {m: parse_method_spec(m) for m in methods}
    bad = [m for m in methods if specs[m][0] not in list_methods() and m not in CONTROLS]
    if bad:
        raise ValueError(f"methods has unknown name(s) {bad}; choose from {list_methods() + list(CONTROLS)}")
    for m, (name, opts) in specs.items():
        unknown = sorted(set(opts) - set(_allowed(name))) if m not in CONTROLS else []
        if unknown:
            raise ValueError(f"methods: {m!r} has unknown option(s) {unknown}; {name} takes {sorted(_allowed(name))}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    M._check_positive_int("n_steps", n_steps)
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError(f"max_tokens must be a positive int or None, got {max_tokens!r}")
    if isinstance(start, bool) or not isinstance(start, int) or not (0 <= start < n):
        raise ValueError(f"start must be an int in [0, n) = [0, {n}), got {start!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    M._check_topk(topk)
    if metrics not in ("all", "hard"):
        raise ValueError(f"metrics must be 'all' or 'hard', got {metrics!r}")
    if topk_sweep is not None:
        if isinstance(topk_sweep, (int, float)):
            topk_sweep = [topk_sweep]
        try:
            topk_sweep = sorted({M._check_topk(k) for k in topk_sweep}) or None
        except ValueError:
            raise ValueError(f"topk_sweep values must be fractions in (0, 1], got {list(topk_sweep)}") from None
    M._check_positive_int("n_samples", n_samples)
    pis = M._check_pis(pis)
    if prob_space not in M.PROB_SPACES:
        raise ValueError(f"prob_space must be one of {list(M.PROB_SPACES)}, got {prob_space!r}")
    if normalise not in M.NORMALISATIONS:
        raise ValueError(f"normalise must be one of {list(M.NORMALISATIONS)}, got {normalise!r}")
    method_options = dict(method_options or {})
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write_test"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as err:
        raise ValueError(f"out_dir {str(out)!r} is not a writable folder ({err.strerror or err})") from None
    data = load_dataset(dataset, data_dir)
    if len(data) < n:
        print(f"note: {dataset} has {len(data)} examples ({dataset_path(dataset, data_dir) if dataset != 'sst2-sample' else 'shipped sample'}); "
              f"evaluating {len(data)}, not n = {n}", file=sys.stderr)
    data = data[:n]
    if start >= len(data):
        raise ValueError(f"start must be below the number of examples ({len(data)} in {dataset}), got {start}")
    ex = model if isinstance(model, Explainer) else load_model(model)
    classifier = ex.adapter.kind == "classifier"
    if labels is None:
        labels = [0, 1] if classifier else list(SENTIMENT_LABELS)
    labels = list(labels)
    if template is None and not classifier:
        template = SENTIMENT_TEMPLATE
    label_ids = [ex.resolve_target(l)["id"] for l in labels]

    config = {
        "model": ex.name or type(ex.model).__name__, "dataset": dataset, "max_tokens": max_tokens, "seed": seed,
        "topk": topk, "n_steps": n_steps, "n_samples": n_samples, "pis": pis, "prob_space": prob_space,
        "normalise": normalise, "template": template, "labels": list(labels), "method_options": method_options,
    }
    if metrics != "all":  # only when not the default, so folders written before the option resume
        config["metrics"] = metrics
    if topk_sweep:  # only when asked, so folders written before the sweep existed still resume
        config["topk_sweep"] = list(topk_sweep)
    cfg_path = out / "config.json"
    if cfg_path.exists():
        old = json.loads(cfg_path.read_text(encoding="utf-8"))
        diff = sorted(k for k in set(config) | set(old) if old.get(k) != config.get(k))
        if diff:
            raise ValueError(f"out_dir {str(out)!r} holds results with other settings ({', '.join(diff)}); use another out_dir")
    else:
        cfg_path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    rec_path = out / "records.jsonl"
    done = _records(rec_path)

    todo = []
    for i, (text, label) in enumerate(data):
        if i < start:
            continue
        eid = f"{dataset}:{i}"
        have = done.get(eid, {}).get("methods", {})
        missing = [m for m in methods if m not in have]
        if missing:
            todo.append((i, eid, text, label, missing))
    skipped = len(data) - start - len(todo)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="evaluate", unit="ex")
    computed = 0
    try:
        for i, eid, text, label, missing in todo:
            rec = _one_example(ex, eid, i, text, label, missing, max_tokens, template, labels, label_ids, seed, topk,
                               n_steps, n_samples, pis, prob_space, normalise, internal_batch_size, method_options,
                               need_controls="uniform" not in done.get(eid, {}).get("controls", {}),
                               specs=specs, topk_sweep=topk_sweep, hard_only=metrics == "hard")
            with open(rec_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(_json_safe(rec), allow_nan=False) + "\n")
                fh.flush()
            computed += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()

    allrec = _records(rec_path)
    ids = [f"{dataset}:{i}" for i in range(len(data))]
    records = [allrec[e] for e in ids if e in allrec]
    rows = summarise(records, methods, seed, reference)
    md = _write_summary(out, rows, config, records, reference)
    png = _plot(out, records, methods, pis) if plot and metrics == "all" else None
    return {"rows": rows, "summary_md": md, "computed": computed, "skipped": skipped, "out_dir": str(out), "plot": str(png) if png else None}


def _one_example(ex, eid, index, text, label, methods, max_tokens, template, labels, label_ids, seed, topk, n_steps,
                 n_samples, pis, prob_space, normalise, internal_batch_size, method_options, need_controls,
                 specs=None, topk_sweep=None, hard_only=False) -> dict:
    text = _truncate(ex, text, max_tokens)
    probs = ex.label_probs(text, labels, template)
    pred = int(np.argmax(probs))
    target = labels[pred]
    rec = {"id": eid, "index": index, "text": text, "label": int(label), "pred_label": pred, "target": target,
           "label_probs": probs, "methods": {}, "controls": {}}
    base = None
    ctx = None
    real = [m for m in methods if m not in CONTROLS]
    attrs = {}
    for m in real:
        name, opts = (specs or {}).get(m) or parse_method_spec(m)
        t0 = time.perf_counter()
        try:
            a = ex.attribute(text, method=name, target=target, template=template, n_steps=n_steps,
                             internal_batch_size=internal_batch_size, **{**method_options.get(name, {}), **opts})
        except (ValueError, TypeError) as err:
            raise type(err)(f"methods: {m!r} on {eid}: {err}") from err
        attrs[m] = (a, time.perf_counter() - t0)
        base = base or a
    if base is None:  # only controls asked: a cheap attribution supplies input and target
        base = ex.attribute(text, method="attention", target=target, template=template)
    ctx = M.prepare(ex, base, prob_space=prob_space, label_ids=label_ids if prob_space == "labels" else None,
                    seed=seed, instance_id=eid)
    rec.update({"n_tokens": len(base.token_ids), "n_attributable": int(sum(base.attributable)), "p": ctx.p, "p0": ctx.p0,
                "degenerate": ctx.degenerate})
    if "random" in methods:
        attrs["random"] = (M.random_attribution(base, seed, eid), 0.0)
    for m in methods:
        a, t_attr = attrs[m]
        t0 = time.perf_counter()
        if hard_only:
            r = M._flat(M.hard_metrics(ex, a, topk, ctx=ctx), None, {"degenerate": ctx.degenerate})
        else:
            r = M.evaluate_attribution(ex, a, topk=topk, n_samples=n_samples, pis=pis, normalise=normalise, ctx=ctx)
        if topk_sweep:
            hard = {"log_odds", "comprehensiveness", "sufficiency", "k"}
            r["topk_sweep"] = {
                f"{k:g}": {key: h[key] for key in hard}
                for k in topk_sweep
                for h in [{key: r[key] for key in hard} if k == topk else M.hard_metrics(ex, a, k, ctx=ctx)]
            }
        r["time_attribution_s"] = t_attr
        r["time_metrics_s"] = time.perf_counter() - t0
        r["scores"] = [float(x) for x in a.scores.tolist()]
        rec["methods"][m] = r
    if need_controls and not hard_only:
        ps = M.pi_soft(ex, base, pis=pis, n_samples=n_samples, uniform=True, ctx=ctx)
        rec["controls"]["uniform"] = M._flat(None, None, ps)
    return rec
