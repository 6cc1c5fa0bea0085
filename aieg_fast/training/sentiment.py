"""SmolLM2-SST2: the embedded SmolLM2-135M-Instruct fine-tuned with LoRA to answer the sentiment prompt
(and the same recipe for BoolQ: ``task="boolq"``).

The AIEG paper explains models fine-tuned on the task; the zero-shot SmolLM2-135M barely reads the
review (58.5 % SST-2 dev accuracy). :func:`train_sentiment` fine-tunes it as a *language model*:
the prompt is :data:`aieg_fast.datasets.SENTIMENT_TEMPLATE` and the loss is the cross-entropy of
the label word (``" negative"`` / ``" positive"``, one token each) over the whole vocabulary at the
last prompt position. The model stays a causal LM, so next-token, label-set, contrast and generation
methods all apply to it.

Recipe (the shipped adapter was made by ``aieg-fast train-sentiment`` with these defaults):

* LoRA (``peft``) rank 8, alpha 16, dropout 0.05 on every attention and MLP projection
  (q, k, v, o, gate, up, down) of the 30 layers: 2.44 M trainable parameters;
* the first ``n_train`` rows of SST-2 train after a seeded shuffle, batches of ``batch_size``
  grouped by length, AdamW (lr 5e-4, weight decay 0), linear warm-up over 5 % of the steps then
  cosine decay, gradient clipping at 1.0;
* float32 on the CPU. The base weights are the de-quantized GGUF of the embedded model, so the
  adapter belongs to that base.
* the loss needs only the last position's logits, so only that position goes through the LM head;
  a batch may be run in pieces of ``micro_batch_size`` rows whose gradients add up to the batch's
  (BoolQ's default: pieces of 4, its passages being long; SST-2: the whole batch at once).

The same recipe on another task (:data:`TRAIN_TASKS`): ``task="boolq"`` trains on ``boolq-train``
(the BoolQ dev records with an even ``idx``, 1,635) with :data:`~aieg_fast.datasets.BOOLQ_TEMPLATE`
and the label words ``" no"`` / ``" yes"``, ``epochs`` passes over them (default 3), and scores
the other half ``boolq-heldout`` (odd ``idx``, 1,635), which is what ``evaluate --dataset
boolq-heldout`` then explains. BoolQ has no labelled test set of its own here, so the dev set is
split in two, deterministically, and the split is recorded in ``training.json``. The halves share
no example (no question is in both), but BoolQ asks several questions about one passage and 137
passages are in both halves: 177 of the 1,635 held-out questions ask about a passage the model
was trained on with another question (the split note counts them).

Training is resumable: every ``checkpoint_every`` steps the adapter, optimizer, scheduler and step
are saved in ``out_dir/checkpoint`` (written beside, then renamed over the former one); a rerun with
the same settings (the micro-batch size may change) continues from there (a run killed mid-way
loses at most that many steps). A resumed run reseeds the dropout with ``seed + step`` at the step
it resumes from (as the kept adapters were trained), so its dropout draws, and its adapter, differ
from those of an uninterrupted run; ``training.json`` records those steps (``"resumed_at_steps"``,
empty when the run went through at once). A folder holding a checkpoint or a finished adapter of other
settings is refused before the model loads, naming the settings that differ. The finished adapter (``adapter_config.json``,
``adapter_model.safetensors``) and ``training.json`` (settings, loss curve, SST-2 dev accuracy,
time) go in ``out_dir``, saved beside and moved in, the record last
(:func:`aieg_fast.training.folder.save_trained`: no adapter without its record); ``load_model("smollm2-sst2")`` merges the copy shipped in
``aieg_fast/data/smollm2-sst2`` (see :func:`aieg_fast.models.load_hf_model`).
"""
from __future__ import annotations

import math
import random
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from dataclasses import replace

from ..core.batch import right_pad
from ..core.inputs import fill_template
from ..datasets import DATASETS, SENTIMENT_LABELS, SENTIMENT_TEMPLATE, SHIPPED_DATA_DIR, dataset_path
from ..models import SST2_NAME, cache_dir, load_hf_model
from ..runs import made_folder
from ..core.validation import as_int, check_number, check_positive_int
from .folder import ADAPTER_FILES, elapsed_seconds, file_digest, recorded_state, resume, save_checkpoint, save_trained
from .schedule import check_seed, warmup_cosine
from .split import rows_in_datasets, scored_split

