"""Benchmark: one `aieg-fast evaluate` run in bfloat16 against the same run in float32 (issue 17).

Reads two evaluation folders made by the same command except ``--dtype`` (the recorded
``config.json`` must agree on everything else but the weights digest, which differs with the
dtype; the model path too unless ``--same-model``) and compares them on the examples both hold:

* per method, Spearman's ρ between the two score rows of each example (median, mean, min) and
  the overlap of their top-20 % token sets;
* per method and hard metric (log-odds, comprehensiveness, sufficiency at the run's top-k), the
  mean paired difference B − A with its 95 % bootstrap interval (none below two finite differences), next to the spread of the
  method means (max − min over methods) in A, so a difference can be read against the
  differences between methods the table is there to show;
* whether the methods come out in the same order on each hard metric (Kendall's τ of the means);
* the seconds per example of each folder (attribution + metrics, from the records' timings).

The two runs should run side by side (one core each) so the time ratio is like for like.

    OMP_NUM_THREADS=1 aieg-fast evaluate --model runs/faithfulness/smollm2-boolq --dataset boolq-heldout --n 17 \
        --methods aieg,integrated_gradients,integrated_decision_gradients,saliency,input_x_gradient,attention,scaled_attention,grad_ellm,random \
        --n-steps 20 --n-samples 2 --pis 0.1,0.3,0.5,0.7,0.9 --topk-sweep 0.05,0.1,0.2,0.3 --seed 0 --dtype bfloat16 --out B
    python benchmarks/bench_eval_precision.py A B [--out benchmarks/faithfulness/boolq_bf16_check.md]

A is the float32 folder (here runs/faithfulness/boolq_heldout_ft), B the bfloat16 one.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, spearmanr

from aieg_fast.eval.records import read_records
from aieg_fast.eval.stats import bootstrap_ci

HARD = ("log_odds", "comprehensiveness", "sufficiency")


def read(folder: Path) -> tuple:
    """(config without dtype and weights digest, dtype, {id: record}) of an evaluation folder;
    the lines of an example resumed with more methods merged (``read_records``)."""
    config = json.loads((folder / "config.json").read_text())
    dtype = config.pop("dtype", "float32")
    config.pop("model_weights", None)  # a digest of the weights in their dtype: differs with it
    records = {i: rec for i, rec in read_records(folder / "records.jsonl").items() if rec.get("methods")}
    return config, dtype, records


def top_overlap(a: np.ndarray, b: np.ndarray, frac: float) -> float:
    k = max(1, round(frac * a.size))
    return len(set(np.argsort(-a)[:k]) & set(np.argsort(-b)[:k])) / k


def compare(a_dir: Path, b_dir: Path, same_model: bool = False) -> str:
    ca, da, ra = read(a_dir)
    cb, db, rb = read(b_dir)
    if same_model:  # the user says the two paths hold one model (the weights digest differs with the dtype)
        ca.pop("model", None)
        cb.pop("model", None)
    if ca != cb:
        diff = {k: (ca.get(k), cb.get(k)) for k in set(ca) | set(cb) if ca.get(k) != cb.get(k)}
        raise SystemExit(f"the folders differ in more than the dtype: {diff}")
    ids = [i for i in ra if i in rb]
    if not ids:
        raise SystemExit("no example is in both folders")
    methods = [m for m in ra[ids[0]]["methods"] if all(m in ra[i]["methods"] and m in rb[i]["methods"] for i in ids)]
    frac = ca["topk"]
    lines = [f"# {db} against {da}: `{b_dir}` vs `{a_dir}`", "",
             f"{len(ids)} examples in both ({', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''}); top-k {frac:g}.", "",
             f"| method | ρ(scores) median / mean / min | top-{frac:.0%} overlap mean | "
             + " | ".join(f"Δ {h} ({db} − {da}) [95 % CI]" for h in HARD) + " |",
             "|---|---|---|" + "---|" * len(HARD)]
    means = {d: {h: {} for h in HARD} for d in (da, db)}
    for m in methods:
        rhos, overlaps = [], []
        for i in ids:
            sa, sb = np.asarray(ra[i]["methods"][m]["scores"], float), np.asarray(rb[i]["methods"][m]["scores"], float)
            if m != "random" and sa.size == sb.size and np.ptp(sa) > 0 and np.ptp(sb) > 0:
                rhos.append(spearmanr(sa, sb).statistic)
                overlaps.append(top_overlap(sa, sb, frac))
        cells = []
        for h in HARD:
            xa = np.array([ra[i]["methods"][m][h] for i in ids], float)
            xb = np.array([rb[i]["methods"][m][h] for i in ids], float)
            means[da][h][m], means[db][h][m] = float(np.nanmean(xa)), float(np.nanmean(xb))
            lo, hi = bootstrap_ci(xb - xa)  # NaN below two finite differences: no interval to show
            ci = f"[{lo:+.3f}, {hi:+.3f}]" if np.isfinite(lo) else "(no interval: fewer than 2 finite differences)"
            cells.append(f"{np.nanmean(xb - xa):+.3f} {ci}")
        rho = f"{np.median(rhos):.3f} / {np.mean(rhos):.3f} / {np.min(rhos):.3f}" if rhos else "– (random order)"
        ov = f"{np.mean(overlaps):.2f}" if overlaps else "–"
        lines.append(f"| {m} | {rho} | {ov} | " + " | ".join(cells) + " |")
    lines += ["", "| hard metric | spread of the method means in " + da + " (max − min) | Kendall τ of the method order, "
              f"{da} vs {db} |", "|---|---|---|"]
    for h in HARD:
        va, vb = [means[da][h][m] for m in methods], [means[db][h][m] for m in methods]
        lines.append(f"| {h} | {max(va) - min(va):.3f} | {kendalltau(va, vb).statistic:.2f} |")
    secs = {}
    for d, recs in ((da, ra), (db, rb)):
        secs[d] = np.mean([sum(r["methods"][m]["time_attribution_s"] + r["methods"][m]["time_metrics_s"]
                               for m in methods) for r in (recs[i] for i in ids)])
    lines += ["", f"Seconds per example (attribution + metrics, every method): {da} {secs[da]:.0f}, {db} {secs[db]:.0f} "
              f"({secs[da] / secs[db]:.2f}× faster in {db}); like for like only when the two ran side by side.", ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path, help="evaluation folder A (float32)")
    p.add_argument("b", type=Path, help="evaluation folder B (bfloat16), same command otherwise")
    p.add_argument("--out", type=Path, help="also write the markdown here")
    p.add_argument("--same-model", action="store_true",
                   help="the two folders' models are one model at two paths (not checked: the recorded weights "
                        "digest differs with the dtype); without it the recorded model paths must be equal")
    args = p.parse_args()
    md = compare(args.a, args.b, args.same_model)
    print(md)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(md)


if __name__ == "__main__":
    main()
