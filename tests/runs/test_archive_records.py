"""benchmarks/archive_records.py: the committed copy of a long run's records must round-trip,
never drop or duplicate a record, and leave a line still being written out."""
import gzip
import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "archive_records", Path(__file__).resolve().parents[2] / "benchmarks" / "archive_records.py")
archive_records = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(archive_records)


def _line(i, methods=("ig",)):
    return json.dumps({"id": f"ex:{i}", "methods": {m: {"log_odds": -float(i)} for m in methods}}) + "\n"


def _ids(path):
    return [json.loads(x)["id"] for x in path.read_text().splitlines()]


def test_save_keeps_complete_lines_only_and_is_byte_stable(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text(_line(0) + _line(1) + '{"id": "ex:2", "meth')  # line 2 being written
    gz = tmp_path / "a" / "run.jsonl.gz"
    assert archive_records.save(run, gz) == 2
    first = gz.read_bytes()
    assert gzip.decompress(first).decode() == _line(0) + _line(1)
    archive_records.save(run, gz)
    assert gz.read_bytes() == first  # no time stamp: an unchanged run is an unchanged file
    (run / "parts").mkdir()  # a torchrun run writes its records into parts until it ends
    (run / "parts" / "records.rank1.jsonl").write_text(_line(7) + '{"id"')
    assert archive_records.save(run, gz) == 3
    assert gzip.decompress(gz.read_bytes()).decode() == _line(0) + _line(1) + _line(7)
    assert archive_records.save(run, gz) == 3  # saving again adds nothing
    (run / "config.json").write_text('{"seed": 0}', encoding="utf-8")
    assert archive_records.save(run, gz) == 3 and gz.with_name("run.jsonl.gz.config.json").read_text() == '{"seed": 0}'  # none kept yet
    (run / "config.json").write_text('{"seed": 0, "method_options": {"aieg": {"preset": "v1"}}}', encoding="utf-8")
    archive_records.save(run, gz)  # a rerun that computed nothing (study19's run.py pins options in config.json)
    assert gz.with_name("run.jsonl.gz.config.json").read_text() == '{"seed": 0}'  # it changed no committed file
    (run / "records.jsonl").write_text(_line(0) + _line(1) + _line(2))
    assert archive_records.save(run, gz) == 4 and "method_options" in gz.with_name("run.jsonl.gz.config.json").read_text()


def test_restore_fills_a_fresh_folder_then_only_adds_what_is_missing(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "records.jsonl").write_text(_line(0) + _line(1) + _line(1, ("aieg",)))
    gz = tmp_path / "run.jsonl.gz"
    archive_records.save(src, gz)

    fresh = tmp_path / "fresh"
    assert archive_records.restore(gz, fresh) == 3
    assert _ids(fresh / "records.jsonl") == ["ex:0", "ex:1", "ex:1"]
    assert archive_records.restore(gz, fresh) == 0  # idempotent

    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "records.jsonl").write_text(_line(1) + _line(5))
    assert archive_records.restore(gz, partial) == 2  # ex:0 and the aieg line of ex:1
    assert sorted(_ids(partial / "records.jsonl")) == ["ex:0", "ex:1", "ex:1", "ex:5"]


