"""JSON-lines files of records that survive a hard kill: appended line by line, read back with a
cut last line detected, repaired without losing a byte the user had.

A process killed while it appends (``kill -9``, a power cut, a full disk) can leave the last line
cut: no newline, or not JSON. :func:`read_jsonl` reports such a line and does not return it (its
record is computed again); :func:`repair_jsonl` removes it from the file before anything more is
appended, keeping the removed bytes in ``<file>.torn``. Without that repair the next record would
be appended to the cut line and both would be lost on the next read (what happened before).
Lines written that way by earlier versions (a cut line with a whole record after it) give their
whole record back.

This module imports nothing else of the package.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from pathlib import Path
from typing import Iterable, List, Optional, Tuple

__all__ = ["json_safe", "read_jsonl", "repair_jsonl", "append_jsonl", "write_jsonl", "write_json", "replace_file", "TORN_SUFFIX"]

#: suffix of the file that keeps the bytes :func:`repair_jsonl` removed
TORN_SUFFIX = ".torn"


def json_safe(x):
    """``x`` with NaN / inf floats replaced by None (in nested dicts, lists and tuples; tuples
    become lists; tensors, numpy arrays and numpy scalars become their ``tolist()``), so that
    ``json.dumps(..., allow_nan=False)`` writes strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist") and callable(x.tolist):  # a tensor, numpy array or numpy scalar
        return json_safe(x.tolist())
    return x


def _record(text: str) -> Optional[dict]:
    try:
        r = json.loads(text)
    except json.JSONDecodeError:
        return None
    return r if isinstance(r, dict) else None


def _recover(text: str) -> Optional[dict]:
    """The whole record a damaged line ends with (a record appended to a cut line), or None."""
    pos = text.find("{", 1)
    while pos > 0:
        r = _record(text[pos:])
        if r is not None:
            return r
        pos = text.find("{", pos + 1)
    return None


def _scan(data: bytes) -> Tuple[List[dict], bytes, bytes, List[str]]:
    """(records, the bytes the file should hold, the bytes removed, what was found)."""
    records: List[dict] = []
    keep: List[bytes] = []
    removed: List[bytes] = []
    notes: List[str] = []
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    for no, raw in enumerate(lines, start=1):
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            keep.append(raw)
            continue
        r = _record(text)
        if r is None:
            r = _recover(text)
            if r is None:
                notes.append(f"line {no} is not a JSON record (dropped)")
                removed.append(raw)
                continue
            notes.append(f"line {no} held a cut record followed by a whole one (the whole one kept)")
            removed.append(raw)
            raw = json.dumps(r, allow_nan=False).encode("utf-8")
        records.append(r)
        keep.append(raw)
    if tail.strip():
        r = _record(tail.decode("utf-8", errors="replace").strip())
        if r is None:
            notes.append(f"the last line ({len(tail)} bytes) was cut before its end (its record is computed again)")
            removed.append(tail)
        else:
            notes.append("the last line had no newline (added)")
            records.append(r)
            keep.append(tail)
    clean = b"".join(line + b"\n" for line in keep)
    return records, clean, b"".join(line + b"\n" for line in removed), notes


def read_jsonl(path) -> Tuple[List[dict], List[str]]:
    """The records of a JSON-lines file, and what was wrong with it (nothing is changed).

    Returns:
        (records in file order, notes): a missing file gives ``([], [])``; a cut last line is
        left out and noted; a line that holds a cut record followed by a whole one gives the
        whole one; any other line that is not a JSON object is left out and noted.
    """
    p = Path(path)
    if not p.exists():
        return [], []
    records, _, _, notes = _scan(p.read_bytes())
    return records, notes


