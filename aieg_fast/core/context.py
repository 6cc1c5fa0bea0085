"""``Context``: everything a method receives for one call, in place of plumbing keywords."""
from __future__ import annotations

import contextlib
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence

import torch
from torch import Tensor

from .. import ops
from .batch import Batch
from .capture import AttentionCapture
from .compiled import stack_at
from .model_state import model_prepared
from .objective import LabelSet, predicted, target_scores
from .path import chunk_size
from .vjp import sequence_scores

__all__ = ["Context", "SequenceContext", "progress_bar", "run_method", "shared_paths"]

class _Same:
    """A key part equal only to the same object (held, so its id stays its own); strings, None
    and a label set (a frozen value: the same labels are the same F) compare by value."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def _by_value(self) -> bool:
        return isinstance(self.obj, (str, LabelSet)) or self.obj is None

    def __hash__(self):
        return hash(self.obj) if self._by_value() else id(self.obj)

    def __eq__(self, other):
        if not isinstance(other, _Same):
            return NotImplemented
        if self._by_value():
            return type(self.obj) is type(other.obj) and self.obj == other.obj
        return self.obj is other.obj


@contextlib.contextmanager
def shared_paths(owner):
    """Within the block, calls of ``owner`` (an :class:`~aieg_fast.Explainer`) on the same input
    share their path computations where a method allows it: AIEG variants that differ only after
    the path (``posnorm``, ``posnorm_stage``, ``final_norm``, the ``attn_*`` options) run the
    pilot and the gradient pass once and reuse them; the scores are the same tensors as separate
    calls give. Used by :func:`aieg_fast.eval.evaluate` for the methods of one example.

    The memo is ``owner._path_memo`` (passed to each :class:`Context` as ``path_memo``); a
    result is keyed by the model object and the call's inputs (:meth:`Context.memo_key`), not by
    the weights, so the model must not change inside the block. Nested blocks share the outer
    memo; it is dropped when the outermost block ends.
    """
    if owner._path_memo is not None:
        yield
        return
    owner._path_memo = {}
    try:
        yield
    finally:
        owner._path_memo = None


@dataclass
class Context:
    """One attribution call: the model's adapter, the batch, the targets and the call settings.

    A method reads its inputs here and calls the helpers below for forwards; nothing else is
    passed to it. ``targets`` holds −1 for examples whose target is the model's prediction until
    a forward fills them (:meth:`fill_targets`); the caller reads the filled targets afterwards.

    Attributes:
        adapter: the :class:`~aieg_fast.models.DecoderAdapter`. batch: the :class:`Batch`.
        targets: Tensor[B] long. n_steps: path steps M. internal_batch_size / max_memory: the
        chunk settings (:attr:`chunk`). target_fn: ``"logit"`` / ``"logprob"`` / ``"prob"``, a
        :class:`~aieg_fast.core.objective.LabelSet` or a callable (:mod:`~aieg_fast.core.objective`).
        contrast: Tensor[B] long contrast token ids (F = z_t − z_c), or None. backend: kernel backend. ref_token_id: the baseline token. timing: seconds per phase
        (filled by the method). progress: a tqdm-like bar or None. pilot_logits: per example
        Tensor[N] pilot logits already computed by the caller (generation shares one pilot pass).
        compiled: a :class:`~aieg_fast.core.compiled.CompiledStack` that runs the path chunks
        (``compile=True``), or None (eager); compile_report: what it did in this call.
        path_memo: a dict shared by the calls of one :meth:`Explainer.shared_paths` block, where
        a method keeps path results that other calls on the same input may reuse
        (:meth:`memo_key`); None outside such a block.
    """

    adapter: Any
    batch: Batch
    targets: Tensor
    #: path steps M, or ``"auto"`` (chosen by accuracy: :attr:`tolerance`, :attr:`max_steps`)
    n_steps: Any = 50
    internal_batch_size: Optional[int] = None
    max_memory: Any = None
    target_fn: Any = "logit"
    backend: str = "auto"
    ref_token_id: int = 0
    contrast: Optional[Tensor] = None
    #: Tensor[B, T] long: a multi-token target y_1…y_T teacher-forced after each text (the batch
    #: holds text ⊕ y_<T, the y fixed); F = Σ_t log p(y_t | text ⊕ y_<t). None: one target token.
    step_ids: Optional[Tensor] = None
    timing: Dict[str, float] = field(default_factory=dict)
    progress: Any = None
    pilot_logits: Optional[Sequence[Tensor]] = None
    #: Tensor[B, V] the model's output distribution on the inputs, when a forward computed all
    #: logits anyway (a predicted target, the reference forward); None otherwise
    probs: Optional[Tensor] = None
    #: Tensor[B, L] long: the word index of each position (−1 where fixed), filled by the caller
    #: for methods whose ``needs_words`` is true; None otherwise
    word_ids: Optional[Tensor] = None
    #: with ``n_steps="auto"``: the relative completeness error to reach and the most path
    #: points per example (None: the defaults of :mod:`~aieg_fast.core.adaptive_quadrature`)
    tolerance: Optional[float] = None
    max_steps: Optional[int] = None
    compiled: Any = None
    #: the compiled graphs this call ran (keys of ``CompiledStack.first_runs``) and the seconds
    #: of the first runs among them (compilation included)
    compile_report: Dict[str, Any] = field(default_factory=lambda: {"compile_seconds": 0.0, "graphs": []})
    path_memo: Optional[Dict[tuple, Any]] = None
    _chunk: Optional[int] = field(default=None, repr=False)

    @property
    def model(self):
        return self.adapter.model

    @property
    def device(self) -> torch.device:
        return self.batch.ids.device

    @property
    def chunk(self) -> int:
        """Path points per forward/backward (computed once per call; from the bucketed length on
        the compiled path, so that lengths of one bucket run chunks of one size)."""
        if self._chunk is None:
            L = self.batch.ids.shape[1]
            L = L if self.compiled is None else self.compiled.bucket(L)
            self._chunk = chunk_size(self.adapter, L, self.internal_batch_size, self.max_memory)
        return self._chunk

    def memo_key(self, *parts) -> tuple:
        """Key of a path result in :attr:`path_memo`: ``parts`` (the method's options that shape
        the path) and a fingerprint of everything in this call that does: the model object, the
        batch's ids, mask, fixed positions, embeddings and baseline (bytes), the targets, contrast
        and multi-token ids, F, the steps, the chunk size, the backend and the compiled stack.
        Objects (the model, F, the compiled stack) key by identity and are held by the key, so
        a freed object's address cannot be taken for it by a new one."""
        h = hashlib.sha1()
        b = self.batch
        for t in (b.ids, b.attention_mask, b.fixed, b.embeds, b.baseline, self.targets, self.contrast, self.step_ids):
            if t is None:
                h.update(b"none")
                continue
            t = t.detach().contiguous().cpu()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        return (_Same(self.adapter.model), h.hexdigest(), _Same(self.target_fn), self.n_steps, self.chunk, self.backend,
                _Same(self.compiled), parts)

    @contextlib.contextmanager
    def timed(self, phase: str):
        """Add the seconds spent in the block to ``timing[phase]`` (set, not accumulated)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timing[phase] = time.perf_counter() - t

    def advance(self, n: int) -> None:
        """Move the progress bar by ``n`` path points."""
        if self.progress is not None:
            self.progress.update(n)

    # ------------------------------------------------------------------ forwards
    def read_positions(self, rows: Optional[Tensor], n: int):
        """What the model needs for ``n`` rows of examples ``rows`` [n] (None: B = 1): (attention
        mask Tensor[n, L], position ids Tensor[n, L]), both None for an unpadded batch, and the
        positions read, Tensor[n, T] long (T = 1, or the T predicting positions of a multi-token
        target)."""
        b = self.batch
        T = 1 if self.step_ids is None else self.step_ids.shape[1]
        rows = torch.zeros(n, dtype=torch.long, device=self.device) if rows is None else rows
        mask, pos = (None, None) if b.plain else (b.attention_mask[rows], b.position_ids[rows])
        q = b.last_index[rows].view(-1, 1) - (T - 1) + torch.arange(T, device=self.device).view(1, -1)
        return mask, pos, q

    def hidden(self, rows: Optional[Tensor], embeds: Tensor) -> Tensor:
        """Final hidden state at the predicting position of each row of ``embeds`` [n, L, d]:
        Tensor[n, D] (Tensor[n, T, D] at the T predicting positions of a multi-token target);
        ``rows`` [n] names each row's example (ignored for an unpadded batch)."""
        b = self.batch
        if self.step_ids is not None:
            return stack_at(self.adapter, embeds, *self.read_positions(rows, embeds.shape[0]))
        if b.plain:  # no per-chunk mask, positions or last-index gathers
            return self.adapter.hidden_last(embeds, None, None, None)
        return self.adapter.hidden_last(embeds, b.attention_mask[rows], b.position_ids[rows], b.last_index[rows])

    def score(self, hidden: Tensor, rows: Optional[Tensor] = None) -> Tensor:
        """F (:func:`~aieg_fast.core.objective.target_scores`) of final hidden states [n, D];
        ``rows`` [n] names each row's example (None: the rows are the examples, or B = 1)."""
        if self.step_ids is not None:  # Σ_t log p(y_t | text ⊕ y_<t)
            n, T, D = hidden.shape
            y = self.step_ids[rows] if rows is not None else self.step_ids.expand(n, T)
            return target_scores(self.adapter, hidden.reshape(n * T, D), y.reshape(-1), "logprob").view(n, T).sum(-1)
        t, c = self.targets, self.contrast
        if rows is not None and self.batch.B > 1:  # with B = 1 one target broadcasts
            t = t[rows]
            c = None if c is None else c[rows]
        return target_scores(self.adapter, hidden, t, self.target_fn, c).float()

    def F(self, rows: Optional[Tensor], embeds: Tensor) -> Tensor:
        """F of each row of ``embeds``; ``rows`` [n] names each row's example (None when B = 1)."""
        return self.score(self.hidden(rows, embeds), rows)

    def all_rows(self) -> Tensor:
        return torch.arange(self.batch.B, device=self.device)

    def fill_targets(self, hidden: Tensor) -> Optional[Tensor]:
        """Set missing targets (−1) to the model's prediction from final hidden states [B, D],
        and ``probs`` (the output distribution, for p(target)); returns the float32 logits
        [B, V]. Nothing (None) for multi-token targets (given, and p = exp F)."""
        if self.step_ids is not None:
            return None
        with torch.no_grad():
            logits = self.adapter.full_logits(hidden.detach()).float()
        self.probs = torch.softmax(logits, -1)
        missing = self.targets < 0
        if bool(missing.any()):
            self.targets = torch.where(missing, predicted(logits, self.target_fn), self.targets)
        return logits

    def ensure_targets(self) -> None:
        """One no-grad forward on the inputs, only when some target is missing (the prediction)."""
        if bool((self.targets < 0).any()):
            self.ensure_probs()

    def ensure_probs(self) -> None:
        """One no-grad forward on the inputs when no forward of the call gave ``probs`` (a method
        whose path scores only the given target: IG, IDG), so that every method reports
        p(target); it also fills missing targets. Nothing for multi-token targets."""
        if self.probs is None and self.step_ids is None:
            with self.timed("predict"), torch.no_grad():
                self.fill_targets(self.hidden(self.all_rows(), self.batch.embeds))

    def reference_forward(self, attn_layers: Optional[Sequence[int]] = None, full: bool = False, baseline: bool = True):
        """One no-grad forward on the inputs (and the baselines when ``baseline``): the prediction
        and ``probs`` (:meth:`fill_targets`), F(x), F(x′) and the attention of ``attn_layers`` at α = 1.

        Returns:
            dict with ``F_input`` Tensor[B], ``F_baseline`` Tensor[B] or None, ``probs``
            Tensor[B, V] (None for multi-token targets), ``attn`` (layer → captured rows /
            matrices) or None.
        """
        with self.timed("reference_forward"):
            b = self.batch
            B = b.B
            rows = self.all_rows()
            r2 = torch.cat([rows, rows]) if baseline else rows
            with contextlib.ExitStack() as stack:
                cap = None
                if attn_layers:
                    cap = stack.enter_context(AttentionCapture(self.adapter, attn_layers, full=full))
                    cap.last_index = b.last_index[r2]
                with torch.no_grad():
                    X = torch.cat([b.embeds, b.baseline], 0) if baseline else b.embeds
                    h = self.hidden(r2, X)
                    self.fill_targets(h[:B])
                    F = self.score(h, r2)
                attn = None
                if cap is not None:
                    attn = {l: (v[:B] if v is not None else None) for l, v in cap.pop().items()}
        return {"F_input": F[:B], "F_baseline": F[B:] if baseline else None, "probs": self.probs, "attn": attn}

    def gradient_at_input(self):
        """∂F/∂E at the input from one forward and one backward; missing targets are filled from
        the same forward (no separate prediction pass). Returns (grad [B, L, d], F [B])."""
        X = self.batch.embeds.clone().requires_grad_(True)
        with torch.enable_grad():
            h = self.hidden(self.all_rows(), X)
            self.fill_targets(h)
            f = self.score(h)
            (g,) = torch.autograd.grad(f.sum(), X)
        return g, f.detach()


