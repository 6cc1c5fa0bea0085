"""``aieg-fast verify``: every method with the reference kernels and the extension, compared
(:func:`aieg_fast.verify.verify`)."""
from __future__ import annotations

from ..verify import verify
from .common import add_model_options, option_flags, placement

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``verify`` subcommand to the subparsers ``sub``."""
    v = sub.add_parser("verify", help="run every method with the reference kernels and the extension; compare")
    add_model_options(v)
    v.add_argument("--methods", default=None, help="comma-separated (default: all)")
    v.add_argument("--n-steps", type=int, default=20)
    v.add_argument("--texts", nargs="*", default=None)
    v.set_defaults(fn=run, flags=option_flags(v, texts="--texts"))


def run(args) -> int:
    """0 when all methods agree, 1 on a mismatch, 2 without the extension."""
    return verify(model=args.model, methods=args.methods, n_steps=args.n_steps, texts=args.texts, **placement(args))
