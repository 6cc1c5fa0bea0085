"""``attribute_dataset``: every example of a dataset attributed, in batches, resumable, on one
process or data parallel under torchrun.

Output folder ``out_dir``:

* ``attributions.jsonl`` — one strict-JSON line per example, sorted by ``index`` when the run
  ends: ``{"index", "id", "example_text", "example_target", "example_contrast", "example_template",
  "batch": {"first", "size"}}`` (the row as given; compared with the data on resume) plus
  :meth:`Attribution.to_dict <aieg_fast.result.Attribution.to_dict>` (``tokens``, ``token_ids``,
  ``scores``, ``attributable``, ``words``, ``word_scores``, ``target``, ``target_prob``,
  ``method``, ``options``, ``model``, ``backend``, ``timing`` (of the batch call), ``text`` (the
  prompt, template filled in), ``offsets``, ``degenerate``, ``info``), so
  ``Attribution.from_dict(record)`` gives the result back; and ``machine``, the machine that
  computed it (:func:`~aieg_fast.runs.machine.machine_tag`: low-precision scores depend on the
  CPU's code path, so a run resumed elsewhere says which machine computed each record). An
  example the model cannot take (more tokens than its positions, no attributable token) gets
  ``{"index", "id", "example_text", ..., "skipped": reason}`` (no result: ``from_dict`` of it is a ValueError
  naming the row and the reason) and the run goes on; settings the model refuses are
  found on the first example, before anything is written.
* ``config.json`` — the settings; a rerun with other settings is refused (a folder that holds
  only settings, of a run stopped before its first record, is taken over).
* ``attributions.parquet`` — with ``parquet=True`` (needs pyarrow): the same records, lists as
  list columns and nested dicts as JSON strings.

Resume: a rerun in the same folder computes only the examples without a record. Records are
appended a batch at a time and flushed to the disk; a last line cut by a hard kill is cut off
the file (its bytes kept in ``attributions.jsonl.torn``) and its examples computed again
(:mod:`aieg_fast.runs.records`). Batches are fixed by the data (``batch_size`` consecutive
examples with the same template and contrast kind), so a resumed or parallel run computes each
example in the batch a single uninterrupted run would: a batch that has some of its records (a
batch write cut part-way, which keeps its whole lines) is computed whole again and only its
missing records written, the others kept as they are (dropping them to redo the batch would lose
finished records if that run were stopped too). ``limit`` changes the data: a run with a limit
that ends inside a batch computes that batch short, and a later run without it computes the whole
batch for the rest of it. Records of rows beyond a run's rows (the data cut since, or a smaller
``limit``) are kept in the files as they were (not checked against the data, not counted in the
summary: its ``kept_beyond``); a note on stderr gives their number and indices.

Data parallel: under ``torchrun --nproc-per-node N`` the batches are dealt to the processes
(batch k to rank k mod N); each appends to ``parts/attributions.rank<N>.jsonl``; rank 0 merges
the parts into ``attributions.jsonl`` (every example once, in order) — the file one process
writes, up to the timings.
"""
from __future__ import annotations

import hashlib
import sys
import time
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

import torch

from ..core.baselines import check_baseline_value
from ..core.call import check_label_set_use
from ..core.diagnostics import FLAG_KINDS, AttributionWarning
from ..core.inputs import fill_template
from ..core.validation import DEFAULT_N_STEPS, TARGET_FNS, as_int, as_ints, as_scalar_int, check_bools, check_call_settings, check_choice, check_placement, check_positive_int
from ..explainer import load_model
from ..methods.registry import check_model, get_method, list_methods, resolved_options
from ..models import run_model_settings
from ..runs.machine import machine_tag
from ..runs import (Dist, append_jsonl, check_or_write_config, check_recorded_config, claim_folder, differing_settings, made_folder, part_files, part_path, rank_device, read_jsonl,
                    record_former_setting, recorded_and_now, remove_parts, repair_jsonl, shard, start, torchrun_rank, write_jsonl)
from .inputs import Example, read_examples_and_notes
from .output import check_parquet, write_parquet

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = ["attribute_dataset", "DatasetRun", "RECORDS_FILE", "PARQUET_FILE", "plan_batches"]

