"""Attributions of a model loaded in bfloat16 / float16 against float32 (the mixed-precision
policy of the README): per method, the Spearman correlation of the scores over the attributable
tokens, the top-20 % overlap and the largest difference relative to the largest score.

    python benchmarks/bench_precision.py [--n 8] [--dtypes bfloat16] [--methods integrated_gradients,aieg,saliency]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

import aieg_fast
from aieg_fast.datasets import SENTIMENT_LABELS, SENTIMENT_TEMPLATE, load_dataset
from aieg_fast.verify import spearman
from aieg_fast.core.validation import DTYPES

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402


def top_overlap(a: torch.Tensor, b: torch.Tensor, frac: float = 0.2) -> float:
    k = max(1, round(frac * a.numel()))
    return len(set(a.topk(k).indices.tolist()) & set(b.topk(k).indices.tolist())) / k


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--dtypes", default="bfloat16", help="comma list of " + ",".join(DTYPES) + " (each against a float32 reference)")
    p.add_argument("--methods", default="integrated_gradients,aieg,saliency")
    p.add_argument("--n-steps", type=int, default=20)
    args = p.parse_args()
    bad = [d for d in args.dtypes.split(",") if d not in DTYPES]
    if bad:
        p.error(f"--dtypes: unknown {', '.join(bad)}; choose from {', '.join(DTYPES)}")
    machine.print_header()
    texts = [t for t, _ in load_dataset("sst2-sample")[: args.n]]
    ref = aieg_fast.load_model()
    kw = dict(template=SENTIMENT_TEMPLATE, target_fn="label_logprob", label_set=list(SENTIMENT_LABELS), n_steps=args.n_steps)
    print(f"model {ref.name}, torch {torch.__version__}, {args.n} SST-2 sample sentences, n_steps {args.n_steps}, F = label log-prob")
    base = {}
    for m in args.methods.split(","):
        t0 = time.perf_counter()
        base[m] = ref.attribute(texts, method=m, **kw)
        base[m + ":t"] = time.perf_counter() - t0
    for dt in args.dtypes.split(","):
        ex = aieg_fast.load_model(dtype=dt)
        print(f"\n| method | dtype | Spearman (mean, min) | top-20 % overlap (mean) | max |diff| / max |score| (mean) | time f32 / {dt} |")
        print("|---|---|---|---|---|---|")
        for m in args.methods.split(","):
            t0 = time.perf_counter()
            got = ex.attribute(texts, method=m, target=[r.target["id"] for r in base[m]], **kw)
            t = time.perf_counter() - t0
            sp, ov, rel = [], [], []
            for a, b in zip(base[m], got):
                mask = torch.tensor(a.attributable)
                x, y = a.scores[mask], b.scores[mask]
                sp.append(spearman(x, y))
                ov.append(top_overlap(x, y))
                rel.append(float((x - y).abs().max() / x.abs().max().clamp_min(1e-12)))
            print(f"| {m} | {dt} | {sum(sp) / len(sp):.3f}, {min(sp):.3f} | {sum(ov) / len(ov):.2f} | {sum(rel) / len(rel):.3f} "
                  f"| {base[m + ':t']:.1f} s / {t:.1f} s |")


if __name__ == "__main__":
    main()
