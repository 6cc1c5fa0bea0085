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
from .llama import LlamaAdapter
from .loading import load_hf_model
from .mistral import MistralAdapter
from .mixtral import MixtralAdapter
from .qwen2 import Qwen2Adapter
from .qwen2_moe import Qwen2MoeAdapter
from .qwen3 import Qwen3Adapter
from .qwen3_moe import Qwen3MoeAdapter
from .registry import (adapter_class, adapter_for, register_adapter, supported_architectures, supported_model_types,
                       unregister_adapter)

register_adapter("gpt2", GPT2Adapter)
register_adapter("llama", LlamaAdapter)
register_adapter("qwen2", Qwen2Adapter)
register_adapter("qwen2_moe", Qwen2MoeAdapter)
register_adapter("qwen3", Qwen3Adapter)
register_adapter("qwen3_moe", Qwen3MoeAdapter)
# "mistral" (MistralAdapter) is NOT registered yet: tests/models/test_adapters.py walks through
# adding a family with Mistral as the unsupported example; register it once that test uses another
register_adapter("mixtral", MixtralAdapter)

#: the architectures of the built-in adapters (``supported_architectures()`` includes user ones)
SUPPORTED_ARCHITECTURES = supported_architectures()

__all__ = [
    "DEFAULT_MODEL", "NANO_NAME", "SUPPORTED_ARCHITECTURES", "DecoderAdapter", "GPT2Adapter", "LlamaAdapter", "QKVPoint",
    "adapter_class", "adapter_for", "cache_dir", "embedded_model_path", "load_hf_model", "nano_path", "register_adapter",
    "split_last", "supported_architectures", "supported_model_types", "unregister_adapter",
    "MistralAdapter", "MixtralAdapter", "Qwen2Adapter", "Qwen2MoeAdapter", "Qwen3Adapter", "Qwen3MoeAdapter",
]
