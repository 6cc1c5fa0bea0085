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
  for step t touches only y_<t), giving the path logits of every step; the chunk's backward
  gives every step's gradients (one backward per step on a CPU, one batched VJP elsewhere:
  :func:`~aieg_fast.core.vjp.each_row_vjp`);
* ``occlusion``: one forward over the full sequence per masked group (token, word or span)
  gives that group's effect on every step;
* ``aieg``, ``integrated_decision_gradients``: one shared pilot pass over the full sequence gives
  every step's pilot logits; each step then has its own adaptive grid, so the main pass runs on a
  right-padded batch of the T contexts (all path points batched together).

Other methods (and ``shared=False``) run on the batch of the T contexts. Each row equals
``Explainer.attribute`` on its own prefix (tested).

:func:`attribute_generation` is the method ``Explainer.attribute_generation``. The per-method
shared computation lives in each method's ``run_sequence`` (:mod:`aieg_fast.methods`); this
module holds decoding / teacher forcing, the shared pilot pass and the [T, L] assembly.
"""
from __future__ import annotations

import time
from typing import Dict, List, Mapping, Optional, Sequence, Union

import torch

from . import ops
from .core.call import apply_baseline, flag_rows, resolve_call, run_samples
from .core.context import SequenceContext, progress_bar, run_method
from .core.diagnostics import warn
from .core.path import check_chunk_settings, check_step_memory, chunk_size, sequence_pilot_logits
from .core.model_state import holding_model_lock, model_prepared
from .core.inputs import as_id_list
from .core.tokens import check_in_vocab, continuation, merge_message, token_text_after, typed_specials, unknown_message, unknown_pieces
from .core.validation import DEFAULT_N_STEPS, as_int, as_ints, as_scalar_int, check_bools, check_call_settings, check_int
from .methods.registry import check_model, get_method
from .result import Attribution

__all__ = ["DEFAULT_MAX_NEW_TOKENS", "attribute_generation", "continuation_ids"]

#: tokens decoded greedily when neither ``max_new_tokens`` nor ``generated_text`` is given.
DEFAULT_MAX_NEW_TOKENS = 8


def _pad_token_id(ex) -> int:
    tok = ex.tokenizer
    for attr in ("pad_token_id", "eos_token_id"):
        v = getattr(tok, attr, None)
        if isinstance(v, int):
            return v
    return int(ex.pad_id)


def _greedy(ex, prompt_ids: List[int], max_new_tokens: int) -> List[int]:
    """Greedy continuation with ``model.generate``: the argmax of the model's logits at each step,
    whatever generation settings are stored with the model; stops early at EOS (the EOS token is
    kept). RuntimeError when it returns no new token, or when generate fails on a model whose
    ``config.return_dict`` is False (its own forward breaks then)."""
    from transformers import GenerationConfig

    ids = torch.tensor([prompt_ids], dtype=torch.long, device=ex.device)
    mask = torch.ones_like(ids)
    pad = _pad_token_id(ex)
    eos = getattr(ex.model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = getattr(ex.tokenizer, "eos_token_id", None)
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, pad_token_id=pad, eos_token_id=eos)
    # generate fills each setting left unset in cfg from model.generation_config, so a stored
    # repetition_penalty, suppress_tokens or return_dict_in_generate would apply: an empty one stands
    # in for the call (under model_prepared's lock, as its attention switch) and is given back after
    with model_prepared(ex.model), torch.no_grad():
        stored = ex.model.generation_config
        ex.model.generation_config = GenerationConfig()
        try:
            out = ex.model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg)
        except AttributeError as e:
            if getattr(ex.model.config, "return_dict", True) is False:
                raise RuntimeError(
                    f"model.generate failed with model.config.return_dict=False ({e}): in this transformers "
                    "version the model's own forward then breaks; set model.config.return_dict = True, or pass "
                    "the continuation as generated_text= (teacher forcing needs no generate)") from e
            raise
        finally:
            ex.model.generation_config = stored
    new = [int(i) for i in out[0, len(prompt_ids) :].tolist()]
    if not new:
        raise RuntimeError("model.generate returned no new token")
    return new


def _encode_prompt(ex, prompt, template):
    """:meth:`~aieg_fast.explainer.Explainer.encode_with_offsets` of one prompt; TypeError naming
    ``prompt`` for a list (a generation explains one prompt) or another type."""
    if not isinstance(prompt, (str, Mapping)):
        hint = "; a generation explains one prompt: call it once per prompt" if isinstance(prompt, (list, tuple)) else ""
        raise TypeError(f"prompt must be a str (or a mapping of template fields to str), got {type(prompt).__name__}{hint}")
    return ex.encode_with_offsets(prompt, template)


def _given_ids(ex, generated_text, context: str, cut: Optional[int] = None):
    """(ids, offsets into the text or None) of a forced continuation: a string tokenised as it
    would follow ``context`` (the encoded prompt), a list of ids as given; its first ``cut``
    tokens when given (the cautions then speak of those only)."""
    if type(generated_text) in (list, tuple):  # NumPy / 0-d tensor ids (list(np.array(ids))) as ints
        generated_text = as_ints(generated_text)
    generated_text = as_id_list(generated_text, "generated_text")
    if isinstance(generated_text, str):
        if generated_text == "":
            raise ValueError("generated_text is empty; pass the continuation to explain, or None for greedy decoding")
        ids, offsets, merged = continuation(ex.tokenizer, context, generated_text, offsets=True)
        if cut is not None and len(ids) > cut:
            ids = ids[:cut]
            if offsets is not None:  # a slow tokenizer has none: the cautions then read the whole text
                offsets = offsets[:cut]
                ends = [o[1] for o in offsets if o is not None]
                generated_text = generated_text[: max(ends)] if ends else generated_text
        if merged:
            warn(merge_message(ex.tokenizer, context, generated_text, ids, "generated_text"))
        if not ids:
            raise ValueError(f"generated_text {generated_text!r} has no tokens")
        check_in_vocab(ex.tokenizer, ids, ex.vocab_size, "generated_text")
        typed = typed_specials(ex.tokenizer, generated_text, ids, leading_bos_ok=False)
        if typed:
            warn(f"generated_text holds {typed}, typed as text: the tokenizer reads each as its special token, so the "
                 "steps there explain that token (an EOS, say), not the text")
        unknown = unknown_pieces(ex.tokenizer, generated_text, ids, offsets)
        if unknown:
            warn(unknown_message(ex.tokenizer, unknown, "generated_text"))
        return ids, offsets
    if isinstance(generated_text, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in generated_text):
        if not generated_text:
            raise ValueError("generated_text is an empty list of token ids")
        bad = [i for i in generated_text if not (0 <= i < ex.vocab_size)]
        if bad:
            raise ValueError(f"generated_text has token ids outside [0, {ex.vocab_size}): {bad}")
        return [int(i) for i in generated_text][:cut], None
    raise TypeError(f"generated_text must be a str, a list (or 1-D tensor) of token ids or None, got {type(generated_text).__name__}")


@holding_model_lock
def continuation_ids(ex, prompt: str, max_new_tokens: Optional[int] = None,
                     generated_text: Optional[Union[str, Sequence[int]]] = None, template: Optional[str] = None) -> List[int]:
    """The token ids :func:`attribute_generation` explains for these arguments, without attributing.

    Greedy decoding of ``max_new_tokens`` tokens (default 8) after the encoded prompt (stopping
    early at EOS, which is kept), or the ids of ``generated_text`` (a string tokenised as it
    would follow the prompt, or a list of ids taken as given), its first ``max_new_tokens`` when
    given (the model's positions must hold those, not the whole text). Passing
    the result as ``generated_text=`` to several ``attribute_generation`` calls makes every
    method explain the same tokens without decoding again.

    Args:
        ex: the :class:`~aieg_fast.explainer.Explainer` (a causal LM). prompt, max_new_tokens,
            generated_text, template: as :func:`attribute_generation`.

    Returns:
        List[int], the T ≥ 1 generated (or given) token ids.

    Raises:
        ValueError: a classification head, an empty prompt or ``generated_text``,
            ``max_new_tokens`` < 1, ids outside the vocabulary, or more tokens than the model's
            positions. TypeError: ``generated_text`` of another type.
        RuntimeError: ``model.generate`` returned no new token, or failed on a model whose
            ``config.return_dict`` is False.
    """
    if ex.adapter.kind != "causal_lm":
        raise ValueError("continuation_ids needs a causal language model, not a classification head")
    cut, max_new_tokens = None, as_int(max_new_tokens)
    if max_new_tokens is not None and generated_text is not None:  # the first max_new_tokens of the text
        check_int("max_new_tokens", max_new_tokens, 1)
        cut, max_new_tokens = max_new_tokens, None
    max_new_tokens = _new_tokens(max_new_tokens, generated_text)
    prompt_ids, _, full_prompt, _ = _encode_prompt(ex, prompt, template)
    gen_ids = _given_ids(ex, generated_text, full_prompt, cut)[0] if generated_text is not None else None
    _check_length(ex, len(prompt_ids), gen_ids, max_new_tokens)
    return _greedy(ex, prompt_ids, max_new_tokens) if gen_ids is None else gen_ids


@holding_model_lock
def attribute_generation(
    self,
    prompt: str,
    max_new_tokens: Optional[int] = None,
    generated_text: Optional[Union[str, Sequence[int]]] = None,
    method: str = "aieg",
    n_steps: int = DEFAULT_N_STEPS,
    internal_batch_size: Optional[int] = None,
    template: Optional[str] = None,
    backend: str = "auto",
    interpolate_generated: bool = False,
    progress: bool = False,
    *,
    target_fn="logit",
    contrast_target=None,
    baseline=None,
    alpha_range=None,
    n_baseline_samples: int = 1,
    baseline_noise: Optional[float] = None,
    seed: int = 0,
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
        self (Explainer): as a function, ``aieg_fast.attribute_generation(ex, prompt, ...)``.
        prompt (str): the prompt text (placed in ``template`` at ``{text}`` when given).
        max_new_tokens (int, optional): tokens to generate greedily (≥ 1; None: 8), stopping early
            at EOS. Refused with ``generated_text`` (cut a given text first: ``continuation_ids``).
        generated_text (str, list of int or 1-D integer tensor, optional): teacher forcing: the continuation to
            explain. A string is tokenized as it would follow the prompt (the prompt and it
            together, the prompt's own tokens taken off: no spurious leading piece such as
            SentencePiece's lone ``▁``; alone, with a warning, when the two merge at the
            boundary), and those exact ids are used (no decode / re-tokenize round trip); a list
            is taken as token ids. None (default) = greedy decoding with ``model.generate``.
        method (str): one of :func:`aieg_fast.list_methods`.
        n_steps (int): interpolation steps M ≥ 2 for path methods.
        internal_batch_size (int, optional): path points per forward/backward, over all steps
            together; None = from ``max_memory`` (default "2GB").
        template (str, optional): prompt template with ``{text}``; template tokens are fixed.
            The generated tokens follow the filled-in template.
        interpolate_generated (bool): also interpolate and attribute the generated tokens.
        target_fn: ``"logit"`` (default), ``"logprob"`` or ``"prob"`` of each y_t, or a callable
            ``logits Tensor[n, V] -> Tensor[n]`` applied at every step.
        contrast_target: one token c subtracted at every step: F_t = z_{y_t} − z_c.
        baseline, alpha_range, n_baseline_samples, baseline_noise, seed, max_memory, backend, progress:
            as :meth:`Explainer.attribute` (a baseline tensor must be [d]; noise samples run on
            the batch of the T contexts, unshared).
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
        ``attributable[i]`` says whether column i is attributed in at least one row (the spec's
        default is [T, L_p]; one shape with ``interpolate_generated``). Units: :class:`Attribution`.
        ``info``: ``generated_ids``, ``generated_text``, ``prompt``, ``prompt_length`` (L_p),
        ``teacher_forced``, ``steps`` (the method's per-row info, e.g. ``F_input``),
        ``sequence_scores`` (mean over rows, specs/aieg.md §6.11's default, NaN-skipping; its sum: ``scores.nansum(0)``),
        ``step_probs`` (p(y_t | prompt ⊕ y_<t) of each step, Inseq's ``probability`` step
        score; also ``steps[t]["target"]["prob"]``).

    Raises:
        TypeError: ``prompt``, ``generated_text`` or ``template`` of the wrong type (named).
        ValueError: a bad value of any argument, named with the value (e.g. max_new_tokens with
            ``generated_text``, too many tokens, a classification head, n_steps ``"auto"``,
            ``target_fn="label_logprob"``, a list ``contrast_target``, a baseline tensor not [d]).
            Checked before the model is touched; the model is left as it was.
        RuntimeError: greedy decoding (no ``generated_text``) on a model whose
            ``config.return_dict`` is False, which breaks the model's own forward in transformers
            5 (LLaMA, GPT-2 and others); the message says to set it True or pass ``generated_text``.
    """
    ex, t0 = self, time.perf_counter()
    # ---- validation first: nothing below touches the model until everything is checked
    n_steps, internal_batch_size, n_baseline_samples, seed = map(as_int, (n_steps, internal_batch_size, n_baseline_samples, seed))
    max_new_tokens = _new_tokens(max_new_tokens, generated_text)
    _check_generation_call(ex, max_new_tokens, options, target_fn, contrast_target, baseline, internal_batch_size, max_memory,
                           dict(interpolate_generated=interpolate_generated, progress=progress, shared=shared))
    m, opts = _method_checked(ex, method, options, n_steps, backend)
    prompt_ids, prompt_fixed, full_prompt, prompt_offsets = _encode_prompt(ex, prompt, template)
    call = resolve_call(ex, m, 1, target_fn=target_fn, contrast_target=contrast_target, baseline=baseline, alpha_range=alpha_range,
                        n_baseline_samples=n_baseline_samples, baseline_noise=baseline_noise, seed=seed, contexts=[full_prompt], opts=opts)
    gen_ids, gen_offsets = _given_ids(ex, generated_text, full_prompt) if generated_text is not None else (None, None)
    _check_length(ex, len(prompt_ids), gen_ids, max_new_tokens)
    rows = len(gen_ids) if gen_ids is not None else max_new_tokens
    check_step_memory(m, opts, n_steps, rows)
    timing: Dict[str, float] = {}
    if gen_ids is None:
        t = time.perf_counter()
        gen_ids = _greedy(ex, prompt_ids, max_new_tokens)
        timing["generate"] = time.perf_counter() - t
    gen_fixed = [(not interpolate_generated) or (i in ex.special_ids) for i in gen_ids]
    Lp, T = len(prompt_ids), len(gen_ids)
    # ---- example t is prompt ⊕ y_<t with target y_t; the full sequence is prompt ⊕ y_<T
    encoded = [(prompt_ids + gen_ids[:t], prompt_fixed + gen_fixed[:t]) for t in range(T)]
    source = _source_text(ex, full_prompt, prompt_offsets, prompt_ids, gen_ids, generated_text, gen_offsets)
    settings = dict(n_steps=n_steps, internal_batch_size=internal_batch_size, max_memory=max_memory, target_fn=call.target_fn,
                    backend=backend, words=_sequence_words(ex, m, opts, prompt_ids + gen_ids[:-1], source, prompt_fixed + gen_fixed[:-1], Lp))
    with progress_bar(progress, f"{method} ({T} steps)", on_first_move=True) as bar:
        out, used = _run(ex, m, opts, encoded, Lp, gen_ids, shared and call.n_samples == 1, settings, timing, bar, call)
    timing["total"] = time.perf_counter() - t0
    full_fixed = torch.tensor(encoded[-1][1], dtype=torch.bool)  # row t covers the first Lp + t tokens
    flags = flag_rows(m, opts, out, [(out.scores[t][: Lp + t].cpu(), ~full_fixed[: Lp + t]) for t in range(T)], call,
                      [{"step": t} for t in range(T)], adapter=ex.adapter)
    return _assemble(ex, m.name, out, used, timing, prompt, prompt_ids, gen_ids, encoded[-1][1], generated_text, source, flags,
                     dict(call.recorded_options(out.options, n_steps if m.uses_steps else None, template),
                          contrast_target=None if call.contrast[0] is None else call.contrast[0]["text"], interpolate_generated=bool(interpolate_generated),
                          max_new_tokens=None if generated_text is not None else max_new_tokens, shared=bool(shared)))


def _method_checked(ex, method, options, n_steps, backend):
    """(method, validated options) of a generation call, after the checks that need no input:
    the step settings (an int ``n_steps``: ``"auto"`` is for ``Explainer.attribute`` only), the
    options, the pilot against the steps and the model's family (ValueError / TypeError naming
    the argument)."""
    m = get_method(method)
    check_call_settings(n_steps, backend, auto_ok=False)
    opts = m.options(**options)
    m.check_steps(opts, n_steps)
    check_model(m, opts, ex.adapter)
    return m, opts


def _new_tokens(max_new_tokens, generated_text) -> int:
    """``max_new_tokens`` as decoded (8 when None; a NumPy or tensor integer as an int); refused
    with ``generated_text`` (ValueError), where it would otherwise be ignored."""
    max_new_tokens = as_int(max_new_tokens)
    if max_new_tokens is None:
        return DEFAULT_MAX_NEW_TOKENS
    if generated_text is not None:
        raise ValueError(f"max_new_tokens={max_new_tokens!r} decodes a continuation, but generated_text gives one; "
                         "give one of them (to explain the first n tokens of a given text, pass "
                         "continuation_ids(ex, prompt, n, generated_text=text) as generated_text)")
    check_int("max_new_tokens", max_new_tokens, 1)
    return max_new_tokens


def _check_generation_call(ex, max_new_tokens, options, target_fn, contrast_target, baseline, internal_batch_size, max_memory,
                           flags=None) -> None:
    """What :func:`attribute_generation` refuses of its model and per-call settings (ValueError);
    ``flags`` {name: value} must be bools ("no" is truthy: a str would silently turn one on)."""
    check_bools(flags or {})
    check_chunk_settings(internal_batch_size, max_memory)
    if ex.adapter.kind != "causal_lm":
        raise ValueError("attribute_generation needs a causal language model, not a classification head")
    check_int("max_new_tokens", max_new_tokens, 1)
    if "compile" in options:
        raise ValueError(f"compile={options['compile']!r}: attribute_generation runs uncompiled (compile= is an argument "
                         "of Explainer.attribute); leave it out")
    if "target" in options:
        raise ValueError(
            f"attribute_generation explains each generated token, so its targets are the generated tokens "
            f"(choose them with generated_text=); got target={options['target']!r}"
        )
    if isinstance(target_fn, str) and target_fn == "label_logprob":
        raise ValueError("target_fn='label_logprob' is for label decisions; attribute_generation explains free tokens")
    if isinstance(contrast_target, (list, tuple)):
        raise ValueError(f"contrast_target: attribute_generation takes one contrast token for every step, got {contrast_target!r}")
    baseline = as_scalar_int(baseline)  # a 0-d integer tensor is a token id
    if isinstance(baseline, torch.Tensor) and baseline.dim() != 1:
        raise ValueError(f"baseline: attribute_generation takes a [d] tensor, got shape {tuple(baseline.shape)}")


def _step_probs(ex, full_ids: List[int], Lp: int, gen_ids: List[int], hidden=None) -> List[float]:
    """p(y_t | prompt ⊕ y_<t) of every step: from ``hidden`` (Tensor[T, D], the final hidden
    states at the predicting positions, when the method's forward kept them:
    ``SequenceContext.input_hidden``), else from one no-grad forward over the sequence."""
    with model_prepared(ex.model), torch.no_grad():
        if hidden is None:
            ids = torch.tensor([full_ids], dtype=torch.long, device=ex.device)
            h = ex.adapter.hidden_states(ex.adapter.embeddings(ids), torch.ones_like(ids), torch.arange(ids.shape[1], device=ex.device).view(1, -1))
            hidden = h[0, Lp - 1 : Lp - 1 + len(gen_ids)]
        logits = ex.adapter.full_logits(hidden).float()
    p = torch.softmax(logits, -1)
    return [float(p[t, y]) for t, y in enumerate(gen_ids)]


def _run(ex, m, opts, encoded, Lp: int, gen_ids: List[int], shared: bool, settings: dict, timing: dict, bar, call):
    """Run method ``m`` for every step: ``run_sequence`` on one shared forward over the whole
    sequence, or ``run`` on the batch of the T contexts (with the pilot pass shared, for
    methods that have one). Returns (output with one row per step, {op: backend})."""
    full_ids, full_fixed = encoded[-1]
    if call.contrast[0] is not None and call.contrast[0]["id"] in gen_ids:
        warn(f"contrast_target {call.contrast[0]['text']!r} is generated at some step; F is 0 there")
    out, used, hidden = _run_steps(ex, m, opts, encoded, Lp, gen_ids, shared, settings, timing, bar, call)
    out.info["step_probs"] = _step_probs(ex, full_ids, Lp, gen_ids, hidden)
    return out, used


def _sequence_words(ex, m, opts, ids: List[int], source, fixed: List[bool], n_prompt: int):
    """Tensor[len(ids)] long, the word of each token of prompt ⊕ y_<T (``fixed``: which are held
    fixed) as the result's word view groups them, for methods that mask words
    (``m.needs_words``); else None. The view gives each generated token a column of its own, so
    each is a word of its own (a continuation of the prompt's last word is not masked with it)."""
    if not m.needs_words(opts):
        return None
    words = ex.token_words(ids, source, fixed)
    words[n_prompt:] = torch.arange(len(ids) - n_prompt) + int(words.max()) + 1
    return words


def _masked_words(words, batch):
    """Word ids [L_full] of the full sequence laid over a right-padded batch: Tensor[B, L] (−1
    where fixed or padding), or None."""
    if words is None:
        return None
    L = batch.ids.shape[1]
    w = words[:L].to(batch.ids.device).expand(batch.B, L)
    return torch.where(batch.fixed, torch.full_like(w, -1), w)


def _run_steps(ex, m, opts, encoded, Lp: int, gen_ids: List[int], shared: bool, settings: dict, timing: dict, bar, call):
    """(output, {op: backend}, the hidden states the shared forward kept (``SequenceContext.input_hidden``) or None)."""
    full_ids, full_fixed = encoded[-1]
    T = len(gen_ids)
    settings = dict(settings)
    words = settings.pop("words", None)
    sctx = None
    if shared and (m.run_sequence is not None or m.shares_pilot):
        seq = apply_baseline(ex, ex.build_batch([(full_ids, full_fixed)], "right"), call, m.uses_baseline)
        chunk = chunk_size(ex.adapter, len(full_ids), settings["internal_batch_size"], settings["max_memory"])
        sctx = SequenceContext(
            ex.adapter, seq, torch.arange(Lp - 1, Lp - 1 + T, device=ex.device), torch.tensor(gen_ids, dtype=torch.long, device=ex.device),
            settings["n_steps"], chunk, settings["target_fn"], settings["backend"], timing, bar, call.contrast_tensor(ex.device),
            _masked_words(words, seq),
        )
    if sctx is not None and m.run_sequence is not None:
        t = time.perf_counter()
        out, used = run_method(m, sctx, opts, sequence=True)
        timing["shared"] = time.perf_counter() - t
        return out, used, sctx.input_hidden
    batch = apply_baseline(ex, ex.build_batch(encoded, "right"), call, m.uses_baseline)
    contrast = call.contrast_tensor(ex.device)
    ctx = ex.context(batch, list(gen_ids), progress=bar, timing=timing, contrast=None if contrast is None else contrast.expand(T),
                     word_ids=_masked_words(words, batch), **settings)
    pilot_used: Dict[str, str] = {}
    if sctx is not None and getattr(opts, "adaptive", True):
        n_pilot = getattr(opts, m.pilot_option) or settings["n_steps"]
        t = time.perf_counter()
        with ops.recording() as pilot_used, model_prepared(sctx.model), torch.no_grad():
            ctx.pilot_logits = sequence_pilot_logits(sctx, n_pilot)
        timing["shared_pilot"] = time.perf_counter() - t
    out, used = run_samples(lambda c: run_method(m, c, opts, probs=False), ctx, call, token_info=m.token_info)  # p(y_t): _step_probs
    return out, {**pilot_used, **used}, None


def _check_length(ex, Lp: int, gen_ids: Optional[List[int]], max_new_tokens: int) -> None:
    limit = ex.adapter.max_positions
    n_gen = len(gen_ids) if gen_ids is not None else max_new_tokens
    ex.adapter.check_rope_switch([Lp, Lp + max(n_gen, 1) - 1], "the contexts of the generated steps (the prompt, then one more token a step)")
    if gen_ids is not None:
        if Lp + len(gen_ids) > limit:
            raise ValueError(
                f"prompt ({Lp} tokens) plus generated_text ({len(gen_ids)} tokens) exceed the model's {limit} positions"
            )
    elif Lp + max_new_tokens > limit:
        raise ValueError(f"prompt ({Lp} tokens) plus max_new_tokens={max_new_tokens} exceed the model's {limit} positions")


def _continuation(ex, ctx_ids: List[int], gen_ids: List[int]):
    """(text, offsets into it) of generated tokens, by incremental decoding after the last
    context token (so a SentencePiece word start keeps its space): a token whose bytes end
    inside a character gets an empty span, the token completing it gets the character. Bytes
    that form no character (not continued, or at the end) decode to U+FFFD, which goes to the
    tokens holding them (not those of a character completed after them, :func:`_completing`),
    one each from the last back (:func:`_share`), not to the next token's label."""
    def dec(ids):
        return ex.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    base = dec(ctx_ids)
    text, offsets, pending = "", [], []  # pending: the tokens since the last character, all with empty spans
    for k in range(len(gen_ids)):
        s = dec(ctx_ids + gen_ids[: k + 1])
        if not s.startswith(base):
            return None
        stable, last = s[len(base) :], k + 1 == len(gen_ids)
        if not last:
            stable = stable.rstrip("\ufffd")
        if not stable.startswith(text):
            return None
        added = stable[len(text) :]
        lead = len(added) - len(added.lstrip("\ufffd"))  # replacement characters the new text starts with
        if pending and lead:
            mine = lead == len(added)  # replacement characters only: token k's bytes formed none either
            holders = pending + [k] if mine else pending[: _completing(dec, ctx_ids, gen_ids, pending, k, base, added[lead:])]
            spans = _share(len(text), lead, len(holders))
            for i, span in zip(pending, spans + [[len(text) + lead] * 2 for _ in pending]):  # the completing ones: empty
                offsets[i] = span
            text = text + added[:lead]
            if mine:
                offsets.append(spans[-1])
                text, pending = stable, []
                continue
        offsets.append([len(text), len(stable)])
        pending = pending + [k] if len(stable) == len(text) else []
        text = stable
    return text, offsets


def _completing(dec, ctx_ids, gen_ids, pending: List[int], k: int, base: str, rest: str) -> int:
    """The index into ``pending`` where the bytes token ``k`` completes into ``rest`` begin: the
    last i whose tokens ``pending[i]`` … ``k`` decode to ``rest`` alone (the tokens before it
    hold bytes that formed no character); ``len(pending)`` when none does."""
    for i in range(len(pending) - 1, -1, -1):
        s = dec(ctx_ids + gen_ids[pending[i] : k + 1])
        if s.startswith(base) and s[len(base) :] == rest:
            return i
    return len(pending)


def _share(start: int, n: int, m: int) -> List[List[int]]:
    """Spans of ``n`` consecutive characters from ``start`` over ``m`` tokens in order: one each
    to the last ``min(n, m)`` tokens, the first of those taking any left over; empty spans at
    ``start`` for the tokens before them."""
    spans, pos = [], start
    for j in range(m):
        width = 0 if j < m - n else (n - m + 1 if j == max(m - n, 0) and n > m else 1)
        spans.append([pos, pos + width])
        pos += width
    return spans


def _source_text(ex, full_prompt: str, prompt_offsets, prompt_ids: List[int], gen_ids: List[int], generated_text, given_offsets=None):
    """(text, offsets) of prompt ⊕ continuation for the result; ("", []) without offsets.
    ``given_offsets``: the tokens' (start, end) in a string ``generated_text``."""
    if not prompt_offsets:
        return "", []
    n = len(full_prompt)
    if isinstance(generated_text, str) and given_offsets is not None:
        gen_offsets = ex.token_spans(gen_ids, given_offsets, n)
        return full_prompt + generated_text, prompt_offsets + gen_offsets
    cont = _continuation(ex, prompt_ids[-1:], gen_ids)
    if cont is None:  # the decoder does not extend the text token by token: no offsets
        return "", []
    text, offs = cont
    gen_offsets = ex.token_spans(gen_ids, offs, n)
    return full_prompt + text, prompt_offsets + gen_offsets


def _assemble(ex, method, out, used, timing, prompt, prompt_ids, gen_ids, full_fixed, generated_text, source, flags,
              options) -> Attribution:
    """The [T, Lp + T] result; NaN where a token is not attributed for that row; ``source`` =
    (text, offsets) of prompt ⊕ continuation; ``flags`` the degenerate-signal flags of each row."""
    Lp, T = len(prompt_ids), len(gen_ids)
    L = Lp + T
    scores = torch.full((T, L), float("nan"), dtype=torch.float32)
    col_attributed = [False] * L
    steps = []
    for t in range(T):
        n = Lp + t  # right padding: example t starts at offset 0
        row = out.scores[t][:n].detach().float().cpu()
        fixed = torch.tensor(full_fixed[:n], dtype=torch.bool)
        scores[t, :n] = torch.where(fixed, torch.full_like(row, float("nan")), row)
        for i, f in enumerate(fixed.tolist()):
            if not f:
                col_attributed[i] = True
        step = {k: (v[t] if isinstance(v, list) else v) for k, v in out.info.items()}
        step["target"] = {"id": int(gen_ids[t]), "text": token_text_after(ex.tokenizer, int(gen_ids[t])), "prob": out.info["step_probs"][t]}
        steps.append(step)
    ids = prompt_ids + gen_ids
    teacher_forced = generated_text is not None
    gen_text = generated_text if teacher_forced and isinstance(generated_text, str) else ex.tokenizer.decode(gen_ids)
    info = {
        "generated_ids": list(gen_ids),
        "generated_text": gen_text,
        "prompt": prompt,
        "prompt_length": Lp,
        "teacher_forced": teacher_forced,
        "interpolate_generated": options["interpolate_generated"],
        "steps": steps,
        "sequence_scores": torch.nanmean(scores, 0).tolist(),
        "step_probs": list(out.info.get("step_probs", [])),
    }
    special = ex.special_ids
    return Attribution(
        tokens=ex.token_texts(ids),
        token_ids=ids,
        scores=scores,
        method=method,
        target={"kind": "generation", "id": None, "ids": list(gen_ids), "text": gen_text},
        options=options,
        model=ex.name,
        backend=dict(used),
        timing=timing,
        attributable=col_attributed,
        raw_tokens=ex.tokenizer.convert_ids_to_tokens(ids),
        special=[i in special for i in ids],
        info=info,
        text=source[0],
        offsets=source[1],
        degenerate=[dict(f, step=t) for t, fl in enumerate(flags) for f in fl],
    )
