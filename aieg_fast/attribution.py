"""Attribution methods for decoder-only LLMs and the :class:`Explainer` that runs them.

Every method explains a scalar target F of one forward pass: the logit (default), log-prob or
probability of a target token at the last position of a causal LM, or of a class of a
sequence-classification head. Gradients are taken with respect to the *token embeddings*
(``inputs_embeds``); GPT-2 adds its position embeddings inside the model and LLaMA applies RoPE
inside attention, so only token embeddings are interpolated (DIG convention, specs/aieg.md §6.3).

Methods (``list_methods()``):

* ``integrated_gradients`` — IG (Sundararajan et al., 2017) on embeddings, reference-token
  baseline, several quadrature rules; reports the completeness (convergence) delta.
* ``integrated_decision_gradients`` — IDG (Walker et al., AAAI 2024): gradients weighted by the
  finite-difference logit slope on an adaptive grid from a pilot pass (specs/aieg.md §3).
* ``aieg`` — Attended Integrated and Emphasized Gradients: emphasis factors from logit jumps,
  PosNorm and an attention term; reconstruction of the unpublished paper, specs/aieg.md §6.
* ``saliency``, ``input_x_gradient`` — plain gradient baselines.
* ``attention``, ``scaled_attention`` — attention rows and α∇α (specs/aieg.md §4).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import re
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import ops
from .reference import uniform_alphas
from .models import adapter_for, load_hf_model
from .core.model_state import model_prepared as _model_prepared
from .result import Attribution

__all__ = ["Explainer", "load_model", "list_methods", "method_options", "METHODS", "parse_memory", "quadrature"]

TARGET_FNS = ("logit", "logprob", "prob")
INTEGRATION_RULES = ("trapezoid", "uniform", "gausslegendre", "riemann_left", "riemann_right", "riemann_middle")
TOKEN_REDUCTIONS = ("sum", "l2", "sum_abs")
ATTN_LAYER_CHOICES = ("last", "all", "rollout", "none")
FINAL_NORMS = ("none", "sum", "l2")


# ============================================================================================
# helpers
# ============================================================================================
def _choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def _check_int(name: str, value, minimum: int) -> None:
    """Raise ValueError unless ``value`` is an int (not bool) ≥ ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_call(method: str, n_steps, target_fn: str, backend: str, options: Dict[str, Any]) -> None:
    """The argument checks shared by ``attribute`` and ``attribute_generation``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {list_methods()}, got {method!r}")
    _check_int("n_steps", n_steps, 2)
    _choice("target_fn", target_fn, TARGET_FNS)
    _choice("backend", backend, ("auto", "ext", "reference"))
    _check_options(method, options, method_options(method))


def parse_memory(value) -> int:
    """Bytes from an int or a string such as ``"4GB"``, ``"512MiB"``, ``"2e9"``.

    Raises:
        ValueError: unparseable value or not positive.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"max_memory must be positive, got {value!r}")
        return int(value)
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kKmMgGtT]?)(i?)[bB]?\s*", str(value))
    if not m:
        raise ValueError(f"max_memory must be bytes or a string like '4GB', got {value!r}")
    num = float(m.group(1))
    base = 1024 if m.group(3) else 1000
    mult = {"": 1, "k": base, "m": base**2, "g": base**3, "t": base**4}[m.group(2).lower()]
    if num <= 0:
        raise ValueError(f"max_memory must be positive, got {value!r}")
    return int(num * mult)


def quadrature(rule: str, n_steps: int, dtype=torch.float64):
    """Points and weights of an integration rule on [0, 1].

    Args:
        rule: one of ``trapezoid`` (default of IG: linspace points, trapezoid weights),
            ``uniform`` (linspace points, weight 1/M each — the form of specs/aieg.md §9, and
            what AIEG with ``ef_mode="none"`` uses), ``gausslegendre`` (captum's default),
            ``riemann_left``, ``riemann_right``, ``riemann_middle``.
        n_steps: M ≥ 2.

    Returns:
        (alphas Tensor[M], weights Tensor[M]); Σ weights = 1.
    """
    _choice("integration", rule, INTEGRATION_RULES)
    a, w = _quadrature64(rule, n_steps)
    return a.to(dtype, copy=True), w.to(dtype, copy=True)


@functools.lru_cache(maxsize=64)
def _quadrature64(rule: str, M: int):
    """:func:`quadrature` in float64, computed once per (rule, M); callers get copies."""
    if rule in ("trapezoid", "uniform"):
        a = torch.linspace(0, 1, M, dtype=torch.float64)
        if rule == "uniform":
            w = torch.full((M,), 1.0 / M, dtype=torch.float64)
        else:
            w = torch.full((M,), 1.0 / (M - 1), dtype=torch.float64)
            w[0] = w[-1] = 0.5 / (M - 1)
    elif rule == "gausslegendre":
        import numpy as np

        x, wq = np.polynomial.legendre.leggauss(M)
        a = torch.tensor((x + 1) / 2, dtype=torch.float64)
        w = torch.tensor(wq / 2, dtype=torch.float64)
    else:
        k = torch.arange(M, dtype=torch.float64)
        off = {"riemann_left": 0.0, "riemann_right": 1.0, "riemann_middle": 0.5}[rule]
        a = (k + off) / M
        w = torch.full((M,), 1.0 / M, dtype=torch.float64)
    return a, w


class _AttentionCapture:
    """Forward hooks that keep attention probabilities of chosen layers.

    Keeps, per call, ``rows[layer]``: Tensor[B, H, K] — the query row at ``last_index`` — or the
    full matrix [B, H, Q, K] when ``full=True`` (rollout). Needs eager attention (the model
    returns the probabilities only then). Hooks are removed by :meth:`close`.
    """

    def __init__(self, adapter, layers: Sequence[int], full: bool = False, keep_graph: bool = False):
        self.layers = list(layers)
        self.full = full
        self.keep_graph = keep_graph
        self.last_index: Optional[Tensor] = None
        self.captured: Dict[int, List[Tensor]] = {l: [] for l in self.layers}
        self.handles = []
        for l in self.layers:
            self.handles.append(adapter.attn_modules[l].register_forward_hook(self._make_hook(l)))

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

    def pop(self) -> Dict[int, Tensor]:
        # a single capture is returned as is, so it stays the tensor in the autograd graph
        out = {l: (v[0] if len(v) == 1 else torch.cat(v, 0)) if v else None for l, v in self.captured.items()}
        self.captured = {l: [] for l in self.layers}
        return out

    def close(self):
        for h in self.handles:
            h.remove()
        self.handles = []


@dataclass
class _Batch:
    """Inputs of one attribution call, padded to a common length L."""

    ids: Tensor  # [B, L]
    attention_mask: Tensor  # [B, L]
    position_ids: Tensor  # [B, L]
    last_index: Tensor  # [B]
    fixed: Tensor  # [B, L] bool: not interpolated / not attributed
    embeds: Tensor  # [B, L, d]
    baseline: Tensor  # [B, L, d]
    targets: Tensor  # [B]
    lengths: List[int]
    offsets: List[int]  # where each example's tokens start inside the padded row
    # pilot logits at linspace(0, 1, N) per example, when a caller computed them already
    # (generation shares one pilot pass over the full sequence between all steps)
    pilot_logits: Optional[List[Tensor]] = None
    @property
    def B(self):
        return self.ids.shape[0]

    @property
    def plain(self) -> bool:
        """Every row unpadded (positions 0…L-1, last index L-1): the model runs without a mask."""
        return all(n == self.ids.shape[1] for n in self.lengths)

    @property
    def delta(self):
        return self.embeds - self.baseline


# ============================================================================================
# method registry
# ============================================================================================
METHODS: Dict[str, Callable] = {}
_METHOD_DOCS: Dict[str, str] = {}


def register_method(name: str, doc: str):
    def deco(fn):
        METHODS[name] = fn
        _METHOD_DOCS[name] = doc
        return fn

    return deco


def list_methods() -> List[str]:
    """Names of the attribution methods, in the order they were registered."""
    return list(METHODS)


