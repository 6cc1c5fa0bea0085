"""``aieg-fast info``: the package, torch, transformers and extension versions and build, as JSON."""
from __future__ import annotations

import json

import torch
import transformers

from .. import __version__
from .._ext import build_info

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``info`` subcommand to the subparsers ``sub``."""
    i = sub.add_parser("info", help="versions and extension build")
    i.set_defaults(fn=run)


def run(args) -> int:
    """Print ``{"aieg_fast", "torch", "transformers", "extension"}`` as indented JSON; 0."""
    info = {"aieg_fast": __version__, "torch": torch.__version__, "transformers": transformers.__version__, "extension": build_info()}
    print(json.dumps(info, indent=1, default=str))
    return 0
