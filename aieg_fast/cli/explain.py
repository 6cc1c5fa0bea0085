"""``aieg-fast explain``: explain the model's next token (or label) for a text, or each generated
token with ``--generate N``; print a heatmap, optionally write JSON / HTML."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile

from .. import ops
from ..core.baselines import BASELINE_NAMES
from ..core.chat import chat_template
from ..core.inputs import fill_template
from ..core.path import check_chunk_settings
from ..core.validation import CALL_SETTINGS, DEFAULT_N_STEPS, TARGET_FNS, check_call_settings, check_int
from ..datasets import DATASETS, TASKS, load_dataset
from ..datasets.rows import is_integer_text
from ..explainer import load_model
from ..methods.registry import get_method, list_methods, option_value
from ..runs import replace_file
from .common import add_model_options, as_flags, option_flags, placement, stdout_gone

__all__ = ["add_parser", "run", "parse_option", "parse_steps", "parse_baseline", "option_dict", "check_steps_given",
           "output_path_error"]


def parse_option(s: str):
    """``NAME=VALUE`` of ``--option`` as (name, value); the value as by
    :func:`~aieg_fast.methods.registry.option_value`.

    Raises:
        argparse.ArgumentTypeError: no ``=``, or no name before it.
    """
    k, eq, v = s.partition("=")
    if not eq or not k.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {s!r}")
    return k.strip(), option_value(v)


def add_parser(sub) -> None:
    """Add the ``explain`` subcommand to the subparsers ``sub``."""
    e = sub.add_parser("explain", help="explain the model's next token (or label) for a text")
    e.add_argument("text", nargs="?", help="input text (default with --task sentiment: a shipped SST-2 sentence)")
    add_model_options(e)
    e.add_argument("--method", default="aieg", choices=list_methods())
    e.add_argument("--target", default=None, help="target token (single token, e.g. ' positive'); default: the prediction")
    e.add_argument("--target-is-id", action="store_true", help="read --target as a token id / class index")
    e.add_argument("--contrast-target", default=None, help="contrast token c: explain z_target - z_c (with --target-is-id, an id)")
    e.add_argument("--no-contrast", action="store_true", help="with --task: explain the label's logit alone, not the decision against the other label")
    e.add_argument("--target-fn", default="logit", choices=list(TARGET_FNS),
                   help="explained F: logit, logprob, prob, or label_logprob (with --task: log p over the label words)")
    e.add_argument("--baseline", default=None, type=parse_baseline,
                   help=f"path and masking methods: {', '.join(BASELINE_NAMES)} or a token id (default: the reference token)")
    e.add_argument("--alpha-start", type=float, default=0.0, help="path methods: integrate over [ALPHA_START, 1]")
    e.add_argument("--n-baseline-samples", type=int, default=1, help="path methods: average over this many noisy baselines")
    e.add_argument("--seed", type=int, default=0, help="seed of the baseline noise")
    e.add_argument("--n-steps", type=parse_steps, default=None,
                   help="path methods (IG, IDG, AIEG): path steps (default 50), or 'auto' (IG: refine until --tolerance, "
                        "at most --max-steps points)")
    e.add_argument("--tolerance", type=float, default=None, help="with --n-steps auto: relative completeness error (default 0.05)")
    e.add_argument("--max-steps", type=int, default=None, help="with --n-steps auto: the most path points (default 257)")
    e.add_argument("--internal-batch-size", type=int, default=None)
    e.add_argument("--template", default=None, help="prompt template with {text}; template tokens are held fixed")
    e.add_argument("--chat", action="store_true", help="chat models: the text is a user message in the model's chat template "
                   "(the template held fixed, the assistant's turn opened: the next token starts its answer)")
    e.add_argument("--system", default=None, metavar="TEXT", help="with --chat: a system message first (held fixed)")
    e.add_argument("--label-set", nargs="+", default=None, metavar="WORD",
                   help="with --target-fn label_logprob: the label words (token ids with --target-is-id) the target's "
                        "probability is renormalised over (default with --task: its label words)")
    e.add_argument("--task", choices=list(TASKS), default=None, help="preset: sentiment prompt, label words ' positive'/' negative': explains the decision, "
                        "label against label; a --target that is no label word replaces it (its logit alone; a note says so)")
    e.add_argument("--backend", choices=list(ops.BACKENDS), default="auto")
    e.add_argument("--option", action="append", type=parse_option, metavar="NAME=VALUE",
                   help="method option; VALUE is read as JSON (n_pilot=10, adaptive=false, a list as attn_layers=[0,1]; "
                        "Python's True / False too), other text as text: --option ef_mode=none")
    e.add_argument("--tokens", action="store_true", help="show tokens instead of words (in the terminal and --html)")
    e.add_argument("--json", metavar="FILE", help="write the result as JSON")
    e.add_argument("--html", metavar="FILE", help="write an HTML heatmap")
    e.add_argument("--no-progress", action="store_true")
    e.add_argument("--generate", type=int, default=None, metavar="N", help="generate N tokens greedily and explain each one (per-step heatmap)")
    e.add_argument("--generated-text", default=None, metavar="TEXT",
                   help="explain each token of TEXT as the continuation (teacher forcing: a given answer, per-step heatmap)")
    e.set_defaults(fn=run, flags=option_flags(e, tolerance="--tolerance"))


def parse_steps(value: str):
    """``--n-steps``: an int, or ``auto``."""
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int or 'auto', got {value!r}") from None


def parse_baseline(s: str):
    """``--baseline``: a name of BASELINE_NAMES or a token id (an int).

    Raises:
        argparse.ArgumentTypeError: neither.
    """
    if is_integer_text(s):
        return int(s)
    if s not in BASELINE_NAMES:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(BASELINE_NAMES)} or a token id, got {s!r}")
    return s


def option_dict(pairs, flags: dict) -> dict:
    """The ``--option`` pairs (:func:`parse_option`) as a dict, refusing a name given twice (the
    last would silently win) and a setting of the call (:data:`CALL_SETTINGS`: ``n_steps``,
    ``baseline``, ...) rather than a method option, saying which option of the command sets it:
    ``flags`` maps those settings to the command's options (one it lacks: the command has none).

    Raises:
        ValueError: names ``--option``, the setting and the option to use, or the repeated name.
    """
    pairs = list(pairs or [])
    options = dict(pairs)
    twice = [k for k in options if sum(k == name for name, _ in pairs) > 1]
    if twice:
        raise ValueError(f"--option {twice[0] + '=...'!r} is given {sum(k == twice[0] for k, _ in pairs)} times; give each option once")
    for name in options:
        if name in CALL_SETTINGS:
            use = f"give it as {flags[name]}" if name in flags else "this command has no option for it"
            raise ValueError(f"--option {name + '=...'!r}: a setting of the call, not a method option; {use}")
    return options


def check_steps_given(method: str, n_steps) -> None:
    """Refuse ``--n-steps`` (given: not None) for a method without path steps, which would ignore it.

    Raises:
        ValueError: names ``--n-steps``, the method and those that take steps.
    """
    m = get_method(method)
    if n_steps is not None and not m.uses_steps:
        steps = [n for n in list_methods() if get_method(n).uses_steps]
        raise ValueError(f"--n-steps: method {m.name!r} takes no path steps (only {steps} do); leave --n-steps out")


def _input_error(args):
    """The error message of inconsistent arguments or missing output folders, else None."""
    if args.target_fn == "label_logprob" and args.task is None and args.label_set is None:
        return "--target-fn label_logprob needs --label-set WORD WORD... (the label words) or --task"
    if args.label_set is not None and args.target_fn != "label_logprob":
        return f"--label-set applies with --target-fn label_logprob (the target renormalised over it), got --target-fn {args.target_fn}"
    if args.generate is not None and args.generate < 1:
        return f"--generate must be a positive int (tokens to generate), got {args.generate}"
    if args.generated_text == "":
        return "--generated-text is empty: give the continuation to explain, or --generate N to decode one"
    if args.generate is not None and args.generated_text is not None:
        return "--generate N decodes the continuation, --generated-text gives it: give one of them"
    steps = "--generate" if args.generate is not None else "--generated-text" if args.generated_text is not None else None
    if steps and args.n_steps == "auto":
        return f"--n-steps auto: not with {steps} (it refines integrated_gradients for one target); give an int (50 is usual)"
    if steps and (args.task is not None or args.target is not None):
        return f"{steps} explains each token of the continuation; it cannot be combined with --task or --target"
    if args.no_contrast and args.contrast_target is not None:
        return "--no-contrast and --contrast-target exclude each other (one says no contrast, the other names it)"
    if args.no_contrast and args.task is None:
        return ("--no-contrast applies with --task (which contrasts the predicted label with the other one); "
                "without --task nothing is contrasted unless --contrast-target is given")
    if args.chat and (args.template is not None or args.task is not None):
        return "--chat wraps the text in the model's chat template: not with --template or --task (they give their own prompt)"
    if args.system is not None and not args.chat:
        return "--system is the system message of --chat: add --chat (or put it in --template)"
    if args.text is None and args.task is None:
        return "TEXT is required (or use --task sentiment to explain a shipped SST-2 sentence)"
    if args.target_is_id and args.target is None and args.contrast_target is None:
        return ("--target-is-id reads --target and --contrast-target as token ids / class indices, "
                "but neither is given (got --target None, --contrast-target None)")
    if args.target_is_id and args.target is not None and not is_integer_text(args.target):
        return f"--target-is-id needs --target to be an integer (a token id or class index), got --target {args.target!r}"
    if args.target_is_id and args.contrast_target is not None and not is_integer_text(args.contrast_target):
        return f"--target-is-id needs --contrast-target to be an integer (a token id or class index), got {args.contrast_target!r}"
    if args.target_is_id and args.label_set is not None and not all(is_integer_text(w) for w in args.label_set):
        return f"--target-is-id needs --label-set to be integers (token ids), got {args.label_set}"
    for flag, path in (("--json", args.json), ("--html", args.html)):
        err = output_path_error(flag, path) if path else None
        if err:
            return err
    if args.json and args.html and os.path.abspath(args.json) == os.path.abspath(args.html):
        return f"--json and --html name the same file {args.json!r}"
    return None


def output_path_error(flag: str, path: str):
    """Why ``path`` cannot be written (a missing folder, a folder, a read-only file or folder),
    checked before any computation without writing anything the user sees; None when it can."""
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        return f"{flag} {path!r}: the folder {folder!r} does not exist"
    if os.path.isdir(full):
        return f"{flag} {path!r} is a folder, not a file"
    if os.path.exists(full) and not os.access(full, os.W_OK):
        return f"{flag} {path!r}: the file is not writable"
    try:  # a probe file, removed at once: the only sure test of a folder's permissions
        fd, probe = tempfile.mkstemp(prefix=".aieg-fast-probe-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as err:
        return f"{flag} {path!r}: cannot write in the folder {folder!r} ({err.strerror or err})"
    return None


def _task_target(ex, task: str, text: str, template):
    """The task's template, its predicted label word and the other label words (printed with
    the label probabilities)."""
    spec = DATASETS[TASKS[task]]
    template = template or spec.template
    probs = ex.label_probs(text, spec.labels, template)
    label = int(probs[1] >= probs[0])
    print(f"text: {text.strip()}")
    print(
        f"predicted sentiment: {spec.label_names[label]}  "
        f"(p(positive) = {probs[1]:.3f}, p(negative) = {probs[0]:.3f}, renormalised over the two label words)"
    )
    return template, spec.labels[label], spec.labels[1 - label], list(spec.labels)


def _task_call(ex, args, text, target, contrast):
    """(template, target, contrast, label words) of ``--task``: the target is the predicted label
    word unless --target names one, and a label word is contrasted with the other one (the
    decision) unless --contrast-target, --no-contrast or --target-fn label_logprob says otherwise.
    A --target that is no label word replaces the decision (its logit alone, in the task's
    prompt): a note on stderr says so."""
    template, predicted, _, labels = _task_target(ex, args.task, text, args.template)
    prompt = ex.encode_with_offsets(text, template)[2]
    asked, one_token = (predicted, True) if target is None else _label_word(ex, target, labels, prompt)
    if contrast is None and not args.no_contrast and args.target_fn != "label_logprob":
        if asked is not None:
            contrast = next(l for l in labels if l != asked)  # the decision: this label against the other one
        elif one_token:  # else the call refuses the target, saying why
            print(f"note: --target {args.target!r} is not a label word of --task {args.task} ({', '.join(map(repr, labels))}): "
                  "it replaces the label decision; its logit alone is explained, in the task's prompt (a label word as "
                  "--target explains the decision; --contrast-target C explains the target against C)", file=sys.stderr)
    return template, predicted if target is None else target, contrast, labels


def _label_word(ex, target, labels, prompt):
    """(the label word of ``labels`` that names the same token as ``target`` after ``prompt`` (a
    label word as given, or its id with --target-is-id), else None; whether ``target`` is one
    token: when it is not, the attribution call says why)."""
    try:
        tid = ex.resolve_target(target, context=prompt)["id"]
        ids = [ex.resolve_target(label, context=prompt)["id"] for label in labels]
    except (ValueError, TypeError):
        return None, False
    return (labels[ids.index(tid)] if tid in ids else None), True


def _write_outputs(res, args) -> int:
    """Write --json / --html; 0, or 1 when one failed after all (a full disk): the result is then
    saved as JSON in the temporary folder instead, so that it is not lost."""
    status = 0
    for flag, path in (("--json", args.json), ("--html", args.html)):
        if not path:
            continue
        try:
            if flag == "--json":
                res.save(path)
            else:
                page = "<!doctype html><meta charset='utf-8'>" + res.to_html(words=not args.tokens)
                replace_file(path, page.encode("utf-8"))  # whole or not at all, as --json (a kill mid-write)
            print(f"wrote {path}")
        except OSError as err:
            fd, rescue = tempfile.mkstemp(prefix="aieg-fast-result-", suffix=".json")
            os.close(fd)
            res.save(rescue)
            print(f"error: {flag} {path!r} could not be written ({err.strerror or err}); the result is saved in {rescue}",
                  file=sys.stderr)
            status = 1
    return status


def _n_steps(args) -> int:
    """--n-steps, or the library's default when it is left out."""
    return DEFAULT_N_STEPS if args.n_steps is None else args.n_steps