# ============================================================================================
# Explainer
# ============================================================================================
class Explainer:
    """A loaded model plus tokenizer, ready to explain predictions.

    Create with :func:`load_model`. Set-up that does not depend on the input (architecture
    lookup, special ids, reference token) happens once here, not per call.

    Attributes:
        model: the ``transformers`` model. tokenizer: its tokenizer. name: model name / path.
        adapter (ModelAdapter): architecture facts (layers, heads, output head).
        ref_token_id (int): the baseline token (PAD, else EOS, else UNK, else 0; a token whose
            embedding is all zeros is skipped). Pass ``ref_token_id=`` to :func:`load_model`
            to choose another.
    """

    def __init__(self, model, tokenizer, name: str = "", device=None, ref_token_id: Optional[int] = None):
        self.adapter = adapter_for(model)  # raises for unsupported architectures
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        if device is not None:
            model.to(device)
        self.device = next(model.parameters()).device
        self.special_ids = set(int(i) for i in (getattr(tokenizer, "all_special_ids", None) or []))
        self.vocab_size = self.adapter.embeddings.weight.shape[0]
        self.ref_token_id = self._default_ref_token(tokenizer) if ref_token_id is None else int(ref_token_id)
        self.pad_id = self.ref_token_id
        self._token_text: Dict[int, str] = {}  # id → decoded text, filled as tokens are seen

    def _default_ref_token(self, tokenizer) -> int:
        """PAD, else EOS, else UNK (DIG convention, specs/aieg.md §6.3), skipping all-zero rows.

        A model initialised with ``padding_idx`` keeps an all-zero PAD embedding; with RMSNorm
        (LLaMA) a zero baseline makes gradients explode near α = 0 (§6.3), so such a token is
        passed over for the next candidate.
        """
        W = self.adapter.embeddings.weight
        for attr in ("pad_token_id", "eos_token_id", "unk_token_id"):
            v = getattr(tokenizer, attr, None)
            if isinstance(v, int) and 0 <= v < self.vocab_size and bool(W[v].detach().abs().sum() > 0):
                return int(v)
        return 0

    # ------------------------------------------------------------------ encoding
    def token_texts(self, ids: Sequence[int]) -> List[str]:
        """The decoded text of each token id on its own (``tokenizer.decode([i])``), cached per
        Explainer so that repeated calls do not decode the same tokens again.

        Args:
            ids: token ids (ints).

        Returns:
            List[str], one text per id, in order.
        """
        cache = self._token_text
        for i in ids:
            if i not in cache:
                cache[i] = self.tokenizer.decode([i])
        return [cache[i] for i in ids]

    def encode(self, text: str, template: Optional[str] = None, add_special_tokens: bool = True):
        """Token ids of ``text`` (optionally placed in ``template`` at ``{text}``) and a fixed mask.

        Positions outside the text (template tokens) and special tokens are held fixed.

        Returns:
            (ids List[int], fixed List[bool])

        Raises:
            ValueError: empty text, a template without ``{text}``, or more tokens than the
                model's maximum positions.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text.strip():
            raise ValueError(f"text is empty, got {text!r}")
        if template is None:
            full, span = text, (0, len(text))
        else:
            if "{text}" not in template:
                raise ValueError(f"template must contain '{{text}}', got {template!r}")
            pre, post = template.split("{text}", 1)
            full, span = pre + text + post, (len(pre), len(pre) + len(text))
        enc = self.tokenizer(full, add_special_tokens=add_special_tokens, return_offsets_mapping=template is not None)
        ids = list(enc["input_ids"])
        fixed = [i in self.special_ids for i in ids]
        if template is not None:
            for k, (s, e) in enumerate(enc["offset_mapping"]):
                inside = e > span[0] and s < span[1]
                if not inside:
                    fixed[k] = True
        limit = self.adapter.max_positions
        if len(ids) > limit:
            raise ValueError(
                f"text is {len(ids)} tokens long, but the model accepts at most {limit} positions"
            )
        if all(fixed):
            raise ValueError(f"text has no attributable token (all {len(ids)} are special or template): {text!r}")
        return ids, fixed

    def resolve_target(self, target, ids: Optional[List[int]] = None) -> Dict[str, Any]:
        """Turn a user target into ``{"kind", "id", "text"}``.

        Args:
            target: None (the model's prediction, filled in later), a token string (must be a
                single token), a token id, or a class index / label name for a classifier.

        Raises:
            ValueError: a string that is not a single token, an id out of range, an unknown label.
        """
        if self.adapter.kind == "classifier":
            n = self.adapter.num_labels
            id2label = getattr(self.model.config, "id2label", {}) or {}
            if target is None:
                return {"kind": "class", "id": None, "text": None}
            if isinstance(target, str):
                label2id = {str(v): int(k) for k, v in id2label.items()}
                if target not in label2id:
                    raise ValueError(f"target {target!r} is not a label of this classifier; labels: {sorted(label2id)}")
                target = label2id[target]
            if not isinstance(target, int) or not (0 <= target < n):
                raise ValueError(f"target must be a class index in [0, {n}), got {target!r}")
            return {"kind": "class", "id": int(target), "text": str(id2label.get(target, target))}
        if target is None:
            return {"kind": "token", "id": None, "text": None}
        if isinstance(target, bool) or not isinstance(target, (int, str)):
            raise TypeError(f"target must be a token string, a token id or None, got {type(target).__name__}")
        if isinstance(target, int):
            if not (0 <= target < self.vocab_size):
                raise ValueError(f"target token id must be in [0, {self.vocab_size}), got {target}")
            return {"kind": "token", "id": int(target), "text": self.token_texts([int(target)])[0]}
        toks = self.tokenizer.encode(target, add_special_tokens=False)
        if len(toks) != 1:
            pieces = self.tokenizer.convert_ids_to_tokens(toks)
            raise ValueError(
                f"target {target!r} is not a single token: it tokenizes as {pieces} (ids {toks}); "
                "pass one token (a leading space often matters) or a token id"
            )
        return {"kind": "token", "id": int(toks[0]), "text": target}

    def _batch(self, encoded: List[tuple], targets: List[Optional[int]], padding_side: str = "right") -> _Batch:
        B = len(encoded)
        L = max(len(ids) for ids, _ in encoded)
        dev = self.device
        ids_t = torch.full((B, L), self.pad_id, dtype=torch.long)
        mask = torch.zeros((B, L), dtype=torch.long)
        fixed = torch.ones((B, L), dtype=torch.bool)
        offsets, lengths = [], []
        for b, (ids, fx) in enumerate(encoded):
            n = len(ids)
            off = 0 if padding_side == "right" else L - n
            ids_t[b, off : off + n] = torch.tensor(ids)
            mask[b, off : off + n] = 1
            fixed[b, off : off + n] = torch.tensor(fx, dtype=torch.bool)
            offsets.append(off)
            lengths.append(n)
        position_ids = (mask.cumsum(-1) - 1).clamp_min(0)
        last_index = torch.tensor([o + n - 1 for o, n in zip(offsets, lengths)])
        emb_w = self.adapter.embeddings.weight
        ids_t, mask, position_ids, fixed, last_index = (t.to(dev) for t in (ids_t, mask, position_ids, fixed, last_index))
        with torch.no_grad():
            E = self.adapter.embeddings(ids_t).detach()
            ref = emb_w[self.ref_token_id].detach()
            Eb = torch.where(fixed.unsqueeze(-1), E, ref.view(1, 1, -1).expand_as(E))
        tg = torch.tensor([-1 if t is None else t for t in targets], dtype=torch.long, device=dev)
        return _Batch(ids_t, mask, position_ids, last_index, fixed, E, Eb, tg, lengths, offsets)

    # ------------------------------------------------------------------ forward passes
    def _hidden(self, batch: _Batch, rows: Tensor, embeds: Tensor) -> Tensor:
        if batch.plain:  # no per-chunk mask, positions or last-index gathers
            return self.adapter.hidden_last(embeds, None, None, None)
        return self.adapter.hidden_last(embeds, batch.attention_mask[rows], batch.position_ids[rows], batch.last_index[rows])

    def _F(self, batch: _Batch, rows: Optional[Tensor], embeds: Tensor, target_fn: str) -> Tensor:
        """F of each row of ``embeds``; ``rows`` [n] names each row's example (None when B = 1)."""
        targets = batch.targets if batch.B == 1 else batch.targets[rows]  # one target broadcasts
        return self.adapter.target_scores(self._hidden(batch, rows, embeds), targets, target_fn).float()

    def _chunk_size(self, L: int, internal_batch_size, max_memory) -> int:
        if internal_batch_size is not None:
            if not isinstance(internal_batch_size, int) or internal_batch_size < 1:
                raise ValueError(f"internal_batch_size must be a positive int or None, got {internal_batch_size!r}")
            return internal_batch_size
        budget = parse_memory(max_memory if max_memory is not None else "2GB")
        return max(1, budget // self.bytes_per_path_point(L))

    def bytes_per_path_point(self, L: int) -> int:
        """Estimated autograd memory of one interpolation point of length L (bytes).

        Estimate: per layer, about 16 activations of width ``hidden`` per token (attention
        projections, norms, MLP with its 4x-wide intermediate), plus the L×L attention
        probabilities of every head when the model runs eager attention (SDPA kernels do not
        keep them), in the parameter dtype, and the embeddings' gradient.
        Used by the automatic ``internal_batch_size`` (``max_memory``).
        """
        a = self.adapter
        esize = a.embeddings.weight.element_size()
        per_layer = L * a.hidden_size * 16
        if getattr(self.model.config, "_attn_implementation", None) == "eager":
            per_layer += a.n_heads * L * L * 2  # eager attention keeps the probabilities for the backward
        return int(esize * (a.n_layers * per_layer + 4 * L * a.hidden_size)) + 1

    def _path_chunks(self, batch, alphas: List[Tensor], chunk: int, need_grad: bool, target_fn: str, backend, used, progress=None):
        """Yield (example b, step slice, F [n], grads [n, L, d] or None) over the path, in chunks.

        The path points of all examples are flattened (example by example, steps in order) and
        cut into chunks of ``chunk`` points; each chunk is one batched forward (and backward when
        ``need_grad``). Within a chunk the steps of one example are contiguous, so each piece is
        yielded with a ``slice`` of step indices (views, no index tensors per chunk).
        """
        sizes = [a.numel() for a in alphas]
        starts = [0]
        for n in sizes:
            starts.append(starts[-1] + n)
        used["interpolate_path"] = ops.resolve_backend(backend, batch.embeds)
        # the example of each path point; a single example needs none (plain batch, one target)
        rows_all = None if batch.B == 1 else torch.repeat_interleave(torch.arange(batch.B, device=self.device), torch.tensor(sizes, device=self.device))
        for s in range(0, starts[-1], chunk):
            e = min(s + chunk, starts[-1])
            groups = [(b, slice(max(s, starts[b]) - starts[b], min(e, starts[b + 1]) - starts[b]))
                      for b in range(batch.B) if starts[b] < e and starts[b + 1] > s]
            pts = [ops.interpolate_path(batch.embeds[b], batch.baseline[b], alphas[b][ms], batch.fixed[b], backend=backend) for b, ms in groups]
            X = pts[0] if len(pts) == 1 else torch.cat(pts, 0)
            rows = None if rows_all is None else rows_all[s:e]
            if need_grad:
                X.requires_grad_(True)
                with torch.enable_grad():
                    f = self._F(batch, rows, X, target_fn)
                    (g,) = torch.autograd.grad(f.sum(), X)
            else:
                with torch.no_grad():
                    f = self._F(batch, rows, X, target_fn)
                g = None
            f = f.detach()
            pos = 0
            for b, ms in groups:
                n = ms.stop - ms.start
                yield b, ms, f[pos : pos + n], None if g is None else g[pos : pos + n]
                pos += n
            if progress is not None:
                progress.update(e - s)

    def _integrate(self, batch, alphas, weights, chunk, target_fn, reduce, backend, used, progress=None, return_logits=False):
        """Σ_m w_m G_m ⊙ Δ per example (token-reduced); with ``return_logits`` also the path logits."""
        B, L = batch.ids.shape
        d = batch.embeds.shape[-1]
        inner = "sum" if reduce == "sum" else "none"
        acc = [torch.zeros((L,) if inner == "sum" else (L, d), dtype=torch.float32, device=self.device) for _ in range(B)]
        delta = batch.delta
        path = [torch.zeros(a.numel(), dtype=torch.float32, device=self.device) for a in alphas]
        used["integrate_gradients"] = ops.resolve_backend(backend, batch.embeds)
        for b, ms, f, g in self._path_chunks(batch, alphas, chunk, True, target_fn, backend, used, progress):
            path[b][ms] = f
            w = weights[b][ms].to(torch.float32)
            acc[b] += ops.integrate_gradients(g, w, delta[b], inner, backend=backend).to(torch.float32)
        scores = [_reduce_tokens(a, reduce) for a in acc]
        return (scores, path) if return_logits else scores

    def _integrate_emphasized(self, batch, alphas, widths, chunk, target_fn, ef_mode, ef_sign, ef_norm, reduce, backend, used, progress=None):
        """Σ_m EF_m G_m ⊙ Δ in one gradient pass, the EF computed as the path logits arrive.

        The raw weight of step m needs only f_{m−1} and f_m (spec §6.5), and the L1
        normalisation is one global divisor, so the chunks are integrated with raw weights and
        divided at the end. This saves the forward-only pass over the main grid that
        :func:`_emphasis` needs. The raw weights come from ``ops.emphasis_factors`` on the chunk
        with the previous step prepended (``norm="none"`` returns w/M', undone here). Supports
        ``ef_mode`` fd / none and ``ef_sign`` abs / signed / relu (``minmax`` needs the global
        min and max and goes through :func:`_emphasis`).

        Returns:
            (ieg list of Tensor[L], ef list of Tensor[M], path logits list of Tensor[M])
        """
        B, L = batch.ids.shape
        d = batch.embeds.shape[-1]
        inner = "sum" if reduce == "sum" else "none"
        shape = (L,) if inner == "sum" else (L, d)
        U = [torch.zeros(shape, dtype=torch.float32, device=self.device) for _ in range(B)]
        V = [torch.zeros(shape, dtype=torch.float32, device=self.device) for _ in range(B)]
        raw = [torch.zeros(a.numel(), dtype=torch.float32, device=self.device) for a in alphas]
        path = [torch.zeros(a.numel(), dtype=torch.float32, device=self.device) for a in alphas]
        delta = batch.delta
        used["emphasis_factors"] = used["integrate_gradients"] = ops.resolve_backend(backend, batch.embeds)
        for b, ms, f, g in self._path_chunks(batch, alphas, chunk, True, target_fn, backend, used, progress):
            path[b][ms] = f
            lo = max(ms.start - 1, 0)  # prepend the previous step so its increment is known
            w = ops.emphasis_factors(path[b][lo : ms.stop], alphas[b][lo : ms.stop], widths[b][lo : ms.stop], ef_mode, ef_sign, "none", backend=backend)
            w = w.float()[ms.start - lo :] * (ms.stop - lo)
            raw[b][ms] = w
            U[b] += ops.integrate_gradients(g, w, delta[b], inner, backend=backend).float()
            if ef_norm == "l1":
                M = alphas[b].numel()
                V[b] += ops.integrate_gradients(g, torch.full((ms.stop - ms.start,), 1.0 / M, device=self.device), delta[b], inner, backend=backend).float()
        ieg, efs = [], []
        for b in range(B):
            M = alphas[b].numel()
            if not bool(torch.isfinite(path[b]).all()):  # the op's rule: non-finite logits → NaN EF
                efs.append(torch.full((M,), float("nan"), device=self.device))
                ieg.append(torch.full(shape[:1], float("nan"), device=self.device))
                continue
            if ef_norm == "none":
                efs.append(raw[b] / M)
                acc = U[b] / M
            else:
                tot = raw[b].abs().sum()
                if bool(tot > 0):
                    efs.append(raw[b] / tot)
                    acc = U[b] / tot
                else:  # flat logit: EF = 1/M (IG on the grid)
                    efs.append(torch.full((M,), 1.0 / M, device=self.device))
                    acc = V[b]
            ieg.append(_reduce_tokens(acc, reduce))
        return ieg, efs, path

    def _path_logits(self, batch, alphas, chunk, target_fn, backend, used, progress=None):
        out = [torch.empty(a.numel(), dtype=torch.float32, device=self.device) for a in alphas]
        for b, ms, f, _ in self._path_chunks(batch, alphas, chunk, False, target_fn, backend, used, progress):
            out[b][ms] = f
        return out

    def _reference_forward(self, batch: _Batch, target_fn: str, attn_layers=None, full=False, baseline: bool = True):
        """One no-grad forward on the inputs (and the baselines when ``baseline``): prediction,
        F(x), F(x′) and the attention at α = 1."""
        B = batch.B
        rows = torch.arange(B, device=self.device)
        r2 = torch.cat([rows, rows]) if baseline else rows
        cap = None
        if attn_layers:
            cap = _AttentionCapture(self.adapter, attn_layers, full=full)
            cap.last_index = batch.last_index[r2]
        try:
            with torch.no_grad():
                X = torch.cat([batch.embeds, batch.baseline], 0) if baseline else batch.embeds
                h = self._hidden(batch, r2, X)
                logits = self.adapter.full_logits(h[:B]).float()
                pred = logits.argmax(-1)
                missing = batch.targets < 0
                batch.targets = torch.where(missing, pred, batch.targets)
                F = self.adapter.target_scores(h, batch.targets[r2], target_fn).float()
            attn = None
            if cap is not None:
                attn = {l: (v[:B] if v is not None else None) for l, v in cap.pop().items()}
        finally:
            if cap is not None:
                cap.close()
        probs = torch.softmax(logits, -1)
        return {"F_input": F[:B], "F_baseline": F[B:] if baseline else None, "pred": pred, "probs": probs, "attn": attn}

    def _fill_targets(self, batch: _Batch, hidden: Tensor) -> None:
        """Set missing targets (−1) to the model's prediction from final hidden states [B, D]."""
        missing = batch.targets < 0
        if bool(missing.any()):
            with torch.no_grad():
                pred = self.adapter.full_logits(hidden.detach()).argmax(-1)
            batch.targets = torch.where(missing, pred, batch.targets)

    def _run_method(self, method, batch, n_steps, internal_batch_size, max_memory, target_fn, backend, used, timing, progress, options):
        """Call the registered method ``method`` on ``batch`` (the one place methods are invoked)."""
        return METHODS[method](
            self,
            batch,
            n_steps=n_steps,
            internal_batch_size=internal_batch_size,
            max_memory=max_memory,
            target_fn=target_fn,
            backend=backend,
            used=used,
            timing=timing,
            progress=progress,
            **options,
        )

    # ------------------------------------------------------------------ public API
    def attribute(
        self,
        text: Union[str, Sequence[str]],
        method: str = "aieg",
        target=None,
        n_steps: int = 50,
        internal_batch_size: Optional[int] = None,
        *,
        template: Optional[str] = None,
        target_fn: str = "logit",
        backend: str = "auto",
        max_memory=None,
        padding_side: str = "right",
        progress: bool = False,
        **options,
    ):
        """Explain the model's prediction for ``text`` with ``method``.

        Args:
            text (str or list of str): the input; a list is attributed as one padded batch and
                gives one result per text (same scores as one at a time).
            method (str): one of :func:`list_methods` (default ``"aieg"``).
            target: token string (single token), token id, or class index / label for a
                classification head; None = the model's own prediction (greedy next token or
                argmax class). A list gives one target per text.
            n_steps (int): interpolation steps M ≥ 2 for path methods (ignored by the others).
            internal_batch_size (int, optional): path points per forward/backward; bounds peak
                memory. None = chosen from ``max_memory`` (default "2GB").
            template (str, optional): prompt with ``{text}``; template tokens are held fixed.
            target_fn: ``"logit"`` (default), ``"logprob"`` or ``"prob"`` (specs/aieg.md §6.2).
            backend: ``"auto"``, ``"ext"`` or ``"reference"`` for the kernels.
            max_memory: memory budget for the automatic internal batch size (bytes or "4GB").
            padding_side: ``"right"`` or ``"left"`` for batches of several texts.
            progress: show a progress bar over the path points.
            **options: method options (see each method's documentation / ``METHODS[name]``).

        Returns:
            :class:`Attribution` (or a list of them for a list of texts). ``scores``:
            Tensor[L] over the tokens of the text (template included, held fixed at 0).

        Raises:
            ValueError: empty text, too many tokens, unknown method, a target that is not a
                single token, n_steps < 2, an unknown option. The model is left as it was.
        """
        _check_call(method, n_steps, target_fn, backend, options)
        _choice("padding_side", padding_side, ("left", "right"))
        single = isinstance(text, str)
        if not single and not (isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text)):
            raise TypeError(f"text must be a str or a list of str, got {type(text).__name__}")
        if template is not None and not isinstance(template, str):
            raise TypeError(f"template must be a str with '{{text}}' or None, got {type(template).__name__}")
        texts = [text] if single else list(text)
        if not texts:
            raise ValueError("text is an empty list")
        targets = target if isinstance(target, (list, tuple)) else [target] * len(texts)
        if len(targets) != len(texts):
            raise ValueError(f"target has {len(targets)} entries for {len(texts)} texts")
        t0 = time.perf_counter()
        encoded = []
        for i, t in enumerate(texts):
            try:
                encoded.append(self.encode(t, template))
            except ValueError as e:
                if single:
                    raise
                raise ValueError(f"text[{i}]: {e}") from None  # name the item of the list
        tinfo = [self.resolve_target(t) for t in targets]
        batch = self._batch(encoded, [ti["id"] for ti in tinfo], padding_side)
        used: Dict[str, str] = {}
        timing: Dict[str, float] = {}
        bar = _progress_bar(progress, method)
        try:
            out = self._run_method(method, batch, n_steps, internal_batch_size, max_memory, target_fn, backend, used, timing, bar, options)
        finally:
            if bar is not None:
                bar.close()
        timing["total"] = time.perf_counter() - t0
        results = []
        for b in range(batch.B):
            off, n = batch.offsets[b], batch.lengths[b]
            ids = batch.ids[b, off : off + n].tolist()
            fixed = batch.fixed[b, off : off + n].tolist()
            scores = out["scores"][b][off : off + n].detach().float().cpu()
            tgt = dict(tinfo[b])
            tid = int(batch.targets[b])
            tgt["id"] = tid
            if tgt["text"] is None:
                tgt["text"] = (
                    self.token_texts([tid])[0]
                    if tgt["kind"] == "token"
                    else str((getattr(self.model.config, "id2label", {}) or {}).get(tid, tid))
                )
            info = {k: (v[b] if isinstance(v, list) else v) for k, v in out.get("info", {}).items()}
            results.append(
                Attribution(
                    tokens=self.token_texts(ids),
                    token_ids=ids,
                    scores=scores,
                    method=method,
                    target=tgt,
                    options=dict(out.get("options", {}), n_steps=n_steps, target_fn=target_fn, template=template),
                    model=self.name,
                    backend=dict(used),
                    timing=dict(timing),
                    attributable=[not f for f in fixed],
                    raw_tokens=self.tokenizer.convert_ids_to_tokens(ids),
                    special=[i in self.special_ids for i in ids],
                    info=info,
                )
            )
        return results[0] if single else results

    def predict(self, text: str, template: Optional[str] = None, top_k: int = 5):
        """The model's top-k next tokens (or classes) with probabilities, as (text, id, prob)."""
        ids, fixed = self.encode(text, template)
        batch = self._batch([(ids, fixed)], [None])
        with _model_prepared(self.model):
            ref = self._reference_forward(batch, "logit")
        p = ref["probs"][0]
        vals, idx = p.topk(min(top_k, p.numel()))
        names = (
            self.token_texts([int(i) for i in idx])
            if self.adapter.kind == "causal_lm"
            else [str((self.model.config.id2label or {}).get(int(i), int(i))) for i in idx]
        )
        return [(n, int(i), float(v)) for n, i, v in zip(names, idx, vals)]

    def label_probs(self, text: str, labels: Sequence[str], template: Optional[str] = None):
        """Probabilities of single-token ``labels`` at the next position, renormalised over them."""
        tids = [self.resolve_target(l)["id"] for l in labels]
        ids, fixed = self.encode(text, template)
        batch = self._batch([(ids, fixed)], [None])
        with _model_prepared(self.model):
            ref = self._reference_forward(batch, "logit")
        p = ref["probs"][0, tids]
        return (p / p.sum()).tolist()


