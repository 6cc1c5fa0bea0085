"""Time of the paired tests of an evaluation summary (``aieg_fast.eval.stats.paired_test``)
against scipy's ``wilcoxon`` called as it comes, side by side on the same differences: small
samples with zeros or ties (where scipy enumerates the 2**n sign flips) and a larger one (the
normal approximation, unchanged). Run from the repository root:

    python benchmarks/bench_paired_test.py --runs 3

Prints the machine and the command, then per sample size the median time of each over ``--runs``
calls and their ratio; it stops with an error if the two p-values differ.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402


def _median_s(fn, runs: int) -> float:
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main(argv=None) -> int:
    args = machine.parse_runs(__doc__, argv, default=3, what="timed calls of each (median reported)")
    import numpy as np
    from scipy.stats import wilcoxon

    from aieg_fast.eval.stats import paired_test

    machine.print_header(argv, script=__file__)
    rng = np.random.default_rng(0)
    for n in (6, 10, 12, 13, 40):
        d = rng.integers(-3, 4, size=n) * 0.25  # zeros and ties, as rounded metrics give
        zeros = np.zeros(n)
        if paired_test(d, zeros)[0] != float(wilcoxon(d).pvalue):
            raise SystemExit(f"n={n}: paired_test's p-value differs from scipy's wilcoxon")
        old = _median_s(lambda: wilcoxon(d), args.runs)
        new = _median_s(lambda: paired_test(d, zeros), args.runs)
        print(f"n={n:3d} (zeros {int((d == 0).sum())}): scipy wilcoxon {old * 1e3:9.2f} ms, paired_test {new * 1e3:7.2f} ms, "
              f"ratio {old / new:6.1f}x, p = {paired_test(d, zeros)[0]:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
