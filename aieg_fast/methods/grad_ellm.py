"""Grad-ELLM: gradient-weighted, loosened-attention token attribution for decoder-only LLMs.

Source: Huang & Chan, "Grad-ELLM: Gradient-based Explanations for Decoder-only LLMs",
arXiv 2601.03089 (v1; v2 retitled), adapting Grad-ECLIP (Zhao et al., ICML 2024). The paper body
was not readable; the equations and the defaults follow ``specs/grad_ellm.md`` §2.2 (derivation),
§2.3 (Grad-ECLIP), §2.4 (the "supplied code", as reproduced by a third-party Inseq port),
§2.5 (a later variant) and §5.1 (our implementable spec).

For the predicting position t and each of the top ``n_layers`` decoder layers ℓ, with the prefix
positions i:

* g^(ℓ) = ∂F/∂A^(ℓ)[t] — F is the target score (the pre-softmax logit of the target token with
  ``target_fn="logit"``, the paper's objective), A^(ℓ) the input of the output projection, the
  heads-merged A·V whose channels are v's (``grad_source="pre_o"``, the default ``consistent``
  preset), or the attention output after it (``"post_o"``, the ``paper_v1`` preset: the
  pairing of the public port of the supplied code);
* q_t, k_i, v_i — the q/k/v projections captured at the points the model adapter declares
  (pre-RoPE; K and V expanded from the KV heads to the query heads by ``kv_expansion``);
* λ_i — the "loosened" spatial weight (``lambda_mode``);
* s_i^(ℓ) = λ_i Σ_c g_c v_i[c]   (per-head λ: Σ_h λ_{h,i} Σ_{c∈h} g_c v_i[c]);
* H_i = Σ_ℓ ReLU(s_i^(ℓ))  (``relu="per_layer"``)  or  ReLU(Σ_ℓ s_i^(ℓ))  (``"after_sum"``).

One forward over the full prefix (no KV cache) and one ``torch.autograd.grad`` that reaches only
the top ``n_layers`` blocks and the output head. λ is rebuilt from the captured projections, so
any attention implementation works (eager, sdpa, ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import torch
from torch import Tensor

from ..core.capture import ProjectionCapture
from ..core.objective import target_scores
from ..core.validation import check_choice
from ..core.vjp import rows_vjp
from .base import Method, MethodOutput, Options
from .registry import register

__all__ = ["GradELLM", "GradELLMOptions", "PRESETS", "LAMBDA_MODES", "expand_kv", "masked_minmax", "spatial_weights"]

LAMBDA_MODES = ("cosine_minmax", "softmax", "headmean_minmax", "per_head_cosine_minmax")
GRAD_SOURCES = ("post_o", "pre_o")
KV_EXPANSIONS = ("legacy", "grouped")
RELU_MODES = ("per_layer", "after_sum")

#: Settings of each preset; explicit options override them. The default is ``consistent``
#: (see :class:`GradELLMOptions` for why).
PRESETS: Dict[str, Dict] = {
    # the paper's λ and layers, with gradient and value channels paired where o = Σ_i A_i v_i holds
    # (before the output projection) and KV heads mapped as the model maps them ([R], issue 13)
    "consistent": dict(n_layers=1, lambda_mode="cosine_minmax", grad_source="pre_o", kv_expansion="grouped", relu="per_layer", rope=False),
    # the pairing of the public port of the supplied code (spec §2.4, §5.1 "paper_v1")
    "paper_v1": dict(n_layers=1, lambda_mode="cosine_minmax", grad_source="post_o", kv_expansion="legacy", relu="per_layer", rope=False),
    # the KV mapping, RoPE and gradient channels as the model computes them (spec §5.1 "principled", [R])
    "corrected": dict(n_layers=1, lambda_mode="per_head_cosine_minmax", grad_source="pre_o", kv_expansion="grouped", relu="per_layer", rope=True),
}


# ============================================================================================
# pieces of the computation (also used by the tests)
# ============================================================================================
def expand_kv(x: Tensor, n_heads: int, n_kv_heads: int, mode: str) -> Tensor:
    """Expand K or V from the KV width to the query width.

    Args:
        x: Tensor[..., n_kv_heads·d] (heads concatenated in the last dimension).
        mode: ``"legacy"`` tiles the whole flattened vector n_heads/n_kv_heads times
            ([kv0 … kvN, kv0 … kvN, …]: query head h reads KV head h mod n_kv, the supplied
            code); ``"grouped"`` repeats each KV head in place (query head h reads KV head
            h // n_rep, HF ``repeat_kv``, i.e. what the model computes).

    Returns:
        Tensor[..., n_heads·d]; ``x`` itself when there is no grouped-query attention.
    """
    check_choice("kv_expansion", mode, KV_EXPANSIONS)
    if n_heads == n_kv_heads:
        return x
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) is not a multiple of n_kv_heads ({n_kv_heads})")
    rep = n_heads // n_kv_heads
    if mode == "legacy":
        return torch.cat([x] * rep, dim=-1)
    d = x.shape[-1] // n_kv_heads
    return x.reshape(*x.shape[:-1], n_kv_heads, d).repeat_interleave(rep, dim=-2).reshape(*x.shape[:-1], n_heads * d)


def masked_minmax(x: Tensor, valid: Tensor) -> Tensor:
    """Min-max over the last dimension among ``valid`` entries; 0 where invalid or constant.

    Args:
        x: Tensor[..., L]; valid: bool Tensor broadcastable to ``x``.
    """
    valid = valid.expand_as(x)
    inf = torch.tensor(float("inf"), dtype=x.dtype, device=x.device)
    mx = torch.where(valid, x, -inf).amax(-1, keepdim=True)
    mn = torch.where(valid, x, inf).amin(-1, keepdim=True)
    rng = mx - mn
    ok = valid & (rng > 0)
    out = (x - mn) / torch.where(rng > 0, rng, torch.ones_like(rng))
    return torch.where(ok, out, torch.zeros_like(x))


def _unit(x: Tensor) -> Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def spatial_weights(qt: Tensor, k: Tensor, valid: Tensor, mode: str, n_heads: int, scaling: float = 1.0,
                    softcap: Optional[float] = None) -> Tensor:
    """The loosened spatial weight λ.

    Args:
        qt: Tensor[B, D] — the query of the predicting position (heads concatenated).
        k: Tensor[B, L, D] — keys already expanded to the query width.
        valid: bool Tensor[B, L] — positions the predicting position can attend to.
        mode: ``cosine_minmax`` (cosine over the full width, min-max over valid positions),
            ``softmax`` (softmax of q·k/√D, D the full width), ``headmean_minmax`` (mean over
            heads of the scaled per-head logits, min-max), ``per_head_cosine_minmax``
            (per-head cosine, min-max per head).
        scaling: the attention scale of ``headmean_minmax`` (min-max alone makes it irrelevant;
            with ``softcap`` it sets where the cap bends).
        softcap: c of the model's attention-logit soft-capping c·tanh(s/c) (Gemma-2), applied to
            each head's scaled logit before the head mean of ``headmean_minmax``, as the model
            applies it before its softmax; None = no capping.

    Returns:
        Tensor[B, L], or Tensor[B, n_heads, L] for ``per_head_cosine_minmax``; 0 where invalid.
    """
    check_choice("lambda_mode", mode, LAMBDA_MODES)
    B, L, D = k.shape
    if mode == "cosine_minmax":
        cos = (_unit(k) * _unit(qt).unsqueeze(1)).sum(-1)
        return masked_minmax(cos, valid)
    if mode == "softmax":
        logits = (k * qt.unsqueeze(1)).sum(-1) / D**0.5
        logits = logits.masked_fill(~valid, float("-inf"))
        return torch.softmax(logits, -1).masked_fill(~valid, 0.0)
    d = D // n_heads
    kh = k.reshape(B, L, n_heads, d)
    qh = qt.reshape(B, 1, n_heads, d)
    if mode == "headmean_minmax":
        logits = (kh * qh).sum(-1) * scaling  # [B, L, H]
        if softcap:
            logits = torch.tanh(logits / softcap) * softcap
        return masked_minmax(logits.mean(-1), valid)
    cos = (_unit(kh) * _unit(qh)).sum(-1).transpose(1, 2)  # [B, H, L]
    return masked_minmax(cos, valid.unsqueeze(1))


# ============================================================================================
# the method
# ============================================================================================
@dataclass(frozen=True)
class GradELLMOptions(Options):
    """Options of :class:`GradELLM`; None takes the preset's value.

    Presets (all: last layer only, per-layer ReLU; explicit options override them):

    ============== ============= ================ ============ =====================
    preset         grad_source   kv_expansion     rope         lambda_mode
    ============== ============= ================ ============ =====================
    ``consistent`` ``pre_o``     ``grouped``      False        ``cosine_minmax``
    ``paper_v1``   ``post_o``    ``legacy``       False        ``cosine_minmax``
    ``corrected``  ``pre_o``     ``grouped``      True         ``per_head_cosine_minmax``
    ============== ============= ================ ============ =====================

    * ``consistent`` (default) changes only the two pairings of ``paper_v1`` that contradict
      the method's own derivation (spec §2.2): o[c] = Σ_i A_{h,i} v_i[c] (channel c of head h)
      holds for the channels *before* the output projection, so the gradient is taken there (``pre_o``, as Grad-ECLIP
      does, spec §2.3), and query head h reads KV head h // n_rep, as the model does
      (``grouped``). λ stays the paper's (full-width cosine of the pre-RoPE q and k, min-max),
      so the preset is Grad-ELLM with its channels lined up, not a new λ. It also runs on
      models whose query width differs from the hidden size, which ``paper_v1`` refuses.
      On a GPT-nano SST-2 dev pilot (issue 13), ``paper_v1`` scored at chance (log-odds
      −0.111 against random scores' −0.123), while ``paper_v1`` with ``grad_source="pre_o"``,
      which on that MHA model is this preset, was 3.5–6× better on every hard metric.
    * ``paper_v1``: the pairing of the public (third-party Inseq) port of the authors'
      supplied code (spec §2.4, [C-port]): the gradient after the output projection times the
      value channels before it, legacy KV tiling (query head h reads KV head h mod n_kv). Use
      it to reproduce that code; whether the paper's tables used it is not known (spec §6 q. 6).
    * ``corrected`` ([R], spec §5.1 "principled"): ``consistent`` plus a per-head λ from the
      rotated q and k (the normalised logit each head uses). It changes λ as well as the
      pairing, so it is a variant of the method, kept as an ablation.

    On a model without grouped-query attention (GPT-2) ``legacy`` and ``grouped`` coincide,
    and ``consistent`` differs from ``paper_v1`` only in ``grad_source``.

    Attributes:
        preset: ``"consistent"`` (default), ``"paper_v1"`` or ``"corrected"`` (table above).
        n_layers: number of top layers (int in [1, n_layers of the model] or ``"all"``).
        lambda_mode: ``cosine_minmax`` | ``softmax`` | ``headmean_minmax`` |
            ``per_head_cosine_minmax`` (the last needs ``grad_source="pre_o"``).
        grad_source: ``post_o`` | ``pre_o``.
        kv_expansion: ``legacy`` (query head h ↔ KV head h mod n_kv) | ``grouped``
            (h ↔ h // n_rep, as the model). Identical on models without GQA (GPT-2). Default
            from the preset, also for ``headmean_minmax``: spec §5.1's variant uses ``grouped``,
            which the default preset has; with ``paper_v1`` pass it (the recorded options name
            only what was given, so a default that hung on another option would let a resumed
            run mix two mappings under one name).
        relu: ``per_layer`` | ``after_sum``.
        rope: apply RoPE to q and k before λ (RoPE models only: recorded False on a model
            without RoPE). Default from the preset; True for ``headmean_minmax`` unless given.
    """

    preset: str = "consistent"
    n_layers: object = None
    lambda_mode: Optional[str] = None
    grad_source: Optional[str] = None
    kv_expansion: Optional[str] = None
    relu: Optional[str] = None
    rope: Optional[bool] = None

    def validate(self):
        check_choice("preset", self.preset, tuple(PRESETS))
        s = self.settings()
        check_choice("lambda_mode", s["lambda_mode"], LAMBDA_MODES)
        check_choice("grad_source", s["grad_source"], GRAD_SOURCES)
        check_choice("kv_expansion", s["kv_expansion"], KV_EXPANSIONS)
        check_choice("relu", s["relu"], RELU_MODES)
        nl = s["n_layers"]  # its upper bound (the model's layers) is checked on the model
        if nl != "all" and (isinstance(nl, bool) or not isinstance(nl, int) or nl < 1):
            raise ValueError(f"n_layers must be an int >= 1 (at most the model's layers) or 'all' (or null in a method "
                             f"spec or --option: the preset's), got {nl!r}")
        if not isinstance(s["rope"], bool):
            raise ValueError(f"rope must be True, False or None (the preset's; null in a method spec or --option), got {s['rope']!r}")

    def settings(self) -> Dict:
        """The preset with the explicit options applied (``n_layers`` not yet resolved)."""
        p = dict(PRESETS[self.preset])
        for name in ("n_layers", "lambda_mode", "grad_source", "kv_expansion", "relu", "rope"):
            val = getattr(self, name)
            if val is not None:
                p[name] = val
        if p["lambda_mode"] == "headmean_minmax" and self.rope is None:
            p["rope"] = True  # the variant of spec §2.5 applies RoPE
        return p


@register
class GradELLM(Method):
    """Grad-ELLM scores H[B, L] ≥ 0 (specs/grad_ellm.md §2.2–2.5, §5.1).

    Per example b (padded row of length L, predicting position t = ``batch.last_index[b]``,
    valid positions = attention mask ∩ {i ≤ t}) and each of the top ``n_layers`` layers ℓ:

    * captured (detached, cast to fp32): q, k, v Tensor[B, L, ·] where the model adapter's
      ``qkv_points`` say (``q_proj``/``k_proj``/``v_proj`` for LLaMA, ``c_attn`` split in three
      for GPT-2), **before RoPE**;
    * g Tensor[B, D_A] = ∂F/∂A^(ℓ) at t, one ``torch.autograd.grad`` over all chosen layers;
      A is the attention module's output (``post_o``, width hidden) or the input of the output
      projection (``pre_o``, width n_heads·d);
    * K, V expanded to n_heads·d (``kv_expansion``), optionally rotated by the layer's RoPE
      tables (``rope``), then λ (``lambda_mode``, :func:`spatial_weights`), and
      s^(ℓ) = λ ⊙ (V g) or Σ_h λ_h ⊙ (V_h g_h) Tensor[B, L].

    H = Σ_ℓ ReLU(s^(ℓ)) (``relu="per_layer"``) or ReLU(Σ_ℓ s^(ℓ)) (``"after_sum"``). Fixed
    positions (BOS / special, template, padding, and in generation the generated tokens unless
    ``interpolate_generated``) are reported as 0; they still count as keys for λ, since the
    predicting position attends to them. Scores are raw (not L1-normalised; normalise for display).
    ``n_steps``, ``internal_batch_size`` and ``max_memory`` are not used (no path integral); the
    whole batch is one forward and one partial backward.

    Options: :class:`GradELLMOptions`.

    ``info``: ``F_input`` (the explained target score), ``target_prob``, ``layer_scores``
    (per example, per layer s^(ℓ) before the ReLU, over the example's own tokens). ``options`` records the
    resolved settings and ``layers`` (0-based indices).

    Confirmed vs reconstructed (spec labels): the derivation (§2.2) and the ``paper_v1``
    preset (§2.4, [C-port]: post-o_proj gradient paired with pre-o_proj values, legacy GQA
    tiling, pre-RoPE full-width cosine min-max, per-layer ReLU, last layer only) reproduce the
    supplied code; ``headmean_minmax`` is the later variant (§2.5). Reconstructions [R]: the
    default ``consistent`` preset (``paper_v1`` with the gradient before the output projection
    and the model's KV mapping, see :class:`GradELLMOptions`), the ``corrected`` preset,
    ``per_head_cosine_minmax``, and, beyond the spec, ``rope=True`` in ``corrected`` (the
    per-head cosine of the rotated q/k, i.e. the normalised logit the model uses); λ min-max
    runs over all visible positions including fixed ones (BOS, template, generated tokens), as
    the supplied code does over the whole prefix. Deviations from spec §5.1: the default
    preset is ``consistent``, not ``paper_v1``; the target score follows ``target_fn``
    (default ``"logit"``, the paper's objective); missing targets are the model's argmax from
    the same forward; ``post_o`` on a model whose query width differs from the hidden size is
    refused (ValueError).

    Raises:
        ValueError: an unknown option value, n_layers out of range, per-head λ with post_o,
            post_o with query width ≠ hidden size.
    """

    name = "grad_ellm"
    doc = "Grad-ELLM: gradient x value x loosened attention, top layers (Huang & Chan 2026, arXiv 2601.03089)"
    Options = GradELLMOptions

    def needs_attention(self, opts) -> bool:
        return True

    def check_adapter(self, opts, adapter) -> None:
        _settings(adapter, opts)  # the n_layers range, post_o's width, per-head λ with pre_o

    def run(self, ctx, o):
        p, layers, use_rope = _settings(ctx.adapter, o)
        ad, batch = ctx.adapter, ctx.batch
        B, L = batch.ids.shape
        dev = batch.ids.device
        rows = torch.arange(B, device=dev)
        li = batch.last_index
        with ctx.timed("forward_backward"), ProjectionCapture(ad, layers, p["grad_source"], use_rope) as cap:
            with torch.enable_grad():
                h = ad.hidden_last(batch.embeds, batch.attention_mask, batch.position_ids, li)
                ctx.fill_targets(h)  # the prediction, and ctx.probs
                F = ctx.score(h)
                grads = torch.autograd.grad(F.sum(), [cap.A[l] for l in layers])
            q, k, v, pe = cap.projections(layers)
        with ctx.timed("scoring"):
            pos = torch.arange(L, device=dev)
            valid = batch.attention_mask.bool() & (pos.unsqueeze(0) <= li.unsqueeze(1))
            total, per_layer = _score(ad, p, layers, q, k, v, pe, [G[rows, li] for G in grads], rows, li, valid, use_rope)
            scores = torch.where(batch.fixed | ~valid, torch.zeros_like(total), total)
        ctx.advance(B)
        probs = ctx.probs
        info = {
            "F_input": F.detach().tolist(),
            "target_prob": [float(probs[b, ctx.targets[b]]) for b in range(B)],
            "layer_scores": batch.per_example(torch.stack(per_layer, 1)),  # [B][n_layers][example's tokens]
        }
        return MethodOutput(list(scores), dict(p, preset=o.preset, layers=layers), info)

    def run_sequence(self, sctx, o):
        """Grad-ELLM of every generation step from ONE forward over the whole sequence.

        Causal masking makes position q_t see exactly its prefix, so the captured q/k/v serve
        every step; the per-step gradients ∂F_t/∂A^(ℓ) come from one batched vector-Jacobian
        product that runs back only through the top layers. Equal to :meth:`run` on each
        prefix (tested).
        """
        p, layers, use_rope = _settings(sctx.adapter, o)
        ad, seq, qpos = sctx.adapter, sctx.seq, sctx.positions
        T, L, dev = sctx.T, seq.ids.shape[1], sctx.device
        with ProjectionCapture(ad, layers, p["grad_source"], use_rope) as cap:
            with torch.enable_grad():
                h = ad.hidden_states(seq.embeds, seq.attention_mask, seq.position_ids)[0, qpos]  # [T, D]
                F = target_scores(ad, h, sctx.step_targets, sctx.target_fn, sctx.contrast).float().view(1, T)
                grads = rows_vjp(F, [cap.A[l] for l in layers], T)  # each [T, 1, L, D_A]
            q, k, v, pe = cap.projections(layers)
        t_idx = torch.arange(T, device=dev)
        g_rows = [G[t_idx, 0, qpos] for G in grads]
        pos = torch.arange(L, device=dev)
        valid = pos.unsqueeze(0) <= qpos.unsqueeze(1)
        src = torch.zeros(T, dtype=torch.long, device=dev)
        total, per_layer = _score(ad, p, layers, q, k, v, pe, g_rows, src, qpos, valid, use_rope)
        sctx.advance(T)
        return MethodOutput(list(total), dict(p, preset=o.preset, layers=layers), {"F_input": F[0].detach().tolist()})


def _score(ad, p, layers, q, k, v, pe, g_rows, src, li, valid, use_rope):
    """Grad-ELLM scores of R rows from captured projections (spec §5.1 step 5).

    Row r reads the captured sequence ``src[r]`` (q/k/v Tensor[S, L, ·]), its predicting
    position ``li[r]`` and gradient ``g_rows[ℓ][r]`` Tensor[D_A]; ``valid`` Tensor[R, L] (the
    positions row r can see). In a layer with a sliding window w (``ad.sliding_window(l)``) the
    predicting position sees only keys i > li[r] − w (indices in the row, as the model's mask),
    so λ and the scores of that layer are restricted to them.
    Returns (total Tensor[R, L], per-layer scores before the ReLU).
    """
    H, Hkv = ad.n_heads, ad.n_kv_heads
    R, L = valid.shape
    total = torch.zeros(R, L, dtype=torch.float32, device=valid.device)
    pos = torch.arange(L, device=valid.device)
    per_layer = []
    for l, G in zip(layers, g_rows):
        w = ad.sliding_window(l)
        seen = valid if w is None else valid & (pos.unsqueeze(0) > li.unsqueeze(1) - w)
        ql, kl, vl = q[l].float(), k[l].float(), v[l].float()
        if use_rope and ad.rotates(l):  # a NoPE layer (SmolLM3) rotates nothing
            cos, sin = pe[l]
            ql = ad.apply_rope(ql, cos.float(), sin.float(), H)
            kl = ad.apply_rope(kl, cos.float(), sin.float(), Hkv)
        kx = expand_kv(kl, H, Hkv, p["kv_expansion"])[src]
        vx = expand_kv(vl, H, Hkv, p["kv_expansion"])[src]
        qt = ql[src, li]  # [R, D]
        g = G.float()  # [R, D]
        lam = spatial_weights(qt, kx, seen, p["lambda_mode"], H, ad.attention_scaling(l), ad.attn_logit_softcap)
        if lam.dim() == 3:  # per head: [R, H, L]
            gv = (vx.reshape(R, L, H, -1) * g.reshape(R, 1, H, -1)).sum(-1)  # [R, L, H]
            s = (lam.transpose(1, 2) * gv).sum(-1)
        else:
            s = lam * (vx * g.unsqueeze(1)).sum(-1)
        s = torch.where(seen, s, torch.zeros_like(s))
        per_layer.append(s)
        total = total + (s.clamp_min(0) if p["relu"] == "per_layer" else s)
    if p["relu"] == "after_sum":
        total = total.clamp_min(0)
    return total, per_layer


def _settings(ad, o: GradELLMOptions):
    """Resolved options, the 0-based top layers, and whether RoPE is applied; checks the
    model-dependent options (n_layers range, post_o width, per-head λ with pre_o)."""
    p = o.settings()
    N = ad.n_layers
    nl = N if p["n_layers"] == "all" else p["n_layers"]
    if isinstance(nl, bool) or not isinstance(nl, int) or not (1 <= nl <= N):
        raise ValueError(f"n_layers must be an int in [1, {N}] or 'all', got {p['n_layers']!r}")
    p["n_layers"] = nl
    if p["lambda_mode"] == "per_head_cosine_minmax" and p["grad_source"] != "pre_o":
        raise ValueError("lambda_mode='per_head_cosine_minmax' needs grad_source='pre_o' (gradient channels must belong to heads)")
    layers = list(range(N - nl, N))
    if p["grad_source"] == "post_o" and ad.n_heads * ad.head_dim != ad.hidden_size:
        raise ValueError(
            f"grad_source='post_o' pairs hidden-size gradient channels with value channels; this model has "
            f"query width {ad.n_heads * ad.head_dim} != hidden size {ad.hidden_size}; use grad_source='pre_o'"
        )
    p["rope"] = bool(p["rope"] and ad.has_rope)  # recorded as done: a model without RoPE applies none
    return p, layers, p["rope"]
