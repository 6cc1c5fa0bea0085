"""GPT-nano training (aieg_fast.training.nano) on a small synthetic SST-style file with the tiny tokenizer."""
from __future__ import annotations

import json
import random

import pytest
import torch

from builders import byte_level_tokenizer

POS = ["good", "great", "wonderful", "amazing", "charming"]
NEG = ["bad", "awful", "boring", "terrible", "slow"]


def _write(path, n, seed):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("sentence\tlabel\n")
        for _ in range(n):
            y = rng.randint(0, 1)
            words = [rng.choice(POS if y else NEG)] + rng.sample(["the", "film", "movie", "is", "a", "story"], 3)
            rng.shuffle(words)
            fh.write(" ".join(words) + " \t" + str(y) + "\n")


def test_train_nano_learns_saves_and_loads(tmp_path, monkeypatch):
    from aieg_fast import load_model
    from aieg_fast.training.nano import NANO_CONFIG, nano_path, train_nano

    monkeypatch.setenv("AIEG_FAST_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "train.tsv", 600, 0)
    _write(tmp_path / "dev.tsv", 200, 1)
    with pytest.raises(ValueError, match="train-nano"):
        load_model("gpt-nano")
    res = train_nano(tmp_path / "train.tsv", tmp_path / "dev.tsv", epochs=4, batch_size=32, lr=3e-3,
                     tokenizer=byte_level_tokenizer(), progress=False)
    assert res["out_dir"] == str(nano_path())
    hist = res["history"]
    assert hist[-1]["train_loss"] < hist[0]["train_loss"]
    assert res["dev_accuracy"] > 0.9  # the label is one keyword: a working classifier gets it
    saved = json.loads((nano_path() / "training.json").read_text())
    assert saved["dev_accuracy"] == res["dev_accuracy"]
    ex = load_model("gpt-nano")
    cfg = ex.model.config
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd) == (NANO_CONFIG["n_layer"], NANO_CONFIG["n_head"], NANO_CONFIG["n_embd"])
    assert ex.adapter.kind == "classifier" and ex.name == "gpt-nano"
    # the loaded model is the trained one: it gets held-out keyword sentences right
    with torch.no_grad():
        p = torch.softmax(ex.model(torch.tensor([ex.encode("the film is wonderful")[0]])).logits[0], -1)
    assert float(p[1]) > 0.5
    a = ex.attribute("the film is wonderful", method="integrated_gradients", n_steps=8)
    assert a.target["id"] == 1 and len(a.scores) == len(a.token_ids)


def test_train_nano_bad_arguments(tmp_path):
    from aieg_fast.training.nano import train_nano

    with pytest.raises(ValueError, match="epochs"):
        train_nano(tmp_path / "t.tsv", tmp_path / "d.tsv", epochs=0)
    with pytest.raises(FileNotFoundError, match="train_file"):
        train_nano(tmp_path / "t.tsv", tmp_path / "d.tsv")
    # a folder named for the data: the folder is blamed, not a train_file the user did not give
    with pytest.raises(FileNotFoundError, match=f"data_dir {str(tmp_path / 'none')!r} does not exist; it should hold sst2_train.tsv"):
        train_nano(data_dir=tmp_path / "none")
    with pytest.raises(FileNotFoundError, match=f"data_dir {str(tmp_path)!r} holds no sst2_train.tsv"):
        train_nano(data_dir=tmp_path)