def repair_jsonl(path) -> List[str]:
    """Make ``path`` hold whole lines only, so that records can be appended to it.

    A cut last line is cut off the file (truncated in place), a missing final newline added; a
    damaged line elsewhere makes the file be rewritten (to a temporary file, then renamed over
    it). The removed bytes are appended to ``<path>.torn``. Nothing happens to a sound file.

    Returns:
        What was repaired, as sentences (empty when nothing was).

    Raises:
        OSError: the file or ``<path>.torn`` cannot be written (e.g. a full disk), naming it.
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    _, clean, removed, notes = _scan(data)
    if clean == data:
        return []
    if removed:
        with _naming(str(p) + TORN_SUFFIX), open(str(p) + TORN_SUFFIX, "ab") as fh:
            fh.write(removed)
            fh.flush()
            os.fsync(fh.fileno())
    if data.startswith(clean):  # only the tail went: truncate
        with _naming(p), open(p, "r+b") as fh:
            fh.truncate(len(clean))
            os.fsync(fh.fileno())
    elif clean.startswith(data):  # only a newline was missing
        with _naming(p), open(p, "ab") as fh:
            fh.write(clean[len(data):])
            os.fsync(fh.fileno())
    else:
        replace_file(p, clean)
    return [f"{p}: {n}" for n in notes] + ([f"{p}: the removed bytes are kept in {p.name}{TORN_SUFFIX}"] if removed else [])


def _line(rec: dict) -> bytes:
    return (json.dumps(json_safe(rec), allow_nan=False) + "\n").encode("utf-8")


@contextlib.contextmanager
def _naming(path):
    """An OSError raised in the block without a file name (a ``write`` or ``fsync`` that fails
    on a full disk names none) is raised again naming ``path``."""
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        raise OSError(err.errno, err.strerror, str(path)) from err


def append_jsonl(path, records: Iterable[dict]) -> None:
    """Append each record as one strict-JSON line (:func:`json_safe`), in one write, flushed
    to the disk (``fsync``) before returning.

    Raises:
        OSError: the file cannot be written (e.g. a full disk), naming ``path``.
    """
    data = b"".join(_line(r) for r in records)
    if not data:
        return
    with _naming(path), open(path, "ab") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def replace_file(path, data) -> None:
    """Write ``data`` (bytes, or any object with the buffer protocol) to ``path`` atomically: a
    temporary file in the same folder, flushed to the disk, renamed over ``path`` (a kill leaves
    the old file or the new one, and a failed write leaves no temporary file). A symbolic link
    to a file has that file replaced (the link stays);
    a path that is not a regular file (a device such as ``/dev/stdout``, a named pipe, a link to
    one) is written through, as ``open`` would.

    Raises:
        OSError: the folder cannot be written (e.g. PermissionError), naming ``path``.
    """
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        real = Path(os.path.realpath(path))
        if not real.is_file():
            with open(path, "wb") as fh:
                fh.write(data)
            return
        path = real
    # a name per process and thread (two saves at once), of the target's name cut to 100 bytes: the
    # suffix must not take a name the folder takes over the file system's 255-byte limit
    stem = os.fsencode(path.name)[:100].decode("utf-8", "ignore") if len(os.fsencode(path.name)) > 100 else path.name
    tmp = path.with_name(f".{stem}.tmp{os.getpid()}.{threading.get_ident()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:  # named by the path asked for, not the temporary file's
        raise OSError(err.errno, err.strerror, str(path)) from err
    finally:
        with contextlib.suppress(OSError):  # a failing clean-up must not replace the error that names path
            tmp.unlink(missing_ok=True)


def write_jsonl(path, records: Iterable[dict]) -> None:
    """Write the records as a whole new file atomically: a temporary file in the same folder,
    flushed to the disk, renamed over ``path`` (a kill leaves the old file or the new one)."""
    replace_file(path, b"".join(_line(r) for r in records))


def write_json(path, obj, sort_keys: bool = False) -> None:
    """Write ``obj`` as an indented JSON document, atomically as :func:`write_jsonl` (numpy and
    tensor values as the numbers they hold, :func:`json_safe`)."""
    replace_file(path, json.dumps(json_safe(obj), indent=1, sort_keys=sort_keys).encode("utf-8"))
