"""The compiled path (``compile=True``): ``torch.compile`` of the decoder stack's forward, and
through AOTAutograd its backward, on the path chunks of IG, IDG and AIEG, for repeated calls.

What is compiled is the smallest piece that holds the model's work for a chunk: the decoder
stack from the input embeddings to the final hidden states read at the predicting positions
(:func:`stack_at`). F itself (the target's row of the output head, the log-softmax of a label
set, a user's callable) stays eager: it is a few vector products, and keeping it out means one
compiled graph serves every target function.

Shapes are static (``dynamic=False``) and bounded:

* the length L is rounded up to a multiple of :data:`LENGTH_BUCKET` (at most the model's
  positions) by appending positions after the text. A decoder is causal, so a position never
  sees the ones after it: the final hidden state at the predicting position, and the gradient
  with respect to every real position, are those of the unpadded input (the appended rows'
  outputs are not read, so nothing flows back from them). The appended positions copy the last
  input row (finite values, no link to autograd) and are masked out where the batch has a mask.
* the rows per chunk are :func:`chunk_rows`: full chunks of ``ctx.chunk`` points, and the rest
  rounded up to a power of two by repeating its last point (results discarded), so at most
  1 + ⌈log2 chunk⌉ row counts ever occur.

One graph is compiled per (rows, length bucket, points read per row, masked or not, gradient or
not); a second length in the same bucket reuses it. The first run of each graph, compilation
included, is timed and reported in the result (``info["compile_seconds"]``) and logged once
(logger ``aieg_fast.core.compiled``, level INFO). The chunk size is computed from the bucketed
length, so lengths of one bucket also share it. A change Dynamo guards on (another model, another
attention implementation) compiles a new graph. Saliency, input×gradient, the
attention methods and generation do not use path chunks and stay eager. Tested on the GPT-2 and
LLaMA families (``tests/core/test_compiled.py``) and on SmolLM2 (``benchmarks/bench_compile.py``:
0.88× the eager lower bound at L = 128 on a 2-core CPU); the other families go through the same
``hidden_states`` but have not been compiled in the tests.

Source: PyTorch 2 (Ansel et al., ASPLOS 2024) for TorchDynamo, AOTAutograd and TorchInductor.
"""
from __future__ import annotations

import logging
import time
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

__all__ = ["LENGTH_BUCKET", "CompiledStack", "check_compile", "compile_backend", "compiled_stack", "compile_report", "bucket_length",
           "chunk_rows", "stack_at"]

#: the length L of a compiled chunk is rounded up to a multiple of this
LENGTH_BUCKET = 16
#: most graphs kept for one compiled function (torch's default of 8 would fall back to eager
#: after a few length buckets)
MAX_GRAPHS = 256

logger = logging.getLogger(__name__)


def check_compile(compile) -> None:
    """``compile`` must be False, True (the default backend, ``"inductor"``), the name of a
    ``torch.compile`` backend (``torch.compiler.list_backends(exclude_tags=())``) or None (a
    caller's default).

    Raises:
        ValueError: another value, naming it and the backends there are.
    """
    if compile is None or isinstance(compile, bool):
        return
    backends = torch.compiler.list_backends(exclude_tags=())
    if not isinstance(compile, str) or compile not in backends:
        raise ValueError(f"compile must be True, False or a torch.compile backend name {backends}, got {compile!r}")


def compile_backend(compile) -> Optional[str]:
    """The backend name of a checked ``compile`` value, or None for False / None (eager)."""
    if compile is None or compile is False:
        return None
    return "inductor" if compile is True else compile