def _progress_bar(enabled: bool, desc: str):
    """A tqdm progress bar over path points, or None."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(desc=desc, unit="pt", leave=False)


def _reduce_tokens(x: Tensor, reduce: str) -> Tensor:
    if reduce == "sum":
        return x if x.dim() == 1 else x.sum(-1)
    if reduce == "l2":
        return x.norm(dim=-1)
    return x.abs().sum(-1)


def load_model(model=None, tokenizer=None, device=None, dtype: Optional[torch.dtype] = None, ref_token_id: Optional[int] = None) -> Explainer:
    """Load a model for explanation.

    Args:
        model: None (the embedded SmolLM2-135M-Instruct), a hub id or local directory, or a
            ``transformers`` model object (GPT-2 or LLaMA architecture, causal LM or
            sequence classification).
        tokenizer: tokenizer object or id/path; required with a model object.
        device: torch device (default: where the model is, CPU for loaded models).
        dtype: parameter dtype for models loaded by name (default float32).
        ref_token_id: baseline token id (default: PAD, else EOS, else UNK).

    Returns:
        :class:`Explainer` exposing ``.model``, ``.tokenizer`` and ``.attribute(...)``.

    Raises:
        ValueError: unsupported architecture (names the supported ones), missing tokenizer.
        RuntimeError: the embedded model's package is not installed.
    """
    m, tok, name = load_hf_model(model, tokenizer, dtype)
    return Explainer(m, tok, name, device, ref_token_id)


# ============================================================================================
# methods
# ============================================================================================
_COMMON_ARGS = ("ex", "batch", "n_steps", "internal_batch_size", "max_memory", "target_fn", "backend", "used", "timing", "progress")


def method_options(method: str) -> Dict[str, Any]:
    """The options of a method with their defaults, e.g. ``method_options("aieg")["ef_mode"] == "fd"``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {list_methods()}, got {method!r}")
    return dict(_signature_options(METHODS[method]))


