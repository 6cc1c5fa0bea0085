"""A training's output folder: its record (``training.json``), checked before a rerun may use the
folder, and the checkpoint of :func:`aieg_fast.training.train_sentiment` (written beside, then
renamed over the former one, so a kill leaves that or this)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import torch

from ..models import TRAINING_RECORD, save_model_files, unfinished_install
from ..runs import setting_differences
from ..runs.records import write_json

__all__ = ["ADAPTER_FILES", "MODEL_FILES", "TRAINING_RECORD", "checkpoint_step", "elapsed_seconds", "file_digest", "install_model", "other_settings", "read_checkpoint",
           "recorded_state", "refuse_other_training", "refuse_stopped_install", "resume", "save_checkpoint", "save_trained", "staging_folder",
           "unfinished_install"]

#: the files a transformers model and tokenizer save may write (a former record without a file list).
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt",
               "tokenizer.model", "chat_template.jinja", "chat_template.json")


#: the files a peft LoRA adapter's save writes (a former train_sentiment record without a file list).
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")


def file_digest(path) -> str:
    """A training data file's identity beside its name in a record: the first 16 hex digits of
    the SHA-256 of its bytes. OSError when it cannot be read."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def other_settings(old: dict, new: dict, free: Iterable[str] = ()) -> str:
    """"" when ``old`` and ``new`` agree on every setting but those of ``free``, else each one
    that differs as "name: recorded value recorded, new value now", joined by "; "."""
    keys = (set(old) | set(new)) - set(free)
    return "; ".join(setting_differences(old, new, keys, absent="absent"))


def _fix(out: Path) -> str:
    return f"pass another out_dir, or delete the folder {str(out)!r} to start again"


