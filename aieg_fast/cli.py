"""Command line: ``aieg-fast explain``, ``aieg-fast verify``, ``aieg-fast methods``, ``aieg-fast info``."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

__all__ = ["main"]


def _parse_option(s: str):
    if "=" not in s:
        raise argparse.ArgumentTypeError(f"--option must be NAME=VALUE, got {s!r}")
    from .evaluate import option_value

    k, v = s.split("=", 1)
    return k, option_value(v)


def _parse_fractions(s: str):
    try:
        return [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated fractions, got {s!r}") from None


def _load(model: Optional[str]):
    from .attribution import load_model

    return load_model(model)


def cmd_explain(args) -> int:
    from .samples import SENTIMENT_LABELS, SENTIMENT_TEMPLATE, sst2_sample

    if args.generate is not None and (args.task is not None or args.target is not None):
        print("error: --generate explains the generated tokens; it cannot be combined with --task or --target", file=sys.stderr)
        return 2
    text = args.text
    if text is None:
        if args.task != "sentiment":
            print("error: TEXT is required (or use --task sentiment to explain a shipped SST-2 sentence)", file=sys.stderr)
            return 2
        text = sst2_sample()[0][0]
    for flag, path in (("--json", args.json), ("--html", args.html)):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            print(f"error: {flag} {path!r}: the folder {os.path.dirname(os.path.abspath(path))!r} does not exist", file=sys.stderr)
            return 2
    ex = _load(args.model)
    options = dict(args.option or [])
    template = args.template
    target = args.target
    if args.task == "sentiment":
        template = template or SENTIMENT_TEMPLATE
        probs = ex.label_probs(text, SENTIMENT_LABELS, template)
        label = int(probs[1] >= probs[0])
        names = ("negative", "positive")
        print(f"text: {text.strip()}")
        print(
            f"predicted sentiment: {names[label]}  "
            f"(p(positive) = {probs[1]:.3f}, p(negative) = {probs[0]:.3f}, renormalised over the two label words)"
        )
        if target is None:
            target = SENTIMENT_LABELS[label]
    if target is not None and isinstance(target, str) and target.lstrip("-").isdigit() and args.target_is_id:
        target = int(target)
    if args.generate is not None:
        res = ex.attribute_generation(
            text,
            max_new_tokens=args.generate,
            method=args.method,
            n_steps=args.n_steps,
            internal_batch_size=args.internal_batch_size,
            template=template,
            backend=args.backend,
            progress=not args.no_progress,
            **options,
        )
    else:
        res = ex.attribute(
            text,
            method=args.method,
            target=target,
            n_steps=args.n_steps,
            internal_batch_size=args.internal_batch_size,
            template=template,
            backend=args.backend,
            progress=not args.no_progress,
            **options,
        )
    res.show(words=not args.tokens)
    print(f"backend: {res.backend or 'no kernel op used'}   time: {res.timing.get('total', 0):.2f} s")
    if args.json:
        res.save(args.json)
        print(f"wrote {args.json}")
    if args.html:
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write("<!doctype html><meta charset='utf-8'>" + res.to_html())
        print(f"wrote {args.html}")
    return 0


def cmd_methods(args) -> int:
    from .attribution import _METHOD_DOCS

    for name, doc in _METHOD_DOCS.items():
        print(f"{name:32s} {doc}")
    return 0


def cmd_info(args) -> int:
    import torch

    from . import __version__
    from ._ext import build_info

    print(json.dumps({"aieg_fast": __version__, "torch": torch.__version__, "extension": build_info()}, indent=1, default=str))
    return 0


def cmd_verify(args) -> int:
    from .verify import verify

    return verify(model=args.model, methods=args.methods, n_steps=args.n_steps, texts=args.texts)


def cmd_evaluate(args) -> int:
    from .evaluate import evaluate

    try:
        res = evaluate(
            model=args.model, dataset=args.dataset, methods=args.methods, n=args.n, max_tokens=args.max_tokens,
            out_dir=args.out, seed=args.seed, topk=args.topk, n_steps=args.n_steps, n_samples=args.n_samples,
            prob_space=args.prob_space, data_dir=args.data_dir, progress=not args.no_progress,
            topk_sweep=args.topk_sweep, start=args.start, reference=args.reference, metrics=args.metrics, **({"pis": args.pis} if args.pis else {}),
        )
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(res["summary_md"])
    print(f"computed {res['computed']} example(s) (or their missing methods), {res['skipped']} already complete; "
          f"results in {res['out_dir']}")
    return 0


def cmd_train_nano(args) -> int:
    from .nano import train_nano

    try:
        res = train_nano(args.train_file, args.dev_file, data_dir=args.data_dir, out_dir=args.out, epochs=args.epochs,
                         batch_size=args.batch_size, lr=args.lr, max_train=args.max_train, seed=args.seed,
                         progress=not args.no_progress)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for h in res["history"]:
        print(f"epoch {h['epoch']}: train loss {h['train_loss']:.4f}, train accuracy {h['train_accuracy']:.4f}, "
              f"dev accuracy {h['dev_accuracy']:.4f}")
    print(f"GPT-nano ({res['n_params']:,} parameters) trained on {res['n_train']:,} rows in {res['seconds']:.0f} s; "
          f"SST-2 dev accuracy {res['dev_accuracy']:.4f}; saved to {res['out_dir']} (load it with --model gpt-nano)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .attribution import list_methods

    p = argparse.ArgumentParser(prog="aieg-fast", description="Token attributions for decoder-only LLMs.")
    sub = p.add_subparsers(dest="cmd", required=True)

    e = sub.add_parser("explain", help="explain the model's next token (or label) for a text")
    e.add_argument("text", nargs="?", help="input text (default with --task sentiment: a shipped SST-2 sentence)")
    e.add_argument("--model", default=None, help="hub id or local directory (default: embedded SmolLM2-135M-Instruct)")
    e.add_argument("--method", default="aieg", choices=list_methods())
    e.add_argument("--target", default=None, help="target token (single token, e.g. ' positive'); default: the prediction")
    e.add_argument("--target-is-id", action="store_true", help="read --target as a token id / class index")
    e.add_argument("--n-steps", type=int, default=50)
    e.add_argument("--internal-batch-size", type=int, default=None)
    e.add_argument("--template", default=None, help="prompt template with {text}; template tokens are held fixed")
    e.add_argument("--task", choices=["sentiment"], default=None, help="preset: sentiment prompt, label words ' positive'/' negative'")
    e.add_argument("--backend", choices=["auto", "ext", "reference"], default="auto")
    e.add_argument("--option", action="append", type=_parse_option, metavar="NAME=VALUE", help="method option, e.g. --option ef_mode=none")
    e.add_argument("--tokens", action="store_true", help="show tokens instead of words")
    e.add_argument("--json", metavar="FILE", help="write the result as JSON")
    e.add_argument("--html", metavar="FILE", help="write an HTML heatmap")
    e.add_argument("--no-progress", action="store_true")
    e.add_argument("--generate", type=int, default=None, metavar="N", help="generate N tokens greedily and explain each one (per-step heatmap)")
    e.set_defaults(fn=cmd_explain)

    v = sub.add_parser("verify", help="run every method with the reference kernels and the extension; compare")
    v.add_argument("--model", default=None)
    v.add_argument("--methods", default=None, help="comma-separated (default: all)")
    v.add_argument("--n-steps", type=int, default=20)
    v.add_argument("--texts", nargs="*", default=None)
    v.set_defaults(fn=cmd_verify)

    m = sub.add_parser("methods", help="list attribution methods")
    m.set_defaults(fn=cmd_methods)
    i = sub.add_parser("info", help="versions and extension build")
    i.set_defaults(fn=cmd_info)
    ev = sub.add_parser("evaluate", help="faithfulness metrics of attribution methods on a sentiment dataset",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ev.add_argument("--model", default=None, help="hub id or local directory (default: embedded SmolLM2-135M-Instruct)")
    ev.add_argument("--dataset", default="sst2-sample", choices=["sst2-sample", "sst2-dev", "sst2-test", "imdb"])
    ev.add_argument("--methods", default="aieg,integrated_gradients,random", help="comma-separated methods, each optionally with options as name:option=value[:option=value] "
                    "(e.g. aieg:ef_mode=none); 'random' is the control")
    ev.add_argument("--n", type=int, default=20, help="evaluate examples 0 … N-1 of the dataset (START … N-1 with --start)")
    ev.add_argument("--max-tokens", type=int, default=None, help="truncate texts to this many tokens (e.g. 50, 200, 400)")
    ev.add_argument("--out", default="faithfulness_out", help="output folder; rerun with the same folder to resume")
    ev.add_argument("--seed", type=int, default=0, help="seed of the random control, the soft-metric draws and the bootstrap")
    ev.add_argument("--n-steps", type=int, default=20, help="path steps of the path methods (AIEG, IG, IDG)")
    ev.add_argument("--topk", type=float, default=0.2, help="fraction of attributable tokens for log-odds / comp / suff")
    ev.add_argument("--topk-sweep", type=_parse_fractions, default=None, metavar="K1,K2,...",
                    help="also report the hard metrics at these top-k fractions, e.g. 0.05,0.1,0.2,0.3")
    ev.add_argument("--reference", default="integrated_gradients", help="method of the paired tests (e.g. aieg for ablations)")
    ev.add_argument("--start", type=int, default=0, help="skip examples 0 … START-1 (shards of one run; see the README)")
    ev.add_argument("--metrics", choices=["all", "hard"], default="all",
                    help="'hard': log-odds / comprehensiveness / sufficiency only (skips the soft metrics)")
    ev.add_argument("--pis", type=_parse_fractions, default=None, metavar="P1,P2,...",
                    help="π grid of the π-Soft curves (default 0.1,0.2,...,0.9)")
    ev.add_argument("--n-samples", type=int, default=4, help="Bernoulli draws per soft-metric point")
    ev.add_argument("--prob-space", choices=["vocab", "labels"], default="vocab",
                    help="p(label): softmax over the whole vocabulary, or over the label words only")
    ev.add_argument("--data-dir", default=None,
                    help="folder with sst2_dev.tsv, sst2_test.tsv, imdb_test_sample.jsonl (default: $AIEG_FAST_DATA, "
                         "else the copies shipped with the package)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    ev.set_defaults(fn=cmd_evaluate)

    tn = sub.add_parser("train-nano", help="train GPT-nano (3 layers, 3 heads, 48 dims) on SST-2 train; saves to the cache",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    tn.add_argument("--data-dir", default=None,
                    help="folder with sst2_train.tsv (not shipped) and optionally sst2_dev.tsv (default: $AIEG_FAST_DATA)")
    tn.add_argument("--train-file", default=None, help="sentence<TAB>label file (default: DATA_DIR/sst2_train.tsv)")
    tn.add_argument("--dev-file", default=None, help="default: DATA_DIR/sst2_dev.tsv, else the shipped SST-2 dev set")
    tn.add_argument("--out", default=None, help="output folder (default: <cache>/gpt-nano-sst2, loaded by --model gpt-nano)")
    tn.add_argument("--epochs", type=int, default=2, help="passes over the training rows")
    tn.add_argument("--batch-size", type=int, default=64, help="rows per optimizer step")
    tn.add_argument("--lr", type=float, default=2e-3, help="peak AdamW learning rate (warm-up, cosine decay)")
    tn.add_argument("--max-train", type=int, default=None, help="use only the first N training rows")
    tn.add_argument("--seed", type=int, default=0, help="seed of the initialisation and the shuffling")
    tn.add_argument("--no-progress", action="store_true", help="no progress bar")
    tn.set_defaults(fn=cmd_train_nano)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "no_progress", False):
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except ImportError:
            pass
    try:
        return args.fn(args)
    except (ValueError, TypeError, RuntimeError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = " (finished examples are kept in the records; rerun the same command to resume)" if args.cmd == "evaluate" else ""
        print(f"interrupted{hint}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