@functools.lru_cache(maxsize=None)
def _signature_options(fn) -> Tuple[Tuple[str, Any], ...]:
    """(option, default) pairs of a method function (read once per function)."""
    sig = inspect.signature(fn)
    return tuple((k, p.default) for k, p in sig.parameters.items() if k not in _COMMON_ARGS)


def _check_options(method: str, options: Dict[str, Any], allowed: Sequence[str]):
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for method {method!r}; allowed: {sorted(allowed)}")


def _common(ex: Explainer, batch: _Batch, timing, target_fn, attn_layers=None, full=False, baseline: bool = True):
    t = time.perf_counter()
    ref = ex._reference_forward(batch, target_fn, attn_layers, full, baseline)
    timing["reference_forward"] = time.perf_counter() - t
    return ref


def _ig_info(batch, F_input, F_baseline, scores):
    """F(x), F(x′) and the completeness delta Σ_i s_i − (F(x) − F(x′)) per example."""
    d_in = F_input - F_baseline
    return {
        "F_input": F_input.tolist(),
        "F_baseline": F_baseline.tolist(),
        "convergence_delta": [float(scores[b].sum() - d_in[b]) for b in range(batch.B)],
    }


def _ensure_targets(ex: Explainer, batch: _Batch, timing) -> None:
    """One no-grad forward on the inputs, only when some target is missing (the prediction)."""
    if bool((batch.targets < 0).any()):
        t = time.perf_counter()
        with torch.no_grad():
            rows = torch.arange(batch.B, device=ex.device)
            ex._fill_targets(batch, ex._hidden(batch, rows, batch.embeds))
        timing["predict"] = time.perf_counter() - t


