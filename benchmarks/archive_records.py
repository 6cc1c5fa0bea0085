"""Keep an evaluation's records in the repository, so a long run resumes on another machine.

Run folders (``runs/...``) are not committed, and a session's machine does not outlive it, so
the records of a run that takes several sessions are copied, gzipped, into ``benchmarks/``
as they grow and committed; the next session restores them into a fresh run folder and the
run resumes from there (``evaluate`` skips every example whose record exists).

    python benchmarks/archive_records.py save    RUN_DIR ARCHIVE.jsonl.gz
    python benchmarks/archive_records.py restore ARCHIVE.jsonl.gz RUN_DIR

``save`` adds to the archive the complete lines of ``RUN_DIR/records.jsonl`` and of the parts a
torchrun run is writing (``RUN_DIR/parts/records.rank<N>.jsonl``) that it does not hold yet
(same example id and the same methods); a line being written is left for the next save, and an
archived line is never dropped, so saving a fresh or emptier folder loses nothing. The gzip
header carries no time stamp, so an unchanged archive stays byte-identical (no change for
git). The run's settings files, ``config.json`` and ``methods.json`` (the options each method
spec resolved to), are kept beside it (``<ARCHIVE>.config.json``, ``<ARCHIVE>.methods.json``).
``restore`` cuts a line a hard kill left half-written (kept in ``records.jsonl.torn``), puts the
archived settings files in a folder that lacks them (so the evaluation refuses other settings,
and reads a spec such as ``aieg`` with the options its records were computed with, not with the
defaults of the version before ``methods.json`` existed), and appends every archived line the
folder lacks; it can be run any number of times. Both refuse, writing nothing, a folder whose
settings files disagree with the archive's (another dtype, method options, ...). Under torchrun, save and
restore on one process only (rank 0).
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import shutil
import sys
from pathlib import Path

from aieg_fast.runs.folder import setting_differences
from aieg_fast.runs.records import repair_jsonl

RECORDS = "records.jsonl"
#: the run's settings files, kept beside the archive
SETTINGS = ("config.json", "methods.json")


def _complete_lines(text: str):
    """The lines of ``text`` that end with a newline and parse as JSON objects with an id."""
    out = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n") or not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "id" in rec:
            out.append((line, rec))
    return out


def _key(rec: dict):
    return rec["id"], tuple(sorted(rec.get("methods", {}))), tuple(sorted(rec.get("controls", {})))


def _archived(archive: Path):
    """(line, record) pairs of ``archive`` ([] when it does not exist)."""
    if not archive.is_file():
        return []
    return _complete_lines(gzip.decompress(archive.read_bytes()).decode("utf-8"))


def _kept(archive: Path, name: str) -> Path:
    """Where the archive keeps the run's settings file ``name``."""
    return archive.with_name(f"{archive.name}.{name}")


def _check_paths(archive: Path, run_dir: Path) -> None:
    """Raise ValueError naming the argument when the two look swapped or wrong."""
    if not archive.name.endswith(".gz"):
        raise ValueError(f"archive: expected a gzip file (.jsonl.gz), got {str(archive)!r} (arguments swapped?)")
    if archive.is_dir():
        raise ValueError(f"archive: {str(archive)!r} is a folder (arguments swapped?)")
    if run_dir.exists() and not run_dir.is_dir():
        raise ValueError(f"run_dir: {str(run_dir)!r} is a file, not a run folder (arguments swapped?)")


def _refuse_other_settings(run_dir: Path, archive: Path, arg: str) -> None:
    """Raise ValueError naming ``arg`` and each difference when the folder's settings files and
    the archive's disagree: a key of ``config.json`` both record (a setting only one records is
    a version's addition, which ``evaluate`` checks itself), or the options of a method spec both
    hold in ``methods.json``. Records of other settings never meet in one folder or archive."""
    diffs = []
    for name in SETTINGS:
        mine, kept = run_dir / name, _kept(archive, name)
        if not (mine.is_file() and kept.is_file()):
            continue
        a, b = json.loads(kept.read_text(encoding="utf-8")), json.loads(mine.read_text(encoding="utf-8"))
        diffs += [f"{name} {d}" for d in setting_differences(a, b, sorted(set(a) & set(b)))]
    if diffs:
        raise ValueError(f"{arg}: the archive {str(archive)!r} holds records of other settings than the folder "
                         f"{str(run_dir)!r} ({'; '.join(diffs)}; 'recorded' is the archive's); nothing was written: "
                         "use another folder or archive")


