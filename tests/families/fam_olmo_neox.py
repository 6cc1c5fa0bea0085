"""OLMo, OLMo 2, StableLM (default and per-head qk LayerNorm + parallel residual) and GPT-NeoX
(Pythia): tiny random-weight configs.

* olmo: ``clip_qkv=0.5`` so that the clamp really binds on these tiny weights (a good share of
  the q/k/v entries are clipped), GQA.
* olmo2: q/k RMSNorm over the full projection width, GQA.
* stablelm: partial rotary 0.5 (the released 0.25 of head_dim 8 would rotate only 2 channels,
  where ``rotate_half`` and rotate-every-two coincide; 4 rotated channels tell them apart), GQA;
  stablelm-qk_layernorm: the StableLM 2 12B options (per-head q/k LayerNorm, parallel residual).
* gpt_neox: fused per-head interleaved q/k/v, parallel residual (Pythia), ``rotary_pct=0.5``
  (same reason as stablelm), no GQA in the family.

Tokenizers: byte-level (no BOS) for gpt_neox/olmo2/stablelm-qk_layernorm, the BOS + PAD
tokenizer for olmo/stablelm, so both paths run through these adapters. (olmo with the byte-level
tokenizer happens to draw, at seed 0, weights whose last-layer Grad-ELLM scores of "the film was
bad" are all negative — all zero after the ReLU, for any clip_qkv — which the matrix rightly
refuses as "no signal"; the BOS tokenizer gives another draw.)
"""
from transformers import (GPTNeoXConfig, GPTNeoXForCausalLM, GPTNeoXForSequenceClassification, Olmo2Config, Olmo2ForCausalLM,
                          Olmo2ForSequenceClassification, OlmoConfig, OlmoForCausalLM, OlmoForSequenceClassification, StableLmConfig,
                          StableLmForCausalLM, StableLmForSequenceClassification)

from builders import TINY, FamilySpec, special_ids


def _olmo(tok):
    return OlmoConfig(**TINY, clip_qkv=0.5, **special_ids(tok))


def _olmo2(tok):
    return Olmo2Config(**TINY, **special_ids(tok))


def _stablelm(tok):
    return StableLmConfig(**TINY, partial_rotary_factor=0.5, **special_ids(tok))


def _stablelm_qk_layernorm(tok):
    return StableLmConfig(**TINY, partial_rotary_factor=0.5, qk_layernorm=True, use_parallel_residual=True, **special_ids(tok))


def _gpt_neox(tok):
    sizes = {k: v for k, v in TINY.items() if k != "num_key_value_heads"}  # no GQA in GPT-NeoX
    return GPTNeoXConfig(**sizes, rotary_pct=0.5, use_parallel_residual=True, **special_ids(tok))


FAMILIES = [
    FamilySpec("olmo", _olmo, OlmoForCausalLM, OlmoForSequenceClassification),
    FamilySpec("olmo2", _olmo2, Olmo2ForCausalLM, Olmo2ForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("stablelm", _stablelm, StableLmForCausalLM, StableLmForSequenceClassification),
    FamilySpec("stablelm-qk_layernorm", _stablelm_qk_layernorm, StableLmForCausalLM, StableLmForSequenceClassification,
               tokenizer="byte_level"),
    FamilySpec("gpt_neox", _gpt_neox, GPTNeoXForCausalLM, GPTNeoXForSequenceClassification, tokenizer="byte_level"),
]
