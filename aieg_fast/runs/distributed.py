"""Data parallelism under ``torchrun``: which process this is, its share of the work, its device,
and the few messages the processes exchange.

``torchrun --nproc-per-node N`` (and its multi-node rendezvous) starts N copies of a command with
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and the rendezvous address in the
environment. :func:`start` joins them in a ``torch.distributed`` process group; each process then
computes its own share of the examples (:func:`shard`) into its own file, and rank 0 merges the
files. Results travel through files, so the group only carries barriers and small Python objects
(errors, counts): it uses the gloo backend, on CPUs and GPUs alike (NCCL would add nothing but
tensor collectives we do not make). Without torchrun, :func:`start` gives a single process and
nothing is initialised.

This module imports nothing else of the package.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

import torch

# torch.distributed.nn.functional's functions take ``group.WORLD`` as a default argument, evaluated
# when it is imported; transformers imports it as it loads a model. Imported under a process group,
# it would hold that group past destroy_process_group, and gloo's threads would be torn down at
# interpreter exit, unsynchronised with the other processes: an abort there in some runs
# ("terminate called without an active exception"; pytorch issues 111392, 190489). Imported here,
# before any group (ours in start(), or a script's own made after importing this package), its
# defaults stay None.
with contextlib.suppress(ImportError):
    import torch.distributed.nn.functional  # noqa: F401

__all__ = ["Dist", "start", "shard", "rank_device", "torchrun_rank", "torchrun_world_size", "reports_input_errors",
           "DIST_TIMEOUT"]

#: how long a process waits for the others at a barrier (the fastest waits for the slowest
#: shard; a process that fails makes torchrun stop the others at once).
DIST_TIMEOUT = datetime.timedelta(hours=72)


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, str(default)))
    except ValueError:
        return default


def torchrun_world_size() -> int:
    """``WORLD_SIZE`` of the environment (1 when not started by torchrun)."""
    return _env_int("WORLD_SIZE", 1)


def torchrun_rank() -> int:
    """``RANK`` of the environment (0 when not started by torchrun): which process prints and
    writes what only one should, before or outside a process group (:class:`Dist` inside one)."""
    return _env_int("RANK", 0)


#: whether this process has joined a process group (:func:`start`)
_JOINED = False
#: process groups :func:`start` has made in this process (each gets its own rendezvous keys)
_MADE = 0


def reports_input_errors() -> bool:
    """Whether this process prints a bad-input error (ValueError, TypeError, a missing file) it
    found before joining a process group: under torchrun with every process on this machine
    only rank 0 does (each reads the same arguments and files, so each finds the same error);
    otherwise, and once joined (:meth:`Dist.check` reports an error once), every process."""
    return _JOINED or torchrun_rank() == 0 or _env_int("LOCAL_WORLD_SIZE", 1) != torchrun_world_size()


@dataclass
class Dist:
    """This process in a group of ``world_size`` (rank 0 of 1 without torchrun).

    Use as a context manager (:func:`start`); the group it created is destroyed on exit.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    group: Any = None
    owns_group: bool = False

    @property
    def main(self) -> bool:
        """Rank 0: the process that writes settings, merges the parts and reports."""
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        """Wait until every process gets here (nothing without a group)."""
        if self.parallel:
            torch.distributed.barrier(group=self.group)

    def broadcast(self, obj):
        """Rank 0's ``obj``, on every process."""
        if not self.parallel:
            return obj
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def gather(self, obj) -> List[Any]:
        """Every process's ``obj``, in rank order, on every process."""
        if not self.parallel:
            return [obj]
        out: List[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj, group=self.group)
        return out

    def check(self, error: Optional[BaseException]) -> None:
        """Raise on every process when one of them got ``error`` (a collective call: every
        process must make it): the error of the lowest rank that got one, that process's own
        exception there and a copy elsewhere, whose ``reported_by`` attribute is that rank (a
        command prints the error once, on the rank that found it). A ValueError / TypeError is
        raised again as such (bad input, found by one process, is bad input for all); anything
        else as a RuntimeError naming the rank."""
        errs = self.gather(None if error is None else (type(error).__name__, str(error)))
        first = next((rank for rank, e in enumerate(errs) if e is not None), None)
        if first is None:
            return
        if first == self.rank:
            raise error
        name, text = errs[first]
        cls = {"ValueError": ValueError, "TypeError": TypeError}.get(name, RuntimeError)
        copy = cls(text if cls is not RuntimeError else f"rank {first}: {name}: {text}")
        copy.reported_by = first
        raise copy

    def unlike(self, settings: dict, data, differing: Optional[Callable[[dict, dict], List[str]]] = None) -> Optional[ValueError]:
        """A ValueError (the same on every process) when a process was given other ``settings``
        (the run's recorded settings, its model's weights digest included) or other ``data`` (the
        examples in order, JSON-able) than rank 0, else None; a collective call. Each process
        reads its own arguments: an unseeded shuffle of the data, or a model made per process,
        wrote records of other examples or weights into one folder, silently. ``differing(first,
        theirs)``: the keys of two settings that differ (default: the keys whose values are not
        equal; the runs give the folder check's own comparison, :func:`~aieg_fast.runs.folder.differing_settings`)."""
        if not self.parallel:
            return None
        try:
            text = json.dumps(data, sort_keys=True, default=str)
        except TypeError:  # keys of several types cannot be sorted: as written
            text = json.dumps(data, default=str)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        every = self.gather((settings, digest))
        first, first_digest = every[0]
        for rank, (theirs, their_digest) in enumerate(every):
            keys = (differing or _unequal)(first, theirs)
            keys += ["the data (its examples, in order)"] if their_digest != first_digest else []
            if keys:
                return ValueError(f"the processes were given different runs: rank {rank} differs from rank 0 in {', '.join(keys)}; "
                                  "every process must get the same data in the same order and the same model (a shuffle "
                                  "without a fixed seed, or a model made or changed in each process, does this)")
        return None

    def checked(self, fn, *args):
        """``fn(*args)`` on every process, its result; a ValueError / TypeError it raises is
        raised on every process and reported once (:meth:`check`). A collective call."""
        try:
            out, error = fn(*args), None
        except (ValueError, TypeError) as err:
            out, error = None, err
        self.check(error)
        return out

    def close(self, sync: bool = True) -> None:
        """Destroy the group this object made (the default group, or the gloo subgroup made beside
        a group of the caller's, which is left as it was). With ``sync``, first wait for every
        process: a process that tears gloo down while another is still inside the last collective
        can abort ("terminate called without an active exception"). Without it (leaving on an
        error, when the others may never come) it tears down at once.

        The group must go here, not at interpreter exit: gloo's threads and sockets live as long
        as the group object does, and one still alive at exit is torn down while the interpreter
        finalises, unsynchronised with the other processes (an abort there, in some runs). A
        module that evaluates ``group.WORLD`` as a default argument while the group exists keeps
        it alive: this module imports torch's such module before any group exists."""
        made = self.group if self.group is not None else (torch.distributed.group.WORLD if self.owns_group else None)
        if made is not None and torch.distributed.is_initialized():
            if sync and self.parallel:
                torch.distributed.barrier(group=self.group)
            torch.distributed.destroy_process_group(self.group)
            self.group = None
        self.owns_group = False

    def __enter__(self) -> "Dist":
        return self

    def __exit__(self, *exc) -> bool:
        self.close(sync=exc[0] is None)
        return False


