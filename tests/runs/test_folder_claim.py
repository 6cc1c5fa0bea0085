"""A run folder is held by one command at a time (runs.claim_folder): two attribute-dataset
commands on one folder lost records (each rewrote the file while the other appended to it)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from aieg_fast import eval as E
from aieg_fast.runs import LOCK_FILE, claim_folder, holds_results, made_folder

HOLD = """
import sys, time
from aieg_fast.runs import claim_folder, made_folder
with made_folder(sys.argv[1]) as out:
    claim_folder(out)
    print("held", flush=True)
    time.sleep(120)
"""


def _holder(folder):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_folder_held_by_another_process_is_refused_until_it_ends(tmp_path):
    out = tmp_path / "run"
    p = _holder(out)
    try:
        with pytest.raises(ValueError, match=r"out_dir '.*run' is in use by another run .*use another out_dir"):
            with made_folder(out) as o:
                claim_folder(o)
    finally:
        p.kill()
        p.wait()
    with made_folder(out) as o:  # the killed holder left no stale claim
        claim_folder(o)
        claim_folder(o)  # a second claim by the holder is a no-op
    assert (out / LOCK_FILE).is_file() and not holds_results(out)


def test_a_refused_fresh_folder_is_removed_with_its_lock_file(tmp_path):
    out = tmp_path / "fresh"
    with pytest.raises(RuntimeError):
        with made_folder(out) as o:
            claim_folder(o)
            raise RuntimeError("refused after the claim")
    assert not out.exists()


def test_a_fresh_folder_whose_lock_cannot_be_made_is_removed(tmp_path, monkeypatch):
    """claim_folder failing with a system error (the lock file not creatable) is no refusal by
    another run: the folder this call made goes, as for any other error."""
    import os

    real_open = os.open

    def no_lock(path, *a, **kw):
        if str(path).endswith(LOCK_FILE):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr(os, "open", no_lock)
    out = tmp_path / "fresh"
    with pytest.raises(PermissionError):
        with made_folder(out):
            pass
    assert not out.exists()


def test_evaluate_on_a_folder_in_use_is_refused_and_writes_nothing(tiny_gpt2, tmp_path):
    out = tmp_path / "run"
    p = _holder(out)
    try:
        with pytest.raises(ValueError, match=r"is in use by another run"):
            E.evaluate(tiny_gpt2, methods="saliency", n=1, out_dir=out, n_steps=4, progress=False, plot=False, labels=(10, 11),
                       template="{text} :", metrics="hard")
        assert sorted(x.name for x in out.iterdir()) == [LOCK_FILE]
    finally:
        p.kill()
        p.wait()
    res = E.evaluate(tiny_gpt2, methods="saliency", n=1, out_dir=out, n_steps=4, progress=False, plot=False, labels=(10, 11),
                     template="{text} :", metrics="hard")
    assert res["computed"] == 1


def test_attribute_dataset_on_a_folder_in_use_is_refused(tiny_gpt2, tmp_path):
    """The command that lost records when two of it shared a folder."""
    import json

    from aieg_fast.dataset_attribution import attribute_dataset

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": f"the movie is good {i}"}) + "\n" for i in range(3)), encoding="utf-8")
    out = tmp_path / "o"
    p = _holder(out)
    try:
        with pytest.raises(ValueError, match=r"is in use by another run"):
            attribute_dataset(data, out, tiny_gpt2, method="saliency", progress=False)
    finally:
        p.kill()
        p.wait()
    assert attribute_dataset(data, out, tiny_gpt2, method="saliency", progress=False)["computed"] == 3


def test_a_folder_in_use_is_refused_before_the_model_is_loaded(tmp_path):
    """The claim comes with the folder (made_folder), before any model is loaded: a folder in use
    was refused only after loading (half a minute for the embedded model). A model path that
    does not exist shows the order: the refusal names the folder, not the model."""
    import json

    from aieg_fast.dataset_attribution import attribute_dataset

    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"text": "the movie is good"}) + "\n", encoding="utf-8")
    out = tmp_path / "o"
    p = _holder(out)
    try:
        with pytest.raises(ValueError, match=r"is in use by another run"):
            attribute_dataset(data, out, str(tmp_path / "no-such-model"), method="saliency", progress=False)
        with pytest.raises(ValueError, match=r"is in use by another run"):
            E.evaluate(str(tmp_path / "no-such-model"), methods="saliency", n=1, out_dir=out, progress=False, plot=False,
                       labels=(" bad", " good"), template="{text} :", metrics="hard")
    finally:
        p.kill()
        p.wait()


def test_a_folder_of_another_kind_of_run_is_named_as_such(tmp_path, capsys):
    """--out at an evaluate folder from attribute-dataset (and the reverse) says whose records it
    holds; it listed every setting of the other command as a difference."""
    from aieg_fast import cli

    rows = tmp_path / "d.jsonl"
    rows.write_text('{"text": "a fine film"}\n')
    for name, records in (("ev", "records.jsonl"), ("ad", "attributions.jsonl")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text('{"topk": 0.2}')
        (tmp_path / name / records).write_text('{"id": 0}\n')
    assert cli.main(["attribute-dataset", str(rows), "--out", str(tmp_path / "ev"), "--method", "saliency"]) == 2
    assert "holds the records of another kind of run (records.jsonl), not attributions.jsonl as attribute_dataset writes" \
        in capsys.readouterr().err
    for argv in (["--methods", "saliency"], ["--dataset", str(rows), "--methods", "saliency"], ["--dataset", "longra"]):
        assert cli.main(["evaluate", *argv, "--out", str(tmp_path / "ad")]) == 2
        assert "holds the records of another kind of run (attributions.jsonl), not records.jsonl as an evaluation writes" \
            in capsys.readouterr().err


def _locked(folder) -> bool:
    """Whether some open descriptor holds ``folder/.lock`` (flock: a new one is refused even
    in the holding process)."""
    import fcntl
    import os

    fd = os.open(folder / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _hold_in_thread(folder):
    """A thread holding ``folder`` in a made_folder block until the returned event is set."""
    import threading

    held, go = threading.Event(), threading.Event()

    def run():
        with made_folder(folder):
            held.set()
            go.wait(30)

    t = threading.Thread(target=run)
    t.start()
    assert held.wait(30)
    return t, go


def test_a_run_from_another_thread_is_refused_and_leaves_the_holder_its_lock(tmp_path):
    """A notebook's second run while the first runs in a background thread: the claim was a
    no-op for a folder this process held (both ran, losing records), and the second's exit let
    go of the first's lock (another process could then take the folder)."""
    out = tmp_path / "run"
    t, go = _hold_in_thread(out)
    try:
        with pytest.raises(ValueError, match=r"is in use by another run"):
            with made_folder(out):
                pass
        assert (out / LOCK_FILE).is_file() and _locked(out)  # still the first run's
    finally:
        go.set()
        t.join()
    assert not _locked(out)
    with made_folder(out) as o:  # the holder ended: free again
        assert claim_folder(o) is False  # the holder's own nested claim
        assert _locked(out)