@register_method("integrated_gradients", "Integrated Gradients on token embeddings (Sundararajan et al. 2017)")
def integrated_gradients(
    ex: Explainer,
    batch: _Batch,
    *,
    n_steps,
    internal_batch_size,
    max_memory,
    target_fn,
    backend,
    used,
    timing,
    progress,
    integration: str = "trapezoid",
    token_reduction: str = "sum",
):
    """Integrated Gradients: IG_i = Σ_d Δ_{i,d} Σ_m w_m ∂F/∂e_{i,d}(E′ + α_m Δ).

    Baseline E′: the reference token's embedding (PAD, else EOS) at attributable positions;
    special and template positions are held fixed (Δ = 0, score 0). ``info["convergence_delta"]``
    = Σ_i IG_i − (F(x) − F(x′)) (completeness; exact only for ``token_reduction="sum"``).

    Options:
        integration: quadrature rule (:func:`quadrature`), default ``"trapezoid"``.
        token_reduction: ``"sum"`` (default, signed), ``"l2"`` or ``"sum_abs"`` over d.
    """
    _choice("integration", integration, INTEGRATION_RULES)
    _choice("token_reduction", token_reduction, TOKEN_REDUCTIONS)
    with _model_prepared(ex.model):
        _ensure_targets(ex, batch, timing)
        a, w = quadrature(integration, n_steps, torch.float32)
        alphas = [a.to(ex.device)] * batch.B
        weights = [w.to(ex.device)] * batch.B
        chunk = ex._chunk_size(batch.ids.shape[1], internal_batch_size, max_memory)
        t = time.perf_counter()
        scores, path = ex._integrate(batch, alphas, weights, chunk, target_fn, token_reduction, backend, used, progress, return_logits=True)
        timing["path"] = time.perf_counter() - t
        if integration in ("trapezoid", "uniform"):  # the grid holds α = 0 and α = 1
            F_in = torch.stack([p[-1] for p in path])
            F_base = torch.stack([p[0] for p in path])
        else:
            ref = _common(ex, batch, timing, target_fn)
            F_in, F_base = ref["F_input"], ref["F_baseline"]
    return {
        "scores": scores,
        "options": {"integration": integration, "token_reduction": token_reduction, "internal_batch_size": chunk, "ref_token_id": ex.ref_token_id},
        "info": _ig_info(batch, F_in, F_base, scores),
    }


def _grid(ex, batch, n_steps, n_pilot, adaptive, alloc, idg_compat_quirk, chunk, target_fn, backend, used, timing, progress):
    """IDG grid per example: pilot pass (no autograd) + adaptive allocation, or the uniform grid."""
    if not adaptive:
        a, w = uniform_alphas(n_steps, device=ex.device)
        return [a] * batch.B, [w] * batch.B, None
    t = time.perf_counter()
    if batch.pilot_logits is not None and all(p.numel() == n_pilot for p in batch.pilot_logits):
        pilot = batch.pilot_logits
    else:
        pa = torch.linspace(0, 1, n_pilot, device=ex.device)
        pilot = ex._path_logits(batch, [pa] * batch.B, chunk, target_fn, backend, used, progress)
    alphas, widths = [], []
    for b in range(batch.B):
        used["adaptive_alphas"] = ops.resolve_backend(backend, pilot[b])
        a, w = ops.adaptive_alphas(pilot[b], n_steps, alloc, idg_compat_quirk, backend=backend)
        alphas.append(a.to(torch.float32))
        widths.append(w.to(torch.float32))
    timing["pilot"] = time.perf_counter() - t
    return alphas, widths, pilot


