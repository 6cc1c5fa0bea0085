"""Add a top-k sweep to a finished `aieg-fast evaluate` run folder from the scores its records keep.

A run started without ``--topk-sweep`` (run 9 restores the study's dev records, written without
one) can still report the hard metrics at other k: every record keeps each method's token scores
(``scores``), so the sweep needs only the metrics' forward passes, not the attributions again.
For each record this rebuilds the metric context of the run (same model, prompt, label words,
probability space and seed; the same ``tie_seed``) and, for every method, the hard metrics
(log-odds, comprehensiveness, sufficiency; :func:`aieg_fast.eval.hard_metrics`) of the stored
scores at each k. Before anything is written it checks, for every record and method, that the
recomputed metrics at the run's own top-k equal the recorded ones (to 1e-4): a sweep that could
not reproduce the run is refused, naming the record and method.

The records with ``topk_sweep`` added go to ``--out`` (a new folder; the run folder is left as it
is), with the run's config (``topk_sweep`` set), ``summary_topk.csv`` / the sweep tables of
``summary.md`` written by the package's report (each method's mean and CI at each k, and its
paired test against ``--reference`` at the same k: ``mean_diff``, uncorrected ``p_vs_reference``;
:func:`aieg_fast.eval.stats.summarise_topk`), and ``topk_sweep.jsonl.gz``: each record's sweep
alone (a few hundred kB, to commit beside the summary; ``summarise_topk`` reads it as it reads
the records). The first version wrote the paired tests to a file of their own,
``summary_topk_paired.csv`` (kept in the archived run-9 sweep); the same numbers are the
``mean_diff`` / ``p_vs_reference`` columns of ``summary_topk.csv`` now.

Usage (the last step of run 9 of faithfulness_runs.sh)::

    python benchmarks/topk_sweep.py runs/faithfulness/smollm2_sst2_dev_50 \\
        --out runs/faithfulness/smollm2_sst2_dev_50_topk --ks 0.05,0.1,0.2,0.3

Cost, measured on the 2-core CI machine (AMD EPYC, no GPU; one process, torch's two threads):
run 9's 200 sentences × 25 methods at k = 0.05, 0.1, 0.2, 0.3 took 118 minutes wall (the command
above, 2026-12-04), about 35 s a sentence; its first 3 sentences alone took 76 s with the model
load, so the first estimate (80 minutes) was low. Nothing is written until every record is checked, so a run
stopped early restarts from the beginning.

The label words' ids are resolved by the function ``evaluate`` uses
(:func:`aieg_fast.eval.examples.label_token_ids`, with the fields the run's template names); any
difference in the metric context is caught by the reproduction check (``p`` and the recorded
metrics) and refused.

Only classification runs (``evaluate`` on a labelled dataset, a causal LM with label words) are
supported; other folders are refused.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import sys
from pathlib import Path

import torch
from tqdm.auto import tqdm

from aieg_fast import load_model
from aieg_fast.datasets import template_fields
from aieg_fast.eval import hard_metrics
from aieg_fast.eval.context import prepare
from aieg_fast.eval.records import RECORDS_FILE, append_record, read_records
from aieg_fast.eval.examples import label_token_ids
from aieg_fast.eval.report import write_summary
from aieg_fast.eval.stats import HARD_METRICS, REFERENCE_METHOD, summarise
from aieg_fast.runs import CONFIG_FILE

TOL = 1e-4
#: each record's sweep alone (id and methods[m]["topk_sweep"]), gzipped, for the repository
SLIM_FILE = "topk_sweep.jsonl.gz"


def label_ids(ex, config: dict) -> list:
    """The label words' token ids as the run resolved them (:func:`aieg_fast.eval.examples.label_token_ids`,
    with the fields the run's template names)."""
    template = config.get("template")
    return label_token_ids(ex, config["labels"], template, template_fields(template))


