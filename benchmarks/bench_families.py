"""One line per model family: the time of one IG call (and one saliency call) on the tiny
random-weight model of tests/families/, to show that no family is pathologically slow (a fallback
to per-token loops, a missing fast path).

    python benchmarks/bench_families.py                  # all families, median of 5 calls each
    python benchmarks/bench_families.py --only qwen2,gemma2 --calls 9

Prints a Markdown table: family, L, IG (50 steps, internal batch 10) median ms, saliency median
ms, and IG ÷ the same family's bare forward+backward over the 50 path points (the bound).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402
TEXT = "the movie is good and the actors are great"


def _median_ms(fn, n):
    fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated family names")
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    import torch

    import aieg_fast
    from builders import family_specs

    specs = family_specs()
    names = sorted(specs) if args.only is None else [x.strip() for x in args.only.split(",") if x.strip()]
    bad = [x for x in names if x not in specs]
    if bad or not names:
        ap.error(f"--only: unknown famil{'y' if len(bad) == 1 else 'ies'} {', '.join(bad) or repr(args.only)}; choose from {', '.join(sorted(specs))}")
    torch.set_num_threads(1)
    machine.print_header(argv, script=__file__)
    print("| family | L | IG ms (50 steps) | bound ms | IG ÷ bound | saliency ms |")
    print("|---|---|---|---|---|---|")
    for name in names:
        ex = aieg_fast.load_model(*specs[name].build())
        ids, fixed = ex.encode(TEXT)
        res = ex.attribute(TEXT, method="saliency")
        tid = torch.tensor([res.target["id"]])
        E = ex.adapter.embeddings(torch.tensor([ids])).detach()

        def bound():
            for s in range(0, 50, 10):  # the same 50 points in chunks of 10, forward + input gradient
                X = E.expand(10, -1, -1).clone().requires_grad_(True)
                f = ex.adapter.target_scores(ex.adapter.hidden_last(X, None, None, None), tid)
                torch.autograd.grad(f.sum(), X)

        ig = _median_ms(lambda: ex.attribute(TEXT, method="integrated_gradients", n_steps=50, internal_batch_size=10), args.calls)
        b = _median_ms(bound, args.calls)
        sal = _median_ms(lambda: ex.attribute(TEXT, method="saliency"), args.calls)
        print(f"| {name} | {len(ids)} | {ig:.1f} | {b:.1f} | {ig / b:.2f} | {sal:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
