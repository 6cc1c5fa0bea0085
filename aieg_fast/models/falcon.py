"""Falcon (``FalconForCausalLM``, ``FalconForSequenceClassification``; tiiuae/falcon-7b/40b/180b,
Falcon2-11B, their instruct versions).

What is special and how the adapter handles it:

* **One fused projection** ``query_key_value``, split three ways as ``FalconAttention._split_heads``
  splits it (the readers below; q/k/v are read there, before the rotary):

  - ``new_decoder_architecture`` (Falcon-40B/180B, Falcon2-11B; grouped-query attention): the
    output is ``num_kv_heads`` groups of [rep query heads, 1 key head, 1 value head]
    (rep = heads / kv heads), *interleaved per group*; q is the rep query heads of every group
    in group order, k and v the group's key/value head. Query head h reads KV head h // rep
    (the "grouped" mapping). n_kv_heads = ``num_kv_heads``.
  - ``multi_query`` (Falcon-7B): [all query heads | one key head | one value head];
    n_kv_heads = 1.
  - neither: per-head interleaved [q_h, k_h, v_h] for every head h; n_kv_heads = heads.

* **Rotary** (rotate_half, full head_dim, from the ``position_embeddings`` (cos, sin) the model
  passes to every attention module — :func:`~aieg_fast.models.llama.rotate_half_rope`), scale
  1/√head_dim (``inv_norm_factor``). Parallel attention + MLP (one or two input layer norms)
  needs nothing: the attention output is the module's ``output[0]`` / ``dense``'s input.
* **ALiBi is refused** (``config.alibi=True``: falcon-rw-1b/7b; every other released Falcon
  is rotary). Its attention adds a per-key position bias, so it cannot be rebuilt from q and k
  (Grad-ELLM's λ would silently ignore position), and in transformers 5.x the eager ALiBi
  path — the only one that returns attention probabilities, which ``attention``,
  ``scaled_attention`` and ``aieg`` read — adds the bias twice (inside the attention and again
  through the 4-D mask ``FalconModel`` builds from it), so its logits differ from the SDPA
  path's (by ~0.3 on a 2-layer model): attention-reading methods would explain another
  function than the model computes under SDPA.
* **Attention implementation.** transformers cannot switch a Falcon model's attention
  implementation at run time (the modeling file does not use the attention interface:
  ``set_attn_implementation`` only logs a warning). ``load_model`` therefore loads Falcon with
  ``attn_implementation="eager"`` (:attr:`FalconAdapter.load_kwargs`; eager and SDPA compute the
  same rotary Falcon). A Falcon model object built with SDPA still runs the methods that need no
  attention probabilities; ``attention``, ``scaled_attention`` and ``aieg`` then stop with a
  RuntimeError that says to load it with ``attn_implementation="eager"``
  (:func:`~aieg_fast.core.model_state.model_prepared`).
* No final logit soft-capping; LM head without bias (tied to the word embeddings).
"""
from __future__ import annotations

from .base import DecoderAdapter, split_last
from .llama import rotate_half_rope

__all__ = ["FalconAdapter"]


class FalconAdapter(DecoderAdapter):
    architectures = ("FalconForCausalLM", "FalconForSequenceClassification")
    has_rope = True
    load_kwargs = {"attn_implementation": "eager"}

    @classmethod
    def check_config(cls, config) -> None:
        if getattr(config, "alibi", False):
            raise ValueError(
                "Falcon with ALiBi (config.alibi=True, e.g. falcon-rw-1b) is not supported: its attention cannot be "
                "rebuilt from q and k, and transformers' eager ALiBi path (needed to read attention probabilities) "
                "adds the bias twice, so it computes another function than the SDPA path; see aieg_fast.models.falcon"
            )

    def decoder(self, model):
        return model.transformer

    def blocks(self, base):
        return base.h

    def attention(self, block):
        return block.self_attention

    def qkv_points(self, layer):
        cfg = self.model.config
        H, Hkv, d = self.n_heads, self.n_kv_heads, self.head_dim
        fused = self.attn_modules[layer].query_key_value
        if cfg.new_decoder_architecture:
            return [(fused, _grouped_reader(H, Hkv, d))]
        if cfg.multi_query:
            return [(fused, split_last("qkv", (H * d, d, d)))]
        return [(fused, _per_head_reader(H, d))]

    def o_proj(self, layer):
        return self.attn_modules[layer].dense

    def config_sizes(self, cfg):
        H = cfg.num_attention_heads
        if cfg.new_decoder_architecture:
            n_kv = cfg.num_kv_heads
        elif cfg.multi_query:
            n_kv = 1
        else:
            n_kv = H  # FalconAttention splits the fused output per head: one key/value head per query head
        return H, n_kv, cfg.hidden_size, cfg.max_position_embeddings

    def attention_scaling(self, layer):
        return float(self.attn_modules[layer].inv_norm_factor)

    def rope_tables(self, args, kwargs):
        pe = kwargs.get("position_embeddings")
        if pe is None:
            raise RuntimeError("the attention module received no position_embeddings (RoPE tables)")
        return pe[0], pe[1]

    def apply_rope(self, x, cos, sin, n_heads: int):
        return rotate_half_rope(x, cos, sin, n_heads)


def _grouped_reader(H: int, Hkv: int, d: int):
    """``new_decoder_architecture``: [B, L, Hkv·(rep+2)·d] = per KV group [rep q heads, k, v]."""
    rep = H // Hkv

    def read(out):
        B, L = out.shape[:2]
        g = out.reshape(B, L, Hkv, rep + 2, d)
        return {"q": g[:, :, :, :rep].reshape(B, L, H * d), "k": g[:, :, :, rep].reshape(B, L, Hkv * d),
                "v": g[:, :, :, rep + 1].reshape(B, L, Hkv * d)}

    return read


def _per_head_reader(H: int, d: int):
    """Neither new architecture nor multi-query: [B, L, H·3·d] = per head [q_h, k_h, v_h]."""

    def read(out):
        B, L = out.shape[:2]
        g = out.reshape(B, L, H, 3, d)
        return {n: g[:, :, :, i].reshape(B, L, H * d) for i, n in enumerate("qkv")}

    return read
