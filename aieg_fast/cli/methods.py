"""``aieg-fast methods``: the attribution methods, one line each (name and description)."""
from __future__ import annotations

from ..methods.registry import get_method, list_methods

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``methods`` subcommand to the subparsers ``sub``."""
    m = sub.add_parser("methods", help="list attribution methods")
    m.set_defaults(fn=run)


def run(args) -> int:
    """Print each registered method with its one-line description; 0."""
    for name in list_methods():
        print(f"{name:32s} {get_method(name).doc}")
    return 0
