"""Resolving what a user passes as ``model`` (None, an alias, a hub id, a directory, a model
object) to a ``transformers`` model and tokenizer."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import torch

from .base import class_kind
from .embedded import DEFAULT_MODEL, LLAMA_NANO_NAME, NANO_NAME, SST2_NAME, load_embedded, nano_path, sst2_adapter_path
from .registry import adapter_class, supported_model_types

__all__ = ["TRAINING_RECORD", "HUB_KWARGS", "home_expanded", "load_hf_model", "model_kind", "training_folder", "unfinished_install", "weights_digest", "run_model_settings"]

#: the record a training command of this package writes in its output folder.
TRAINING_RECORD = "training.json"

#: ``from_pretrained`` arguments that say where a model's files are, not how to build it: passed
#: to the config's and the tokenizer's loading too, so all three come from the same place.
HUB_KWARGS = ("revision", "cache_dir", "token", "local_files_only", "trust_remote_code", "force_download",
              "proxies", "subfolder")


def load_hf_model(model=None, tokenizer=None, dtype: Optional[torch.dtype] = None, device_map=None,
                  model_kwargs: Optional[dict] = None):
    """Resolve ``model`` to (model, tokenizer, name).

    Args:
        model: None (the embedded default), ``"smollm2-sst2"`` (the embedded model with the
            shipped SST-2 LoRA adapter merged, :mod:`aieg_fast.training.sentiment`; needs
            ``peft``), ``"gpt-nano"`` / ``"llama-nano"`` (trained by ``aieg-fast train-nano``
            [``--arch llama``], see :mod:`aieg_fast.training.nano`), a LoRA adapter folder of the
            embedded model, a hub id or local directory
            (str / Path), or a ``transformers`` model object (then ``tokenizer`` is required).
        tokenizer: a tokenizer object, a hub id / directory, or None (loaded with the model).
        dtype: parameter dtype (default float32).
        device_map: passed to ``from_pretrained`` (accelerate places the model's blocks over the
            devices, e.g. ``"auto"``) for models loaded by name; None: not dispatched.
        model_kwargs: more keyword arguments of ``from_pretrained`` for models loaded by name
            (``max_memory``, ``offload_folder``, ``revision``, ...); those of :data:`HUB_KWARGS`
            (where the files are: ``revision``, ``cache_dir``, ...) also go to the config's
            ``from_pretrained`` and, but ``subfolder``, to the tokenizer's when it is loaded with
            the model.

    Raises:
        ValueError: a model object without a tokenizer, an unsupported architecture, a name
            that is neither a local model directory nor loadable from the hub, a model by name
            whose own tokenizer does not load (``tokenizer=`` then names one), ``device_map`` or
            ``model_kwargs`` for a model that is not loaded by name, ``model_kwargs`` naming
            ``dtype`` or ``device_map``. TypeError: ``model_kwargs`` not a dict; ``tokenizer``
            neither None, a str / Path nor a tokenizer-like object (callable, with
            ``convert_ids_to_tokens``), refused before anything is loaded (names the type).
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    _check_tokenizer(tokenizer)
    model, tokenizer = home_expanded(model), home_expanded(tokenizer)  # from_pretrained does not expand ~
    dtype = dtype or torch.float32
    if model_kwargs is not None and not isinstance(model_kwargs, dict):
        raise TypeError(f"model_kwargs must be a dict of from_pretrained arguments, got {type(model_kwargs).__name__}")
    clash = sorted({"dtype", "torch_dtype", "device_map"} & set(model_kwargs or {}))
    if clash:
        raise ValueError(f"model_kwargs: pass {clash} as load_model's own arguments (dtype=, device_map=)")
    extra = dict(model_kwargs or {})
    if device_map is not None:
        extra["device_map"] = device_map
    by_name = isinstance(model, (str, Path)) or model is None
    if extra and (not by_name or model == SST2_NAME or _is_adapter_dir(model)):
        what = "a model object" if not by_name else f"model {str(model)!r} (a LoRA adapter merged into the embedded model)"
        raise ValueError(f"device_map / model_kwargs apply to models loaded by name, not to {what}; place it yourself "
                         "(e.g. accelerate.dispatch_model) and pass the object")
    if model is None or (isinstance(model, str) and model == DEFAULT_MODEL):
        m, tok, name = load_embedded(dtype, **extra)
        if tokenizer is not None:
            tok = _tokenizer(tokenizer)
        return m, tok, name
    if isinstance(model, str) and model in (NANO_NAME, LLAMA_NANO_NAME):
        arch = "gpt2" if model == NANO_NAME else "llama"
        path = nano_path(arch)
        if not (path / "config.json").exists():
            cmd = "aieg-fast train-nano" + ("" if arch == "gpt2" else " --arch llama")
            raise ValueError(f"model {model!r} is not trained yet (nothing in {path}); run `{cmd}` first")
        m, tok, _ = load_hf_model(path, tokenizer, dtype, device_map, model_kwargs)
        return m, tok, model
    if isinstance(model, str) and model == SST2_NAME:
        return _load_sst2(tokenizer, dtype)
    if _is_adapter_dir(model):
        m, tok, _ = _load_sst2(tokenizer, dtype, adapter_dir=model)  # a LoRA adapter of the embedded model
        return m, tok, str(model)
    if isinstance(model, (str, Path)):
        name = str(model)
        _refuse_unfinished_training(name)
        hub = {k: extra[k] for k in HUB_KWARGS if k in extra}  # where the config and tokenizer are read from, too
        _refuse_missing_local_path(name, hub=hub)
        try:
            config = AutoConfig.from_pretrained(name, **hub)
        except (OSError, ValueError) as err:
            _refuse_unknown_model_type(name, err)
            where = "a local directory without a loadable config" if Path(name).is_dir() else "not a local directory"
            raise ValueError(
                f"model must be a hub id or a local model directory; {name!r} is {where} and could not "
                f"be loaded from the hub ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            ) from err
        adapter = adapter_class(config)  # refuse an unsupported family before loading weights
        cls = AutoModelForSequenceClassification if _config_kind(config) == "classifier" else AutoModelForCausalLM
        m = cls.from_pretrained(name, dtype=dtype, **{**adapter.load_kwargs, **extra})
        if tokenizer is None:
            try:
                tok = AutoTokenizer.from_pretrained(name, **{k: v for k, v in hub.items() if k != "subfolder"})
            except (OSError, ValueError) as err:  # e.g. weights in a subfolder, the repository's root read for the tokenizer
                raise ValueError(f"model {name!r} loaded, but no tokenizer loaded from it ({type(err).__name__}: "
                                 f"{str(err).splitlines()[0] if str(err) else ''}); pass tokenizer= (an object, a hub id or a folder)") from err
        else:
            tok = _tokenizer(tokenizer)
        return m, tok, name
    if not hasattr(model, "config") or not hasattr(model, "get_input_embeddings"):
        raise TypeError(
            f"model must be None, a hub id or local directory (str or Path), or a transformers model, got {type(model).__name__}"
        )
    if tokenizer is None:
        raise ValueError(f"tokenizer is required when model is a model object, got model={type(model).__name__} and tokenizer=None")
    tok = _tokenizer(tokenizer)
    name = getattr(model.config, "_name_or_path", "") or type(model).__name__
    return model, tok, name


def _refuse_unknown_model_type(name: str, err: Exception) -> None:
    """Raise the reason a local folder's config did not load when it is its ``model_type``, which
    the installed ``transformers`` does not know: the registry's refusal of a family aieg_fast has
    no adapter for, else (no ``auto_map`` of custom code) that ``transformers`` needs upgrading.
    Returns otherwise."""
    from transformers import CONFIG_MAPPING, __version__

    try:
        raw = json.loads((Path(name) / "config.json").read_text(encoding="utf-8"))
        mt, custom = raw.get("model_type"), "auto_map" in raw
    except (OSError, ValueError, AttributeError):  # no file, not JSON, not an object
        return
    if not isinstance(mt, str) or mt in CONFIG_MAPPING:
        return
    if mt not in supported_model_types():
        adapter_class(SimpleNamespace(model_type=mt))  # the usual refusal, naming the supported families
    if custom:  # custom code of a registered family: transformers' own reason, not an upgrade
        return
    raise ValueError(f"model {name!r} has model_type {mt!r}: aieg_fast has an adapter for it, but the installed "
                     f"transformers {__version__} does not know that model type: upgrade transformers, or for a family "
                     "of your own register its classes with transformers first (AutoConfig.register, "
                     "AutoModelForCausalLM.register) or pass the model object "
                     f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})") from err


