"""The README's "Guarantees" section names real tests: every ``tests/...py`` file, every
``file::test`` and every bare ``test_...`` name it cites exists (so a renamed or deleted test
cannot leave a guarantee without its check)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Guarantees")
    return text[start : text.index("\n## ", start + 1)]


def _tests_in(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_guarantees_cite_existing_tests():
    sec = _section()
    files = re.findall(r"tests/[\w/]+\.py", sec)
    assert len(set(files)) >= 8, files
    named = {}
    for f in files:
        p = ROOT / f
        assert p.is_file(), f"README Guarantees cites {f}, which does not exist"
        named[f] = _tests_in(p)
    every = set().union(*named.values())
    for f, name in re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", sec):
        assert name in named[f], f"README Guarantees cites {f}::{name}, which does not exist"
    for name in re.findall(r"(?<![\w/])(test_\w+)\b(?!\.py)", sec):  # bare names and ``::name`` after a file
        assert name in every, f"README Guarantees cites {name}, found in none of the files it names"
    for item in ("Thread safety", "State restore", "What warns", "What errors", "Resumability"):
        assert f"**{item}.**" in sec
