"""aieg_fast: token attributions for decoder-only LLMs (AIEG, IDG, IG, attention, α∇α, ...).

Quick start::

    import aieg_fast
    ex = aieg_fast.load_model()               # embedded SmolLM2-135M-Instruct
    res = ex.attribute("it 's a charming and often affecting journey . ", method="aieg")
    res.show()
"""
from . import ops, reference
from ._ext import HAS_EXT, WITH_CUDA, build_info
from .attribution import METHODS, Explainer, list_methods, load_model, parse_memory, quadrature
from .generation import attribute_generation
from . import grad_ellm as _grad_ellm  # registers the method
from .models import DEFAULT_MODEL, SUPPORTED_ARCHITECTURES
from .result import Attribution, aggregate_words, load_attribution

__version__ = "0.1.0"

__all__ = [
    "Attribution",
    "DEFAULT_MODEL",
    "Explainer",
    "HAS_EXT",
    "METHODS",
    "SUPPORTED_ARCHITECTURES",
    "WITH_CUDA",
    "aggregate_words",
    "attribute_generation",
    "build_info",
    "list_methods",
    "load_attribution",
    "load_model",
    "ops",
    "parse_memory",
    "quadrature",
    "reference",
    "__version__",
]
