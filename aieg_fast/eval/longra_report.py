"""The report of a LongRA run (:func:`aieg_fast.eval.longra.evaluate_longra`): ``summary.csv``,
``summary.md`` and ``longra_topk.png``.

Rows: per method and metric (``relative_top<k>``, ``relative_rank``, ``distractor_mass``) the
mean and 95 % bootstrap CI over the kept instances and the paired test against the reference
method (:mod:`aieg_fast.eval.stats`); the ``uniform`` row is what a flat attribution gets (the
distractor's share of the tokens) and a random order (k / |attributable| in the top k; rank
(|attributable| + 1) / 2).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..runs import replace_file
from .metrics import CONTROLS
from .report import flag_lines, fmt, machine_lines, paired_test_names, run_title, save_figure, stars, write_csv
from .stats import mean_ci, vs_reference

__all__ = ["LONGRA_KS", "longra_metric_names", "summarise_longra", "plot_longra_topk"]

#: default k of "the relative word is in the top k".
LONGRA_KS = (1, 3, 5)


def longra_metric_names(ks: Sequence[int]) -> Dict[str, str]:
    """metric → ``"higher"`` / ``"lower"`` (which is better), in table order."""
    return {**{f"relative_top{k}": "higher" for k in ks}, "relative_rank": "lower", "distractor_mass": "lower"}


def _uniform(r: dict, metric: str) -> Optional[float]:
    """A flat / random-order attribution's value of ``metric`` on record ``r``."""
    n = r["n_attributable"]
    if metric == "distractor_mass":
        return r["distractor_share"]
    if metric == "relative_rank":
        return (n + 1) / 2
    return min(1.0, int(metric[len("relative_top"):]) / n)


def _rows(records: Sequence[dict], methods: Sequence[str], metrics: Dict[str, str], reference: str, seed: int) -> List[dict]:
    """Per method (and the ``uniform`` control, never tested: it is a bound, not a method) and
    metric: mean, CI and the paired test against ``reference`` (:func:`~aieg_fast.eval.stats.vs_reference`)."""
    rows = []
    for m in list(methods) + ["uniform"]:
        for metric, better in metrics.items():
            vals = [(_uniform(r, metric) if m == "uniform" else r["methods"].get(m, {}).get(metric)) for r in records]
            refs = [r["methods"].get(reference, {}).get(metric) for r in records]
            test = vs_reference(list(zip(vals, refs)), m, reference, [] if m == "uniform" else methods, seed)
            rows.append({"method": m, "metric": metric, "better": better, **mean_ci(vals, seed), **test})
    return rows


def plot_longra_topk(out: Path, records: Sequence[dict], methods: Sequence[str], k_max: int = 10,
                     title: Optional[str] = None) -> Optional[Path]:
    """Write ``out/longra_topk.png``: per method the share of kept instances whose relative word
    is in the top k, k = 1 … ``k_max`` (from the recorded ranks), and the random order's
    expectation, under ``title`` (:func:`~aieg_fast.eval.report.run_title`; None: none); its
    path, or None (with a note) without matplotlib or without a kept instance."""
    if not records:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; skipping the LongRA plot (pip install matplotlib)")
        return None
    ks = np.arange(1, k_max + 1)
    fig, ax = plt.subplots(figsize=(5, 4))
    for m in methods:
        ranks = np.array([r["methods"][m]["relative_rank"] for r in records if m in r["methods"]], dtype=float)
        ranks = ranks[np.isfinite(ranks)]  # a non-finite attribution has no rank
        if ranks.size:
            ax.plot(ks, [(ranks <= k).mean() for k in ks], marker="o", ms=3, label=f"{m} (n={ranks.size})",
                    linestyle="--" if m in CONTROLS else "-")
    sizes = np.array([r["n_attributable"] for r in records], dtype=float)
    ax.plot(ks, [np.minimum(1.0, k / sizes).mean() for k in ks], color="grey", linestyle=":", label="random order (expected)")
    ax.set_xlabel("k")
    ax.set_ylabel("share with the relative word in the top k")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=8, parse_math=False)
    fig.tight_layout()
    path = out / "longra_topk.png"
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def summarise_longra(out: Path, records: Sequence[dict], methods: Sequence[str], config: dict, reference: str,
                     plot: bool = True) -> dict:
    """Write the summary of a LongRA run's records (module docstring) and return
    ``{"rows", "summary_md", "kept", "filtered", "plot"}`` (``filtered``: test → count)."""
    kept = [r for r in records if "skipped" not in r]
    filtered: Dict[str, int] = {}
    for r in records:
        if "skipped" in r:
            filtered[r.get("filter", "other")] = filtered.get(r.get("filter", "other"), 0) + 1
    metrics = longra_metric_names(config["ks"])
    rows = _rows(kept, methods, metrics, reference, config["seed"])
    if rows:
        write_csv(out / "summary.csv", rows)
    by = {(r["method"], r["metric"]): r for r in rows}
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(filtered.items())) or "none"
    lines = [f"# LongRA: {run_title(config)}", "",
             f"{len(records)} instances looked at; {len(kept)} kept by the filter (one-token target and relative word, "
             f"the model's greedy next token right with and without the distractor); left out: {reasons}. "
             f"F = {config['target_fn']}; n_steps = {config['n_steps']}; seed = {config['seed']}.",
             *machine_lines(records, config.get("dtype")), "",
             "Mean [95 % bootstrap CI] over the kept instances. relative_top<k>: share with the relative word in the "
             "top k (↑); relative_rank: its rank, 1 = top, ties against it (↓); distractor_mass: share of |scores| on "
             "the distractor clause (↓). uniform: a flat attribution (distractor mass = the distractor's share of "
             "the tokens) and a random order (top-k rate k / |attributable|). "
             + (f"`*` / `**`: paired test against {reference} p < 0.05 / p < 0.01 ({paired_test_names(rows)})." if reference in methods
                else f"No paired tests: {reference} is not among the methods."), "",
             "| method | " + " | ".join(f"{k} {'↑' if b == 'higher' else '↓'}" for k, b in metrics.items()) + " |",
             "|---|" + "---|" * len(metrics)]
    for m in list(methods) + ["uniform"]:
        cells = []
        for k in metrics:
            r = by.get((m, k))
            if r is None:
                cells.append("–")
                continue
            cells.append(f"{fmt(r['mean'])}{stars(r['p_vs_reference'])} [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += flag_lines(kept, methods)
    if not kept:
        why = []
        if any(k.endswith("not_one_token") for k in filtered):
            why.append("the target or the relative word is more than one token for this tokenizer (the check needs "
                       "one-token words)")
        if any(k.startswith("wrong_") for k in filtered):
            why.append("the model does not predict the target with and without the distractor")
        if "input" in filtered:
            why.append("the model refused the input (the reason of each is in records.jsonl, 'skipped')")
        lines += ["", f"No instance passed the filter ({reasons}): " + "; ".join(why or ["see the reasons"]) + ". There is "
                  "nothing to check; use a larger or fine-tuned model, or look at more instances."]
    text = "\n".join(lines) + "\n"
    replace_file(out / "summary.md", text.encode("utf-8"))  # whole or not at all (a kill mid-write)
    png = plot_longra_topk(out, kept, methods, title=run_title(config)) if plot else None
    return {"rows": rows, "summary_md": text, "kept": len(kept), "filtered": filtered, "plot": str(png) if png else None}