@dataclass
class SequenceContext:
    """One generated sequence explained step by step from shared forwards (generation).

    Attributes:
        adapter: the model's adapter. seq: a one-row unpadded :class:`Batch` (prompt ⊕ y_<T).
        positions: Tensor[T] long, the predicting position q_t of step t. step_targets:
        Tensor[T] long, the target y_t. n_steps, chunk, target_fn, backend, progress: as in
        :class:`Context` (``chunk`` already resolved). timing: seconds per phase.
    """

    adapter: Any
    seq: Batch
    positions: Tensor
    step_targets: Tensor
    n_steps: int
    chunk: int
    target_fn: Any = "logit"
    backend: str = "auto"
    timing: Dict[str, float] = field(default_factory=dict)
    progress: Any = None
    #: Tensor[1] long, a contrast token subtracted at every step (F_t = z_{y_t} − z_c), or None
    contrast: Optional[Tensor] = None
    #: Tensor[1, L] long: the word index of each position (−1 where fixed), as :class:`Context`
    word_ids: Optional[Tensor] = None
    #: Tensor[T, D]: the final hidden states of the sequence itself (α = 1, nothing masked) at
    #: the predicting positions, kept (detached) by a method's forward on it (:meth:`scores` with
    #: ``input_row``); the caller reads each step's probability from them instead of running a
    #: forward of its own. None until then.
    input_hidden: Optional[Tensor] = None

    @property
    def model(self):
        return self.adapter.model

    @property
    def device(self) -> torch.device:
        return self.seq.ids.device

    @property
    def T(self) -> int:
        return self.positions.numel()

    def advance(self, n: int) -> None:
        if self.progress is not None:
            self.progress.update(n)

    def scores(self, X: Tensor, input_row: Optional[int] = None) -> Tensor:
        """F of every step for each row of X [c, L, d]: Tensor[c, T] (:func:`~aieg_fast.core.vjp.sequence_scores`).
        ``input_row``: the row of X that is the sequence itself (its embeddings unchanged), whose
        hidden states at the predicting positions are kept in :attr:`input_hidden`."""
        if input_row is None:
            return sequence_scores(self.adapter, X, self.positions, self.step_targets, self.target_fn, self.contrast)
        F, h = sequence_scores(self.adapter, X, self.positions, self.step_targets, self.target_fn, self.contrast, return_hidden=True)
        self.input_hidden = h[input_row].detach()
        return F


