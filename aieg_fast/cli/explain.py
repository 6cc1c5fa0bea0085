"""``aieg-fast explain``: explain the model's next token (or label) for a text, or each generated
token with ``--generate N``; print a heatmap, optionally write JSON / HTML."""
from __future__ import annotations

import argparse
import os
import sys

from .. import ops
from ..datasets import DATASETS, TASKS, load_dataset
from ..explainer import load_model
from ..methods.registry import list_methods, option_value

__all__ = ["add_parser", "run", "parse_option"]


def parse_option(s: str):
    """``NAME=VALUE`` of ``--option`` as (name, value); the value as by
    :func:`~aieg_fast.methods.registry.option_value`.

    Raises:
        argparse.ArgumentTypeError: no ``=``.
    """
    if "=" not in s:
        raise argparse.ArgumentTypeError(f"--option must be NAME=VALUE, got {s!r}")
    k, v = s.split("=", 1)
    return k, option_value(v)


def add_parser(sub) -> None:
    """Add the ``explain`` subcommand to the subparsers ``sub``."""
    e = sub.add_parser("explain", help="explain the model's next token (or label) for a text")
    e.add_argument("text", nargs="?", help="input text (default with --task sentiment: a shipped SST-2 sentence)")
    e.add_argument("--model", default=None, help="hub id or local directory (default: embedded SmolLM2-135M-Instruct)")
    e.add_argument("--method", default="aieg", choices=list_methods())
    e.add_argument("--target", default=None, help="target token (single token, e.g. ' positive'); default: the prediction")
    e.add_argument("--target-is-id", action="store_true", help="read --target as a token id / class index")
    e.add_argument("--n-steps", type=int, default=50)
    e.add_argument("--internal-batch-size", type=int, default=None)
    e.add_argument("--template", default=None, help="prompt template with {text}; template tokens are held fixed")
    e.add_argument("--task", choices=list(TASKS), default=None, help="preset: sentiment prompt, label words ' positive'/' negative'")
    e.add_argument("--backend", choices=list(ops.BACKENDS), default="auto")
    e.add_argument("--option", action="append", type=parse_option, metavar="NAME=VALUE", help="method option, e.g. --option ef_mode=none")
    e.add_argument("--tokens", action="store_true", help="show tokens instead of words")
    e.add_argument("--json", metavar="FILE", help="write the result as JSON")
    e.add_argument("--html", metavar="FILE", help="write an HTML heatmap")
    e.add_argument("--no-progress", action="store_true")
    e.add_argument("--generate", type=int, default=None, metavar="N", help="generate N tokens greedily and explain each one (per-step heatmap)")
    e.set_defaults(fn=run)


def _input_error(args):
    """The error message of inconsistent arguments or missing output folders, else None."""
    if args.generate is not None and (args.task is not None or args.target is not None):
        return "--generate explains the generated tokens; it cannot be combined with --task or --target"
    if args.text is None and args.task is None:
        return "TEXT is required (or use --task sentiment to explain a shipped SST-2 sentence)"
    if args.target_is_id and (args.target is None or not args.target.lstrip("-").isdigit()):
        return f"--target-is-id needs --target to be an integer (a token id or class index), got --target {args.target!r}"
    for flag, path in (("--json", args.json), ("--html", args.html)):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            return f"{flag} {path!r}: the folder {os.path.dirname(os.path.abspath(path))!r} does not exist"
    return None


def _task_target(ex, task: str, text: str, template):
    """The task's template and its predicted label word (printed with the label probabilities)."""
    spec = DATASETS[TASKS[task]]
    template = template or spec.template
    probs = ex.label_probs(text, spec.labels, template)
    label = int(probs[1] >= probs[0])
    print(f"text: {text.strip()}")
    print(
        f"predicted sentiment: {spec.label_names[label]}  "
        f"(p(positive) = {probs[1]:.3f}, p(negative) = {probs[0]:.3f}, renormalised over the two label words)"
    )
    return template, spec.labels[label]


def _write_outputs(res, args) -> None:
    if args.json:
        res.save(args.json)
        print(f"wrote {args.json}")
    if args.html:
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write("<!doctype html><meta charset='utf-8'>" + res.to_html())
        print(f"wrote {args.html}")


def run(args) -> int:
    """Explain and print; 0, or 2 on inconsistent arguments (``error: ...`` on stderr)."""
    err = _input_error(args)
    if err is not None:
        print(f"error: {err}", file=sys.stderr)
        return 2
    text = args.text if args.text is not None else load_dataset(TASKS[args.task])[0][0]
    ex = load_model(args.model)
    options = dict(args.option or [])
    template = args.template
    target = args.target
    if args.task is not None:
        template, predicted = _task_target(ex, args.task, text, template)
        if target is None:
            target = predicted
    if target is not None and isinstance(target, str) and target.lstrip("-").isdigit() and args.target_is_id:
        target = int(target)
    if args.generate is not None:
        res = ex.attribute_generation(
            text, max_new_tokens=args.generate, method=args.method, n_steps=args.n_steps,
            internal_batch_size=args.internal_batch_size, template=template, backend=args.backend,
            progress=not args.no_progress, **options,
        )
    else:
        res = ex.attribute(
            text, method=args.method, target=target, n_steps=args.n_steps, internal_batch_size=args.internal_batch_size,
            template=template, backend=args.backend, progress=not args.no_progress, **options,
        )
    res.show(words=not args.tokens)
    print(f"backend: {res.backend or 'no kernel op used'}   time: {res.timing.get('total', 0):.2f} s")
    _write_outputs(res, args)
    return 0