__all__ = ["FREE_SETTINGS", "LORA_CONFIG", "MICRO_BATCH", "SST2_NAME", "TRAIN_TASKS", "accumulate_grads", "last_logits", "train_sentiment",
           "sentiment_accuracy", "sentiment_out_dir"]

#: task → (training dataset, evaluation dataset, default output name, default n_train, default epochs);
#: the datasets give the template and label words (:data:`aieg_fast.datasets.DATASETS`).
TRAIN_TASKS = {
    "sst2": ("sst2-train", "sst2-dev", SST2_NAME, 16000, 1),
    "boolq": ("boolq-train", "boolq-heldout", "smollm2-boolq", None, 3),
}

#: task → default rows per forward/backward inside an optimizer step (gradient accumulation): BoolQ's
#: passages run to hundreds of tokens (1,304 at most); a whole batch of 16 was killed at 23.4 GB on a
#: 24 GB machine, pieces of 4 peaked at 19.2 GB (benchmarks/RESULTS.md). SST-2 runs its batch in one
#: piece (as the shipped adapter was made).
MICRO_BATCH = {"boolq": 4}

#: the LoRA settings of the shipped adapter.
LORA_CONFIG = {
    "r": 8, "lora_alpha": 16, "lora_dropout": 0.05,
    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}


def _encode(tok, texts: Sequence, template: str) -> List[List[int]]:
    """Token ids of each text (a str, or a mapping of template fields) placed in ``template``,
    encoded as :meth:`Explainer.encode` does."""
    return [list(tok(fill_template(t, template)[0], add_special_tokens=True)["input_ids"]) for t in texts]


def _label_ids(tok, labels: Sequence[str]) -> List[int]:
    ids = []
    for w in labels:
        t = tok.encode(w, add_special_tokens=False)
        if len(t) != 1:
            raise ValueError(f"labels: each label word must be one token, {w!r} is {len(t)} tokens")
        ids.append(t[0])
    return ids


def _batches(seqs: List[List[int]], batch_size: int, seed: int) -> List[List[int]]:
    """Index batches: a seeded shuffle, then sorting by length within windows of 50 batches
    (less padding), then a seeded shuffle of the batches."""
    rng = random.Random(seed)
    order = list(range(len(seqs)))
    rng.shuffle(order)
    window = 50 * batch_size
    out = []
    for s in range(0, len(order), window):
        chunk = sorted(order[s : s + window], key=lambda i: len(seqs[i]))
        out += [chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size)]
    rng.shuffle(out)
    return out


def last_logits(model, seqs: List[List[int]], pad_id: int) -> torch.Tensor:
    """The next-token logits at the last token of each sequence, as the LoRA recipe's loss and
    :func:`sentiment_accuracy` read them.

    Args:
        model: a Hugging Face causal LM whose forward takes ``logits_to_keep`` (transformers ≥ 5.15,
            the declared minimum).
        seqs: B token-id lists, each non-empty.
        pad_id: the id the batch is right-padded with.

    Returns:
        Tensor[B, V] logits (the model's dtype; V the vocabulary size).

    Raises:
        RuntimeError: the model's logits are not [B, K, V] for the K positions asked for.

    Only the distinct last positions of the rows go through the LM head, given as a 1-D index
    tensor (``logits_to_keep``), and each row takes its own: B × K × V floats for K distinct
    lengths (K ≤ B, small in batches grouped by length), never the B × L × V of every position.
    Every supported transformers release reads a 1-D tensor alike (``hidden[:, keep]``); a [B, 1]
    tensor, which 5.25 reads as one position per row, 5.15 read as positions for every row
    (logits [B, B, 1, V]: every row at the first row's last position). No attention mask is passed: with right padding and causal attention no
    real token attends to a pad (the pads come after it), so the logits read are those of each
    sequence alone (tests/training/test_training_accumulate.py compares them with the masked
    forward). Other errors are the model's own (e.g. an id outside the vocabulary)."""
    ids, mask = right_pad(seqs, pad_id)
    keep, row = torch.unique(mask.sum(1) - 1, return_inverse=True)  # the distinct last positions; each row's among them
    logits = model(input_ids=ids, logits_to_keep=keep).logits
    if logits.dim() != 3 or tuple(logits.shape[:2]) != (len(seqs), len(keep)):
        raise RuntimeError(f"last_logits: the model gave logits of shape {tuple(logits.shape)} for logits_to_keep of "
                           f"{len(keep)} positions; expected [{len(seqs)}, {len(keep)}, vocabulary]")
    return logits[torch.arange(len(seqs)), row]