def bucket_length(L: int, max_positions: int) -> int:
    """L rounded up to a multiple of :data:`LENGTH_BUCKET`, but not past ``max_positions``."""
    return max(L, min(-(-L // LENGTH_BUCKET) * LENGTH_BUCKET, max_positions))


def chunk_rows(total: int, chunk: int) -> List[Tuple[int, int, int]]:
    """The chunks of ``total`` path points: (start, stop, rows run) with ``stop − start`` points
    of which ``rows`` go through the model: ``chunk`` for full chunks, the rest rounded up to a
    power of two (never above ``chunk``)."""
    out = []
    for s in range(0, total, chunk):
        n = min(chunk, total - s)
        out.append((s, s + n, n if n == chunk else min(chunk, 1 << (n - 1).bit_length())))
    return out


def stack_at(adapter, X: Tensor, mask: Optional[Tensor], pos: Optional[Tensor], q: Tensor) -> Tensor:
    """Final hidden states of the decoder stack read at positions ``q``.

    Args:
        adapter: the model's :class:`~aieg_fast.models.DecoderAdapter`.
        X: Tensor[n, L, d] input embeddings. mask, pos: Tensor[n, L] long attention mask and
            position ids, or both None (unpadded rows, positions 0…L−1). q: Tensor[n, T] long.

    Returns:
        Tensor[n, T, D].
    """
    h = adapter.hidden_states(X, mask, pos)
    return h.gather(1, q.unsqueeze(-1).expand(*q.shape, h.shape[-1]))


def _pad(t: Tensor, rows: int, length: Optional[int] = None, fill=None) -> Tensor:
    """``t`` [n, L, ...] with its last row repeated up to ``rows`` rows and, along dimension 1,
    its last column repeated (or ``fill``) up to ``length``; detached padding."""
    if length is not None and length > t.shape[1]:
        extra = t[:, -1:].detach() if fill is None else torch.full_like(t[:, -1:], fill)
        t = torch.cat([t, extra.expand(-1, length - t.shape[1], *t.shape[2:])], 1)
    if rows > t.shape[0]:
        t = torch.cat([t, t[-1:].detach().expand(rows - t.shape[0], *t.shape[1:])], 0)
    return t


class CompiledStack:
    """:func:`stack_at` under ``torch.compile(backend=..., dynamic=False)`` for one model.

    One per (explainer, backend), made on first use and kept (the compiled graphs live as long
    as the explainer). Calls on one model run one at a time (the model lock), so the graphs
    are never compiled twice concurrently.

    Attributes:
        adapter: the model's adapter. backend: the ``torch.compile`` backend name.
        first_runs: seconds of the first run of each compiled graph (compilation included),
            by key (rows, length bucket, T, masked, gradient).
    """

    def __init__(self, adapter, backend: str):
        self.adapter = adapter
        self.backend = backend
        self.first_runs: Dict[tuple, float] = {}
        self._fn = torch.compile(stack_at, backend=backend, dynamic=False)

    def hidden(self, X: Tensor, mask: Optional[Tensor], pos: Optional[Tensor], q: Tensor) -> Tensor:
        """:func:`stack_at` compiled, on inputs already padded to a compiled shape (gradients
        flow back to X when it requires them): Tensor[n, T, D]."""
        with torch._dynamo.config.patch(recompile_limit=MAX_GRAPHS):  # torch's default of 8 graphs per function
            return self._fn(self.adapter, X, mask, pos, q)

    def bucket(self, L: int) -> int:
        """The compiled length of an input of length L (:func:`bucket_length`)."""
        switch = self.adapter.rope_switch  # padding past it would change a LongRoPE model's rotary factors
        return bucket_length(L, self.adapter.max_positions if switch is None or L > switch else min(switch, self.adapter.max_positions))

    def forward(self, ctx, rows: Optional[Tensor], X: Tensor, n_rows: int, need_grad: bool):
        """F of each row of X [n, L, d] (and ∂F/∂X when ``need_grad``) through the compiled stack,
        X padded to ``n_rows`` rows and the bucketed length; ``rows`` [n] names each row's
        example (None when B = 1). Records the call's graphs in ``ctx.compile_report``.

        Returns:
            (F Tensor[n] float32 detached, grads Tensor[n, L, d] or None)
        """
        n, L, _ = X.shape
        Lb = self.bucket(L)
        mask, pos, q = ctx.read_positions(rows, n)
        if mask is not None:
            mask = _pad(mask, n_rows, Lb, fill=0)
            pos = _pad(pos, n_rows)
            pos = torch.cat([pos, pos[:, -1:] + torch.arange(1, Lb - L + 1, device=pos.device)], 1) if Lb > L else pos
        key = (n_rows, Lb, q.shape[1], mask is not None, need_grad)
        report = ctx.compile_report
        t0 = time.perf_counter()
        if need_grad:
            X.requires_grad_(True)
        with torch.set_grad_enabled(need_grad):
            h = self.hidden(_pad(X, n_rows, Lb), mask, pos, _pad(q, n_rows))[:n]
            f = ctx.score(h if ctx.step_ids is not None else h[:, 0], rows)
            g = torch.autograd.grad(f.sum(), X)[0] if need_grad else None
        if key not in self.first_runs:
            self.first_runs[key] = s = time.perf_counter() - t0
            report["compile_seconds"] += s
            logger.info("aieg_fast compiled path (%s): %d rows × %d positions, %s, compiled and run in %.1f s",
                        self.backend, n_rows, Lb, "forward + backward" if need_grad else "forward", s)
        if list(key) not in report["graphs"]:
            report["graphs"].append(list(key))
        return f.detach(), g


def compiled_stack(cache: Dict[str, CompiledStack], adapter, compile) -> Optional[CompiledStack]:
    """The :class:`CompiledStack` of a checked ``compile`` value from ``cache`` (backend name →
    stack; made on first use and kept there), or None for eager."""
    backend = compile_backend(compile)
    if backend is not None and backend not in cache:
        cache[backend] = CompiledStack(adapter, backend)
    return None if backend is None else cache[backend]


def compile_report(ctx) -> Dict[str, object]:
    """What a result's ``info`` records of the compiled path: ``compiled`` (whether compiled
    graphs ran), ``compile_backend`` and ``compile_seconds`` (first runs of new graphs in this
    call, compilation included; 0.0 when every graph was compiled before); {} when the call
    was eager."""
    if ctx.compiled is None:
        return {}
    rep = ctx.compile_report
    return {"compiled": bool(rep["graphs"]), "compile_backend": ctx.compiled.backend, "compile_seconds": rep["compile_seconds"]}
