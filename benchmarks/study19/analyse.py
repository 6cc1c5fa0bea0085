"""Tables of the pre-registered AIEG study (issue 19), computed as its protocol says.

For each model's run folder (``<root>/<phase>/<model>/records.jsonl``, written by ``run.py``):

* the mean of every hard metric (top-k 20 %) per variant, with its 95 % bootstrap interval;
* the primary criterion: each variant's rank on log-odds (lower better), comprehensiveness
  (higher better) and sufficiency (lower better) among the compared variants (IG, IG0, V1–V8),
  averaged over the three metrics; its standard error over 1,000 bootstrap resamples of the
  examples (the same resamples for every variant);
* the secondary outcomes: π-Soft-NC/NS AUC under both soft maps, Soft-NC/NS;
* on ``test``: paired Wilcoxon signed-rank p-values of each variant against IG and against V1 on
  the three hard metrics, Holm-corrected over that model's family of comparisons.

Then the dev criterion averaged over models (each model weighs 1, the three GPT-nano seeds 1/3
each) and the selection rule (ties within one standard error go to the simpler variant).

``--phase imdb`` reads the IMDb buckets (``<root>/imdb/<model>_<tokens>/``) the same way, one
table per bucket with the test phase's Holm-corrected family (IG, V1 and the dev winner: hard
metrics only); the 50-token bucket is read only when it holds the protocol's minimum (200), the
200- and 400-token buckets on exactly their first ``n_read`` reviews (100 and 50) once they hold
that many.

    python benchmarks/study19/analyse.py --root runs/study19 --phase dev [--out benchmarks/study19/dev.md]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PROTOCOL = json.loads((HERE / "protocol.json").read_text(encoding="utf-8"))
HARD = {"log_odds": -1, "comprehensiveness": 1, "sufficiency": -1}  # +1: higher is better
SECONDARY = ["pi_soft_nc_auc", "pi_soft_ns_auc", "pi_soft_nc_auc_minmax", "pi_soft_ns_auc_minmax", "soft_nc", "soft_ns"]
COMPARED = [v for v in PROTOCOL["variants"] if v != "random"]


def load(folder: Path, first: int | None = None):
    """(variant ids present, {variant: {metric: np.array over the examples every variant has}},
    examples read); ``first``: read only the first that many examples in dataset order."""
    from aieg_fast.eval.records import read_records

    recs = [r for r in read_records(folder / "records.jsonl").values() if "methods" in r and not r.get("skipped")]
    recs = sorted(recs, key=lambda r: r.get("index", 0))[:first]  # a stable sort: file order without "index"
    spec_of = PROTOCOL["variants"]
    present = [v for v in spec_of if recs and all(spec_of[v] in r["methods"] for r in recs)]
    vals = {v: {m: np.array([_num(r["methods"][spec_of[v]].get(m)) for r in recs]) for m in list(HARD) + SECONDARY} for v in present}
    return present, vals, len(recs)


def _num(x):
    return float("nan") if x is None else float(x)


def _ranks(means: np.ndarray, sign: int) -> np.ndarray:
    """Ranks 1 = best of the rows of ``means`` [V] (average ranks for ties)."""
    from scipy.stats import rankdata

    return rankdata(-sign * means, method="average")


def criterion(vals, variants, n_boot: int = 1000, seed: int = 0):
    """({variant: mean rank over the hard metrics}, {variant: its bootstrap standard error})."""
    n = len(next(iter(vals.values()))["log_odds"])
    def score(idx):
        total = np.zeros(len(variants))
        for m, sign in HARD.items():
            means = np.array([np.nanmean(vals[v][m][idx]) for v in variants])
            total += _ranks(means, sign)
        return total / len(HARD)
    full = score(np.arange(n))
    rng = np.random.default_rng(seed)
    boots = np.array([score(rng.integers(0, n, n)) for _ in range(n_boot)])
    return dict(zip(variants, full)), dict(zip(variants, boots.std(axis=0, ddof=1)))


def holm(pvals):
    """Holm's step-down adjusted p-values of a dict {name: p}."""
    items = sorted(pvals.items(), key=lambda kv: kv[1])
    out, running = {}, 0.0
    for i, (k, p) in enumerate(items):
        running = max(running, min(1.0, (len(items) - i) * p))
        out[k] = running
    return out


def paired_family(vals, variants):
    """Holm-corrected Wilcoxon p-values {(variant, against, metric): (p_adj, mean difference)}."""
    from scipy.stats import wilcoxon

    raw, diff = {}, {}
    for v in variants:
        for ref in ("IG", "V1"):
            if v == ref or ref not in variants or (v == "IG" and ref == "V1"):  # V1 vs IG is listed once
                continue
            for m in HARD:
                d = vals[v][m] - vals[ref][m]
                d = d[np.isfinite(d)]
                raw[(v, ref, m)] = 1.0 if d.size == 0 or np.all(d == 0) else float(wilcoxon(d).pvalue)
                diff[(v, ref, m)] = float(d.mean()) if d.size else float("nan")
    adj = holm(raw)
    return {k: (adj[k], diff[k]) for k in raw}