def test_restore_leaves_out_what_the_parts_of_a_stopped_torchrun_run_hold(tmp_path):
    """A torchrun run stopped by a kill leaves its records in parts/ (merged when it starts
    again): restoring before that start must not add those records a second time."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text(_line(0))
    (run / "parts").mkdir()
    (run / "parts" / "records.rank00001.jsonl").write_text(_line(3) + _line(4))
    gz = tmp_path / "run.jsonl.gz"
    assert archive_records.save(run, gz) == 3
    assert archive_records.restore(gz, run) == 0
    assert _ids(run / "records.jsonl") == ["ex:0"]


def test_restore_cuts_a_half_written_line_and_save_never_drops_archived_records(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "records.jsonl").write_text(_line(0) + _line(1))
    (src / "config.json").write_text('{"n_steps": 50}')
    gz = tmp_path / "run.jsonl.gz"
    archive_records.save(src, gz)

    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "records.jsonl").write_text(_line(3) + '{"id": "ex:4"')  # a hard kill mid-line
    assert archive_records.restore(gz, torn) == 2
    assert sorted(_ids(torn / "records.jsonl")) == ["ex:0", "ex:1", "ex:3"]
    assert (torn / "records.jsonl.torn").read_text().strip() == '{"id": "ex:4"'
    assert (torn / "config.json").read_text() == '{"n_steps": 50}'  # the settings travel too

    fresh = tmp_path / "fresh"  # a folder that was never restored, with one new record
    fresh.mkdir()
    (fresh / "records.jsonl").write_text(_line(9))
    assert archive_records.save(fresh, gz) == 3  # added to, not replaced
    assert sorted(json.loads(x)["id"] for x in gzip.decompress(gz.read_bytes()).decode().splitlines()) == ["ex:0", "ex:1", "ex:9"]

    with pytest.raises(FileNotFoundError, match="run_dir"):
        archive_records.save(tmp_path / "nope", gz)
    assert archive_records.restore(tmp_path / "missing.gz", torn) == 0


def test_swapped_arguments_are_refused_before_anything_is_written(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text(_line(0))
    gz = tmp_path / "run.jsonl.gz"
    archive_records.save(run, gz)
    before = gz.read_bytes()
    with pytest.raises(ValueError, match="archive"):
        archive_records.restore(run, gz)  # restore takes the archive first
    with pytest.raises(ValueError, match="archive"):
        archive_records.save(gz, run)  # save takes the run folder first
    assert gz.read_bytes() == before and _ids(run / "records.jsonl") == ["ex:0"]


def test_restored_folder_reads_its_method_specs_as_they_were_computed(tmp_path):
    """The archive keeps methods.json: a folder restored on a fresh machine reads the spec
    'aieg' with the options its records were computed with. Without it, the spec was read with
    the defaults of the version before methods.json existed and the resume was refused
    ("holds records of 'aieg' computed with other options"), though nothing had changed."""
    from aieg_fast.runs import METHODS_FILE, check_or_record_methods

    src = tmp_path / "src"
    src.mkdir()
    now = {"aieg": {"preset": "v2"}}
    check_or_record_methods(src, now, lambda m: {"preset": "v1"}, [])  # a new run records its reading, then computes
    (src / "records.jsonl").write_text(_line(0, ("aieg",)))
    gz = tmp_path / "run.jsonl.gz"
    archive_records.save(src, gz)

    fresh = tmp_path / "fresh"
    assert archive_records.restore(gz, fresh) == 1
    assert json.loads((fresh / METHODS_FILE).read_text()) == now
    check_or_record_methods(fresh, now, lambda m: {"preset": "v1"}, ["aieg"])  # the resume is accepted


def test_settings_that_differ_from_the_archive_are_refused_both_ways(tmp_path):
    """restore appended an archive's lines to a folder of other settings (a float32 folder took a
    bfloat16 run's records: its summary averaged the two), and save appended a folder's lines to
    an archive of other settings and replaced its config.json. Both refuse now, writing nothing;
    a key only one side records (a later version's addition) and a spec only one side holds
    (a method added on resume) are no conflict."""
    def folder(name, dtype, opts, extra=None):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"dtype": dtype, "n_steps": 50, **(extra or {})}))
        (d / "methods.json").write_text(json.dumps(opts))
        return d

    bf16 = folder("bf16", "bfloat16", {"aieg": {"preset": "v2"}})
    (bf16 / "records.jsonl").write_text(_line(0) + _line(1))
    gz = tmp_path / "run.jsonl.gz"
    archive_records.save(bf16, gz)
    kept = {p.name: p.read_bytes() for p in tmp_path.glob("run.jsonl.gz*")}

    f32 = folder("f32", "float32", {"aieg": {"preset": "v2"}})
    (f32 / "records.jsonl").write_text(_line(5))
    with pytest.raises(ValueError, match=r"archive: .*other settings.*config.json dtype: 'bfloat16' recorded, 'float32' now"):
        archive_records.restore(gz, f32)
    with pytest.raises(ValueError, match=r"run_dir: .*other settings.*dtype"):
        archive_records.save(f32, gz)
    other = folder("other", "bfloat16", {"aieg": {"preset": "v1"}})
    (other / "records.jsonl").write_text(_line(6))
    with pytest.raises(ValueError, match=r"methods.json aieg: \{'preset': 'v2'\} recorded, \{'preset': 'v1'\} now"):
        archive_records.save(other, gz)
    assert _ids(f32 / "records.jsonl") == ["ex:5"] and {p.name: p.read_bytes() for p in tmp_path.glob("run.jsonl.gz*")} == kept

    grown = folder("grown", "bfloat16", {"aieg": {"preset": "v2"}, "occlusion": {}}, {"soft_maps": ["relu"]})
    assert archive_records.restore(gz, grown) == 2
    (grown / "records.jsonl").write_text((grown / "records.jsonl").read_text() + _line(2))
    assert archive_records.save(grown, gz) == 3
