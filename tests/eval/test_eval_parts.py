"""An evaluation folder left by an interrupted torchrun run (records in parts/, one cut line)
resumes in one process: the parts are merged into records.jsonl, only the cut example is
computed again, the cut bytes are kept (aieg_fast.eval.folder)."""
from __future__ import annotations

import json
import shutil

from aieg_fast import eval as E

KW = dict(dataset="sst2-sample", methods="saliency,random", n=4, n_steps=2, n_samples=1, pis=(0.5,), progress=False,
          plot=False, labels=(10, 11), template="{text} :", max_tokens=20)


def _lines(folder):
    out = []
    for line in (folder / "records.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        for m in r["methods"].values():
            m.pop("time_attribution_s"), m.pop("time_metrics_s")
        out.append(r)
    return out


def test_parts_of_an_interrupted_parallel_run_are_merged(tiny_gpt2, tmp_path):
    whole = E.evaluate(tiny_gpt2, out_dir=tmp_path / "whole", **KW)
    assert whole["computed"] == 4
    lines = (tmp_path / "whole" / "records.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    left = tmp_path / "left"
    (left / "parts").mkdir(parents=True)
    shutil.copy(tmp_path / "whole" / "config.json", left)
    (left / "records.jsonl").write_text(lines[0] + lines[2], encoding="utf-8")  # rank 0 had merged 0 and 2 ...
    (left / "parts" / "records.rank00001.jsonl").write_text(lines[1] + lines[3][:50], encoding="utf-8")  # ... rank 1 was cut
    res = E.evaluate(tiny_gpt2, out_dir=left, **KW)
    assert res["computed"] == 1 and res["skipped"] == 3
    assert sorted(_lines(left), key=lambda r: r["index"]) == _lines(tmp_path / "whole")
    assert (left / "parts" / "records.rank00001.jsonl.torn").read_text() == lines[3][:50] + "\n"
    assert not (left / "parts" / "records.rank00001.jsonl").exists()
