"""Benchmark: IG on a bfloat16 copy of the embedded model against float32 (issue 18).

For each of ``--n`` SST-2 dev sentences: IG with ``--n-steps`` trapezoid steps on
``aieg_fast.load_model(dtype=torch.float32)`` and on ``aieg_fast.load_model(dtype=torch.bfloat16)``,
the same target (the float32 model's), one call after the other in one process. Reported per
sentence and overall: Spearman's ρ of the two score rows over the attributable tokens, each
result's relative completeness error |Σ IG − ΔF| / |ΔF|, whether the bfloat16 result was
flagged (``res.degenerate``), and the seconds of each call.

``--n-steps auto`` runs both with steps chosen by accuracy (tolerance 0.05, at most 257 points,
the package default max_steps),
so that both results are converged where they can be and the difference left is the precision's.

``--legacy`` also runs the bfloat16 model the way the package did before issue 18 (Δ = E − E′
rounded to bfloat16, F projected from the hidden state in bfloat16), to show what the float32
pieces change.

    nice -n 19 env OMP_NUM_THREADS=1 python benchmarks/bench_low_precision.py --n 20 --legacy --out benchmarks/auto_steps/bf16_20.json
    nice -n 19 env OMP_NUM_THREADS=1 python benchmarks/bench_low_precision.py --n 20 --n-steps auto --out benchmarks/auto_steps/bf16_20_auto.json
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

from aieg_fast.verify import spearman

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402

TEMPLATE = "Review: {text}\nIs this review positive or negative? Answer:"


def rel_error(res) -> float:
    dF = res.info["F_input"] - res.info["F_baseline"]
    return abs(res.info["convergence_delta"]) / max(abs(dF), 1e-6)


@contextlib.contextmanager
def legacy_precision(adapter):
    """The pre-issue-18 arithmetic: Δ in the embeddings' dtype, F = hidden · w in bfloat16."""
    from aieg_fast.core.batch import Batch

    prop = Batch.delta
    orig = adapter.target_scores

    def scores(hidden, target_ids, target_fn="logit"):
        if target_fn == "logit" and target_ids.numel() == 1:
            return hidden @ adapter.head.weight[target_ids.reshape(())].to(hidden.dtype)
        return orig(hidden, target_ids, target_fn)

    Batch.delta = property(lambda self: self.embeds - self.baseline)
    adapter.target_scores = scores
    try:
        yield
    finally:
        Batch.delta = prop
        del adapter.target_scores


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--n-steps", type=lambda v: v if v == "auto" else int(v), default=50, help="an int, or auto (tolerance 0.05, at most 257 points: the package default max_steps)")
    p.add_argument("--ibs", type=int, default=10)
    p.add_argument("--no-template", action="store_true", help="bare sentence, the model's next token (default: the README prompt, ' positive')")
    p.add_argument("--legacy", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    info = machine.print_header(argv, script=__file__)
    warnings.simplefilter("ignore")
    import aieg_fast
    from aieg_fast.datasets import sst2_sample

    ex32 = aieg_fast.load_model(dtype=torch.float32)
    ex16 = aieg_fast.load_model(dtype=torch.bfloat16)
    kw = dict(method="integrated_gradients", n_steps=args.n_steps, internal_batch_size=args.ibs)
    if not args.no_template:
        kw.update(template=TEMPLATE, target=" positive")
    recs = []
    for text, _ in sst2_sample()[: args.n]:
        t = time.perf_counter()
        a = ex32.attribute(text, **kw)
        t32 = time.perf_counter() - t
        kw16 = dict(kw, target=a.target["id"])
        t = time.perf_counter()
        b = ex16.attribute(text, **kw16)
        t16 = time.perf_counter() - t
        v = torch.tensor(a.attributable)
        rec = {"L": len(a.tokens), "rho": spearman(a.scores[v], b.scores[v]), "err32": rel_error(a), "err16": rel_error(b),
               "steps32": a.info.get("n_steps_used", args.n_steps), "steps16": b.info.get("n_steps_used", args.n_steps),
               "flag16": [f["kind"] for f in b.degenerate], "sec32": t32, "sec16": t16,
               "F32": a.info["F_input"], "F16": b.info["F_input"], "dF32": a.info["F_input"] - a.info["F_baseline"],
               "dF16": b.info["F_input"] - b.info["F_baseline"]}
        if args.legacy:
            with legacy_precision(ex16.adapter):
                c = ex16.attribute(text, **kw16)
            rec.update(rho_legacy=spearman(a.scores[v], c.scores[v]), err16_legacy=rel_error(c))
        recs.append(rec)
        print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in rec.items()), flush=True)
    rhos = [r["rho"] for r in recs]
    summary = {"n": len(recs), "rho_median": statistics.median(rhos), "rho_mean": statistics.mean(rhos), "rho_min": min(rhos),
               "n_rho_ge_0.95": sum(r >= 0.95 for r in rhos), "err32_median": statistics.median(r["err32"] for r in recs),
               "err16_median": statistics.median(r["err16"] for r in recs), "flagged16": sum(bool(r["flag16"]) for r in recs),
               "flagged_and_err16_gt_0.1": sum(bool(r["flag16"]) and r["err16"] > 0.1 for r in recs),
               "sec32": sum(r["sec32"] for r in recs), "sec16": sum(r["sec16"] for r in recs)}
    if args.legacy:
        lr = [r["rho_legacy"] for r in recs]
        summary.update(rho_legacy_median=statistics.median(lr), rho_legacy_mean=statistics.mean(lr), rho_legacy_min=min(lr),
                       err16_legacy_median=statistics.median(r["err16_legacy"] for r in recs))
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"argv": sys.argv[1:], "torch": torch.__version__, "machine": info, "summary": summary, "records": recs}, indent=1))


if __name__ == "__main__":
    main()
