"""Phi, StarCoder2, OLMo 3, SmolLM3, Granite, Granite-MoE, Cohere, Cohere 2 and GPT-BigCode: tiny configs
exercising what is special in each (2 layers, hidden 32, 4 heads over 2 KV heads).

* phi: partial rotary (half of each head), q/k/v and output biases, ``dense`` output projection,
  LM head with a bias; ``phi-qk_layernorm``: a per-head LayerNorm on q and k before RoPE;
* starcoder2: biases, a sliding window of 4 on every layer;
* olmo3: full-width q/k RMSNorm, layer 0 windowed (4), layer 1 full;
* smollm3: layer 1 a NoPE layer (no rotary embedding); ``smollm3-sliding``: layer 0 windowed too;
* granite / granitemoe: embedding, attention, residual multipliers and a logit scaling far from 1
  (F and every logit must carry them), top-2 of 4 experts for the MoE;
* cohere: interleaved RoPE, logit scale 0.5, tied head; ``cohere-qk_norm``: per-head q/k LayerNorm;
* cohere2: layer 0 sliding (window 4, RoPE), layer 1 global without RoPE;
* gpt_bigcode: multi-query attention (one KV head, the released StarCoder layout);
  ``gpt_bigcode-mha``: multi-head, ``c_attn`` laid out per head, no 1/√d scale.

Sliding windows of 4 are shorter than the matrix's sequences, so they cut.
"""
from transformers import (Cohere2Config, Cohere2ForCausalLM, CohereConfig, CohereForCausalLM, GPTBigCodeConfig, GPTBigCodeForCausalLM,
                          GPTBigCodeForSequenceClassification, GraniteConfig, GraniteForCausalLM, GraniteMoeConfig,
                          GraniteMoeForCausalLM, Olmo3Config, Olmo3ForCausalLM, Olmo3ForSequenceClassification, PhiConfig,
                          PhiForCausalLM, PhiForSequenceClassification, SmolLM3Config, SmolLM3ForCausalLM,
                          SmolLM3ForSequenceClassification, Starcoder2Config, Starcoder2ForCausalLM,
                          Starcoder2ForSequenceClassification)

from builders import TINY, FamilySpec, special_ids

WINDOW = 4
SLIDING_FULL = ["sliding_attention", "full_attention"]
#: Granite's four multipliers, far from 1 so that a missing one changes F
MULTIPLIERS = dict(embedding_multiplier=3.0, attention_multiplier=0.2, residual_multiplier=0.5, logits_scaling=4.0)


def _phi(tok, **kw):
    rope = {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5}
    return PhiConfig(**TINY, rope_parameters=rope, **special_ids(tok), **kw)


def _starcoder2(tok):
    return Starcoder2Config(**TINY, sliding_window=WINDOW, use_bias=True, **special_ids(tok))


def _olmo3(tok):
    return Olmo3Config(**TINY, sliding_window=WINDOW, layer_types=SLIDING_FULL, **special_ids(tok))


def _smollm3(tok, **kw):
    return SmolLM3Config(**TINY, no_rope_layers=[1, 0], **special_ids(tok), **kw)


def _granite(tok):
    return GraniteConfig(**TINY, **MULTIPLIERS, **special_ids(tok))


def _granitemoe(tok):
    # experts of width 32: with TINY's 64 the seed-0 draws give "the film was bad" a logit below the
    # baseline's, so AIEG's positive part is zero at every token (a property of those draws, as for Gemma 2)
    return GraniteMoeConfig(**dict(TINY, intermediate_size=32), **MULTIPLIERS, num_local_experts=4, num_experts_per_tok=2, **special_ids(tok))


def _cohere(tok, **kw):
    return CohereConfig(**TINY, logit_scale=0.5, **special_ids(tok), **kw)


def _cohere2(tok):
    return Cohere2Config(**TINY, logit_scale=0.5, sliding_window=WINDOW, layer_types=SLIDING_FULL, **special_ids(tok))


def _gpt_bigcode(tok, **kw):
    return GPTBigCodeConfig(n_layer=2, n_head=4, n_embd=32, n_positions=64, initializer_range=0.1, **special_ids(tok), **kw)


FAMILIES = [
    FamilySpec("phi", _phi, PhiForCausalLM, PhiForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("phi-qk_layernorm", lambda tok: _phi(tok, qk_layernorm=True), PhiForCausalLM, PhiForSequenceClassification,
               tokenizer="byte_level"),
    FamilySpec("starcoder2", _starcoder2, Starcoder2ForCausalLM, Starcoder2ForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("olmo3", _olmo3, Olmo3ForCausalLM, Olmo3ForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("smollm3", _smollm3, SmolLM3ForCausalLM, SmolLM3ForSequenceClassification),
    FamilySpec("smollm3-sliding", lambda tok: _smollm3(tok, use_sliding_window=True, sliding_window=WINDOW,
                                                       layer_types=SLIDING_FULL), SmolLM3ForCausalLM, SmolLM3ForSequenceClassification),
    FamilySpec("granite", _granite, GraniteForCausalLM, None),  # transformers has no Granite classification head
    FamilySpec("granitemoe", _granitemoe, GraniteMoeForCausalLM, None),
    FamilySpec("cohere", _cohere, CohereForCausalLM, None),  # nor a Cohere one
    FamilySpec("cohere-qk_norm", lambda tok: _cohere(tok, use_qk_norm=True), CohereForCausalLM, None),
    FamilySpec("cohere2", _cohere2, Cohere2ForCausalLM, None),
    FamilySpec("gpt_bigcode", _gpt_bigcode, GPTBigCodeForCausalLM, GPTBigCodeForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("gpt_bigcode-mha", lambda tok: _gpt_bigcode(tok, multi_query=False, scale_attn_weights=False),
               GPTBigCodeForCausalLM, GPTBigCodeForSequenceClassification, tokenizer="byte_level"),
]