def _config_kind(config) -> str:
    """``"classifier"`` when the config's architectures name a sequence-classification head (the
    class :func:`load_hf_model` loads), else ``"causal_lm"``."""
    archs = list(getattr(config, "architectures", None) or [])
    return class_kind(*archs)


def model_kind(model) -> Optional[str]:
    """What :func:`load_hf_model` would make of ``model``, found without loading weights:
    ``"classifier"`` (a ``...ForSequenceClassification`` head), ``"causal_lm"``, or None when
    that needs more than a local config (a hub id offline, a folder without ``config.json``, an
    object of another kind: :func:`load_hf_model` then says what is wrong).

    ``model`` takes what :func:`load_hf_model` takes, and also a loaded
    :class:`~aieg_fast.Explainer` (its adapter's kind). Never raises.
    """
    adapter = getattr(model, "adapter", None)
    if isinstance(getattr(adapter, "kind", None), str):
        return adapter.kind
    model = home_expanded(model)  # as load_hf_model reads it
    if model is None or (isinstance(model, str) and model in (DEFAULT_MODEL, SST2_NAME, NANO_NAME, LLAMA_NANO_NAME)) \
            or _is_adapter_dir(model):
        return "causal_lm"
    if isinstance(model, (str, Path)):
        config = Path(model) / "config.json"
        if not config.is_file():
            return None
        try:
            from transformers import AutoConfig

            return _config_kind(AutoConfig.from_pretrained(str(model)))
        except (OSError, ValueError):
            return None
    if hasattr(model, "config") and hasattr(model, "get_input_embeddings"):
        return class_kind(*(c.__name__ for c in type(model).__mro__))
    return None