def test_two_threads_on_a_new_folder_at_once_one_runs_and_the_other_removes_nothing(tmp_path, monkeypatch):
    """Both find the folder new: the refused one removed the holder's lock file and folder (the
    holder then failed on .lock), or both ran."""
    import threading

    from aieg_fast.runs import folder as F

    out = tmp_path / "new"
    both = threading.Barrier(2, timeout=30)
    real = F.writable_folder
    monkeypatch.setattr(F, "writable_folder", lambda *a, **k: (both.wait(), real(*a, **k))[1])  # both saw no folder
    results, held, refused, go = [], threading.Event(), threading.Event(), threading.Event()

    def run():
        try:
            with made_folder(out):
                results.append("held")
                held.set()
                go.wait(30)
                assert (out / LOCK_FILE).is_file()
        except ValueError:
            results.append("refused")
            refused.set()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        assert held.wait(30) and refused.wait(10), results
        assert (out / LOCK_FILE).is_file() and _locked(out)
    finally:
        go.set()
        for t in threads:
            t.join()
    assert sorted(results) == ["held", "refused"] and out.is_dir() and not _locked(out)


def test_a_nested_block_of_the_holders_thread_lets_go_of_nothing(tmp_path):
    out = tmp_path / "run"
    with made_folder(out) as o:
        with made_folder(out):
            claim_folder(o)
        assert _locked(out)  # the inner block's end let go of the outer's claim
    assert not _locked(out)


