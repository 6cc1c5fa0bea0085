"""Loading the compiled extension (aieg_fast._ext): an extension built against another torch
release is refused with an ExtensionWarning that says how to build it, and the reference runs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import aieg_fast

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import warnings, torch
torch.__version__ = "2.99.0"  # as if another torch release were running
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import aieg_fast
print(aieg_fast.HAS_EXT, "|", aieg_fast.EXT_ERROR, "|", [str(w.message) for w in caught if w.category is aieg_fast.ExtensionWarning])
"""


@pytest.mark.skipif(not aieg_fast.HAS_EXT, reason=f"aieg_fast._C is not available: {aieg_fast.EXT_ERROR}")
def test_extension_of_another_torch_release_is_refused_with_a_warning():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    has_ext, error, warned = out.stdout.strip().split(" | ")
    assert has_ext == "False", out.stdout + out.stderr
    assert "built against torch" in error and "torch 2.99.0 is running" in error
    assert "running on the PyTorch reference kernels" in warned and "--no-build-isolation" in warned
    # imported from the checkout, which hides an installed copy: a reinstall would change nothing
    assert f"This is the source checkout {ROOT}" in warned and "pip install --no-build-isolation --no-deps -e ." in warned