def accumulate_grads(model, seqs: List[List[int]], targets: torch.Tensor, idx: List[int], micro: int, pad_id: int) -> float:
    """Backpropagate the batch's mean label cross-entropy in pieces (gradient accumulation).

    Args:
        model: as :func:`last_logits`, with gradients enabled on what is trained.
        seqs: all token-id lists of the training set; ``idx`` picks the batch.
        targets: Tensor[N] long, the label word's token id of every row of ``seqs``.
        idx: the batch's row indices. micro: rows per forward/backward (≥ 1). pad_id: as
            :func:`last_logits`.

    Returns:
        the batch's mean cross-entropy over the whole vocabulary at the last position (nats).

    Each piece's loss is its summed cross-entropy divided by the batch size, so the gradients
    the pieces leave in ``.grad`` (added to what is there) equal those of the whole batch's mean
    at once (up to float rounding; dropout draws differ).
    """
    loss = 0.0
    for k in range(0, len(idx), micro):
        part = idx[k : k + micro]
        piece = torch.nn.functional.cross_entropy(last_logits(model, [seqs[i] for i in part], pad_id), targets[part],
                                                  reduction="sum") / len(idx)
        piece.backward()
        loss += float(piece.detach())
    return loss


@torch.no_grad()
def sentiment_accuracy(model, tok, rows: Sequence[Tuple[object, int]], template: str = SENTIMENT_TEMPLATE,
                       labels: Sequence[str] = SENTIMENT_LABELS, batch_size: int = 32) -> float:
    """Share of ``rows`` whose label word has the highest logit of the label words at the end of
    ``template`` (the decision :mod:`aieg_fast.eval` scores).

    Args:
        model: a causal LM, as :func:`last_logits` takes it; run in eval mode (no dropout), its
            mode restored after.
        tok: its tokenizer (prompts encoded as :meth:`aieg_fast.Explainer.encode` does).
        rows: (text, label) pairs; a text may be a mapping of template fields (BoolQ's passage
            and question), a label is an index into ``labels``.
        template, labels: the prompt and the label words, one token each (default SST-2's).
        batch_size: prompts per forward, grouped by length.

    Returns:
        the accuracy, in [0, 1] (0.0 for no rows).

    Raises:
        ValueError: a label word that is not one token.
    """
    was_training = model.training
    model.eval()
    lab = _label_ids(tok, labels)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    seqs = _encode(tok, [t for t, _ in rows], template)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    correct = 0
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        pred = last_logits(model, [seqs[i] for i in idx], pad_id)[:, lab].argmax(-1)
        correct += int((pred == torch.tensor([rows[i][1] for i in idx])).sum())
    model.train(was_training)
    return correct / max(1, len(rows))


def _check(n_train, batch_size, lr, checkpoint_every, micro_batch_size, max_steps=None, n_dev=None, seed=0) -> None:
    """Refuse a count that is not a positive int (``max_steps`` and ``n_dev`` may be None), an
    ``lr`` that is not a finite positive number and a ``seed`` outside [0, :data:`~.schedule.MAX_SEED`]
    (ValueError naming the argument and the value)."""
    for name, v in (("n_train", n_train), ("batch_size", batch_size), ("checkpoint_every", checkpoint_every),
                    ("micro_batch_size", micro_batch_size), ("max_steps", max_steps), ("n_dev", n_dev)):
        if v is not None or name not in ("max_steps", "n_dev"):  # None: leave out (the message names no None)
            check_positive_int(name, v)
    check_number("lr", lr, 0.0, strict=True)
    check_seed(seed)


def sentiment_out_dir(task: str = "sst2", out_dir=None) -> Path:
    """The folder :func:`train_sentiment` writes to: ``out_dir``, else ``<cache>/<name>-train``
    (``smollm2-sst2-train``, ``smollm2-boolq-train``).

    Raises:
        ValueError: an unknown task.
    """
    if task not in TRAIN_TASKS:
        raise ValueError(f"task must be one of {list(TRAIN_TASKS)}, got {task!r}")
    return Path(out_dir) if out_dir is not None else cache_dir() / (TRAIN_TASKS[task][2] + "-train")


#: settings that may change between the runs of one training: pieces of any size give the batch's mean loss.
FREE_SETTINGS = ("micro_batch_size",)