def refuse_other_training(out: Path, settings: dict, what: str = "an adapter", free: Iterable[str] = (),
                          view: Callable[[dict], dict] = lambda record: record["settings"]) -> None:
    """Refuse a folder whose ``training.json`` records a training with other settings than
    ``settings`` (those of ``free`` may differ); nothing when it holds none.

    Args:
        what: what the folder holds, as the message names it ("an adapter", "a model").
        view: the recorded settings of a record (default its ``"settings"``).

    Raises:
        ValueError: the settings differ (names each with its recorded and its new value), or
            ``training.json`` cannot be read (names it); both say what to do.
    """
    done = out / TRAINING_RECORD
    if not done.is_file():
        return
    try:
        old = view(json.loads(done.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"out_dir: {str(done)!r} is not a readable training record ({type(err).__name__}); {_fix(out)}") from None
    diff = other_settings(old if isinstance(old, dict) else {}, settings, free)
    if diff:
        raise ValueError(f"out_dir {str(out)!r} holds {what} trained with other settings ({diff}); {_fix(out)}")


def read_checkpoint(out: Path) -> Tuple[Optional[dict], Optional[Path]]:
    """(state, its file) of the checkpoint in ``out``, read on the CPU with ``weights_only=True``
    (tensors, numbers, strings and their containers: what :func:`save_checkpoint` writes; a file
    holding other objects is not unpickled), or (None, None): none. ``checkpoint.tmp/state.pt``, a checkpoint that earlier versions of this module left there when
    killed before renaming it, is read when ``checkpoint/state.pt`` is missing (unreadable: a
    note on stderr, then none).

    Raises:
        ValueError: ``checkpoint/state.pt`` cannot be read or lacks a part (names the file).
    """
    keys = {"adapter", "optimizer", "scheduler", "step", "losses", "settings"}
    for f in (out / "checkpoint" / "state.pt", out / "checkpoint.tmp" / "state.pt"):
        if not f.is_file():
            continue
        try:
            state = torch.load(f, map_location="cpu", weights_only=True)
            problem = "" if isinstance(state, dict) and keys <= set(state) else "parts of a checkpoint are missing"
        except Exception as err:  # torch.load raises many kinds on a torn or foreign file
            problem = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        if not problem:
            return state, f
        if f.parent.name == "checkpoint.tmp":
            print(f"note: {f} cannot be read ({problem}) and is not resumed", file=sys.stderr)
            break
        raise ValueError(f"checkpoint {str(f)!r} cannot be resumed ({problem}); pass another out_dir, "
                         f"or delete {str(f.parent)!r} to start again")
    return None, None


def checkpoint_step(out: Path) -> Optional[int]:
    """The step the checkpoint in ``out`` holds (the one a rerun resumes from), None when there
    is none or it cannot be read. Never raises."""
    try:
        state, _ = read_checkpoint(out)
        return None if state is None else int(state["step"])
    except (ValueError, TypeError, KeyError):
        return None


def refuse_stopped_install(out: Path) -> None:
    """Refuse ``out`` when the install of a trained model into it stopped
    (:func:`unfinished_install`): a rerun would write over the files already moved and leave
    the rest, the record among them, in ``.partial-*``.

    Raises:
        ValueError: names the folder holding the rest and what to do.
    """
    stopped = unfinished_install(out)
    if stopped is not None:
        raise ValueError(f"out_dir {str(out)!r}: a training stopped while moving its model into it; the rest of that model, "
                         f"its {TRAINING_RECORD} included, is in {str(stopped)!r}: move those files into {str(out)!r} to "
                         "finish it, or pass another out_dir")


def recorded_state(out: Path, settings: dict, free: Iterable[str] = ()) -> Optional[dict]:
    """The checkpoint's state in ``out`` (None: none), read before the model loads.

    Raises:
        ValueError: ``out`` holds a finished adapter (``training.json``) or a checkpoint made with
            other settings than ``settings`` (those of ``free`` may differ; names each with its
            recorded and its new value), an unreadable ``training.json`` or checkpoint, or an
            adapter whose install stopped (:func:`refuse_stopped_install`).
    """
    refuse_other_training(out, settings, "an adapter", free)
    refuse_stopped_install(out)
    state, f = read_checkpoint(out)
    if state is not None:
        diff = other_settings(state["settings"], settings, free)
        if diff:
            raise ValueError(f"out_dir {str(out)!r} holds a checkpoint ({f}) made with other settings ({diff}); {_fix(out)}")
    return state


def save_checkpoint(out: Path, model, opt, sched, step: int, losses: List[float], running: List[float], settings: dict,
                    seconds: float, resumed_at: Sequence[int] = ()) -> None:
    """Write ``out/checkpoint/state.pt`` (adapter, optimizer, scheduler, step, losses per 10 steps,
    the losses since the last of them, settings, the steps at which the training resumed) and ``out/progress.json`` (step, seconds): each
    written in full beside, then renamed over the former one, so a kill leaves that or this."""
    from peft import get_peft_model_state_dict

    ckpt = out / "checkpoint"
    ckpt.mkdir(exist_ok=True)
    tmp = ckpt / "state.pt.tmp"
    with open(tmp, "wb") as fh:
        torch.save({"adapter": get_peft_model_state_dict(model), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "step": step, "losses": losses, "running": running, "settings": settings,
                    "resumed_at_steps": [int(k) for k in resumed_at]}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, ckpt / "state.pt")
    shutil.rmtree(out / "checkpoint.tmp", ignore_errors=True)  # an older one a former version left unrenamed
    write_json(out / "progress.json", {"step": step, "seconds": seconds})


def resume(state: Optional[dict], model, opt, sched) -> Tuple[int, List[float], List[float]]:
    """Load a checkpoint's state into the model, optimizer and scheduler: (step, losses per 10
    steps, losses since the last of them; checkpoints before these were kept: none); (0, [], []) for None."""
    if state is None:
        return 0, [], []
    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(model, state["adapter"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    return int(state["step"]), list(state["losses"]), list(state.get("running", []))


def elapsed_seconds(out: Path, step: int) -> float:
    """Seconds the runs before this one trained (``progress.json``); 0 at step 0, and 0 with a
    note on stderr when the file cannot be read."""
    f = out / "progress.json"
    if not step or not f.is_file():
        return 0.0
    try:
        return float(json.loads(f.read_text(encoding="utf-8"))["seconds"])
    except (ValueError, KeyError, TypeError) as err:
        print(f"note: {f} cannot be read ({type(err).__name__}); the training time is counted from 0 seconds", file=sys.stderr)
        return 0.0


def staging_folder(out: Path) -> Path:
    """A new empty folder inside ``out`` (``.partial-<random>``: on the same file system) to
    write a whole model into before :func:`install_model` moves it into ``out``; such folders
    that a run killed while saving left behind are removed first (not one holding its record,
    whose install stopped: :func:`aieg_fast.models.unfinished_install`).

    Raises:
        ValueError: ``out`` is not writable (names ``out_dir``).
    """
    for left in out.glob(".partial-*"):
        if not (left / TRAINING_RECORD).is_file():  # one with its record is an install to finish (install_model)
            shutil.rmtree(left, ignore_errors=True)
    try:
        return Path(tempfile.mkdtemp(prefix=".partial-", dir=out))
    except OSError as err:
        raise ValueError(f"out_dir {str(out)!r} is not writable ({err.strerror or err})") from None


def install_model(staged: Path, out: Path, former_files: Sequence[str] = MODEL_FILES) -> None:
    """Move the files of ``staged`` (:func:`staging_folder`) into ``out``, then remove
    ``staged``: the former ``training.json`` goes first, with the former model's files that the
    new one does not write (those its record lists in ``"files"``, else ``former_files``: what
    such a model wrote before records listed their files; none without a former record), and
    the new record comes last. A reader sees the former model with its record, the new one
    with its record, or a stopped install (files without a record, the rest in ``staged``:
    refused by the loader and by a rerun, :func:`aieg_fast.models.unfinished_install`), never
    new weights under the former record. Other files of ``out`` stay.

    Raises:
        OSError: a file could not be moved (names ``out_dir``, and ``staged``, left in place
            with the files not moved, the record among them).
    """
    new = {f.name for f in staged.iterdir()}
    try:
        former = json.loads((out / TRAINING_RECORD).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        former = None
    if not (out / TRAINING_RECORD).is_file():
        former = []  # no former model: every file in out is the user's
    elif not isinstance(former, list) or not all(isinstance(n, str) for n in former):
        former = list(former_files)
    try:
        (out / TRAINING_RECORD).unlink(missing_ok=True)
        for name in set(former) - new - {TRAINING_RECORD}:  # the former model's files the new one does not write
            if "/" not in name and (out / name).is_file():
                (out / name).unlink()
        for f in sorted(staged.iterdir(), key=lambda f: f.name == TRAINING_RECORD):
            os.replace(f, out / f.name)
    except OSError as err:
        raise OSError(err.errno, f"out_dir {str(out)!r}: the trained model could not be moved into it ({err.strerror or err}); "
                                 f"the files not moved, its {TRAINING_RECORD} last, are kept in {str(staged)!r}: move them into "
                                 f"{str(out)!r} to finish") from err
    shutil.rmtree(staged, ignore_errors=True)


def save_trained(out: Path, record: dict, *savers, former_files: Sequence[str] = MODEL_FILES, left_out: Sequence[str] = ()) -> None:
    """Save a trained model into ``out`` whole or not at all: each of ``savers`` (objects with
    ``save_pretrained``: the model or adapter, the tokenizer) writes into a
    :func:`staging_folder`, ``record`` gets ``"files"`` (the names they wrote, which a later
    install replaces; ``record`` is changed in place) and is written there as ``training.json``,
    then :func:`install_model` moves them into ``out``, the record last (``former_files``: as
    there; ``left_out``: files the savers write that are not installed, as peft's boilerplate
    model card ``README.md``, which would replace a user's own). An error or Ctrl-C
    while saving removes the staging folder and leaves the former contents of ``out`` as they
    were.

    Raises:
        ValueError: ``out`` is not writable (:func:`staging_folder`).
        OSError: a file could not be moved (:func:`install_model`).
    """
    from transformers import PreTrainedModel  # here: its import costs seconds, which `aieg-fast --help` need not pay

    staged = staging_folder(out)
    try:
        for saver in savers:
            if isinstance(saver, PreTrainedModel):  # written on every rank (save_pretrained writes only on rank 0 of a group)
                save_model_files(saver, staged)
            else:
                saver.save_pretrained(staged)
        for name in left_out:
            (staged / name).unlink(missing_ok=True)
        record["files"] = sorted(f.name for f in staged.iterdir())
        write_json(staged / TRAINING_RECORD, record)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    install_model(staged, out, former_files)