#: file name of the records in an output folder.
RECORDS_FILE = "attributions.jsonl"
#: said when a resume changes batch_size (refused): what may change instead
BATCH_SIZE_KEPT = ("batch_size fixes which examples share a padded batch, so a resume keeps it (the records are those of "
                   "one uninterrupted run); to use less memory, lower internal_batch_size (path steps per forward), "
                   "which a resume may change")
#: file name of the parquet copy.
PARQUET_FILE = "attributions.parquet"


@dataclass(frozen=True)
class DatasetRun:
    """The settings every batch of one :func:`attribute_dataset` run shares (its arguments)."""

    method: str
    options: Dict[str, Any]
    n_steps: int
    target_fn: str
    label_set: Optional[List[Any]]
    template: Optional[str]
    baseline: Any
    backend: str
    internal_batch_size: Optional[int]
    batch_size: int

    def call(self, batch: Sequence[Example]) -> dict:
        """The keyword arguments of ``Explainer.attribute`` for ``batch`` (one template and
        contrast kind)."""
        kw = dict(method=self.method, target=[e.target for e in batch], n_steps=self.n_steps,
                  internal_batch_size=self.internal_batch_size, template=template_of(batch[0], self),
                  target_fn=self.target_fn, backend=self.backend, **self.options)
        if self.label_set is not None:
            kw["label_set"] = list(self.label_set)
        if batch[0].contrast is not None:
            kw["contrast_target"] = [e.contrast for e in batch]
        if self.baseline is not None:
            kw["baseline"] = self.baseline
        return kw


def template_of(e: Example, s: DatasetRun) -> Optional[str]:
    """The example's own template, else the run's."""
    return e.template if e.template is not None else s.template


def plan_batches(examples: Sequence[Example], s: DatasetRun) -> List[List[Example]]:
    """Consecutive examples in batches of at most ``batch_size`` that share a template and
    whether they have a contrast (one ``attribute`` call each); fixed by the data alone."""
    batches: List[List[Example]] = []
    key = None
    for e in examples:
        k = (template_of(e, s), e.contrast is not None)
        if not batches or len(batches[-1]) == s.batch_size or k != key:
            batches.append([])
        batches[-1].append(e)
        key = k
    return batches


def _check_run(method, options, n_steps, target_fn, label_set, batch_size, internal_batch_size, backend, template,
               baseline, **flags) -> None:
    """The settings that need no model (ValueError / TypeError naming each); ``flags``: name →
    a value that must be a bool (``parquet`` True: pyarrow must be installed)."""
    check_call_settings(n_steps, backend)
    check_bools(flags)  # "no" is truthy: a bar, a parquet file, ids read as ids
    if flags.get("parquet"):
        check_parquet()
    check_baseline_value(baseline)
    m = get_method(method)
    opts = m.options(**options)  # unknown options and bad values, named
    if n_steps == "auto":  # a method that cannot choose its steps (was refused at the first row, after loading)
        m.check_steps(opts, n_steps)
    if not isinstance(target_fn, str):
        raise TypeError(f"target_fn must be one of {list(TARGET_FNS)} (a callable cannot be recorded), got {type(target_fn).__name__}")
    check_choice("target_fn", target_fn, TARGET_FNS)
    if isinstance(label_set, str):  # list() would split it into characters
        raise TypeError(f"label_set must be a list of labels (token strings or ids), got str {label_set!r}")
    if target_fn == "label_logprob" and not label_set:
        raise ValueError("target_fn='label_logprob' needs label_set (the label tokens)")
    if target_fn == "label_logprob" and isinstance(label_set, (list, tuple)) and len(label_set) < 2:
        raise ValueError(f"label_set must hold at least 2 labels (log p is renormalised over them), got {list(label_set)}")
    check_label_set_use(target_fn, label_set)
    check_positive_int("batch_size", batch_size)
    check_positive_int("internal_batch_size", internal_batch_size, optional=True)
    if template is not None:  # the prompt's own checks on a stand-in text: {text} once, no other field
        fill_template("x", template)


def _refuse_misplaced(misplaced: Dict[str, Any]) -> None:
    """Refuse keywords ``attribute_dataset`` does not take: a method option (of any registered
    method) given as a keyword with where it goes (``options=``), another with Python's message.

    Raises:
        TypeError: names the first such keyword.
    """
    if not misplaced:
        return
    name, value = next(iter(misplaced.items()))
    owners = [m for m in list_methods() if name in get_method(m).option_names()]
    if not owners:
        raise TypeError(f"attribute_dataset() got an unexpected keyword argument {name!r}")
    raise TypeError(f"attribute_dataset() got {name}={value!r} as a keyword, but {name!r} is a method option (of "
                    f"{', '.join(map(repr, owners))}): method options go in options={{...}}, e.g. options={{{name!r}: {value!r}}}")


