"""Model families and loading.

* :mod:`.base` — :class:`DecoderAdapter`, what a method may ask of an architecture;
* one file per family (:mod:`.gpt2`, :mod:`.llama`, ...), registered here by ``model_type``
  (:data:`BUILTIN_FAMILIES`);
* :mod:`.registry` — :func:`register_adapter`, :func:`adapter_for`;
* :mod:`.loading` — hub id / directory / model object / aliases; :mod:`.embedded` — the
  embedded SmolLM2-135M-Instruct and the user cache.
"""
from .base import DecoderAdapter, QKVPoint, execution_device, materialized, split_last
from .embedded import (DEFAULT_MODEL, LLAMA_NANO_NAME, NANO_NAME, SST2_NAME, cache_dir, embedded_model_path, nano_path, save_model_files,
                       sst2_adapter_path)
from .cohere import CohereAdapter
from .cohere2 import Cohere2Adapter
from .falcon import FalconAdapter
from .gemma import GemmaAdapter
from .gemma2 import Gemma2Adapter
from .gemma3_text import Gemma3TextAdapter
from .gpt2 import GPT2Adapter
from .gpt_bigcode import GPTBigCodeAdapter
from .gpt_neox import GPTNeoXAdapter
from .gptj import GPTJAdapter
from .granite import GraniteAdapter
from .granitemoe import GraniteMoeAdapter
from .llama import LlamaAdapter
from .loading import TRAINING_RECORD, home_expanded, load_hf_model, model_kind, run_model_settings, training_folder, unfinished_install, weights_digest
from .mamba import MambaAdapter
from .mistral import MistralAdapter
from .mixtral import MixtralAdapter
from .olmo import OlmoAdapter
from .olmo2 import Olmo2Adapter
from .olmo3 import Olmo3Adapter
from .opt import OPTAdapter
from .phi import PhiAdapter
from .phi3 import Phi3Adapter
from .qwen2 import Qwen2Adapter
from .qwen2_moe import Qwen2MoeAdapter
from .qwen3 import Qwen3Adapter
from .qwen3_moe import Qwen3MoeAdapter
from .smollm3 import SmolLM3Adapter
from .stablelm import StableLmAdapter
from .starcoder2 import Starcoder2Adapter
from .registry import (adapter_class, adapter_for, register_adapter, supported_architectures, supported_model_types,
                       unregister_adapter)

#: ``config.model_type`` → adapter of every built-in family
BUILTIN_FAMILIES = {
    "gpt2": GPT2Adapter,
    "llama": LlamaAdapter,
    "mamba": MambaAdapter,
    "gptj": GPTJAdapter,
    "opt": OPTAdapter,
    "falcon": FalconAdapter,
    "mistral": MistralAdapter,
    "mixtral": MixtralAdapter,
    "qwen2": Qwen2Adapter,
    "qwen2_moe": Qwen2MoeAdapter,
    "qwen3": Qwen3Adapter,
    "qwen3_moe": Qwen3MoeAdapter,
    "gemma": GemmaAdapter,
    "gemma2": Gemma2Adapter,
    "gemma3_text": Gemma3TextAdapter,
    "phi3": Phi3Adapter,
    "olmo": OlmoAdapter,
    "olmo2": Olmo2Adapter,
    "stablelm": StableLmAdapter,
    "gpt_neox": GPTNeoXAdapter,
    "phi": PhiAdapter,
    "olmo3": Olmo3Adapter,
    "smollm3": SmolLM3Adapter,
    "starcoder2": Starcoder2Adapter,
    "granite": GraniteAdapter,
    "granitemoe": GraniteMoeAdapter,
    "cohere": CohereAdapter,
    "cohere2": Cohere2Adapter,
    "gpt_bigcode": GPTBigCodeAdapter,
}
for _model_type, _adapter in BUILTIN_FAMILIES.items():
    register_adapter(_model_type, _adapter)

#: the architectures of the built-in adapters (``supported_architectures()`` includes user ones)
SUPPORTED_ARCHITECTURES = supported_architectures()

__all__ = [
    "BUILTIN_FAMILIES", "DEFAULT_MODEL", "TRAINING_RECORD", "LLAMA_NANO_NAME", "NANO_NAME", "SST2_NAME", "SUPPORTED_ARCHITECTURES", "DecoderAdapter", "QKVPoint",
    "adapter_class", "adapter_for", "cache_dir", "embedded_model_path", "execution_device", "home_expanded", "load_hf_model", "materialized", "model_kind", "nano_path", "register_adapter", "run_model_settings", "sst2_adapter_path",
    "save_model_files", "split_last", "supported_architectures", "supported_model_types", "training_folder", "unfinished_install", "unregister_adapter", "weights_digest",
] + [a.__name__ for a in BUILTIN_FAMILIES.values()]
