"""Per-call time of small attributions on the tiny GPT-2 of tests/builders.py, where the fixed
work of a call (argument checks, tokenising, the batch, the context, recording backends, building
the result) is a visible share of the total. Used to compare two checkouts side by side:

    python benchmarks/bench_call_overhead.py                     # this checkout
    PYTHONPATH=/path/to/other python /path/to/other/benchmarks/bench_call_overhead.py --tests /path/to/other/tests

Prints the median (and the minimum, the figure least disturbed by other jobs on a shared
machine) over --calls calls per method (integrated gradients: --calls / 5, at least 10, since each
call runs its path; one torch thread, after 20 warm-up calls).
``--ids`` adds each method called with ``input_ids=`` (the text's ids, no tokenising) where the
checkout has it.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", default=str(Path(__file__).resolve().parents[1] / "tests"), help="folder with builders.py")
    ap.add_argument("--methods", default="saliency,input_x_gradient,integrated_gradients")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--ids", action="store_true", help="also time attribute(input_ids=...)")
    args = ap.parse_args(argv)
    sys.path.insert(0, args.tests)
    import torch

    import aieg_fast
    from builders import make_tiny_gpt2

    torch.set_num_threads(1)
    machine.print_header(argv, script=__file__)
    ex = aieg_fast.load_model(*make_tiny_gpt2())
    text = " ".join(["the movie is good and the actors are great"] * 3)
    ids = ex.encode(text)[0]
    runs = [(m, dict(text=text)) for m in args.methods.split(",")]
    if args.ids:
        runs += [(m, dict(input_ids=ids)) for m in args.methods.split(",")]
    for m, given in runs:
        kw = dict(given, n_steps=50, internal_batch_size=10) if "integrated" in m else dict(given)
        n = args.calls if "integrated" not in m else max(10, args.calls // 5)
        for _ in range(20):
            ex.attribute(method=m, **kw)
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            ex.attribute(method=m, **kw)
            ts.append(time.perf_counter() - t)
        name = m + (" (input_ids)" if "input_ids" in given else "")
        print(f"{name:36s} {statistics.median(ts) * 1e3:8.3f} ms  (median of {n} calls, L = {len(ids)}; "
              f"min {min(ts) * 1e3:.3f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