def _unequal(a: dict, b: dict) -> List[str]:
    return sorted(k for k in {*a, *b} if a.get(k) != b.get(k))


def start(distributed: Optional[bool] = None) -> Dist:
    """This process's place in a torchrun group, or in a process group the caller made.

    Args:
        distributed: None (default): data parallel when started by torchrun with
            ``WORLD_SIZE`` > 1, a single process otherwise; False: a single process whatever the
            environment; True: data parallel under torchrun, or inside a process group of more
            than one process the caller made without torchrun's environment
            (``torch.multiprocessing.spawn`` and ``init_process_group``; not by default, since
            such scripts often call on rank 0 alone, where joining would wait for the others).

    Returns:
        A :class:`Dist`; joins (or creates) the process group when parallel. A group the caller
        already made is used through a gloo subgroup (destroyed by :meth:`Dist.close`) and left
        as it was; without ``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE`` in the environment its
        processes are taken to share one machine.

    Raises:
        ValueError: ``distributed=True`` with neither.
    """
    made = torch.distributed.is_available() and torch.distributed.is_initialized()
    world = torchrun_world_size() if "RANK" in os.environ or distributed is not True or not made else torch.distributed.get_world_size()
    if distributed is False or (distributed is None and world <= 1):
        return Dist()
    if world <= 1 or not (made or "RANK" in os.environ):
        raise ValueError("distributed=True needs torchrun's environment (RANK, WORLD_SIZE) or a process group of several "
                         "processes; start the command with `torchrun --nproc-per-node N ...`")
    global _JOINED
    _JOINED = True
    if made:
        rank = torch.distributed.get_rank()
        local, local_world = int(os.environ.get("LOCAL_RANK", rank)), int(os.environ.get("LOCAL_WORLD_SIZE", world))
        group = torch.distributed.new_group(backend="gloo", timeout=DIST_TIMEOUT)
        return Dist(rank, world, local, local_world, group, False)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    global _MADE
    # torchrun's rendezvous store outlives a group: a second group made under the same keys (a
    # script calling two of the package's runs) read the first one's gloo addresses and failed
    # ("connectFullMesh failed ... Connection refused") or hung; each group gets keys of its own.
    store, rank, world = next(torch.distributed.rendezvous("env://", timeout=DIST_TIMEOUT))
    store = torch.distributed.PrefixStore(f"aieg_fast/group{_MADE}", store)
    _MADE += 1
    torch.distributed.init_process_group(backend="gloo", store=store, rank=rank, world_size=world, timeout=DIST_TIMEOUT)
    return Dist(torch.distributed.get_rank(), torch.distributed.get_world_size(), local, local_world, None, True)


def shard(items: Sequence, d: Dist) -> list:
    """This process's share of ``items``: every ``world_size``-th one from its rank on."""
    return list(items[d.rank :: d.world_size])


def rank_device(device, d: Dist, device_map=None):
    """The device of this process: ``"auto"`` (CUDA when available, else the CPU) and
    ``"cuda"`` become ``cuda:<LOCAL_RANK>`` when several processes share the machine; anything
    else is kept (None included).

    Raises:
        ValueError: a ``device_map`` while several processes share the machine (each would
            place its model over every GPU).
    """
    if device_map is not None and d.local_world_size > 1:
        raise ValueError(f"device_map={device_map!r} with {d.local_world_size} processes per machine: each would place its "
                         "model over every GPU; give each process its device instead, or start one process per machine")
    if isinstance(device, str) and device in ("auto", "cuda") and d.parallel:
        if torch.cuda.is_available():
            return f"cuda:{d.local_rank}"
        return "cpu" if device == "auto" else device
    return device

