"""Former home of the methods and the Explainer, kept for one release as re-exports.

Use :mod:`aieg_fast` (``load_model``, ``Explainer``, ``list_methods``, ``method_options``), or the
modules where things now live: :mod:`aieg_fast.explainer`, :mod:`aieg_fast.methods` (one file
per method), :mod:`aieg_fast.core` (quadrature, validation, the path engine).
"""
from .core.quadrature import quadrature
from .core.validation import parse_memory
from .explainer import Explainer, load_model
from .methods import METHODS, list_methods, method_options

__all__ = ["Explainer", "load_model", "list_methods", "method_options", "METHODS", "parse_memory", "quadrature"]
