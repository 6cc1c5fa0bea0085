"""Gemma, Gemma 2, Gemma 3 (text) and Phi-3: tiny configs exercising what is special in each.

* gemma: embedding scaling by √hidden inside the model, GeGLU, GQA (``gemma-mqa``: one KV head,
  as Gemma-2B);
* gemma2: query_pre_attn_scalar ≠ head_dim, attention and final logit soft-capping small enough
  to bend the logits, sandwich norms, a sliding window of 4 on the first layer, global second;
* gemma3_text: q/k norms, query_pre_attn_scalar ≠ head_dim, sliding (RoPE base 10 k) and global
  (RoPE base 1 M) layers, window 4;
* phi3: fused qkv_proj and gate_up_proj, GQA, a sliding window of 4 on every layer;
  ``phi3-partial_rotary``: half of each head rotated (Phi-4-mini rotates 3/4), no window.
"""
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma2ForSequenceClassification, Gemma3ForCausalLM,
                          Gemma3TextConfig, Gemma3TextForSequenceClassification, GemmaConfig, GemmaForCausalLM,
                          GemmaForSequenceClassification, Phi3Config, Phi3ForCausalLM, Phi3ForSequenceClassification)

from builders import TINY, FamilySpec, special_ids

HEAD_DIM = TINY["hidden_size"] // TINY["num_attention_heads"]
WINDOW = 4
# Gemma 2 / 3: intermediate 4 x hidden (Gemma 2 2B's ratio). With TINY's 64 the seed-0 draws leave
# Grad-ELLM (ReLU of random-signed gradient x value) without one positive attributable score on a
# test text -- a property of those random draws (it happens for LLaMA seeds too), not of the families.
GEMMA2_SIZES = dict(TINY, intermediate_size=128)


def _gemma(tok):
    return GemmaConfig(**TINY, head_dim=HEAD_DIM, **special_ids(tok))


def _gemma_mqa(tok):
    return GemmaConfig(**dict(TINY, num_key_value_heads=1), head_dim=HEAD_DIM, **special_ids(tok))


def _gemma2(tok):
    return Gemma2Config(
        **GEMMA2_SIZES, head_dim=HEAD_DIM, query_pre_attn_scalar=16, attn_logit_softcapping=1.0, final_logit_softcapping=2.0,
        sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"], **special_ids(tok),
    )


def _gemma3_text(tok):
    return Gemma3TextConfig(
        **GEMMA2_SIZES, head_dim=HEAD_DIM, query_pre_attn_scalar=16, sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0}},
        **special_ids(tok),
    )


def _phi3(tok):
    return Phi3Config(**TINY, sliding_window=WINDOW, **special_ids(tok))


def _phi3_partial(tok):
    return Phi3Config(**TINY, rope_parameters={"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5},
                      **special_ids(tok))


FAMILIES = [
    FamilySpec("gemma", _gemma, GemmaForCausalLM, GemmaForSequenceClassification),
    FamilySpec("gemma-mqa", _gemma_mqa, GemmaForCausalLM, GemmaForSequenceClassification),
    FamilySpec("gemma2", _gemma2, Gemma2ForCausalLM, Gemma2ForSequenceClassification),
    FamilySpec("gemma3_text", _gemma3_text, Gemma3ForCausalLM, Gemma3TextForSequenceClassification),
    FamilySpec("phi3", _phi3, Phi3ForCausalLM, Phi3ForSequenceClassification),
    FamilySpec("phi3-partial_rotary", _phi3_partial, Phi3ForCausalLM, Phi3ForSequenceClassification),
]