def _emphasis(ex, batch, alphas, widths, chunk, target_fn, ef_mode, ef_sign, ef_norm, backend, used, timing, progress):
    """Path logits at the main grid (no autograd) and the emphasis factors of each example."""
    t = time.perf_counter()
    if ef_mode == "none":
        path = None
        efs = []
        for b in range(batch.B):
            used["emphasis_factors"] = ops.resolve_backend(backend, widths[b])
            efs.append(ops.emphasis_factors(widths[b], alphas[b], widths[b], "none", ef_sign, ef_norm, backend=backend))
    else:
        path = ex._path_logits(batch, alphas, chunk, target_fn, backend, used, progress)
        efs = []
        for b in range(batch.B):
            used["emphasis_factors"] = ops.resolve_backend(backend, path[b])
            efs.append(ops.emphasis_factors(path[b], alphas[b], widths[b], ef_mode, ef_sign, ef_norm, backend=backend))
    timing["path_logits"] = time.perf_counter() - t
    return efs, path


@register_method("integrated_decision_gradients", "Integrated Decision Gradients (Walker et al., AAAI 2024)")
def integrated_decision_gradients(
    ex: Explainer,
    batch: _Batch,
    *,
    n_steps,
    internal_batch_size,
    max_memory,
    target_fn,
    backend,
    used,
    timing,
    progress,
    n_pilot: Optional[int] = None,
    adaptive: bool = True,
    alloc: str = "idg_minmax",
    idg_compat_quirk: bool = False,
    token_reduction: str = "sum",
):
    """IDG_i = Σ_d Δ_{i,d} (1/M) Σ_m G_{m,i,d} r_m δ_m (specs/aieg.md §3.2, official code semantics).

    r_m is the finite-difference slope of F between consecutive samples (r_1 = 0), δ_m the
    sub-step width; the M samples are placed by adaptive sampling from a pilot pass of
    ``n_pilot`` forward-only points (default N = M, the official default).

    Options:
        n_pilot (int): pilot points N ≥ 2 (default ``n_steps``).
        adaptive (bool): False = uniform grid.
        alloc: ``"idg_minmax"`` (official, default) or ``"abs"``.
        idg_compat_quirk (bool): reproduce the official placement quirk (§3.2 step 4).
        token_reduction: ``"sum"``, ``"l2"`` or ``"sum_abs"``.

    Cost: N forwards (pilot) + M forward/backward passes; the weights are computed from the
    path logits as the chunks arrive (:meth:`Explainer._integrate_emphasized`).
    """
    _choice("alloc", alloc, ("abs", "idg_minmax"))
    _choice("token_reduction", token_reduction, TOKEN_REDUCTIONS)
    n_pilot = n_steps if n_pilot is None else n_pilot
    _check_int("n_pilot", n_pilot, 2)
    with _model_prepared(ex.model):
        _ensure_targets(ex, batch, timing)
        chunk = ex._chunk_size(batch.ids.shape[1], internal_batch_size, max_memory)
        alphas, widths, pilot = _grid(ex, batch, n_steps, n_pilot, adaptive, alloc, idg_compat_quirk, chunk, target_fn, backend, used, timing, progress)
        t = time.perf_counter()
        scores, efs, path = ex._integrate_emphasized(batch, alphas, widths, chunk, target_fn, "fd", "signed", "none", token_reduction, backend, used, progress)
        timing["path"] = time.perf_counter() - t
    ends = pilot if pilot is not None else path  # both grids hold α = 0 and α = 1
    info = _ig_info(batch, torch.stack([e[-1] for e in ends]), torch.stack([e[0] for e in ends]), scores)
    info["alphas"] = [a.tolist() for a in alphas]
    info["weights"] = [e.tolist() for e in efs]
    info["pilot_logits"] = [p.tolist() for p in pilot] if pilot is not None else None
    return {
        "scores": scores,
        "options": {"n_pilot": n_pilot, "adaptive": adaptive, "alloc": alloc, "idg_compat_quirk": idg_compat_quirk, "token_reduction": token_reduction, "internal_batch_size": chunk},
        "info": info,
    }


def _attention_layers(ex: Explainer, attn_layers) -> List[int]:
    n = ex.adapter.n_layers
    if attn_layers == "last":
        return [n - 1]
    if attn_layers in ("all", "rollout"):
        return list(range(n))
    if isinstance(attn_layers, (list, tuple)) and attn_layers and all(isinstance(l, int) for l in attn_layers):
        bad = [l for l in attn_layers if not (-n <= l < n)]
        if bad:
            raise ValueError(f"attn_layers has layer indices out of range [0, {n}): {bad}")
        return sorted({l % n for l in attn_layers})
    raise ValueError(f"attn_layers must be 'last', 'all', 'rollout', 'none' or a list of layer indices, got {attn_layers!r}")


def _attention_rows(ex, batch, attn, attn_layers, attn_heads, backend, used) -> Tensor:
    """Attention row of the predicting position, [B, L], from captured probabilities."""
    layers = _attention_layers(ex, attn_layers)
    if attn_layers == "rollout":
        B, L = batch.ids.shape
        eye = torch.eye(L, device=ex.device)
        roll = eye.expand(B, L, L).clone()
        for l in layers:
            A = attn[l].float()
            A = A.amax(1) if attn_heads == "max" else A.mean(1)
            roll = torch.bmm(0.5 * A + 0.5 * eye, roll)
        return roll[torch.arange(B, device=ex.device), batch.last_index]
    rows = []
    for l in layers:
        A = attn[l]  # [B, H, K]
        if attn_heads == "max":
            rows.append(A.float().amax(1))
        else:
            used["attention_gradient_product"] = ops.resolve_backend(backend, A)
            per_b = [
                ops.attention_gradient_product(A[b : b + 1].unsqueeze(2), None, None, "attention", backend=backend)[0]
                for b in range(A.shape[0])
            ]
            rows.append(torch.stack(per_b).float())
    return torch.stack(rows).mean(0)


