"""Position effects behind the faithfulness tables: where methods put their top token, and how
much of a method's hard-metric score position alone would give (RESULTS_faithfulness.md §5.1, §5.3).

Two checks on an evaluation's records (``records.jsonl`` or an archive ``.jsonl.gz``):

``top``: for every method, the number of explained rows (examples, or generated steps of open
generation), the share whose top-scored attributable token is the first / the last one (the
attention sink of these models; the token just before the prediction), and the mean share of
its top 20 % that are among the last 20 % of the attributable tokens (what the recency control
below removes). Ties go to the earlier position; rows without stored scores (the random control
of a classification run) are skipped. No model needed.

    python benchmarks/position_check.py top benchmarks/faithfulness/gen_wikitext/records.jsonl.gz

``controls`` (generation runs; loads the run's model): recomputes the hard metrics (log-odds,
comprehensiveness, sufficiency; top 20 %, the run's random tie order) of every generated step for

* each method in ``--methods`` as recorded (this gives the run's numbers back: a check of the
  script), and with the first attributable token's score moved to the bottom (``− first``);
* the random control as recorded, and with the first token moved to the top (``random + first``);
* ``recency``: scores rising with the position, so the top k are the k tokens just before the
  prediction (:func:`aieg_fast.eval.metrics.recency_attribution`; ``evaluate --methods ...,recency``
  computes it in a new run).

``--soft`` adds the π-Soft-NC / NS AUC of each (relu map; the run's ``--pis`` and
``--n-samples`` must be given for its numbers to come back).

Means are over the steps of a prompt, then over the prompts, as in the run's summary. The model
is the embedded SmolLM2-135M-Instruct unless ``--model``.

    python benchmarks/position_check.py controls benchmarks/faithfulness/gen_wikitext/records.jsonl.gz \\
        --methods attention,aieg:preset=v1,integrated_gradients
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import torch

from aieg_fast.eval.context import prepare
from aieg_fast.eval.generation_runner import step_views
from aieg_fast.eval.metrics import hard_metrics, random_attribution, recency_attribution
from aieg_fast.eval.records import merge_record_lines
from aieg_fast.eval.soft import pi_soft
from aieg_fast.methods.registry import split_method_specs

METRICS = ("log_odds", "comprehensiveness", "sufficiency")


def read(path: Path) -> dict:
    """Records by example id of ``records.jsonl`` or of an archive (``.jsonl.gz``)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return merge_record_lines(json.loads(line) for line in f if line.strip())


# ---------------------------------------------------------------------------------- top
def _score_rows(method_record: dict):
    """The score vectors of one method's record: one per generated step, or the one of a
    classification example. ``None`` marks a position that is not attributable (template or
    padding) and is left out."""
    scores = method_record.get("scores")
    if not scores:
        return []
    return scores if isinstance(scores[0], list) else [scores]


def top_positions(records: dict, topk: float = 0.2) -> dict:
    """{method: (rows, share of rows whose top token is the first attributable one, ... the
    last one, mean share of the top k that are among the last k)} with k = int(topk · the
    attributable tokens) (rows with k = 0 left out of the last share; NaN if all are)."""
    counts = defaultdict(lambda: [0, 0, 0, 0.0, 0])
    for rec in records.values():
        for method, mrec in rec.get("methods", {}).items():
            for row in _score_rows(mrec):
                kept = [i for i, s in enumerate(row) if s is not None]
                if not kept:
                    continue
                order = sorted(kept, key=lambda i: (-row[i], i))
                c = counts[method]
                c[0] += 1
                c[1] += order[0] == kept[0]
                c[2] += order[0] == kept[-1]
                k = int(len(kept) * topk)
                if k:
                    c[3] += len(set(order[:k]) & set(kept[-k:])) / k
                    c[4] += 1
    return {m: (n, first / n, last / n, recent / n_k if n_k else float("nan"))
            for m, (n, first, last, recent, n_k) in counts.items()}


# ---------------------------------------------------------------------------------- controls
def _moved_first(attr, to_top: bool):
    """``attr`` with its first attributable token's score above (or below) every other score."""
    s = attr.scores.clone().float()
    first = attr.attributable.index(True)
    s[first] = s.max() + 1.0 if to_top else s.min() - 1.0
    return dataclasses.replace(attr, scores=s)