def save(run_dir: Path, archive: Path) -> int:
    """Add the complete record lines of ``run_dir`` (``records.jsonl``, then the torchrun
    parts) that ``archive`` lacks to it (gzip, no time stamp), and copy the settings files
    (:data:`SETTINGS`) beside it when that added records or none is kept yet (a rerun that
    computed nothing leaves every committed file as it was); returns the number of lines in the archive. Raises FileNotFoundError when the
    folder has no records, ValueError when its settings are not the archive's (nothing written)."""
    run_dir, archive = Path(run_dir), Path(archive)
    _check_paths(archive, run_dir)
    _refuse_other_settings(run_dir, archive, "run_dir")
    sources = [run_dir / RECORDS] if (run_dir / RECORDS).is_file() else []
    sources += sorted((run_dir / "parts").glob("records.rank*.jsonl"))
    if not sources:
        raise FileNotFoundError(f"run_dir: {run_dir} holds no {RECORDS} (nor torchrun parts)")
    old = _archived(archive)
    have = {_key(rec) for _, rec in old}
    lines = [line for line, _ in old]
    for src in sources:
        for line, rec in _complete_lines(src.read_text(encoding="utf-8")):
            if _key(rec) not in have:
                have.add(_key(rec))
                lines.append(line)
    archive.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write("".join(lines).encode("utf-8"))
    tmp = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(archive)
    for name in SETTINGS:  # with new records (or where none is kept yet): a save that adds nothing changes no file
        if (run_dir / name).is_file() and (len(lines) > len(old) or not _kept(archive, name).is_file()):
            shutil.copyfile(run_dir / name, _kept(archive, name))
    return len(lines)


def restore(archive: Path, run_dir: Path) -> int:
    """Append to ``run_dir/records.jsonl`` the archived lines it lacks, and the torchrun parts left
    in ``run_dir/parts`` lack too (they are merged when the run starts; a half-written last line
    cut first; each archived settings file copied when the folder has none); returns how many.
    A missing archive restores nothing (0). Raises ValueError when the folder's settings are not
    the archive's (nothing written)."""
    archive, run_dir = Path(archive), Path(run_dir)
    _check_paths(archive, run_dir)
    if not archive.is_file():
        return 0
    _refuse_other_settings(run_dir, archive, "archive")
    dst = run_dir / RECORDS
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in SETTINGS:
        if _kept(archive, name).is_file() and not (run_dir / name).is_file():
            shutil.copyfile(_kept(archive, name), run_dir / name)
    have = set()
    if dst.is_file():
        repair_jsonl(dst)
        have = {_key(rec) for _, rec in _complete_lines(dst.read_text(encoding="utf-8"))}
    for part in sorted((run_dir / "parts").glob("records.rank*.jsonl")):  # a stopped torchrun run's parts, merged at its next start
        have |= {_key(rec) for _, rec in _complete_lines(part.read_text(encoding="utf-8"))}
    new = [line for line, rec in _archived(archive) if _key(rec) not in have]
    if new:
        with dst.open("a", encoding="utf-8") as f:
            f.writelines(new)
    return len(new)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="run folder -> archive")
    s.add_argument("run_dir")
    s.add_argument("archive")
    r = sub.add_parser("restore", help="archive -> run folder")
    r.add_argument("archive")
    r.add_argument("run_dir")
    a = p.parse_args(argv)
    if a.cmd == "save":
        print(f"{save(Path(a.run_dir), Path(a.archive))} record lines -> {a.archive}")
    else:
        print(f"{restore(Path(a.archive), Path(a.run_dir))} record lines restored into {a.run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
