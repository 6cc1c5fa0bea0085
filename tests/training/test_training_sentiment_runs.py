"""``train_sentiment``'s folder, checkpoints and refusals, on a one-layer random LLaMA with a
word-level tokenizer standing in for the embedded 135M model (the recipe is the same; seconds
instead of minutes). Refusals that must come before the model loads run with a loader that fails."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

import aieg_fast.training.sentiment as sentiment
from aieg_fast import cli
from aieg_fast.training import train_sentiment
from builders import moves_refused, word_level_base

pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="needs peft")


def _no_model(*args, **kwargs):
    raise AssertionError("the model was loaded before the input was checked")


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(sentiment, "load_hf_model", word_level_base)


@pytest.fixture
def no_model(monkeypatch):
    """Call to make the next model load fail the test."""
    return lambda: monkeypatch.setattr(sentiment, "load_hf_model", _no_model)


def _rows(path, n, word="film"):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["sentence\tlabel"] + [f"{'a great fine' if i % 2 else 'a dull bad'} {word} {i} \t{i % 2}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _kw(tmp_path, **more):
    kw = dict(out_dir=tmp_path / "run", train_file=_rows(tmp_path / "t.tsv", 8), n_train=8, batch_size=2, lr=1e-3,
              checkpoint_every=1, n_dev=4, progress=False)
    return dict(kw, **more)


@pytest.mark.parametrize("bad, msg", [
    (dict(max_steps=0), "max_steps must be a positive int, got 0"), (dict(max_steps=-3), "max_steps must be a positive int, got -3"),
    (dict(n_dev=0), "n_dev must be a positive int, got 0"), (dict(n_dev=-869), "n_dev must be a positive int, got -869"),
    (dict(lr=float("inf")), "lr must be a finite number > 0, got inf"), (dict(lr=float("nan")), "lr must be a finite"),
])
def test_counts_and_lr_are_checked_before_the_model_loads(tmp_path, no_model, bad, msg):
    no_model()
    with pytest.raises(ValueError, match=msg):
        train_sentiment(**_kw(tmp_path, **bad))
    assert not (tmp_path / "run").exists()


def test_the_command_names_its_options(tmp_path, no_model, capsys):
    no_model()
    assert cli.main(["train-sentiment", "--out", str(tmp_path / "run"), "--max-steps", "0", "--no-progress"]) == 2
    assert "error: --max-steps must be a positive int, got 0" in capsys.readouterr().err
    (tmp_path / "taken").write_text("a file")
    assert cli.main(["train-sentiment", "--out", str(tmp_path / "taken"), "--train-file", str(_rows(tmp_path / "t.tsv", 8)),
                     "--no-progress"]) == 2
    assert f"error: --out {str(tmp_path / 'taken')!r} is a file, not a folder" in capsys.readouterr().err
    assert cli.main(["train-sentiment", "--train-file", str(tmp_path / "none.tsv"), "--no-progress"]) == 2
    assert f"error: --train-file {str(tmp_path / 'none.tsv')!r} does not exist (or is not a file)" in capsys.readouterr().err


def test_an_empty_training_file_or_an_unusable_out_is_refused_before_the_model_loads(tmp_path, no_model):
    no_model()
    empty = tmp_path / "empty.tsv"
    empty.write_text("sentence\tlabel\n")
    with pytest.raises(ValueError, match=f"train_file {str(empty)!r} holds no rows"):
        train_sentiment(**_kw(tmp_path, train_file=empty))
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ValueError, match="out_dir .* is a file, not a folder"):
        train_sentiment(**_kw(tmp_path, out_dir=tmp_path / "file"))
    assert (tmp_path / "file").read_text() == "not a folder"


def test_another_training_file_of_the_same_name_is_refused(tmp_path, tiny, no_model):
    kw = _kw(tmp_path, train_file=_rows(tmp_path / "a" / "t.tsv", 8))
    assert train_sentiment(max_steps=1, **kw)["step"] == 1
    no_model()
    with pytest.raises(ValueError, match=r"other settings \(train_file_sha256: '[0-9a-f]{16}' recorded, '[0-9a-f]{16}' now\)"):
        train_sentiment(max_steps=1, **dict(kw, train_file=_rows(tmp_path / "b" / "t.tsv", 8, word="movie")))


def test_a_finished_adapter_or_checkpoint_of_other_settings_is_refused_before_the_model_loads(tmp_path, tiny, no_model):
    kw = _kw(tmp_path)
    assert train_sentiment(**kw)["finished"]
    assert train_sentiment(**_kw(tmp_path, out_dir=tmp_path / "half", max_steps=1))["step"] == 1
    import shutil

    shutil.rmtree(tmp_path / "run" / "checkpoint")  # what the former message told the user to do
    no_model()
    for out, what in ((tmp_path / "run", "an adapter trained"), (tmp_path / "half", "a checkpoint")):
        with pytest.raises(ValueError) as err:
            train_sentiment(**dict(kw, out_dir=out, lr=2e-3, n_train=6))
        assert f"holds {what}" in str(err.value)
        assert "(lr: 0.001 recorded, 0.002 now; n_train: 8 recorded, 6 now)" in str(err.value)
        assert "pass another out_dir" in str(err.value)
    assert (tmp_path / "run" / "adapter_model.safetensors").is_file() and (tmp_path / "half" / "checkpoint" / "state.pt").is_file()


def test_the_command_says_which_folder_to_load(tmp_path, tiny, capsys):
    out = tmp_path / "run"
    assert cli.main(["train-sentiment", "--out", str(out), "--train-file", str(_rows(tmp_path / "t.tsv", 4)), "--n-train", "4",
                     "--batch-size", "2", "--n-dev", "2", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"(load it with --model {out})" in printed and "--model OUT" not in printed


def test_a_checkpoint_left_unrenamed_by_an_earlier_version_resumes(tmp_path, tiny):
    kw = _kw(tmp_path)
    assert train_sentiment(max_steps=2, **kw)["step"] == 2
    # the former save removed checkpoint/ and then renamed checkpoint.tmp/: a kill in between left this
    (tmp_path / "run" / "checkpoint").rename(tmp_path / "run" / "checkpoint.tmp")
    assert train_sentiment(max_steps=1, **kw)["step"] == 3
    assert torch.load(tmp_path / "run" / "checkpoint" / "state.pt", weights_only=False)["step"] == 3
    assert not (tmp_path / "run" / "checkpoint.tmp").exists()
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoint").iterdir()) == ["state.pt"]
    assert json.loads((tmp_path / "run" / "progress.json").read_text())["step"] == 3


def test_a_torn_progress_file_is_ignored_and_a_torn_checkpoint_named(tmp_path, tiny, no_model, capsys):
    kw = _kw(tmp_path)
    train_sentiment(max_steps=1, **kw)
    (tmp_path / "run" / "progress.json").write_text('{"step": 1, "sec')
    assert train_sentiment(max_steps=1, **kw)["step"] == 2
    assert "progress.json cannot be read" in capsys.readouterr().err
    state = tmp_path / "run" / "checkpoint" / "state.pt"
    state.write_bytes(state.read_bytes()[:100])
    no_model()
    with pytest.raises(ValueError, match=f"checkpoint {str(state)!r} cannot be resumed"):
        train_sentiment(max_steps=1, **kw)


def test_a_diverging_run_stops_and_saves_no_adapter(tmp_path, tiny, capsys):
    with pytest.raises(RuntimeError, match=r"became inf or nan at step 1; lower lr \(no adapter saved; no checkpoint was saved"):
        train_sentiment(**_kw(tmp_path, lr=1e30))  # finite weights after step 1, but logits beyond float32
    assert not (tmp_path / "run" / "adapter_model.safetensors").exists() and not (tmp_path / "run" / "training.json").exists()
    assert not (tmp_path / "run" / "checkpoint" / "state.pt").exists()
    assert cli.main(["train-sentiment", "--out", str(tmp_path / "cli"), "--train-file", str(tmp_path / "t.tsv"), "--lr", "1e30",
                     "--no-progress"]) == 2
    assert "at step 1; lower --lr (no adapter saved" in capsys.readouterr().err
    assert not (tmp_path / "cli" / "adapter_model.safetensors").exists()


def test_a_loss_turning_nan_keeps_the_last_checkpoint(tmp_path, tiny, monkeypatch):
    real, calls = sentiment.accumulate_grads, []

    def nan_at_third_step(*args):
        calls.append(real(*args))
        return float("nan") if len(calls) == 3 else calls[-1]

    monkeypatch.setattr(sentiment, "accumulate_grads", nan_at_third_step)
    with pytest.raises(RuntimeError, match=r"loss became nan at step 3; lower lr \(no adapter saved; the checkpoint in .* is kept"):
        train_sentiment(**_kw(tmp_path))
    assert torch.load(tmp_path / "run" / "checkpoint" / "state.pt", weights_only=False)["step"] == 2
    assert not (tmp_path / "run" / "adapter_model.safetensors").exists()


def test_n_train_above_the_rows_is_said_and_recorded_as_used(tmp_path, tiny, capsys):
    done = train_sentiment(**_kw(tmp_path, n_train=100))
    assert "n_train is 100 but t.tsv gives 8 training rows" in capsys.readouterr().err
    assert done["settings"]["n_train"] == 8 and done["steps"] == 4


def test_the_micro_batch_size_may_change_between_runs(tmp_path, tiny):
    kw = _kw(tmp_path, batch_size=4)
    assert train_sentiment(max_steps=1, micro_batch_size=2, **kw)["step"] == 1
    done = train_sentiment(micro_batch_size=1, **kw)
    assert done["finished"] and done["steps"] == 2
    assert json.loads((tmp_path / "run" / "training.json").read_text())["micro_batch_size"] == 1


def test_an_interrupted_command_says_where_a_rerun_resumes(tmp_path, tiny, monkeypatch, capsys):
    real, calls = sentiment.accumulate_grads, []

    def stop_at_third_step(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(sentiment, "accumulate_grads", stop_at_third_step)
    out = tmp_path / "run"
    assert cli.main(["train-sentiment", "--out", str(out), "--train-file", str(_rows(tmp_path / "t.tsv", 8)), "--batch-size", "2",
                     "--checkpoint-every", "1", "--no-progress"]) == 130
    assert f"rerun the same command to resume from the last checkpoint (step 2, in {out / 'checkpoint'})" in capsys.readouterr().err


def test_losses_per_10_steps_span_a_resume(tmp_path, tiny, monkeypatch):
    real, seen = sentiment.accumulate_grads, []

    def record(*args):
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(sentiment, "accumulate_grads", record)
    kw = _kw(tmp_path, train_file=_rows(tmp_path / "t12.tsv", 12), n_train=12, batch_size=1, checkpoint_every=5)
    train_sentiment(max_steps=5, **kw)
    done = train_sentiment(**kw)
    assert len(seen) == 12
    assert done["losses_per_10_steps"] == pytest.approx([sum(seen[:10]) / 10, sum(seen[10:]) / 2])


def test_boolq_rows_of_the_scored_set_are_left_out(tmp_path, tiny, no_model, capsys):
    from aieg_fast.datasets import DATASETS, dataset_path

    held = DATASETS["boolq-heldout"].records(dataset_path("boolq-heldout"))[:2]
    own = [{"idx": 100 + i, "question": "is the film good", "passage": f"the film was {i}", "label": i % 2} for i in range(3)]
    f = tmp_path / "boolq.jsonl"
    f.write_text("".join(json.dumps({k: r[k] for k in ("idx", "question", "passage", "label")}) + "\n" for r in held + own))
    done = train_sentiment(task="boolq", out_dir=tmp_path / "run", train_file=f, batch_size=3, epochs=1, n_dev=2, progress=False)
    assert "2 of the 5 rows of boolq.jsonl are in boolq-heldout" in capsys.readouterr().err
    assert done["steps"] == 1 and "trained on 3 rows of boolq.jsonl" in done["split"] and "less 2" in done["split"]
    assert "disjoint halves" not in done["split"]
    f.write_text("".join(json.dumps({k: r[k] for k in ("idx", "question", "passage", "label")}) + "\n" for r in held))
    no_model()
    with pytest.raises(ValueError, match="all its 2 rows are in boolq-heldout"):
        train_sentiment(task="boolq", out_dir=tmp_path / "x", train_file=f, progress=False)


def test_the_default_training_file_is_read_from_the_data_folder(tmp_path, tiny, no_model, monkeypatch):
    """With $AIEG_FAST_DATA set, the training set is read from there, as the scored set is (it
    was always the shipped copy) and known by its digest; a folder without it is refused before
    the model loads, naming the file."""
    data = tmp_path / "data"
    _rows(data / "sst2_train.tsv", 6)
    _rows(data / "sst2_dev.tsv", 4, word="movie")
    monkeypatch.setenv("AIEG_FAST_DATA", str(data))
    kw = _kw(tmp_path, train_file=None, n_train=6)
    done = train_sentiment(**kw)
    assert done["steps"] == 3 and len(done["settings"].get("train_file_sha256", "")) == 16
    (data / "sst2_train.tsv").unlink()
    no_model()
    with pytest.raises(FileNotFoundError, match=r"'sst2-train' needs sst2_train.tsv in .*data"):
        train_sentiment(**dict(kw, out_dir=tmp_path / "other"))


def test_a_stopped_final_save_leaves_no_adapter_without_its_record(tmp_path, tiny, monkeypatch):
    """The adapter was saved into out_dir, then training.json: a kill in between left an adapter
    that loaded without the record evaluate reads to refuse the rows it was trained on."""
    from peft import PeftModel

    kw, out = _kw(tmp_path), tmp_path / "run"
    real = PeftModel.save_pretrained

    def killed_after_saving(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(PeftModel, "save_pretrained", killed_after_saving)
    with pytest.raises(KeyboardInterrupt):
        train_sentiment(**kw)
    assert not (out / "adapter_config.json").exists() and not (out / "training.json").exists()
    assert not list(out.glob(".partial-*"))
    monkeypatch.setattr(PeftModel, "save_pretrained", real)
    record = train_sentiment(**kw)  # the rerun finishes from the last checkpoint
    assert record["finished"] and {"adapter_config.json", "adapter_model.safetensors"} <= set(record["files"])
    assert all((out / f).is_file() for f in record["files"]) and json.loads((out / "training.json").read_text())["files"] == record["files"]


def test_an_adapter_that_cannot_be_moved_into_place_is_named_and_refused(tmp_path, tiny, monkeypatch):
    import aieg_fast

    kw, out = _kw(tmp_path), tmp_path / "run"
    with moves_refused("adapter_model.safetensors"), pytest.raises(OSError, match=r"out_dir .*run'.*could not be moved into it.*"
                                                                               r"are kept in '.*\.partial-"):
        train_sentiment(**kw)
    stopped = r"a training stopped while moving its model into (it|this folder); the rest of that model.* is in '.*\.partial-"
    with pytest.raises(ValueError, match=stopped):  # a rerun does not write over the moved files
        train_sentiment(**kw)
    with pytest.raises(ValueError, match=stopped):  # nor does the loader read the adapter without its record
        aieg_fast.load_model(str(out))


def test_the_users_files_in_the_folder_stay(tmp_path, tiny):
    """An adapter's install removed every file named as a transformers model's (config.json,
    tokenizer.json, ...) from a folder without a record, or with one that lists no files."""
    kw, out = _kw(tmp_path), tmp_path / "run"
    out.mkdir()
    mine = {"config.json": "{}", "tokenizer.json": "mine", "notes.txt": "mine", "README.md": "my notes"}  # peft writes a README.md
    for name, text in mine.items():
        (out / name).write_text(text)
    record = train_sentiment(**kw)
    assert all((out / n).read_text() == t for n, t in mine.items())
    older = {k: v for k, v in record.items() if k != "files"}  # a record written before they listed their files
    (out / "training.json").write_text(json.dumps(older))
    (out / "adapter_model.bin").write_text("an older adapter's weights")  # written by an older peft: the new one does not
    train_sentiment(**kw)
    assert all((out / n).read_text() == t for n, t in mine.items()) and not (out / "adapter_model.bin").exists()
