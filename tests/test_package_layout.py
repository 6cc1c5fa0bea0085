"""The layout rules of the package (LAYOUT.md, the layout issue): module and function sizes, no
import of another module's private names (in the package, the tests and the benchmarks), and the
import-linter contracts in pyproject.toml (layers, no cycles, independent methods)."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "aieg_fast"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 120


def _py_files(*dirs):
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def test_module_sizes():
    big = {str(p.relative_to(ROOT)): n for p in _py_files("aieg_fast") if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not big, f"modules above {MAX_MODULE_LINES} lines: {big}"


def test_function_sizes():
    long = {}
    for p in _py_files("aieg_fast"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.name}"] = n
    assert not long, f"functions above {MAX_FUNCTION_LINES} lines: {long}"


def _private_imports(path: Path):
    """``from X import _name`` where X is another module (relative or absolute)."""
    bad = []
    rel = path.relative_to(ROOT) if ROOT in path.parents else path
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    bad.append(f"{rel}:{node.lineno} from {'.' * node.level}{node.module or ''} import {a.name}")
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "aieg_fast" and any(s.startswith("_") and not s.startswith("__") and s not in ("_ext", "_C") for s in parts[1:]):
                    bad.append(f"{rel}:{node.lineno} import {a.name}")
    return bad


def test_no_private_names_imported_across_modules():
    bad = [b for p in _py_files("aieg_fast", "tests", "benchmarks") for b in _private_imports(p)]
    assert not bad, "private names imported from another module:\n" + "\n".join(bad)


def test_private_import_check_can_fail(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text("from aieg_fast.core.path import _hidden_helper\nimport aieg_fast.core._hidden\n", encoding="utf-8")
    assert len(_private_imports(f)) == 2


def test_import_contracts():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install import-linter)")
    out = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_transformers_floor_is_declared_alike_and_installed():
    """pyproject.toml and the Makefile declare the same transformers minimum, the one
    tests/floor/check_transformers_floor.sh checked, and the installed release meets it."""
    import re

    import transformers
    from packaging.version import Version

    pyproject = re.search(r'"transformers>=([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    makefile = re.search(r'"transformers>=([0-9.]+)"', (ROOT / "Makefile").read_text()).group(1)
    checked = re.search(r"check_transformers_floor\.sh ([0-9.]+)\s+# the declared floor", (ROOT / "tests" / "floor" / "check_transformers_floor.sh").read_text()).group(1)
    assert pyproject == makefile
    assert Version(checked).release[:2] == Version(pyproject).release[:2]
    assert Version(transformers.__version__) >= Version(pyproject)


def test_version_and_python_floor_are_declared_alike():
    """aieg_fast.__version__ is pyproject.toml's version (setup.py and the extension read that
    one; nothing tied the package's own to it), and the README states pyproject's Python floor."""
    import re

    import aieg_fast

    text = (ROOT / "pyproject.toml").read_text()
    assert aieg_fast.__version__ == re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    floor = re.search(r'^requires-python = ">=([0-9.]+)"', text, re.M).group(1)
    assert f"Python ≥ {floor}," in (ROOT / "README.md").read_text()
    files = re.search(r'^license-files = \[(.*)\]', text, re.M).group(1)
    assert (ROOT / "LICENSE").is_file() and '"LICENSE"' in files
    # the shipped data keep their own terms: their notices travel in every wheel and source archive
    assert (ROOT / "aieg_fast" / "data" / "LICENSES.md").is_file() and '"aieg_fast/data/LICENSES.md"' in files


def test_subpackages_are_reached_from_a_bare_import():
    """The README calls aieg_fast.datasets.BOOLQ_TEMPLATE and help(aieg_fast.eval.metrics) after
    `import aieg_fast`; in a fresh interpreter they raised AttributeError (nothing imported them)."""
    code = ("import sys, aieg_fast; assert 'aieg_fast.eval' not in sys.modules; "
            "print(aieg_fast.datasets.BOOLQ_TEMPLATE.startswith('{passage}'), aieg_fast.eval.metrics.__name__, "
            "aieg_fast.eval.generation_runner.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0 and out.stdout.split() == ["True", "aieg_fast.eval.metrics", "aieg_fast.eval.generation_runner"], out.stderr[-2000:]
