"""``aieg-fast evaluate``: faithfulness metrics of attribution methods on a classification dataset
(:func:`aieg_fast.eval.evaluate`: sentiment, BoolQ, a user's file), LongRA's ground-truth check
(:func:`aieg_fast.eval.evaluate_longra`) or generated text, per generated step
(:func:`aieg_fast.eval.evaluate_generation`: WikiBio, WikiText, TellMeWhy, a user's file without
labels), chosen by the dataset's task; prints the summary table."""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ..datasets import DATASETS, EVALUATION_DATASETS, is_dataset_file
from ..runs import COMMAND_FILE, reports_input_errors, torchrun_rank
from .common import DefaultsHelpFormatter, add_model_options, option_flags, placement, write_command
from ..eval import (DEFAULT_METHODS, DEFAULT_N_NEW_TOKENS, DEFAULT_SOFT_MAPS, EVAL_TARGET_FNS, LONGRA_KS, METRIC_SETS,
                    PROB_SPACES, REFERENCE_METHOD, SOFT_MAPS, TIE_RULES, evaluate, evaluate_generation, evaluate_longra, shown_id)

__all__ = ["add_parser", "run", "parse_fractions", "parse_ints"]


def parse_fractions(s: str):
    """Comma-separated numbers (``0.05,0.1``) as a list of floats.

    Raises:
        argparse.ArgumentTypeError: a part that is not a number, or no number at all (an empty
            string would silently mean "not asked").
    """
    try:
        out = [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated fractions, got {s!r}") from None
    if not out:
        raise argparse.ArgumentTypeError(f"expected comma-separated fractions, got {s!r} (leave the option out for none)")
    return out


def parse_method_options(s: str) -> dict:
    """A JSON object of per-method options, ``{"aieg": {"preset": "v1"}}``.

    Raises:
        argparse.ArgumentTypeError: not JSON, not an object, or a method mapped to something other
            than an object of options.
    """
    try:
        val = json.loads(s)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object {{method: {{option: value}}}}, got {s!r} ({err.msg})") from None
    if not isinstance(val, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object {{method: {{option: value}}}}, got {s!r}")
    bad = next((k for k, v in val.items() if not isinstance(v, dict)), None)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"expected a JSON object {{method: {{option: value}}}}, got {s!r} "
                                         f"({bad!r} maps to {json.dumps(val[bad])}, not an object of options)")
    return val


def parse_ints(s: str):
    """Comma-separated positive integers (``1,3,5``) as a list of ints.

    Raises:
        argparse.ArgumentTypeError: a part that is not a positive integer.
    """
    try:
        vals = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {s!r}")
    return vals


def add_parser(sub) -> None:
    """Add the ``evaluate`` subcommand to the subparsers ``sub``."""
    ev = sub.add_parser("evaluate", help="faithfulness metrics of attribution methods on a classification dataset "
                        "(sentiment, BoolQ, your file), LongRA's ground-truth check or generated text, per step",
                        formatter_class=DefaultsHelpFormatter)
    folder_files = ", ".join(dict.fromkeys(DATASETS[k].file for k in EVALUATION_DATASETS if DATASETS[k].file))  # each file once
    add_model_options(ev)
    ev.add_argument("--dataset", default="sst2-sample", metavar="NAME|PATH",
                    help=f"one of {', '.join(EVALUATION_DATASETS)}, or a .jsonl / .json / .csv / .tsv file: with "
                         "--label-field classification, without it generation (prompts in --text-field)")
    ev.add_argument("--methods", default=",".join(DEFAULT_METHODS), help="comma-separated methods, each optionally with options as name:option=value[:option=value] "
                    "(e.g. aieg:ef_mode=none; a value with a comma as JSON: aieg:attn_layers=[0,1], heta:components=\"gate,information\"); "
                    "'random' and 'recency' (scores rising with the position) are controls")
    ev.add_argument("--method-options", type=parse_method_options, default=None, metavar="JSON",
                    help="options for every spec of a method, a JSON object, e.g. '{\"aieg\": {\"preset\": \"v1\"}}' "
                         "(a spec's own options win)")
    ev.add_argument("--n", "--n-examples", dest="n", type=int, default=20,
                    help="evaluate examples 0 … N-1 of the dataset (START … N-1 with --start); under torchrun write "
                         "--n-examples (torchrun's own parser takes --n for an abbreviation of its options)")
    ev.add_argument("--max-tokens", type=int, default=None, help="truncate texts to this many tokens (e.g. 50, 200, 400)")
    ev.add_argument("--out", default="faithfulness_out", help="output folder; rerun with the same folder to resume")
    ev.add_argument("--seed", type=int, default=0, help="seed of the random control, the soft-metric draws and the bootstrap")
    ev.add_argument("--n-steps", type=int, default=20, help="path steps of the path methods (AIEG, IG, IDG)")
    ev.add_argument("--topk", type=float, default=0.2, help="fraction of attributable tokens for log-odds / comp / suff")
    ev.add_argument("--topk-sweep", type=parse_fractions, default=None, metavar="K1,K2,...",
                    help="also report the hard metrics at these top-k fractions, e.g. 0.05,0.1,0.2,0.3")
    ev.add_argument("--reference", default=REFERENCE_METHOD, help="method of the paired tests (e.g. aieg for ablations)")
    ev.add_argument("--start", "--start-index", dest="start", type=int, default=0,
                    help="skip examples 0 … START-1 (to share one run between processes, start it with torchrun "
                         "instead; see the README); under torchrun write --start-index")
    ev.add_argument("--metrics", choices=list(METRIC_SETS), default="all",
                    help="'hard': log-odds / comprehensiveness / sufficiency only (skips the soft metrics)")
    ev.add_argument("--pis", type=parse_fractions, default=None, metavar="P1,P2,...",
                    help="π grid of the π-Soft curves (default 0.1,0.2,...,0.9)")
    ev.add_argument("--n-samples", type=int, default=4, help="Bernoulli draws per soft-metric point")
    ev.add_argument("--prob-space", choices=list(PROB_SPACES), default=None,
                    help="p(label): labels (the default) = softmax over the label words only; vocab = over the whole "
                         "vocabulary")
    ev.add_argument("--soft-maps", default=",".join(DEFAULT_SOFT_MAPS), metavar="MAP1,MAP2",
                    help=f"soft maps of the soft metrics, from {','.join(SOFT_MAPS)}: relu clips negative scores to 0, "
                         "minmax is the min-max of the signed scores (unchanged by a constant shift); "
                         "maps other than relu get columns ending in _MAP")
    ev.add_argument("--target-fn", choices=list(EVAL_TARGET_FNS), default="auto",
                    help="F every method explains: auto = the dataset's own (BoolQ: contrast), else the log-probability the "
                         "metrics score (label_logprob over the label words with --prob-space labels, logprob over the "
                         "vocabulary otherwise); contrast = the "
                         "predicted label's logit minus the runner-up's; logit = the raw label logit")
    ev.add_argument("--ties", choices=list(TIE_RULES), default="random",
                    help="order of equal scores in the top-k: random (seeded per example, recorded) or lower index first")
    ev.add_argument("--data-dir", default=None,
                    help=f"folder with {folder_files} (default: $AIEG_FAST_DATA, "
                         "else the copies shipped with the package)")
    ev.add_argument("--text-field", "--text-column", default="text", help="dataset file: the column of the text ({text} of the template)")
    ev.add_argument("--label-field", "--label-column", default=None, help="dataset file: the column of the gold label (an index into --labels, "
                    "or a label word)")
    ev.add_argument("--target-field", "--target-column", default=None, help="dataset file: the column of a reference continuation (generation)")
    ev.add_argument("--id-field", "--id-column", default=None, help="dataset file: a column of unique ids (default: FILE:row)")
    ev.add_argument("--template", default=None, help="prompt with {text} (and, for a labelled dataset file, {column} fields; a generation prompt is {text} alone); all "
                    "fields are attributed, the rest held fixed (default: the dataset's)")
    ev.add_argument("--labels", nargs="+", default=None, metavar="WORD",
                    help="label words, one token each, index = label (e.g. ' no' ' yes'; default: the dataset's)")
    ev.add_argument("--ks", type=parse_ints, default=list(LONGRA_KS),
                    metavar="K1,K2", help="LongRA: report how often the relative word is in the top k for these k")
    gen = ev.add_argument_group("generated text (wikibio, wikitext, tellmewhy, tellmewhy-reagent, a file without --label-field)")
    gen.add_argument("--n-new-tokens", type=int, default=DEFAULT_N_NEW_TOKENS,
                     help="tokens generated greedily per prompt (ReAGent's 10); with --teacher-forced, the reference is cut to this many")
    gen.add_argument("--teacher-forced", action="store_true", help="explain each prompt's reference instead of the greedy output")
    gen.add_argument("--prompt-only", action="store_true",
                     help="hold the generated prefix fixed: attribute and perturb the prompt only (default: the whole context, "
                          "prompt and generated prefix, as ReAGent)")
    ev.add_argument("--config", default=None, metavar="FILE.json",
                    help="options from a JSON object (keys: these long options, e.g. \"n-steps\": 50); options given "
                         "here win. Each run writes its resolved options to OUT/command.json: --config OUT/command.json "
                         "runs it again")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    ev.set_defaults(fn=run, config_parser=ev, flags=option_flags(ev, skip=tuple(SETTING_OPTIONS), out_dir="--out", topk="--topk", pis="--pis", seed="--seed"))


def _task(args) -> str:
    """The task of ``--dataset``: the registry's, else (a file) classification with a label
    field and generation without."""
    if args.dataset in EVALUATION_DATASETS:  # not the training sets (sst2-train, boolq-train)
        return DATASETS[args.dataset].task
    if not is_dataset_file(args.dataset):
        raise ValueError(f"--dataset must be one of {list(EVALUATION_DATASETS)} or a .jsonl / .json / .csv / .tsv file, "
                         f"got {args.dataset!r}")
    if Path(args.dataset).is_dir():
        raise ValueError(f"--dataset {args.dataset!r} is a folder, not a file")
    if not Path(args.dataset).is_file():
        raise FileNotFoundError(f"--dataset {args.dataset!r}: no such file")
    if args.label_field is None:
        if torchrun_rank() == 0:  # said once
            print(f"note: {args.dataset} has no --label-field: its rows are prompts ({args.text_field!r}), their continuations "
                  "evaluated per generated step", file=sys.stderr)
        return "generation"
    return "classification"


def _run_longra(args) -> int:
    res = evaluate_longra(model=args.model, dataset=args.dataset, methods=args.methods, n=args.n, out_dir=args.out,
                          seed=args.seed, ks=args.ks, n_steps=args.n_steps, target_fn=args.target_fn,
                          reference=args.reference, data_dir=args.data_dir, progress=not args.no_progress,
                          method_options=args.method_options, **placement(args))
    if res.get("rank", 0) != 0:  # under torchrun rank 0 reports
        return 0
    print(res["summary_md"])
    print(f"computed {res['computed']} instance(s); {res['kept']} kept by the filter; results in {res['out_dir']}")
    if not res["kept"]:
        print("error: no instance passed the filter, nothing was evaluated (the reasons are above)", file=sys.stderr)
        return 1
    return 0


def _run_generation(args) -> dict:
    """:func:`~aieg_fast.eval.evaluate_generation` on ``--dataset`` with the options given.

    Raises:
        ValueError: an option of label tasks only (--max-tokens, --start, --prob-space labels,
            --labels).
    """
    why = {"--max-tokens": "prompts are not cut", "--start": "use --n for the number of prompts",
           "--prob-space labels": "p is over the vocabulary", "--labels": "the generated tokens are the targets"}
    wrong = [o for o, bad in (("--max-tokens", args.max_tokens is not None), ("--start", args.start != 0),
                              ("--prob-space labels", args.prob_space == "labels"), ("--labels", args.labels is not None)) if bad]
    if wrong:
        raise ValueError("; ".join(f"{o}: not for generated text ({why[o]})" for o in wrong))
    return evaluate_generation(
        args.model, args.dataset, methods=args.methods, n_new_tokens=args.n_new_tokens, teacher_forced=args.teacher_forced,
        interpolate_generated=not args.prompt_only, metrics=args.metrics, out_dir=args.out, n=args.n, seed=args.seed,
        topk=args.topk, topk_sweep=args.topk_sweep, reference=args.reference, n_steps=args.n_steps, n_samples=args.n_samples,
        soft_maps=args.soft_maps, ties=args.ties, target_fn=args.target_fn, template=args.template, data_dir=args.data_dir,
        text_field=args.text_field, target_field=args.target_field, id_field=args.id_field, progress=not args.no_progress,
        method_options=args.method_options,
        **({"pis": args.pis} if args.pis else {}), **placement(args))


#: recorded settings named in the library's messages whose option is not the name with dashes
SETTING_OPTIONS = {
    "interpolate_generated": "--prompt-only (interpolate_generated is True without it)",
    "method_options": "--methods name:option=value or --method-options",
}


def as_options(message: str) -> str:
    """``message`` with a note naming the command-line option of each recorded setting in it
    whose option has another name (:data:`SETTING_OPTIONS`); the message as it is otherwise."""
    named = [f"{k} is {v}" for k, v in SETTING_OPTIONS.items() if re.search(rf"(?<![\w-]){k}(?![\w-])", message)]
    return message + (f" [options: {'; '.join(named)}]" if named else "")


def run(args) -> int:
    """Run the evaluation the dataset's task asks for and print its summary; 0, or 2 on a
    missing data file."""
    task = _task(args)
    refused, failed = False, True
    try:
        status = _run_task(args, task)
        failed = False
        return status
    except ValueError as err:
        refused = True  # its settings were not run: command.json keeps those of the run in the folder
        named = ValueError(as_options(str(err)))
        named.reported_by = getattr(err, "reported_by", None)  # under torchrun: printed once (cli.main)
        raise named from None
    except (TypeError, FileNotFoundError):
        refused = True
        raise
    finally:  # once the evaluation made its folder (refused input makes none), even when interrupted
        if not refused and torchrun_rank() == 0 and Path(args.out).is_dir():
            _write_command(args, failed)


def _write_command(args, failed: bool) -> None:
    """Write ``command.json`` into the run's folder. On the way out of a failed or interrupted
    run (``failed``) a failure to write it (the disk that stopped the run is full still) is a
    note on stderr, so that the run's own error is the one reported.

    Raises:
        OSError: it cannot be written after a run that ended well.
    """
    try:
        write_command(args, args.out)
    except OSError as err:
        if not failed:
            raise
        print(f"note: {Path(args.out) / COMMAND_FILE} was not written ({err.strerror or err})", file=sys.stderr)


def _check_task_options(args, task: str) -> None:
    """Refuse options that the task would ignore (the generation-only ones on a label task or
    LongRA, ``--ks`` outside LongRA, the label-task and soft-metric ones on LongRA, the soft-metric
    ones with ``--metrics hard``, ``--data-dir`` with a data file, a file's column options with a
    built-in dataset, a file's label and target fields together).

    Raises:
        ValueError: names the options and the task.
    """
    if args.label_field is not None and args.target_field is not None:
        raise ValueError("--label-field and --target-field: give one (a label column makes a classification dataset, "
                         "a reference column a generation dataset)")

    def given(*dests: str) -> list:  # the flags of these options set to other than the parser's default
        return ["--" + d.replace("_", "-") for d in dests if getattr(args, d) != args.config_parser.get_default(d)]

    if not is_dataset_file(args.dataset):
        fields = given("text_field", "label_field", "target_field", "id_field")
        if fields:
            raise ValueError(f"{', '.join(fields)}: for a dataset file; --dataset {args.dataset!r} is a built-in dataset "
                             "with its own columns (they would be ignored)")
    wrong = []
    if task != "generation":
        wrong += given("teacher_forced", "prompt_only", "n_new_tokens", "target_field")
    if task != "longra":
        wrong += given("ks")
    if task == "longra":  # its own metrics (top-k hits, distractor mass) on its own prompts
        wrong += given("template", "labels", "max_tokens", "start", "topk",
                       "topk_sweep", "metrics", "pis", "n_samples", "prob_space", "soft_maps", "ties")
    elif args.metrics == "hard":
        wrong += given("pis", "n_samples", "soft_maps")
    if is_dataset_file(args.dataset):
        wrong += given("data_dir")
    if wrong:
        why = " with --metrics hard" if args.metrics == "hard" and task != "longra" else ""
        raise ValueError(f"{', '.join(wrong)}: not used by the {task} task of --dataset {args.dataset!r}{why} (they would be ignored)")


def _run_task(args, task: str) -> int:
    """The evaluation of ``task`` with the parsed options; its exit status."""
    if args.n < 1:  # the library's message names n, a word the other messages use too (start too, below)
        raise ValueError(f"--n-examples (--n) must be a positive int, got {args.n}")
    if not 0 <= args.start < args.n:  # the library's message names start and n, words the other messages use too
        raise ValueError(f"--start must be in [0, --n-examples) = [0, {args.n}), got {args.start}")
    _check_task_options(args, task)
    try:
        if task == "longra":
            return _run_longra(args)
        res = _run_generation(args) if task == "generation" else evaluate(
            model=args.model, dataset=args.dataset, methods=args.methods, n=args.n, max_tokens=args.max_tokens,
            method_options=args.method_options,
            out_dir=args.out, seed=args.seed, topk=args.topk, n_steps=args.n_steps, n_samples=args.n_samples,
            prob_space=args.prob_space, data_dir=args.data_dir, progress=not args.no_progress,
            topk_sweep=args.topk_sweep, start=args.start, reference=args.reference, metrics=args.metrics,
            soft_maps=args.soft_maps, ties=args.ties, target_fn=args.target_fn, **({"pis": args.pis} if args.pis else {}),
            template=args.template, labels=args.labels, text_field=args.text_field, label_field=args.label_field,
            id_field=args.id_field, **placement(args),
        )
    except FileNotFoundError as err:
        if reports_input_errors():  # under torchrun on one machine: rank 0 says it
            print(f"error: {err}", file=sys.stderr)
        return 2
    if res.get("rank", 0) != 0:  # under torchrun rank 0 reports
        return 0
    print(res["summary_md"])
    print(f"computed {res['computed']} example(s) (or their missing methods), {res['skipped']} already complete; "
          f"results in {res['out_dir']}")
    if res.get("failed"):
        too_long = task != "generation" and any("but the model accepts at most" in f["reason"] for f in res["failures"])
        print(f"{res['failed']} example(s) skipped, their input refused (listed in summary.md; 'skipped' in records.jsonl): "
              + "; ".join(f"{shown_id(f['id'])}: {f['reason']}" for f in res["failures"][:3]) + (" ..." if res["failed"] > 3 else "")
              + ("; --max-tokens N cuts the texts to N tokens" if too_long and args.max_tokens is None else ""))
    if res.get("failed") and not any(r.get("n") for r in res.get("rows", [])):
        print(f"error: no example was evaluated: the model refused every input (see above); {res['out_dir']!r} holds their "
              "'skipped' records under these settings: delete it, or pass another --out, to run with other settings", file=sys.stderr)
        return 1
    return 0
