"""Options several commands share: which model, on which device, in which dtype."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from ..core.validation import DEVICE_MAPS, DTYPES, parse_device
from ..datasets import DATASETS
from ..models import DEFAULT_MODEL, LLAMA_NANO_NAME, NANO_NAME, SST2_NAME, home_expanded
from ..runs import COMMAND_FILE, replace_file

__all__ = ["stdout_gone", "expand_home", "add_model_options", "placement", "apply_config", "write_command", "COMMAND_FILE", "DefaultsHelpFormatter",
           "option_flags", "as_flags"]


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults formatter, without a second default where the help names one, without
    "(default: None)" / "(default: False)", and lists written as the command line takes them."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if "default" in text or default is None or default is False or default is argparse.SUPPRESS:
            return text
        if isinstance(default, (list, tuple)):
            return f"{text} (default: {','.join(str(v) for v in default)})"
        return super()._get_help_string(action)

#: parsed attributes that are not options
_NOT_OPTIONS = ("fn", "cmd", "config", "config_parser", "flags")


def option_flags(parser, skip=(), **renamed) -> dict:
    """Library argument name → the option that sets it, for :func:`as_flags`: each option of
    ``parser`` whose destination holds an underscore (``n_steps`` → ``--n-steps``; a one-word
    destination such as ``model`` or ``target`` stays a word of the message) but those of
    ``skip``, and ``renamed``: arguments whose option has another name or one word
    (``out_dir="--out"``, ``lr="--lr"``). Call it once the parser has all its options."""
    flags = {a.dest: next(o for o in a.option_strings if o.startswith("--")) for a in parser._actions  # the first long name
             if "_" in a.dest and a.dest not in skip and any(o.startswith("--") for o in a.option_strings)}
    return {**flags, **renamed}


def as_flags(message: str, flags: dict) -> str:
    """``message`` (the library's, which names its arguments) with each name of ``flags`` that
    stands as a word of the message written as the option that sets it: "n_steps must be ..." →
    "--n-steps must be ...", "got n_steps=20" → "got --n-steps 20". A quoted span (a value shown
    with repr: a template, a path, a column, a method spec) and a name inside a path, an option,
    a longer name or after a backslash stay as they are. "or None" is dropped ("a positive int
    or None": None is the option left out)."""
    out, last = [], 0
    for q in _QUOTED.finditer(message):
        out += [_renamed(message[last : q.start()], flags), q.group(0)]
        last = q.end()
    return "".join(out) + _renamed(message[last:], flags)


def _renamed(text: str, flags: dict) -> str:
    for name, flag in flags.items():
        text = re.sub(rf"(?<![\w/.\\'\"-]){re.escape(name)}(?:(=)|(?![\w/.=\-'\"]))",
                      lambda m, flag=flag: flag + (" " if m.group(1) else ""), text)
    text = re.sub(r" or None\b(?! \()", "", text)  # "a positive int or None": leaving an option out is its None (not when explained)
    return re.sub(r"(--[\w-]+)(?: \(\1\)| / \1)", r"\1", text)  # a message that named both: "label_field (--label-field)"


#: a quoted span of a message: '...' or "...", backslash escapes inside, on one line
_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")


def apply_config(args, argv):
    """``args`` parsed again with the options of the JSON file ``args.config`` as defaults, so
    that options given on the command line win over the file's.

    The file is an object whose keys are long option names (``"n-steps"`` or ``"n_steps"``)
    and whose values are what the option takes: strings are parsed as on the command line,
    numbers, lists and booleans are used as they are (a list for a comma-separated option, e.g.
    ``"pis": [0.1, 0.5]``; a list of ``methods`` is one spec per item, a comma inside an item
    part of it: ``["aieg", "heta:components=gate,information"]``).

    Raises:
        ValueError: the file cannot be read or is not a JSON object, a key names no option of
            the command, a value is not one of the option's choices, or a switch's value is not
            a JSON boolean (each names ``--config``).
    """
    parser = args.config_parser
    try:
        cfg = json.loads(Path(args.config).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"--config {args.config!r}: cannot read a JSON object ({err})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"--config {args.config!r}: expected a JSON object of options, got {type(cfg).__name__}")
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help",) + _NOT_OPTIONS}
    if cfg.get("command", args.cmd) != args.cmd:
        raise ValueError(f"--config {args.config!r}: written for `aieg-fast {cfg['command']}`, not `{args.cmd}`")
    saved = {d: a.default for d, a in actions.items()}
    defaults = {}
    for key, value in cfg.items():
        if key == "command":
            continue
        dest = str(key).lstrip("-").replace("-", "_")
        if dest not in actions:
            raise ValueError(f"--config {args.config!r}: {key!r} is not an option of this command "
                             f"(options: {', '.join(sorted(actions))})")
        act = actions[dest]
        if act.nargs == 0 and not isinstance(value, bool):  # a switch: the string "false" would turn it on
            raise ValueError(f"--config {args.config!r}: {key!r} is a switch: give true or false (a JSON boolean), got {value!r}")
        if isinstance(value, list) and act.nargs is None and dest not in _SPEC_LISTS:
            value = ",".join(str(v) for v in value)  # a comma-separated option given as a list
        if act.choices is not None and value is not None and value not in act.choices:
            raise ValueError(f"--config {args.config!r}: {key!r} must be one of {list(act.choices)}, got {value!r}")
        if isinstance(value, str) and callable(act.type):  # argparse converts it later, naming the flag only
            try:
                act.type(value)
            except (ValueError, TypeError, argparse.ArgumentTypeError) as err:
                raise ValueError(f"--config {args.config!r}: {key!r}: {err or 'invalid value'} (got {value!r})") from None
        defaults[dest] = value
    parser.set_defaults(**defaults)
    try:
        again = parser.parse_args(argv[argv.index(args.cmd) + 1:])
        again.cmd = args.cmd
        return again
    finally:
        parser.set_defaults(**{d: saved[d] for d in defaults})


#: options that may name a local file or folder (made absolute in command.json when they exist)
_PATH_OPTIONS = ("model", "out", "dataset", "data_dir")
#: every option (and attribute-dataset's ``data``) that names a file or folder: a ``~`` there is the
#: home folder, as a shell gives it for ``--out ~/x`` but not for ``--out=~/x`` or in a --config file
_HOME_OPTIONS = (*_PATH_OPTIONS, "config", "data", "dev_file", "html", "json", "train_file")


#: options whose list in a --config file is taken as it is, each item one method spec (a comma in
#: an item, heta:components=gate,information, is part of it; joined, it would split the spec)
_SPEC_LISTS = ("methods",)


def expand_home(args):
    """``args`` with a leading ``~`` of each path option read as ``load_model`` reads a model's
    (:func:`~aieg_fast.models.loading.home_expanded`; :data:`_HOME_OPTIONS`): an
    ``--out=~/runs`` made a folder named ``~`` in the working directory."""
    for key in _HOME_OPTIONS:
        if isinstance(getattr(args, key, None), str):
            setattr(args, key, home_expanded(getattr(args, key)))
    return args


def note_typed_escapes(args) -> None:
    """A note on stderr for each text option (:data:`_TEXT_OPTIONS`) holding a backslash and
    ``n`` or ``t`` as typed: the shell passes ``'...\\n...'`` as those two characters, not a newline,
    so a chat or prompt template built that way silently held a backslash and an ``n``."""
    for key, flag in _TEXT_OPTIONS.items():
        value = getattr(args, key, None)
        if isinstance(value, str) and ("\\n" in value or "\\t" in value):
            print(f"note: {flag} holds a backslash followed by n or t, as typed: the shell passes these as two "
                  "characters, not a newline or tab; for a real newline write $'...\\n...' in bash (or a newline "
                  "inside the quotes)", file=sys.stderr)


#: text options whose newlines users type as \n → the option (:func:`note_typed_escapes`)
_TEXT_OPTIONS = {"template": "--template", "system": "--system"}


#: names the commands resolve before any path (the shipped models and the registry's datasets)
_NAMES = frozenset((DEFAULT_MODEL, NANO_NAME, LLAMA_NANO_NAME, SST2_NAME, *DATASETS))


def _absolute(key: str, value):
    """``value`` as an absolute path when ``key`` is a path option naming something that exists
    here (a hub id, a shipped model or a registry dataset stays as it is), so ``--config``
    works from any folder."""
    if key not in _PATH_OPTIONS or not isinstance(value, str) or not value or value in _NAMES or not os.path.exists(value):
        return value
    return os.path.abspath(value)


def write_command(args, folder) -> Path:
    """Write every resolved option of ``args`` to ``folder/command.json`` (the command's
    settings as run: ``aieg-fast <cmd> --config folder/command.json`` runs it again)."""
    opts = {k.replace("_", "-"): _absolute(k, v) for k, v in sorted(vars(args).items()) if k not in _NOT_OPTIONS}
    path = Path(folder) / COMMAND_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, (json.dumps({"command": args.cmd, **opts}, indent=1, default=str) + "\n").encode("utf-8"))
    return path


def _device_arg(value: str) -> str:
    """``--device``: checked when parsed (a name torch does not know, a device this machine lacks).

    Raises:
        argparse.ArgumentTypeError: the reason, from :func:`~aieg_fast.core.validation.parse_device`.
    """
    try:
        parse_device(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).replace("'cuda', 'cuda:N' or a torch.device", "'cuda' or 'cuda:N'")) from None
    return value


def add_model_options(p) -> None:
    """Add ``--model``, ``--device``, ``--dtype`` and ``--device-map`` to the parser ``p``."""
    p.add_argument("--model", default=None, help="hub id or local directory (default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--device", default=argparse.SUPPRESS, metavar="DEVICE", type=_device_arg,
                   help="cpu, cuda, cuda:N or auto (the default: CUDA when available, else the CPU); under torchrun "
                        "auto and cuda mean each process's own GPU (cuda:LOCAL_RANK)")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32",
                   help="parameter dtype of the model (default: float32); F, the path sums and the scores stay float32 "
                        "(README: mixed precision)")
    p.add_argument("--device-map", choices=list(DEVICE_MAPS), default=None,
                   help="place a model larger than one device over the GPUs (then CPU) with accelerate; not with --device")


def placement(args) -> dict:
    """``device``, ``dtype`` and ``device_map`` keyword arguments of ``load_model`` (and of
    ``evaluate`` / ``attribute_dataset``) from the parsed options: ``--device`` defaults to
    ``auto`` unless ``--device-map`` places the model.

    Raises:
        ValueError: ``--device`` together with ``--device-map``.
    """
    device = getattr(args, "device", None)  # absent when not given
    if device is not None and args.device_map is not None:
        raise ValueError(f"--device {device} and --device-map {args.device_map} exclude each other: --device-map places the model")
    return {"device": None if args.device_map is not None else (device or "auto"), "dtype": args.dtype,
            "device_map": args.device_map}


def stdout_gone() -> None:
    """Point standard output at the null device once its reader went away (a BrokenPipeError:
    ``aieg-fast ... | head``), so that later prints and Python's flush at exit write nowhere
    instead of failing again."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # a stream without a file descriptor (a notebook's): nothing to redirect
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
