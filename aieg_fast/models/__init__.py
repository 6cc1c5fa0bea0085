"""Model families and loading.

* :mod:`.base` — :class:`DecoderAdapter`, what a method may ask of an architecture;
* one file per family (:mod:`.gpt2`, :mod:`.llama`), registered here by ``model_type``;
* :mod:`.registry` — :func:`register_adapter`, :func:`adapter_for`;
* :mod:`.loading` — hub id / directory / model object / aliases; :mod:`.embedded` — the
  embedded SmolLM2-135M-Instruct and the user cache.
"""
from .base import DecoderAdapter, QKVPoint, split_last
from .embedded import DEFAULT_MODEL, NANO_NAME, cache_dir, embedded_model_path, nano_path
from .gpt2 import GPT2Adapter
from .gpt_neox import GPTNeoXAdapter
from .llama import LlamaAdapter
from .loading import load_hf_model
from .olmo import OlmoAdapter
from .olmo2 import Olmo2Adapter
from .registry import (adapter_class, adapter_for, register_adapter, supported_architectures, supported_model_types,
                       unregister_adapter)
from .stablelm import StableLmAdapter

register_adapter("gpt2", GPT2Adapter)
register_adapter("llama", LlamaAdapter)
register_adapter("olmo", OlmoAdapter)
register_adapter("olmo2", Olmo2Adapter)
register_adapter("stablelm", StableLmAdapter)
register_adapter("gpt_neox", GPTNeoXAdapter)

#: the architectures of the built-in adapters (``supported_architectures()`` includes user ones)
SUPPORTED_ARCHITECTURES = supported_architectures()

__all__ = [
    "DEFAULT_MODEL", "NANO_NAME", "SUPPORTED_ARCHITECTURES", "DecoderAdapter", "GPT2Adapter", "LlamaAdapter", "QKVPoint",
    "GPTNeoXAdapter", "OlmoAdapter", "Olmo2Adapter", "StableLmAdapter",
    "adapter_class", "adapter_for", "cache_dir", "embedded_model_path", "load_hf_model", "nano_path", "register_adapter",
    "split_last", "supported_architectures", "supported_model_types", "unregister_adapter",
]
