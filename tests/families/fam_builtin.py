"""The first families: GPT-2 and LLaMA (the tiny configs of tests/builders.py), and Mamba (no attention)."""
from transformers import MambaConfig, MambaForCausalLM
from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

from builders import TINY, FamilySpec, special_ids


def _gpt2(tok):
    ids = special_ids(tok)
    return GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, initializer_range=0.1, **ids)


def _llama(tok):
    return LlamaConfig(**TINY, **special_ids(tok))


def _mamba(tok):
    return MambaConfig(hidden_size=32, num_hidden_layers=2, state_size=4, expand=2, conv_kernel=3, initializer_range=0.1, **special_ids(tok))


FAMILIES = [
    FamilySpec("gpt2", _gpt2, GPT2LMHeadModel, GPT2ForSequenceClassification, tokenizer="byte_level"),
    FamilySpec("llama", _llama, LlamaForCausalLM, LlamaForSequenceClassification),
    FamilySpec("mamba", _mamba, MambaForCausalLM, None),  # transformers has no Mamba classification head
]