def home_expanded(name):
    """A str / Path starting with ``~`` as the path it names (a ``~user`` of no user as given:
    refused later as a missing path); anything else as it is."""
    if isinstance(name, (str, Path)) and str(name).startswith("~"):
        with contextlib.suppress(RuntimeError):
            return str(Path(name).expanduser())
    return name


def _check_tokenizer(tokenizer) -> None:
    """Refuse a ``tokenizer`` that is neither None, a str / Path (an id or folder, loaded later)
    nor a tokenizer-like object (callable, with ``convert_ids_to_tokens``): TypeError naming
    ``tokenizer`` and the type; a str / Path that can only be a missing local path: ValueError
    (:func:`_refuse_missing_local_path`)."""
    if isinstance(tokenizer, (str, Path)):
        _refuse_missing_local_path(str(tokenizer), "tokenizer")
    if tokenizer is None or isinstance(tokenizer, (str, Path)):
        return
    if not callable(tokenizer) or not callable(getattr(tokenizer, "convert_ids_to_tokens", None)):
        shown = repr(tokenizer)
        raise TypeError(f"tokenizer must be a tokenizer object (callable, with convert_ids_to_tokens, e.g. from "
                        f"AutoTokenizer.from_pretrained), a hub id or a local tokenizer directory, got "
                        f"{type(tokenizer).__name__} {shown[:80]}{'...' if len(shown) > 80 else ''}")


def _tokenizer(tokenizer):
    """``tokenizer`` itself, or the tokenizer its id / folder names.

    Raises:
        ValueError: a str / Path that loads no tokenizer (names it and why). TypeError: as
            :func:`_check_tokenizer`.
    """
    _check_tokenizer(tokenizer)
    if not isinstance(tokenizer, (str, Path)):
        return tokenizer
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(tokenizer))
    except (OSError, ValueError) as err:
        where = "a local directory without a loadable tokenizer" if Path(tokenizer).is_dir() else "not a local directory"
        raise ValueError(f"tokenizer must be a tokenizer object, a hub id or a local tokenizer directory; {str(tokenizer)!r} "
                         f"is {where} and could not be loaded from the hub ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''})") from err


