"""Attribution of generated text: one row of scores per generated token (specs/aieg.md §6.11).

For a prompt p and a continuation y_1 … y_T (greedy decoding, or a given text for teacher
forcing), row t explains the target y_t with the context c_t = p ⊕ y_<t (captum convention).
Only the prompt is interpolated; the generated positions y_<t are held fixed, like template and
special tokens, unless ``interpolate_generated=True`` (CAGE), which attributes them as well.

Shared computation (default, ``shared=True``). Causal masking makes position q_t = |c_t| − 1 of
one forward pass over the whole sequence p ⊕ y_<T see exactly c_t, so one teacher-forced
forward serves every step:

* ``saliency``, ``input_x_gradient``: one forward, per-step input gradients from one batched
  vector-Jacobian product (``torch.autograd.grad(..., is_grads_batched=True)``);
* ``attention``: one forward; row q_t of the captured attention is step t's row;
* ``scaled_attention``: one forward, the attention gradient of every step from one batched VJP
  that only runs back to the captured layers;
* ``grad_ellm``: one forward capturing q/k/v of the top layers; one batched VJP back to them;
* ``integrated_gradients``: each interpolation point is one forward over the full sequence
  (interpolating the prompt, holding generated tokens fixed — or interpolating them too, which
  for step t touches only y_<t), giving the path logits of every step; one batched VJP per
  chunk gives every step's gradients;
* ``aieg``, ``integrated_decision_gradients``: one shared pilot pass over the full sequence gives
  every step's pilot logits; each step then has its own adaptive grid, so the main pass runs on a
  right-padded batch of the T contexts (all path points batched together).

Other methods (and ``shared=False``) run on the batch of the T contexts. Each row equals
``Explainer.attribute`` on its own prefix (tested).

:func:`attribute_generation` is attached to :class:`~aieg_fast.attribution.Explainer` as the
method ``Explainer.attribute_generation``.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Union

import torch

from . import ops
from .attribution import (
    INTEGRATION_RULES,
    TOKEN_REDUCTIONS,
    Explainer,
    _AttentionCapture,
    _check_call,
    _check_int,
    _attention_layers,
    _choice,
    _model_prepared,
    _progress_bar,
    _reduce_tokens,
    quadrature,
)
from .result import Attribution

__all__ = ["attribute_generation"]


def _pad_token_id(ex: Explainer) -> int:
    tok = ex.tokenizer
    for attr in ("pad_token_id", "eos_token_id"):
        v = getattr(tok, attr, None)
        if isinstance(v, int):
            return v
    return int(ex.pad_id)


def _greedy(ex: Explainer, prompt_ids: List[int], max_new_tokens: int) -> List[int]:
    """Greedy continuation with ``model.generate``; stops early at EOS (the EOS token is kept)."""
    from transformers import GenerationConfig

    from .attribution import _model_prepared

    ids = torch.tensor([prompt_ids], dtype=torch.long, device=ex.device)
    mask = torch.ones_like(ids)
    pad = _pad_token_id(ex)
    eos = getattr(ex.model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = getattr(ex.tokenizer, "eos_token_id", None)
    # a fresh config, so sampling settings stored with the model (temperature, top_p) do not apply
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, pad_token_id=pad, eos_token_id=eos)
    with _model_prepared(ex.model), torch.no_grad():
        out = ex.model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg)
    return [int(i) for i in out[0, len(prompt_ids) :].tolist()]


def _given_ids(ex: Explainer, generated_text) -> List[int]:
    if isinstance(generated_text, str):
        if generated_text == "":
            raise ValueError("generated_text is empty; pass the continuation to explain, or None for greedy decoding")
        ids = list(ex.tokenizer(generated_text, add_special_tokens=False)["input_ids"])
        if not ids:
            raise ValueError(f"generated_text {generated_text!r} has no tokens")
        return [int(i) for i in ids]
    if isinstance(generated_text, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in generated_text):
        if not generated_text:
            raise ValueError("generated_text is an empty list of token ids")
        bad = [i for i in generated_text if not (0 <= i < ex.vocab_size)]
        if bad:
            raise ValueError(f"generated_text has token ids outside [0, {ex.vocab_size}): {bad}")
        return [int(i) for i in generated_text]
    raise TypeError(f"generated_text must be a str, a list of token ids or None, got {type(generated_text).__name__}")


# ============================================================================================
# shared computation over one teacher-forced sequence
# ============================================================================================
def _seq_F(ex: Explainer, X: torch.Tensor, q: torch.Tensor, y: torch.Tensor, target_fn: str) -> torch.Tensor:
    """F of every step for each sequence in X: Tensor[c, T] (step t reads position q[t], target y[t])."""
    c, L, _ = X.shape
    mask = torch.ones(c, L, dtype=torch.long, device=X.device)
    pos = torch.arange(L, device=X.device).expand(c, L)
    h = ex.adapter.base(inputs_embeds=X, attention_mask=mask, position_ids=pos, use_cache=False).last_hidden_state[:, q]
    T = q.numel()
    return ex.adapter.target_scores(h.reshape(c * T, -1), y.repeat(c), target_fn).float().view(c, T)


def _rows_vjp(F: torch.Tensor, inputs, T: int):
    """Per-step gradients of Σ_c F[c, t] with respect to ``inputs``: each Tensor[T, *input.shape]."""
    go = torch.zeros((T,) + tuple(F.shape), device=F.device, dtype=F.dtype)
    idx = torch.arange(T, device=F.device)
    go[idx, :, idx] = 1.0
    return torch.autograd.grad(F, inputs, grad_outputs=go, is_grads_batched=True)


def _shared_gradient(ex, seq, q, y, target_fn, times_input: bool, token_reduction: str):
    X = seq.embeds.clone().requires_grad_(True)
    with torch.enable_grad():
        F = _seq_F(ex, X, q, y, target_fn)
        (G,) = _rows_vjp(F, X, q.numel())
    G = G[:, 0].float()
    if times_input:
        G = G * seq.embeds[0].float()
    return _reduce_tokens(G, token_reduction), {"F_input": F[0].detach().tolist()}


def _shared_saliency(ex, seq, q, y, *, target_fn, token_reduction="l2", **_):
    _choice("token_reduction", token_reduction, ("l2", "sum_abs"))
    rows, info = _shared_gradient(ex, seq, q, y, target_fn, False, token_reduction)
    return rows, {"token_reduction": token_reduction}, info


def _shared_input_x_gradient(ex, seq, q, y, *, target_fn, token_reduction="sum", **_):
    _choice("token_reduction", token_reduction, TOKEN_REDUCTIONS)
    rows, info = _shared_gradient(ex, seq, q, y, target_fn, True, token_reduction)
    return rows, {"token_reduction": token_reduction}, info


def _shared_attention(ex, seq, q, y, *, target_fn, backend, used, attn_layers="last", attn_heads="mean", **_):
    _choice("attn_heads", attn_heads, ("mean", "max"))
    layers = _attention_layers(ex, attn_layers)
    cap = _AttentionCapture(ex.adapter, layers, full=True)
    try:
        with _model_prepared(ex.model, eager=True), torch.no_grad():
            F = _seq_F(ex, seq.embeds, q, y, target_fn)
            attn = cap.pop()
    finally:
        cap.close()
    if attn_layers == "rollout":
        L = seq.ids.shape[1]
        eye = torch.eye(L, device=ex.device)
        roll = eye.clone()
        for l in layers:
            A = attn[l][0].float()
            A = A.amax(0) if attn_heads == "max" else A.mean(0)
            roll = (0.5 * A + 0.5 * eye) @ roll
        rows = roll[q]
    else:
        per = []
        for l in layers:
            A = attn[l][:, :, q, :]  # [1, H, T, L]
            if attn_heads == "max":
                per.append(A[0].float().amax(0))
            else:
                used["attention_gradient_product"] = ops.resolve_backend(backend, A)
                per.append(ops.attention_gradient_product(A, None, None, "attention", backend=backend).float())
        rows = torch.stack(per).mean(0)
    return rows, {"attn_layers": attn_layers, "attn_heads": attn_heads}, {"F_input": F[0].tolist()}


def _shared_scaled_attention(ex, seq, q, y, *, target_fn, backend, used, attn_layers="last", reduce="product_of_means", **_):
    _choice("reduce", reduce, ("product_of_means", "mean_of_products"))
    if attn_layers == "rollout":
        raise ValueError("scaled_attention supports attn_layers 'last', 'all' or a list, got 'rollout'")
    layers = _attention_layers(ex, attn_layers)
    T = q.numel()
    cap = _AttentionCapture(ex.adapter, layers, full=True, keep_graph=True)
    try:
        with _model_prepared(ex.model, eager=True), torch.enable_grad():
            X = seq.embeds.clone().requires_grad_(True)
            F = _seq_F(ex, X, q, y, target_fn)
            attn = cap.pop()
            mats = [attn[l] for l in layers]
            grads = _rows_vjp(F, mats, T)  # each [T, 1, H, L, L]; backward stops at the captured layers
    finally:
        cap.close()
    t_idx = torch.arange(T, device=ex.device)
    per = []
    for A, G in zip(mats, grads):
        A_rows = A.detach()[:, :, q, :]  # [1, H, T, L]
        G_rows = G[t_idx, 0][:, :, :, :].permute(1, 0, 2, 3)[:, t_idx, q, :].unsqueeze(0)  # [1, H, T, L]
        used["attention_gradient_product"] = ops.resolve_backend(backend, A_rows)
        per.append(ops.attention_gradient_product(A_rows, G_rows, None, reduce, backend=backend).float())
    return torch.stack(per).mean(0), {"attn_layers": attn_layers, "reduce": reduce}, {"F_input": F[0].detach().tolist()}


def _shared_integrated_gradients(ex, seq, q, y, *, target_fn, backend, used, n_steps, chunk, progress, integration="trapezoid", token_reduction="sum", **_):
    _choice("integration", integration, INTEGRATION_RULES)
    _choice("token_reduction", token_reduction, TOKEN_REDUCTIONS)
    T = q.numel()
    L, d = seq.embeds.shape[1:]
    a, w = quadrature(integration, n_steps, torch.float32)
    a, w = a.to(ex.device), w.to(ex.device)
    inner = "sum" if token_reduction == "sum" else "none"
    acc = torch.zeros((T, L) if inner == "sum" else (T, L, d), device=ex.device)
    E, Eb, fixed = seq.embeds[0], seq.baseline[0], seq.fixed[0]
    delta = E - Eb
    with _model_prepared(ex.model):
        with torch.no_grad():
            ends = _seq_F(ex, torch.stack([E, Eb]), q, y, target_fn)
        for s in range(0, n_steps, chunk):
            e = min(s + chunk, n_steps)
            used["interpolate_path"] = ops.resolve_backend(backend, E)
            X = ops.interpolate_path(E, Eb, a[s:e], fixed, backend=backend).requires_grad_(True)
            with torch.enable_grad():
                F = _seq_F(ex, X, q, y, target_fn)
                (G,) = _rows_vjp(F, X, T)  # [T, c, L, d]
            used["integrate_gradients"] = ops.resolve_backend(backend, G)
            for t in range(T):
                acc[t] += ops.integrate_gradients(G[t], w[s:e], delta, inner, backend=backend).float()
            if progress is not None:
                progress.update(e - s)
    rows = acc if inner == "sum" else _reduce_tokens(acc, token_reduction)
    d_in = ends[0] - ends[1]
    info = {
        "F_input": ends[0].tolist(),
        "F_baseline": ends[1].tolist(),
        "convergence_delta": [float(rows[t, : int(q[t]) + 1].sum() - d_in[t]) for t in range(T)],
    }
    return rows, {"integration": integration, "token_reduction": token_reduction, "internal_batch_size": chunk}, info


def _shared_pilot(ex, seq, q, y, *, target_fn, backend, used, n_pilot, chunk, progress):
    """Pilot logits of every step from N forwards over the full sequence: list of Tensor[N]."""
    pa = torch.linspace(0, 1, n_pilot, device=ex.device)
    E, Eb, fixed = seq.embeds[0], seq.baseline[0], seq.fixed[0]
    out = []
    with _model_prepared(ex.model), torch.no_grad():
        for s in range(0, n_pilot, chunk):
            e = min(s + chunk, n_pilot)
            used["interpolate_path"] = ops.resolve_backend(backend, E)
            out.append(_seq_F(ex, ops.interpolate_path(E, Eb, pa[s:e], fixed, backend=backend), q, y, target_fn))
            if progress is not None:
                progress.update(e - s)
    P = torch.cat(out, 0)  # [N, T]
    return [P[:, t].contiguous() for t in range(P.shape[1])]


def _shared_grad_ellm(ex, seq, q, y, *, target_fn, progress, **options):
    from .grad_ellm import grad_ellm_shared

    options.pop("backend", None), options.pop("used", None), options.pop("n_steps", None), options.pop("chunk", None)
    return grad_ellm_shared(ex, seq, q, y, target_fn=target_fn, progress=progress, **options)


_SHARED = {
    "grad_ellm": _shared_grad_ellm,
    "saliency": _shared_saliency,
    "input_x_gradient": _shared_input_x_gradient,
    "attention": _shared_attention,
    "scaled_attention": _shared_scaled_attention,
    "integrated_gradients": _shared_integrated_gradients,
}
_SHARED_PILOT = ("aieg", "integrated_decision_gradients")


def attribute_generation(
    self: Explainer,
    prompt: str,
    max_new_tokens: int = 8,
    generated_text: Optional[Union[str, Sequence[int]]] = None,
    method: str = "aieg",
    n_steps: int = 50,
    internal_batch_size: Optional[int] = None,
    template: Optional[str] = None,
    backend: str = "auto",
    interpolate_generated: bool = False,
    progress: bool = False,
    *,
    target_fn: str = "logit",
    max_memory=None,
    shared: bool = True,
    **options,
) -> Attribution:
    """Explain each token of a generated continuation of ``prompt`` (specs/aieg.md §6.11).

    Row t attributes the target y_t with the context prompt ⊕ y_<t (captum convention): the
    prompt's text tokens are interpolated, template and special tokens and the generated tokens
    y_<t are held fixed. With ``interpolate_generated=True`` the generated tokens y_<t are
    interpolated and attributed too (CAGE); for AIEG PosNorm then runs over all of them.

    Args:
        prompt (str): the prompt text (placed in ``template`` at ``{text}`` when given).
        max_new_tokens (int): tokens to generate greedily (≥ 1); generation stops early at EOS.
            Ignored when ``generated_text`` is given.
        generated_text (str or list of int, optional): teacher forcing: the continuation to
            explain. A string is tokenized on its own with ``add_special_tokens=False`` and
            those exact ids are used (no decode / re-tokenize round trip); a list is taken as
            token ids. None (default) = greedy decoding with ``model.generate``.
        method (str): one of :func:`aieg_fast.list_methods`.
        n_steps (int): interpolation steps M ≥ 2 for path methods.
        internal_batch_size (int, optional): path points per forward/backward, over all steps
            together; None = from ``max_memory`` (default "2GB").
        template (str, optional): prompt template with ``{text}``; template tokens are fixed.
            The generated tokens follow the filled-in template.
        backend: ``"auto"``, ``"ext"`` or ``"reference"``.
        interpolate_generated (bool): also interpolate and attribute the generated tokens.
        progress (bool): progress bar over the path points.
        target_fn: ``"logit"`` (default), ``"logprob"`` or ``"prob"`` of each y_t.
        max_memory: memory budget for the automatic ``internal_batch_size``.
        shared (bool): share one teacher-forced forward over the whole sequence between the
            steps where the method allows it (module docstring); False runs the method on the
            batch of the T contexts. Both give the same rows.
        **options: method options, as for :meth:`Explainer.attribute`.

    Returns:
        :class:`Attribution` with ``scores`` Tensor[T, L_p + T]: row t for the generated token
        y_t, columns the prompt tokens followed by the T generated tokens. A cell is NaN where
        the token was not attributed for that row: not visible yet (generated token j for rows
        t ≤ j), held fixed (template, special tokens, and generated tokens unless
        ``interpolate_generated``). ``tokens`` = prompt tokens + generated tokens;
        ``attributable[i]`` says whether column i is attributed in at least one row.
        ``info``: ``generated_ids``, ``generated_text``, ``prompt``, ``prompt_length`` (L_p),
        ``teacher_forced``, ``steps`` (the method's per-row info, e.g. ``F_input``),
        ``sequence_scores`` (mean over rows, specs/aieg.md §6.11; NaN-skipping).

    Raises:
        ValueError: empty prompt, max_new_tokens < 1, empty ``generated_text``, too many tokens
            for the model, a classification head, unknown method or option, n_steps < 2.
            Checked before the model is touched; the model is left as it was.
    """
    ex = self
    t0 = time.perf_counter()
    # ---- validation first: nothing below touches the model until everything is checked
    if ex.adapter.kind != "causal_lm":
        raise ValueError("attribute_generation needs a causal language model, not a classification head")
    _check_int("max_new_tokens", max_new_tokens, 1)
    _check_call(method, n_steps, target_fn, backend, options)
    prompt_ids, prompt_fixed = ex.encode(prompt, template)
    Lp = len(prompt_ids)
    limit = ex.adapter.max_positions
    teacher_forced = generated_text is not None
    if teacher_forced:
        gen_ids = _given_ids(ex, generated_text)
        if Lp + len(gen_ids) > limit:
            raise ValueError(
                f"prompt ({Lp} tokens) plus generated_text ({len(gen_ids)} tokens) exceed the model's {limit} positions"
            )
    elif Lp + max_new_tokens > limit:
        raise ValueError(f"prompt ({Lp} tokens) plus max_new_tokens={max_new_tokens} exceed the model's {limit} positions")

    timing: Dict[str, float] = {}
    if not teacher_forced:
        t = time.perf_counter()
        gen_ids = _greedy(ex, prompt_ids, max_new_tokens)
        timing["generate"] = time.perf_counter() - t
        if not gen_ids:
            raise RuntimeError("model.generate returned no new token")
    T = len(gen_ids)
    gen_fixed = [(not interpolate_generated) or (i in ex.special_ids) for i in gen_ids]

    # ---- example t is prompt ⊕ y_<t with target y_t; the full sequence is prompt ⊕ y_<T
    encoded = [(prompt_ids + gen_ids[:t], prompt_fixed + gen_fixed[:t]) for t in range(T)]
    full_ids, full_fixed = encoded[-1]
    used: Dict[str, str] = {}
    bar = _progress_bar(progress, f"{method} ({T} steps)")
    try:
        if shared and (method in _SHARED or method in _SHARED_PILOT):
            seq = ex._batch([(full_ids, full_fixed)], [None], "right")
            q = torch.arange(Lp - 1, Lp - 1 + T, device=ex.device)
            y = torch.tensor(gen_ids, dtype=torch.long, device=ex.device)
            L_full = len(full_ids)
            chunk = ex._chunk_size(L_full, internal_batch_size, max_memory)
        if shared and method in _SHARED:
            t = time.perf_counter()
            with _model_prepared(ex.model):
                rows, opts, row_info = _SHARED[method](
                    ex, seq, q, y, target_fn=target_fn, backend=backend, used=used, n_steps=n_steps,
                    chunk=chunk, progress=bar, **options,
                )
            timing["shared"] = time.perf_counter() - t
            out = {"scores": list(rows), "options": opts, "info": row_info}
        else:
            batch = ex._batch(encoded, list(gen_ids), "right")
            if shared and method in _SHARED_PILOT and options.get("adaptive", True):
                n_pilot = options.get("n_pilot") or n_steps
                _check_int("n_pilot", n_pilot, 2)
                t = time.perf_counter()
                batch.pilot_logits = _shared_pilot(ex, seq, q, y, target_fn=target_fn, backend=backend, used=used, n_pilot=n_pilot, chunk=chunk, progress=bar)
                timing["shared_pilot"] = time.perf_counter() - t
            out = ex._run_method(method, batch, n_steps, internal_batch_size, max_memory, target_fn, backend, used, timing, bar, options)
    finally:
        if bar is not None:
            bar.close()

    # ---- assemble the [T, Lp + T] matrix; NaN where not attributed for that row
    L = Lp + T
    scores = torch.full((T, L), float("nan"), dtype=torch.float32)
    col_attributed = [False] * L
    steps = []
    for t in range(T):
        n = Lp + t  # right padding: example t starts at offset 0
        row = out["scores"][t][:n].detach().float().cpu()
        fixed = torch.tensor(full_fixed[:n], dtype=torch.bool)
        scores[t, :n] = torch.where(fixed, torch.full_like(row, float("nan")), row)
        for i, f in enumerate(fixed.tolist()):
            if not f:
                col_attributed[i] = True
        step = {k: (v[t] if isinstance(v, list) else v) for k, v in out.get("info", {}).items()}
        step["target"] = {"id": int(gen_ids[t]), "text": ex.token_texts([int(gen_ids[t])])[0]}
        steps.append(step)
    timing["total"] = time.perf_counter() - t0

    ids = prompt_ids + gen_ids
    if teacher_forced and isinstance(generated_text, str):
        gen_text = generated_text
    else:
        gen_text = ex.tokenizer.decode(gen_ids)
    info = {
        "generated_ids": list(gen_ids),
        "generated_text": gen_text,
        "prompt": prompt,
        "prompt_length": Lp,
        "teacher_forced": teacher_forced,
        "interpolate_generated": bool(interpolate_generated),
        "steps": steps,
        "sequence_scores": torch.nanmean(scores, 0).tolist(),
    }
    return Attribution(
        tokens=ex.token_texts(ids),
        token_ids=ids,
        scores=scores,
        method=method,
        target={"kind": "generation", "id": None, "ids": list(gen_ids), "text": gen_text},
        options=dict(
            out.get("options", {}),
            n_steps=n_steps,
            target_fn=target_fn,
            template=template,
            interpolate_generated=bool(interpolate_generated),
            max_new_tokens=None if teacher_forced else max_new_tokens,
            shared=bool(shared),
        ),
        model=ex.name,
        backend=dict(used),
        timing=timing,
        attributable=col_attributed,
        raw_tokens=ex.tokenizer.convert_ids_to_tokens(ids),
        special=[i in ex.special_ids for i in ids],
        info=info,
    )


Explainer.attribute_generation = attribute_generation
