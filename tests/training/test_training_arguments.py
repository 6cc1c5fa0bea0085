"""The training commands' seeds are checked before any work (2**64 failed late with "Overflow when
unpacking long long"), and their docstrings say what the code does."""
from __future__ import annotations

import importlib.util

import pytest

import aieg_fast.training.nano as nano
import aieg_fast.training.sentiment as sentiment
from aieg_fast import cli
from builders import sst2_rows


def _no_work(*args, **kwargs):
    raise AssertionError("the model or tokenizer was loaded before the seed was checked")


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64, True, 1.0])
def test_a_seed_out_of_range_is_refused_before_any_work(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(sentiment, "load_hf_model", _no_work)
    monkeypatch.setattr(nano, "_embedded_tokenizer", _no_work)
    f = sst2_rows(tmp_path / "t.tsv", 8)
    msg = f"seed must be an int in \\[0, 4294967295\\], got {seed!r}"
    with pytest.raises(ValueError, match=msg):
        sentiment.train_sentiment(out_dir=tmp_path / "s", train_file=f, seed=seed, progress=False)
    with pytest.raises(ValueError, match=msg):
        nano.train_nano(f, f, out_dir=tmp_path / "n", seed=seed, progress=False)
    assert not (tmp_path / "s").exists() and not (tmp_path / "n").exists()


def test_the_commands_name_seed_as_their_option(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sentiment, "load_hf_model", _no_work)
    monkeypatch.setattr(nano, "_embedded_tokenizer", _no_work)
    f = str(sst2_rows(tmp_path / "t.tsv", 8))
    for cmd in ("train-sentiment", "train-nano"):
        assert cli.main([cmd, "--seed", str(2**64), "--train-file", f, "--out", str(tmp_path / cmd), "--no-progress"]) == 2
        assert f"error: --seed must be an int in [0, 4294967295], got {2**64}" in capsys.readouterr().err
    with pytest.raises(AssertionError, match="was loaded"):  # the largest seed passes its check
        sentiment.train_sentiment(out_dir=tmp_path / "ok", train_file=f, seed=2**32 - 1, progress=False)


def test_the_docstrings_say_what_the_code_does():
    from transformers import GPT2Config, LlamaConfig

    assert "FileNotFoundError: ``train_file`` does not exist" in sentiment.train_sentiment.__doc__
    assert "Args:" in sentiment.sentiment_accuracy.__doc__ and "Returns:" in sentiment.sentiment_accuracy.__doc__
    doc = " ".join(nano.train_nano.__doc__.split())
    assert "dropout 0.1 (GPT-2 default)" not in doc and "LLaMA-nano with none" in doc
    assert (GPT2Config().resid_pdrop, GPT2Config().embd_pdrop, GPT2Config().attn_pdrop) == (0.1, 0.1, 0.1)
    assert LlamaConfig().attention_dropout == 0.0 and not [k for k in LlamaConfig().to_dict() if "drop" in k and k != "attention_dropout"]
    assert "4.50" not in sentiment.last_logits.__doc__


pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="needs peft")
