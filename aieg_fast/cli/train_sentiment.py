"""``aieg-fast train-sentiment``: fine-tune the embedded SmolLM2 on SST-2 (or, with ``--task boolq``,
on one half of the BoolQ dev set, scored on the other) with LoRA
(:func:`aieg_fast.training.train_sentiment`); the adapter shipped as ``smollm2-sst2`` was made by it."""
from __future__ import annotations

import sys
from pathlib import Path

from ..training import TRAIN_TASKS, train_sentiment
from ..training.folder import checkpoint_step
from ..training.sentiment import sentiment_out_dir
from .common import DefaultsHelpFormatter, option_flags

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``train-sentiment`` subcommand to the subparsers ``sub``."""
    ts = sub.add_parser("train-sentiment", help="fine-tune SmolLM2-135M-Instruct on SST-2 (or BoolQ) with LoRA (resumable; "
                        "SST-2: about 85 min on one core)", formatter_class=DefaultsHelpFormatter)
    ts.add_argument("--task", choices=list(TRAIN_TASKS), default="sst2",
                    help="sst2: SST-2 train, scored on SST-2 dev; boolq: the BoolQ dev records with even idx (1,635), "
                         "scored on those with odd idx (boolq-heldout, the set to evaluate the model on)")
    ts.add_argument("--out", default=None, help="output folder (default: <cache>/smollm2-<task>-train); the finished adapter "
                    "loads with --model and this folder")
    ts.add_argument("--train-file", default=None, help="training rows in the task's format (default: SST-2 train or BoolQ's even half, read "
                    "as evaluate reads the scored set: from $AIEG_FAST_DATA when set, else the copy shipped with the package); its "
                    "rows in the scored set (the same BoolQ question, the same SST-2 sentence) are left out")
    ts.add_argument("--n-train", type=int, default=None, help="training rows, the first of a seeded shuffle (default: 16000 for "
                    "sst2, all for boolq)")
    ts.add_argument("--epochs", type=int, default=None, help="passes over the rows (default: 1 for sst2, 3 for boolq)")
    ts.add_argument("--batch-size", type=int, default=16, help="rows per optimizer step")
    ts.add_argument("--micro-batch-size", type=int, default=None, help="rows per forward/backward inside a step, gradients "
                    "accumulated (default: 4 for boolq, whose passages are long; the whole batch for sst2)")
    ts.add_argument("--lr", type=float, default=5e-4, help="peak AdamW learning rate (warm-up, cosine decay)")
    ts.add_argument("--seed", type=int, default=0, help="seed of the shuffle, LoRA initialisation and dropout: an int in [0, 2**32 - 1]")
    ts.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints (a rerun resumes)")
    ts.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in this run (rerun to continue)")
    ts.add_argument("--n-dev", type=int, default=None, help="score only the first N rows of the scored set at the end")
    ts.add_argument("--no-progress", action="store_true", help="no progress bar")
    ts.set_defaults(fn=run, flags=option_flags(ts, out_dir="--out", epochs="--epochs", task="--task", lr="--lr", seed="--seed"))


def _resume_hint(out: Path) -> str:
    """How a rerun goes on after an interruption: from the step its checkpoint holds, if any
    (``progress.json``, written after the checkpoint, may still name the one before)."""
    step = checkpoint_step(out)
    if step is None:
        return "no checkpoint was saved yet: a rerun of the same command starts from step 0"
    return f"rerun the same command to resume from the last checkpoint (step {step}, in {out / 'checkpoint'})"


def run(args) -> int:
    """Train (or resume); print where it stands; 0, or 130 when interrupted (Ctrl-C, SIGTERM:
    says from which step a rerun resumes).

    Raises:
        ValueError, RuntimeError: as :func:`~aieg_fast.training.train_sentiment`'s (``main``
            names the arguments by their options: --max-steps, --out, ...).
    """
    try:
        res = train_sentiment(task=args.task, out_dir=args.out, train_file=args.train_file, n_train=args.n_train,
                              epochs=args.epochs, batch_size=args.batch_size, micro_batch_size=args.micro_batch_size,
                              lr=args.lr, seed=args.seed, checkpoint_every=args.checkpoint_every, max_steps=args.max_steps,
                              n_dev=args.n_dev, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"interrupted; {_resume_hint(sentiment_out_dir(args.task, args.out))}", file=sys.stderr)
        return 130
    if not res["finished"]:
        print(f"stopped at step {res['step']} of {res['steps']} after {res['seconds']:.0f} s; rerun the same command to continue "
              f"(checkpoint in {res['out_dir']})")
        return 0
    print(f"SmolLM2 ({args.task}) trained in {res['steps']} steps ({res['seconds']:.0f} s); accuracy {res['dev_accuracy']:.4f} "
          f"on {res['n_dev']} rows of {res['dev_dataset']}; adapter saved to {res['out_dir']} (load it with --model {res['out_dir']})"
          + (f"; {res['split']}" if res.get("split") else ""))
    return 0
