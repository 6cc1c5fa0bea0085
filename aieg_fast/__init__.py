"""aieg_fast: token attributions for decoder-only LLMs (AIEG, IDG, IG, Grad-ELLM, attention, α∇α, ...).

Quick start::

    import aieg_fast
    ex = aieg_fast.load_model()               # embedded SmolLM2-135M-Instruct
    res = ex.attribute("it 's a charming and often affecting journey . ", method="aieg")
    res.show()

Where things live: :mod:`aieg_fast.methods` (one file per method and the registry),
:mod:`aieg_fast.models` (one adapter per model family, loading), :mod:`aieg_fast.core` (the
engine), :mod:`aieg_fast.ops` / :mod:`aieg_fast.reference` (kernels and their PyTorch spec),
:mod:`aieg_fast.explainer`, :mod:`aieg_fast.generation`, :mod:`aieg_fast.result`,
:mod:`aieg_fast.display`, :mod:`aieg_fast.eval`, :mod:`aieg_fast.training`, :mod:`aieg_fast.cli`.
"""
from . import ops, reference
from ._ext import EXT_ERROR, HAS_EXT, WITH_CUDA, ExtensionWarning, build_info
from .core.chat import chat_template
from .core.diagnostics import AttributionWarning, NonFiniteAttributionWarning
from .core.quadrature import quadrature
from .core.validation import parse_memory
from .display import aggregate_words
from .explainer import Explainer, load_model
from .generation import attribute_generation
from .methods import METHODS, Method, MethodOutput, Options, get_method, list_methods, method_options, register, unregister
from .models import DEFAULT_MODEL, SUPPORTED_ARCHITECTURES, DecoderAdapter, register_adapter
from .result import Attribution, load_attribution, load_attributions, save_attributions

__version__ = "0.1.0"

__all__ = [
    "Attribution",
    "AttributionWarning",
    "DEFAULT_MODEL",
    "DecoderAdapter",
    "EXT_ERROR",
    "Explainer",
    "ExtensionWarning",
    "HAS_EXT",
    "METHODS",
    "Method",
    "MethodOutput",
    "NonFiniteAttributionWarning",
    "Options",
    "SUPPORTED_ARCHITECTURES",
    "WITH_CUDA",
    "aggregate_words",
    "attribute_generation",
    "build_info",
    "chat_template",
    "get_method",
    "list_methods",
    "load_attribution",
    "load_attributions",
    "load_model",
    "method_options",
    "ops",
    "parse_memory",
    "quadrature",
    "reference",
    "register",
    "register_adapter",
    "save_attributions",
    "unregister",
    "__version__",
]

#: subpackages loaded on first use as attributes (``aieg_fast.eval.evaluate``, ``aieg_fast.datasets.BOOLQ_TEMPLATE``
#: after a bare ``import aieg_fast``), so that importing the package does not import the evaluation stack.
_LAZY_SUBMODULES = ("attribution", "cli", "core", "datasets", "dataset_attribution", "display", "eval", "explainer", "generation",
                    "methods", "models", "prediction", "result", "runs", "training", "verify")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
