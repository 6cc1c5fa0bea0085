"""TRANSITIONAL: the method registry's public names (the bodies move here with the methods)."""
from __future__ import annotations

import json
from typing import Tuple


def list_methods():
    from ..attribution import list_methods as f
    return f()


def method_options(name):
    from ..attribution import method_options as f
    return f(name)


class _M:
    def __init__(self, name, doc):
        self.name, self.doc = name, doc


def get_method(name):
    from ..attribution import _METHOD_DOCS
    return _M(name, _METHOD_DOCS[name])


def parse_method_spec(spec: str) -> Tuple[str, dict]:
    """Split a method spec ``name[:option=value[:option=value ...]]`` into (name, options).

    Values are read as JSON when they parse (``n_pilot=10``, ``adaptive=false``), else kept as
    strings (``ef_mode=none``). Example: ``aieg:ef_mode=none`` is AIEG without the emphasis
    factor; the spec string is the method's name in the records and tables.

    Raises:
        ValueError: an option without ``=``, an empty name.
    """
    parts = [p.strip() for p in str(spec).split(":")]
    name, opts = parts[0], {}
    if not name:
        raise ValueError(f"methods has an empty method name in {spec!r}")
    for part in parts[1:]:
        if "=" not in part:
            raise ValueError(f"methods: option {part!r} of {spec!r} must be NAME=VALUE")
        k, v = part.split("=", 1)
        if k.strip() in opts:
            raise ValueError(f"methods: option {k.strip()!r} is given twice in {spec!r}")
        opts[k.strip()] = option_value(v.strip())
    return name, opts


def option_value(text: str):
    """A method option's value from text: JSON when it parses (``4``, ``false``, ``[0, 1]``),
    else the text itself (``none``, ``last``). Shared by method specs and ``--option``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
