"""``train_nano``'s output folder: a finished model of other settings is refused before the
tokenizer loads (as ``train_sentiment`` refuses an adapter), and the new model's files move into
the folder only once they are whole, the record last (an interrupted save leaves the former model
as it was; other files in the folder stay)."""
from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest

import aieg_fast
import aieg_fast.training.nano as nano
from builders import byte_level_tokenizer, held_by_another_process, moves_refused, sentencepiece_like_tokenizer, sst2_rows


def _no_tokenizer():
    raise AssertionError("the tokenizer was loaded before the folder was checked")


def _digest(out):
    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


@pytest.fixture
def data(tmp_path):
    return sst2_rows(tmp_path / "t.tsv", 16), sst2_rows(tmp_path / "d.tsv", 8, word="movie")


def _train(data, out, **kw):
    return nano.train_nano(*data, out_dir=out, epochs=1, batch_size=8, progress=False, **dict(dict(tokenizer=byte_level_tokenizer()), **kw))


def test_a_finished_model_of_other_settings_is_refused_before_the_tokenizer_loads(tmp_path, data, monkeypatch):
    out = tmp_path / "gpt-nano-sst2"
    _train(data, out)
    before = _digest(out)
    monkeypatch.setattr(nano, "_embedded_tokenizer", _no_tokenizer)
    with pytest.raises(ValueError) as err:
        _train(data, out, seed=1, max_train=4, tokenizer=None)
    assert str(err.value) == (f"out_dir {str(out)!r} holds a model trained with other settings (n_train: 16 recorded, 4 now; "
                              f"seed: 0 recorded, 1 now); pass another out_dir, or delete the folder {str(out)!r} to start again")
    with pytest.raises(ValueError, match=r"holds a model trained with other settings \(arch: 'gpt2' recorded, 'llama' now"):
        _train(data, out, arch="llama", tokenizer=None)
    assert _digest(out) == before and json.loads((out / "training.json").read_text())["settings"]["seed"] == 0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds files but no training.json"):
        _train(data, tmp_path / "mine", tokenizer=None)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"


def test_the_same_settings_train_again_and_an_interrupted_save_keeps_the_former_model(tmp_path, data, monkeypatch):
    out = tmp_path / "gpt-nano-sst2"
    _train(data, out)
    before, record = _digest(out), (out / "training.json").read_text()
    tok = sentencepiece_like_tokenizer()  # the same settings, another vocabulary: other weights

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(tok), "save_pretrained", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _train(data, out, tokenizer=tok)
    assert _digest(out) == before and (out / "training.json").read_text() == record
    assert not list(out.glob(".partial-*")) and sorted(p.name for p in tmp_path.iterdir()) == ["d.tsv", "gpt-nano-sst2", "t.tsv"]
    monkeypatch.undo()
    (out / "my_notes.md").write_text("mine")
    (out / "runs").mkdir()
    record = json.loads((out / "training.json").read_text())
    assert "model.safetensors" in record["files"] and "training.json" not in record["files"]
    (out / "vocab.json").write_text("{}")  # a file the former model wrote (as its record says) and the new one does not
    (out / "training.json").write_text(json.dumps(dict(record, files=record["files"] + ["vocab.json"])))
    again = _train(data, out)
    assert again["settings"]["seed"] == 0 and _digest(out) == before  # the same settings: the same model, in place
    assert (out / "my_notes.md").read_text() == "mine" and (out / "runs").is_dir()  # the user's files stay
    assert not (out / "vocab.json").exists()  # the former model's own stale file does not
    assert not list(out.glob(".partial-*")) and sorted(p.name for p in tmp_path.iterdir()) == ["d.tsv", "gpt-nano-sst2", "t.tsv"]


def test_a_model_that_cannot_be_moved_into_place_is_kept_and_named(tmp_path, data):
    out = tmp_path / "gpt-nano-sst2"
    with moves_refused("model.safetensors"), pytest.raises(OSError, match=r"out_dir .*gpt-nano-sst2'.*could not be moved into "
                                                                          r"it.*are kept in '.*\.partial-") as err:
        _train(data, out)
    kept = [p for p in out.glob(".partial-*")]
    assert len(kept) == 1 and str(kept[0]) in str(err.value)
    assert (kept[0] / "model.safetensors").is_file() and (kept[0] / "training.json").is_file()
    assert not (out / "training.json").exists()  # no record over files of two models
    stopped = r"a training stopped while moving its model into (it|this folder); the rest of that model.* is in '.*\.partial-"
    with pytest.raises(ValueError, match=stopped):  # a rerun does not write over them unasked, nor drops the rest
        _train(data, out)
    with pytest.raises(ValueError, match=stopped):  # nor does the loader read the half-moved model
        aieg_fast.load_model(str(out))
    for f in kept[0].iterdir():  # finished by hand, as the message says
        f.rename(out / f.name)
    assert aieg_fast.load_model(str(out)).model.config.model_type == "gpt2"


def test_the_same_data_files_elsewhere_are_the_same_settings(tmp_path, data):
    """The shipped data lie under the installed package, whose path differs between installs:
    files of the same names and contents elsewhere train again in place (another name or other
    contents are other settings; a record from before the contents were written compares names)."""
    out = tmp_path / "gpt-nano-sst2"
    _train(data, out)
    moved = [tmp_path / "elsewhere" / p.name for p in data]
    for src, dst in zip(data, moved):
        dst.parent.mkdir(exist_ok=True)
        dst.write_text(src.read_text())
    assert _train(moved, out)["settings"]["train_file"] == str(moved[0])
    renamed = tmp_path / "other.tsv"
    renamed.write_text(data[0].read_text())
    with pytest.raises(ValueError, match=r"other settings \(train_file: 't.tsv' recorded, 'other.tsv' now\)"):
        _train((renamed, data[1]), out)
    flipped = tmp_path / "flipped" / "t.tsv"  # the same name and rows, other labels
    flipped.parent.mkdir()
    flipped.write_text(data[0].read_text().replace("\t1\n", "\tX\n").replace("\t0\n", "\t1\n").replace("\tX\n", "\t0\n"))
    with pytest.raises(ValueError, match=r"other settings \(train_file_sha256: '[0-9a-f]{16}' recorded, '[0-9a-f]{16}' now\)"):
        _train((flipped, data[1]), out)
    record = json.loads((out / "training.json").read_text())  # a record from before the digests: names alone
    for k in ("train_file_sha256", "dev_file_sha256"):
        del record["settings"][k]
    (out / "training.json").write_text(json.dumps(record))
    assert _train(moved, out)["settings"]["train_file_sha256"]


@pytest.mark.skipif(importlib.util.find_spec("fcntl") is None, reason="needs POSIX file locks")
def test_a_second_run_on_a_folder_in_use_is_refused_before_the_tokenizer_loads(tmp_path, data, monkeypatch):
    """Two train_nano runs on one folder: the second's staging removed the first's half-saved
    model; the folder is held as train_sentiment's and evaluate's are."""
    out = tmp_path / "gpt-nano-sst2"
    out.mkdir()
    with held_by_another_process(out):
        monkeypatch.setattr(nano, "_embedded_tokenizer", _no_tokenizer)
        with pytest.raises(ValueError, match=f"out_dir {str(out)!r} is in use by another run"):
            _train(data, out, tokenizer=None)
    assert _train(data, out)["n_train"] == 16 and (out / "training.json").is_file()  # let go: the folder, its lock file aside, is free
