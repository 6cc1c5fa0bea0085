"""Model families and loading.

* :mod:`.base` — :class:`DecoderAdapter`, what a method may ask of an architecture;
* one file per family (:mod:`.gpt2`, :mod:`.llama`), registered here by ``model_type``;
* :mod:`.registry` — :func:`register_adapter`, :func:`adapter_for`;
* :mod:`.loading` — hub id / directory / model object / aliases; :mod:`.embedded` — the
  embedded SmolLM2-135M-Instruct and the user cache.
"""
from .base import DecoderAdapter, QKVPoint, split_last
from .embedded import DEFAULT_MODEL, NANO_NAME, cache_dir, embedded_model_path, nano_path
from .gemma import GemmaAdapter
from .gemma2 import Gemma2Adapter
from .gemma3_text import Gemma3TextAdapter
from .gpt2 import GPT2Adapter
from .llama import LlamaAdapter
from .phi3 import Phi3Adapter
from .loading import load_hf_model
from .registry import (adapter_class, adapter_for, register_adapter, supported_architectures, supported_model_types,
                       unregister_adapter)

register_adapter("gpt2", GPT2Adapter)
register_adapter("llama", LlamaAdapter)
register_adapter("gemma", GemmaAdapter)
register_adapter("gemma2", Gemma2Adapter)
register_adapter("gemma3_text", Gemma3TextAdapter)
register_adapter("phi3", Phi3Adapter)

#: the architectures of the built-in adapters (``supported_architectures()`` includes user ones)
SUPPORTED_ARCHITECTURES = supported_architectures()

__all__ = [
    "DEFAULT_MODEL", "NANO_NAME", "SUPPORTED_ARCHITECTURES", "DecoderAdapter", "GPT2Adapter", "LlamaAdapter", "QKVPoint",
    "adapter_class", "adapter_for", "cache_dir", "embedded_model_path", "load_hf_model", "nano_path", "register_adapter",
    "split_last", "supported_architectures", "supported_model_types", "unregister_adapter",
    "GemmaAdapter", "Gemma2Adapter", "Gemma3TextAdapter", "Phi3Adapter",
]
