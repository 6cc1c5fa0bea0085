"""GPT-nano: the small GPT-2 sentiment classifier of the AIEG paper, trained here on a CPU.

The AIEG paper evaluates on "GPT-nano", minGPT's ``gpt-nano`` configuration (3 layers, 3 heads,
48-dimensional embeddings, GPT-2 architecture) fine-tuned for SST-2 (specs/aieg.md §7). No
trained copy is published, so :func:`train_nano` trains one from scratch on the SST-2 train set
(67,349 phrases; the ``sst2-train`` entry of :data:`aieg_fast.datasets.DATASETS`, shipped) as a
``GPT2ForSequenceClassification`` with two classes (0 negative, 1 positive). The tokenizer is
the embedded SmolLM2 tokenizer (available offline; GPT-2's BPE would need the hub), so the
vocabulary has 49,152 tokens and the token embedding holds most of the ~2.5 M parameters.
Deviation from the paper, where minGPT nano uses GPT-2's tokenizer: the tokenizer choice only
changes the vocabulary, not the architecture.

The trained model and its tokenizer are saved in ``<cache>/gpt-nano-sst2`` (see
:func:`aieg_fast.models.cache_dir`) and load with ``aieg_fast.load_model("gpt-nano")``.
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from ..core.batch import right_pad
from ..datasets import DATASETS, SHIPPED_DATA_DIR, data_folder, dataset_path
from ..models import DEFAULT_MODEL, NANO_NAME, cache_dir, load_hf_model, nano_path
from ..core.validation import as_int, check_int, check_number, check_positive_int
from ..runs import LOCK_FILE, made_folder
from .folder import TRAINING_RECORD, file_digest, refuse_other_training, refuse_stopped_install, save_trained
from .schedule import check_seed, warmup_cosine
from .split import rows_in_datasets

__all__ = ["ARCHS", "LLAMA_NANO_CONFIG", "NANO_NAME", "NANO_CONFIG", "nano_path", "train_nano"]

#: name of the trained model in the cache, and the alias accepted by ``load_model``.
#: minGPT's "gpt-nano" model type.
NANO_CONFIG = {"n_layer": 3, "n_head": 3, "n_embd": 48}
#: LLaMA-nano: the same depth and width with LLaMA's pieces (RoPE, RMSNorm, SwiGLU, grouped-query
#: attention with 4 query heads sharing 2 KV heads of 12 dims), for cheap studies of RMSNorm
#: behaviour such as zero baselines.
LLAMA_NANO_CONFIG = {"num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 48,
                     "intermediate_size": 128}
ARCHS = ("gpt2", "llama")


def _embedded_tokenizer():
    """The embedded SmolLM2 tokenizer, from the cache (built on first use, offline)."""
    from transformers import AutoTokenizer

    cached = cache_dir() / DEFAULT_MODEL
    if (cached / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(cached)
    return load_hf_model(None)[1]


def _texts_labels(path) -> Tuple[List[str], List[int]]:
    rows = DATASETS["sst2-train"].read(path)
    return [s for s, _ in rows], [l for _, l in rows]


def _encode(tok, texts: Sequence[str], max_length: int) -> List[List[int]]:
    enc = tok(list(texts), add_special_tokens=True, truncation=True, max_length=max_length)["input_ids"]
    return [list(e) if e else [tok.pad_token_id] for e in enc]


def _diverged(what: str, step: int) -> RuntimeError:
    return RuntimeError(f"{what} at step {step}; lower lr (nothing was saved)")


@torch.no_grad()
def _accuracy(model, seqs: List[List[int]], labels: List[int], pad_id: int, batch_size: int = 256, step: int = 0) -> float:
    """Share of ``seqs`` whose highest logit is their label; RuntimeError when a logit is inf or
    nan (weights diverged by ``step``)."""
    model.eval()
    correct = 0
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))  # similar lengths per batch
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        ids, mask = right_pad([seqs[i] for i in idx], pad_id)
        logits = model(input_ids=ids, attention_mask=mask).logits
        if not bool(torch.isfinite(logits).all()):
            raise _diverged("the logits became inf or nan", step)
        pred = logits.argmax(-1)
        correct += int((pred == torch.tensor([labels[i] for i in idx])).sum())
    return correct / max(1, len(seqs))


def _check_arguments(epochs, batch_size, max_length, n_positions, max_train, lr, seed) -> None:
    """ValueError naming the first argument out of its range, and its value."""
    for name, v in (("epochs", epochs), ("batch_size", batch_size), ("max_length", max_length), ("n_positions", n_positions)):
        check_positive_int(name, v)
    check_int("max_train", max_train, 2, optional=True)
    check_number("lr", lr, 0.0, strict=True)
    check_seed(seed)


def _data_files(train_file, dev_file, data_dir) -> Tuple[Path, Path]:
    """The train and dev files: given, else in the data folder; the dev set falls back to the
    shipped copy. FileNotFoundError names what is missing and how to point to it."""
    train_spec, dev_spec = DATASETS["sst2-train"], DATASETS["sst2-dev"]
    folder = data_folder(data_dir)
    from_folder = train_file is None and folder is not None  # the train file is the data folder's
    if train_file is None and folder is None:  # the copy shipped with the package (gzipped)
        train_file = SHIPPED_DATA_DIR / train_spec.shipped
    train_file = Path(train_file) if train_file is not None else folder / train_spec.file
    if dev_file is None:  # the dev set is also shipped with the package
        in_folder = folder is not None and (folder / dev_spec.file).is_file()
        dev_file = folder / dev_spec.file if in_folder else dataset_path("sst2-dev")
    dev_file = Path(dev_file)
    if from_folder and not train_file.is_file():  # the folder is what was named
        where = "holds no" if folder.is_dir() else "does not exist; it should hold"
        named = "data_dir" if data_dir is not None else "AIEG_FAST_DATA"
        raise FileNotFoundError(f"{named} {str(folder)!r} {where} {train_spec.file}; pass --data-dir DIR (or set "
                                f"AIEG_FAST_DATA) to the folder holding {train_spec.file} and {dev_spec.file}, or --train-file")
    for what, f in (("train_file", train_file), ("dev_file", dev_file)):
        if not f.is_file():
            raise FileNotFoundError(
                f"{what} {str(f)!r} does not exist; pass --data-dir DIR (or set AIEG_FAST_DATA) to the folder "
                f"holding {train_spec.file} and {dev_spec.file}, or --train-file / --dev-file"
            )
    return train_file, dev_file


def _new_model(tok, n_positions: int, pad_id: int, seed: int, arch: str = "gpt2"):
    """A freshly initialised GPT-nano (or LLaMA-nano) classifier (seeded)."""
    from transformers import GPT2Config, GPT2ForSequenceClassification, LlamaConfig, LlamaForSequenceClassification

    torch.manual_seed(seed)
    common = dict(
        vocab_size=len(tok), num_labels=2, id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1},
        pad_token_id=pad_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )
    if arch == "llama":
        config, cls = LlamaConfig(max_position_embeddings=n_positions, **LLAMA_NANO_CONFIG, **common), LlamaForSequenceClassification
    else:
        config, cls = GPT2Config(n_positions=n_positions, **NANO_CONFIG, **common), GPT2ForSequenceClassification
    config.architectures = [cls.__name__]
    return cls(config)


def _optimizer(model, total: int, lr: float, weight_decay: float):
    """AdamW (no decay on biases and norms) with linear warm-up over 5 % of the steps, then cosine decay."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr)
    return opt, warmup_cosine(opt, total)


