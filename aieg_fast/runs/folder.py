"""The output folder of a run over many examples: writable, its settings in ``config.json`` (a
rerun with other settings is refused, so results are never mixed), and the per-process parts of
a torchrun run (``parts/<file stem>.rank<N>.jsonl``) gathered by rank 0.

This module imports nothing else of the package.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from .distributed import Dist
from .records import read_jsonl, repair_jsonl, write_json

__all__ = ["CONFIG_FILE", "METHODS_FILE", "COMMAND_FILE", "PARTS_DIR", "writable_folder", "holds_results", "check_or_write_config", "check_or_record_methods", "claim_folder", "differing_settings", "LOCK_FILE", "recorded_and_now",
           "record_former_setting", "same_setting", "setting_differences", "part_path", "part_files", "remove_parts"]

#: file name of the settings in an output folder.
CONFIG_FILE = "config.json"
#: file name of the options each method spec of a folder's records was computed with.
METHODS_FILE = "methods.json"
#: file name of a command's resolved options (the CLI writes it; ``--config`` reruns it).
COMMAND_FILE = "command.json"
#: sub-folder of the per-process parts of a torchrun run.
PARTS_DIR = "parts"
#: settings a folder written before they were recorded takes from the run that resumes it (what
#: its records were computed with is not known; from then on they are checked): the model's
#: weights digest (``models.run_model_settings``) and attribute-dataset's batch size.
ADOPTED_SETTINGS = ("model_weights", "batch_size")
#: a setting recorded as given → the setting recording what it resolves to; only the latter is
#: compared where both are recorded (restating a default, or leaving it out, changes no record)
RESOLVED_SETTINGS = {"options": "option_values"}
#: the empty file a running command holds locked (:func:`claim_folder`).
LOCK_FILE = ".lock"
#: the files that record how a run was asked for, not what it computed.
_SETTINGS_FILES = (CONFIG_FILE, METHODS_FILE, COMMAND_FILE, LOCK_FILE)
#: folder → (the descriptor of its lock file, None where nothing is locked; the thread whose run
#: holds it), for the folders this process holds
_CLAIMS: Dict[Path, Tuple[Optional[int], threading.Thread]] = {}
#: taken while :data:`_CLAIMS` is read or changed (two threads claiming one folder at once)
_CLAIMS_GUARD = threading.Lock()


def writable_folder(out_dir, arg: str = "out_dir") -> Path:
    """``out_dir`` as a Path, created if needed.

    Raises:
        ValueError: it is empty, or cannot be created or written to (names ``arg``).
    """
    _refuse_empty(out_dir, arg)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{arg} {str(out)!r} is a file, not a folder; name a folder for the results")
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write_test", dir=out)  # a name of its own: torchrun's processes probe at once
        os.close(fd)
        os.remove(probe)
    except OSError as err:
        raise ValueError(f"{arg} {str(out)!r} is not a writable folder ({err.strerror or err})") from None
    return out


def _refuse_empty(out_dir, arg: str) -> None:
    """ValueError for an empty folder name (Path("") is the working directory, whose files a
    check would read as the folder's)."""
    if not str(out_dir).strip():
        raise ValueError(f"{arg} is empty ({str(out_dir)!r}); name a folder for the results")


def check_or_write_config(out: Path, config: dict, arg: str = "out_dir", records: Optional[str] = None,
                          kind: str = "this run") -> None:
    """Write ``config.json``, or refuse a folder whose recorded settings differ from ``config``
    (a folder without one of :data:`ADOPTED_SETTINGS` first records it from ``config``).
    ``records``: the records file this run writes; a folder holding other records files
    (``*.jsonl``) and not it is another kind of run's and refused (``kind`` names this one).

    Raises:
        ValueError: the recorded settings differ (names them and ``arg``), the folder holds
            results without ``config.json`` (settings unknown), or another kind of run's records.
    """
    cfg_path = Path(out) / CONFIG_FILE
    results, old = _recorded(out, arg, records, kind, config)
    if old is not None and results:
        for key in ADOPTED_SETTINGS:  # a folder from before the setting was recorded: taken to hold what runs now
            if key in config:
                record_former_setting(out, key, lambda recorded, value=config[key]: value)
        old = json.loads(cfg_path.read_text(encoding="utf-8"))  # as the adopted settings left it
        _refuse_differences(out, old, config, set(config) | set(old), arg)
    else:
        _forget_settings_without_results(out, old, config)
        write_json(cfg_path, config)


def read_settings(path: Path, arg: str = "out_dir", expected: Optional[dict] = None) -> dict:
    """A run's settings file in its folder (``config.json``, ``methods.json``) as the object a run
    writes; ``expected``: this run's settings, of which a run's ``config.json`` holds some.

    Raises:
        ValueError: names the file and ``arg``: it is not JSON, not an object, holds none of
            ``expected``'s keys (a model's ``config.json``, say), or (``methods.json``) an entry
            that is not the options of a method; nothing in the folder is changed.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        why = f"it is not JSON: {err}"
    else:
        if not isinstance(data, dict):
            why = f"it holds a JSON {type(data).__name__}, where a run writes an object"
        elif path.name == METHODS_FILE and any(not isinstance(v, dict) for v in data.values()):
            bad = next(k for k, v in data.items() if not isinstance(v, dict))
            why = f"its entry {bad!r} is {data[bad]!r}, not the options of a method"
        elif expected and data and not set(data) & set(expected):
            why = f"it holds none of a run's settings (its keys: {', '.join(sorted(map(str, data))[:5])})"
        else:
            return data
    raise ValueError(f"{arg} {str(path.parent)!r}: its {path.name} is not the settings file of a run ({why}); use another "
                     f"{arg} (or move {path.name} away, if the folder is not a run's)")


def _recorded(out, arg: str, records: Optional[str], kind: str, settings: dict) -> Tuple[bool, Optional[dict]]:
    """The checks of a run's folder before its settings are compared (:func:`check_or_write_config`,
    :func:`check_recorded_config`): a name that is not empty, results only with ``config.json``,
    no other kind of run's records, and settings files that are a run's (:func:`read_settings`
    of ``config.json``, holding some of ``settings``' keys, and ``methods.json``: a file that is
    not a run's is neither replaced nor read as one). Returns (whether the folder holds results,
    its recorded ``config.json`` or None)."""
    _refuse_empty(out, arg)
    results = holds_results(out)
    _refuse_results_without_config(out, arg, results)
    _refuse_other_records(out, arg, results, records, kind)
    cfg_path, methods_path = Path(out) / CONFIG_FILE, Path(out) / METHODS_FILE
    old = read_settings(cfg_path, arg, settings) if cfg_path.is_file() else None
    if methods_path.is_file():
        read_settings(methods_path, arg)
    return results, old


def holds_results(out) -> bool:
    """Whether the folder ``out`` holds anything a run computed: a non-empty file other than the
    settings files (``config.json``, ``methods.json``, ``command.json``), in it or below it. A run
    stopped after it wrote its settings and before its first record holds none, and a rerun
    with other settings may take the folder over."""
    root = Path(out)
    if not root.is_dir():
        return False
    return any(p.is_file() and p.stat().st_size > 0 and not (p.parent == root and p.name in _SETTINGS_FILES)
               for p in root.rglob("*"))


def _refuse_other_records(out, arg: str, results: bool, records: Optional[str], kind: str) -> None:
    """Refuse a folder that holds results and records files (``*.jsonl``) but not ``records``,
    the file this kind of run writes: another kind of run made it (its settings would read as a
    long list of differences)."""
    if results and records is not None and not (Path(out) / records).is_file():
        others = sorted(p.name for p in Path(out).glob("*.jsonl") if p.is_file())
        if others:
            raise ValueError(f"{arg} {str(out)!r} holds the records of another kind of run ({', '.join(others)}), not "
                             f"{records} as {kind} writes; use another {arg}")


def _refuse_results_without_config(out, arg: str, results: bool) -> None:
    """Refuse a folder that holds results (``results``: :func:`holds_results`) but no
    ``config.json``: the settings they were computed with are unknown, so new results could
    not be told apart from them."""
    if results and not (Path(out) / CONFIG_FILE).is_file():
        found = sorted(p.name for p in Path(out).iterdir() if p.name not in _SETTINGS_FILES)[:3]
        raise ValueError(f"{arg} {str(out)!r} holds results ({', '.join(found)}) but no {CONFIG_FILE}: the settings they were "
                         f"computed with are unknown; use another {arg} (or restore its {CONFIG_FILE})")


def _forget_settings_without_results(out, old: Optional[dict], config: dict) -> None:
    """Before a run writes its settings into a folder that holds no results: settings ``old``
    recorded there by a run that computed nothing (None: none) are replaced (said on stderr), and
    that run's ``methods.json`` is removed (it speaks only of records, of which there are none)."""
    if old is None:
        return
    diff = _differing(old, config, set(config) | set(old))
    if diff:
        print(f"note: {str(out)!r} held the settings of a run that wrote no results ({', '.join(diff)} differ); "
              "they are replaced by this run's", file=sys.stderr)
    (Path(out) / METHODS_FILE).unlink(missing_ok=True)