def _task_rows(task: str, train_file, n_dev, n_train, epochs) -> tuple:
    """(train spec, train path, train rows, eval rows, split note, n_train, epochs, output name)
    of a task (the defaults of :data:`TRAIN_TASKS` filled in): rows are (text or field
    mapping, label) pairs. An ``n_train`` above the rows there are becomes their number (said
    on stderr).

    Raises:
        ValueError: an unknown task, an ``epochs`` that is not a positive int, a training file
            without rows, or a file given whose rows are all in the scored set.
    """
    if task not in TRAIN_TASKS:
        raise ValueError(f"task must be one of {list(TRAIN_TASKS)}, got {task!r}")
    train_name, eval_name, name, n_default, e_default = TRAIN_TASKS[task]
    epochs = e_default if epochs is None else epochs
    check_positive_int("epochs", epochs)
    spec = DATASETS[train_name]
    if train_file is not None and not Path(train_file).is_file():
        raise FileNotFoundError(f"train_file {str(train_file)!r} does not exist (or is not a file)")
    path = Path(train_file) if train_file is not None else dataset_path(train_name)  # $AIEG_FAST_DATA, else shipped
    recs = (replace(spec, parity=None) if train_file is not None else spec).records(path)  # a file of one's own: all rows
    if not recs:
        raise ValueError(f"train_file {str(path)!r} holds no rows")
    dev = DATASETS[eval_name].records(dataset_path(eval_name))
    recs, split = scored_split(recs, dev, path, train_file is not None, train_name, eval_name)
    n_train = n_default if n_train is None else n_train
    if n_train is not None and n_train > len(recs):
        print(f"note: n_train is {n_train} but {path.name} gives {len(recs)} training rows; all {len(recs)} are used "
              "(and recorded as n_train)", file=sys.stderr)
        n_train = len(recs)
    pairs = lambda rs: [(r["fields"]["text"] if list(r["fields"]) == ["text"] else r["fields"], r["label"]) for r in rs]  # noqa: E731
    return spec, path, pairs(recs), pairs(dev[:n_dev] if n_dev is not None else dev), split, n_train, epochs, name


def _settings(spec, train_path: Path, given: bool, task: str, n_train, batch_size: int, lr: float, seed: int, epochs: int) -> dict:
    """The settings a checkpoint must match to resume (and ``training.json`` records); a training
    file other than the shipped copy (given, or read from the data folder) is also known by the
    first 16 hex digits of its bytes' SHA-256."""
    settings = {"n_train": n_train, "batch_size": batch_size, "lr": lr, "seed": seed, "lora": LORA_CONFIG,
                "template": spec.template, "labels": list(spec.labels), "train_file": train_path.name}
    if given:  # only then, so checkpoints of the shipped file made before it was recorded resume
        settings["train_file_sha256"] = file_digest(train_path)
    if task != "sst2" or epochs != 1:  # only then, so SST-2 checkpoints made before tasks existed resume
        settings.update(task=task, epochs=epochs)
    return settings


def _stop_if_diverged(model, params, loss: float, step: int, out: Path, probe: Optional[tuple] = None) -> None:
    """Raise RuntimeError when the loss of ``step`` or a trained weight after it is inf or nan,
    or, given ``probe`` (token-id lists, pad id; before a checkpoint), when the weights give inf
    or nan logits on those rows (weights large but finite may, and a checkpoint must not keep them)."""
    what = None
    if not math.isfinite(loss):
        what = f"loss became {loss}"
    elif not all(bool(torch.isfinite(p).all()) for p in params):
        what = "the LoRA weights became inf or nan"
    elif probe is not None:
        model.eval()  # no dropout: the dropout stream of the training steps is left as it was
        with torch.no_grad():
            finite = bool(torch.isfinite(last_logits(model, *probe)).all())
        model.train()
        what = None if finite else "the logits became inf or nan"
    if what is None:
        return
    kept = (f"the checkpoint in {out / 'checkpoint'} is kept" if (out / "checkpoint" / "state.pt").is_file()
            else "no checkpoint was saved")
    raise RuntimeError(f"{what} at step {step}; lower lr (no adapter saved; {kept})")


