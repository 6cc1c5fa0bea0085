"""Record files that survive a hard kill (aieg_fast.runs.records): a cut last line is detected,
left out and cut off the file before anything is appended, its bytes kept; lines written after
a cut line by earlier versions give their record back."""
from __future__ import annotations

import json

from aieg_fast.runs import TORN_SUFFIX, append_jsonl, read_jsonl, repair_jsonl, write_jsonl
from aieg_fast.runs.records import write_json


def _lines(n):
    return [{"index": i, "scores": [0.5 * i, float("nan")]} for i in range(n)]


def test_cut_last_line_is_left_out_then_cut_off_and_kept(tmp_path):
    p = tmp_path / "r.jsonl"
    append_jsonl(p, _lines(3))
    whole = p.read_bytes()
    p.write_bytes(whole[:-9])  # a kill in the middle of the third line
    recs, notes = read_jsonl(p)
    assert [r["index"] for r in recs] == [0, 1] and recs[0]["scores"] == [0.0, None]
    assert len(notes) == 1 and "cut" in notes[0]
    assert p.read_bytes() == whole[:-9]  # reading changes nothing
    said = repair_jsonl(p)
    assert any("cut" in s for s in said) and any(TORN_SUFFIX in s for s in said)
    assert (tmp_path / ("r.jsonl" + TORN_SUFFIX)).read_bytes() == whole[whole.rindex(b"{"):-9] + b"\n"
    append_jsonl(p, [{"index": 2, "scores": []}])  # the recomputed record starts on its own line
    assert [r["index"] for r in read_jsonl(p)[0]] == [0, 1, 2]
    assert read_jsonl(p)[1] == []


def test_append_after_a_cut_line_without_repair_loses_both(tmp_path):
    """What happened before the repair: the recomputed record is glued to the cut line. The
    reader now recovers the whole record at the end of such a line."""
    p = tmp_path / "r.jsonl"
    append_jsonl(p, _lines(2))
    p.write_bytes(p.read_bytes()[:-5])
    append_jsonl(p, [{"index": 1, "scores": [1.0]}])
    assert len(p.read_bytes().splitlines()) == 2  # glued: one line holds the cut record and the new one
    recs, notes = read_jsonl(p)
    assert [r["index"] for r in recs] == [0, 1] and recs[1]["scores"] == [1.0]
    assert any("whole one kept" in n for n in notes)
    repair_jsonl(p)  # rewritten: every line a record again
    assert [json.loads(line)["index"] for line in p.read_text().splitlines()] == [0, 1]


def test_missing_newline_added_sound_file_untouched(tmp_path):
    p = tmp_path / "r.jsonl"
    append_jsonl(p, _lines(2))
    sound = p.read_bytes()
    assert repair_jsonl(p) == [] and p.read_bytes() == sound
    assert not (tmp_path / ("r.jsonl" + TORN_SUFFIX)).exists()
    p.write_bytes(sound[:-1])  # killed between the record and its newline
    assert [r["index"] for r in read_jsonl(p)[0]] == [0, 1]
    assert repair_jsonl(p) and p.read_bytes() == sound


def test_write_jsonl_replaces_the_whole_file(tmp_path):
    p = tmp_path / "r.jsonl"
    append_jsonl(p, _lines(3))
    write_jsonl(p, _lines(1))
    assert read_jsonl(p) == ([{"index": 0, "scores": [0.0, None]}], [])
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.jsonl"]  # no temporary file left
    assert read_jsonl(tmp_path / "missing.jsonl") == ([], [])


def test_run_files_written_through_a_link_keep_the_link(tmp_path):
    """A run folder's records or config reached by a symbolic link (e.g. onto a larger disk): the
    file it points to is replaced and the link stays (it was replaced by a regular file)."""
    real, link = tmp_path / "real.jsonl", tmp_path / "records.jsonl"
    real.write_text("")
    link.symlink_to(real)
    write_jsonl(link, [{"id": "a"}])
    assert link.is_symlink() and read_jsonl(real)[0] == [{"id": "a"}]
    conf, conf_link = tmp_path / "real.json", tmp_path / "config.json"
    conf.write_text("{}")
    conf_link.symlink_to(conf)
    write_json(conf_link, {"n_steps": 20})
    assert conf_link.is_symlink() and json.loads(conf.read_text()) == {"n_steps": 20}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "real.json", "real.jsonl", "records.jsonl"]


def test_a_failed_write_names_the_path_asked_for(tmp_path):
    """The error named the hidden temporary file (".x.json.tmp<pid>"), not the file asked for."""
    import pytest

    target = tmp_path / "missing" / "x.json"
    with pytest.raises(FileNotFoundError) as err:
        write_json(target, {"a": 1})
    assert err.value.filename == str(target) and ".tmp" not in str(err.value)


def test_saves_to_one_path_from_several_threads_all_succeed(tmp_path):
    """Threads of one process saving to one path at once: each save lands whole (they shared one
    temporary name, so one thread's rename took another's file away: FileNotFoundError, the save
    lost)."""
    import threading

    path, errors = tmp_path / "out.json", []

    def save(i):
        try:
            for k in range(150):
                write_json(path, {"thread": i, "k": k, "pad": "x" * 2000})
        except OSError as err:
            errors.append(err)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:2]
    assert json.loads(path.read_text())["k"] == 149 and not list(tmp_path.glob(".out.json.tmp*"))


def test_a_long_file_name_saves_and_a_too_long_one_is_named(tmp_path):
    """The temporary name (the target's, a process and a thread id added) is kept under the file
    system's 255-byte limit: a 240-byte name the folder takes saved (ENAMETOOLONG for the
    temporary file since the thread id was added); a name too long for the folder itself is
    refused naming the path asked for (the clean-up of the temporary file raised over it,
    naming the temporary file)."""
    import pytest

    ok = tmp_path / ("r" * 235 + ".json")
    write_json(ok, {"a": 1})
    assert json.loads(ok.read_text()) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == [ok.name]
    bad = tmp_path / ("r" * 260 + ".json")
    with pytest.raises(OSError) as err:
        write_json(bad, {"a": 1})
    assert err.value.filename == str(bad) and ".tmp" not in str(err.value)