def run_method(method, ctx, opts, sequence: bool = False, probs: bool = True):
    """Run ``method.run(ctx, opts)`` (or ``run_sequence`` when ``sequence``) with the model
    prepared (eval mode, frozen parameters; restored afterwards) and the kernel backends
    recorded (:func:`aieg_fast.ops.recording`). The one place methods are invoked.

    A method that makes no forward of its own (one that reads only the inputs, or a random
    control) leaves the prediction to this function: the missing targets are filled after it
    runs, so its results name the token they explain; so is ``ctx.probs`` (p(target)) where
    the method's forwards did not give it (:meth:`Context.ensure_probs`), unless ``probs`` is
    False (a generation's steps, whose probabilities come from their own forward). Held-fixed
    positions get 0 here, as the method contract says, also where the method's arithmetic gave
    NaN there (a non-finite F).

    Returns:
        (the method's output, {op: backend that ran})

    Raises:
        TypeError / ValueError: the output is not what a method returns (names the method, what
            was expected and what was received; a user's registered method meets this first).
    """
    with model_prepared(ctx.model), ops.recording() as used:
        out = method.run_sequence(ctx, opts) if sequence else method.run(ctx, opts)
        _check_output(method, out, None if sequence else ctx.batch)
        if not sequence:  # a generated sequence's targets are its tokens
            ctx.ensure_probs() if probs else ctx.ensure_targets()
            # held-fixed positions score 0 whatever the arithmetic gave (Δ = 0 times a NaN gradient is NaN)
            out.scores = [sc.masked_fill(ctx.batch.fixed[b].to(sc.device), 0.0) for b, sc in enumerate(out.scores)]
    return out, dict(used)


