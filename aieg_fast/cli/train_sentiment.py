"""``aieg-fast train-sentiment``: fine-tune the embedded SmolLM2 on SST-2 with LoRA
(:func:`aieg_fast.training.train_sentiment`); the adapter shipped as ``smollm2-sst2`` was made by it."""
from __future__ import annotations

import argparse

from ..training import train_sentiment

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``train-sentiment`` subcommand to the subparsers ``sub``."""
    ts = sub.add_parser("train-sentiment", help="fine-tune SmolLM2-135M-Instruct on SST-2 with LoRA (resumable; ~30-60 min on 2 cores)",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ts.add_argument("--out", default=None, help="output folder (default: <cache>/smollm2-sst2-train); the finished adapter loads with --model OUT")
    ts.add_argument("--train-file", default=None, help="sentence<TAB>label file (default: the SST-2 train set shipped with the package)")
    ts.add_argument("--n-train", type=int, default=16000, help="training rows (the first of a seeded shuffle)")
    ts.add_argument("--batch-size", type=int, default=16, help="rows per optimizer step")
    ts.add_argument("--lr", type=float, default=5e-4, help="peak AdamW learning rate (warm-up, cosine decay)")
    ts.add_argument("--seed", type=int, default=0, help="seed of the shuffle, LoRA initialisation and dropout")
    ts.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints (a rerun resumes)")
    ts.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in this run (rerun to continue)")
    ts.add_argument("--n-dev", type=int, default=None, help="score only the first N SST-2 dev sentences at the end")
    ts.add_argument("--no-progress", action="store_true", help="no progress bar")
    ts.set_defaults(fn=run)


def run(args) -> int:
    """Train (or resume); print where it stands; 0."""
    res = train_sentiment(out_dir=args.out, train_file=args.train_file, n_train=args.n_train, batch_size=args.batch_size,
                          lr=args.lr, seed=args.seed, checkpoint_every=args.checkpoint_every, max_steps=args.max_steps,
                          n_dev=args.n_dev, progress=not args.no_progress)
    if not res["finished"]:
        print(f"stopped at step {res['step']} of {res['steps']} after {res['seconds']:.0f} s; rerun the same command to continue "
              f"(checkpoint in {res['out_dir']})")
        return 0
    print(f"SmolLM2-SST2 trained in {res['steps']} steps ({res['seconds']:.0f} s); SST-2 dev accuracy {res['dev_accuracy']:.4f} "
          f"on {res['n_dev']} sentences; adapter saved to {res['out_dir']}")
    return 0
