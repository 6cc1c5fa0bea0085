"""Hook capture on the points a model adapter declares; hooks are always removed on close.

* :class:`AttentionCapture` — attention probabilities of chosen layers (eager attention);
* :class:`ProjectionCapture` — q/k/v projections (before RoPE), the attention output as a
  differentiable tensor (after or before the output projection) and the RoPE tables;
* :class:`ResidualCapture` — the residual stream entering chosen blocks (before their norm);
* :class:`ResidualInput` — the residual stream entering one block, replaced by a given tensor
  (derivatives with respect to it run through the top blocks only).

All are context managers: ``with AttentionCapture(adapter, layers) as cap: ...``.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch
from torch import Tensor

__all__ = ["AttentionCapture", "ProjectionCapture", "ResidualCapture", "ResidualInput"]


class _Hooks:
    """Holds hook handles; :meth:`close` removes them (also on exceptions in ``__init__``)."""

    def __init__(self):
        self.handles = []

    def close(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class AttentionCapture(_Hooks):
    """Forward hooks that keep the attention probabilities of chosen layers.

    Keeps, per call, ``captured[layer]``: Tensor[B, H, K] — the query row at ``last_index`` —
    or the full matrix [B, H, Q, K] when ``full=True`` (rollout, per-step rows). Needs eager
    attention (the model returns the probabilities only then; see
    :func:`~aieg_fast.core.model_state.model_prepared`).

    Args:
        adapter: the model's adapter (its ``attn_modules``).
        layers: layer indices.
        full: keep the full matrices instead of the ``last_index`` rows.
        keep_graph: keep the probabilities in the autograd graph (for ∂F/∂A).
    """

    def __init__(self, adapter, layers: Sequence[int], full: bool = False, keep_graph: bool = False):
        super().__init__()
        self.layers = list(layers)
        self.full = full
        self.keep_graph = keep_graph
        self.last_index: Optional[Tensor] = None
        self.captured: Dict[int, List[Tensor]] = {l: [] for l in self.layers}
        try:
            for l in self.layers:
                self.handles.append(adapter.attn_modules[l].register_forward_hook(self._make_hook(l)))
        except BaseException:
            self.close()
            raise

    def _make_hook(self, layer):
        def hook(module, inputs, output):
            w = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if w is None:
                raise RuntimeError(
                    "attention probabilities were not returned by the model; aieg_fast switches to "
                    "eager attention for this, which failed for this architecture"
                )
            if not self.keep_graph:
                w = w.detach()
            if self.full:
                self.captured[layer].append(w)
            else:
                idx = self.last_index.to(w.device)
                self.captured[layer].append(w[torch.arange(w.shape[0], device=w.device), :, idx, :])

        return hook

    def pop(self) -> Dict[int, Optional[Tensor]]:
        """The captures since the last pop, per layer (concatenated over forwards)."""
        # a single capture is returned as is, so it stays the tensor in the autograd graph
        out = {l: (v[0] if len(v) == 1 else torch.cat(v, 0)) if v else None for l, v in self.captured.items()}
        self.captured = {l: [] for l in self.layers}
        return out


class ProjectionCapture(_Hooks):
    """Hooks on chosen layers: q/k/v projections, the attention output A (differentiable), RoPE.

    ``q[l], k[l], v[l]``: Tensor[B, L, width] (detached, before RoPE), read where the adapter's
    ``qkv_points`` say; ``A[l]``: the tensor the gradient is taken with respect to — the
    attention module's output (``grad_source="post_o"``) or the input of its output projection
    (``"pre_o"``); ``pe[l]``: (cos, sin) of the layer, when ``need_rope``.
    """

    def __init__(self, adapter, layers: Sequence[int], grad_source: str, need_rope: bool):
        super().__init__()
        self.adapter = adapter
        self.q: Dict[int, Tensor] = {}
        self.k: Dict[int, Tensor] = {}
        self.v: Dict[int, Tensor] = {}
        self.A: Dict[int, Tensor] = {}
        self.pe: Dict[int, tuple] = {}
        self.v_point: Dict[int, tuple] = {}
        try:
            for l in layers:
                for module, reader in adapter.qkv_points(l):
                    self.handles.append(module.register_forward_hook(self._qkv_hook(l, reader)))
                if need_rope:
                    self.handles.append(adapter.attn_modules[l].register_forward_pre_hook(self._pe_hook(l), with_kwargs=True))
                if grad_source == "post_o":
                    self.handles.append(adapter.attn_modules[l].register_forward_hook(self._post_o_hook(l)))
                elif grad_source == "pre_o":
                    self.handles.append(adapter.o_proj(l).register_forward_pre_hook(self._pre_o_hook(l)))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _differentiable(x: Tensor) -> Tensor:
        # with frozen parameters nothing below this layer needs a gradient: start the graph here
        return x if x.requires_grad else x.detach().requires_grad_(True)

    def _qkv_hook(self, l, reader):
        stores = {"q": self.q, "k": self.k, "v": self.v}

        def hook(module, inputs, output):
            out = output[0] if isinstance(output, tuple) else output
            for name, part in reader(out.detach()).items():
                stores[name][l] = part
                if name == "v":
                    self.v_point[l] = (module, reader)

        return hook

    def _pe_hook(self, l):
        def hook(module, args, kwargs):
            cos, sin = self.adapter.rope_tables(args, kwargs)
            self.pe[l] = (cos.detach(), sin.detach())

        return hook

    def _post_o_hook(self, l):
        def hook(module, inputs, output):
            if isinstance(output, tuple):
                a = self._differentiable(output[0])
                self.A[l] = a
                return (a,) + tuple(output[1:])
            a = self._differentiable(output)
            self.A[l] = a
            return a

        return hook

    def _pre_o_hook(self, l):
        def hook(module, args):
            a = self._differentiable(args[0])
            self.A[l] = a
            return (a,) + tuple(args[1:])

        return hook

    def projections(self, layers):
        """The captured q, k, v (per layer) and RoPE tables, as dicts keyed by layer."""
        return ({l: self.q[l] for l in layers}, {l: self.k[l] for l in layers},
                {l: self.v[l] for l in layers}, dict(self.pe))

    def close(self) -> None:
        super().close()
        self.A.clear()


def _hidden_arg(args, kwargs):
    """The hidden states a decoder block is called with (first positional or ``hidden_states=``)."""
    if args:
        return args[0]
    if "hidden_states" in kwargs:
        return kwargs["hidden_states"]
    raise RuntimeError("the decoder block was called without hidden states (neither positional nor hidden_states=)")


class ResidualCapture(_Hooks):
    """Forward pre-hooks keeping ``inputs[layer]``: Tensor[B, L, hidden], the residual stream
    entering each chosen block (before the block's norm; detached)."""

    def __init__(self, adapter, layers: Sequence[int]):
        super().__init__()
        self.inputs: Dict[int, Tensor] = {}
        try:
            for l in layers:
                self.handles.append(adapter.layers[l].register_forward_pre_hook(self._make_hook(l), with_kwargs=True))
        except BaseException:
            self.close()
            raise

    def _make_hook(self, l):
        def hook(module, args, kwargs):
            self.inputs[l] = _hidden_arg(args, kwargs).detach()

        return hook


class ResidualInput(_Hooks):
    """A forward pre-hook that replaces the residual stream entering block ``layer`` with
    :attr:`value` (Tensor[B, L, hidden] of the block's input shape; set it before each forward,
    None leaves the input as it is): derivatives with respect to ``value`` run through blocks
    ``layer``… only, and the blocks below build no graph for them."""

    def __init__(self, adapter, layer: int, value: Optional[Tensor] = None):
        super().__init__()
        self.value = value
        self.handles.append(adapter.layers[layer].register_forward_pre_hook(self._hook, with_kwargs=True))

    def _hook(self, module, args, kwargs):
        if self.value is None:
            return None
        value = self.value.to(_hidden_arg(args, kwargs).device)
        if args:
            return (value,) + tuple(args[1:]), kwargs
        return args, dict(kwargs, hidden_states=value)