@register_method("aieg", "Attended Integrated and Emphasized Gradients (reconstruction, specs/aieg.md §6)")
def aieg(
    ex: Explainer,
    batch: _Batch,
    *,
    n_steps,
    internal_batch_size,
    max_memory,
    target_fn,
    backend,
    used,
    timing,
    progress,
    n_pilot: Optional[int] = None,
    adaptive: bool = True,
    alloc: str = "abs",
    idg_compat_quirk: bool = False,
    ef_mode: str = "fd",
    ef_sign: str = "abs",
    ef_norm: str = "l1",
    attn_layers="last",
    attn_heads: str = "mean",
    attn_source: str = "input",
    attn_exclude_first: bool = False,
    attn_renorm: bool = False,
    posnorm: str = "minmax",
    posnorm_stage: str = "ieg",
    final_norm: str = "none",
    token_reduction: str = "sum",
    stream_ef: bool = True,
):
    """AIEG_i = PosNorm(ieg)_i · a_i over attributable tokens; 0 elsewhere (specs/aieg.md §6, §9).

    * Grid (§6.4): IDG adaptive sampling from a pilot pass of ``n_pilot`` points (default M)
      with allocation ∝ |slope| (``alloc="abs"``), or uniform (``adaptive=False``).
    * Emphasis factor (§6.5): EF_m = |w_m| / Σ|w|, w_m = (f_m − f_{m−1}) δ_m/(α_m − α_{m−1}),
      w_1 = 0, from the path logits (forward-only pass); flat logit → 1/M (IG).
      ``ef_mode`` ∈ {fd, autograd, none}, ``ef_sign`` ∈ {abs, signed, relu, minmax},
      ``ef_norm`` ∈ {l1, none}.
    * IEG (§6.6): ieg_i = Σ_d Δ_{i,d} Σ_m EF_m G_{m,i,d} (``token_reduction`` sum / l2 / sum_abs).
    * Attention (§6.7): a_i = head-mean last-layer attention of the predicting position at
      α = 1 (``attn_layers`` last / all / rollout / [layers] / none = 1; ``attn_heads`` mean /
      max; ``attn_source`` input / path = |EF|-weighted mean along the path;
      ``attn_exclude_first``, ``attn_renorm`` renormalise over positions ≥ 1 / attributable).
    * PosNorm (§6.8): min-max over attributable tokens before × attention (``posnorm`` minmax /
      relu_max / abs_sum / none; ``posnorm_stage="final"`` applies it to ieg·a instead).
    * ``final_norm`` (§6.9): none / sum / l2.
    * ``stream_ef`` (engineering): compute the EF from the path logits of the gradient pass as
      it goes (default). False runs a forward-only pass over the grid first and then the
      gradient pass (same result, one more forward per step); ``ef_sign="minmax"`` always does.

    Cost: N pilot forwards + M forward/backward passes (+ one forward for the attention).

    Ablations (§6.12): ``ef_mode="none"`` (no EF), ``attn_layers="none"`` (no attention),
    ``posnorm="none"`` (no PosNorm). With all three and ``adaptive=False`` AIEG equals
    ``integrated_gradients(integration="uniform")``.

    ``info`` holds ``ieg`` (raw signed scores), ``posnorm``, ``attention``, ``alphas``, ``ef``,
    ``path_logits``, ``F_input``, ``F_baseline``.
    """
    _choice("alloc", alloc, ("abs", "idg_minmax"))
    _choice("ef_mode", ef_mode, ("fd", "autograd", "none"))
    _choice("ef_sign", ef_sign, ("abs", "signed", "relu", "minmax"))
    _choice("ef_norm", ef_norm, ("l1", "none"))
    _choice("attn_heads", attn_heads, ("mean", "max"))
    _choice("attn_source", attn_source, ("input", "path"))
    _choice("posnorm", posnorm, ("minmax", "relu_max", "abs_sum", "none"))
    _choice("posnorm_stage", posnorm_stage, ("ieg", "final"))
    _choice("final_norm", final_norm, FINAL_NORMS)
    _choice("token_reduction", token_reduction, TOKEN_REDUCTIONS)
    use_attn = attn_layers != "none"
    layers = _attention_layers(ex, attn_layers) if use_attn else None
    if ef_mode == "autograd" and token_reduction != "sum":
        raise ValueError(f"ef_mode='autograd' supports token_reduction='sum' only, got {token_reduction!r}")
    if attn_source == "path" and attn_layers == "rollout":
        raise ValueError("attn_source='path' does not support attn_layers='rollout'")
    n_pilot = n_steps if n_pilot is None else n_pilot
    _check_int("n_pilot", n_pilot, 2)
    B, L = batch.ids.shape
    # eager attention (which keeps L×L probabilities per head for the backward) only around the
    # forwards that capture attention; the pilot and gradient passes use the model's own kernel
    with _model_prepared(ex.model):
        if use_attn and attn_source == "input":  # one forward at α = 1 for the attention (and the prediction)
            with _model_prepared(ex.model, eager=True):
                ref = _common(ex, batch, timing, target_fn, layers, full=attn_layers == "rollout", baseline=False)
        else:
            _ensure_targets(ex, batch, timing)
        chunk = ex._chunk_size(L, internal_batch_size, max_memory)
        alphas, widths, pilot = _grid(ex, batch, n_steps, n_pilot, adaptive, alloc, idg_compat_quirk, chunk, target_fn, backend, used, timing, progress)
        t = time.perf_counter()
        if ef_mode == "autograd":
            ieg, efs, path = _aieg_autograd_ef(ex, batch, alphas, widths, chunk, target_fn, ef_sign, ef_norm, backend, used, progress)
        elif ef_sign == "minmax" or not stream_ef:
            efs, path = _emphasis(ex, batch, alphas, widths, chunk, target_fn, ef_mode, ef_sign, ef_norm, backend, used, timing, progress)
            ieg = ex._integrate(batch, alphas, efs, chunk, target_fn, token_reduction, backend, used, progress)
        else:
            ieg, efs, path = ex._integrate_emphasized(batch, alphas, widths, chunk, target_fn, ef_mode, ef_sign, ef_norm, token_reduction, backend, used, progress)
        timing["path"] = time.perf_counter() - t
        valid = ~batch.fixed
        if use_attn:
            if attn_source == "input":
                a = _attention_rows(ex, batch, ref["attn"], attn_layers, attn_heads, backend, used)
            else:
                with _model_prepared(ex.model, eager=True):
                    a = _path_attention(ex, batch, alphas, efs, layers, attn_heads, chunk, target_fn, backend, used)
            if attn_exclude_first:
                a = a.clone()
                first = torch.tensor(batch.offsets, device=ex.device)
                a[torch.arange(B, device=ex.device), first] = 0
                a = a / a.sum(-1, keepdim=True).clamp_min(1e-30)
            if attn_renorm:
                a = torch.where(valid, a, torch.zeros_like(a))
                a = a / a.sum(-1, keepdim=True).clamp_min(1e-30)
        else:
            a = torch.ones(B, L, device=ex.device)
        ieg_t = torch.stack(ieg)
        used["posnorm"] = ops.resolve_backend(backend, ieg_t)
        if posnorm_stage == "ieg":
            p = ops.posnorm(ieg_t, valid, posnorm, backend=backend).float()
            scores = p * a
        else:
            p = ops.posnorm(ieg_t * a, valid, posnorm, backend=backend).float()
            scores = p
        scores = torch.where(valid, scores, torch.zeros_like(scores))
        if final_norm == "sum":
            scores = scores / scores.sum(-1, keepdim=True).abs().clamp_min(1e-30)
        elif final_norm == "l2":
            scores = scores / scores.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    ends = pilot if pilot is not None else path  # both grids hold α = 0 and α = 1
    if ends is None:
        with _model_prepared(ex.model):
            r = _common(ex, batch, timing, target_fn)
        F_in, F_base = r["F_input"], r["F_baseline"]
    else:
        F_in, F_base = torch.stack([e[-1] for e in ends]), torch.stack([e[0] for e in ends])
    info = {"F_input": F_in.tolist(), "F_baseline": F_base.tolist()}
    info.update(
        {
            "ieg": [ieg_t[b].tolist() for b in range(B)],
            "posnorm": [p[b].tolist() for b in range(B)],
            "attention": [a[b].tolist() for b in range(B)],
            "alphas": [x.tolist() for x in alphas],
            "ef": [e.tolist() for e in efs],
            "path_logits": [x.tolist() for x in path] if path is not None else None,
            "pilot_logits": [x.tolist() for x in pilot] if pilot is not None else None,
        }
    )
    opts = dict(
        n_pilot=n_pilot, adaptive=adaptive, alloc=alloc, idg_compat_quirk=idg_compat_quirk, ef_mode=ef_mode, ef_sign=ef_sign,
        ef_norm=ef_norm, attn_layers=attn_layers, attn_heads=attn_heads, attn_source=attn_source, attn_exclude_first=attn_exclude_first,
        attn_renorm=attn_renorm, posnorm=posnorm, posnorm_stage=posnorm_stage, final_norm=final_norm, token_reduction=token_reduction,
        internal_batch_size=chunk, ref_token_id=ex.ref_token_id,
    )
    return {"scores": list(scores), "options": opts, "info": info}


def _aieg_autograd_ef(ex, batch, alphas, widths, chunk, target_fn, ef_sign, ef_norm, backend, used, progress):
    """EF from autograd slopes r_m = G_m·Δ (IDG's original code): per-step token contributions are kept."""
    B, L = batch.ids.shape
    contrib = [torch.zeros(a.numel(), L, device=ex.device) for a in alphas]
    delta = batch.delta
    for b, ms, f, g in ex._path_chunks(batch, alphas, chunk, True, target_fn, backend, used, progress):
        contrib[b][ms] = (g.float() * delta[b].float()).sum(-1)
    efs, ieg = [], []
    for b in range(B):
        r = contrib[b].sum(-1)
        used["emphasis_factors"] = ops.resolve_backend(backend, r)
        ef = ops.emphasis_factors(r, alphas[b], widths[b], "autograd", ef_sign, ef_norm, backend=backend).float()
        efs.append(ef)
        ieg.append(ef @ contrib[b])
    return ieg, efs, None