def _train(model, tr, tr_labels, dv, dv_labels, pad_id, epochs, batch_size, lr, weight_decay, seed, progress) -> List[dict]:
    """The training loop; one history entry (loss, accuracies) per epoch.

    Raises:
        RuntimeError: the loss or a weight became inf or nan (names the step).
    """
    total = math.ceil(len(tr) / batch_size) * epochs
    opt, sched = _optimizer(model, total, lr, weight_decay)
    gen = torch.Generator().manual_seed(seed)
    labels_t = torch.tensor(tr_labels)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="train-nano", unit="step", file=sys.stderr)
    history, step = [], 0
    try:
        for epoch in range(epochs):
            model.train()
            perm = torch.randperm(len(tr), generator=gen).tolist()
            loss_sum, correct, seen = 0.0, 0, 0
            for s in range(0, len(perm), batch_size):
                idx = perm[s : s + batch_size]
                ids, mask = right_pad([tr[i] for i in idx], pad_id)
                y = labels_t[idx]
                outp = model(input_ids=ids, attention_mask=mask, labels=y)
                step += 1
                if not bool(torch.isfinite(outp.loss)):
                    raise _diverged(f"loss became {float(outp.loss.detach())}", step)
                opt.zero_grad(set_to_none=True)
                outp.loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                loss_sum += float(outp.loss.detach()) * len(idx)
                correct += int((outp.logits.argmax(-1) == y).sum())
                seen += len(idx)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss_sum / seen:.3f}")
            if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
                raise _diverged("the weights became inf or nan", step)
            dev_acc = _accuracy(model, dv, dv_labels, pad_id, step=step)
            history.append({"epoch": epoch + 1, "train_loss": loss_sum / seen, "train_accuracy": correct / seen, "dev_accuracy": dev_acc})
    finally:
        if bar is not None:
            bar.close()
    return history


