"""``DecoderAdapter``: everything an attribution method may ask of a model architecture.

Methods never read Hugging Face module names: they ask the adapter for the decoder stack, the
attention module of a layer, where q/k/v and the attention output are read, head counts, RoPE,
and the explained score F (the logit function, including any final soft-capping). A family is one
subclass in its own file (``gpt2.py``, ``llama.py``) registered by ``model_type`` in
:mod:`aieg_fast.models.registry`; users add families with :func:`register_adapter`.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

__all__ = ["DecoderAdapter", "QKVPoint", "split_last", "merge_heads", "separate_qkv", "config_window", "layer_types_window",
           "refuse_non_causal", "materialized", "execution_device", "longrope_switch", "routes_experts", "is_hooked", "class_kind"]


def class_kind(*class_names: str) -> str:
    """``"classifier"`` when a ``transformers`` class name among ``class_names`` is a
    sequence-classification head (``...ForSequenceClassification``), else ``"causal_lm"``."""
    return "classifier" if any("SequenceClassification" in a for a in class_names) else "causal_lm"


def _placed(module: nn.Module) -> nn.Module:
    """The model's module whose weights ``module`` uses: ``module.view_of`` for an adapter's view
    of one (Gemma's unscaled embeddings), else ``module`` itself."""
    return getattr(module, "view_of", module)


def materialized(module: nn.Module):
    """A context in which ``module``'s own parameters hold their values where it runs.

    A model loaded with ``device_map`` may offload modules (accelerate keeps their weights on the
    meta device between forwards and loads them in a hook); inside the block such a module's
    weights are loaded (``accelerate.utils.align_module_device``). Any other module: nothing to do.
    An adapter's view of a module (``view_of``) stands for that module.
    """
    module = _placed(module)
    hook = getattr(module, "_hf_hook", None)
    if hook is None or not getattr(hook, "offload", False):
        return contextlib.nullcontext()
    from accelerate.utils import align_module_device

    return align_module_device(module)


def _refuse_meta_weights(model: nn.Module) -> None:
    """Refuse a model with weights on the meta device that nothing loads (``model.to("meta")``,
    ``init_empty_weights`` without loading): it has shapes but no values. Weights that
    accelerate offloads (a hook loads them for each forward, :func:`materialized`) are fine.

    Raises:
        ValueError: names the first such parameter.
    """
    for name, module in model.named_modules():
        hook = getattr(module, "_hf_hook", None)
        if hook is not None and getattr(hook, "offload", False):
            continue
        meta = next((n for n, p in module.named_parameters(recurse=False) if p.is_meta), None)
        if meta is not None:
            full = f"{name}.{meta}" if name else meta
            raise ValueError(f"model: parameter {full!r} is on the meta device (shapes without values, e.g. after "
                             "model.to('meta') or init_empty_weights); load the weights (from_pretrained, load_state_dict) "
                             "before explaining the model")


def refuse_non_causal(config) -> None:
    """Refuse a config whose ``is_causal`` is false (set on the config or in ``config.json``):
    transformers' mask functions (``create_causal_mask``, ``create_sliding_window_causal_mask``)
    then build a bidirectional mask for every family that uses them, so each position also reads
    the later ones; the attributions assume a causal decoder (generated rows from one forward,
    positions after a cached prefix, Grad-ELLM's causal λ). Read as transformers reads it
    (``not getattr(config, "is_causal", True)``). Called for every adapter (registered ones too),
    after its own :meth:`DecoderAdapter.check_config`: before the weights load
    (:func:`~.registry.adapter_class`) and by the constructor for a model object.

    Raises:
        ValueError: names the setting.
    """
    value = getattr(config, "is_causal", True)
    if not value:
        raise ValueError(f"model_type {getattr(config, 'model_type', None)!r} with config.is_causal={value!r} is not causal: "
                         "transformers builds a bidirectional attention mask from it, so every position also reads the later "
                         "ones; attributions need a causal decoder (set config.is_causal = True, or remove it from config.json, "
                         "only if the model was trained causal)")


def is_hooked(module: nn.Module) -> bool:
    """Whether calling ``module`` does more than its class's ``forward``: a forward hook, forward
    pre-hook or backward hook on it or on every module (``register_module_forward_hook``), or a
    ``forward`` set on the instance. accelerate's device hook (``AlignDevicesHook``, alone, added
    by ``device_map``) only places weights and inputs, so it does not count."""
    if module._forward_hooks or module._forward_pre_hooks or module._backward_hooks or module._backward_pre_hooks:
        return True
    glob = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks", "_global_backward_pre_hooks")
    if any(getattr(nn.modules.module, g, None) for g in glob):
        return True
    fwd = module.__dict__.get("forward")
    if fwd is None:
        return False
    old = getattr(module, "_old_forward", None)  # accelerate keeps the forward it wraps here
    return not (getattr(fwd, "__wrapped__", None) is old and getattr(old, "__func__", None) is type(module).forward
                and type(getattr(module, "_hf_hook", None)).__name__ == "AlignDevicesHook")


def _plain_linear(head: nn.Module) -> bool:
    """A head whose output is ``hidden @ weight.T + bias`` (nn.Linear's own forward), so its
    target rows can be read; a head that adds to it (a peft LoRA layer on the LM head), computes
    it otherwise (a quantized subclass) or whose call does more (:func:`is_hooked`: a forward
    hook that rescales the logits) is called instead."""
    return isinstance(head, nn.Linear) and type(head).forward is nn.Linear.forward and not is_hooked(head)


def longrope_switch(cfg) -> Optional[int]:
    """The length past which a model's rotary tables change at every position, or None.

    LongRoPE (``rope_type="longrope"``: Phi-3/3.5-mini 128k, Phi-4-mini) rotates with its short
    factors while a forward's largest position is below ``original_max_position_embeddings`` and
    with its long ones past it: transformers reads the largest position of the whole forward, so
    a row up to this length sharing a forward with a longer row (a padded batch, one forward over
    generated steps, a compiled shape padded past it) would not be computed as the model computes
    it alone. Read from ``cfg.rope_parameters`` (or the older ``rope_scaling``), per layer type
    where the config has several.
    """
    rp = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    params = [rp] if ("rope_type" in rp or "type" in rp) else [p for p in rp.values() if isinstance(p, dict)]
    for p in params:
        if (p.get("rope_type") or p.get("type")) == "longrope":
            n = p.get("original_max_position_embeddings") or getattr(cfg, "original_max_position_embeddings", None)
            return int(n) if n else None
    return None


def routes_experts(cfg) -> bool:
    """Whether the model routes each token to some of several experts (a top-k mixture of experts:
    Mixtral, Qwen2-MoE, Qwen3-MoE): ``config.num_experts``, ``num_local_experts`` or
    ``n_routed_experts`` above 1 and ``num_experts_per_tok`` (1 when unset) below it. The expert
    choice is piecewise constant in the input, so along an attribution path F jumps where it
    switches, and no gradient sees the jump."""
    n = max(int(getattr(cfg, k, None) or 0) for k in ("num_experts", "num_local_experts", "n_routed_experts"))
    return n > 1 and int(getattr(cfg, "num_experts_per_tok", None) or 1) < n


def execution_device(module: nn.Module) -> torch.device:
    """Where ``module`` computes: its accelerate hook's execution device (a model dispatched with
    ``device_map``), else the device of its first parameter. An adapter's view of a module
    (``view_of``) stands for that module."""
    module = _placed(module)
    dev = getattr(getattr(module, "_hf_hook", None), "execution_device", None)
    if dev is not None:
        return torch.device(dev)
    return next(module.parameters()).device

#: One place q/k/v are read: (module, reader). The reader gets the module's forward output and
#: returns some of ``{"q", "k", "v"}`` as Tensor[B, L, heads·head_dim] (heads concatenated in the
#: last dimension, before RoPE, after any q/k norm the family applies).
QKVPoint = Tuple[nn.Module, Callable[[Tensor], Dict[str, Tensor]]]


def split_last(names: Sequence[str], sizes: Optional[Sequence[int]] = None) -> Callable[[Tensor], Dict[str, Tensor]]:
    """A :data:`QKVPoint` reader that splits the output's last dimension into consecutive pieces
    (``sizes``; None = the whole output is the one piece ``names[0]``)."""
    names = tuple(names)

    def read(out: Tensor) -> Dict[str, Tensor]:
        parts = (out,) if sizes is None else out.split(list(sizes), dim=-1)
        return dict(zip(names, parts))

    return read


def separate_qkv(attn) -> List[QKVPoint]:
    """The q/k/v points of an attention module with separate ``q_proj``, ``k_proj`` and ``v_proj``
    (LLaMA, GPT-J, OPT and most families), read at the projections' outputs."""
    return [(attn.q_proj, split_last("q")), (attn.k_proj, split_last("k")), (attn.v_proj, split_last("v"))]


def merge_heads(name: str, heads_first: bool = False) -> Callable[[Tensor], Dict[str, Tensor]]:
    """A :data:`QKVPoint` reader for a per-head output (a per-head q/k norm): Tensor[B, L, heads, d]
    (or Tensor[B, heads, L, d] with ``heads_first``) → ``{name: Tensor[B, L, heads·d]}``."""

    def read(out: Tensor) -> Dict[str, Tensor]:
        if heads_first:
            out = out.transpose(1, 2)
        return {name: out.reshape(*out.shape[:-2], out.shape[-2] * out.shape[-1])}

    return read


def config_window(cfg) -> Optional[int]:
    """``config.sliding_window`` as an int, or None when unset / 0 (a window on every layer)."""
    w = getattr(cfg, "sliding_window", None)
    return int(w) if w else None


def layer_types_window(cfg, layer: int) -> Optional[int]:
    """``config.sliding_window`` for the layers ``config.layer_types`` marks
    ``"sliding_attention"`` (the model builds their mask from it), else None."""
    types = getattr(cfg, "layer_types", None)
    if not types or types[layer] != "sliding_attention":
        return None
    return config_window(cfg)


class DecoderAdapter:
    """Architecture facts of one decoder-only model, read once per model.

    Subclasses set :attr:`architectures` (the ``transformers`` class names they serve) and
    implement the ``decoder`` / ``blocks`` / ``attention`` / ``qkv_points`` / ``o_proj`` /
    ``config_sizes`` hooks; RoPE families also set :attr:`has_rope` and implement
    :meth:`rope_tables` and :meth:`apply_rope`.

    Attributes:
        kind: ``"causal_lm"`` or ``"classifier"`` (a ``...ForSequenceClassification`` head).
        base: the decoder stack (returns ``last_hidden_state``, final norm applied).
        layers: the decoder blocks; attn_modules: the self-attention module of each block.
        head: the output projection (LM head or classification ``score``).
        n_layers, n_heads, n_kv_heads, head_dim, hidden_size, max_positions: sizes.
        embeddings: the token embedding module. num_labels: classes of a classifier, else None.
        logit_softcap: c of a final ``c·tanh(z/c)`` logit soft-capping, or None.
        rope_switch: the length past which the model's rotary tables change at every position,
            or None (:func:`longrope_switch`).
        routed_experts: whether tokens are routed to experts (:func:`routes_experts`): IG's
            completeness error then holds the jumps of F where the choice switches, which more
            steps do not remove (the completeness diagnostic says so).

    Raises:
        ValueError: the model's class is not one of :attr:`architectures`.
    """

    #: ``transformers`` class names this adapter serves
    architectures: Tuple[str, ...] = ()
    #: whether attention applies rotary position embeddings to q and k
    has_rope: bool = False
    #: False for families without attention layers (state-space, linear recurrences): the
    #: attention hooks do not exist, and methods that need them are refused before any work
    has_attention: bool = True
    #: what the family has instead of attention (said in the refusal), when ``has_attention`` is False
    attention_free_reason: str = ""
    #: c of a ``c·tanh(s/c)`` soft-capping of the attention logits inside attention, or None
    attn_logit_softcap: Optional[float] = None
    #: whether the decoder keeps the keys and values of earlier positions (a KV cache), so that
    #: positions after a prefix can be run alone (:meth:`prefix_keys_values`,
    #: :meth:`hidden_last_after`); False for recurrences, whose state is not a per-position cache
    has_kv_cache: bool = True
    #: keyword arguments ``load_model`` passes to ``from_pretrained`` for this family (e.g. an
    #: attention implementation the family cannot switch away from at run time)
    load_kwargs: Dict[str, object] = {}

    @classmethod
    def check_config(cls, config) -> None:
        """Refuse a setting of the family the adapter cannot explain, from the config alone
        (ValueError naming it): called before any weights load (:func:`~.registry.adapter_class`)
        and by the constructor for a model object. Default: nothing refused."""

    def __init__(self, model):
        arch = type(model).__name__
        if not self.serves(model):
            raise ValueError(f"model architecture {arch!r} is not supported by {type(self).__name__}; supported: {', '.join(self.architectures)}")
        _refuse_meta_weights(model)
        cfg = model.config
        self.check_config(cfg)
        refuse_non_causal(cfg)
        self.model = model
        self.arch = arch
        self.model_type = cfg.model_type
        self.kind = class_kind(*(c.__name__ for c in type(model).__mro__))  # a renamed subclass: its parent's
        self.base = self.decoder(model)
        self.layers = list(self.blocks(self.base))
        self.attn_modules = [self.attention(blk) for blk in self.layers] if self.has_attention else []
        self.n_layers = len(self.layers)
        self.n_heads, self.n_kv_heads, self.hidden_size, self.max_positions = self.config_sizes(cfg)
        self.head_dim = int(getattr(cfg, "head_dim", None) or self.hidden_size // self.n_heads) if self.n_heads else 0
        self.num_labels = getattr(cfg, "num_labels", None) if self.kind == "classifier" else None
        cap = getattr(cfg, "final_logit_softcapping", None)
        self.logit_softcap = float(cap) if cap and self.kind == "causal_lm" else None
        self.rope_switch = longrope_switch(cfg)
        self.routed_experts = routes_experts(cfg)

    @property
    def head(self) -> nn.Module:
        """The output projection (LM head, or the classification ``score``), read from the model
        on each use, so that a head replaced by ``resize_token_embeddings`` is the one used."""
        return self.model.score if self.kind == "classifier" else self.model.get_output_embeddings()

    @property
    def embeddings(self) -> nn.Module:
        """The token embedding module, read from the model on each use (see :attr:`head`)."""
        return self.model.get_input_embeddings()

    @property
    def input_device(self) -> torch.device:
        """Where the inputs go: the token embeddings' execution device (:func:`execution_device`).
        Every tensor of a call lives there; a model split over devices with ``device_map`` moves
        activations between its blocks itself (accelerate's hooks), and the adapter brings the
        final hidden states back here."""
        return execution_device(self.embeddings)

    @classmethod
    def serves(cls, model) -> bool:
        """Whether ``model``'s class, or a class it derives from (a renamed subclass), is one of
        :attr:`architectures`."""
        return any(c.__name__ in cls.architectures for c in type(model).__mro__)

    # ------------------------------------------------------------------ declared per family
    def decoder(self, model) -> nn.Module:
        """The decoder stack of ``model`` (its forward takes ``inputs_embeds``)."""
        raise NotImplementedError

    def blocks(self, base) -> Sequence[nn.Module]:
        """The decoder blocks of the stack, first to last."""
        raise NotImplementedError

    def attention(self, block) -> nn.Module:
        """The self-attention module of a block. Its forward output is a tuple whose item 0 is
        the attention output after the output projection and item 1 the attention
        probabilities [B, H, Q, K] (under eager attention)."""
        raise NotImplementedError

    def qkv_points(self, layer: int) -> List[QKVPoint]:
        """Where the q, k and v of ``layer`` are read (before RoPE): (module, reader) pairs."""
        raise NotImplementedError

    def o_proj(self, layer: int) -> nn.Module:
        """The output projection of ``layer``; its input is the heads-merged A·V."""
        raise NotImplementedError

    def config_sizes(self, cfg) -> Tuple[int, int, int, int]:
        """(n_heads, n_kv_heads, hidden_size, max_positions) from the config."""
        raise NotImplementedError

    def rope_tables(self, args, kwargs) -> Tuple[Tensor, Tensor]:
        """(cos, sin) Tensor[B, L, head_dim] from the arguments of an attention module's forward."""
        raise NotImplementedError(f"{type(self).__name__} has no rotary embeddings")

    def apply_rope(self, x: Tensor, cos: Tensor, sin: Tensor, n_heads: int) -> Tensor:
        """x Tensor[B, L, n_heads·d] rotated as the model rotates q and k."""
        raise NotImplementedError(f"{type(self).__name__} has no rotary embeddings")

    def sliding_window(self, layer: int) -> Optional[int]:
        """How many positions (the query's own included) a query of ``layer`` attends to, or
        None for full causal attention (the default). A query at row index t sees keys
        t − w < i ≤ t, as the model's sliding-window mask."""
        return None

    def rotates(self, layer: int) -> bool:
        """Whether ``layer`` applies RoPE to its q and k (:meth:`apply_rope`): :attr:`has_rope`
        for every layer, unless the family leaves RoPE out of some layers (SmolLM3's NoPE layers)."""
        return self.has_rope

    def output_projection(self, layer: int) -> Tensor:
        """The output projection of ``layer`` as a matrix: Tensor[n_heads·head_dim, hidden] W with
        ``o_proj(a) = a @ W + bias`` for the heads-merged input a; rows h·head_dim … (h+1)·head_dim − 1
        are head h's slice W_O^h (Kobayashi et al. 2020's value-norm weights read it).

        ``nn.Linear`` gives its weight transposed, GPT-2's ``Conv1D`` its weight; any other linear
        module (a quantised or adapter-wrapped layer) its action on the basis vectors, bias removed.
        Detached, in the module's dtype.
        """
        mod = self.o_proj(layer)
        width = self.n_heads * self.head_dim
        with materialized(mod):
            w = getattr(mod, "weight", None)
            if isinstance(mod, nn.Linear):
                return mod.weight.detach().t()
            if w is not None and hasattr(mod, "nf") and tuple(w.shape) == (width, mod.nf):  # transformers' Conv1D
                return w.detach()
        with torch.no_grad():
            eye = torch.eye(width, dtype=next(mod.parameters()).dtype, device=execution_device(mod))
            return (mod(eye) - mod(torch.zeros_like(eye[:1]))).detach()

    def attention_scaling(self, layer: int) -> float:
        """The factor applied to q·k before the softmax in ``layer``."""
        return float(getattr(self.attn_modules[layer], "scaling", self.head_dim ** -0.5))

    # ------------------------------------------------------------------ shared
    def decoder_inputs(self, inputs_embeds: Tensor) -> Tensor:
        """What the decoder stack is given for the embeddings E [B, L, d]: E itself, unless the
        family scales E outside its decoder (Gemma)."""
        return inputs_embeds

    @property
    def inputs_embeds_scale(self) -> float:
        """c with ``model.get_input_embeddings()(ids)`` (Hugging Face's ``inputs_embeds``) = c ·
        :attr:`embeddings` ``(ids)``: 1.0, unless the adapter works in an unscaled table (Gemma).
        User tensors in the ``inputs_embeds`` space (a Tensor ``baseline``, ``baseline_noise``)
        are divided by it (:mod:`aieg_fast.core.baselines`)."""
        return 1.0

    @property
    def token_embeddings_scale(self) -> float:
        """c with the token embeddings the decoder works with (what enters its first block, less
        any position embeddings) = c · :attr:`embeddings` ``(ids)``: 1.0, unless the adapter
        works in an unscaled table (Gemma: √hidden_size, whichever of the embedding module or the
        decoder applies it). HETA's curvature (a second derivative) is given in that space."""
        return 1.0

    def _cache_argument(self) -> str:
        """The decoder's keyword for a KV cache (``cache`` in recent ``transformers``)."""
        return "cache" if "cache" in inspect.signature(self.base.forward).parameters else "past_key_values"

    def prefix_keys_values(self, inputs_embeds: Tensor) -> List[Tuple[Tensor, Tensor]]:
        """The keys and values every attention layer caches for one unpadded row.

        Args:
            inputs_embeds: Tensor[1, n, d], positions 0 … n − 1, no padding.

        Returns:
            per layer (keys, values), each Tensor[1, kv_heads, n, head_dim] as the model caches
            them (after RoPE); computed in one forward without gradients.

        Raises:
            NotImplementedError: a family without a KV cache (:attr:`has_kv_cache` False).
        """
        if not self.has_kv_cache:
            raise NotImplementedError(f"{type(self).__name__} keeps no per-position keys and values")
        from transformers import DynamicCache

        cache = DynamicCache()  # no config: every layer keeps all positions (sliding windows are in the mask)
        with torch.no_grad():
            self.base(inputs_embeds=self.decoder_inputs(inputs_embeds), use_cache=True, **{self._cache_argument(): cache})
        return [(layer.keys, layer.values) for layer in cache.layers]

    def hidden_last_after(self, kv: Sequence[Tuple[Tensor, Tensor]], start: int, suffix: Tensor) -> Tensor:
        """Final hidden state at the last position of rows that continue a shared prefix.

        Row g of ``suffix`` holds positions ``start`` … n − 1 of an unpadded sequence whose
        positions 0 … start − 1 have the keys and values ``kv`` (:meth:`prefix_keys_values`, read
        up to ``start``). Causal attention makes the result equal :meth:`hidden_last` on the whole
        rows, at the cost of the suffix only.

        Args:
            kv: per layer (keys, values) Tensor[1, kv_heads, ≥ start, head_dim].
            start: the prefix length (0: no prefix, ``kv`` unused).
            suffix: Tensor[G, n − start, d] input embeddings.

        Returns:
            Tensor[G, hidden].
        """
        if start == 0:
            return self.hidden_last(suffix, None, None, None)
        from transformers import DynamicCache

        G = suffix.shape[0]
        cache = DynamicCache()
        for layer, (k, v) in enumerate(kv):
            cache.update(k[:, :, :start].expand(G, -1, -1, -1), v[:, :, :start].expand(G, -1, -1, -1), layer)
        out = self.base(inputs_embeds=self.decoder_inputs(suffix), use_cache=True, **{self._cache_argument(): cache})
        h = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return h[:, -1].to(suffix.device)

    def hidden_last(self, inputs_embeds, attention_mask, position_ids, last_index):
        """Final hidden state at ``last_index`` of each row: Tensor[B, hidden].

        ``attention_mask``, ``position_ids`` and ``last_index`` all None means unpadded rows with
        positions 0…L-1 and the last position read (the caller knows it; nothing is checked).
        Unpadded rows with positions 0…L-1 (the common single-prompt case) go through the model
        without an explicit mask, so attention takes its causal fast path (no mask tensor built
        per call); the result is the same.
        """
        B, L = inputs_embeds.shape[:2]
        if attention_mask is None and position_ids is None and last_index is None:
            plain, last = True, True
        else:
            plain = bool(attention_mask.all()) and torch.equal(
                position_ids, torch.arange(L, device=position_ids.device).expand(B, L)
            )
            last = plain and bool((last_index == L - 1).all())
        h = self.hidden_states(inputs_embeds, None if plain else attention_mask, None if plain else position_ids)
        if last:
            return h[:, -1]
        return h[torch.arange(h.shape[0], device=h.device), last_index]

    def hidden_states(self, inputs_embeds, attention_mask=None, position_ids=None) -> Tensor:
        """Final hidden states of every position: Tensor[B, L, hidden] (no KV cache), on the
        device of ``inputs_embeds`` (a model split over devices ends elsewhere)."""
        out = self.base(inputs_embeds=self.decoder_inputs(inputs_embeds), attention_mask=attention_mask, position_ids=position_ids,
                        use_cache=False)
        h = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return h.to(inputs_embeds.device)

    def logit_transform(self, z: Tensor) -> Tensor:
        """The model's logits from its head's output z (any shape): z itself, or for a language
        model whose config caps its logits (Gemma-2/3, ``final_logit_softcapping`` c)
        ``c·tanh(z/c)``. A family whose ``...ForCausalLM`` scales the head's output (Granite's
        ``logits_scaling``, Cohere's ``logit_scale``) applies the scale here, so F and every
        logit the package reads (:meth:`target_scores`, :meth:`full_logits`) are the model's own."""
        c = self.logit_softcap
        return z if c is None else torch.tanh(z / c) * c

    def target_scores(self, hidden, target_ids, target_fn: str = "logit"):
        """F for each row: the logit (or log-prob / prob) of ``target_ids`` [B] given ``hidden`` [B, D].

        ``target_ids`` of one element applies to every row. For ``target_fn="logit"`` and a plain
        linear head only the target rows of the output projection are computed (then
        :meth:`logit_transform`: soft-capped or scaled as the model's, so F equals its own logit); a head that computes
        more than its weight rows (a LoRA adapter on it, a quantized layer, a hook on it:
        :func:`is_hooked`) is called and its target logits read. Float16 / bfloat16 hidden
        states are projected in float32 by a plain linear head (F then carries no rounding of
        its own beyond the hidden state's); another head runs in its own dtype
        (:meth:`full_logits`).
        """
        if hidden.dtype in (torch.float16, torch.bfloat16):
            hidden = hidden.float()
        if target_fn == "logit" and not _plain_linear(self.head):
            logits = self.full_logits(hidden).float()
            return logits.gather(-1, target_ids.reshape(-1, 1).to(logits.device).expand(hidden.shape[0], 1)).squeeze(-1)
        if target_fn == "logit":
            head = self.head
            with materialized(head):  # the target rows, read where the head's weights are, brought to hidden's device
                W, b = head.weight, getattr(head, "bias", None)
                t = target_ids.reshape(()) if target_ids.numel() == 1 else target_ids
                w = W[t.to(W.device)].to(hidden.device, hidden.dtype)
                bt = None if b is None else b[t.to(b.device)].to(hidden.device)
            f = hidden @ w if t.dim() == 0 else (hidden * w).sum(-1)  # one target: a matrix-vector product
            return self.logit_transform(f if bt is None else f + bt.to(f.dtype))
        logits = self.full_logits(hidden).float()
        idx = target_ids.reshape(-1, 1).expand(hidden.shape[0], 1)
        logp = torch.log_softmax(logits, -1).gather(-1, idx).squeeze(-1)
        return logp if target_fn == "logprob" else logp.exp()

    def full_logits(self, hidden):
        """All output logits (vocabulary or classes) for ``hidden`` [B, D]: Tensor[B, V]; a
        float16 / bfloat16 linear head, or a linear head given float16 / bfloat16 hidden states,
        is applied in float32 (float32 logits); another head gets ``hidden`` in its own dtype."""
        head = self.head
        low = (torch.float16, torch.bfloat16)
        if _plain_linear(head) and (hidden.dtype in low or head.weight.dtype in low):
            with materialized(head):
                bias = None if head.bias is None else head.bias.float().to(hidden.device)
                return self.logit_transform(torch.nn.functional.linear(hidden.float(), head.weight.float().to(hidden.device), bias))
        p = next(head.parameters(), None)
        return self.logit_transform(head(hidden if p is None else hidden.to(p.dtype)).to(hidden.device))

    def check_rope_switch(self, lengths: Sequence[int], what: str = "the texts") -> None:
        """Refuse rows of one forward on both sides of :attr:`rope_switch`.

        Raises:
            ValueError: names ``what``, their lengths, the switch and what to do.
        """
        s = self.rope_switch
        if s is not None and lengths and min(lengths) <= s < max(lengths):
            raise ValueError(f"{what} are {min(lengths)} to {max(lengths)} tokens long, on both sides of {s} positions, where this "
                             f"model's LongRoPE switches its rotary factors (original_max_position_embeddings): it takes them "
                             f"from the longest row of a forward, so the shorter rows would be explained with the long factors, "
                             f"not as the model reads them alone; explain those up to {s} tokens apart from the longer ones")

    def check_pooled_position(self, rows) -> None:
        """Refuse, for a classification head, a sequence that ends with the model's pad token
        (``config.pad_token_id``): the model given token ids pools at the last token that is
        not a pad, while the attribution reads the last position (as the model does given
        embeddings), so the class logits explained would not be the model's own.

        Raises:
            ValueError: names the sequence, the pad token and what to do.
        """
        pad = getattr(self.model.config, "pad_token_id", None) if self.kind == "classifier" else None
        if not isinstance(pad, int):
            return
        for r, ids in enumerate(rows):
            if len(ids) and int(ids[-1]) == pad:
                raise ValueError(f"sequence {r} ends with the model's pad token (id {pad}, config.pad_token_id): its "
                                 "classification head reads the last token that is not a pad, so the class logits "
                                 "explained would not be the model's; leave the trailing pad token(s) out")