def _refuse_unfinished_training(folder: str) -> None:
    """Refuse a ``train-sentiment`` output folder whose training has not finished (a checkpoint,
    no adapter yet), saying so, where the loader would call it a folder without a config, and a
    folder whose trained model or adapter was being moved in when it stopped (``train-nano``,
    ``train-sentiment``: its files there, the rest and the record in ``.partial-*``)."""
    path = Path(folder)
    stopped = unfinished_install(path) if path.is_dir() else None
    if stopped is not None:
        raise ValueError(f"model {folder!r}: a training stopped while moving its model into this folder; the rest of "
                         f"that model is in {str(stopped)!r}: move its files into {folder!r} to finish it, or train again")
    if not (path / "checkpoint").is_dir() or (path / "config.json").is_file() or (path / "adapter_config.json").is_file():
        return
    try:
        step = f" at step {int(json.loads((path / 'progress.json').read_text(encoding='utf-8'))['step'])}"
    except (OSError, ValueError, KeyError, TypeError):
        step = ""
    raise ValueError(f"model {folder!r}: its training stopped{step} and has not finished (a checkpoint, no adapter yet); "
                     f"rerun the same `aieg-fast train-sentiment --out {folder}` command to finish it")


def unfinished_install(out: Path) -> Optional[Path]:
    """The ``.partial-*`` folder of ``out`` that still holds the record of a model whose
    :func:`aieg_fast.training.folder.install_model` stopped (``out`` itself has none), or None."""
    if (out / TRAINING_RECORD).is_file():
        return None
    return next((p for p in sorted(out.glob(".partial-*")) if (p / TRAINING_RECORD).is_file()), None)


def training_folder(model) -> Optional[Path]:
    """The folder of ``model`` that holds its ``training.json`` when one of this package's
    training commands made it (``train-sentiment``, ``train-nano``), found without loading:
    ``"gpt-nano"`` / ``"llama-nano"`` → :func:`nano_path`, ``"smollm2-sst2"`` → the shipped
    adapter, a local folder → itself, a loaded :class:`~aieg_fast.Explainer` → that of its
    name; None for anything else (the embedded model, a hub id, a model object). Never raises."""
    name = getattr(model, "name", None) if not isinstance(model, (str, Path)) and hasattr(model, "adapter") else model
    name = home_expanded(name)  # as load_hf_model reads it
    if isinstance(name, str) and name in (NANO_NAME, LLAMA_NANO_NAME):
        folder = nano_path("gpt2" if name == NANO_NAME else "llama")
    elif isinstance(name, str) and name == SST2_NAME:
        folder = sst2_adapter_path()
    elif isinstance(name, (str, Path)) and str(name) and name != DEFAULT_MODEL:
        folder = Path(name)
    else:
        return None
    try:
        return folder if (folder / TRAINING_RECORD).is_file() else None
    except OSError:
        return None


def _refuse_missing_local_path(name: str, role: str = "model", hub: Optional[dict] = None) -> None:
    """Refuse a ``model`` (or ``tokenizer``: ``role``) that can only be a local path (absolute,
    ``./`` or ``~``, a backslash, more than one ``/``; or ``org/name`` whose ``org`` is a folder
    here and that is not a model in the hub cache: ``hub``'s ``cache_dir``, ``revision`` and
    ``subfolder`` of :data:`HUB_KWARGS`, or the defaults) when nothing is there, before transformers
    tries it on the hub (transformers retries the hub several times without a network).

    Raises:
        ValueError: names the path and the nearest folder that exists.
    """
    path = Path(home_expanded(name))
    if path.exists() or path.is_symlink():
        return
    parts = Path(name).parts
    local_form = path.is_absolute() or name.startswith((".", "~")) or "\\" in name
    local = local_form or len(parts) > 2
    if not local and len(parts) == 2 and Path(parts[0]).is_dir():
        from huggingface_hub import try_to_load_from_cache

        try:
            hub = hub or {}
            file = "config.json" if role == "model" else "tokenizer_config.json"
            file = f"{hub['subfolder']}/{file}" if hub.get("subfolder") else file
            local = not isinstance(try_to_load_from_cache(name, file, cache_dir=hub.get("cache_dir"), revision=hub.get("revision")), str)
        except ValueError:  # no valid hub id either (a space, '..'): a local path
            local = True
    if local:
        nearest = next((p for p in path.absolute().parents if p.is_dir()), None)
        hint = (f" (a hub id not downloaded yet is read as this path while a folder {parts[0]!r} is here: download "
                "it first, or run from another folder)") if len(parts) == 2 and not local_form else ""
        raise ValueError(f"{role} {name!r} reads as a local path and nothing is there; the nearest folder that exists "
                         f"is {str(nearest)!r}{hint}")