def _explainer(model, **placement) -> "Explainer":
    placement = {k: v for k, v in placement.items() if v is not None}
    if callable(getattr(model, "attribute", None)) and hasattr(model, "adapter"):
        if placement:
            raise ValueError(f"{', '.join(sorted(placement))}: model is an Explainer already loaded; pass them to load_model")
        return model
    return load_model(model, **placement)


def _compared(e: Example) -> tuple:
    """The fields of ``e`` its equality compares (not ``where``: the data's path as given, which
    a node's own copy of the file changes)."""
    return tuple(getattr(e, f.name) for f in fields(e) if f.compare)


def _checked_explainer(procs: Dist, model, s: DatasetRun, device, dtype, device_map) -> "Explainer":
    """The model on this process's device (:func:`_explainer`), checked to take the run's method
    and options (ValueError / TypeError: its family or an option refused)."""
    ex = _explainer(model, device=rank_device(device, procs, device_map), dtype=dtype, device_map=device_map)
    m = get_method(s.method)
    check_model(m, m.options(**s.options), ex.adapter)
    return ex


def _precheck(ex: "Explainer", s: DatasetRun, examples: Sequence[Example],
              trial: bool = True) -> Tuple[Dict[int, str], Optional[BaseException], Dict[str, List[Example]]]:
    """({index: why the model cannot take the example's text}, the first bad target or contrast
    as an error naming the row, {what encoding a text warned of: its rows}), from the tokenizer;
    then, with ``trial``, the first example whose text passed attributed once (:func:`_trial`)."""
    skip: Dict[int, str] = {}
    noted: Dict[str, List[Example]] = {}  # what encoding a text warns of (a special token typed in it, say) → its rows
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AttributionWarning)
        for e in examples:
            n = len(caught)
            try:
                full = ex.encode_with_offsets(e.text, template_of(e, s))[2]
            except ValueError as err:
                skip[e.index] = str(err)
                continue
            finally:
                for w in caught[n:]:
                    if issubclass(w.category, AttributionWarning):
                        noted.setdefault(str(w.message), []).append(e)
            for role, value in (("target", e.target), ("contrast", e.contrast)):
                if value is None:
                    continue
                try:
                    got = ex.resolve_target(value, multi_token=s.target_fn == "logprob" and role == "target", context=full)
                    _check_in_label_set(ex, s, role, value, got["id"], full)
                except (ValueError, TypeError) as err:
                    named = repr(value) in str(err)  # the value once: "target ' x' is not ..." names a target's
                    said = "" if named and role == "target" else f"{role}: " if named else f"{role} {value!r}: "
                    return skip, type(err)(f"{e.named}: {said}{err}"), noted
    for w in caught:  # other kinds of warning as they came
        if not issubclass(w.category, AttributionWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    first = next((e for e in examples if e.index not in skip), None)
    return skip, _trial(ex, s, first) if trial and first is not None else None, noted


def _say_noted(procs: Dist, noted: Dict[str, List[Example]]) -> None:
    """Warn once of each thing encoding the texts warned of (:func:`_precheck`; every process's
    rows together, by rank 0), naming its first row and how many more: the attribution calls'
    own warnings are ignored (their flags are recorded). A collective call."""
    together: Dict[str, List[Example]] = {}
    for part in procs.gather(noted):
        for message, rows in part.items():
            together.setdefault(message, []).extend(rows)
    for message, rows in together.items() if procs.main else ():
        rows = sorted(rows, key=lambda e: e.index)
        more = f" and {len(rows) - 1} more row{'s' if len(rows) > 2 else ''}" if len(rows) > 1 else ""
        warnings.warn(f"{rows[0].named}{more}: {message}", AttributionWarning, stacklevel=3)


def _check_in_label_set(ex: "Explainer", s: DatasetRun, role: str, value, tid, context: str) -> None:
    """ValueError unless a row's target is one of ``label_set`` (read as the call reads it, after
    the row's text) with ``target_fn="label_logprob"``: a data error, refused before any work,
    not a row skipped for good."""
    if role != "target" or s.target_fn != "label_logprob" or not s.label_set:
        return
    ids = [ex.resolve_target(l, context=context)["id"] if isinstance(l, str) else int(l) for l in s.label_set]
    if tid not in ids:
        raise ValueError(f"target {value!r} (id {tid}) is not in label_set {list(s.label_set)} (ids {ids})")


def _trial(ex: "Explainer", s: DatasetRun, e: Example) -> Optional[BaseException]:
    """The error of attributing example ``e`` (whose text, target and contrast the tokenizer
    took) before anything is written, or None: such an error is the settings' (a baseline id
    outside the vocabulary, a label word of several tokens, a method that takes no multi-token
    target), and would otherwise make every example a "skipped" record."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AttributionWarning)
            ex.attribute([e.text], **s.call([e]))
    except (ValueError, TypeError) as err:
        return type(err)(f"the settings were refused on {e.named}, a text the model takes: {err}")
    return None


def _prepare(out: Path, config: dict, examples: Sequence[Example], s: DatasetRun) -> Optional[BaseException]:
    """Rank 0 before the work: the folder held (:func:`~aieg_fast.runs.claim_folder`), settings checked or written, the records repaired, parts left by
    an interrupted torchrun run merged, and every record checked against the data (its text,
    target, contrast and template)."""
    try:
        claim_folder(out)  # no second run on the folder while this one runs (it would lose records)
        check_or_write_config(out, config, records=RECORDS_FILE, kind="attribute_dataset")
        for note in repair_jsonl(out / RECORDS_FILE):
            print(f"note: {note}", flush=True)
        _merge(out)
        for r in read_jsonl(out / RECORDS_FILE)[0]:
            i = r.get("index")
            if not isinstance(i, int):
                raise ValueError(f"out_dir {str(out)!r} holds a record without a data row index; use another out_dir")
            if i >= len(examples):
                continue
            now = _head(examples[i], s)
            changed = [k for k in _ROW_KEYS if k in r and (str(r[k]) != str(now[k]) if k == "id" else r[k] != now[k])]
            # (records from before a key: not compared; ids that print the same are one, 1 in a JSON file and "1" in a CSV)
            if changed:
                k = changed[0]
                raise ValueError(f"out_dir {str(out)!r} holds a record of data row {i} with another {_ROW_KEYS[k]} "
                                 f"({recorded_and_now(r[k], now[k])}): the data or its columns changed since; use another out_dir")
    except (ValueError, OSError) as err:
        return err
    return None


def _merge(out: Path) -> List[dict]:
    """The records of ``attributions.jsonl`` and of the torchrun parts, each index once, sorted;
    the file rewritten (atomically) when that changes it, then the parts deleted."""
    main, _ = read_jsonl(out / RECORDS_FILE)
    extra, paths = part_files(out, RECORDS_FILE)
    merged: Dict[int, dict] = {}
    for r in main + extra:
        merged.setdefault(r["index"], r)
    records = [merged[i] for i in sorted(merged)]
    if paths or records != main:
        write_jsonl(out / RECORDS_FILE, records)
    remove_parts(out, paths)
    return records


#: what a record keeps of its data row, compared with the data on resume (record key → Example field)
_ROW_KEYS = {"id": "id", "example_text": "text", "example_target": "target", "example_contrast": "contrast", "example_template": "template"}


def _head(e: Example, s: DatasetRun) -> dict:
    """The first keys of example ``e``'s record: its index and id, and its data as given (text,
    target, contrast, template: the row's own, else the run's)."""
    return {"index": e.index, "id": e.id, "example_text": e.text, "example_target": e.target, "example_contrast": e.contrast,
            "example_template": template_of(e, s)}


def _records(ex: "Explainer", s: DatasetRun, batch: Sequence[Example]) -> List[dict]:
    """The records of one batch: one ``attribute`` call; when it refuses its input, each example
    alone, and an example refused alone gets a ``skipped`` record."""
    try:
        results = ex.attribute([e.text for e in batch], **s.call(batch))
    except (ValueError, TypeError) as err:
        if len(batch) == 1:
            e = batch[0]
            return [{**_head(e, s), "skipped": str(err)}]
        return [r for e in batch for r in _records(ex, s, [e])]
    info, machine = {"first": batch[0].index, "size": len(batch)}, machine_tag()
    return [{**_head(e, s), "batch": info, **a.to_dict(), "machine": machine} for e, a in zip(batch, results)]


def _work(ex: "Explainer", s: DatasetRun, batches: Sequence[List[Example]], done: Set[int], skip: Dict[int, str],
          path: Path, bar) -> Tuple[int, int]:
    """Compute the examples of ``batches`` without a record (``done``: the indices with one) and
    append each batch's new records to ``path``; (records written with a result, records written
    as skipped: the input refused). A batch is computed whole, as planned, also when some of its examples have a
    record (a batch write cut part-way, a ``limit`` that ended inside it): the missing ones get
    the numbers an uninterrupted run gives them, and the records there are kept as they are."""
    n, n_skipped = 0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AttributionWarning)  # recorded in each record's "degenerate"
        for batch in batches:
            new = [e for e in batch if e.index not in done]
            skipped = [{**_head(e, s), "skipped": skip[e.index]} for e in new if e.index in skip]
            run = [e for e in batch if e.index not in skip]
            computed = _records(ex, s, run) if any(e.index not in skip for e in new) else []
            written = sorted(skipped + [r for r in computed if r["index"] not in done], key=lambda r: r["index"])
            append_jsonl(path, written)
            n_skipped += sum("skipped" in r for r in written)
            n += len(written)
            if bar is not None:
                bar.update(len(new))
    return n - n_skipped, n_skipped


def _progress(enabled: bool, total: int, procs: Dist):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    desc = "attribute-dataset" + (f" (rank 0 of {procs.world_size}, its share)" if procs.parallel else "")
    return tqdm(total=total, desc=desc, unit="ex", dynamic_ncols=True)


def attribute_dataset(
    data,
    out_dir,
    model=None,
    *,
    method: str = "aieg",
    text_column: Optional[str] = None,
    target_column: Optional[str] = None,
    contrast_column: Optional[str] = None,
    template_column: Optional[str] = None,
    id_column: Optional[str] = None,
    target_is_id: bool = False,
    template: Optional[str] = None,
    target_fn: str = "logit",
    label_set: Optional[Sequence] = None,
    n_steps: int = DEFAULT_N_STEPS,
    batch_size: int = 8,
    internal_batch_size: Optional[int] = None,
    baseline=None,
    backend: str = "auto",
    options: Optional[Dict[str, Any]] = None,
    limit: Optional[int] = None,
    parquet: bool = False,
    progress: bool = True,
    device=None,
    dtype=None,
    device_map=None,
    distributed: Optional[bool] = None,
    **misplaced: Any,
) -> dict:
    """Attribute every example of ``data`` with one method; records in ``out_dir`` (module
    docstring), resumable, data parallel under torchrun.

    Args:
        data: a ``.jsonl`` / ``.json`` / ``.csv`` / ``.tsv`` file, a pandas DataFrame, a
            ``datasets.Dataset``, a list of dicts or of strings (:mod:`.inputs`).
        out_dir: output folder (created); rerun with the same folder to resume.
        model: an :class:`~aieg_fast.explainer.Explainer`, a model id / folder, or None (the
            embedded SmolLM2-135M-Instruct).
        method: one of :func:`~aieg_fast.list_methods`; ``options``: its options (dict).
        text_column, target_column, contrast_column, template_column, id_column, target_is_id,
            limit: how the data is read (:func:`~aieg_fast.dataset_attribution.inputs.read_examples`);
            a note on stderr names each target, contrast, template or id column used (one
            picked by its default name too) and how its values are read (a JSON int is a token id).
        template: prompt with ``{text}`` for rows without a template of their own.
        target_fn, label_set, n_steps, internal_batch_size, baseline, backend: as
            ``Explainer.attribute`` (``target_fn`` a name: a callable cannot be recorded).
        batch_size: examples per ``attribute`` call (one padded batch; ``internal_batch_size``
            bounds the path points per forward inside it). NumPy / 0-d tensor integers, here and
            in ``options``, are read and recorded as Python ints.
        parquet: also write ``attributions.parquet`` (needs pyarrow).
        progress: a progress bar over the examples (total and time left; rank 0's share under
            torchrun).
        device, dtype, device_map: where the model is loaded (:func:`~aieg_fast.load_model`);
            under torchrun ``"auto"`` / ``"cuda"`` mean each process's own GPU.
        distributed: None: data parallel when started by torchrun with several processes
            (:func:`aieg_fast.runs.start`); False: one process.
        **misplaced: refused; a method option given here: a TypeError saying it goes in ``options``.

    Returns:
        The same dict on every process: ``{"out_dir", "records_file", "parquet_file" (or None),
        "n_examples", "computed" (examples attributed by this run, all processes; skipped ones
        not included), "skipped_now" (examples this run recorded as skipped: the model refused
        their input), "done_before" (of these examples, with a record before this run: "n_examples"
        is "computed" + "skipped_now" + "done_before"), "kept_beyond" (records of rows past this run's rows,
        from a former run over longer data or a larger ``limit``: kept in the files as they were,
        not counted, not checked; a note on stderr gives their indices),
        "skipped" (records with ``skipped`` among these examples, this run's and earlier ones),
        "skips" (``[{"index", "id", "reason"}]``, the first 20), "degenerate"
        (records with a finding), "flag_kinds" (kind → records with a flag of that kind:
        :data:`~aieg_fast.core.diagnostics.FLAG_KINDS`), "world_size", "seconds"}``; the counts
        are of these examples' records too.

    Raises:
        ValueError / TypeError: bad settings (``target_is_id``, ``parquet`` or ``progress`` not a
            bool included), unreadable or malformed data, a target or contrast
            the tokenizer cannot make one token of (names the row), settings that differ from
            those recorded in ``out_dir``, records of other data in ``out_dir``; all before any
            example is computed, and all but the last two before ``config.json`` is written.
        FileNotFoundError: a missing data file.
    """
    t0 = time.perf_counter()
    _refuse_misplaced(misplaced)
    options = {k: as_ints(v) for k, v in dict(options or {}).items()}  # numpy ints recorded as ints
    n_steps, batch_size, internal_batch_size, limit = map(as_int, (n_steps, batch_size, internal_batch_size, limit))
    baseline = as_scalar_int(baseline)
    _check_run(method, options, n_steps, target_fn, label_set, batch_size, internal_batch_size, backend, template, baseline,
               target_is_id=target_is_id, parquet=parquet, progress=progress)
    check_placement(device, dtype, device_map)
    examples = _read(data, text_column=text_column, target_column=target_column, contrast_column=contrast_column,
                     template_column=template_column, id_column=id_column, target_is_id=target_is_id, limit=limit)
    s = DatasetRun(method, options, n_steps, target_fn, None if label_set is None else list(label_set), template, baseline,
                   backend, internal_batch_size, batch_size)
    record_former_setting(out_dir, "option_values", _former_option_values)  # a folder from before option_values
    check_recorded_config(out_dir, _settings(s, text_column, target_is_id), records=RECORDS_FILE,  # before the model is loaded
                          kind="attribute_dataset", hints={"batch_size": BATCH_SIZE_KEPT})
    with start(distributed) as procs, made_folder(out_dir, procs=procs) as out:  # refused: no new folder left
        ex = procs.checked(_checked_explainer, procs, model, s, device, dtype, device_map)  # a refusal said once
        batches = plan_batches(examples, s)
        mine = shard(batches, procs)
        skip, err, noted = _precheck(ex, s, [e for b in mine for e in b], trial=not (out / RECORDS_FILE).exists())
        procs.check(err)
        _say_noted(procs, noted)
        config = _config(ex, s, examples, text_column, target_is_id)
        procs.check(procs.unlike(config, [_compared(e) for e in examples], differing_settings))  # every process given the same run
        procs.check(_prepare(out, config, examples, s) if procs.main else None)
        done = {r["index"] for r in read_jsonl(out / RECORDS_FILE)[0]}
        todo = [b for b in mine if any(e.index not in done for e in b)]  # whole batches, as planned
        path = part_path(out, RECORDS_FILE, procs.rank) if procs.parallel else out / RECORDS_FILE
        bar = _progress(progress and procs.main, sum(e.index not in done for b in todo for e in b), procs)
        try:
            computed = _work(ex, s, todo, done, skip, path, bar)
        finally:
            if bar is not None:
                bar.close()
        computed, skipped_now = (sum(c) for c in zip(*procs.gather(computed)))
        procs.barrier()
        counts = {"computed": computed, "skipped_now": skipped_now, "done_before": len(done & {e.index for e in examples})}
        summary = _finish(out, parquet, len(examples), counts, procs, t0) if procs.main else None
        return procs.broadcast(summary)


def _read(data, **kw) -> List[Example]:
    """The examples of ``data``; a note on stderr (once: rank 0 under torchrun) for each optional
    column used (target, contrast, template, id), saying how it is read, before any model work."""
    examples, notes = read_examples_and_notes(data, **kw)
    if torchrun_rank() == 0:
        for note in notes:
            print(f"note: {note}", file=sys.stderr, flush=True)
    return examples


def _config(ex: "Explainer", s: DatasetRun, examples: Sequence[Example], text_column, target_is_id) -> dict:
    """The recorded settings (``config.json``): what changes the records."""
    import torch

    dtype = next(ex.model.parameters()).dtype
    return {**run_model_settings(ex), **_settings(s, text_column, target_is_id),
            "dtype": str(dtype).replace("torch.", "") if dtype != torch.float32 else "float32"}


def _settings(s: DatasetRun, text_column, target_is_id) -> dict:
    """The part of the recorded settings that needs no model (checked before it is loaded)."""
    return {"method": s.method, "options": s.options, "option_values": resolved_options(s.method, s.options), "n_steps": s.n_steps, "target_fn": s.target_fn, "label_set": s.label_set,
            "template": s.template, "baseline": _baseline_setting(s.baseline),
            "text_column": text_column or "text", "target_is_id": bool(target_is_id), "batch_size": s.batch_size}


def _baseline_setting(baseline):
    """How config.json records the baseline: a name or id as given, a tensor as
    ``"tensor:<16 hex digits of the SHA-256 of its dtype, shape and values>"``, so a resume with
    another tensor is refused (as "tensor" alone, records of two baselines met in one folder)."""
    if baseline is None or isinstance(baseline, (str, int)):
        return baseline
    t = baseline.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}".encode())
    h.update(memoryview(t.flatten().view(torch.uint8).numpy()))
    return "tensor:" + h.hexdigest()[:16]


def _former_option_values(recorded: dict) -> Optional[dict]:
    """The options a folder written before ``config.json`` held ``option_values`` was computed
    with: its options over the former defaults (:data:`~aieg_fast.methods.registry.FORMER_DEFAULTS`)."""
    try:
        return resolved_options(recorded.get("method"), recorded.get("options") or {}, former=True)
    except (ValueError, TypeError):
        return None


def _flag_kinds(records: Sequence[dict]) -> Dict[str, int]:
    """Flag kind → the number of records with a flag of that kind (a generation record counts once)."""
    kinds = [{f.get("kind") for f in r.get("degenerate") or []} for r in records]
    return {k: n for k in FLAG_KINDS if (n := sum(k in ks for ks in kinds))}


def _finish(out: Path, parquet: bool, n: int, counts: Dict[str, int], procs: Dist, t0: float) -> dict:
    """Rank 0 after the work: the parts merged, the file sorted, parquet written; the summary
    (``counts``: "computed", "skipped_now" and "done_before" as they are), of the records of
    this run's ``n`` examples (those of rows past a ``limit`` or cut from the
    data are kept in the files, not counted: a note on stderr says how many and which); its
    ``"kept_beyond"``: their number."""
    records = _merge(out)
    pq = write_parquet(records, out / PARQUET_FILE) if parquet else None
    beyond = [r["index"] for r in records if r["index"] >= n]
    if beyond:
        shown = ", ".join(map(str, beyond[:10])) + (", ..." if len(beyond) > 10 else "")
        files = RECORDS_FILE + (f" and {PARQUET_FILE}" if pq is not None else "")
        print(f"note: out_dir {str(out)!r} keeps {len(beyond)} record(s) of rows beyond this run's {n} row(s) (index {shown}), "
              f"from a former run over more rows (longer data, or a larger limit): kept in {files} as they were, "
              "not checked against the data and not counted in this summary; another out_dir holds this run's rows only",
              file=sys.stderr, flush=True)
    records = [r for r in records if r["index"] < n]
    skips = [{"index": r["index"], "id": r.get("id"), "reason": r["skipped"]} for r in records if "skipped" in r]
    return {"out_dir": str(out), "records_file": str(out / RECORDS_FILE), "parquet_file": None if pq is None else str(pq),
            "n_examples": n, **counts, "skipped": len(skips), "skips": skips[:20],
            "degenerate": sum(1 for r in records if r.get("degenerate")), "flag_kinds": _flag_kinds(records), "world_size": procs.world_size,
            "kept_beyond": len(beyond), "seconds": time.perf_counter() - t0}
