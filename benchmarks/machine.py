"""What every benchmark and profile script prints first: the machine and the exact command line.

    from machine import print_header   # benchmarks/ is on sys.path for a script run by path
    info = print_header()               # prints "# machine: ..." and "# command: ..."

``info()`` returns a dict (CPU model as evaluation records name it, core count, python, torch, transformers,
torch threads, peer tool versions) for a script's --out JSON; ``describe()`` the printed lines.
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
from importlib.metadata import PackageNotFoundError, version

from aieg_fast.runs.machine import cpu_model

PEERS = ("captum", "inseq", "aieg_fast")


def _version(mod: str) -> str:
    try:
        return version(mod)
    except PackageNotFoundError:
        return "not installed"
    except Exception:  # noqa: BLE001
        return "?"


def info() -> dict:
    """Machine and software versions; torch "threads" is torch.get_num_threads() now."""
    d = {"python": platform.python_version(), "cpu": cpu_model(), "cores": os.cpu_count()}
    import torch  # aieg_fast needs it

    d["torch"] = torch.__version__
    d["threads"] = torch.get_num_threads()
    try:
        import transformers

        d["transformers"] = transformers.__version__
    except ImportError:
        d["transformers"] = "not installed"
    for mod in PEERS:
        d[mod] = _version(mod)
    d["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS")
    return d


def command_line(argv=None, script=None) -> str:
    """The command as typed: ``python benchmarks/x.py ARGS`` (argv None: sys.argv[1:])."""
    script = script or sys.argv[0]
    try:
        script = os.path.relpath(script)
    except ValueError:
        pass
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python", shlex.quote(script), *map(shlex.quote, args)])


def describe(argv=None, script=None, threads=None, d=None) -> list:
    """The header lines: machine, then command. ``threads`` overrides the reported torch threads
    (e.g. for a parent whose children set their own)."""
    d = d or info()
    th = d["threads"] if threads is None else threads
    return [
        f"# machine: {d['cpu']}, {d['cores']} cores, torch threads {th} (OMP_NUM_THREADS={d['OMP_NUM_THREADS']}); "
        f"python {d['python']}, torch {d['torch']}, transformers {d['transformers']}, captum {d['captum']}, "
        f"inseq {d['inseq']}, aieg_fast {d['aieg_fast']}",
        f"# command: {command_line(argv, script)}",
    ]


def print_header(argv=None, script=None, threads=None, file=None) -> dict:
    """Print describe()'s lines (flushed) and return info() for a JSON record."""
    d = info()
    if threads is not None:
        d["threads"] = threads
    for line in describe(argv, script, d=d):
        print(line, file=file or sys.stdout, flush=True)
    return d


def csv_of(choices, joined: bool = False):
    """argparse type: a comma-separated list whose items must all be in ``choices`` (an argparse
    error naming the unknown ones otherwise); the list, or with ``joined`` the items joined by
    commas again."""
    def parse(text):
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"unknown value(s) {', '.join(bad) or repr(text)}; choose from {', '.join(choices)}")
        return ",".join(items) if joined else items
    return parse


def parse_runs(doc: str, argv=None, default: int = 5, what: str = "timed calls") -> argparse.Namespace:
    """The arguments of a script whose only option is ``--runs`` (an int >= 1, else an argparse
    error); ``doc``: the script's docstring (its first line describes the script)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--runs", type=int, default=default, help=what)
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs must be >= 1, got {args.runs}")
    return args