def test_train_nano_malformed_file(tmp_path):
    from aieg_fast.training.nano import train_nano

    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\ngood film \t1\nno label here\n")
    _write(tmp_path / "dev.tsv", 10, 1)
    with pytest.raises(ValueError, match="line 3"):
        train_nano(bad, tmp_path / "dev.tsv", tokenizer=byte_level_tokenizer(), progress=False, out_dir=tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_train_llama_nano(tmp_path, monkeypatch):
    """--arch llama: RoPE, RMSNorm and grouped-query attention at nano size; learns, loads by
    name, and a zero baseline through RMSNorm gives finite attributions."""
    from aieg_fast import load_model
    from aieg_fast.training.nano import LLAMA_NANO_CONFIG, nano_path, train_nano

    monkeypatch.setenv("AIEG_FAST_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "train.tsv", 600, 0)
    _write(tmp_path / "dev.tsv", 200, 1)
    with pytest.raises(ValueError, match="--arch llama"):
        load_model("llama-nano")
    res = train_nano(tmp_path / "train.tsv", tmp_path / "dev.tsv", epochs=4, batch_size=32, lr=3e-3,
                     tokenizer=byte_level_tokenizer(), progress=False, arch="llama")
    assert res["out_dir"] == str(nano_path("llama")) and res["dev_accuracy"] > 0.9
    ex = load_model("llama-nano")
    cfg = ex.model.config
    assert cfg.model_type == "llama" and cfg.num_key_value_heads < cfg.num_attention_heads
    assert (cfg.hidden_size, cfg.num_hidden_layers) == (LLAMA_NANO_CONFIG["hidden_size"], LLAMA_NANO_CONFIG["num_hidden_layers"])
    a = ex.attribute("the film is wonderful", method="integrated_gradients", n_steps=16, baseline="zero")
    assert a.target["id"] == 1 and bool(torch.isfinite(a.scores).all())
    with pytest.raises(ValueError, match="arch"):
        train_nano(tmp_path / "train.tsv", tmp_path / "dev.tsv", arch="mamba")


def _no_tokenizer():
    raise AssertionError("the tokenizer was loaded before the input was checked")


def test_train_nano_checks_its_folder_and_rows_before_loading(tmp_path, monkeypatch):
    import aieg_fast.training.nano as nano

    monkeypatch.setattr(nano, "_embedded_tokenizer", _no_tokenizer)
    _write(tmp_path / "train.tsv", 20, 0)
    _write(tmp_path / "dev.tsv", 10, 1)
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(ValueError, match=f"out_dir {str(tmp_path / 'taken')!r} is a file, not a folder"):
        nano.train_nano(tmp_path / "train.tsv", tmp_path / "dev.tsv", out_dir=tmp_path / "taken", progress=False)
    assert (tmp_path / "taken").read_text() == "a file"
    (tmp_path / "empty.tsv").write_text("sentence\tlabel\n")
    for args, what in (((tmp_path / "empty.tsv", tmp_path / "dev.tsv"), "train_file"), ((tmp_path / "train.tsv", tmp_path / "empty.tsv"), "dev_file")):
        with pytest.raises(ValueError, match=f"{what} {str(tmp_path / 'empty.tsv')!r} holds no rows"):
            nano.train_nano(*args, out_dir=tmp_path / "o", progress=False)
    with pytest.raises(ValueError, match="lr must be a finite number > 0, got inf"):
        nano.train_nano(tmp_path / "train.tsv", tmp_path / "dev.tsv", lr=float("inf"), out_dir=tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_train_nano_stops_when_the_loss_is_no_longer_finite(tmp_path):
    from aieg_fast.training.nano import train_nano

    _write(tmp_path / "train.tsv", 64, 0)
    _write(tmp_path / "dev.tsv", 8, 1)
    with pytest.raises(RuntimeError, match=r"became (nan|inf|inf or nan) at step \d+; lower lr \(nothing was saved\)"):
        train_nano(tmp_path / "train.tsv", tmp_path / "dev.tsv", epochs=2, batch_size=16, lr=1e30, tokenizer=byte_level_tokenizer(),
                   progress=False, out_dir=tmp_path / "o")
    assert not (tmp_path / "o").exists()  # a folder this run made is removed again: nothing was saved


def test_train_nano_command_names_the_folder_it_saved_to(tmp_path, monkeypatch, capsys):
    import aieg_fast.training.nano as nano
    from aieg_fast import cli

    monkeypatch.setattr(nano, "_embedded_tokenizer", byte_level_tokenizer)
    _write(tmp_path / "train.tsv", 40, 0)
    _write(tmp_path / "dev.tsv", 10, 1)
    out = tmp_path / "mine"
    argv = ["train-nano", "--train-file", str(tmp_path / "train.tsv"), "--dev-file", str(tmp_path / "dev.tsv"), "--epochs", "1",
            "--no-progress"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"saved to {out} (load it with --model {out})" in printed
    assert cli.main([*argv, "--out", str(tmp_path / "x"), "--lr", "nan"]) == 2
    assert "error: --lr must be a finite number > 0, got nan" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train-nano", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert "<cache>/llama-nano-sst2 with --arch llama" in helptext and "<cache>/gpt-nano-sst2 with --arch gpt2" in helptext


def test_train_nano_on_rank_1_of_a_process_group_saves_the_model(tmp_path, monkeypatch):
    """Under a process group (torchrun), transformers' save_pretrained writes nothing on ranks
    other than 0: train_nano there reported success with a folder holding no config.json and no
    weights, which load_model refused. The model is now written on every rank."""
    from aieg_fast import load_model
    from aieg_fast.training.nano import train_nano

    _write(tmp_path / "train.tsv", 64, 0)
    _write(tmp_path / "dev.tsv", 32, 1)
    with monkeypatch.context() as m:  # this process is rank 1 of 2 of an initialised group
        m.setattr(torch.distributed, "is_initialized", lambda: True)
        m.setattr(torch.distributed, "get_rank", lambda *a, **k: 1)
        m.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
        res = train_nano(tmp_path / "train.tsv", tmp_path / "dev.tsv", out_dir=tmp_path / "nano", epochs=1, batch_size=32,
                         tokenizer=byte_level_tokenizer(), progress=False)
    assert {"config.json", "model.safetensors"} <= {p.name for p in (tmp_path / "nano").iterdir()}
    ex = load_model(str(tmp_path / "nano"))
    with torch.no_grad():
        logits = ex.model(torch.tensor([ex.encode("the film is wonderful")[0]])).logits
    assert res["out_dir"] == str(tmp_path / "nano") and torch.isfinite(logits).all()


def test_a_classifier_written_by_save_model_files_loads_as_a_classifier(tmp_path):
    """save_model_files wrote config.json without ``architectures`` (save_pretrained records the
    class there), so a classification head was loaded back as a causal LM."""
    import aieg_fast
    from aieg_fast.models import save_model_files
    from builders import make_tiny_gpt2

    m, t = make_tiny_gpt2(classifier=True)
    save_model_files(m, tmp_path / "clf")
    t.save_pretrained(tmp_path / "clf")
    ex = aieg_fast.load_model(str(tmp_path / "clf"))
    assert ex.adapter.kind == "classifier" and type(ex.model).__name__ == type(m).__name__