def _path_attention(ex, batch, alphas, efs, layers, attn_heads, chunk, target_fn, backend, used):
    """|EF|-weighted mean of the attention rows along the path (``attn_source="path"``)."""
    cap = _AttentionCapture(ex.adapter, layers)
    rows_per_b = [torch.zeros(a.numel(), ex.adapter.n_heads, batch.ids.shape[1], device=ex.device) for a in alphas]
    try:
        for b in range(batch.B):
            for s in range(0, alphas[b].numel(), chunk):
                ms = list(range(s, min(s + chunk, alphas[b].numel())))
                X = ops.interpolate_path(batch.embeds[b], batch.baseline[b], alphas[b][ms], batch.fixed[b], backend=backend)
                rows = torch.full((len(ms),), b, device=ex.device, dtype=torch.long)
                cap.last_index = batch.last_index[rows]
                with torch.no_grad():
                    ex._hidden(batch, rows, X)
                got = cap.pop()
                rows_per_b[b][ms] = torch.stack([got[l].float() for l in layers]).mean(0)
    finally:
        cap.close()
    out = []
    for b in range(batch.B):
        w = efs[b].abs().float()
        w = w / w.sum().clamp_min(1e-30)
        if attn_heads == "max":
            out.append((w.view(-1, 1) * rows_per_b[b].amax(1)).sum(0))
        else:
            used["attention_gradient_product"] = ops.resolve_backend(backend, rows_per_b[b])
            out.append(ops.attention_gradient_product(rows_per_b[b].unsqueeze(2), None, w, "attention", backend=backend)[0].float())
    return torch.stack(out)


def _gradient_at_input(ex: Explainer, batch: _Batch, target_fn: str):
    """∂F/∂E at the input from one forward and one backward; missing targets are filled from the
    same forward (no separate prediction pass). Returns (grad [B, L, d], F [B])."""
    X = batch.embeds.clone().requires_grad_(True)
    rows = torch.arange(batch.B, device=ex.device)
    with torch.enable_grad():
        h = ex._hidden(batch, rows, X)
        ex._fill_targets(batch, h)
        f = ex.adapter.target_scores(h, batch.targets, target_fn).float()
        (g,) = torch.autograd.grad(f.sum(), X)
    return g, f.detach()


@register_method("saliency", "Gradient magnitude (Simonyan et al. 2014), L2 norm over the embedding")
def saliency(ex, batch, *, n_steps, internal_batch_size, max_memory, target_fn, backend, used, timing, progress, token_reduction: str = "l2"):
    """Saliency_i = ‖∂F/∂e_i‖₂ (``token_reduction="l2"``, default) or Σ_d |∂F/∂e_{i,d}| (``"sum_abs"``)."""
    _choice("token_reduction", token_reduction, ("l2", "sum_abs"))
    with _model_prepared(ex.model):
        t = time.perf_counter()
        g, F_in = _gradient_at_input(ex, batch, target_fn)
        timing["gradient"] = time.perf_counter() - t
    s = _reduce_tokens(g.float(), token_reduction)
    s = torch.where(batch.fixed, torch.zeros_like(s), s)
    return {"scores": list(s), "options": {"token_reduction": token_reduction}, "info": {"F_input": F_in.tolist()}}


@register_method("input_x_gradient", "Input x gradient (Shrikumar et al. 2016), summed over the embedding")
def input_x_gradient(ex, batch, *, n_steps, internal_batch_size, max_memory, target_fn, backend, used, timing, progress, token_reduction: str = "sum"):
    """InputXGradient_i = Σ_d e_{i,d} ∂F/∂e_{i,d} (signed; ``token_reduction`` sum / l2 / sum_abs)."""
    _choice("token_reduction", token_reduction, TOKEN_REDUCTIONS)
    with _model_prepared(ex.model):
        t = time.perf_counter()
        g, F_in = _gradient_at_input(ex, batch, target_fn)
        timing["gradient"] = time.perf_counter() - t
    s = _reduce_tokens(g.float() * batch.embeds.float(), token_reduction)
    s = torch.where(batch.fixed, torch.zeros_like(s), s)
    return {"scores": list(s), "options": {"token_reduction": token_reduction}, "info": {"F_input": F_in.tolist()}}


@register_method("attention", "Attention of the predicting position (last layer, mean over layers, or rollout)")
def attention(ex, batch, *, n_steps, internal_batch_size, max_memory, target_fn, backend, used, timing, progress, attn_layers="last", attn_heads: str = "mean"):
    """a_i = head-mean attention of the last (predicting) position to token i (specs/aieg.md §4, ReAGent).

    ``attn_layers``: ``"last"`` (default), ``"all"`` (mean over layers), ``"rollout"``
    (0.5·A + 0.5·I, Abnar & Zuidema 2020), or a list of layers. Special/template positions
    are reported as 0.
    """
    _choice("attn_heads", attn_heads, ("mean", "max"))
    layers = _attention_layers(ex, attn_layers)
    with _model_prepared(ex.model, eager=True):
        ref = _common(ex, batch, timing, target_fn, layers, full=attn_layers == "rollout", baseline=False)
        a = _attention_rows(ex, batch, ref["attn"], attn_layers, attn_heads, backend, used)
    a = torch.where(batch.fixed, torch.zeros_like(a), a)
    return {"scores": list(a), "options": {"attn_layers": attn_layers, "attn_heads": attn_heads}, "info": {"F_input": ref["F_input"].tolist()}}


@register_method("scaled_attention", "Scaled attention α∇α (Serrano & Smith 2019; Chrysostomou & Aletras 2022)")
def scaled_attention(ex, batch, *, n_steps, internal_batch_size, max_memory, target_fn, backend, used, timing, progress, attn_layers="last", reduce: str = "product_of_means"):
    """α∇α_i = mean_h A_{h,T,i} · mean_h ∂F/∂A_{h,T,i} at the predicting position T (specs/aieg.md §4).

    ``reduce="mean_of_products"`` gives mean_h(A ⊙ ∂A). ``attn_layers="all"`` averages layers.
    Signed; special/template positions are reported as 0.
    """
    _choice("reduce", reduce, ("product_of_means", "mean_of_products"))
    if attn_layers == "rollout":
        raise ValueError("scaled_attention supports attn_layers 'last', 'all' or a list, got 'rollout'")
    layers = _attention_layers(ex, attn_layers)
    B = batch.B
    with _model_prepared(ex.model, eager=True):
        cap = _AttentionCapture(ex.adapter, layers, full=True, keep_graph=True)
        try:
            rows = torch.arange(B, device=ex.device)
            with torch.enable_grad():
                X = batch.embeds.clone().requires_grad_(True)
                h = ex._hidden(batch, rows, X)
                ex._fill_targets(batch, h)
                f = ex.adapter.target_scores(h, batch.targets, target_fn).float()
                attn = cap.pop()
                mats = [attn[l] for l in layers]
                grads = torch.autograd.grad(f.sum(), mats)
        finally:
            cap.close()
    per_layer = []
    li = batch.last_index
    used["attention_gradient_product"] = ops.resolve_backend(backend, mats[0])
    for A, G in zip(mats, grads):
        out = []
        for b in range(B):
            Ar = A[b : b + 1, :, li[b] : li[b] + 1, :].detach()
            Gr = G[b : b + 1, :, li[b] : li[b] + 1, :]
            out.append(ops.attention_gradient_product(Ar, Gr, None, reduce, backend=backend)[0].float())
        per_layer.append(torch.stack(out))
    s = torch.stack(per_layer).mean(0)
    s = torch.where(batch.fixed, torch.zeros_like(s), s)
    return {"scores": list(s), "options": {"attn_layers": attn_layers, "reduce": reduce}, "info": {"F_input": f.detach().tolist()}}