def _is_adapter_dir(model) -> bool:
    """A folder holding a LoRA adapter (of the embedded model) and no model of its own."""
    return isinstance(model, (str, Path)) and (Path(model) / "adapter_config.json").is_file() and not (Path(model) / "config.json").is_file()


def _load_sst2(tokenizer, dtype, adapter_dir=None):
    """The embedded SmolLM2-135M-Instruct with the SST-2 LoRA adapter merged into its weights
    (the adapter shipped in ``aieg_fast/data/smollm2-sst2``, or ``adapter_dir``)."""
    path = Path(adapter_dir) if adapter_dir is not None else sst2_adapter_path()
    if not (path / "adapter_config.json").is_file():
        raise ValueError(f"model {SST2_NAME!r}: no LoRA adapter in {path} (made by `aieg-fast train-sentiment`)")
    try:
        from peft import PeftModel
    except ImportError as err:
        raise RuntimeError(f"model {SST2_NAME!r} needs the package peft (`pip install peft`)") from err
    import json

    base_name = str(json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path") or "")
    if not base_name.rstrip("/").endswith(DEFAULT_MODEL):
        raise ValueError(f"model: the LoRA adapter in {path} is for {base_name!r}; only adapters of the embedded {DEFAULT_MODEL} load by folder")
    base, tok, _ = load_embedded(torch.float32)
    with warnings.catch_warnings():  # peft reads transformers' deprecated is_gradient_checkpointing
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        m = PeftModel.from_pretrained(base, str(path)).merge_and_unload()  # merged in float32
    name = SST2_NAME if adapter_dir is None else str(adapter_dir)  # an adapter folder is named by its path
    m.config._name_or_path = name
    if dtype is not None and dtype != torch.float32:
        m = m.to(dtype)
    if tokenizer is not None:
        tok = _tokenizer(tokenizer)
    return m, tok, name


def weights_digest(model) -> str:
    """SHA-256 (hex) of a model's parameters: each one's name, dtype, shape and bytes, in name
    order (a parameter on the ``meta`` device, offloaded by accelerate, adds its name, dtype and
    shape only). Two models share a digest when their weights are equal bit for bit; one changed
    weight changes it. Reads every parameter once: 0.35 s for SmolLM2-135M's 538 MB of float32 on
    one thread of a 2-core AMD EPYC (``benchmarks/bench_weights_digest.py``, benchmarks/RESULTS.md)."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters(), key=lambda item: item[0]):
        h.update(f"{name}|{p.dtype}|{tuple(p.shape)}".encode())
        if p.device.type != "meta" and p.numel():
            h.update(memoryview(p.detach().contiguous().flatten().view(torch.uint8).cpu().numpy()))
    return h.hexdigest()


def run_model_settings(ex) -> dict:
    """How a run folder's ``config.json`` records the model of explainer ``ex``:
    ``{"model": its name (or class), "model_weights": "sha256:" + the first 16 hex digits of
    :func:`weights_digest`}``, so a rerun in the folder with other weights under the same name
    (a model object of another seed, a fine-tune or a weight ablated in memory; a folder or
    ``gpt-nano`` trained again in place) is refused rather than resumed with the first model's
    records. ``model_weights`` is None for the models the installed package fixes
    (SmolLM2-135M-Instruct, ``smollm2-sst2``): they are not read again. A model loaded from a
    folder named by a relative path is recorded by its absolute path, so the run resumes from
    another working directory."""
    name = ex.name or type(ex.model).__name__
    fixed = getattr(ex, "loaded_by_name", False) and name in (DEFAULT_MODEL, SST2_NAME)
    if getattr(ex, "loaded_by_name", False) and not fixed and os.path.isdir(name):  # a folder named relative to here
        name = os.path.abspath(name)  # a rerun from another directory names the same folder (a relative record compares too)
    return {"model": name, "model_weights": None if fixed else "sha256:" + weights_digest(ex.model)[:16]}