def _step_variants(view, rec: dict, t: int, methods, seed: int) -> dict:
    """{variant name: attribution} of step t (see the module documentation)."""
    n = len(view.token_ids)
    out = {}
    for m in methods:
        row = rec["methods"][m]["scores"][t][:n]
        scored = dataclasses.replace(view, scores=torch.tensor(
            [0.0 if v is None or not math.isfinite(v) else float(v) for v in row]))
        out[m] = scored
        out[f"{m} − first"] = _moved_first(scored, to_top=False)
    rnd = random_attribution(view, seed, f"{rec['id']}#{t}")
    out["random"] = rnd
    out["random + first"] = _moved_first(rnd, to_top=True)
    out["recency"] = recency_attribution(view)
    return out


def _step_metrics(ex, attr, ctx, topk: float, soft) -> dict:
    """Hard metrics of one step, with π-Soft-NC / NS AUC (relu map) when ``soft`` = (pis, n_samples)."""
    out = {k: v for k, v in hard_metrics(ex, attr, topk, ctx=ctx).items() if k in METRICS}
    if soft is not None:
        r = pi_soft(ex, attr, pis=soft[0], n_samples=soft[1], soft_map="relu", ctx=ctx)
        out.update(pi_soft_nc_auc=r["nc"]["auc"], pi_soft_ns_auc=r["ns"]["auc"])
    return out


def _mean(vals):
    vals = [v for v in vals if math.isfinite(v)]
    return sum(vals) / len(vals) if vals else float("nan")


def controls(ex, records: dict, methods, seed: int = 0, topk: float = 0.2, soft=None) -> dict:
    """{variant: {metric: mean over prompts of the mean over steps}} (see the module docs);
    ``soft`` = (pis, n_samples) adds the π-Soft AUCs (relu map; degenerate steps left out)."""
    sums: dict = {}
    for rec in records.values():
        if "generated_ids" not in rec:
            continue
        views = step_views(ex, rec["prompt"], [int(i) for i in rec["generated_ids"]])
        per_variant: dict = defaultdict(list)
        for t, view in enumerate(views):
            ctx = prepare(ex, view, prob_space="vocab", seed=seed, instance_id=f"{rec['id']}#{t}")
            for name, attr in _step_variants(view, rec, t, methods, seed).items():
                per_variant[name].append(_step_metrics(ex, attr, ctx, topk, soft))
        for name, steps in per_variant.items():
            acc = sums.setdefault(name, defaultdict(list))
            for k in steps[0]:
                acc[k].append(_mean([h[k] for h in steps]))
    return {name: {k: _mean(v) for k, v in acc.items()} for name, acc in sums.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="check", required=True)
    top = sub.add_parser("top", help="where each method's top token sits (no model)")
    top.add_argument("records", type=Path, help="records.jsonl of an evaluation, or an archive (.jsonl.gz)")
    c = sub.add_parser("controls", help="hard metrics of position controls (generation runs; loads the model)")
    c.add_argument("records", type=Path, help="records.jsonl of a generation run, or an archive (.jsonl.gz)")
    c.add_argument("--methods", default="attention", help="comma-separated method specs as in the records")
    c.add_argument("--model", default=None, help="the run's model (default: the embedded SmolLM2-135M-Instruct)")
    c.add_argument("--seed", type=int, default=0, help="the run's --seed (tie order, random control, soft draws)")
    c.add_argument("--soft", action="store_true", help="add π-Soft-NC / NS AUC (relu map; slower)")
    c.add_argument("--pis", default="0.1,0.3,0.5,0.7,0.9", help="the run's π grid (with --soft)")
    c.add_argument("--n-samples", type=int, default=2, help="the run's draws per π (with --soft)")
    args = p.parse_args(argv)
    records = read(args.records)
    if args.check == "top":
        print("| method | rows | top token first | top token last | top 20 % among the last 20 % |")
        print("|---|---|---|---|---|")
        for method, (n, first, last, recent) in top_positions(records).items():
            print(f"| {method} | {n} | {first:.2f} | {last:.2f} | {recent:.2f} |")
        return
    methods = split_method_specs(args.methods)  # a spec's JSON value may hold a comma (aieg:attn_layers=[0,1])
    missing = sorted({m for m in methods for r in records.values() if "generated_ids" in r and m not in r.get("methods", {})})
    if missing:
        raise SystemExit(f"--methods: {missing} not in every record of {args.records}")
    from aieg_fast.explainer import load_model

    soft = ([float(x) for x in args.pis.split(",")], args.n_samples) if args.soft else None
    res = controls(load_model(args.model), records, methods, seed=args.seed, soft=soft)
    cols = list(next(iter(res.values())))
    print("| scores | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, v in res.items():
        print(f"| {name} | " + " | ".join(f"{v[c]:.3f}" for c in cols) + " |")


if __name__ == "__main__":
    main()