def train_nano(
    train_file=None,
    dev_file=None,
    *,
    data_dir=None,
    out_dir=None,
    epochs: int = 2,
    batch_size: int = 64,
    lr: float = 2e-3,
    weight_decay: float = 0.01,
    max_length: int = 128,
    n_positions: int = 512,
    max_train: Optional[int] = None,
    seed: int = 0,
    tokenizer=None,
    progress: bool = True,
    arch: str = "gpt2",
) -> Dict[str, object]:
    """Train GPT-nano on SST-2 train and save it (model, tokenizer, ``training.json``).

    Args:
        train_file, dev_file: ``sentence<TAB>label`` files with a header (default:
            ``sst2_train.tsv`` / ``sst2_dev.tsv`` in ``data_dir``, else ``$AIEG_FAST_DATA``,
            else the copies shipped with the package).
        out_dir: where to save (default :func:`nano_path` of ``arch``); created, and checked
            writable, before the tokenizer loads (a folder this call created is removed again
            when it fails before saving). A folder that holds a model trained with other
            settings (its ``training.json``: these arguments, the files, the rows used, the
            position table) or files but no ``training.json`` is refused then; one of the same
            settings is trained again. The model is saved into a folder inside it
            (``.partial-<random>``) whose files are then moved into it, the record last
            (:func:`~aieg_fast.training.folder.install_model`): an error or Ctrl-C while
            training or saving leaves the former model whole; one while moving leaves the rest
            in that folder, which the loader and a rerun name; other files in the folder stay.
        epochs, batch_size, lr, weight_decay: AdamW with linear warm-up (5 % of the steps) and
            cosine decay to 0. GPT-nano trains with GPT-2's default dropout (0.1 on the
            embeddings, attention weights and residual branches); LLaMA-nano with none
            (``LlamaConfig``'s attention dropout 0.0, and LLaMA has no other).
        max_length: training texts are truncated to this many tokens.
        n_positions: position table size (512 leaves room for IMDb's 400-token bucket).
        max_train: use only the first this many training rows (tests, quick runs).
        seed: seed of the initialisation, the shuffling and the dropout: an int in [0, 2**32 - 1].
        tokenizer: a tokenizer object (default: the embedded SmolLM2 tokenizer).
        arch: ``"gpt2"`` (GPT-nano, :data:`NANO_CONFIG`) or ``"llama"`` (LLaMA-nano,
            :data:`LLAMA_NANO_CONFIG`; saved in ``nano_path("llama")``, loaded as ``"llama-nano"``).

    Returns:
        ``{"out_dir", "dev_accuracy", "train_accuracy_last_epoch", "epochs", "n_train",
        "n_params", "seconds", "history", "training_rows_in", ...}`` (also written to
        ``out_dir/training.json``); ``"training_rows_in"``: the rows of each sentiment
        evaluation dataset that are training rows (``evaluate`` refuses a dataset the model was
        trained on: :func:`aieg_fast.eval.trained.check_not_trained_on`).

    Raises:
        ValueError: a bad argument (named), a malformed data file (names the file and line), a
            data file without rows, an ``out_dir`` that is not a writable folder (or whose parent
            is not), that another run holds (two runs would remove each other's half-saved model:
            the folder is held as ``evaluate`` holds its own, :func:`aieg_fast.runs.claim_folder`),
            or that holds a model of other settings, other files or a stopped install (before
            the tokenizer loads).
        FileNotFoundError: a missing data file.
        OSError: a file of the trained model could not be moved into ``out_dir`` (names the
            folder holding the rest).
        RuntimeError: the loss or the weights became inf or nan (nothing saved).
    """
    epochs, batch_size, max_length, n_positions, max_train, seed = map(  # a NumPy int as the int it holds (training.json)
        as_int, (epochs, batch_size, max_length, n_positions, max_train, seed))
    _check_arguments(epochs, batch_size, max_length, n_positions, max_train, lr, seed)
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {list(ARCHS)}, got {arch!r}")
    train_file, dev_file = _data_files(train_file, dev_file, data_dir)
    tr_texts, tr_labels = _texts_labels(train_file)
    if max_train is not None:
        tr_texts, tr_labels = tr_texts[:max_train], tr_labels[:max_train]
    dv_texts, dv_labels = _texts_labels(dev_file)
    for what, f, texts in (("train_file", train_file, tr_texts), ("dev_file", dev_file, dv_texts)):
        if not texts:
            raise ValueError(f"{what} {str(f)!r} holds no rows")
    with made_folder(out_dir if out_dir is not None else nano_path(arch), "out_dir") as out:  # held: a second run on it is refused
        settings = {"batch_size": batch_size, "lr": lr, "weight_decay": weight_decay, "max_length": max_length, "seed": seed,
                    "train_file": str(train_file), "dev_file": str(dev_file),
                    "train_file_sha256": file_digest(train_file), "dev_file_sha256": file_digest(dev_file)}
        _refuse_folder(out, _compared({"settings": settings, "epochs": epochs, "n_train": len(tr_texts),
                                       "config": {"n_positions": n_positions, "arch": arch}}))
        tok = _embedded_tokenizer() if tokenizer is None else tokenizer
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        tr = _encode(tok, tr_texts, max_length)
        dv = _encode(tok, dv_texts, max_length)

        model = _new_model(tok, n_positions, pad_id, seed, arch)
        n_params = sum(p.numel() for p in model.parameters())
        t0 = time.perf_counter()
        history = _train(model, tr, tr_labels, dv, dv_labels, pad_id, epochs, batch_size, lr, weight_decay, seed, progress)
        seconds = time.perf_counter() - t0
        model.eval()
        summary = {
            "out_dir": str(out), "dev_accuracy": history[-1]["dev_accuracy"], "train_accuracy_last_epoch": history[-1]["train_accuracy"],
            "epochs": epochs, "n_train": len(tr), "n_dev": len(dv), "n_params": n_params, "seconds": seconds,
            "history": history, "config": dict(NANO_CONFIG if arch == "gpt2" else LLAMA_NANO_CONFIG, n_positions=n_positions, vocab_size=len(tok), arch=arch),
            "settings": settings, "training_rows_in": rows_in_datasets(tr_texts, DATASETS["sst2-train"]),
            "torch": torch.__version__, "threads": torch.get_num_threads(),
        }
        save_trained(out, summary, model, tok)
        return summary


