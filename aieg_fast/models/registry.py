"""The adapter registry: ``model_type`` → :class:`DecoderAdapter` subclass.

Adding a family is one file with the adapter and one :func:`register_adapter` call (in
:mod:`aieg_fast.models` for the built-in families, or in the user's code)."""
from __future__ import annotations

import inspect
from typing import Dict, Tuple, Type

from .base import DecoderAdapter, class_kind, refuse_non_causal

__all__ = ["register_adapter", "unregister_adapter", "adapter_for", "adapter_class", "supported_architectures", "supported_model_types"]

_ADAPTERS: Dict[str, Type[DecoderAdapter]] = {}


def register_adapter(model_type: str, adapter: Type[DecoderAdapter], *, replace: bool = False) -> None:
    """Register ``adapter`` for models whose ``config.model_type`` is ``model_type``.

    Raises:
        TypeError: ``adapter`` is not a :class:`DecoderAdapter` subclass; its ``architectures``
            is not a tuple (or list) of class names (a str, or a class object); its
            ``check_config`` is neither a classmethod nor a staticmethod.
        ValueError: an empty model_type, an adapter without ``architectures``, one that leaves
            a hook every family declares (``decoder``, ``blocks``, ``config_sizes``; with
            attention also ``attention``, ``qkv_points``, ``o_proj``) to the base class, or a
            model_type already registered (unless ``replace=True``), ``replace`` not a bool.
    """
    if not isinstance(replace, bool):  # core.validation.check_bool's message (models sit below core)
        raise ValueError(f"replace must be True or False, got {replace!r}")
    if not (isinstance(adapter, type) and issubclass(adapter, DecoderAdapter)):
        raise TypeError(f"adapter must be a DecoderAdapter subclass, got {adapter!r}")
    if not isinstance(model_type, str) or not model_type:
        raise ValueError(f"model_type must be a non-empty str, got {model_type!r}")
    archs = adapter.architectures
    if not isinstance(archs, (tuple, list)) or not all(isinstance(a, str) and a for a in archs):
        raise TypeError(f"{adapter.__name__}.architectures must be a tuple of transformers class names "
                        f"(e.g. ('LlamaForCausalLM',)), got {archs!r}")
    if not archs:
        raise ValueError(f"adapter {adapter.__name__} declares no architectures")
    hooks = ("decoder", "blocks", "config_sizes") + (("attention", "qkv_points", "o_proj") if adapter.has_attention else ())
    missing = [h for h in hooks if getattr(adapter, h) is getattr(DecoderAdapter, h)]
    if missing:
        raise ValueError(f"adapter {adapter.__name__} does not implement {missing} (DecoderAdapter leaves them to each "
                         "family; subclass the adapter of a family close to yours, e.g. LlamaAdapter, to inherit them)")
    if not isinstance(inspect.getattr_static(adapter, "check_config"), (classmethod, staticmethod)):
        raise TypeError(f"{adapter.__name__}.check_config must be a @classmethod or @staticmethod (it reads the config "
                        "before any model exists)")
    if model_type in _ADAPTERS and not replace:
        raise ValueError(f"model_type {model_type!r} already has the adapter {_ADAPTERS[model_type].__name__}; pass replace=True")
    _ADAPTERS[model_type] = adapter


def unregister_adapter(model_type: str) -> None:
    """Remove the adapter registered for ``model_type``.

    Raises:
        ValueError: nothing is registered for ``model_type``.
    """
    if model_type not in _ADAPTERS:
        raise ValueError(f"no adapter is registered for model_type {model_type!r}; registered: {list(_ADAPTERS)}")
    del _ADAPTERS[model_type]


def supported_model_types() -> Tuple[str, ...]:
    """The registered ``model_type`` values, in registration order."""
    return tuple(_ADAPTERS)


def supported_architectures() -> Tuple[str, ...]:
    """The ``transformers`` class names the registered adapters serve."""
    return tuple(a for cls in _ADAPTERS.values() for a in cls.architectures)


def _not_a_decoder(model_type) -> str:
    """Why a ``transformers`` model_type is not a decoder-only language model (an encoder, an
    encoder-decoder, Gemma 3's image-text model), or "" when it may be one."""
    if model_type == "gemma3":
        return ("it is Gemma 3's image-text model; its text model, Gemma3ForCausalLM (model_type 'gemma3_text'), is "
                "supported: README 'Model families' builds one around the loaded model's modules")
    try:
        from transformers.models.auto import modeling_auto as auto
    except ImportError:
        return ""
    if model_type in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return "it is an encoder-decoder model type; aieg_fast explains decoder-only language models"
    if model_type in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "it is an encoder model type; aieg_fast explains decoder-only language models"
    return ""


