"""Statistics of an evaluation (aieg_fast.eval.stats): paired tests and bootstrap CIs."""
from __future__ import annotations

from aieg_fast.eval import stats as E


def test_paired_test_and_bootstrap():
    p, name = E.paired_test([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0] * 6)
    assert p < 0.05 and name
    p, _ = E.paired_test([1.0, -1.0, 1.0, -1.0], [0.0] * 4)
    assert p > 0.5
    assert E.paired_test([1.0, 2.0], [1.0, 2.0])[0] == 1.0
    lo, hi = E.bootstrap_ci([1.0, 2.0, 3.0, 4.0])
    assert 1.0 <= lo < 2.5 < hi <= 4.0
