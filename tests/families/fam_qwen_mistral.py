"""Qwen2, Qwen2-MoE, Qwen3, Qwen3-MoE, Mistral and Mixtral (tiny configs: 2 layers, hidden 32,
4 heads over 2 KV heads, head_dim 8, max positions 64; MoE with 4 tiny experts, top 2).
``qwen3-wide_heads``: head_dim 16, so the query width (64) differs from the hidden size (32).

Sliding windows: the windowed specs use a window of 4, shorter than the matrix's sequences, so
the windows cut (the matrix checks that each adapter's sliding_window() is the model's mask and
that every method, Grad-ELLM's λ included, follows it).
"""
from transformers import (MistralConfig, MistralForCausalLM, MistralForSequenceClassification, MixtralConfig, MixtralForCausalLM,
                          MixtralForSequenceClassification, Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification,
                          Qwen2MoeConfig, Qwen2MoeForCausalLM, Qwen2MoeForSequenceClassification, Qwen3Config, Qwen3ForCausalLM,
                          Qwen3ForSequenceClassification, Qwen3MoeConfig, Qwen3MoeForCausalLM, Qwen3MoeForSequenceClassification)

from builders import TINY, FamilySpec, special_ids

#: window of the sliding-window specs: shorter than the matrix's sequences, so it cuts
WINDOW = 4
HEAD_DIM = TINY["hidden_size"] // TINY["num_attention_heads"]
MOE = dict(num_experts_per_tok=2, moe_intermediate_size=16)


def _qwen2(tok):
    # the released Qwen2/2.5 configuration: q/k/v bias, no sliding window; small models tie the head
    return Qwen2Config(**TINY, **special_ids(tok), tie_word_embeddings=True)


def _qwen2_sliding(tok):
    # layers ≥ max_window_layers slide: layer 1 windowed, layer 0 full
    return Qwen2Config(**TINY, **special_ids(tok), use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1)


def _qwen2_moe(tok):
    return Qwen2MoeConfig(**TINY, **special_ids(tok), **MOE, num_experts=4, shared_expert_intermediate_size=32)


def _qwen3(tok):
    return Qwen3Config(**TINY, **special_ids(tok), head_dim=HEAD_DIM)


def _qwen3_wide_heads(tok):
    # query width 4 x 16 = 64 ≠ hidden 32, as in the released Qwen3 (0.6B: 16 x 128 over 1024):
    # methods must not assume n_heads·head_dim = hidden size
    return Qwen3Config(**TINY, **special_ids(tok), head_dim=2 * HEAD_DIM)


def _qwen3_moe(tok):
    return Qwen3MoeConfig(**TINY, **special_ids(tok), **MOE, num_experts=4, head_dim=HEAD_DIM)


def _mistral(tok):
    return MistralConfig(**TINY, **special_ids(tok), sliding_window=WINDOW)


def _mixtral(tok):
    # experts are SwiGLU MLPs of intermediate_size: keep them small
    return MixtralConfig(**dict(TINY, intermediate_size=32), **special_ids(tok), num_local_experts=4, num_experts_per_tok=2,
                         sliding_window=WINDOW)


FAMILIES = [
    FamilySpec("qwen2", _qwen2, Qwen2ForCausalLM, Qwen2ForSequenceClassification),
    FamilySpec("qwen2-sliding", _qwen2_sliding, Qwen2ForCausalLM, Qwen2ForSequenceClassification),
    FamilySpec("qwen2_moe", _qwen2_moe, Qwen2MoeForCausalLM, Qwen2MoeForSequenceClassification),
    FamilySpec("qwen3", _qwen3, Qwen3ForCausalLM, Qwen3ForSequenceClassification),
    FamilySpec("qwen3-wide_heads", _qwen3_wide_heads, Qwen3ForCausalLM, Qwen3ForSequenceClassification),
    FamilySpec("qwen3_moe", _qwen3_moe, Qwen3MoeForCausalLM, Qwen3MoeForSequenceClassification),
    FamilySpec("mixtral", _mixtral, MixtralForCausalLM, MixtralForSequenceClassification),
    FamilySpec("mistral", _mistral, MistralForCausalLM, MistralForSequenceClassification),
]
