"""BoolQ: does the LoRA fine-tune answer better where it was trained on the same passage?

The recipe trains on the dev questions with an even ``idx`` (``boolq-train``) and scores those
with an odd ``idx`` (``boolq-heldout``). No question is in both halves, but BoolQ asks several
questions about one passage, and some passages are in both. This script splits the held-out
questions by whether their passage is among the training passages and reports the fine-tune's
accuracy on each part (the decision :func:`aieg_fast.training.sentiment_accuracy` scores: the
larger of the " no" / " yes" logits after ``aieg_fast.datasets.BOOLQ_TEMPLATE``), with the
always-" yes" baseline of each part.

Usage (about 15 minutes on one CPU core)::

    OMP_NUM_THREADS=1 python benchmarks/boolq_passage_overlap.py \\
        --model benchmarks/faithfulness/boolq_heldout_ft/adapter [--n N]

``--n`` keeps the first N held-out questions (file order), as ``evaluate --n`` does.
"""
from __future__ import annotations

import argparse

import torch

import aieg_fast
from aieg_fast.datasets import DATASETS, dataset_path
from aieg_fast.training import sentiment_accuracy
from machine import print_header


def parts(n=None):
    """(shared, unshared): the held-out records whose passage is / is not a training passage."""
    train = DATASETS["boolq-train"].records(dataset_path("boolq-train"))
    held = DATASETS["boolq-heldout"].records(dataset_path("boolq-heldout"))[:n]
    seen = {r["fields"]["passage"] for r in train}
    return [r for r in held if r["fields"]["passage"] in seen], [r for r in held if r["fields"]["passage"] not in seen]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the fine-tuned model or adapter folder")
    ap.add_argument("--n", type=int, default=None, help="the first N held-out questions only")
    args = ap.parse_args()
    print_header()
    torch.manual_seed(0)
    ex = aieg_fast.load_model(args.model)
    spec = DATASETS["boolq-heldout"]
    print("| held-out questions | n | fine-tune accuracy | always \" yes\" |")
    print("|---|---|---|---|")
    for name, recs in zip(("passage also in boolq-train", "passage only in boolq-heldout"), parts(args.n)):
        rows = [(r["fields"], r["label"]) for r in recs]
        acc = sentiment_accuracy(ex.model, ex.tokenizer, rows, spec.template, spec.labels, batch_size=4)
        yes = sum(lab == 1 for _, lab in rows) / max(1, len(rows))
        print(f"| {name} | {len(rows)} | {acc:.3f} | {yes:.3f} |", flush=True)


if __name__ == "__main__":
    main()
