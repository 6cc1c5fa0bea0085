"""The reports of an evaluation folder: ``summary.md``, ``summary.csv``, the top-k tables and the plot.

* :func:`write_summary` — ``summary.csv`` (the rows of :func:`~aieg_fast.eval.stats.summarise`)
  and ``summary.md``: mean [95 % bootstrap CI] per method and metric with the paired-test stars,
  the table of p-values, the pairs of methods equal to 1e-4 on a metric (:func:`rounding_twin_lines`),
  and, when the settings hold a top-k sweep, ``summary_topk.csv`` and its
  tables (:func:`topk_lines`), and for a generation run ``summary_steps.csv`` and a per-step table
  (:func:`step_lines`);
* :func:`plot_pi_soft` — ``pi_soft_curves.png`` (``pi_soft_curves_<map>.png`` for a soft map other
  than ``"relu"``), the mean π-Soft-NC / NS curves with bootstrap bands (needs matplotlib;
  skipped with a note);
* :func:`summarise_run` — all of these for the records of a run folder, the part of the result
  of :func:`~aieg_fast.eval.runner.evaluate` and
  :func:`~aieg_fast.eval.generation_runner.evaluate_generation` they make.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..display.words import UNSAFE_CHARACTERS
from ..runs import replace_file
from .metrics import CONTROLS, HARD_METRICS, METRICS, run_metric_names, soft_key
from .records import RECORDS_FILE, read_records
from .stats import REFERENCE_METHOD, bootstrap_band, chance_check, summarise, summarise_steps, summarise_topk

__all__ = ["shown_id", "save_figure", "write_csv", "fmt", "stars", "paired_test_names", "chance_lines", "flag_lines", "rounding_twin_lines", "ROUNDING_TOL", "machine_lines", "topk_lines", "step_lines", "write_summary", "summarise_run",
           "run_title", "pi_soft_figure", "plot_pi_soft", "records_beyond"]


def run_title(config: dict) -> str:
    """What a run's reports say it is: ``"<model> on <dataset>"``, with the dtype when it is not
    float32 (``config``: the run's ``config.json``). The title of ``summary.md`` and of the plots."""
    dtype = config.get("dtype")
    return f"{config['model']} on {config['dataset']}" + (f" ({dtype})" if dtype and dtype != "float32" else "")


def chance_lines(records: Sequence[dict]) -> List[str]:
    """The markdown lines on the accuracy against chance (:func:`~aieg_fast.eval.stats.chance_check`):
    one line, and a warning paragraph when the model answers at chance."""
    c = chance_check(records)
    if not c["n"]:
        return []
    line = (f"Accuracy {fmt(c['accuracy'])} against chance {fmt(c['chance'])} (the better of the majority label's share "
            f"{fmt(c['majority'])} and a uniform guess; one-sided exact binomial p = {fmt(c['p'], 4)}).")
    if not c["at_chance"]:
        return ["", line]
    few = f" (n = {c['n']} may be too few for the test to tell: evaluate more examples)" if c["n"] < 30 else ""
    return ["", line, "", f"**The accuracy is not above chance** (p ≥ 0.05){few}. A model that answers at chance does "
            "not decide from the text, and the faithfulness metrics then cannot separate the methods (each attribution "
            "explains a decision that is not there). Use a model that decides, e.g. one fine-tuned on the task (README: "
            "\"A model that decides\"; for BoolQ `aieg-fast train-sentiment --task boolq`, evaluated on "
            "`--dataset boolq-heldout`)."]


def machine_lines(records: Sequence[dict], dtype: Optional[str] = None) -> List[str]:
    """``["", "Computed on: ..."]``: how many records each machine computed (the ``"machine"`` of
    their first lines, :mod:`aieg_fast.runs.machine`) and the method results that a later line of
    another machine added; with more than one named machine and a ``dtype`` other than float32,
    that their results need not agree beyond that dtype's rounding (records from before machines
    were named count as none of them). [] for no records."""
    if not records:
        return []
    first = Counter(r.get("machine") for r in records)
    later = Counter(v["machine"] for r in records for part in ("methods", "controls")
                    for v in (r.get(part) or {}).values() if isinstance(v, dict) and "machine" in v)

    def said(counts: Counter, what: str) -> str:
        return "; ".join(f"{n} {what} on {t!r}" if t else f"{n} {what} from before records named their machine"
                         for t, n in counts.most_common())

    text = "Computed on: " + said(first, "record(s)") + (f"; added later: {said(later, 'method result(s)')}" if later else "") + "."
    if len((set(first) | set(later)) - {None}) > 1 and dtype not in (None, "float32"):
        text += (f" In {dtype}, other CPU code paths (AVX2 against AVX-512), kernels or torch versions round otherwise: "
                 "these machines' results agree only to that precision (benchmarks/RESULTS.md).")
    return ["", text]


def save_figure(fig, path, **kwargs) -> None:
    """``fig.savefig(path, **kwargs)`` drawn in memory and written whole or not at all
    (:func:`~aieg_fast.runs.replace_file`: a kill mid-write leaves the old plot or the new one);
    the format from ``path``'s suffix."""
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", **kwargs)
    replace_file(path, buf.getvalue())


def shown_id(eid) -> str:
    """An example id as summary.md and the command line write it: as it is when it is plain (word
    characters and ``.:/@+-``, single spaces between, no ``_`` that Markdown reads as emphasis),
    else as a JSON string in a code span (C1 controls and direction marks escaped too), so a
    newline, ``#``, ``|``, HTML or a right-to-left override in a user's id stays inside its line
    and reads as text, in summary.md and on a terminal."""
    text = str(eid)
    if re.fullmatch(r"[\w.:/@+-]+( [\w.:/@+-]+)*", text) and not re.search(r"(^|\W)_|_(\W|$)", text):  # _x_ is emphasis
        return text
    quoted = re.sub(f"[{UNSAFE_CHARACTERS}\u2028\u2029]", lambda m: f"\\u{ord(m.group()):04x}",  # what the views escape,
                    json.dumps(text, ensure_ascii=False))  # and line separators, as JSON escapes (JSON writes C0 so already)
    fence = "`" * (max((len(run) for run in re.findall("`+", quoted)), default=0) + 1)
    return f"{fence} {quoted} {fence}"


def write_csv(path: Path, rows: List[dict]) -> None:
    """Write ``rows`` (dicts with the same keys) to ``path`` as CSV with a header line, the file
    replaced whole (:func:`aieg_fast.runs.replace_file`)."""
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
    replace_file(path, buf.getvalue().encode("utf-8"))


def fmt(v, nd=3) -> str:
    """``v`` with ``nd`` decimals; ``"nan"`` for None, NaN or infinity."""
    return "nan" if v is None or not math.isfinite(v) else f"{v:.{nd}f}"


def topk_lines(out: Path, rows: List[dict], ks: Sequence[float], records: Optional[Sequence[dict]] = None) -> List[str]:
    """Write ``out/summary_topk.csv`` (the rows of :func:`~aieg_fast.eval.stats.summarise_topk`)
    and return the markdown lines of the top-k sweep: tokens removed per example (from the first
    method's records, when given) and one table per hard metric, methods × k, with ``*`` / ``**``
    where the row's paired test against its reference at that k has p < 0.05 / < 0.01."""
    write_csv(out / "summary_topk.csv", rows)
    by = {(r["method"], r["topk"], r["metric"]): r for r in rows}
    methods = list(dict.fromkeys(r["method"] for r in rows))
    refs = sorted({r["reference"] for r in rows if r.get("reference")})
    tested = (f"; `*` / `**`: paired test against {refs[0]} at the same k p < 0.05 / p < 0.01, uncorrected"
              if refs else "")
    lines = ["", "Top-k sweep (mean [95 % bootstrap CI]; k = fraction of the attributable tokens; "
             "int(k · |attributable|) tokens are removed, none when that is 0 — those examples count as 0"
             + tested + "):"]
    if records is not None and methods:
        cells = []
        for k in ks:
            counts = [r["methods"].get(methods[0], {}).get("topk_sweep", {}).get(f"{k:g}", {}).get("k") for r in records]
            counts = [c for c in counts if c is not None]
            if counts:
                cells.append(f"k = {k:g}: {np.mean(counts):.1f} removed on average, 0 for {sum(c == 0 for c in counts)} of {len(counts)}")
        if cells:
            lines += ["", "Tokens removed per example — " + "; ".join(cells) + "."]
    for metric in HARD_METRICS:
        arrow = "↑" if METRICS[metric] == "higher" else "↓"
        lines += ["", f"| {metric} {arrow} | " + " | ".join(f"k = {k:g}" for k in ks) + " |", "|---|" + "---|" * len(ks)]
        for m in methods:
            cells = [by[(m, k, metric)] for k in ks]
            lines.append(f"| {m} | " + " | ".join(f"{fmt(c['mean'])}{stars(c.get('p_vs_reference'))} "
                                                   f"[{fmt(c['ci_low'])}, {fmt(c['ci_high'])}]" for c in cells) + " |")
    return lines


def paired_test_names(rows) -> str:
    """The paired tests of ``rows`` in words, and that each p-value stands alone, e.g.
    ``"wilcoxon; p = 1 where every difference is zero; each p uncorrected for the number of comparisons"``."""
    names = sorted({r["test"] for r in rows if r["test"]})
    zero = "all differences zero" in names
    text = ", ".join(n for n in names if n != "all differences zero") or ("" if zero else "no test")
    if zero:
        text += ("; " if text else "") + "p = 1 where every difference is zero"
    return text + "; each p uncorrected for the number of comparisons"


def stars(p) -> str:
    """``**`` / ``*`` for a paired test's p < 0.01 / < 0.05; "" otherwise or without a test."""
    if p is None or not math.isfinite(p):
        return ""
    return "**" if p < 0.01 else ("*" if p < 0.05 else "")


#: what the columns of each soft map reward (the note under the summary's title)
_MAP_TEXT = {
    "relu": "columns without a suffix use soft_map relu (negative scores clipped to 0: rewards positive scores "
            "that single out the decisive tokens; adding a constant to all scores changes them)",
    "minmax": "`_minmax` columns use the min-max of the signed scores (unchanged by adding a constant: rewards "
              "the ordering and gaps of all scores)",
    "abs": "`_abs` columns use |scores|",
}


def _settings_lines(config: dict, records: Sequence[dict], hard: bool) -> List[str]:
    """The lines under the summary's title: the examples (with the accuracy of a label task and
    :func:`chance_lines`, or the generated steps of a generation run) and the run's settings."""
    n = len(records)
    generation = config.get("task") == "generation"
    if generation:
        units = [st for r in records for st in r.get("steps", [])]
        what = f"n = {n} examples, {len(units)} generated steps; "
        deg = "degenerate steps for soft metrics (p(y_t|x_∅) ≥ p(y_t|x)): "
    else:
        units = records
        acc = np.mean([r["pred_label"] == r["label"] for r in records]) if records else float("nan")
        what = f"n = {n} examples; accuracy of the predicted label = {fmt(float(acc))}; "
        deg = "degenerate for soft metrics (p(y|x_∅) ≥ p(y|x)): "
    n_deg = sum(bool(u.get("degenerate")) for u in units)
    deg += f"{n_deg}; "
    soft_info = "" if hard else (
        f"{deg}soft samples K = {config['n_samples']}; π grid = {config['pis']}; soft maps = {config.get('soft_maps', ['relu'])}; "
    )
    tie_info = ("top-k ties broken at random (seed per example in the records: tie_seed)" if config.get("ties", "first") == "random"
                else "top-k ties to the lower index")
    max_tokens = "" if generation else f"max_tokens = {config['max_tokens']}; "
    lines = [what + soft_info + f"top-k = {config['topk']}; n_steps = {config['n_steps']}; {max_tokens}seed = {config['seed']}; "
             f"prob_space = {config['prob_space']}; {tie_info}" + ("; hard metrics only." if hard else "."),
             *([] if hard or not units or n_deg < len(units) else
               ["", f"**Every {'step' if generation else 'example'} is degenerate** (the empty input is at least as likely as "
                "the full one), so the soft metrics are undefined: the tables have no Soft-NC/NS or π-Soft columns and the "
                "π-Soft figures no curve. A model no likelier to give the target on the full input than on the empty one "
                "gives this: a small or untrained model, or --prob-space vocab on a label task."]),
             "", f"Prompt template: {config.get('template')!r} (None: the text alone)"
             + ("" if generation else f"; label words: {config.get('labels')}") + f"; every method explains F = {config.get('target_fn')}"
             + ("; p is p(pred) over the predicted and the runner-up label, the two F contrasts."
                if config.get("contrast_scored_over") == "pair" else ".")]
    if not generation:
        return lines + chance_lines(records)
    mode = (f"the references, teacher-forced, up to {config['n_new_tokens']} tokens" if config["teacher_forced"]
            else f"greedy continuations of up to {config['n_new_tokens']} new tokens")
    where = ("the prompt's text tokens and the generated prefix y_<t" if config["interpolate_generated"]
             else "the prompt's text tokens (the generated prefix y_<t held fixed)")
    return lines + ["", f"Generated text: {mode}. Step t explains the generated token y_t from its context prompt ⊕ y_<t and "
                    f"the metrics perturb {where}, scoring p(y_t | context) over the vocabulary. Each metric is averaged over "
                    "the steps of an example (soft metrics over its non-degenerate steps), then over the examples; the CIs "
                    "and paired tests resample examples. Per-step means: summary_steps.csv."]


def step_lines(out: Path, records: Sequence[dict], methods: Sequence[str], metrics: Sequence[str], seed: int = 0) -> List[str]:
    """Write ``out/summary_steps.csv`` (the rows of :func:`~aieg_fast.eval.stats.summarise_steps`)
    and return the markdown lines of one per-step table: the mean of the first of π-Soft-NC AUC
    and comprehensiveness in ``metrics``, methods × generated step t (n examples per step; ``–``
    where no example has a value at step t, e.g. every one's step t degenerate; the CSV keeps
    its ``n`` of 0 and ``nan``, as ``summary.csv`` does)."""
    real = [m for m in methods if m != "uniform"]
    rows = summarise_steps(records, real, metrics, seed)
    if not rows:
        return []
    write_csv(out / "summary_steps.csv", rows)
    shown = next(k for k in ("pi_soft_nc_auc", "comprehensiveness", *metrics) if k in metrics)
    by = {(r["method"], r["step"]): r for r in rows if r["metric"] == shown}
    T = 1 + max(r["step"] for r in rows)
    arrow = "↑" if METRICS[shown] == "higher" else "↓"
    lines = ["", f"{shown} {arrow} per generated step t (mean; – where no example has a value at that step; every metric "
             "with its CI in summary_steps.csv):", "",
             "| method | " + " | ".join(f"t = {t}" for t in range(T)) + " |", "|---|" + "---|" * T,
             "| n | " + " | ".join(str(by[(real[0], t)]["n"]) if (real[0], t) in by else "–" for t in range(T)) + " |"]
    for m in real:
        lines.append(f"| {m} | " + " | ".join(fmt(by[(m, t)]["mean"]) if by.get((m, t), {}).get("n") else "–"
                                               for t in range(T)) + " |")
    return lines


def _empty_topk_lines(records: Sequence[dict], methods: Sequence[str], topk) -> List[str]:
    """A note when the top-k removed no token from some examples (int(topk · |attributable|) = 0:
    short texts): their hard metrics are 0 for every method and count as such in the means."""
    ks = [r["methods"][m].get("k") for r in records for m in methods[:1] if isinstance(r.get("methods", {}).get(m), dict)]
    ks = [k for k in ks if isinstance(k, int)]
    zero = sum(k == 0 for k in ks)
    if not zero or not topk:
        return []
    note = (f"The top-k removed no token from {zero} of {len(ks)} examples (int({topk:g} · |attributable|) = 0: fewer than "
            f"{math.ceil(1 / topk)} attributable tokens); their log-odds, comprehensiveness and sufficiency are 0 for every method "
            "and count as 0 in the means")
    return ["", note + (": the hard metrics cannot tell the methods apart here." if zero == len(ks) else ".")]


def flag_lines(records: Sequence[dict], methods: Optional[Sequence[str]] = None) -> List[str]:
    """The markdown lines counting, per method, the attributions flagged by their checks
    (:class:`~aieg_fast.AttributionWarning`, recorded as ``signal_flags``: completeness, no
    signal, non-finite); none when nothing was flagged. Controls have no findings (records
    before 2026-12-03 copied the first method's). ``methods``: the methods summarised (None:
    every method of the records); a folder's records may hold others, from earlier runs."""
    flagged: Dict[str, Dict[str, int]] = {}
    for r in records:
        for m, v in r.get("methods", {}).items():
            if methods is not None and m not in methods:
                continue
            for kind in (v.get("signal_flags") or []) if m not in CONTROLS else []:
                flagged.setdefault(m, {}).setdefault(kind, 0)
                flagged[m][kind] += 1
    if not flagged:
        return []
    return ["", "Attributions flagged (AttributionWarning; 'signal_flags' in records.jsonl): "
            + "; ".join(f"{m}: " + ", ".join(f"{k} × {n}" for k, n in sorted(d.items())) for m, d in flagged.items()) + "."]


#: Largest difference, in a metric's own units, at which two methods' values on one example are
#: read as the same number (float rounding of the batched perturbed forwards is about 1e-5).
ROUNDING_TOL = 1e-4


def rounding_twin_lines(records: Sequence[dict], methods: Sequence[str], metrics: Sequence[str],
                        tol: float = ROUNDING_TOL) -> List[str]:
    """The markdown line naming each pair of methods whose values of a metric differ by at most
    ``tol`` on every example (none when no pair does): the same method in effect for that metric
    (e.g. a PosNorm that keeps the order of the scores gives the same top k; float rounding of
    the batched forwards then leaves about 1e-5), whose stars and p-values against the reference
    can still differ, since the paired test ranks differences of any size. A value present for
    one method and missing or not finite for the other makes them differ; examples where neither
    has it are passed over. A method equal to another on every metric is named once, beside the
    first such method in ``methods``, and left out of the other pairs. Generation records are
    compared on their per-example step means, as the main table reads them.

    Args:
        records: evaluation records (``r["methods"][method][metric]``: a float in the metric's
            own units, or None / NaN where it has no value). methods: the methods compared, in
            the summary's order. metrics: the metric keys compared. tol: the largest difference
            read as equal, in each metric's units.

    Returns:
        ``[]`` or ``["", line]`` (markdown). Raises nothing: values that are not finite numbers
        are treated as described above.

    Source: RESULTS_faithfulness.md §2 (V3 and V3 without PosNorm, equal to 1.6e-5 a sentence,
    starred differently against IG)."""
    def finite(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    def largest_gap(a, b, k):  # None: they differ on k (or no example has it)
        largest = None
        for r in records:
            x, y = (r.get("methods", {}).get(a) or {}).get(k), (r.get("methods", {}).get(b) or {}).get(k)
            if not (finite(x) or finite(y)):
                continue
            if not (finite(x) and finite(y) and abs(x - y) <= tol):
                return None
            largest = max(largest or 0.0, abs(x - y))
        return largest

    names = list(methods)
    gaps = {(a, b): {k: g for k in metrics if (g := largest_gap(a, b, k)) is not None}
            for i, a in enumerate(names) for b in names[i + 1:]}
    everywhere = {pair for pair, g in gaps.items() if len(g) == len(metrics)}
    named = {b for _, b in everywhere}  # equal everywhere to an earlier method
    whole = {b for a, b in everywhere if a not in named}  # ... which is itself named in its own right
    twins = [f"{a} = {b} on {'every metric' if len(g) == len(metrics) else ', '.join(g)} (largest difference {max(g.values()):.1e})"
             for (a, b), g in gaps.items() if g and a not in whole and (b not in whole or len(g) == len(metrics))]
    if not twins:
        return []
    return ["", f"Equal to {tol:g} (each of these metrics differs by at most {tol:g} on every example): " + "; ".join(twins)
            + ". Read each pair as one method on those metrics: a star or p-value that differs between them ranks differences too small to matter."]


def write_summary(out: Path, rows: List[dict], config: dict, records: Sequence[dict], reference: str = REFERENCE_METHOD,
                  refused: Sequence[dict] = ()) -> str:
    """Write ``out/summary.csv`` and ``out/summary.md`` (and the top-k files when ``config`` has a
    ``topk_sweep``, the per-step files for a generation run); return the markdown text. Under the
    tables: the pairs of methods equal to 1e-4 (:func:`rounding_twin_lines`) and the flags.

    Args:
        out: the evaluation folder. rows: :func:`~aieg_fast.eval.stats.summarise` rows.
        config: the run's settings (``config.json``; ``"task": "generation"`` for
            :func:`~aieg_fast.eval.generation_runner.evaluate_generation`). records: the
            records summarised.
        reference: the method of the paired tests.
        refused: records of examples whose input was refused (``"skipped"``: the reason); listed
            after the tables, not summarised.
    """
    write_csv(out / "summary.csv", rows)
    # metrics / methods with no value at all (e.g. the soft metrics with metrics="hard") are left out
    metrics = [k for k in METRICS if any(r["metric"] == k and r["n"] > 0 for r in rows)] or list(METRICS)
    methods = list(dict.fromkeys(r["method"] for r in rows if r["n"] > 0 or r["method"] != "uniform"))
    by = {(r["method"], r["metric"]): r for r in rows}
    tests = paired_test_names(rows)
    hard = config.get("metrics", "all") == "hard"
    map_info = "" if hard else " Soft metrics: " + "; ".join(_MAP_TEXT[m] for m in config.get("soft_maps", ["relu"])) + "."
    title = "Faithfulness of generated text" if config.get("task") == "generation" else "Faithfulness"
    none = [] if records or not refused else [
        f"**No example was evaluated**: the model refused all {len(refused)} inputs (listed below); the tables are empty.", ""]
    lines = [
        f"# {title}: {run_title(config)}",
        "",
        *none,
        *_settings_lines(config, records, hard),
        *machine_lines(records, config.get("dtype")),
        "",
        "Mean [95 % bootstrap CI]. Arrows: ↑ higher is better, ↓ lower is better." + map_info + " "
        + (
            f"`*` / `**`: paired test against {reference} p < 0.05 / p < 0.01 ({tests})."
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
            cells.append(f"{fmt(r['mean'])}{stars(r['p_vs_reference'])} [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    if reference in methods:
        lines += ["", f"p-values of the paired test against {reference}:", "",
                  "| method | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    for m in methods if reference in methods else []:
        if m == reference:
            continue
        lines.append(f"| {m} | " + " | ".join(fmt(by[(m, k)]["p_vs_reference"]) if (m, k) in by else "–" for k in metrics) + " |")
    lines += _empty_topk_lines(records, methods, config.get("topk"))
    ks = config.get("topk_sweep")
    if ks:
        real = [m for m in methods if m != "uniform"]
        lines += topk_lines(out, summarise_topk(records, real, ks, config["seed"], reference), ks, records)
    if config.get("task") == "generation":
        lines += step_lines(out, records, methods, metrics, config["seed"])
    lines += rounding_twin_lines(records, methods, metrics)
    lines += flag_lines(records, methods)
    if refused:
        lines += ["", f"{len(refused)} example(s) skipped, their input refused (records with 'skipped'):", ""]
        lines += [f"- {shown_id(r['id'])}: {r['skipped']}" for r in refused]
    text = "\n".join(lines) + "\n"
    replace_file(out / "summary.md", text.encode("utf-8"))  # whole or not at all (a kill mid-write)
    return text


def pi_soft_figure(records: Sequence[dict], methods: Sequence[str], pis: Sequence[float], soft_map: str = "relu",
                   title: Optional[str] = None):
    """The π-Soft-NC and NS figure under ``soft_map``: per method (and the ``uniform`` control,
    which ignores the map) the mean curve over ``pis`` with the analytic endpoints, a 95 %
    pointwise bootstrap band over the examples (:func:`~aieg_fast.eval.stats.bootstrap_band`)
    and n in the legend (the examples with a curve: degenerate ones, whose curve is all None,
    are left out as in the tables). Needs matplotlib.

    Each curve has its own colour and line style (up to 20 colours, then the styles cycle; the
    controls are dashed), and the legend sits below both axes in as many columns as it needs, so
    that a run with many methods (the study's two dozen) stays readable. ``title``: the figure's
    title above both axes (:func:`run_title`, so a plot shared alone names its model and data);
    None: none.

    Returns:
        the matplotlib Figure (two axes: NC, NS; the legend is ``fig.legends[0]``).
    """
    import matplotlib.pyplot as plt

    names = list(methods) + ["uniform"]
    # legend columns that fit the 10-inch width at 7 pt (about 0.06 inch a character, plus the handle)
    col_w = 0.06 * (max(len(m) for m in names) + 8) + 0.8
    ncol = max(1, min(3, int(10 // col_w), -(-len(names) // 4)))
    rows = -(-len(names) // ncol)
    axes_h, legend_h = 4.0, 0.17 * rows + 0.25  # inches: the axes, the legend below them
    fig, axes = plt.subplots(1, 2, figsize=(10, axes_h + legend_h))
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    styles = [("-", "o"), ("-.", "s"), (":", "^")]
    xs = [0.0] + list(pis) + [1.0]
    for ax, c, ends in ((axes[0], "nc", (1.0, 0.0)), (axes[1], "ns", (0.0, 1.0))):
        for i, m in enumerate(names):
            key = f"pi_soft_{c}_curve" if m == "uniform" else soft_key(f"pi_soft_{c}_curve", soft_map)
            curves = [(r["controls"].get("uniform", {}) if m == "uniform" else r["methods"].get(m, {})).get(key)
                      for r in records]
            # degenerate examples record a curve of None (no soft metric): left out, as in the tables
            curves = np.array([cv for cv in curves if cv is not None and not all(v is None for v in cv)], dtype=float)
            if curves.size == 0:
                continue
            mean = np.nanmean(curves, 0)
            style, marker = styles[(i // cmap.N) % len(styles)]
            line, = ax.plot(xs, [ends[0]] + list(mean) + [ends[1]], marker=marker, ms=3, label=f"{m} (n={len(curves)})",
                            color=cmap(i % cmap.N), linestyle="--" if m in ("uniform",) + CONTROLS else style)
            lo, hi = bootstrap_band(curves)
            if np.isfinite(lo).all():
                ax.fill_between(xs, [ends[0]] + list(lo) + [ends[1]], [ends[0]] + list(hi) + [ends[1]],
                                color=line.get_color(), alpha=0.15, linewidth=0)
        if not ax.lines:
            ax.text(0.5, 0.5, "no curve: every example is degenerate\n(p(y|x_∅) ≥ p(y|x): soft metrics undefined)",
                    ha="center", va="center", transform=ax.transAxes, fontsize=9)
        ax.set_xlabel("expected retention π")
        ax.set_ylabel(f"π-Soft-{c.upper()} (mean, 95 % bootstrap band)")
        ax.set_title(f"soft map: {soft_map}", fontsize=9)
        ax.grid(alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10, parse_math=False)  # a model path may hold '$' or '_'
    fig.tight_layout(rect=(0, legend_h / (axes_h + legend_h), 1, 1))
    return fig


def plot_pi_soft(out: Path, records: Sequence[dict], methods: Sequence[str], pis: Sequence[float],
                 soft_map: str = "relu", title: Optional[str] = None) -> Optional[Path]:
    """Write ``out/pi_soft_curves.png`` (``pi_soft_curves_<soft_map>.png`` for a map other than
    ``"relu"``; :func:`pi_soft_figure`, with ``title``); its path, or None (with a note on
    stdout) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; skipping the π-Soft plot (pip install matplotlib)")
        return None
    fig = pi_soft_figure(records, methods, pis, soft_map, title)
    path = out / ("pi_soft_curves.png" if soft_map == "relu" else f"pi_soft_curves_{soft_map}.png")
    save_figure(fig, path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def records_beyond(records: Dict[str, dict], ids: Sequence[str], methods: Sequence[str]) -> str:
    """What the folder's ``records`` (by id, :func:`~aieg_fast.eval.records.read_records`) hold
    beyond a run's selection (its example ``ids`` and ``methods``), as a sentence for a note, or
    "" when nothing: a rerun with fewer methods or examples rewrites the summary for its own
    selection, while the records keep everything."""
    asked = set(ids)
    other_methods = sorted({m for r in records.values() for m in r.get("methods") or {}} - set(methods))
    other_ids = sum(e not in asked for e in records)
    if not (other_methods or other_ids):
        return ""
    more = [f"the method(s) {other_methods}"] * bool(other_methods) + [f"{other_ids} other example(s)"] * bool(other_ids)
    return (f"the summary covers this run's {len(methods)} method(s) and {len(ids)} example(s); the records also hold "
            f"{' and '.join(more)}: rerun with them to summarise them too")


def summarise_run(out: Path, ids: Sequence[str], methods: Sequence[str], config: dict, s, reference: str,
                  metrics: str, plot: bool) -> dict:
    """The summary of the records of ``ids`` in ``out`` (tables, plots); the examples whose
    input was refused are listed, not summarised. The part of
    :func:`~aieg_fast.eval.runner.evaluate`'s result (and of
    :func:`~aieg_fast.eval.generation_runner.evaluate_generation`'s, without labels: ``chance``
    None) it makes. ``s``: the run's :class:`~aieg_fast.eval.runner.RunSettings` (its seed, π
    grid and soft maps are read)."""
    allrec = read_records(out / RECORDS_FILE)
    beyond = records_beyond(allrec, ids, methods)
    if beyond:
        print(f"note: {beyond}", file=sys.stderr)
    found = [allrec[e] for e in ids if e in allrec]
    records = [r for r in found if "skipped" not in r]
    refused = [r for r in found if "skipped" in r]
    rows = summarise(records, methods, s.seed, reference, metrics=run_metric_names(metrics, s.soft_maps))
    md = write_summary(out, rows, config, records, reference, refused)
    pngs = [plot_pi_soft(out, records, methods, s.pis, m, run_title(config)) for m in s.soft_maps] if plot and metrics == "all" else []
    pngs = [str(p) for p in pngs if p]
    return {"rows": rows, "summary_md": md, "plot": pngs[0] if pngs else None, "plots": pngs, "failed": len(refused),
            "chance": chance_check(records) if config.get("task") != "generation" else None,
            "failures": [{"id": r["id"], "reason": r["skipped"]} for r in refused]}
