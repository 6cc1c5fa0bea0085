"""Keep an evaluation's records in the repository, so a long run resumes on another machine.

Run folders (``runs/...``) are not committed, and a session's machine does not outlive it, so
the records of a run that takes several sessions are copied, gzipped, into ``benchmarks/``
as they grow and committed; the next session restores them into a fresh run folder and the
run resumes from there (``evaluate`` skips every example whose record exists).

    python benchmarks/archive_records.py save    RUN_DIR ARCHIVE.jsonl.gz
    python benchmarks/archive_records.py restore ARCHIVE.jsonl.gz RUN_DIR

``save`` copies the complete lines of ``RUN_DIR/records.jsonl`` and of the parts a torchrun run
is writing (``RUN_DIR/parts/records.rank<N>.jsonl``); a line being written is left for the next
save; the gzip header carries no time stamp, so an
unchanged run gives a byte-identical archive (no change for git). ``restore`` appends to
``RUN_DIR/records.jsonl`` every archived line the folder does not have yet (same example id
and the same methods), so it never drops a record and can be run any number of times.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
from pathlib import Path

RECORDS = "records.jsonl"


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


def save(run_dir: Path, archive: Path) -> int:
    """Write the complete record lines of ``run_dir`` (``records.jsonl``, then the torchrun
    parts) to ``archive`` (gzip, no time stamp); returns the number of lines. Raises
    FileNotFoundError when the folder has no records."""
    run_dir = Path(run_dir)
    sources = [run_dir / RECORDS] if (run_dir / RECORDS).is_file() else []
    sources += sorted((run_dir / "parts").glob("records.rank*.jsonl"))
    if not sources:
        raise FileNotFoundError(f"run_dir: {run_dir} holds no {RECORDS} (nor torchrun parts)")
    lines = [line for src in sources for line, _ in _complete_lines(src.read_text(encoding="utf-8"))]
    archive = Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write("".join(lines).encode("utf-8"))
    tmp = archive.with_name(archive.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(archive)
    return len(lines)


def restore(archive: Path, run_dir: Path) -> int:
    """Append to ``run_dir/records.jsonl`` the archived lines it lacks; returns how many.
    A missing archive restores nothing (0)."""
    archive = Path(archive)
    if not archive.is_file():
        return 0
    dst = Path(run_dir) / RECORDS
    have = set()
    if dst.is_file():
        text = dst.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            raise ValueError(f"run_dir: {dst} ends in a cut line; run the evaluation once (it repairs the file) "
                             "or cut the line, then restore")
        have = {_key(rec) for _, rec in _complete_lines(text)}
    new = [line for line, rec in _complete_lines(gzip.decompress(archive.read_bytes()).decode("utf-8"))
           if _key(rec) not in have]
    if new:
        dst.parent.mkdir(parents=True, exist_ok=True)
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
