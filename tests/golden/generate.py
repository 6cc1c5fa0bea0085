"""Write tests/golden/golden.json: every method x {tiny GPT-2, tiny LLaMA, GPT-2 classifier} x a few
option sets, plus generation rows, from the code as it is now.

Run once to freeze behaviour (``python tests/golden/generate.py``); ``tests/methods/test_golden.py``
compares the current code against the file. Regenerate only for an intended change of numbers,
and say so in the commit message.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from golden.cases import CASES, GEN_CASES, build_models, run_case, run_gen_case  # noqa: E402


def main() -> int:
    models = build_models()
    out = {"cases": {}, "generation": {}}
    for key, (model, method, kwargs) in CASES.items():
        out["cases"][key] = run_case(models[model], method, kwargs)
    for key, (model, method, kwargs) in GEN_CASES.items():
        out["generation"][key] = run_gen_case(models[model], method, kwargs)
    path = os.path.join(HERE, "golden.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=0, sort_keys=True, allow_nan=True)
    print(f"wrote {path}: {len(out['cases'])} cases, {len(out['generation'])} generation cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
