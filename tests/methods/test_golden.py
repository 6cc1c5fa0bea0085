"""Golden outputs: every method x {tiny GPT-2, tiny LLaMA, GPT-2 classifier} x a few option sets,
plus generation rows, equal the values frozen in tests/golden/golden.json (written by
tests/golden/generate.py before the package was reorganised). Scores, info, options and target
must match to float tolerance; the recorded backend must match too (or be "reference" everywhere
when the extension is not built)."""
from __future__ import annotations

import json
import math
import os

import pytest

import aieg_fast
from golden.cases import CASES, GEN_CASES, build_models, run_case, run_gen_case

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
with open(os.path.join(HERE, "golden", "golden.json"), encoding="utf-8") as _fh:
    GOLDEN = json.load(_fh)


@pytest.fixture(scope="module")
def models():
    return build_models()


def _close(a, b, path, backend_key=False):
    if isinstance(b, dict):
        assert isinstance(a, dict), f"{path}: expected a dict, got {a!r}"
        if backend_key and not aieg_fast.HAS_EXT:
            assert set(a) == set(b) and set(a.values()) <= {"reference"}, f"{path}: {a} vs {b}"
            return
        assert set(a) == set(b), f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in b:
            _close(a[k], b[k], f"{path}.{k}", backend_key=(k == "backend"))
    elif isinstance(b, list):
        assert isinstance(a, list) and len(a) == len(b), f"{path}: length {len(a) if isinstance(a, list) else a!r} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(b, float) and not isinstance(a, bool) and isinstance(a, (int, float)):
        assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5), f"{path}: {a} vs {b}"
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


@pytest.mark.parametrize("key", sorted(CASES))
def test_golden_attribute(models, key):
    model, method, kwargs = CASES[key]
    _close(run_case(models[model], method, kwargs), GOLDEN["cases"][key], key)


@pytest.mark.parametrize("key", sorted(GEN_CASES))
def test_golden_generation(models, key):
    model, method, kwargs = GEN_CASES[key]
    _close(run_gen_case(models[model], method, kwargs), GOLDEN["generation"][key], key)


def test_golden_can_fail(models):
    """The comparison notices a changed number (the tests above are not vacuous)."""
    model, method, kwargs = CASES["gpt2/integrated_gradients/0"]
    got = run_case(models[model], method, kwargs)
    got[0]["scores"][1] += 1e-2
    with pytest.raises(AssertionError):
        _close(got, GOLDEN["cases"]["gpt2/integrated_gradients/0"], "perturbed")
