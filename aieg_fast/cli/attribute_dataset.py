"""``aieg-fast attribute-dataset``: attribute every example of a JSONL / JSON / CSV / TSV file
(:func:`aieg_fast.dataset_attribution.attribute_dataset`); resumable, data parallel under
``torchrun --nproc-per-node N``."""
from __future__ import annotations

import sys

from .. import ops
from ..core.baselines import BASELINE_NAMES
from ..core.diagnostics import FLAG_MEANINGS
from ..core.validation import DEFAULT_N_STEPS, TARGET_FNS
from ..dataset_attribution import FILE_TYPES, PARQUET_FILE, RECORDS_FILE, attribute_dataset
from ..datasets import DATASETS, TASKS
from ..methods.registry import list_methods
from ..runs import torchrun_rank
from .common import add_model_options, option_flags, placement
from .explain import check_steps_given, option_dict, parse_baseline, parse_option, parse_steps

__all__ = ["add_parser", "run"]


#: the settings of a call (``CALL_SETTINGS``) this command takes, with the option that sets them
_CALL_FLAGS = {"n_steps": "--n-steps", "internal_batch_size": "--internal-batch-size", "baseline": "--baseline",
               "template": "--template (or a --template-column)", "backend": "--backend", "target_fn": "--target-fn",
               "target": "--target-column (one per row)", "contrast_target": "--contrast-column (one per row)"}


def add_parser(sub) -> None:
    """Add the ``attribute-dataset`` subcommand to the subparsers ``sub``."""
    a = sub.add_parser(
        "attribute-dataset",
        help="attribute every example of a JSONL / CSV file (resumable; data parallel under torchrun)",
        description=f"Writes OUT/{RECORDS_FILE} (one record per example: tokens, scores, target, method, options, timing), "
                    f"OUT/config.json and with --parquet OUT/{PARQUET_FILE}. Rerun the same command to resume. Under "
                    "`torchrun --nproc-per-node N` the examples are shared by N processes and merged into one file.")
    a.add_argument("data", help=f"input file ({', '.join(FILE_TYPES)}) with a text column and optional target, contrast, "
                                "template and id columns")
    a.add_argument("--out", required=True, help="output folder; rerun with the same folder to resume")
    add_model_options(a)
    a.add_argument("--method", default="aieg", choices=list_methods(), metavar="METHOD",
                   help=f"one of {', '.join(list_methods())} (default: aieg)")
    a.add_argument("--option", action="append", type=parse_option, metavar="NAME=VALUE",
                   help="method option; VALUE is read as JSON (n_pilot=10, adaptive=false, a list as attn_layers=[0,1]; "
                        "Python's True / False too), other text as text: ef_mode=none")
    a.add_argument("--text-column", "--text-field", default=None, help="column of the texts (default: text)")
    a.add_argument("--target-column", "--target-field", default=None, help="column of the targets (default: target, when present; "
                                                          "an empty cell or no column: the model's prediction)")
    a.add_argument("--contrast-column", default=None, help="column of contrast tokens: explain z_target - z_contrast (default: contrast, when present)")
    a.add_argument("--template-column", default=None, help="column of per-row templates with {text} (default: template, when present)")
    a.add_argument("--id-column", "--id-field", default=None, help="column of identifiers kept in the records (default: id, when present)")
    a.add_argument("--target-is-id", action="store_true", help="read targets and contrasts as token ids / class indices")
    a.add_argument("--template", default=None, help="prompt template with {text} for rows without their own")
    a.add_argument("--task", choices=list(TASKS), default=None,
                   help="preset: the task's template and label words, F = log p(label) over them (--target-fn label_logprob; "
                        "with another --target-fn, the template only)")
    a.add_argument("--target-fn", default=None, choices=list(TARGET_FNS), help="explained F (default: logit; label_logprob with --task)")
    a.add_argument("--label", action="append", default=None, metavar="TOKEN",
                   help="a label token of --target-fn label_logprob (repeat: --label ' negative' --label ' positive')")
    a.add_argument("--baseline", default=None, type=parse_baseline,
                   help=f"path and masking methods: {', '.join(BASELINE_NAMES)} or a token id (default: the method's)")
    a.add_argument("--n-steps", type=parse_steps, default=None,
                   help=f"path steps of the path methods (default: {DEFAULT_N_STEPS}), or 'auto' (integrated_gradients: "
                        "refined until its completeness error is within 5 %%)")
    a.add_argument("--batch-size", type=int, default=8, help="examples per attribution call (one padded batch; default: 8)")
    a.add_argument("--internal-batch-size", type=int, default=None, help="path points per forward/backward inside a call")
    a.add_argument("--backend", choices=list(ops.BACKENDS), default="auto", help="kernels (default: auto)")
    a.add_argument("--limit", type=int, default=None, help="only the first N rows")
    a.add_argument("--parquet", action="store_true", help=f"also write OUT/{PARQUET_FILE} (needs pyarrow)")
    a.add_argument("--no-progress", action="store_true", help="no progress bar")
    a.set_defaults(fn=run, flags=option_flags(a, out_dir="--out", label_set="--label"))