def sweep_record(ex, config: dict, ids: list, rec: dict, ks: list) -> dict:
    """One record with the hard metrics at each k added to each method.

    Args:
        ex: the run's explainer. config: the run's ``config.json``. ids: the label words' token
            ids (:func:`label_ids`). rec: one record (each method's ``scores``: list[L] floats,
            one per input token, in the method's own units). ks: top-k fractions in (0, 1].

    Returns:
        ``rec`` with ``methods[m]["topk_sweep"][f"{k:g}"]`` = {log_odds, comprehensiveness,
        sufficiency (probability differences, log-odds in nats), k (tokens removed)} per k
        (:func:`aieg_fast.eval.hard_metrics`; specs/aieg.md §5.5, §7).

    Raises:
        ValueError: the rebuilt metric context (``tie_seed``, ``p``) or a recomputed metric at the
            run's own top-k differs from the record (names the record and method), or a method's
            stored scores do not match the input's length.
    """
    base = ex.attribute(rec["text"], method="attention", target=rec["target"], template=config["template"])
    ctx = prepare(ex, base, prob_space=config["prob_space"], label_ids=ids, seed=config["seed"], instance_id=rec["id"])
    if ctx.tie_seed != rec["tie_seed"] or not math.isclose(ctx.p, rec["p"], abs_tol=TOL):
        raise ValueError(f"record {rec['id']}: the metric context differs from the run's (tie_seed {ctx.tie_seed} "
                         f"vs {rec['tie_seed']}, p {ctx.p:.6f} vs {rec['p']:.6f})")
    out = dict(rec, methods={})
    for m, r in rec["methods"].items():
        scores = torch.tensor(r["scores"], dtype=base.scores.dtype)
        if scores.shape != base.scores.shape:
            raise ValueError(f"record {rec['id']}, method {m!r}: {scores.numel()} stored scores for {base.scores.numel()} tokens")
        a = dataclasses.replace(base, scores=scores)
        sweep = {}
        for k in sorted(set(ks) | {config["topk"]}):
            h = hard_metrics(ex, a, k, ties=config["ties"], ctx=ctx)
            sweep[f"{k:g}"] = {key: h[key] for key in list(HARD_METRICS) + ["k"]}
        own = sweep[f"{config['topk']:g}"]
        bad = [key for key in HARD_METRICS if not math.isclose(own[key], r[key], abs_tol=TOL)]
        if bad:
            raise ValueError(f"record {rec['id']}, method {m!r}: recomputed {bad[0]} {own[bad[0]]:.6f} differs from the "
                             f"recorded {r[bad[0]]:.6f}; the sweep does not reproduce the run")
        out["methods"][m] = dict(r, topk_sweep={f"{k:g}": sweep[f"{k:g}"] for k in ks})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, help="a finished evaluate run folder (config.json, records.jsonl)")
    ap.add_argument("--out", type=Path, required=True, help="a new folder for the records with the sweep")
    ap.add_argument("--ks", default="0.05,0.1,0.2,0.3", help="top-k fractions, comma-separated (default: %(default)s)")
    ap.add_argument("--reference", default=REFERENCE_METHOD, help="the method the paired tests compare with")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar (stderr)")
    a = ap.parse_args(argv)
    try:
        ks = sorted({float(k) for k in a.ks.split(",") if k.strip()})
    except ValueError:
        ap.error(f"--ks: fractions in (0, 1], got {a.ks!r}")
    if not ks or not all(0 < k <= 1 for k in ks):
        ap.error(f"--ks: fractions in (0, 1], got {a.ks!r}")
    config = json.loads((a.folder / CONFIG_FILE).read_text())
    if config.get("task") == "generation" or not config.get("labels") or config.get("prob_space") != "labels":
        ap.error(f"folder: {a.folder} is not a classification run with label words (task {config.get('task')!r})")
    if a.out.exists() and any(a.out.iterdir()):
        ap.error(f"--out: {a.out} exists and is not empty; give a new folder")
    records = list(read_records(a.folder / RECORDS_FILE).values())
    ex = load_model(config["model"])
    ids = label_ids(ex, config)
    bar = tqdm(records, desc="topk-sweep", unit="record", file=sys.stderr, disable=a.no_progress)
    swept = [sweep_record(ex, config, ids, r, ks) if "skipped" not in r else r for r in bar]  # all checked first
    a.out.mkdir(parents=True, exist_ok=True)
    for r in swept:
        append_record(a.out / RECORDS_FILE, r)
    config = dict(config, topk_sweep=ks)
    (a.out / CONFIG_FILE).write_text(json.dumps(config, indent=1))
    done = [r for r in swept if "skipped" not in r]
    methods = list(done[0]["methods"]) if done else []
    rows = summarise(done, methods, config["seed"], a.reference, metrics=list(HARD_METRICS))
    write_summary(a.out, rows, config, done, a.reference, [r for r in swept if "skipped" in r])  # + summary_topk.csv
    with gzip.GzipFile(a.out / SLIM_FILE, "wb", mtime=0) as f:  # the sweep alone, small enough to commit
        for r in done:
            slim = {"id": r["id"], "methods": {m: {"topk_sweep": v["topk_sweep"]} for m, v in r["methods"].items()}}
            f.write((json.dumps(slim) + "\n").encode())
    print(f"{len(done)} records, {len(methods)} methods, k = {ks}: {a.out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