def test_a_claim_left_by_an_ended_thread_is_taken_over(tmp_path):
    import threading

    out = tmp_path / "run"
    out.mkdir()
    t = threading.Thread(target=claim_folder, args=(out,))
    t.start()
    t.join()
    with made_folder(out):
        assert _locked(out)
    assert not _locked(out)


def test_commands_from_another_thread_on_a_folder_in_use_are_refused(tiny_gpt2, tmp_path):
    """attribute_dataset and evaluate in the main thread while a background thread holds the
    folder: both ran into it (the claim was a no-op within one process)."""
    import json

    from aieg_fast.dataset_attribution import attribute_dataset

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": f"the movie is good {i}"}) + "\n" for i in range(3)), encoding="utf-8")
    out = tmp_path / "o"
    t, go = _hold_in_thread(out)
    try:
        with pytest.raises(ValueError, match=r"is in use by another run"):
            attribute_dataset(data, out, tiny_gpt2, method="saliency", progress=False)
        with pytest.raises(ValueError, match=r"is in use by another run"):
            E.evaluate(tiny_gpt2, methods="saliency", n=1, out_dir=out, n_steps=4, progress=False, plot=False, labels=(10, 11),
                       template="{text} :", metrics="hard")
        assert sorted(x.name for x in out.iterdir()) == [LOCK_FILE] and _locked(out)
    finally:
        go.set()
        t.join()


def test_a_relative_path_recorded_elsewhere_gets_a_hint(tmp_path, monkeypatch):
    """A run started in d/ on 'lab.csv', resumed from d's parent on 'd/lab.csv' (or the other way),
    was refused as other settings with no word that it may be the same file."""
    import json

    from aieg_fast.runs import check_recorded_config

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "lab.csv").write_text("text,label\na,0\n")
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"dataset": "lab.csv", "n": 2}))
    (out / "records.jsonl").write_text('{"id": "0"}\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"dataset: 'lab.csv' recorded, 'd/lab.csv' now.*dataset 'lab.csv' is relative to "
                                         r"the directory the recorded run was started in: if it is the same path"):
        check_recorded_config(out, {"dataset": "d/lab.csv", "n": 2})
    with pytest.raises(ValueError, match=r"other settings \(n: 2 recorded, 3 now\); use another out_dir$"):
        check_recorded_config(out, {"dataset": "lab.csv", "n": 3})  # a plain difference: no hint
    monkeypatch.chdir(tmp_path / "d")
    check_recorded_config(out, {"dataset": "lab.csv", "n": 2})  # from where it was started: the same run
    (out / "config.json").write_text(json.dumps({"model": "gpt2"}))  # a hub id, now a folder of the same name
    (tmp_path / "d" / "m").mkdir()
    (tmp_path / "d" / "m" / "gpt2").mkdir()
    with pytest.raises(ValueError, match=r"model: 'gpt2' recorded, 'm/gpt2' now\); use another out_dir$"):
        check_recorded_config(out, {"model": "m/gpt2"})


def test_a_run_on_a_model_folder_named_relatively_resumes_from_another_directory(tiny_gpt2, tmp_path, monkeypatch):
    """attribute-dataset started in work/ with --model m, resumed from work's parent with
    --model work/m: refused as another model ('m' recorded, 'work/m' now), the weights the same;
    the folder is recorded by its absolute path."""
    import json

    from aieg_fast import cli

    work = tmp_path / "work"
    tiny_gpt2.model.save_pretrained(work / "m")
    tiny_gpt2.tokenizer.save_pretrained(work / "m")
    (work / "d.jsonl").write_text('{"text": "a fine film"}\n{"text": "a dull film"}\n')
    monkeypatch.chdir(work)
    argv = ["--method", "saliency", "--no-progress"]
    assert cli.main(["attribute-dataset", "d.jsonl", "--out", "o", "--model", "m", "--limit", "1", *argv]) == 0
    assert json.loads((work / "o" / "config.json").read_text())["model"] == str(work / "m")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["attribute-dataset", "work/d.jsonl", "--out", "work/o", "--model", "work/m", *argv]) == 0
    assert len((work / "o" / "attributions.jsonl").read_text().splitlines()) == 2