def _check_before_loading(args, text, options) -> None:
    """The checks that need no model, run before it is loaded (which can take minutes): the text
    and template, the method and its options (their names: :func:`option_dict`), the step
    settings and the internal batch size.

    Raises:
        ValueError / TypeError: naming the argument, as the call itself would.
    """
    fill_template(text, args.template)
    check_steps_given(args.method, args.n_steps)
    m = get_method(args.method)
    n_steps = _n_steps(args)
    check_call_settings(n_steps, args.backend, args.tolerance, args.max_steps)  # 'auto' with --generate: _input_error
    m.check_steps(m.options(**options), n_steps)
    check_chunk_settings(args.internal_batch_size, None)
    check_int("n_baseline_samples", args.n_baseline_samples, 1)
    if not 0.0 <= args.alpha_start < 1.0:  # NaN too; the call's own check names alpha_range, which has no option
        raise ValueError(f"--alpha-start must be in [0, 1) (the path runs from it to 1), got {args.alpha_start}")


def run(args) -> int:
    """Explain and print; 0, 2 on inconsistent arguments or an output path that cannot be
    written (checked before the model is loaded; ``error: ...`` on stderr), 1 when an output
    could not be written after all (the result is then saved in the temporary folder)."""
    err = _input_error(args)
    if err is not None:
        print(f"error: {err}", file=sys.stderr)
        return 2
    text = args.text if args.text is not None else load_dataset(TASKS[args.task])[0][0]
    options = option_dict(args.option, CALL_SETTINGS)
    _check_before_loading(args, text, options)
    ex = load_model(args.model, **placement(args))
    template = chat_template(ex.tokenizer, system=args.system) if args.chat else args.template
    target, contrast = args.target, args.contrast_target
    if args.target_is_id:  # the ids given; no --target: the prediction (with --task: the predicted label word)
        target = None if target is None else int(target)
        contrast = None if contrast is None else int(contrast)
    calls = dict(target_fn=args.target_fn)
    if args.task is not None:
        template, target, contrast, labels = _task_call(ex, args, text, target, contrast)
        if args.target_fn == "label_logprob":
            calls["label_set"] = labels
    if args.label_set is not None:  # the words given (ids with --target-is-id) win over --task's
        calls["label_set"] = [int(w) for w in args.label_set] if args.target_is_id else args.label_set
    if contrast is not None:
        calls["contrast_target"] = contrast
    if args.tolerance is not None or args.max_steps is not None:
        calls.update(tolerance=args.tolerance, max_steps=args.max_steps)
    if args.baseline is not None or args.alpha_start != 0 or args.n_baseline_samples != 1:
        calls.update(baseline=args.baseline, alpha_range=(args.alpha_start, 1.0), n_baseline_samples=args.n_baseline_samples, seed=args.seed)
    if args.generate is not None or args.generated_text is not None:
        res = ex.attribute_generation(
            text, max_new_tokens=args.generate, generated_text=args.generated_text, method=args.method, n_steps=_n_steps(args),
            internal_batch_size=args.internal_batch_size, template=template, backend=args.backend,
            progress=not args.no_progress, **calls, **options,
        )
    else:
        res = ex.attribute(
            text, method=args.method, target=target, n_steps=_n_steps(args), internal_batch_size=args.internal_batch_size,
            template=template, backend=args.backend, progress=not args.no_progress, **calls, **options,
        )
    try:
        shown = dataclasses.replace(res, degenerate=[dict(f, message=as_flags(f["message"], args.flags)) for f in res.degenerate])
        shown.show(words=not args.tokens)  # its findings' advice in this command's options (--n-steps, not n_steps)
        print(f"backend: {res.backend or 'no kernel op used'}   time: {res.timing.get('total', 0):.2f} s")
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the view is cut short, the --json / --html files are still written
        stdout_gone()
    except SystemExit:  # the same from rich, whose console points stdout at the null device and exits on a closed pipe
        pass
    return _write_outputs(res, args)
