"""Time of ``aieg_fast.models.weights_digest`` (the SHA-256 of every parameter that run folders
record as ``model_weights``, so a resume with other weights is refused) on the embedded
SmolLM2-135M-Instruct, float32 (538 MB of weights). Run from the repository root:

    OMP_NUM_THREADS=1 python benchmarks/bench_weights_digest.py --runs 5

Prints the machine and the command, the weights' size, and the median / min over ``--runs``
calls (after one warm-up call).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402


def main(argv=None) -> int:
    args = machine.parse_runs(__doc__, argv, default=5, what="timed calls (after one warm-up call)")
    import aieg_fast
    from aieg_fast.models import weights_digest

    machine.print_header(argv, script=__file__)
    ex = aieg_fast.load_model()
    size = sum(p.numel() * p.element_size() for p in ex.model.parameters())
    weights_digest(ex.model)
    ts = []
    for _ in range(args.runs):
        t = time.perf_counter()
        weights_digest(ex.model)
        ts.append(time.perf_counter() - t)
    print(f"weights: {size / 1e6:.0f} MB ({next(ex.model.parameters()).dtype}); weights_digest: median "
          f"{statistics.median(ts):.3f} s, min {min(ts):.3f} s over {args.runs} calls "
          f"({size / 1e6 / statistics.median(ts):.0f} MB/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