def _train_steps(model, opt, sched, params, data: tuple, out: Path, settings: dict, resumed: tuple, stop: int,
                 checkpoint_every: int, progress: bool) -> Tuple[int, List[float], float]:
    """Optimizer steps from the resumed one to ``stop``, a checkpoint every ``checkpoint_every``
    steps and at ``stop``.

    Args:
        data: (token-id lists, label-word targets, index batches of every step, rows per piece, pad id).
        resumed: (step, losses per 10 steps, losses since the last of them, seconds trained before,
            the steps at which this training resumed, kept in each checkpoint).

    Returns:
        (step reached, losses per 10 steps, seconds trained in all).

    Raises:
        RuntimeError: the loss, the LoRA weights or (checked before each checkpoint) the logits
            became inf or nan (that step is not saved).
    """
    seqs, targets, batches, micro, pad_id = data
    step, losses, running, t_prev, resumed_at = resumed
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(batches), initial=step, desc="train-sentiment", unit="step", file=sys.stderr)
    t0 = time.perf_counter()
    model.train()
    torch.manual_seed(settings["seed"] + step)  # dropout stream, reproducible per resume point
    try:
        while step < stop:
            opt.zero_grad(set_to_none=True)
            loss = accumulate_grads(model, seqs, targets, batches[step], micro, pad_id)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            step += 1
            save = step % checkpoint_every == 0 or step == stop
            _stop_if_diverged(model, params, loss, step, out, ([seqs[i] for i in batches[step - 1][:micro]], pad_id) if save else None)
            running.append(loss)
            if step % 10 == 0 or step == len(batches):
                losses.append(sum(running) / len(running))
                running = []
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1] if losses else running[-1]:.3f}")
            if save:
                save_checkpoint(out, model, opt, sched, step, losses, running, settings, t_prev + time.perf_counter() - t0,
                                resumed_at)
    finally:
        if bar is not None:
            bar.close()
    return step, losses, t_prev + time.perf_counter() - t0


