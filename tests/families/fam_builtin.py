"""The first two families: GPT-2 and LLaMA (the tiny configs of tests/builders.py)."""
from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

from builders import TINY, FamilySpec, special_ids


def _gpt2(tok):
    ids = special_ids(tok)
    return GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, initializer_range=0.1, **ids)


def _llama(tok):
    return LlamaConfig(**TINY, **special_ids(tok))


FAMILIES = [
    FamilySpec("gpt2", _gpt2, GPT2LMHeadModel, GPT2ForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("llama", _llama, LlamaForCausalLM, LlamaForSequenceClassification),
]
