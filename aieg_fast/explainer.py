"""The :class:`Explainer` facade: encode, resolve targets, build the batch, run the method, build
the result. The methods live in :mod:`aieg_fast.methods`, the engine in :mod:`aieg_fast.core`,
generation in :mod:`aieg_fast.generation`."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence, Union

import torch

from .core.baselines import default_ref_token
from .core.batch import Batch, build_batch
from .core.diagnostics import warn
from .core.adaptive_quadrature import AUTO_MAX_STEPS
from .core.call import apply_baseline, check_targets_against, flag_rows, multi_token_inputs, resolve_call, run_samples, target_prob
from .core.compiled import CompiledStack, check_compile, compile_report, compiled_stack
from .core.context import Context, progress_bar, run_method, shared_paths
from .core.inputs import fill_template, fixed_by_specials, inputs_and_targets
from .core.path import bytes_per_path_point, check_chunk_settings, check_step_memory
from .core.model_state import holding_model_lock
from .core.tokens import check_in_vocab, continuation, encoding_warnings, merge_message, one_bos, token_text_after
from .core.validation import DEFAULT_N_STEPS, as_int, check_bool, check_call_settings, check_choice, check_placement, parse_device, parse_dtype
from .display.words import token_word_index
from .generation import attribute_generation
from .prediction import label_probs, predict
from .methods.registry import METHODS, check_model, get_method
from .models import adapter_for, load_hf_model
from .result import Attribution

__all__ = ["Explainer", "load_model"]


class Explainer:
    """A loaded model plus tokenizer, ready to explain predictions.

    Create with :func:`load_model`. Set-up that does not depend on the input (architecture
    lookup, special ids, reference token) happens once here, not per call.

    Thread safety: an Explainer may be shared between threads. Each call holds a lock of its
    model (:func:`~aieg_fast.core.model_state.model_lock`) while it runs, so calls on one model
    run one after the other and each gives the result it gives on one thread (its hooks, eval
    mode and attention implementation are its own). Threads bring no speed-up on one model;
    load one model per thread for that.

    Attributes:
        model: the ``transformers`` model. tokenizer: its tokenizer. name: model name / path.
        adapter (DecoderAdapter): architecture facts (layers, heads, output head).
        ref_token_id (int): the baseline token (PAD, else EOS, else UNK, skipping all-zero embeddings; else the
            lowest id whose embedding is not all zeros; 0 with an ``AttributionWarning`` when every row is zero).
            Pass ``ref_token_id=`` to :func:`load_model` to choose another.
        compile: the default of :meth:`attribute`'s ``compile`` (``load_model(compile=...)``).
        compiled_stacks (dict): backend name → its :class:`~aieg_fast.core.compiled.CompiledStack`
            (the compiled graphs, kept between calls).
        loaded_by_name (bool): :func:`load_model` loaded the model by its name (read by
            ``models.run_model_settings``: the embedded models' weights are not hashed).
    """

    loaded_by_name = False

    def __init__(self, model, tokenizer, name: str = "", device=None, ref_token_id: Optional[int] = None, compile=False):
        check_compile(compile)
        self.compile = compile
        self.compiled_stacks: Dict[str, CompiledStack] = {}
        self.adapter = adapter_for(model)  # raises for unsupported architectures
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        device = parse_device(device)
        if device is not None and len(set(map(str, (getattr(model, "hf_device_map", None) or {}).values()))) > 1:
            raise ValueError(f"device={str(device)!r}: the model is placed over several devices by device_map "
                             f"({model.hf_device_map}); it cannot be moved to one")
        if device is not None:
            model.to(device)
        #: where inputs go: the token embeddings' device (the first block's with ``device_map``)
        self.device = self.adapter.input_device
        self._special = (-1, frozenset())
        ref_token_id = as_int(ref_token_id)  # a NumPy or one-element tensor integer as an int
        if ref_token_id is not None and (isinstance(ref_token_id, bool) or not isinstance(ref_token_id, int)
                                         or not 0 <= ref_token_id < self.vocab_size):
            raise ValueError(f"ref_token_id must be a token id in [0, {self.vocab_size}), got {ref_token_id!r}")
        self.ref_token_id = default_ref_token(self.adapter, tokenizer) if ref_token_id is None else int(ref_token_id)
        self.pad_id = self.ref_token_id
        #: id → decoded text of that token alone, filled as tokens are seen (:meth:`token_texts`)
        self.token_text_cache: Dict[int, str] = {}
        self._path_memo: Optional[Dict[tuple, Any]] = None

    def shared_paths(self):
        """Context manager: calls inside share path passes where a method allows it (AIEG
        variants differing only after the path); same scores as separate calls. The model must
        not change inside the block (:func:`aieg_fast.core.context.shared_paths`)."""
        return shared_paths(self)

    @property
    def vocab_size(self) -> int:
        """Rows of the input embedding matrix, read from the model on each use (so a token added
        with ``resize_token_embeddings`` is a valid id at once)."""
        return int(self.adapter.embeddings.weight.shape[0])

    @property
    def special_ids(self) -> frozenset:
        """Ids of the tokenizer's special tokens (held fixed); read again when the tokenizer's
        length changes (tokens added)."""
        n = len(self.tokenizer)
        if self._special[0] != n:
            self._special = (n, frozenset(int(i) for i in (getattr(self.tokenizer, "all_special_ids", None) or [])))
            self.token_text_cache.clear()
        return self._special[1]

    # ------------------------------------------------------------------ encoding
    def token_texts(self, ids: Sequence[int]) -> List[str]:
        """The decoded text of each token id on its own (``tokenizer.decode([i])``), cached per
        Explainer (:attr:`token_text_cache`) so that repeated calls do not decode the same
        tokens again.

        Args:
            ids: token ids (ints).

        Returns:
            List[str], one text per id, in order.
        """
        cache = self.token_text_cache
        for i in ids:
            if i not in cache:
                cache[i] = self.tokenizer.decode([i])
        return [cache[i] for i in ids]

    def encode(self, text: str, template: Optional[str] = None, add_special_tokens: bool = True):
        """Token ids of ``text`` (optionally placed in ``template`` at ``{text}``) and a fixed mask.

        ``text`` may be a mapping of fields placed in the template at ``{<field>}`` each
        (:func:`~aieg_fast.core.inputs.fill_template`; BoolQ's passage and question): every
        field is attributed. Positions outside the text (template tokens) and special tokens are held fixed. The ids
        start with exactly one BOS (for a tokenizer that adds one) whatever the text holds: a
        text or template that starts with the BOS string (a chat template rendered to text) gets
        no second one.

        Returns:
            (ids List[int], fixed List[bool])

        Raises:
            ValueError: empty text (or field), a template without ``{text}`` (or a field), or
                more tokens than the model's maximum positions.

        Warns:
            AttributionWarning: the text holds a special-token string (say ``"<|endoftext|>"``)
                that became that special token, or characters the tokenizer can only encode as
                its unknown token; both are held fixed.
        """
        ids, fixed, _, _ = self.encode_with_offsets(text, template, add_special_tokens)
        return ids, fixed

    def encode_with_offsets(self, text: str, template: Optional[str] = None, add_special_tokens: bool = True):
        """:meth:`encode` plus the encoded string and each token's character offsets in it.

        Returns:
            (ids, fixed, full str (the template filled in), offsets): ``offsets`` is a list of
            ``[start, end)`` per token (None for special tokens) from a fast tokenizer, or
            ``[]`` for a slow tokenizer (words then follow the marker rule; a template needs a
            fast tokenizer).

        Raises:
            ValueError: as :meth:`encode`.

        Warns:
            AttributionWarning: as :meth:`encode`.
        """
        full, fields = fill_template(text, template)
        fast = bool(getattr(self.tokenizer, "is_fast", False))
        enc = self.tokenizer(full, add_special_tokens=add_special_tokens, return_offsets_mapping=fast or template is not None)
        ids, spans = one_bos(list(enc["input_ids"]), enc.get("offset_mapping"), getattr(self.tokenizer, "bos_token_id", None))
        check_in_vocab(self.tokenizer, ids, self.vocab_size, "text")
        for message in encoding_warnings(self.tokenizer, text, full, ids, spans, leading_bos_ok=fields[0][0] == 0):
            warn(message)
        special = self.special_ids
        fixed = [i in special for i in ids]
        if template is not None:
            for k, (s, e) in enumerate(spans):
                if not any(e > a and s < b for a, b in fields):
                    fixed[k] = True
        limit = self.adapter.max_positions
        if len(ids) > limit:
            where = f" in its template ({sum(not f for f in fixed)} of them attributable)" if template is not None else ""
            raise ValueError(f"text is {len(ids)} tokens long{where}, but the model accepts at most {limit} positions")
        if all(fixed):
            raise ValueError(f"text has no attributable token (all {len(ids)} are special or template): {text!r}")
        offsets = [] if spans is None else self.token_spans(ids, spans)
        return ids, fixed, full, offsets

    def token_words(self, ids: Sequence[int], source=("", []), fixed: Sequence[bool] = ()) -> torch.Tensor:
        """Tensor[len(ids)] long: the word index of each token, words as the results' word view
        groups them (:func:`~aieg_fast.display.words.token_word_index`: the offsets rule when
        ``source`` = (encoded string, offsets) has offsets, else the marker rule; no word across
        held-fixed and attributed tokens, ``fixed`` of each id); tokens past the offsets (a
        teacher-forced target) are words of their own."""
        text, offsets = source
        offs = (list(offsets) + [None] * len(ids))[: len(ids)] if offsets else None
        raw = self.tokenizer.convert_ids_to_tokens(list(ids))
        return torch.tensor(token_word_index(text, offs, raw, [i in self.special_ids for i in ids], fixed), dtype=torch.long)

    def _word_ids(self, batch: Batch, sources) -> torch.Tensor:
        """Tensor[B, L] long word index of each position of the batch (−1 where fixed)."""
        out = torch.full(tuple(batch.ids.shape), -1, dtype=torch.long)
        for b, src in enumerate(sources):
            off, n = batch.offsets[b], batch.lengths[b]
            out[b, off : off + n] = self.token_words(batch.ids[b, off : off + n].tolist(), src, batch.fixed[b, off : off + n].tolist())
        return torch.where(batch.fixed.cpu(), torch.full_like(out, -1), out).to(self.device)

    def token_span(self, token_id: int, start: int, end: int, shift: int = 0):
        """``[start + shift, end + shift]``, or None for a special token (the UNK token keeps its
        span: it stands for characters of the text)."""
        return self.token_spans([token_id], [(start, end)], shift)[0]

    def token_spans(self, ids: Sequence[int], spans, shift: int = 0) -> List[Optional[List[int]]]:
        """:meth:`token_span` of every token: ``ids`` with their ``(start, end)`` ``spans``
        (same length), the tokenizer's special ids and UNK id read once for the whole list."""
        special = self.special_ids
        unk = getattr(self.tokenizer, "unk_token_id", None)
        return [None if i in special and (i != unk or e <= s) else [int(s) + shift, int(e) + shift]
                for i, (s, e) in zip(ids, spans)]

    def resolve_target(self, target, ids: Optional[List[int]] = None, multi_token: bool = False, *,
                       context: Optional[str] = None) -> Dict[str, Any]:
        """Turn a user target into ``{"kind", "id", "text"}``.

        Args:
            target: None (the model's prediction, filled in later), a token string (must be a
                single token), a token id, or a class index / label name for a classifier (a
                string of digits that names no label is the index: ``"1"`` from a command line).
            ids: unused (kept for callers that pass it).
            multi_token: accept a string of several tokens: ``{"kind": "tokens", "id": None,
                "ids": [...], "text"}``.
            context: the prompt the target follows (template filled in): a string target is tokenised
                as the model would produce it there (:func:`~aieg_fast.core.tokens.continuation`; with
                SentencePiece ``"good"`` after ``"the movie is"`` is ``good``, not ``▁good``). None: alone.

        Raises:
            ValueError: an empty string, one that is not a single token (unless ``multi_token``), an
                id out of range, an unknown label. TypeError: a target neither a str, an int nor None
                (NumPy integers and one-element integer tensors, ``logits.argmax()``, are ints).

        Warns:
            AttributionWarning: the target's text merges with the end of ``context`` (the
                prompt's last tokens change when it follows); it is then tokenised alone.
        """
        target = as_int(target)
        if self.adapter.kind == "classifier":
            n = self.adapter.num_labels
            id2label = getattr(self.model.config, "id2label", {}) or {}
            if target is None:
                return {"kind": "class", "id": None, "text": None}
            if isinstance(target, str):
                label2id = {str(v): int(k) for k, v in id2label.items()}
                if target not in label2id and not target.strip().isdecimal():
                    raise ValueError(f"target {target!r} is not a label of this classifier; labels: {sorted(label2id)}, "
                                     f"or a class index in [0, {n})")
                target = label2id[target] if target in label2id else int(target)  # "1" typed on a command line: index 1
            if isinstance(target, bool) or not isinstance(target, int):
                raise TypeError(f"target must be a class index (int) or a label name (str), got {type(target).__name__} {target!r}")
            if not 0 <= target < n:
                raise ValueError(f"target must be a class index in [0, {n}), got {target!r}")
            return {"kind": "class", "id": int(target), "text": str(id2label.get(target, target))}
        if target is None:
            return {"kind": "token", "id": None, "text": None}
        if isinstance(target, bool) or not isinstance(target, (int, str)):
            raise TypeError(f"target must be a token string, a token id or None, got {type(target).__name__} {target!r:.60}")
        if target == "":
            raise ValueError("target is empty: pass a token string, a token id, or None for the model's prediction")
        if isinstance(target, int):
            if not (0 <= target < self.vocab_size):
                raise ValueError(f"target token id must be in [0, {self.vocab_size}), got {target}")
            return {"kind": "token", "id": int(target), "text": token_text_after(self.tokenizer, int(target))}
        toks = self.target_ids(target, context)
        check_in_vocab(self.tokenizer, toks, self.vocab_size, "target")
        if multi_token and len(toks) > 1:
            return {"kind": "tokens", "id": None, "ids": [int(t) for t in toks], "text": target}
        if len(toks) != 1:
            pieces = self.tokenizer.convert_ids_to_tokens(toks)
            raise ValueError(
                f"target {target!r} is not a single token: it tokenizes as {pieces} (ids {toks})"
                f"{' after the prompt' if context is not None else ''}; "
                "pass one token (a leading space often matters) or a token id; with target_fn='logprob' a "
                "string of several tokens is explained as the sum of their log-probabilities"
            )
        return {"kind": "token", "id": int(toks[0]), "text": target}

    def target_ids(self, text: str, context: Optional[str] = None, what: str = "target") -> List[int]:
        """Token ids of ``text`` as the model would produce it after ``context``
        (:func:`~aieg_fast.core.tokens.continuation`), or alone when ``context`` is None; warns
        (AttributionWarning, naming ``what``) when the boundary merges."""
        if context is None:
            return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]
        toks, _, merged = continuation(self.tokenizer, context, text)
        if merged:
            warn(merge_message(self.tokenizer, context, text, toks, what))
        return toks

    def build_batch(self, encoded: Sequence[tuple], padding_side: str = "right") -> Batch:
        """A :class:`~aieg_fast.core.batch.Batch` of encoded examples ((ids, fixed) pairs from
        :meth:`encode`), padded with :attr:`pad_id`, baseline from :attr:`ref_token_id`."""
        return build_batch(self.adapter, encoded, self.pad_id, self.ref_token_id, padding_side, self.device)

    def context(self, batch: Batch, targets: Optional[Sequence[Optional[int]]] = None, **settings) -> Context:
        """The :class:`~aieg_fast.core.context.Context` of a call on ``batch``.

        Args:
            batch: from :meth:`build_batch`.
            targets: one target id per example; None entries (or None) = the model's prediction,
                filled by the first forward that needs it.
            **settings: ``n_steps``, ``internal_batch_size``, ``max_memory``, ``target_fn``,
                ``backend``, ``progress``, ``pilot_logits``, ``word_ids`` (see :class:`Context`).
        """
        targets = [None] * batch.B if targets is None else list(targets)
        tg = torch.tensor([-1 if t is None else int(t) for t in targets], dtype=torch.long, device=self.device)
        return Context(self.adapter, batch, tg, ref_token_id=self.ref_token_id, path_memo=self._path_memo, **settings)

    def bytes_per_path_point(self, L: int) -> int:
        """Estimated autograd memory of one interpolation point of length L (bytes); see
        :func:`~aieg_fast.core.path.bytes_per_path_point`."""
        return bytes_per_path_point(self.adapter, L)

    # ------------------------------------------------------------------ public API
    @holding_model_lock
    def attribute(
        self,
        text: Union[str, Sequence[str], None] = None,
        method: str = "aieg",
        target=None,
        n_steps: Union[int, str] = DEFAULT_N_STEPS,
        internal_batch_size: Optional[int] = None,
        *,
        input_ids=None,
        template: Optional[str] = None,
        target_fn="logit",
        label_set: Optional[Sequence] = None,
        contrast_target=None,
        baseline=None,
        alpha_range=None,
        n_baseline_samples: int = 1,
        baseline_noise: Optional[float] = None,
        seed: int = 0,
        backend: str = "auto",
        max_memory=None,
        padding_side: str = "right",
        progress: bool = False,
        tolerance: Optional[float] = None,
        max_steps: Optional[int] = None,
        compile=None,
        **options,
    ):
        """Explain the model's prediction for ``text`` (or ``input_ids``) with ``method``.

        Args:
            text (str or list of str; a pandas column too): the input; a list is attributed as one padded batch and
                gives one result per text (same scores as one at a time). A text may be a mapping
                of fields, each at its ``{field}`` of the template (all attributed).
            input_ids: token ids in place of ``text``, used as given (no tokenisation, no BOS
                added, no template): a list of ints or Tensor[L] long, a batch (a list of such
                lists, Tensor[B, L] long), or a tokenizer's output (its mask unpads). Special tokens held fixed.
            method (str): one of :func:`list_methods` (default ``"aieg"``).
            target: token string (single token), token id, or class index / label for a
                classification head; None = the model's own prediction (greedy next token or
                argmax class). A list gives one target per text (several tokens: ``"logprob"``).
            n_steps (int or "auto"): path steps M ≥ 2 (checked for every method, used by the path
                methods). ``"auto"`` (IG): refine a trapezoid grid, every gradient kept, until the
                relative completeness error |Σ s − ΔF| / |ΔF| ≤ ``tolerance`` (default 0.05) or
                ``max_steps`` points (default 257) (:mod:`~aieg_fast.core.adaptive_quadrature`).
                NumPy / one-element tensor integers are ints in every int setting (``attn_layers`` items: NumPy or 0-d).
            internal_batch_size (int, optional): path points per forward/backward; bounds peak
                memory. None = chosen from ``max_memory`` (default "2GB").
            template (str, optional): prompt with ``{text}`` (or ``{field}``s); its tokens are held fixed.
            target_fn: the explained F (:mod:`aieg_fast.core.objective`): ``"logit"`` (default),
                ``"logprob"``, ``"prob"`` (specs/aieg.md §6.2), ``"label_logprob"`` (log p of the
                target renormalised over ``label_set``: what label-set metrics score), or a
                callable ``logits Tensor[n, V] -> Tensor[n]`` row by row (n: rows of a chunk).
            label_set: the label tokens (strings or ids; a 1-D id tensor too) of ``target_fn="label_logprob"``; the
                target must be one of them (None target: the most likely of them).
            contrast_target: a token (or class) c, or one per text: F = z_target − z_c
                (p_target − p_c with ``target_fn="prob"``; Inseq's ``contrast_logits_diff``).
            baseline: for integrated_gradients, integrated_decision_gradients and aieg (the path's start), occlusion
                and heta (what replaces a masked token): None (the method's default: the reference token
                ``ref_token_id``; ``"zero"`` for heta), ``"zero"``, ``"mean"``, ``"unk"``, ``"pad"``, ``"eos"``, a token
                id, or a Tensor [d] / [L, d] in the space of ``model.get_input_embeddings()(ids)`` (HF's ``inputs_embeds``,
                Gemma's √d scale included: the input's own gives x′ = x; :mod:`aieg_fast.core.baselines`).
            alpha_range: ``(α0, 1)``: integrate from x(α0). n_baseline_samples: average over this many baselines x′ + σε
                (ε ~ N(0, 1), seeded by ``seed`` and each text's token ids: the same draws alone or in any batch);
                ``baseline_noise`` = σ in those units (default 0.1 × the RMS of each text's attributable embeddings; recorded).
            backend: ``"auto"``, ``"ext"`` or ``"reference"`` for the kernels. max_memory: memory
                budget for the automatic internal batch size (bytes or "4GB"). padding_side:
                ``"right"`` or ``"left"``. progress: a progress bar over the path points.
            compile: True (inductor) or a torch.compile backend: compiled IG / IDG / AIEG path chunks
                (:mod:`~aieg_fast.core.compiled`); False: eager; None: ``load_model(compile=)``'s.
            **options: method options (``method_options(method)``; each method's ``Options``
                class documents them).

        Returns:
            :class:`Attribution` (or a list, one per text): ``scores`` Tensor[L] over the text's
            tokens (template held fixed at 0; units and sign: :class:`Attribution`).

        Raises:
            TypeError: a wrong type of text, input_ids, template, target, target_fn, label_set or baseline.
            RuntimeError: a gradient method called inside ``torch.inference_mode()``.
            ValueError: a bad value of any argument, named with the value received (e.g. a target
                that is not one token, n_steps too large for ``max_memory``, a baseline for a method
                without one). All checked before any model work; the model is left as it was.

        Warns:
            AttributionWarning: a row without usable signal (raw signal zero, constant or not
                finite; a normalisation that stretched a flat raw signal; a large IG completeness
                error), also recorded in ``res.degenerate``; non-finite values warn as ``NonFiniteAttributionWarning``
                (also a RuntimeWarning). A target whose text merges with the end of the prompt, a
                special-token string typed in the text, a model in training mode.
        """
        n_steps, internal_batch_size, n_baseline_samples, seed, max_steps = map(as_int, (n_steps, internal_batch_size, n_baseline_samples, seed, max_steps))
        m, opts, compiled = self._method_checked(method, options, n_steps, backend, tolerance, max_steps, padding_side,
                                                 internal_batch_size, max_memory, n_baseline_samples, compile, progress)
        inputs, targets, single, given_ids = inputs_and_targets(text, input_ids, target, template, self.vocab_size,
                                                                self.adapter.max_positions, self.tokenizer)
        steps = n_steps if n_steps != "auto" else (max_steps or AUTO_MAX_STEPS)
        check_step_memory(m, opts, steps, len(inputs))
        t0 = time.perf_counter()
        encoded, sources = self._encode_ids(inputs) if given_ids else self._encode_all(inputs, template, single)
        call = resolve_call(self, m, len(inputs), target_fn=target_fn, label_set=label_set, contrast_target=contrast_target,
                            baseline=baseline, alpha_range=alpha_range, n_baseline_samples=n_baseline_samples,
                            baseline_noise=baseline_noise, seed=seed, contexts=[full for full, _ in sources], opts=opts)
        tinfo = [self.resolve_target(t, multi_token=target_fn == "logprob", context=c) for t, (c, _) in zip(targets, sources)]
        step_ids, encoded = multi_token_inputs(m, call, tinfo, encoded, self.adapter.max_positions, self.device,
                                               sorted(n for n, c in METHODS.items() if c.multi_token_targets))
        check_targets_against(call, [ti["id"] for ti in tinfo], [ti.get("text") for ti in tinfo])
        batch = apply_baseline(self, self.build_batch(encoded, padding_side), call, m.uses_baseline)
        words = self._word_ids(batch, sources) if m.needs_words(opts) else None
        with progress_bar(progress, method, on_first_move=True) as bar:
            ctx = self.context(batch, [ti["id"] for ti in tinfo], n_steps=n_steps, internal_batch_size=internal_batch_size,
                               max_memory=max_memory, target_fn=call.target_fn, backend=backend, progress=bar,
                               contrast=call.contrast_tensor(self.device), step_ids=step_ids, word_ids=words,
                               tolerance=tolerance, max_steps=max_steps, compiled=compiled)
            out, used = run_samples(lambda c: run_method(m, c, opts), ctx, call, token_info=m.token_info)
        flags = flag_rows(m, opts, out, [(out.scores[b][r], ~batch.fixed[b][r]) for b, r in enumerate(batch.spans)], call,
                          None if single else [{"text": b} for b in range(batch.B)], self.adapter, ctx.targets.tolist(), batch.offsets)
        ctx.timing["total"] = time.perf_counter() - t0
        trim = 0 if step_ids is None else step_ids.shape[1] - 1
        results = self._results(batch, ctx, out, call, tinfo, method, used, sources, trim, flags, template)
        return results[0] if single else results

    def _method_checked(self, method, options, n_steps, backend, tolerance, max_steps, padding_side, internal_batch_size,
                        max_memory, n_baseline_samples=1, compile=None, progress=False):
        """(method, validated options, compiled stack or None) of a call, after the checks of its
        settings that need no input (ValueError / TypeError naming the argument)."""
        check_bool("progress", progress)
        m = get_method(method)
        check_call_settings(n_steps, backend, tolerance, max_steps)
        if n_steps == "auto" and n_baseline_samples != 1:
            raise ValueError(f"n_steps='auto' with n_baseline_samples={n_baseline_samples!r}: each noisy baseline would "
                             "choose its own grid and the average has no single completeness error; pass an int n_steps")
        opts = m.options(**options)
        m.check_steps(opts, n_steps)
        check_model(m, opts, self.adapter)
        check_choice("padding_side", padding_side, ("left", "right"))
        check_chunk_settings(internal_batch_size, max_memory)
        check_compile(compile)
        return m, opts, compiled_stack(self.compiled_stacks, self.adapter, self.compile if compile is None else compile)

    def _results(self, batch, ctx, out, call, tinfo, method, used, sources, trim, flags, template):
        """The :class:`Attribution` of every example of a call (:meth:`_result`), with the
        call's settings recorded in their options (and what the compiled path did in their info)."""
        out.info.update(compile_report(ctx))
        n_steps = ctx.n_steps if METHODS[method].uses_steps else None
        for b, c in enumerate(call.contrast):
            if c is not None:
                tinfo[b] = dict(tinfo[b], contrast_id=c["id"], contrast_text=c["text"])
        return [self._result(batch, b, ctx, out, tinfo[b], method, call.recorded_options(out.options, n_steps, template, b), used, sources[b], trim,
                             flags[b]) for b in range(batch.B)]

    def _encode_all(self, texts, template, single: bool):
        """(ids, fixed) and (encoded string, offsets) of every text; a list's error names its item."""
        encoded, sources = [], []
        for i, t in enumerate(texts):
            try:
                ids, fixed, full, offsets = self.encode_with_offsets(t, template)
            except ValueError as e:
                if single:
                    raise
                raise ValueError(f"text[{i}]: {e}") from None  # name the item of the list
            encoded.append((ids, fixed))
            sources.append((full, offsets))
        return encoded, sources

    def _encode_ids(self, rows):
        """(ids, fixed) of id sequences given by the caller (special tokens fixed) and their
        sources (the decoded text, no offsets: words follow the tokens' markers)."""
        encoded = fixed_by_specials(rows, self.special_ids)
        return encoded, [(self.tokenizer.decode(ids), []) for ids, _ in encoded]

    def _label(self, class_id: int) -> str:
        return str((getattr(self.model.config, "id2label", {}) or {}).get(class_id, class_id))

    def _result(self, batch: Batch, b: int, ctx: Context, out, tinfo: Dict[str, Any], method: str, options, used,
                source=("", []), trim: int = 0, flags=()) -> Attribution:
        """The :class:`Attribution` of example ``b`` (its unpadded span without the last ``trim``
        tokens: the teacher-forced part of a multi-token target); ``source`` = (encoded string,
        offsets) from :meth:`encode_with_offsets`."""
        off, n = batch.offsets[b], batch.lengths[b] - trim
        ids = batch.ids[b, off : off + n].tolist()
        fixed = batch.fixed[b, off : off + n].tolist()
        tgt = dict(tinfo)
        tid = int(ctx.targets[b])
        tgt["id"] = tid if tgt["kind"] != "tokens" else None
        if tgt["text"] is None:
            tgt["text"] = token_text_after(self.tokenizer, tid) if tgt["kind"] == "token" else self._label(tid)
        special = self.special_ids
        return Attribution(
            tokens=self.token_texts(ids),
            token_ids=ids,
            scores=out.scores[b][off : off + n].detach().float().cpu(),
            method=method,
            target=tgt,
            options=dict(options),
            model=self.name,
            backend=dict(used),
            timing=dict(ctx.timing),
            attributable=[not f for f in fixed],
            raw_tokens=self.tokenizer.convert_ids_to_tokens(ids),
            special=[i in special for i in ids],
            info={k: (v[b] if isinstance(v, list) else v) for k, v in out.info.items()},
            text=source[0],
            offsets=source[1],
            target_prob=target_prob(ctx, out, b, tid, tgt["kind"]),
            degenerate=list(flags),
        )

    attribute_generation = attribute_generation
    predict = predict
    label_probs = label_probs


def load_model(model=None, tokenizer=None, device=None, dtype=None, ref_token_id: Optional[int] = None, *,
               device_map=None, model_kwargs: Optional[dict] = None, compile=False) -> Explainer:
    """Load a model for explanation.

    Args:
        model: None (the embedded SmolLM2-135M-Instruct), a hub id or local directory, or a
            ``transformers`` model object of a registered family (``aieg_fast.models.BUILTIN_FAMILIES``
            and ``register_adapter``; causal LM or sequence classification). An object placed
            over several devices (``accelerate.dispatch_model``) is explained where it is.
        tokenizer: tokenizer object or id/path; required with a model object.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, a ``torch.device``, or ``"auto"`` (CUDA when
            available, else the CPU); default None: where the model is (CPU for models loaded
            by name).
        dtype: parameter dtype for models loaded by name: ``torch.float32`` (default),
            ``torch.bfloat16``, ``torch.float16`` or their names (the mixed-precision policy is in
            the README: the model runs in ``dtype``; F, the path sums and the scores are float32).
        ref_token_id: baseline token id (default: ``Explainer.ref_token_id``'s rule, PAD, else EOS, else UNK).
        device_map: for a model larger than one device: ``"auto"`` (or another strategy of
            accelerate, or a dict {module name: device}) is passed to ``from_pretrained``, which
            places the blocks over the visible GPUs (then the CPU and disk, with
            ``model_kwargs={"max_memory": ..., "offload_folder": ...}``). Not with ``device``.
        model_kwargs: more keyword arguments of ``from_pretrained`` for models loaded by name
            (``max_memory``, ``offload_folder``, ``revision``, ``attn_implementation``, ...); those
            that say where the files are (``revision``, ``cache_dir``, ``token``, ...:
            ``aieg_fast.models.loading.HUB_KWARGS``) reach the config and tokenizer too.
        compile: the default of ``attribute(compile=...)`` for this explainer: False, True
            (``torch.compile`` with backend ``"inductor"``) or a backend name.

    Returns:
        :class:`Explainer` exposing ``.model``, ``.tokenizer`` and ``.attribute(...)``.

    Raises:
        ValueError: unsupported architecture (names the supported ones), missing tokenizer, a
            device this machine does not have, an unknown dtype (or, for a model object, another
            than its own), ``device`` with ``device_map``, ``device_map`` / ``model_kwargs`` for a
            model object, a bad ``compile``; each names the argument and is raised before any
            weights are loaded. A ``ref_token_id`` outside the vocabulary (after loading).
        TypeError: ``model`` neither None, a str / path nor a model object; ``tokenizer``
            neither a str / path nor a tokenizer (each names the type; before any loading).
        RuntimeError: the embedded model's package is not installed.
    """
    check_placement(device, dtype, device_map)
    check_compile(compile)
    dtype, device = parse_dtype(dtype), parse_device(device)
    if dtype is not None and hasattr(model, "get_input_embeddings") and next(model.parameters()).dtype != dtype:
        raise ValueError(f"dtype={dtype} applies to models loaded by name; this model object is "
                         f"{next(model.parameters()).dtype} (convert it with model.to({dtype}) first)")
    m, tok, name = load_hf_model(model, tokenizer, dtype, device_map, model_kwargs)
    ex = Explainer(m, tok, name, device, ref_token_id, compile=compile)
    ex.loaded_by_name = m is not model  # a model object is explained as it is given
    return ex