def _check_output(method, out, batch) -> None:
    """Refuse an output without ``scores`` of 1-D tensors (and, for ``run``, one Tensor[L] per
    row of ``batch``, L its padded length)."""
    name = getattr(method, "name", type(method).__name__)
    scores = getattr(out, "scores", None)
    if scores is None or not isinstance(getattr(out, "options", {}), dict) or not isinstance(getattr(out, "info", {}), dict):
        raise TypeError(f"method {name!r} returned {type(out).__name__}; a method returns a MethodOutput "
                        "(scores: one Tensor[L] per example, options and info dicts)")
    bad = [i for i, sc in enumerate(scores) if not torch.is_tensor(sc) or sc.dim() != 1]
    if bad:
        sc = scores[bad[0]]
        got = f"a tensor of shape {tuple(sc.shape)}" if torch.is_tensor(sc) else type(sc).__name__
        raise TypeError(f"method {name!r}: scores[{bad[0]}] is {got}; each score entry must be a 1-D Tensor[L]")
    if batch is not None:
        L = batch.ids.shape[1]
        if len(scores) != batch.B or any(sc.shape[0] != L for sc in scores):
            raise ValueError(f"method {name!r} returned {len(scores)} score tensor(s) of length(s) "
                             f"{sorted({int(sc.shape[0]) for sc in scores})}; expected {batch.B} (one per example) of "
                             f"length {L} (the padded batch: ctx.batch.ids.shape[1])")


