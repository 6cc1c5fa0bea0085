"""Command line ``aieg-fast``: one module per command.

* :mod:`.explain` — ``aieg-fast explain``: the model's next token (or label, or generated
  tokens) for a text, explained;
* :mod:`.verify` — ``aieg-fast verify``: every method with the reference kernels and the
  extension, compared;
* :mod:`.methods` — ``aieg-fast methods``: the attribution methods;
* :mod:`.info` — ``aieg-fast info``: versions and extension build;
* :mod:`.evaluate` — ``aieg-fast evaluate``: faithfulness metrics on a classification dataset
  (sentiment, BoolQ, a user's file), LongRA's ground-truth check, or generated text, per step;
* :mod:`.attribute_dataset` — ``aieg-fast attribute-dataset``: every example of a file
  attributed, resumable, data parallel under torchrun;
* :mod:`.train_nano` — ``aieg-fast train-nano``: GPT-nano on SST-2 train;
* :mod:`.train_sentiment` — ``aieg-fast train-sentiment``: SmolLM2 fine-tuned on SST-2 (or half of BoolQ) with LoRA.

Each command module has ``add_parser(sub)`` (its options; the choices come from the registries)
and ``run(args) -> int`` (the exit status); :mod:`.common` holds the model options several share
(``--model``, ``--device``, ``--dtype``, ``--device-map``). A command's parser sets ``flags``
(:func:`.common.option_flags`): an error message names the library's arguments, and ``main``
writes each as the option that sets it (``n_steps`` → ``--n-steps``); a command's
:class:`~aieg_fast.AttributionWarning` is written the same way, as a ``warning: ...`` line
without the Python source line it would name.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import re
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import List, Optional

from . import attribute_dataset, evaluate, explain, info, methods, train_nano, train_sentiment, verify
from ..core.diagnostics import AttributionWarning
from ..runs import PARTS_DIR, reports_input_errors, torchrun_rank, torchrun_world_size
from .common import apply_config, as_flags, expand_home, note_typed_escapes, stdout_gone

__all__ = ["build_parser", "main", "COMMANDS", "RUN_COMMANDS"]

#: the command modules, in the order of ``aieg-fast --help``.
COMMANDS = (explain, verify, methods, info, evaluate, attribute_dataset, train_nano, train_sentiment)

#: the commands that run over a dataset into a folder: resumable, and data parallel under
#: torchrun (the others refuse it: each process would do all the work, into the same files).
RUN_COMMANDS = ("evaluate", "attribute-dataset")


def build_parser() -> argparse.ArgumentParser:
    """The ``aieg-fast`` parser with one subcommand per module of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="aieg-fast", description="Token attributions for decoder-only LLMs.")
    sub = p.add_subparsers(dest="cmd", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``aieg-fast`` with ``argv`` (default: ``sys.argv[1:]``); the exit status.

    0 on success; 2 on an error (``error: ...`` on stderr: ValueError, TypeError,
    RuntimeError, OSError), bad arguments (argparse exits with 2) or a command other than
    :data:`RUN_COMMANDS` under torchrun with ``WORLD_SIZE`` > 1; 130 when interrupted. An
    interrupted run command, or one stopped by the system once it has records (an OSError: a
    full disk), says that its finished examples are kept and a rerun resumes.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = expand_home(build_parser().parse_args(argv))
    if torchrun_rank() == 0:  # said once under torchrun
        note_typed_escapes(args)
    if torchrun_world_size() > 1 and args.cmd not in RUN_COMMANDS:
        if torchrun_rank() == 0:  # said once
            print(f"error: aieg-fast {args.cmd} runs in one process: under torchrun (WORLD_SIZE={torchrun_world_size()}) "
                  "each process would do all of the same work (writing the same files, where it writes any); start it without torchrun "
                  f"(only {' and '.join(RUN_COMMANDS)} share their work between processes)", file=sys.stderr)
        return 2
    if getattr(args, "config", None):
        try:
            args = expand_home(apply_config(args, argv))
        except ValueError as err:
            if reports_input_errors():
                print(f"error: {err}", file=sys.stderr)
            return 2
    if getattr(args, "no_progress", False):
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except ImportError:
            pass
    try:
        with _sigterm_interrupts(), _warnings_as_flags(getattr(args, "flags", {})):
            rc = args.fn(args)
        sys.stdout.flush()  # a pipe's buffered output is written here, where a reader gone is caught below
        return rc
    except BrokenPipeError:  # the reader of stdout went away (`aieg-fast info | head -3`): nothing to say, nowhere to say it
        stdout_gone()
        return 1
    except (ValueError, TypeError, RuntimeError, OSError) as err:
        said = isinstance(err, (ValueError, TypeError, FileNotFoundError)) and not reports_input_errors()  # by rank 0
        if getattr(err, "reported_by", None) is None and not said:  # under torchrun: printed by the rank that found it
            print(f"error: {_peer_gone(err)}{as_flags(str(err), getattr(args, 'flags', {}))}{_resume_hint(args, err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = f" ({KEPT}; rerun the same command to resume)" if args.cmd in RUN_COMMANDS else ""
        print(f"interrupted{hint}", file=sys.stderr)
        return 130


#: what a run command stopped before its end has written
KEPT = "finished examples are kept in the records"


def _peer_gone(err: BaseException) -> str:
    """What a run's process says first when the connection to another one broke under torchrun
    (gloo's "Connection closed by peer"): the other stopped, and its own error says why."""
    if torchrun_world_size() > 1 and isinstance(err, RuntimeError) and re.search(r"Connection (closed|reset) by peer", str(err)):
        return "another process of this run stopped (its error, printed by it, says why), so this one stopped too: "
    return ""


def _resume_hint(args, err: BaseException) -> str:
    """For a run command (:data:`RUN_COMMANDS`) stopped by the system (an OSError with an
    errno: a full disk, a folder no longer writable; not a missing file or a closed pipe) once
    its folder holds records, that what it finished is kept and the same command resumes; ""
    otherwise (before any record there is nothing to resume)."""
    out = getattr(args, "out", None)
    if (args.cmd not in RUN_COMMANDS or out is None or not isinstance(err, OSError) or err.errno in (None, errno.EPIPE)
            or isinstance(err, FileNotFoundError)):
        return ""
    if not (any(Path(out).glob("*.jsonl")) or (Path(out) / PARTS_DIR).is_dir()):
        return ""
    if err.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f" (the disk is full: {KEPT}; free some space, then rerun the same command to resume)"
    return f" ({KEPT}; once that is fixed, rerun the same command to resume)"


@contextlib.contextmanager
def _warnings_as_flags(flags: dict):
    """The package's :class:`~aieg_fast.AttributionWarning` written as ``warning: <message>``
    on stderr, the library's argument names as the options that set them
    (:func:`.common.as_flags`), instead of Python's ``file:line: Category: message`` and the
    source line, which in a command are the entry point's (``sys.exit(main())``); a result's
    flags lose their pointer to ``res.degenerate`` (the command's output shows them). Other
    warnings keep Python's format; the filters (``-W``, ``PYTHONWARNINGS``) apply to all, and
    the former hook is put back."""
    with warnings.catch_warnings():
        former = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, AttributionWarning):
                text, pointer = str(message), getattr(message, "pointer", "")
                text = text[:-len(pointer)] if pointer and text.endswith(pointer) else text
                print(f"warning: {as_flags(text, flags)}", file=sys.stderr if file is None else file)
            else:
                former(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM (``timeout``, a job scheduler, ``kill``) stops a command as Ctrl-C does: the run's
    folder gets its ``command.json`` and the message says how to resume. In the main thread only
    (signal handlers cannot be set elsewhere); the former handler is put back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt

    former = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, former)
