"""Attribution of generated text: one row of scores per generated token (specs/aieg.md §6.11).

For a prompt p and a continuation y_1 … y_T (greedy decoding, or a given text for teacher
forcing), row t explains the target y_t with the context c_t = p ⊕ y_<t (captum convention).
Only the prompt is interpolated; the generated positions y_<t are held fixed, like template and
special tokens, unless ``interpolate_generated=True`` (CAGE), which attributes them as well.

All T contexts go into one right-padded batch (example t = c_t with target y_t), and the chosen
method runs once on it, so the path points of every step are batched together. Each row is
therefore the same as ``Explainer.attribute`` on its own prefix.

:func:`attribute_generation` is attached to :class:`~aieg_fast.attribution.Explainer` as the
method ``Explainer.attribute_generation``.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Union

import torch

from .attribution import METHODS, TARGET_FNS, Explainer, _check_options, _choice, list_methods, method_options
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
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {list_methods()}, got {method!r}")
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 2:
        raise ValueError(f"n_steps must be an int >= 2, got {n_steps!r}")
    _choice("target_fn", target_fn, TARGET_FNS)
    _choice("backend", backend, ("auto", "ext", "reference"))
    _check_options(method, options, method_options(method))
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

    # ---- one batch: example t is prompt ⊕ y_<t with target y_t
    encoded = [(prompt_ids + gen_ids[:t], prompt_fixed + gen_fixed[:t]) for t in range(T)]
    batch = ex._batch(encoded, list(gen_ids), "right")
    used: Dict[str, str] = {}
    bar = None
    try:
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(desc=f"{method} ({T} steps)", unit="pt", leave=False)
        out = METHODS[method](
            ex,
            batch,
            n_steps=n_steps,
            internal_batch_size=internal_batch_size,
            max_memory=max_memory,
            target_fn=target_fn,
            backend=backend,
            used=used,
            timing=timing,
            progress=bar,
            **options,
        )
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
        fixed = batch.fixed[t, :n].cpu()
        scores[t, :n] = torch.where(fixed, torch.full_like(row, float("nan")), row)
        for i, f in enumerate(fixed.tolist()):
            if not f:
                col_attributed[i] = True
        step = {k: (v[t] if isinstance(v, list) else v) for k, v in out.get("info", {}).items()}
        step["target"] = {"id": int(gen_ids[t]), "text": ex.tokenizer.decode([gen_ids[t]])}
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
        tokens=[ex.tokenizer.decode([i]) for i in ids],
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
        ),
        model=ex.name,
        backend=dict(used) or {"all": "reference"},
        timing=timing,
        attributable=col_attributed,
        raw_tokens=ex.tokenizer.convert_ids_to_tokens(ids),
        special=[i in ex.special_ids for i in ids],
        info=info,
    )


Explainer.attribute_generation = attribute_generation
