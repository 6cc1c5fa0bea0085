"""GPT-J, OPT and Falcon (aieg_fast/models/gptj.py, opt.py, falcon.py).

* ``gptj``: interleaved partial rotary (rotary_dim 4 of head_dim 8, as GPT-J-6B rotates 64 of
  256), parallel attention + MLP, LM head with bias; GPT-2 BPE without BOS (byte_level).
* ``opt``: pre-layer-norm (every OPT but 350m), learned positions with offset 2, q scaled after
  q_proj; OPT's tokenizer prepends ``</s>`` as BOS and has a PAD (sentencepiece-like here).
* ``opt-350m``: post-layer-norm (``do_layer_norm_before=False``, no final layer norm) and
  projected word embeddings (``word_embed_proj_dim`` 16 ≠ hidden 32: project_in / project_out).
* ``falcon``: ``new_decoder_architecture`` (Falcon-40B/180B): GQA with 2 KV heads, the fused
  query_key_value interleaved per KV group, two layer norms in parallel, rotary.
* ``falcon-mqa``: Falcon-7B: multi-query (one KV head), parallel attention, rotary.
* ``falcon-mha``: neither (per-head interleaved [q, k, v] split), rotary, sequential blocks.
  (ALiBi Falcon — falcon-rw — is refused by the adapter; see aieg_fast/models/falcon.py.)

Falcon is built with eager attention: transformers cannot switch a Falcon model's attention
implementation at run time, and the attention-reading methods need eager (see falcon.py).
"""
from transformers import (FalconConfig, FalconForCausalLM, FalconForSequenceClassification, GPTJConfig, GPTJForCausalLM,
                          GPTJForSequenceClassification, OPTConfig, OPTForCausalLM, OPTForSequenceClassification)

from builders import FamilySpec, special_ids


def _gptj(tok):
    return GPTJConfig(n_layer=2, n_head=4, n_embd=32, n_inner=64, n_positions=64, rotary_dim=4, initializer_range=0.1,
                      **special_ids(tok))


def _opt(tok, **kw):
    return OPTConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, ffn_dim=64, max_position_embeddings=64,
                     init_std=0.1, dropout=0.0, **kw, **special_ids(tok))


def _falcon(tok, **kw):
    cfg = FalconConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, ffn_hidden_size=64,
                       max_position_embeddings=64, initializer_range=0.1, alibi=False, **kw, **special_ids(tok))
    cfg._attn_implementation = "eager"
    return cfg


FAMILIES = [
    FamilySpec("gptj", _gptj, GPTJForCausalLM, GPTJForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("opt", _opt, OPTForCausalLM, OPTForSequenceClassification),
    FamilySpec("opt-350m", lambda tok: _opt(tok, do_layer_norm_before=False, word_embed_proj_dim=16), OPTForCausalLM,
               OPTForSequenceClassification),
    FamilySpec("falcon", lambda tok: _falcon(tok, new_decoder_architecture=True, num_kv_heads=2), FalconForCausalLM,
               FalconForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("falcon-mqa", lambda tok: _falcon(tok, multi_query=True, parallel_attn=True), FalconForCausalLM,
               FalconForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("falcon-mha", lambda tok: _falcon(tok, multi_query=False, parallel_attn=False, bias=True), FalconForCausalLM,
               FalconForSequenceClassification, tokenizer="byte_level"),
]
