"""Resolving what a user passes as ``model`` (None, an alias, a hub id, a directory, a model
object) to a ``transformers`` model and tokenizer."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch

from .embedded import DEFAULT_MODEL, NANO_NAME, load_embedded, nano_path
from .registry import adapter_class

__all__ = ["load_hf_model"]


def load_hf_model(model=None, tokenizer=None, dtype: Optional[torch.dtype] = None):
    """Resolve ``model`` to (model, tokenizer, name).

    Args:
        model: None (the embedded default), ``"gpt-nano"`` (the GPT-nano trained by
            ``aieg-fast train-nano``, see :mod:`aieg_fast.training.nano`), a hub id or local directory
            (str / Path), or a ``transformers`` model object (then ``tokenizer`` is required).
        tokenizer: a tokenizer object, a hub id / directory, or None (loaded with the model).
        dtype: parameter dtype (default float32).

    Raises:
        ValueError: a model object without a tokenizer, an unsupported architecture, or a name
            that is neither a local model directory nor loadable from the hub.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    dtype = dtype or torch.float32
    if model is None or (isinstance(model, str) and model == DEFAULT_MODEL):
        m, tok, name = load_embedded(dtype)
        if tokenizer is not None:
            tok = tokenizer if not isinstance(tokenizer, (str, Path)) else AutoTokenizer.from_pretrained(tokenizer)
        return m, tok, name
    if isinstance(model, str) and model == NANO_NAME:
        path = nano_path()
        if not (path / "config.json").exists():
            raise ValueError(
                f"model 'gpt-nano' is not trained yet (nothing in {path}); run `aieg-fast train-nano` first"
            )
        m, tok, _ = load_hf_model(path, tokenizer, dtype)
        return m, tok, "gpt-nano"
    if isinstance(model, (str, Path)):
        name = str(model)
        try:
            config = AutoConfig.from_pretrained(name)
        except (OSError, ValueError) as err:
            where = "a local directory without a loadable config" if Path(name).is_dir() else "not a local directory"
            raise ValueError(
                f"model must be a hub id or a local model directory; {name!r} is {where} and could not "
                f"be loaded from the hub ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            ) from err
        adapter = adapter_class(config)  # refuse an unsupported family before loading weights
        archs = list(getattr(config, "architectures", None) or [])
        cls = AutoModelForSequenceClassification if any("SequenceClassification" in a for a in archs) else AutoModelForCausalLM
        m = cls.from_pretrained(name, dtype=dtype, **adapter.load_kwargs)
        if tokenizer is None:
            tok = AutoTokenizer.from_pretrained(name)
        elif isinstance(tokenizer, (str, Path)):
            tok = AutoTokenizer.from_pretrained(tokenizer)
        else:
            tok = tokenizer
        return m, tok, name
    if not hasattr(model, "config") or not hasattr(model, "get_input_embeddings"):
        raise TypeError(
            f"model must be None, a hub id or local directory (str or Path), or a transformers model, got {type(model).__name__}"
        )
    if tokenizer is None:
        raise ValueError(f"tokenizer is required when model is a model object, got model={type(model).__name__} and tokenizer=None")
    tok = AutoTokenizer.from_pretrained(tokenizer) if isinstance(tokenizer, (str, Path)) else tokenizer
    name = getattr(model.config, "_name_or_path", "") or type(model).__name__
    return model, tok, name
