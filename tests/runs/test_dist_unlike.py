"""Dist.unlike (aieg_fast.runs): processes given other settings or data than rank 0 are named,
without a process group (its gather stands in for the processes' answers)."""
from __future__ import annotations

import math

from aieg_fast.runs import Dist


def _two(theirs):
    """Rank 0 of two, whose other process answers ``theirs`` (its (settings, digest) as
    unlike gathers it; None: the same as rank 0's)."""
    d = Dist(0, 2)
    d.gather = lambda mine: [mine, mine if theirs is None else theirs(mine)]
    return d


def test_the_same_run_passes_and_another_is_named():
    assert _two(None).unlike({"n_steps": 8}, [(0, "a", math.nan), {"x": 1}]) is None
    err = _two(lambda mine: ({"n_steps": 9}, mine[1])).unlike({"n_steps": 8}, [])
    assert "rank 1 differs from rank 0 in n_steps;" in str(err)
    err = _two(lambda mine: (mine[0], "other")).unlike({"n_steps": 8}, [])
    assert "rank 1 differs from rank 0 in the data (its examples, in order)" in str(err)


def test_data_with_keys_of_several_types_is_compared():
    """json.dumps(sort_keys=True) raised a TypeError for mapping keys of several types."""
    assert _two(None).unlike({}, [{1: "x", "b": 2}]) is None
