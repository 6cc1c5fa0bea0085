"""Run one piece of the pre-registered AIEG study (issue 19) exactly as its protocol says.

The protocol is ``protocol.json`` beside this file (RESULTS_faithfulness.md §4.1 in words): the
variants and their method specs, the models, the splits and sizes, the settings. This script
reads it and calls :func:`aieg_fast.eval.evaluate`, so a reader reruns what was run; every
piece resumes from its records (rerun the same command after an interruption).

    python benchmarks/study19/run.py train  --model gpt-nano-s1 --models-dir MODELS
    python benchmarks/study19/run.py dev    --model gpt-nano-s1 --models-dir MODELS --out runs/study19
    python benchmarks/study19/run.py test   --model smollm2-sst2 --out runs/study19
    python benchmarks/study19/run.py imdb   --bucket 50 --methods IG,V1,V2 --out runs/study19
    python benchmarks/study19/run.py archive --out runs/study19

The records travel in the repository (``records/<phase>/<run>.jsonl.gz`` and its
``.config.json`` beside this file, written by ``benchmarks/archive_records.py``): a piece
restores them into its run folder before it starts and adds its new ones when it ends (rank 0
only under torchrun), and ``archive`` adds every run folder's records while pieces are still
running (commit them), so a run that takes several sessions resumes on a fresh machine. The
archived config names the model folder; use the same ``--models-dir`` (this study's runs used
``/work/study19``) or the evaluation refuses the folder. A nano model's weights must match the
sha256 in ``models.json`` (the records were computed with them).

``--n`` stops earlier than the protocol's size (a resumable piece; the summary says how many
are done); it never goes beyond it. Under ``torchrun`` the examples are shared between processes;
spell it ``--n-examples`` there (torchrun's parser takes ``--n`` for one of its own options):

    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 benchmarks/study19/run.py imdb \
        --bucket 400 --n-examples 200 --methods IG,V1,V3 --out runs/study19

Nano models are looked up as folders ``MODELS/<id>`` (trained by ``train``, which runs the
protocol's ``train-nano`` command).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import archive_records  # noqa: E402  (benchmarks/archive_records.py)

PROTOCOL = json.loads((HERE / "protocol.json").read_text(encoding="utf-8"))
#: sha256 of the nano models the archived records were computed with
MODELS = HERE / "models.json"


def _model_source(model: str, models_dir: str) -> str:
    if model not in PROTOCOL["models"]:
        raise SystemExit(f"--model must be one of {list(PROTOCOL['models'])}, got {model!r}")
    if "nano" not in model:
        return model
    path = Path(models_dir) / model
    if not (path / "config.json").is_file():
        raise SystemExit(f"{path} holds no trained model; run: python {sys.argv[0]} train --model {model} --models-dir {models_dir}")
    known = json.loads(MODELS.read_text(encoding="utf-8"))["models"].get(model) if MODELS.is_file() else None
    if known is not None:
        got = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
        if got != known["sha256"]:
            raise SystemExit(f"--models-dir: {path} holds other weights (sha256 {got[:12]}...) than the study's records were "
                             f"computed with ({known['sha256'][:12]}..., {MODELS.name}); training on another machine need not give the same "
                             "weights, so its records cannot be added to the archived ones")
    return str(path)


def _methods(ids: str):
    variants = PROTOCOL["variants"]
    chosen = list(variants) if ids == "all" else [v.strip() for v in ids.split(",")]
    bad = [v for v in chosen if v not in variants]
    if bad:
        raise SystemExit(f"--methods: unknown variant id(s) {bad}; the protocol has {list(variants)}")
    return [variants[v] for v in chosen]


def _pin_method_options(out: Path, pinned: dict) -> None:
    """A run folder started before the protocol pinned AIEG's reading (its config.json records
    ``method_options: {}``, which then meant the same v1 reading): record the pin, so the folder
    resumes. Its records do not change."""
    cfg = out / "config.json"
    if cfg.is_file():
        config = json.loads(cfg.read_text(encoding="utf-8"))
        if config.get("method_options") == {}:
            cfg.write_text(json.dumps({**config, "method_options": pinned}, indent=1), encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("phase", choices=["train", "dev", "test", "imdb", "archive"])
    p.add_argument("--model", default="smollm2-sst2", help=f"one of {list(PROTOCOL['models'])}")
    p.add_argument("--models-dir", default="runs/study19/models", help="folder of the trained nano models")
    p.add_argument("--out", default="runs/study19", help="root of the run folders (<out>/<phase>/<model>)")
    p.add_argument("--methods", default="all", help="variant ids (default: all of the protocol's)")
    p.add_argument("--n", "--n-examples", dest="n", type=int, default=None,
                   help="stop after this many examples (at most the protocol's size); under torchrun write "
                        "--n-examples (torchrun's own parser refuses --n as an abbreviation of its options)")
    p.add_argument("--bucket", type=int, default=None, help="imdb: the token bucket (50, 200 or 400)")
    p.add_argument("--data-dir", default=None, help="evaluation data folder (IMDb beyond the shipped 200 reviews)")
    p.add_argument("--archive", default=str(HERE / "records"), help="folder of the committed records (gzip)")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)

    if a.phase == "archive":
        runs = {f.parent for f in Path(a.out).glob(f"*/*/{archive_records.RECORDS}")}
        runs |= {f.parent.parent for f in Path(a.out).glob("*/*/parts/records.rank*.jsonl")}
        for run in sorted(runs):
            n = archive_records.save(run, Path(a.archive) / run.parent.name / f"{run.name}.jsonl.gz")
            print(f"{run}: {n} record lines archived")
        return 0

    if a.phase == "train":
        if "nano" not in a.model:
            raise SystemExit(f"train: only the nano models are trained here, got {a.model!r}")
        cmd = PROTOCOL["models"][a.model].replace("MODELS", a.models_dir).replace("aieg-fast", f"{sys.executable} -m aieg_fast.cli", 1)
        cmd += " --no-progress" if a.no_progress else ""
        print(cmd, flush=True)
        return subprocess.call(shlex.split(cmd))

    from aieg_fast.eval import evaluate

    s = PROTOCOL["settings"]
    kind = "nano" if "nano" in a.model else a.model
    if a.phase == "imdb":
        spec = PROTOCOL["imdb"]
        if a.model != spec["model"]:
            raise SystemExit(f"imdb: the protocol runs {spec['model']!r} only, got {a.model!r}")
        if a.bucket not in spec["max_tokens"]:
            raise SystemExit(f"imdb: --bucket must be one of {spec['max_tokens']}, got {a.bucket!r}")
        dataset, n_max, metrics, max_tokens = spec["dataset"], a.n, spec["metrics"], a.bucket
        if n_max is None:
            raise SystemExit("imdb: give --n (at least the protocol's minimum for the 50-token bucket: "
                             f"{spec['n_min']})")
        out = Path(a.out) / "imdb" / f"{a.model}_{a.bucket}"
    else:
        spec = PROTOCOL[a.phase]
        dataset, n_max, metrics, max_tokens = spec["dataset"], spec["n"][kind], spec["metrics"], None
        if a.n is not None:
            if a.n > n_max:
                raise SystemExit(f"--n {a.n} is beyond the protocol's {n_max} for {a.model} on {a.phase}")
            n_max = a.n
        out = Path(a.out) / a.phase / a.model
    model = _model_source(a.model, a.models_dir)  # checked before any record is restored
    archived = Path(a.archive) / out.parent.name / f"{out.name}.jsonl.gz"
    rank0 = int(os.environ.get("RANK", "0")) == 0  # under torchrun one process restores and archives
    restored = archive_records.restore(archived, out) if rank0 else 0
    if restored:
        print(f"{restored} record lines restored from {archived}", flush=True)
    methods = _methods(a.methods)
    pinned = {name: o for name, o in s["method_options"].items() if any(m.split(":")[0] == name for m in methods)}
    if rank0:
        _pin_method_options(out, pinned)
    res = evaluate(
        model, dataset=dataset, methods=methods, n=n_max, max_tokens=max_tokens, method_options=pinned,
        out_dir=out, seed=s["seed"], topk=s["topk"], metrics=metrics, n_steps=s["n_steps"], n_samples=s["n_samples"],
        pis=s["pis"], soft_maps=s["soft_maps"], ties=s["ties"], target_fn=s["target_fn"], data_dir=a.data_dir,
        progress=not a.no_progress,
    )
    if rank0:  # rank 0 has merged the processes' parts into records.jsonl by now
        (out / "protocol.json").write_text(json.dumps(PROTOCOL, indent=1), encoding="utf-8")
        archive_records.save(out, archived)
    if res.get("summary_md"):
        print(res["summary_md"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