def same_setting(a, b) -> bool:
    """Equal values, or two spellings of one existing file or folder (a model or dataset named by
    a relative path in one run and an absolute one in the other, as ``--config command.json``
    gives them; a result's model and the explainer's, :func:`aieg_fast.eval.context.prepare`)."""
    if a == b:
        return True
    if not (isinstance(a, str) and isinstance(b, str) and a and b):
        return False
    try:
        return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
    except OSError:
        return False


def differing_settings(old: dict, new: dict) -> List[str]:
    """The keys of two runs' settings whose values differ, as a folder's check compares them
    (:func:`same_setting`; :data:`RESOLVED_SETTINGS`), sorted."""
    return _differing(old, new, {*old, *new})


def _differing(old: dict, new: dict, keys) -> List[str]:
    """The keys of ``keys`` whose values in ``old`` and ``new`` differ, sorted; a key of
    :data:`RESOLVED_SETTINGS` is left to its resolved twin where both sides record that."""
    def resolved_on_both(k):
        twin = RESOLVED_SETTINGS.get(k)
        return twin is not None and twin in old and twin in new
    return sorted(k for k in keys if not same_setting(old.get(k), new.get(k)) and not resolved_on_both(k))


def _what_differs(a, b):
    """(a, b), or for two dicts only their entries that differ (the rest would hide them)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k, "<absent>") != b.get(k, "<absent>")]
        return {k: a.get(k, "<absent>") for k in keys}, {k: b.get(k, "<absent>") for k in keys}
    return a, b


def _cut(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def recorded_and_now(old, new, width: int = 60) -> str:
    """``"<old> recorded, <new> now"`` for a refusal of changed settings or data: each value in
    full when short, else cut at ``width`` characters; two long texts that differ only after
    their first ``width // 2`` characters from a little before the first character where they
    differ, counted from 0 (a cut at ``width`` made texts that differ near their end look alike)."""
    ro, rn = repr(old), repr(new)
    p = next((j for j, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new))) \
        if isinstance(old, str) and isinstance(new, str) else 0
    if max(len(ro), len(rn)) <= width or p < width // 2:
        return f"{_cut(ro, width)} recorded, {_cut(rn, width)} now"
    lo, hi = max(0, p - width // 3), p + width // 3

    def window(t: str) -> str:
        return f"{'...' if lo else ''}{t[lo:hi]!r}{'...' if hi < len(t) else ''}"

    return (f"{len(old)} and {len(new)} characters, the first difference at character {p} (from 0): {window(old)} recorded, "
            f"{window(new)} now")


def setting_differences(old: dict, new: dict, keys, absent: str = "its default (not written)") -> List[str]:
    """Each key of ``keys`` whose value differs between the recorded settings ``old`` and the new
    ones ``new``, as ``"key: <recorded> recorded, <new> now"`` (values shortened; of two dicts only
    their entries that differ; ``absent`` for a key one side lacks), sorted by key."""
    said = lambda d, k, v: _cut(repr(v)) if k in d else absent  # noqa: E731
    pairs = [(k, *_what_differs(old.get(k), new.get(k))) for k in _differing(old, new, keys)]
    return [f"{k}: {recorded_and_now(a, b)}" if k in old and k in new else f"{k}: {said(old, k, a)} recorded, {said(new, k, b)} now"
            for k, a, b in pairs]


def _relative_path_hint(key: str, old, new) -> str:
    """For a recorded relative path that names no file from here while the new one, of the same
    name, does: the run was started in another directory (a relative path is recorded as given).
    Not for ``model``, whose recorded name may be a hub id (``gpt2``) and the new one a folder."""
    if key == "model" or not (isinstance(old, str) and isinstance(new, str)) or os.path.isabs(old) or os.path.exists(old):
        return ""
    if os.path.basename(old.rstrip("/\\")) != os.path.basename(new.rstrip("/\\")) or not os.path.exists(new):
        return ""
    return (f"; {key} {old!r} is relative to the directory the recorded run was started in: if it is the same path, "
            "rerun from that directory, or pass the path as recorded there")


def _refuse_differences(out, old: dict, new: dict, keys, arg: str, hints: Optional[Dict[str, str]] = None) -> None:
    """Raise the "other settings" error naming every key of ``keys`` whose value differs, with
    the recorded and the new value of each (a setting at its default is left out of some configs),
    and the sentence ``hints[key]`` of each such key that has one."""
    values = "; ".join(setting_differences(old, new, keys))
    if values:
        differing = set(_differing(old, new, keys))
        said = "".join(f"; {h}" for k, h in (hints or {}).items() if k in differing)
        said += "".join(_relative_path_hint(k, old.get(k), new.get(k)) for k in sorted(differing))
        raise ValueError(f"{arg} {str(out)!r} holds results with other settings ({values}); use another {arg}{said}")


def check_or_record_methods(out, resolved: Dict[str, dict], former: Callable[[str], Optional[dict]],
                            record_specs: Iterable[str], arg: str = "out_dir") -> None:
    """Record in ``methods.json`` the options each method spec is computed with, or refuse a
    spec whose records were computed with other options (a default that changed between
    versions, so the same spec now means another reading): records of two readings never meet
    under one name.

    Args:
        resolved: method spec → every option as it resolves now (defaults and presets filled in).
        former: spec → its options under the former defaults, or None (not a method); used for
            a folder written before ``methods.json`` existed, for each spec of ``record_specs``
            (the specs its records hold).

    Raises:
        ValueError: names the spec, the options that differ (recorded → now) and ``arg``.
    """
    path = Path(out) / METHODS_FILE
    if path.is_file():
        old = read_settings(path, arg)
    else:
        old = {m: o for m in sorted(set(record_specs)) if (o := former(m)) is not None}
    for m, new in resolved.items():
        if m in old and old[m] != new:
            changes = ", ".join(f"{k}: {old[m].get(k)!r} recorded, {new.get(k)!r} now"
                                for k in _differing(old[m], new, set(old[m]) | set(new)))
            raise ValueError(f"{arg} {str(out)!r} holds records of {m!r} computed with other options ({changes}; most likely a "
                             f"default that changed between versions). Name the reading you mean in the method spec (it is then computed afresh under "
                             f"its own name; e.g. 'aieg:preset=v1' for AIEG's former default), or use another {arg}")
    merged = {**old, **resolved}
    if merged != old or not path.is_file():
        write_json(path, merged, sort_keys=True)


def record_former_setting(out, key: str, former: Callable[[dict], Any]) -> None:
    """For a folder whose ``config.json`` predates the setting ``key``: add ``key`` with the value
    its records were computed with, ``former(recorded settings)`` (None: unknown, nothing is
    written and the usual check refuses the folder), so later checks compare it like any other."""
    _refuse_empty(out, "out_dir")
    cfg_path = Path(out) / CONFIG_FILE
    if not cfg_path.is_file():
        return
    old = read_settings(cfg_path)
    if key in old:
        return
    value = former(old)
    if value is not None:
        write_json(cfg_path, {**old, key: value})


@contextlib.contextmanager
def made_folder(out_dir, arg: str = "out_dir", procs=None) -> Iterator[Path]:
    """:func:`writable_folder` for a ``with`` block: a folder this call created is removed again
    (when still empty) if the block raises, so a run refused after its folder was made (a model
    that does not load, a label of several tokens) leaves nothing behind. The folder is held
    (:func:`claim_folder`) from the start of the block, by the only process or torchrun's rank 0,
    so a folder in use is refused before a model is loaded. A refused call (the folder held by
    another run) removes nothing; a block nested in the holder's own thread lets go of nothing.

    ``procs``: the run's processes (a :class:`~aieg_fast.runs.distributed.Dist`, started before
    this block; None: one process). Rank 0 alone makes and holds the folder, and removes it
    (with its lock) when it made and held it; its refusal is raised on every process at once.

    Raises:
        ValueError: as :func:`writable_folder` and :func:`claim_folder` (on every process).
    """
    procs = procs if procs is not None else Dist()
    fresh = procs.main and not Path(out_dir).exists()
    out, claimed, refused = None, False, False
    try:
        error = None
        try:
            out = writable_folder(out_dir, arg) if procs.main else Path(out_dir)
            if procs.main:
                claimed = claim_folder(out, arg)
        except ValueError as err:
            error, refused = err, out is not None  # out set: claim_folder refused it, another run holds it
        procs.check(error)  # raised on every process; the folder exists for every process from here on
        yield out
    except BaseException:
        if claimed:
            _release(out, remove=fresh)
        if fresh and out is not None and not refused:  # a refused call leaves the folder and its lock to the run that holds them
            with contextlib.suppress(OSError):  # rmdir removes only an empty folder
                out.rmdir()
        raise
    if claimed:  # a nested block of the holder's own thread lets go of nothing
        _release(out, remove=False)


def claim_folder(out, arg: str = "out_dir") -> bool:
    """Hold the folder ``out`` for this run until its :func:`made_folder` block ends (or the
    process does: the operating system then lets it go, so a killed run leaves no stale claim).
    Two runs on one folder at the same time would each rewrite the records file while the other
    appends to it, and records would be lost; the second is refused instead, whether it is
    another process or another thread of this one (a notebook's run in a background thread).
    Under torchrun rank 0 holds it for the run. A second claim by the holding thread (the run's
    own nested call) is a no-op; a claim left by a thread that has ended is taken over. Where
    there is no ``fcntl`` (not POSIX), only the threads of this process are kept apart.

    Returns:
        True when this call took the claim (its caller lets it go: :func:`_release`), False when
        this thread held it already.

    Raises:
        ValueError: another process, or another thread of this one, holds ``out`` (names ``arg``
            and the folder).
    """
    key = Path(out).resolve()
    me = threading.current_thread()
    with _CLAIMS_GUARD:
        if key in _CLAIMS:
            fd, holder = _CLAIMS[key]
            if holder is me:
                return False
            if holder.is_alive():
                raise _in_use(out, arg, key)
            _CLAIMS[key] = (fd, me)
            return True
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            _CLAIMS[key] = (None, me)
            return True
        fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise _in_use(out, arg, key) from None
        _CLAIMS[key] = (fd, me)
        return True


def _in_use(out, arg: str, key: Path) -> ValueError:
    """The refusal of a folder another run holds."""
    return ValueError(f"{arg} {str(out)!r} is in use by another run (it holds {key / LOCK_FILE}): two runs on one folder "
                      f"would lose records; wait for that run to end, or use another {arg}")


def _release(out, remove: bool) -> None:
    """Let go of the claim on ``out`` if this thread holds it (``remove``: delete the lock file
    too, for a folder about to be removed); another thread's claim stays."""
    key = Path(out).resolve()
    with _CLAIMS_GUARD:
        if _CLAIMS.get(key, (None, None))[1] is not threading.current_thread():
            return
        fd, _ = _CLAIMS.pop(key)
        if remove:
            with contextlib.suppress(OSError):
                os.unlink(key / LOCK_FILE)
        if fd is not None:
            os.close(fd)


def check_recorded_config(out, settings: dict, arg: str = "out_dir", records: Optional[str] = None,
                          kind: str = "this run", hints: Optional[Dict[str, str]] = None) -> None:
    """Refuse, before the model is loaded and without writing anything, a folder whose
    ``config.json`` records other values for any key of ``settings`` (the part of the config that
    needs no model; :func:`check_or_write_config` checks the whole of it later), or that holds
    another kind of run's records (``records``, ``kind``: as there); ``hints``: a sentence added
    when its key differs (what may change instead).

    Raises:
        ValueError: names the settings that differ and ``arg``, as :func:`check_or_write_config`.
    """
    results, old = _recorded(out, arg, records, kind, settings)
    if old is None or not results:
        return
    keys = [k for k in settings if k in old or k not in ADOPTED_SETTINGS]  # an adopted one is recorded later
    _refuse_differences(out, old, settings, keys, arg, hints)


def part_path(out, name: str, rank: int) -> Path:
    """Where process ``rank`` writes its part of the file ``name`` (the parts folder is created)."""
    stem, dot, suffix = name.rpartition(".")
    folder = Path(out) / PARTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder / (f"{stem}.rank{rank:05d}.{suffix}" if dot else f"{name}.rank{rank:05d}")


def part_files(out, name: str) -> Tuple[List[dict], List[Path]]:
    """The records of every part of ``name`` in rank order, and the part files. A part's cut
    last line (a process killed while it wrote) is left out and its bytes kept in
    ``<part>.torn`` (:func:`repair_jsonl`), which stays in the parts folder."""
    stem, dot, suffix = name.rpartition(".")
    pattern = f"{stem}.rank*.{suffix}" if dot else f"{name}.rank*"
    paths = sorted((Path(out) / PARTS_DIR).glob(pattern))
    records: List[dict] = []
    for p in paths:
        repair_jsonl(p)
        records.extend(read_jsonl(p)[0])
    return records, paths


def remove_parts(out, paths) -> None:
    """Delete merged part files (a part's ``.torn`` file, if any, stays), and the parts folder of
    ``out`` when it is empty (a process without work leaves an empty one)."""
    for p in paths:
        Path(p).unlink(missing_ok=True)
    try:
        (Path(out) / PARTS_DIR).rmdir()
    except OSError:
        pass  # absent, or not empty: a .torn file is kept