def train_sentiment(
    *,
    task: str = "sst2",
    out_dir=None,
    train_file=None,
    epochs: Optional[int] = None,
    n_train: Optional[int] = None,
    batch_size: int = 16,
    lr: float = 5e-4,
    seed: int = 0,
    checkpoint_every: int = 50,
    max_steps: Optional[int] = None,
    n_dev: Optional[int] = None,
    progress: bool = True,
    micro_batch_size: Optional[int] = None,
) -> Dict[str, object]:
    """Fine-tune the embedded SmolLM2-135M-Instruct on SST-2 (or BoolQ) with LoRA (module
    docstring: recipe).

    Args:
        task: ``"sst2"`` or ``"boolq"`` (:data:`TRAIN_TASKS`: the training and scored datasets,
            their template and label words).
        out_dir: where the adapter, ``training.json`` and the checkpoint go (default
            :func:`sentiment_out_dir`: ``<cache>/smollm2-sst2-train``, ``<cache>/smollm2-boolq-train``).
        train_file: the training rows in the task's format (default: the task's training set,
            SST-2 train or BoolQ's even half, from ``$AIEG_FAST_DATA`` when set, else the copy
            shipped with the package, as the scored set is found: :func:`aieg_fast.datasets.dataset_path`).
            Rows of a file given that are in the scored set are left out, said on stderr and
            counted in the split note (BoolQ: the same question, or the same ``idx`` and passage;
            SST-2: the same sentence; whitespace and case aside: :mod:`aieg_fast.training.split`).
        epochs: passes over the rows, each in its own seeded order (default 1 for SST-2, 3 for BoolQ).
        n_train: rows used, the first of a seeded shuffle of the train set (default 16,000 for
            SST-2, all 1,635 for BoolQ; more than there are: all, recorded as their number).
        batch_size, lr, seed: batches of this many rows; peak AdamW learning rate (finite, > 0);
            seed of the shuffle, LoRA initialisation and dropout, an int in [0, 2**32 - 1] (reseeded with ``seed + step``
            where a run resumes: its dropout draws differ from an uninterrupted run's, and
            ``training.json`` lists those steps in ``"resumed_at_steps"``).
        checkpoint_every: steps between checkpoints (resume on rerun).
        max_steps: stop after this many steps (≥ 1) in this call (the run resumes next call); None
            to finish.
        n_dev: score the first n (≥ 1) rows of the scored set at the end (default all: 872 SST-2
            dev sentences; the 1,635 of ``boolq-heldout``).
        micro_batch_size: rows per forward/backward inside a step, the gradients summed over the
            pieces (gradient accumulation: the same mean loss as the whole batch, at the memory of
            a piece); default :data:`MICRO_BATCH` of the task (4 for BoolQ), else the whole batch.
            It may change between the runs of one training (``training.json`` records the last).

    Returns:
        the contents of ``training.json`` when finished (``"finished": True``, ``"dev_accuracy"``
        on the scored set, ``"steps"``, ``"seconds"``, ``"losses"`` per 10 steps, ``"settings"``,
        ``"split"``: how the training rows were chosen, for BoolQ or a file given,
        ``"training_rows_in"``: the rows of each evaluation dataset of the task that are training
        rows, which ``evaluate`` reads to refuse a dataset the model was trained on), else a
        dict with ``"finished": False`` and the step reached.

    Raises:
        FileNotFoundError: ``train_file`` does not exist (named), or ``$AIEG_FAST_DATA`` is set
            and lacks the training or scored set's file.
        ValueError: a bad argument (named), a training file without rows, an ``out_dir`` that is
            not a writable folder, that another run holds (two runs on one folder at once would
            overwrite each other's checkpoint: the folder is held as ``evaluate`` holds its own,
            :func:`aieg_fast.runs.claim_folder`), or that holds a finished adapter or a checkpoint
            of other settings (each named, before the model loads), an unreadable checkpoint (named), or an
            adapter whose move into it stopped (names where the rest is).
        RuntimeError: the loss or the weights became inf or nan (no adapter saved; the last
            checkpoint kept).
        OSError: a file of the adapter could not be moved into ``out_dir`` (names the folder
            holding the rest: the loader and a rerun refuse ``out_dir`` until they are moved in).
        ImportError: ``peft`` is not installed.
    """
    epochs, n_train, batch_size, seed, checkpoint_every, max_steps, n_dev, micro_batch_size = map(  # a NumPy int as the int it holds
        as_int, (epochs, n_train, batch_size, seed, checkpoint_every, max_steps, n_dev, micro_batch_size))
    micro = MICRO_BATCH.get(task, batch_size) if micro_batch_size is None else micro_batch_size
    _check(1 if n_train is None else n_train, batch_size, lr, checkpoint_every, micro, max_steps, n_dev, seed)
    spec, train_path, rows, dev, split, n_train, epochs, name = _task_rows(task, train_file, n_dev, n_train, epochs)
    from peft import LoraConfig, get_peft_model

    with made_folder(sentiment_out_dir(task) if out_dir is None else out_dir, "out_dir") as out:  # held: a second run is refused
        settings = _settings(spec, train_path, train_path != SHIPPED_DATA_DIR / spec.shipped, task, n_train, batch_size, lr, seed, epochs)
        state = recorded_state(out, settings, FREE_SETTINGS)

        model, tok, _ = load_hf_model(None, dtype=torch.float32)
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        rng = random.Random(seed)
        pick = list(range(len(rows)))
        rng.shuffle(pick)
        rows = [rows[i] for i in pick[:n_train]]
        seqs = _encode(tok, [t for t, _ in rows], spec.template)
        lab = torch.tensor(_label_ids(tok, spec.labels))
        targets = lab[torch.tensor([y for _, y in rows])]
        batches = [b for e in range(epochs) for b in _batches(seqs, batch_size, seed + e)]

        torch.manual_seed(seed)
        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **LORA_CONFIG))
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        sched = warmup_cosine(opt, len(batches))
        step, losses, running = resume(state, model, opt, sched)
        resumed_at = list(state.get("resumed_at_steps", [])) if state is not None else []
        if 0 < step < len(batches):  # the dropout stream is reseeded here (seed + step): not that of an uninterrupted run
            resumed_at.append(step)
        stop = len(batches) if max_steps is None else min(len(batches), step + max_steps)
        step, losses, seconds = _train_steps(model, opt, sched, params, (seqs, targets, batches, micro, pad_id), out, settings,
                                             (step, losses, running, elapsed_seconds(out, step), resumed_at), stop,
                                             checkpoint_every, progress)
        if step < len(batches):
            return {"finished": False, "step": step, "steps": len(batches), "out_dir": str(out), "seconds": seconds}
        model.eval()
        acc = sentiment_accuracy(model, tok, dev, spec.template, spec.labels)
        record = {"finished": True, "out_dir": str(out), "dev_accuracy": acc, "n_dev": len(dev), "steps": len(batches),
                  "dev_dataset": TRAIN_TASKS[task][1], **({"split": split} if split else {}),
                  "training_rows_in": rows_in_datasets([t for t, _ in rows], spec),
                  "seconds": seconds, "losses_per_10_steps": losses, "resumed_at_steps": resumed_at, "settings": settings,
                  "micro_batch_size": micro, "trainable_parameters": sum(p.numel() for p in params), "torch": torch.__version__,
                  "threads": torch.get_num_threads()}
        save_trained(out, record, model, former_files=ADAPTER_FILES, left_out=["README.md"])  # whole or not at all
        return record