def _ci(x, seed=0):
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    b = np.array([x[rng.integers(0, x.size, x.size)].mean() for _ in range(2000)])
    return float(x.mean()), float(np.quantile(b, 0.025)), float(np.quantile(b, 0.975))


def _mean(x) -> str:
    """The mean of the finite values, or "–" where there are none (hard-metric runs)."""
    x = x[np.isfinite(x)]
    return f"{x.mean():.3f}" if x.size else "–"


def _runs(root: Path, phase: str):
    """(name, folder, examples the protocol asks for, examples read or None for all) of every run
    the phase reads. IMDb: the 50-token bucket is read when it holds at least ``n_min``; the longer
    buckets ("as many as fit the time") on exactly their first ``n_read`` reviews, a stopping rule
    fixed before any of their records was read."""
    if phase == "imdb":
        spec = PROTOCOL["imdb"]
        out = []
        for b in spec["max_tokens"]:
            read = spec.get("n_read", {}).get(str(b))
            out.append((f"{spec['model']}, {b}-token bucket", root / "imdb" / f"{spec['model']}_{b}",
                        read or spec["n_min"].get(str(b), 1), read))
        return out
    return [(m, root / phase / m, PROTOCOL[phase]["n"]["nano" if "nano" in m else m], None) for m in PROTOCOL["models"]]


def model_table(model, vals, variants, n, phase):
    """(markdown lines, criterion, its SE, the Holm-corrected family on ``test`` and ``imdb``, else None)."""
    lines = [f"#### {model} (n = {n})", "", "| variant | log-odds ↓ | comprehensiveness ↑ | sufficiency ↓ | mean rank (SE) | π-Soft-NC ↑ relu / minmax | π-Soft-NS ↑ relu / minmax |",
             "|---|---|---|---|---|---|---|"]
    compared = [v for v in variants if v in COMPARED]
    crit, se = criterion(vals, compared)
    for v in variants:
        cells = []
        for m in HARD:
            mean, lo, hi = _ci(vals[v][m])
            cells.append(f"{mean:.3f} [{lo:.3f}, {hi:.3f}]")
        rank = f"{crit[v]:.2f} ({se[v]:.2f})" if v in crit else "–"
        soft = [f"{_mean(vals[v][a])} / {_mean(vals[v][b])}" for a, b in
                (("pi_soft_nc_auc", "pi_soft_nc_auc_minmax"), ("pi_soft_ns_auc", "pi_soft_ns_auc_minmax"))]
        lines.append(f"| {v} | " + " | ".join(cells) + f" | {rank} | " + " | ".join(soft) + " |")
    fam = paired_family(vals, compared) if phase in ("test", "imdb") else None
    if fam is not None:
        lines += ["", "Holm-corrected paired Wilcoxon p (mean difference variant − reference):", "",
                  "| variant | vs | log-odds | comprehensiveness | sufficiency |", "|---|---|---|---|---|"]
        for v in compared:
            for ref in ("IG", "V1"):
                if (v, ref, "log_odds") in fam:
                    lines.append(f"| {v} | {ref} | " + " | ".join(f"{fam[(v, ref, m)][1]:+.3f} (p {fam[(v, ref, m)][0]:.3g})" for m in HARD) + " |")
    return lines, crit, se, fam


def _weight(model: str) -> float:
    """A model's weight in the criterion over models: each GPT-nano seed 1/3, the others 1."""
    return 1 / 3 if model.startswith("gpt-nano") else 1.0


def select(per_model):
    """The dev winner: the lowest model-weighted mean criterion, ties within one SE to the simpler."""
    weights = {m: _weight(m) for m in per_model}
    variants = set.intersection(*[set(c) for c, _ in per_model.values()])
    total = sum(weights.values())
    score = {v: sum(weights[m] * per_model[m][0][v] for m in per_model) / total for v in variants}
    se = {v: math.sqrt(sum((weights[m] / total) ** 2 * per_model[m][1][v] ** 2 for m in per_model)) for v in variants}
    order = {v: i for i, group in enumerate(PROTOCOL["simplicity_order"]) for v in group}
    order.update({"V1": 1.0, "V2": 1.5})  # V1 before V2 on a tie
    candidates = [v for v in score if v.startswith("V")]  # IG and IG0 are ranked as comparators only
    best = min(candidates, key=score.get)
    tied = [v for v in candidates if abs(score[v] - score[best]) <= se[best]]
    winner = min(tied, key=lambda v: (order.get(v, 99), score[v]))
    return score, se, best, tied, winner


def beats(fam, v, ref, alpha: float = 0.05) -> bool:
    """The protocol's "better than ``ref``" on one model: better on at least two of the three hard
    metrics with Holm-corrected p < ``alpha`` and not significantly worse on the third."""
    better = worse = 0
    for m, sign in HARD.items():
        key = (v, ref, m) if (v, ref, m) in fam else (ref, v, m)
        if key not in fam:
            return False
        p, d = fam[key]
        d = d if key[0] == v else -d  # fam holds (variant - reference)
        if p < alpha:
            better += sign * d > 0
            worse += sign * d < 0
    return better >= 2 and worse == 0


