"""Tiny random-weight models with in-code tokenizers (no downloads), importable by tests and benchmarks."""
from __future__ import annotations

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


def byte_level_tokenizer():
    """GPT-2 style byte-level BPE ('Ġ' marks a leading space), no BOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", unk_token="<|endoftext|>")


def sentencepiece_like_tokenizer():
    """LLaMA style: Metaspace ('▁' marks a word start), BOS <s> prepended, PAD defined."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "<pad>"], show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>")


def make_tiny_gpt2(seed: int = 0, classifier: bool = False, num_labels: int = 2):
    from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel

    tok = byte_level_tokenizer()
    cfg = GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=len(tok), n_positions=64,
        bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, initializer_range=0.1,
        num_labels=num_labels, pad_token_id=tok.eos_token_id,
    )
    torch.manual_seed(seed)
    cls = GPT2ForSequenceClassification if classifier else GPT2LMHeadModel
    model = cls(cfg).eval()
    return model, tok


def make_tiny_llama(seed: int = 0, classifier: bool = False, num_labels: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

    tok = sentencepiece_like_tokenizer()
    cfg = LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
        intermediate_size=64, vocab_size=len(tok), max_position_embeddings=64,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        initializer_range=0.1, num_labels=num_labels,
    )
    torch.manual_seed(seed)
    model = (LlamaForSequenceClassification if classifier else LlamaForCausalLM)(cfg).eval()
    return model, tok


#: the words of :func:`word_level_base`'s tokenizer: the label words and prompt words of SST-2 and BoolQ, one token each.
WORD_LEVEL_WORDS = ["<unk>", "<pad>", "<s>", "</s>", "negative", "positive", "no", "yes", "Review", "Question", "Answer", ":", "?",
                    "Is", "this", "review", "or", "a", "great", "fine", "dull", "bad", "film", "the", "is"]


def word_level_base(*args, **kwargs):
    """(model, tokenizer, name) as ``load_hf_model(None)`` gives them, for ``train_sentiment``
    with its loader replaced: a one-layer random LLaMA and a word-level tokenizer in which each
    label word is one token (other words are ``<unk>``). Arguments are ignored."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    t = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORD_LEVEL_WORDS)}, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    cfg = LlamaConfig(num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, hidden_size=16, intermediate_size=32,
                      vocab_size=len(WORD_LEVEL_WORDS), max_position_embeddings=4096, pad_token_id=1, bos_token_id=2, eos_token_id=3)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg), tok, "tiny"


def sst2_rows(path, n, word="film"):
    """Write ``n`` SST-2 style rows (``sentence<TAB>label``, a header) to ``path``; ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["sentence\tlabel"] + [f"{'a great fine' if i % 2 else 'a dull bad'} {word} {i} \t{i % 2}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def model_state(ex):
    """What an attribution call must leave unchanged: requires_grad flags, every submodule's
    training mode, the attention implementation and the number of hooks on the model."""
    m = ex.model
    hooks = sum(len(mod._forward_hooks) + len(mod._forward_pre_hooks) for mod in m.modules())
    return ([p.requires_grad for p in m.parameters()], [mod.training for mod in m.modules()], m.config._attn_implementation, hooks)


# ------------------------------------------------------------------------------------------
# model families: one FamilySpec per family, defined in tests/families/fam_*.py
# ------------------------------------------------------------------------------------------
from dataclasses import dataclass, field  # noqa: E402
from typing import Any, Callable, Dict, Optional  # noqa: E402

#: sizes every tiny family config shares (two layers, GQA where the family has it)
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64, initializer_range=0.1)


@dataclass
class FamilySpec:
    """A tiny random-weight model of one family.

    Attributes:
        name: the spec's name: the family's ``model_type``, or ``model_type-variant`` for a
            second configuration of a family (e.g. ``stablelm-qk_layernorm``).
        config: () -> the tiny config (the tokenizer's special ids already set).
        lm: the ``...ForCausalLM`` class; classifier: the ``...ForSequenceClassification`` class or None.
        tokenizer: "sentencepiece" (BOS, PAD) or "byte_level" (no BOS).
        qk_rebuild: whether attention can be rebuilt from q, k (False for ALiBi and the like;
            ``reason`` says why).
        min_transformers: the lowest transformers version that has the family.
    """

    name: str
    config: Callable[[Any], Any]
    lm: Any
    classifier: Any = None
    tokenizer: str = "sentencepiece"
    qk_rebuild: bool = True
    reason: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def model_type(self) -> str:
        return self.name.split("-", 1)[0]

    def build(self, classifier: bool = False, seed: int = 0, num_labels: int = 2):
        """(model in eval mode, tokenizer)."""
        tok = sentencepiece_like_tokenizer() if self.tokenizer == "sentencepiece" else byte_level_tokenizer()
        cfg = self.config(tok)
        cfg.num_labels = num_labels
        torch.manual_seed(seed)
        cls = self.classifier if classifier else self.lm
        return cls(cfg).eval(), tok


def special_ids(tok) -> Dict[str, Optional[int]]:
    """bos/eos/pad ids of a test tokenizer, as config keyword arguments."""
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return dict(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=pad)


def family_specs() -> Dict[str, FamilySpec]:
    """Every FamilySpec in tests/families/fam_*.py (each module defines ``FAMILIES``)."""
    import importlib.util
    from pathlib import Path

    out: Dict[str, FamilySpec] = {}
    for path in sorted((Path(__file__).parent / "families").glob("fam_*.py")):
        spec = importlib.util.spec_from_file_location(f"families_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for f in mod.FAMILIES:
            if f.name in out:
                raise ValueError(f"family {f.name!r} is defined twice")
            out[f.name] = f
    return out


# ------------------------------------------------------------------------------------------
# training folders: another run holding one, a file that cannot be moved into one
# ------------------------------------------------------------------------------------------
import contextlib  # noqa: E402


@contextlib.contextmanager
def held_by_another_process(folder):
    """For the block, ``folder``'s lock file (``.lock``) is held by another process, as a run in
    progress holds it (POSIX file locks)."""
    import subprocess
    import sys

    hold = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(120)")
    other = subprocess.Popen([sys.executable, "-c", hold, str(folder / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        yield
    finally:
        other.kill()
        other.wait()


@contextlib.contextmanager
def moves_refused(name: str):
    """For the block, a training's move of a file named ``name`` into its folder fails (as a
    busy file would; :func:`aieg_fast.training.folder.install_model`); other moves go on."""
    import pytest
    from aieg_fast.training import folder

    real = folder.os.replace

    def busy(src, dst):
        if str(dst).endswith(name):
            raise OSError(16, "Device or resource busy")
        return real(src, dst)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(folder.os, "replace", busy)
        yield