def _compared(record: dict) -> dict:
    """The settings of a ``training.json`` record that a rerun in its folder must match: its
    ``settings`` with the epochs, rows, position table and architecture (recorded beside them;
    records before LLaMA-nano have no ``arch``: GPT-nano). The data files count by their names
    and contents (``*_sha256``), not their paths: the shipped copies lie under the installed
    package, whose path differs between installs."""
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    files = {k: Path(str(v)).name for k, v in record["settings"].items() if k in ("train_file", "dev_file") and v is not None}
    return dict(record["settings"], **files, epochs=record.get("epochs"), n_train=record.get("n_train"),
                n_positions=config.get("n_positions"), arch=config.get("arch", "gpt2"))


def _unrecorded_digests(out: Path) -> Tuple[str, ...]:
    """The data-file digests that the record in ``out`` lacks (written before them: its files
    are then compared by name only)."""
    try:
        recorded = json.loads((out / TRAINING_RECORD).read_text(encoding="utf-8"))["settings"]
        return tuple(k for k in ("train_file_sha256", "dev_file_sha256") if k not in recorded)
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def _refuse_folder(out: Path, settings: dict) -> None:
    """Refuse an ``out`` that holds a model trained with other settings (as ``train_sentiment``
    refuses an adapter), or files but no ``training.json`` (the model's files would overwrite
    theirs).

    Raises:
        ValueError: names the settings that differ (recorded and new value), or the folder.
    """
    refuse_other_training(out, settings, "a model", free=_unrecorded_digests(out), view=_compared)
    refuse_stopped_install(out)
    if not (out / TRAINING_RECORD).is_file() and any(not f.name.startswith(".partial-") and f.name != LOCK_FILE for f in out.iterdir()):
        raise ValueError(f"out_dir {str(out)!r} holds files but no {TRAINING_RECORD} (not a model train_nano finished), and "
                         f"train_nano would write its model's files over theirs; pass another out_dir, or empty the folder {str(out)!r}")