def run(args) -> int:
    """Run it and print what was done; 0, or 1 when the model refused every example (all
    skipped, as ``evaluate``; errors: ``aieg_fast.cli.main`` prints them, 2)."""
    template, labels, target_fn = args.template, args.label, args.target_fn or "logit"
    if args.task is not None:
        spec = DATASETS[TASKS[args.task]]
        template = template or spec.template
        target_fn = args.target_fn or "label_logprob"
        if target_fn == "label_logprob":  # another --target-fn takes the task's template only (the labels make F's support)
            labels = labels or list(spec.labels)
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be a positive int, got {args.limit}")
    check_steps_given(args.method, args.n_steps)
    options = option_dict(args.option, _CALL_FLAGS)
    res = attribute_dataset(
        args.data, args.out, args.model, method=args.method, options=options, text_column=args.text_column,
        target_column=args.target_column, contrast_column=args.contrast_column, template_column=args.template_column,
        id_column=args.id_column, target_is_id=args.target_is_id, template=template, target_fn=target_fn, label_set=labels,
        n_steps=DEFAULT_N_STEPS if args.n_steps is None else args.n_steps, batch_size=args.batch_size,
        internal_batch_size=args.internal_batch_size, baseline=args.baseline, backend=args.backend, limit=args.limit,
        parquet=args.parquet, progress=not args.no_progress, **placement(args),
    )
    if res is None or torchrun_rank() != 0:
        return 0
    print(f"{res['n_examples']} example(s): {res['computed']} computed now"
          + (f", {res['skipped_now']} skipped now (input refused)" if res["skipped_now"] else "")
          + f", {res['done_before']} done before"
          + (f", on {res['world_size']} processes" if res["world_size"] > 1 else "") + f" ({res['seconds']:.1f} s)")
    if res["skipped"]:
        earlier = res["skipped"] - res["skipped_now"]
        print(f"{res['skipped']} skipped in all" + (f" ({earlier} by an earlier run)" if earlier else "")
              + ", the model refused their text (records with 'skipped'): "
              + "; ".join(f"row {s['index']}: {s['reason']}" for s in res["skips"][:3]) + (" ..." if res["skipped"] > 3 else ""))
    if res["flag_kinds"]:
        said = ", ".join(f"{n} {k}: {FLAG_MEANINGS[k]}" for k, n in res["flag_kinds"].items())
        print(f"{res['degenerate']} record(s) carry flags in their 'degenerate' field ({said})")
    print(f"records: {res['records_file']}" + (f"\nparquet: {res['parquet_file']}" if res["parquet_file"] else ""))
    if res["skipped"] and res["skipped"] == res["n_examples"]:
        print("error: no example was attributed: the model refused every input (see above)", file=sys.stderr)
        return 1
    return 0