def decide(per_model_fam, test_score, winner: str):
    """The protocol's decision on test (§4.1 "The decision"): lines of text and the default it gives.

    ``per_model_fam``: {model: Holm-corrected family}; ``test_score``: the model-weighted test
    criterion {variant: mean rank}; ``winner``: the dev selection."""
    models = list(per_model_fam)
    need = 3  # of the protocol's five models
    holds = [m for m in models if beats(per_model_fam[m], winner, "IG")]
    lines = [f"Dev winner {winner} better than IG (≥ 2 of 3 hard metrics, Holm p < 0.05, not worse on the third) on "
             f"{len(holds)} of {len(models)} models with test runs ({', '.join(holds) or 'none'}); it must on {need} of 5."]
    missing = sum(m not in models for m in PROTOCOL["models"])
    if len(holds) >= need:
        return lines + [f"**{winner} holds on test**: it becomes the default `aieg`, today's stays as `preset=\"v1\"`."], winner
    if len(holds) + missing < need:
        lines.append(f"{winner} cannot reach {need} of 5 even if the missing model(s) agree: **it does not hold on test.**")
    else:
        return lines + [f"Undecided until the {missing} missing model(s) are run."], None
    aieg_only = sorted((v for v in test_score if v.startswith("V")), key=lambda v: (test_score[v], v))
    best = min(aieg_only, key=test_score.get)
    # a missing model can move a variant's weighted criterion by up to (10 - 1) ranks times its weight
    w = {m: _weight(m) for m in PROTOCOL["models"]}
    w_have = sum(w[m] for m in models)
    w_missing = sum(w[m] for m in PROTOCOL["models"] if m not in models)
    rivals = [v for v in aieg_only if v != best and (test_score[v] - test_score[best]) * w_have < (len(COMPARED) - 1) * w_missing]
    lines.append(f"Best test criterion among V1–V8 on the models run: {best} ({test_score[best]:.2f})"
                 + (f"; the missing model(s) could still put {', '.join(rivals)} ahead of it" if rivals else "") + ".")

    over_v1 = {v: [m for m in models if v == "V1" or beats(per_model_fam[m], v, "V1")] for v in [best] + rivals}
    for v, ok in over_v1.items():
        lines.append(f"{v} better than V1 (same rule) on {len(ok)} of {len(models)} models ({', '.join(ok) or 'none'}).")
    settled = {v: v != "V1" and len(ok) >= need for v, ok in over_v1.items()}
    if rivals:
        if all(settled.values()):
            return lines + ["Whichever of them ends best, it is better than V1: **the default changes from V1**; which variant "
                            "becomes it waits for the missing model(s). The README says no variant beats IG."], None
        return lines + ["Default undecided until the missing model(s) are run."], None
    if settled[best]:
        return lines + [f"**Default becomes {best}** (significantly better than V1), the README says no variant beats IG."], best
    if best != "V1" and len(over_v1[best]) + missing >= need:
        return lines + ["Default undecided until the missing model(s) are run."], None
    return lines + ["**The default stays V1**, and the README says no variant beats IG."], "V1"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default="runs/study19")
    p.add_argument("--phase", choices=["dev", "test", "imdb"], default="dev")
    p.add_argument("--out", default=None, help="write the tables to this markdown file")
    p.add_argument("--winner", default=None, help="test phase: the dev selection (published first), for the decision")
    p.add_argument("--partial", action="store_true", help="also read runs with fewer examples than the protocol's")
    a = p.parse_args(argv)
    lines, per_model, fams = [], {}, {}
    for model, folder, size, first in _runs(Path(a.root), a.phase):
        if not (folder / "records.jsonl").is_file():
            lines += [f"#### {model}: no records yet", ""]
            continue
        variants, vals, n = load(folder, first)
        if n == 0 or not variants:
            lines += [f"#### {model}: no complete records yet", ""]
            continue
        if n < size and not a.partial:  # the protocol reads a model's run only when it is complete
            lines += [f"#### {model}: {n} of {size} examples; not read until complete (--partial to read it anyway)", ""]
            continue
        tab, crit, se, fam = model_table(model, vals, variants, n, a.phase)
        lines += tab + [""]
        per_model[model] = (crit, se)
        if fam is not None:
            fams[model] = fam
    if per_model and a.phase != "imdb":  # the criterion and decision are the SST-2 phases'
        score, se, best, tied, winner = select(per_model)
        lines += ["#### The criterion over the models present (" + ", ".join(per_model) + ")", "",
                  "| variant | mean rank (model-weighted) | SE |", "|---|---|---|"]
        lines += [f"| {v} | {score[v]:.2f} | {se[v]:.2f} |" for v in sorted(score, key=score.get)]
        if a.phase == "dev":
            lines += ["", f"Best AIEG variant: {best}; within one SE of it: {', '.join(sorted(tied))}; selected (simpler on a tie): **{winner}**."]
        if a.phase == "test" and a.winner:
            lines += ["", "#### The decision", ""] + decide(fams, score, a.winner)[0]
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
