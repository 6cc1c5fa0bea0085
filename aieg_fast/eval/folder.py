"""An evaluation folder before and after the examples are computed: settings checked or recorded,
``records.jsonl`` repaired after a hard kill, and the parts of a torchrun run merged into it.

Under ``torchrun --nproc-per-node N`` each process appends its examples' records to
``parts/records.rank<N>.jsonl``; rank 0 appends them, in example order, to ``records.jsonl``
when every process is done (:func:`gather_parts`), and before a run starts it merges the parts
an interrupted run left (:func:`prepare_folder`), so a folder resumes with any number of
processes. :func:`run_shards` is the example loop of a run folder around these.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from ..runs import Dist, append_jsonl, differing_settings, check_or_record_methods, check_or_write_config, claim_folder, part_files, part_path, remove_parts, shard
from .records import RECORDS_FILE, read_records, repair_records

__all__ = ["prepare_folder", "gather_parts", "run_shards"]


def gather_parts(out: Path) -> int:
    """Append the records of the torchrun parts in ``out/parts`` to ``records.jsonl`` (sorted
    by example index, a cut last line of a part left out), then delete the parts; the number of
    records moved. The records file is repaired first, so the new lines start on their own."""
    records, paths = part_files(out, RECORDS_FILE)
    if not paths:
        remove_parts(out, paths)
        return 0
    for note in repair_records(out / RECORDS_FILE):
        print(f"note: {note}", file=sys.stderr)
    records.sort(key=lambda r: (r.get("index", 0), str(r.get("id"))))
    append_jsonl(out / RECORDS_FILE, records)  # a repeated line (a merge cut short) is merged by id on reading
    remove_parts(out, paths)
    return len(records)


def prepare_folder(out: Path, config: dict, methods: Optional[Dict[str, dict]] = None,
                   former: Optional[Callable[[str], Optional[dict]]] = None) -> Optional[BaseException]:
    """Rank 0's part of starting a run: hold the folder (:func:`aieg_fast.runs.claim_folder`: a
    second run on it at the same time is refused), check or write ``config.json``, repair the records, merge
    parts an interrupted torchrun run left, and check or record the options of each method spec
    (``methods``: spec → resolved options; ``former``: a spec's options under the former
    defaults, for a folder without ``methods.json``; :func:`aieg_fast.runs.check_or_record_methods`).
    Returns the error (to be raised on every process), or None.

    A cut last line of ``records.jsonl`` is cut off (the bytes go to ``records.jsonl.torn``)
    and said on stderr; its example is computed again.
    """
    try:
        claim_folder(out)  # no second run on the folder while this one runs
        check_or_write_config(out, config, records=RECORDS_FILE, kind="an evaluation")
        notes: List[str] = repair_records(out / RECORDS_FILE)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        gather_parts(out)
        if methods is not None:
            specs = {m for r in read_records(out / RECORDS_FILE).values() for m in r.get("methods", {})}
            check_or_record_methods(out, methods, former or (lambda m: None), specs)
    except (ValueError, OSError) as err:
        return err
    return None


def run_shards(procs: Dist, config: dict, out: Path, plan: Callable[[Dict[str, dict]], list],
               work: Callable[[list, Dict[str, dict], Path, bool], int], progress: bool, methods: tuple = ()) -> Tuple[int, int]:
    """The example loop of a run folder, on one process or under torchrun.

    Rank 0 prepares the folder (settings, repair, parts left by an interrupted run); every
    process reads the records done, ``plan(done)`` lists the examples still to compute, and each
    process computes its share with ``work(todo, done, path, progress)`` (the count computed)
    into its own file (``records.jsonl`` for a single process); rank 0 merges the parts. Used
    by :func:`~aieg_fast.eval.runner.evaluate`, :func:`~aieg_fast.eval.generation_runner.evaluate_generation`
    and :func:`~aieg_fast.eval.longra.evaluate_longra`.
    ``methods``: :func:`~aieg_fast.eval.checks.method_settings`'s pair, checked or recorded in
    ``methods.json`` by rank 0.

    Returns:
        (examples computed by all processes, examples that were left to compute).
    """
    procs.check(procs.unlike(config, None, differing_settings))  # every process given the same settings and model, before any file
    procs.check(prepare_folder(out, config, *methods) if procs.main else None)
    rec_path = out / RECORDS_FILE
    done = read_records(rec_path)
    todo = procs.checked(plan, done)  # a refusal (a changed prompt) said once
    procs.check(procs.unlike({}, todo))  # and the same examples (the settings compared above)
    path = part_path(out, RECORDS_FILE, procs.rank) if procs.parallel else rec_path
    if progress and procs.main and procs.parallel:  # the bar is rank 0's: say what it counts
        print(f"note: {procs.world_size} processes share the {len(todo)} examples to compute; the progress bar counts rank 0's "
              f"share ({len(shard(todo, procs))})", file=sys.stderr)
    computed = work(shard(todo, procs), done, path, progress and procs.main)
    computed = sum(procs.gather(computed))
    procs.barrier()
    if procs.main:
        gather_parts(out)
    return computed, len(todo)