def _unsupported(model_type, model=None, arch=None) -> ValueError:
    """The refusal of a model (or, ``model`` None, a config: ``arch`` the class it names) whose
    ``config.model_type`` and class no registered adapter serves: what is refused, the supported
    model_types, and how to add one."""
    arch = arch if model is None else type(model).__name__
    cls = _ADAPTERS.get(model_type)
    if cls is not None:  # a known family, a class its adapter does not serve (e.g. another head)
        what = (f"class {arch!r} is not supported for model_type {model_type!r} (its adapter {cls.__name__} serves "
                f"{', '.join(cls.architectures)}, or subclasses of them)")
    else:
        what = f"model_type {model_type!r}" + (f" (class {arch!r})" if arch else "") + " is not supported"
        why = _not_a_decoder(model_type)
        if why:
            return ValueError(f"{what}: {why}")
        served = [mt for mt, a in _ADAPTERS.items() if model is not None and a.serves(model)]
        if served:  # transformers builds e.g. LlamaForCausalLM for exaone or internlm3: the config's family is refused
            what += (f": the adapter is chosen by config.model_type, and the class {arch!r} is served only for model_type "
                     f"{', '.join(map(repr, served))}")
    return ValueError(f"{what}. Supported model_types: {', '.join(_ADAPTERS)} (their classes: "
                      "aieg_fast.models.supported_architectures()). To add a family, write a DecoderAdapter subclass and call "
                      "aieg_fast.models.register_adapter(model_type, adapter) (README: 'Adding a model family')")


def adapter_class(config) -> Type[DecoderAdapter]:
    """The adapter class for a model config (checked before loading weights).

    Raises:
        ValueError: no adapter for ``config.model_type`` (names it, the supported model_types and
            :func:`register_adapter`; an encoder, encoder-decoder or Gemma 3 image-text model: why
            instead); ``config.architectures`` naming a sequence-classification head where the
            adapter serves none; a setting of the family the adapter refuses
            (:meth:`DecoderAdapter.check_config`, e.g. Falcon's ALiBi).
    """
    mt = getattr(config, "model_type", None)
    if mt not in _ADAPTERS:
        raise _unsupported(mt)
    cls = _ADAPTERS[mt]
    heads = [a for a in (getattr(config, "architectures", None) or []) if class_kind(a) == "classifier"]
    if heads and class_kind(*cls.architectures) != "classifier":
        raise _unsupported(mt, arch=heads[0])
    cls.check_config(config)
    refuse_non_causal(config)
    return cls


def adapter_for(model) -> DecoderAdapter:
    """The adapter of a loaded ``transformers`` model: the one registered for its
    ``config.model_type``, when the model's class (or a class it derives from) is one the
    adapter serves.

    Raises:
        ValueError: the model's family or class is not supported (names the class and
            ``config.model_type`` refused, the supported model_types and :func:`register_adapter`;
            an encoder, encoder-decoder or Gemma 3 image-text model: why instead); a
            peft wrapper (``PeftModel``) or a ``torch.compile`` wrapper is refused with what to pass instead.
    """
    if callable(getattr(model, "get_base_model", None)) and type(model).__name__.startswith("Peft"):
        raise ValueError(f"model is a peft wrapper ({type(model).__name__}); pass the model inside it: "
                         "model.get_base_model() keeps LoRA-type adapters active and unmerged (they are explained as "
                         "part of the model), model.merge_and_unload() merges them. Prompt-learning adapters (prefix "
                         "or prompt tuning) live in the wrapper's forward and cannot be explained this way")
    if type(model).__name__ == "OptimizedModule" and hasattr(model, "_orig_mod"):
        raise ValueError(f"model is a torch.compile wrapper (OptimizedModule of {type(model._orig_mod).__name__}); pass the "
                         "model inside it, model._orig_mod (load_model(..., compile=True) compiles the decoder stack for "
                         "the path methods: README 'Repeated calls')")
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    cls = _ADAPTERS.get(model_type)
    if cls is None or not cls.serves(model):
        raise _unsupported(model_type, model)
    return cls(model)
