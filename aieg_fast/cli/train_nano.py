"""``aieg-fast train-nano``: train GPT-nano on SST-2 train (:func:`aieg_fast.training.train_nano`)."""
from __future__ import annotations

from ..datasets import DATASETS
from ..training import train_nano
from .common import DefaultsHelpFormatter, option_flags

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``train-nano`` subcommand to the subparsers ``sub``."""
    train, dev = DATASETS["sst2-train"].file, DATASETS["sst2-dev"].file
    tn = sub.add_parser("train-nano", help="train GPT-nano (3 layers, 3 heads, 48 dims) on SST-2 train; saves to the cache",
                        formatter_class=DefaultsHelpFormatter)
    tn.add_argument("--data-dir", default=None,
                    help=f"folder with {train} and optionally {dev} (default: $AIEG_FAST_DATA, else the copies shipped with the package)")
    tn.add_argument("--train-file", default=None, help=f"sentence<TAB>label file (default: DATA_DIR/{train})")
    tn.add_argument("--dev-file", default=None, help=f"default: DATA_DIR/{dev}, else the shipped SST-2 dev set")
    tn.add_argument("--out", default=None, help="output folder (default: <cache>/gpt-nano-sst2 with --arch gpt2, loaded by "
                    "--model gpt-nano; <cache>/llama-nano-sst2 with --arch llama, loaded by --model llama-nano)")
    tn.add_argument("--epochs", type=int, default=2, help="passes over the training rows")
    tn.add_argument("--batch-size", type=int, default=64, help="rows per optimizer step")
    tn.add_argument("--lr", type=float, default=2e-3, help="peak AdamW learning rate (warm-up, cosine decay)")
    tn.add_argument("--max-train", type=int, default=None, help="use only the first N training rows")
    tn.add_argument("--seed", type=int, default=0, help="seed of the initialisation, the shuffling and the dropout: an int in [0, 2**32 - 1]")
    tn.add_argument("--arch", choices=["gpt2", "llama"], default="gpt2",
                    help="gpt2: GPT-nano (--model gpt-nano); llama: LLaMA-nano, RoPE/RMSNorm/GQA (--model llama-nano)")
    tn.add_argument("--no-progress", action="store_true", help="no progress bar")
    tn.set_defaults(fn=run, flags=option_flags(tn, out_dir="--out", epochs="--epochs", lr="--lr", seed="--seed", arch="--arch"))


def run(args) -> int:
    """Train, print the history and where the model went; 0.

    Raises:
        FileNotFoundError, ValueError, RuntimeError: as :func:`~aieg_fast.training.train_nano`'s
            (``main`` prints them, the arguments named by their options: --out, --lr, ...; 2).
    """
    res = train_nano(args.train_file, args.dev_file, data_dir=args.data_dir, out_dir=args.out, epochs=args.epochs,
                     batch_size=args.batch_size, lr=args.lr, max_train=args.max_train, seed=args.seed, arch=args.arch,
                     progress=not args.no_progress)
    for h in res["history"]:
        print(f"epoch {h['epoch']}: train loss {h['train_loss']:.4f}, train accuracy {h['train_accuracy']:.4f}, "
              f"dev accuracy {h['dev_accuracy']:.4f}")
    name = "GPT-nano" if args.arch == "gpt2" else "LLaMA-nano"
    model = res["out_dir"] if args.out is not None else ("gpt-nano" if args.arch == "gpt2" else "llama-nano")
    print(f"{name} ({res['n_params']:,} parameters) trained on {res['n_train']:,} rows in {res['seconds']:.0f} s; "
          f"SST-2 dev accuracy {res['dev_accuracy']:.4f}; saved to {res['out_dir']} (load it with --model {model})")
    return 0
