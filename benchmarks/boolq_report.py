"""BoolQ run 5's summary with and without the questions about passages seen in training.

The LoRA recipe trains on the BoolQ dev questions with an even ``idx`` and is evaluated on those
with an odd one; the halves share no question but share passages (RESULTS_faithfulness §5.2:
31 of the 300 evaluated questions ask about a passage the model was trained on with another
question), so the run's report is read with and without them, as §5.2 says before the run.
This script writes the package's own summary (``summary.md``, ``summary.csv``, the top-k sweep
tables when the run has one: what ``aieg-fast evaluate`` writes) of the run's records twice:

* ``OUT/all``: every record of the run folder (its ``records.jsonl`` and the torchrun parts of a
  run still going, merged);
* ``OUT/unseen_passages``: the records whose passage is not in ``boolq-train``.

    python benchmarks/boolq_report.py runs/faithfulness/boolq_heldout_ft_bf16 --out benchmarks/faithfulness/boolq_heldout_ft/report

Nothing is computed again; the folder's ``config.json`` and ``methods.json`` are read, not changed.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from aieg_fast.eval.metrics import run_metric_names
from aieg_fast.eval.records import merge_record_lines
from aieg_fast.eval.report import write_summary
from aieg_fast.eval.stats import summarise
from aieg_fast.runs import read_jsonl
from boolq_passage_overlap import parts


def run_records(run_dir: Path) -> list:
    """The run's evaluated records (merged lines of records.jsonl and parts/, refused inputs left
    out). Read only: runs.part_files would cut the line a running process is writing."""
    lines = []
    for f in [run_dir / "records.jsonl", *sorted((run_dir / "parts").glob("records.rank*.jsonl"))]:
        lines += read_jsonl(f)[0] if f.is_file() else []
    return [r for r in merge_record_lines(lines).values() if r.get("methods") and "skipped" not in r]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path, help="the run folder (runs/faithfulness/boolq_heldout_ft_bf16)")
    p.add_argument("--out", type=Path, required=True, help="where the two summaries go (OUT/all, OUT/unseen_passages)")
    p.add_argument("--reference", default="integrated_gradients", help="the method of the paired tests")
    a = p.parse_args(argv)
    config = json.loads((a.run_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("dataset") != "boolq-heldout":
        p.error(f"run_dir: {str(a.run_dir)!r} holds a run on {config.get('dataset')!r}, not boolq-heldout")
    records = sorted(run_records(a.run_dir), key=lambda r: r["index"])
    if not records:
        p.error(f"run_dir: {str(a.run_dir)!r} holds no evaluated record")
    methods = [m for m in records[0]["methods"] if all(m in r["methods"] for r in records)]
    seen = {r["id"] for r in parts()[0]}  # the held-out questions whose passage is a training passage
    for name, part in (("all", records), ("unseen_passages", [r for r in records if r["id"] not in seen])):
        out = a.out / name
        out.mkdir(parents=True, exist_ok=True)
        metrics = run_metric_names(config.get("metrics") or "all", config.get("soft_maps", ["relu"]))
        write_summary(out, summarise(part, methods, config["seed"], a.reference, metrics=metrics), config, part, a.reference)
        print(f"{name}: {len(part)} questions ({sum(r['id'] in seen for r in part)} with a passage seen in training) -> {out}")


if __name__ == "__main__":
    main()
