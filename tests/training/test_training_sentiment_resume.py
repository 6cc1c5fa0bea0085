"""A resumed ``train_sentiment``: where it resumed is recorded (its dropout draws differ from an
uninterrupted run's), and an interrupted command names the step its checkpoint holds. On a
one-layer random LLaMA (seconds)."""
from __future__ import annotations

import importlib.util
import json

import pytest

import aieg_fast.training.sentiment as sentiment
from aieg_fast.training import train_sentiment
from builders import held_by_another_process, sst2_rows, word_level_base

pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="needs peft")


@pytest.fixture(autouse=True)
def tiny(monkeypatch):
    monkeypatch.setattr(sentiment, "load_hf_model", word_level_base)


def _kw(tmp_path, out="run"):
    return dict(out_dir=tmp_path / out, train_file=sst2_rows(tmp_path / "t.tsv", 8), n_train=8, batch_size=2, lr=5e-2,
                checkpoint_every=1, n_dev=2, progress=False)


def test_the_steps_a_run_resumed_at_are_recorded(tmp_path):
    assert train_sentiment(**_kw(tmp_path, "whole"))["resumed_at_steps"] == []
    kw = _kw(tmp_path)
    train_sentiment(max_steps=1, **kw)
    train_sentiment(max_steps=2, **kw)
    done = train_sentiment(**kw)
    assert done["steps"] == 4 and done["resumed_at_steps"] == [1, 3]
    assert json.loads((tmp_path / "run" / "training.json").read_text())["resumed_at_steps"] == [1, 3]
    assert "differ from those of an uninterrupted run" in " ".join(sentiment.__doc__.split())
    assert "resumed_at_steps" in train_sentiment.__doc__


def _no_model(*args, **kwargs):
    raise AssertionError("the model was loaded although another run holds the folder")


@pytest.mark.skipif(importlib.util.find_spec("fcntl") is None, reason="needs POSIX file locks")
def test_a_second_run_on_a_folder_in_use_is_refused_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """Two runs on one folder raced on checkpoint/state.pt.tmp; the folder is held as evaluate's is."""
    from aieg_fast import cli

    out = tmp_path / "run"
    out.mkdir()
    with held_by_another_process(out):
        monkeypatch.setattr(sentiment, "load_hf_model", _no_model)
        with pytest.raises(ValueError, match=f"out_dir {str(out)!r} is in use by another run"):
            train_sentiment(**_kw(tmp_path))
        assert cli.main(["train-sentiment", "--out", str(out), "--train-file", str(tmp_path / "t.tsv"), "--no-progress"]) == 2
        assert f"error: --out {str(out)!r} is in use by another run" in capsys.readouterr().err
    monkeypatch.setattr(sentiment, "load_hf_model", word_level_base)
    assert train_sentiment(max_steps=1, **_kw(tmp_path))["step"] == 1  # let go: the folder is free again


def test_an_interrupted_command_names_the_step_its_checkpoint_holds(tmp_path, monkeypatch, capsys):
    """Ctrl-C after the checkpoint of step 3 was renamed into place and before progress.json said
    so: a rerun resumes from step 3, and the message says 3 (progress.json still says 2)."""
    import aieg_fast.training.folder as folder
    from aieg_fast import cli

    real = folder.write_json

    def stop_before_progress_3(path, obj):
        if path.name == "progress.json" and obj["step"] == 3:
            raise KeyboardInterrupt
        return real(path, obj)

    monkeypatch.setattr(folder, "write_json", stop_before_progress_3)
    out = tmp_path / "run"
    assert cli.main(["train-sentiment", "--out", str(out), "--train-file", str(sst2_rows(tmp_path / "t.tsv", 8)), "--batch-size", "2",
                     "--checkpoint-every", "1", "--n-dev", "2", "--no-progress"]) == 130
    assert json.loads((out / "progress.json").read_text())["step"] == 2
    assert f"resume from the last checkpoint (step 3, in {out / 'checkpoint'})" in capsys.readouterr().err


def test_a_checkpoint_is_read_as_weights_only(tmp_path):
    """What the checkpoint holds loads with torch.load(weights_only=True), and a file holding
    other objects is refused rather than unpickled."""
    import torch

    from aieg_fast.training.folder import checkpoint_step

    kw = _kw(tmp_path)
    train_sentiment(max_steps=2, **kw)
    state_pt = tmp_path / "run" / "checkpoint" / "state.pt"
    state = torch.load(state_pt, weights_only=True)
    assert state["step"] == 2 and checkpoint_step(tmp_path / "run") == 2
    assert train_sentiment(max_steps=1, **kw)["step"] == 3  # resumed from it
    state["settings"] = dict(state["settings"], extra=Foreign())
    torch.save(state, state_pt)
    with pytest.raises(ValueError, match=f"checkpoint {str(state_pt)!r} cannot be resumed \\(UnpicklingError"):
        train_sentiment(max_steps=1, **kw)


class Foreign:
    """An object a checkpoint never holds."""