class _FirstMoveBar:
    """A tqdm bar drawn at its first :meth:`update` only: a call whose method moves no bar (one
    pass: saliency, input × gradient, attention) draws none, and a method a user registers that
    moves one (``ctx.advance``) draws it without declaring anything. The rest of tqdm's interface
    (``set_postfix``, ``total = n``, ``refresh``...) reaches the bar, drawn at that use."""

    def __init__(self, **kwargs):
        object.__setattr__(self, "kwargs", kwargs)
        object.__setattr__(self, "bar", None)

    def _drawn(self):
        if self.bar is None:
            from tqdm.auto import tqdm

            object.__setattr__(self, "bar", tqdm(**self.kwargs))
        return self.bar

    def update(self, n: int = 1) -> None:
        self._drawn().update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __getattr__(self, name):  # what the class does not define: tqdm's (a "tqdm-like bar", Context.progress)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._drawn(), name)

    def __setattr__(self, name, value):
        setattr(self._drawn(), name, value)


@contextlib.contextmanager
def progress_bar(enabled: bool, desc: str, total: Optional[int] = None, unit: str = "pt", leave: bool = False,
                 on_first_move: bool = False):
    """A tqdm progress bar (closed on exit), or None when not ``enabled``: by default over path
    points, left off the screen when done; ``total``, ``unit`` and ``leave`` as tqdm's;
    ``on_first_move``: drawn at its first ``update`` only (:class:`_FirstMoveBar`)."""
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm

    kwargs = dict(desc=desc, total=total, unit=unit, leave=leave)
    bar = _FirstMoveBar(**kwargs) if on_first_move else tqdm(**kwargs)
    try:
        yield bar
    finally:
        bar.close()
