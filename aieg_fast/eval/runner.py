"""Faithfulness evaluation of attribution methods over a classification dataset.

:func:`evaluate` runs each method on the first ``n`` examples of a dataset with the dataset's
prompt (:data:`~aieg_fast.datasets.SENTIMENT_TEMPLATE` for the sentiment datasets,
:data:`~aieg_fast.datasets.BOOLQ_TEMPLATE` for BoolQ, whose passage and question are both
attributed), targets the model's predicted label word (" negative" / " positive", " no" / " yes":
argmax over the label words), scores every
attribution with :mod:`aieg_fast.eval.metrics` (:func:`evaluate_example`) and writes to
``out_dir``:

* ``records.jsonl`` — one JSON line per example, appended as soon as the example is done; a rerun
  skips the example ids already there (resume after an interrupt; :mod:`aieg_fast.eval.records`);
  each record holds its ``tie_seed``, the seed of the random order of equal scores in the top-k;
* ``config.json`` — the settings; a rerun with other settings is refused (unless the folder holds
  only settings: a run stopped before its first record; :func:`aieg_fast.runs.holds_results`);
* ``summary.md`` / ``summary.csv`` — mean and 95 % bootstrap CI per metric and method, and a
  paired test of each method against ``integrated_gradients`` (Wilcoxon signed-rank from scipy
  when installed, else an exact / Monte-Carlo sign-flip permutation test of the mean
  difference in numpy; :mod:`aieg_fast.eval.stats`, :mod:`aieg_fast.eval.report`);
* ``pi_soft_curves.png`` (``pi_soft_curves_<map>.png`` for the soft maps other than ``"relu"``)
  — mean π-Soft-NC / NS curves (needs matplotlib; skipped with a note).

The soft metrics are computed under each soft map of ``soft_maps`` (default ``"relu"``, the
clipped map, and ``"minmax"``, the offset-invariant min-max of the signed scores; see
:mod:`aieg_fast.eval.metrics`); the columns of a map other than ``"relu"`` end in ``_<map>``.

Datasets: the classification datasets of :data:`aieg_fast.datasets.DATASETS`: ``sst2-sample`` (24
sentences shipped in the package), ``sst2-dev``, ``sst2-test``, ``imdb``, ``boolq``,
``boolq-heldout`` (files of the evaluation data folder: ``data_dir``, else ``$AIEG_FAST_DATA``,
else the copies shipped in ``aieg_fast/data``; see :func:`~aieg_fast.datasets.dataset_path`); or
a user's file or ``datasets.Dataset`` with a label column (:mod:`aieg_fast.eval.examples`).
LongRA has its own runner (:mod:`aieg_fast.eval.longra`).
"""
from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ..core.diagnostics import AttributionWarning
from ..core.path import check_chunk_settings
from ..core.validation import as_int, check_placement
from ..datasets import DatasetSpec
from ..explainer import load_model
from ..methods.registry import parse_method_spec
from ..models import model_kind, run_model_settings
from ..runs import CONFIG_FILE, Dist, check_recorded_config, made_folder, rank_device, start as start_processes
from .checks import check_method_options, check_models, method_settings
from .metrics import (
    CONTROLS,
    DEFAULT_PI_GRID,
    DEFAULT_SOFT_MAPS,
    flat_metrics,
    pi_soft,
    prepare,
    control_attribution,
    score_attribution,
)
from .examples import example_text, label_token_ids, load_examples, truncate
from .folder import run_shards
from .records import RECORDS_FILE, append_record
from .report import shown_id, summarise_run
from .run_checks import check_methods, check_run_settings
from .stats import REFERENCE_METHOD
from .trained import check_not_trained_on

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = ["evaluate", "evaluate_example", "eval_target_fn", "RunSettings", "CONTROLS", "DEFAULT_METHODS", "EVAL_TARGET_FNS",
           "TOPK_SWEEP", "CONFIG_FILE", "explainer_for", "run_config"]

#: the methods ``evaluate`` runs by default (and ``aieg-fast evaluate --methods``).
DEFAULT_METHODS = ("aieg", "integrated_gradients", "random")
#: default top-k fractions of the k sweep (specs/aieg.md §7: 5 / 10 / 20 / 30 %).
TOPK_SWEEP = (0.05, 0.10, 0.20, 0.30)


@dataclass(frozen=True)
class RunSettings:
    """What every example of one :func:`evaluate` run shares (see its arguments).

    ``specs`` maps each method spec to its (method name, options) (:func:`parse_method_spec`);
    ``labels`` are the label words or class indices and ``label_ids`` their token / class ids;
    ``hard_only`` is ``metrics == "hard"``; ``soft_maps`` the soft maps of the soft metrics;
    ``ties`` the tie rule of the top-k.
    """

    specs: Dict[str, Tuple[str, dict]]
    max_tokens: Optional[int]
    template: Optional[str]
    labels: List[Union[str, int]]
    label_ids: List[int]
    seed: int
    topk: float
    n_steps: int
    n_samples: int
    pis: List[float]
    prob_space: str
    normalise: str
    internal_batch_size: Optional[int]
    method_options: Dict[str, dict]
    topk_sweep: Optional[List[float]] = None
    hard_only: bool = False
    soft_maps: Tuple[str, ...] = DEFAULT_SOFT_MAPS
    ties: str = "random"
    #: the explained F of every method (:func:`eval_target_fn`)
    target_fn: str = "label_logprob"

    @property
    def scores_pair(self) -> bool:
        """The metrics score p(pred) over the predicted and runner-up labels only, whose z_pred −
        z_runner-up is explained (``target_fn="contrast"`` over more than two labels)."""
        return self.target_fn == "contrast" and self.prob_space == "labels" and len(self.label_ids) > 2

    def attribute_kwargs(self, contrast=None) -> dict:
        """The target settings passed to ``Explainer.attribute`` (``contrast``: the runner-up
        label, used by ``target_fn="contrast"``)."""
        if self.target_fn == "label_logprob":
            return {"target_fn": "label_logprob", "label_set": list(self.labels)}
        if self.target_fn == "contrast":
            return {"target_fn": "logit", "contrast_target": contrast}
        return {"target_fn": self.target_fn}


#: ``evaluate``'s ``target_fn`` choices: ``"auto"`` picks the F its metrics score;
#: ``"contrast"`` explains z_pred − z_runner-up, scored over those two in label space (:attr:`RunSettings.scores_pair`).
EVAL_TARGET_FNS = ("auto", "label_logprob", "contrast", "logprob", "logit", "prob")


def eval_target_fn(target_fn: str, prob_space: str) -> str:
    """The F explained in an evaluation: ``"auto"`` → the log-probability the metrics score,
    ``"label_logprob"`` (renormalised over the label words / classes) for ``prob_space="labels"``,
    ``"logprob"`` (over the vocabulary) for ``"vocab"``; anything else as given.

    Raises:
        ValueError: not one of :data:`EVAL_TARGET_FNS`.
    """
    if target_fn not in EVAL_TARGET_FNS:
        raise ValueError(f"target_fn must be one of {list(EVAL_TARGET_FNS)}, got {target_fn!r}")
    if target_fn != "auto":
        return target_fn
    return "label_logprob" if prob_space == "labels" else "logprob"


# ============================================================================================
# argument checks
# ============================================================================================
def explainer_for(model, **placement) -> "Explainer":
    """``model`` itself when it is an explainer (has ``attribute`` and ``adapter``), else
    :func:`~aieg_fast.explainer.load_model` of it (None, a hub id or a folder) with
    ``placement`` (device, dtype, device_map; those left at None are not passed)."""
    placement = {k: v for k, v in placement.items() if v is not None}
    if callable(getattr(model, "attribute", None)) and hasattr(model, "adapter"):
        if placement:
            raise ValueError(f"{', '.join(sorted(placement))}: model is an Explainer already loaded; pass them to load_model")
        return model
    return load_model(model, **placement)


def run_explainer(procs: Dist, model, device, dtype, device_map, check: Callable[["Explainer"], None]) -> "Explainer":
    """:func:`explainer_for` ``model`` placed on this process's device (:func:`~aieg_fast.runs.rank_device`)
    and ``check(ex)``, on every process of ``procs``: a ValueError / TypeError they all find (a
    model family, option or label word the model refuses) is said once, not once per process
    (:meth:`~aieg_fast.runs.Dist.checked`)."""
    def load():
        ex = explainer_for(model, device=rank_device(device, procs, device_map), dtype=dtype, device_map=device_map)
        check(ex)
        return ex
    return procs.checked(load)


def causal_lm_check(what: str, specs, method_options) -> Callable[["Explainer"], None]:
    """The check :func:`run_explainer` makes for a run that predicts the next token: the model
    takes every method spec and option (:func:`~aieg_fast.eval.checks.check_models`) and is a
    causal LM (``what``: the run, named in the ValueError)."""
    def check(ex: "Explainer") -> None:
        if ex.adapter.kind != "causal_lm":
            raise ValueError(f"model: {what} needs a causal language model (it predicts the next token), not a classification head")
        check_models(ex, specs, method_options, CONTROLS)
    return check


_NO_LABELS = ("labels: dataset {!r} names no label words and the model is a causal LM (a classification head would "
              "give its classes); give the label words (--labels), one per label index, e.g. ' no' ' yes'")


def _check_label_words(model, spec: DatasetSpec, labels) -> None:
    """Refuse a dataset without label words for a causal LM given no ``labels``, before the
    model loads (:func:`~aieg_fast.models.model_kind` reads its config only)."""
    if labels is None and not spec.labels and model_kind(model) == "causal_lm":
        raise ValueError(_NO_LABELS.format(spec.name))


def _prompt(ex: "Explainer", spec: DatasetSpec, template, labels) -> Tuple[Optional[str], list, List[int]]:
    """(template, labels, label ids): the dataset's prompt and label words for a causal LM, no
    template (unless the dataset has several fields to join) and the class indices for a
    classification head, unless given."""
    classifier = ex.adapter.kind == "classifier"
    if labels is None:
        labels = list(range(len(spec.labels) or ex.adapter.num_labels)) if classifier else list(spec.labels)
    labels = list(labels)
    if not labels:
        raise ValueError(_NO_LABELS.format(spec.name))
    if template is None and (not classifier or list(spec.fields) != ["text"]):
        template = spec.template
    return template, labels, label_token_ids(ex, labels, template, spec.fields)


# ============================================================================================
# settings and resume
# ============================================================================================
def _name(dataset, spec: DatasetSpec) -> str:
    """The recorded name of ``dataset``: as given (a registered name or a file), else (records
    given in Python) the spec's name."""
    return str(dataset) if isinstance(dataset, (str, Path)) else spec.name


def settings_config(dataset: str, metrics: str, *, max_tokens, seed, topk, n_steps, n_samples, pis, prob_space, normalise,
                    method_options, soft_maps, ties, target_fn, topk_sweep) -> dict:
    """The part of a run's ``config.json`` that needs no model (:func:`run_config` adds the model,
    template and labels), with ``metrics`` and ``topk_sweep`` None where the config leaves them out:
    what :func:`~aieg_fast.runs.check_recorded_config` compares before the model is loaded."""
    return {
        "dataset": dataset, "max_tokens": max_tokens, "seed": seed, "topk": topk, "n_steps": n_steps, "n_samples": n_samples,
        "pis": pis, "prob_space": prob_space, "normalise": normalise, "method_options": method_options,
        # always recorded: folders written before soft maps / random ties existed are refused, not mixed
        "soft_maps": list(soft_maps), "ties": ties, "target_fn": target_fn,
        # only when not the default / when asked, so folders written before these options resume
        "metrics": None if metrics == "all" else metrics, "topk_sweep": list(topk_sweep) if topk_sweep else None,
    }


NONE_MEANS = {"metrics": "metrics None means 'all', the default", "topk_sweep": "topk_sweep None means no sweep"}  # for refusals


def run_config(ex: "Explainer", dataset: str, s: RunSettings, metrics: str) -> dict:
    """The recorded settings (``config.json``) of a run (also of
    :func:`~aieg_fast.eval.generation_runner.evaluate_generation`, which adds its own)."""
    config = {**run_model_settings(ex), "template": s.template, "labels": list(s.labels), **settings_config(
        dataset, metrics, max_tokens=s.max_tokens, seed=s.seed, topk=s.topk, n_steps=s.n_steps, n_samples=s.n_samples, pis=s.pis,
        prob_space=s.prob_space, normalise=s.normalise, method_options=s.method_options, soft_maps=s.soft_maps, ties=s.ties,
        target_fn=s.target_fn, topk_sweep=s.topk_sweep)}
    for key in ("metrics", "topk_sweep"):
        if config[key] is None:
            del config[key]
    if s.scores_pair:  # only then, so folders of two labels resume; one of more labels written before it is refused, not mixed
        config["contrast_scored_over"] = "pair"
    dtype = next(ex.model.parameters()).dtype
    if dtype != torch.float32:  # only when not the default, so folders written before --dtype resume
        config["dtype"] = str(dtype).replace("torch.", "")
    return config


def _check_same_data(ex: "Explainer", s: RunSettings, data: List[dict], start: int, done: Dict[str, dict], out: Path) -> None:
    """Refuse to resume into records of other inputs: every recorded example of ``data`` (from
    ``start`` on) must hold the text this run would give it (after ``max_tokens``) and its gold
    label (accuracy and the chance test read the recorded one).

    Raises:
        ValueError: names the example, both texts (or labels) and the likely causes.
    """
    for rec in data[start:]:
        old = done.get(rec["id"], {})
        if old.get("label") is not None and rec.get("label") is not None and int(old["label"]) != int(rec["label"]):
            raise ValueError(f"out_dir {str(out)!r} holds a record of example {rec['id']!r} with the gold label {old['label']}, "
                             f"the data gives it {rec['label']} now: the data file, --label-field or --labels changed since; "
                             "use another out_dir")
        had = old.get("text")
        if had is None:
            continue
        now = truncate(ex, example_text(rec), s.max_tokens)
        if had != now:
            raise ValueError(f"out_dir {str(out)!r} holds a record of example {rec['id']!r} with another text ({str(had)[:80]!r}) "
                             f"than the data gives it now ({str(now)[:80]!r}): the data file, --data-dir or --text-field "
                             "changed since; use another out_dir")


def _todo(data: List[dict], start: int, methods: Sequence[str], done: Dict[str, dict]) -> list:
    """(index, id, text, label, missing methods) of the examples (records) from ``start`` on
    with methods not yet in the records; the text is a str or a mapping of fields."""
    todo = []
    for i, rec in enumerate(data):
        if i < start:
            continue
        eid, text, label = rec["id"], example_text(rec), rec["label"]
        if "skipped" in done.get(eid, {}):  # its input was refused: the same settings refuse it again
            continue
        have = done.get(eid, {}).get("methods", {})
        missing = [m for m in methods if m not in have]
        if missing:
            todo.append((i, eid, text, label, missing))
    return todo


# ============================================================================================
# the example loop
# ============================================================================================
def _input_problem(ex: "Explainer", s: RunSettings, text: str) -> Optional[str]:
    """Why the example's text cannot be explained with these settings (more tokens than the
    model's positions, no attributable token), or None."""
    try:
        ex.encode(truncate(ex, text, s.max_tokens), s.template)
    except ValueError as err:
        return str(err)
    return None


def _run_examples(ex: "Explainer", s: RunSettings, todo: list, done: Dict[str, dict], rec_path: Path,
                  progress: bool) -> int:
    """Evaluate the examples of ``todo``, appending each record as it is done; the count. An
    example whose input is refused (:func:`_input_problem`) gets a record with ``"skipped"``
    (the reason) and the run goes on. AttributionWarnings are not shown during the run: each
    attribution's findings are recorded (``"signal_flags"``) and counted in the summary."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AttributionWarning)
        return _example_loop(ex, s, todo, done, rec_path, progress)


def _example_loop(ex: "Explainer", s: RunSettings, todo: list, done: Dict[str, dict], rec_path: Path,
                  progress: bool) -> int:
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="evaluate", unit="ex")
    computed = 0
    try:
        for i, eid, text, label, missing in todo:
            problem = _input_problem(ex, s, text)
            if problem is not None:
                append_record(rec_path, {"id": eid, "index": i, "label": int(label), "skipped": problem, "methods": {}, "controls": {}})
                if bar is not None:
                    bar.update(1)
                continue
            need_controls = "uniform" not in done.get(eid, {}).get("controls", {})
            rec = evaluate_example(ex, s, eid, i, text, label, missing, need_controls=need_controls)
            append_record(rec_path, rec)
            computed += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return computed


def _attribute_methods(ex: "Explainer", s: RunSettings, eid: str, text: str, target, methods: Sequence[str], contrast=None):
    """Attributions of the non-control methods: ({spec: (Attribution, seconds)}, the first with
    finite scores or None). The calls share their path computations
    (:meth:`Explainer.shared_paths`: AIEG variants that differ only after the path run it once);
    a variant that reuses a path records only its own seconds."""
    base = None
    attrs = {}
    with ex.shared_paths():
        for m in [m for m in methods if m not in CONTROLS]:
            name, opts = s.specs.get(m) or parse_method_spec(m)
            t0 = time.perf_counter()
            try:
                a = ex.attribute(text, method=name, target=target, template=s.template, n_steps=s.n_steps,
                                 internal_batch_size=s.internal_batch_size, **s.attribute_kwargs(contrast),
                                 **{**s.method_options.get(name, {}), **opts})
            except (ValueError, TypeError) as err:
                raise type(err)(f"methods: {m!r} on {shown_id(eid)}: {err}") from err
            attrs[m] = (a, time.perf_counter() - t0)
            if base is None and bool(torch.isfinite(a.scores.float()).all()):
                base = a
    return attrs, base


def evaluate_example(ex: "Explainer", settings: RunSettings, eid: str, index: int, text: str, label: int,
                     methods: Sequence[str], need_controls: bool = True) -> dict:
    """The record of one example: prediction, each method's scores, metrics and times, controls.

    The text is truncated to ``settings.max_tokens``; the target is the label word of the
    model's prediction (argmax of :meth:`Explainer.label_probs` over ``settings.labels``).

    Args:
        ex: the explainer. settings: the run's settings. eid: the example id (seeds the draws).
        index, text, label: the example. methods: the method specs to compute (controls too).
        need_controls: also compute the ``uniform`` π-Soft control (not with hard metrics only).

    Returns:
        The record (see :mod:`aieg_fast.eval.records`); may hold NaN (write it with
        :func:`~aieg_fast.eval.records.append_record`).

    Raises:
        ValueError, TypeError: a method refuses its options (names the method spec and eid).
    """
    s = settings
    text = truncate(ex, text, s.max_tokens)
    probs = ex.label_probs(text, s.labels, s.template)
    pred, runner_up = (int(i) for i in np.argsort(-np.asarray(probs), kind="stable")[:2])  # a tie: the first label first, never twice
    target, contrast = s.labels[pred], s.labels[runner_up]
    rec = {"id": eid, "index": index, "text": text, "label": int(label), "pred_label": pred, "target": target,
           "label_probs": probs, "methods": {}, "controls": {}}
    if s.target_fn == "contrast":
        rec["contrast"] = contrast
    attrs, base = _attribute_methods(ex, s, eid, text, target, methods, contrast)
    if base is None:  # only controls asked, or no finite scores: a cheap attribution supplies input and target
        base = ex.attribute(text, method="attention", target=target, template=s.template)
    ids = ([s.label_ids[pred], s.label_ids[runner_up]] if s.scores_pair else s.label_ids) if s.prob_space == "labels" else None
    ctx = prepare(ex, base, prob_space=s.prob_space, label_ids=ids, seed=s.seed, instance_id=eid)
    rec.update({"n_tokens": len(base.token_ids), "n_attributable": int(sum(base.attributable)), "p": ctx.p, "p0": ctx.p0,
                "degenerate": ctx.degenerate, "tie_seed": ctx.tie_seed})
    for c in CONTROLS:
        if c in methods:
            attrs[c] = (control_attribution(c, base, s.seed, eid), 0.0)
    for m in methods:
        a, t_attr = attrs[m]
        t0 = time.perf_counter()
        r = score_attribution(ex, s, a, ctx)
        if r.get("non_finite"):
            print(f"note: {m!r} gave scores that are not finite on {shown_id(eid)}; its metrics there are NaN", file=sys.stderr)
        r["time_attribution_s"] = t_attr
        r["time_metrics_s"] = time.perf_counter() - t0
        r["scores"] = [float(x) for x in a.scores.tolist()]
        r["signal_flags"] = [f["kind"] for f in a.degenerate]  # AttributionWarning findings (not warned during a run)
        rec["methods"][m] = r
    if need_controls and not s.hard_only:
        ps = pi_soft(ex, base, pis=s.pis, n_samples=s.n_samples, uniform=True, ctx=ctx)
        rec["controls"]["uniform"] = flat_metrics(None, None, ps)
    return rec


# ============================================================================================
# main entry
# ============================================================================================
def evaluate(
    model=None,
    dataset="sst2-sample",
    methods: Union[str, Sequence[str]] = DEFAULT_METHODS,
    n: int = 20,
    max_tokens: Optional[int] = None,
    out_dir: Union[str, Path] = "faithfulness_out",
    seed: int = 0,
    topk: float = 0.20,
    *,
    topk_sweep: Optional[Sequence[float]] = None,
    metrics: str = "all",
    start: int = 0,
    reference: str = REFERENCE_METHOD,
    n_steps: int = 20,
    n_samples: int = 4,
    pis: Sequence[float] = DEFAULT_PI_GRID,
    prob_space: Optional[str] = None,
    normalise: str = "minmax",
    soft_maps: Union[str, Sequence[str]] = DEFAULT_SOFT_MAPS,
    ties: str = "random",
    target_fn: str = "auto",
    data_dir=None,
    template: Optional[str] = None,
    labels: Optional[Sequence[Union[str, int]]] = None,
    text_field: str = "text",
    label_field: Optional[str] = None,
    id_field: Optional[str] = None,
    internal_batch_size: Optional[int] = None,
    method_options: Optional[Dict[str, dict]] = None,
    progress: bool = True, plot: bool = True,
    device=None, dtype=None, device_map=None,
    distributed: Optional[bool] = None,
) -> dict:
    """Evaluate attribution methods with every metric of :mod:`aieg_fast.eval.metrics`.

    Args:
        model: an :class:`~aieg_fast.explainer.Explainer`, a model id / folder, or None
            (embedded SmolLM2-135M-Instruct).
        dataset: a classification dataset of :data:`aieg_fast.datasets.DATASETS` (sst2-*, imdb,
            boolq, boolq-heldout), or a file (.jsonl, .json, .csv, .tsv) or object with dict rows
            (a ``datasets.Dataset``) with ``label_field`` (:func:`~aieg_fast.datasets.user_dataset`).
        methods: method specs (a list or a comma-separated string): ``name:option=value[:...]``
            (:func:`~aieg_fast.methods.registry.parse_method_spec`); path methods also take
            :data:`~aieg_fast.eval.checks.BASELINE_KEYS` (``integrated_gradients:baseline=zero``);
            ``random``: random scores; ``recency``: scores rising with the position (the hard
            metrics' position effect). The ``uniform`` π-Soft control is always computed.
        reference: the method of the paired tests (default ``integrated_gradients``; ``aieg`` for
            an ablation table); not a recorded setting: rerun with another to re-summarise.
        n: number of examples (the first n of the dataset). start: compute only examples ``start … n-1`` (torchrun shares a run).
        max_tokens: truncate each text to this many tokens (AIEG's 50 / 200 / 400 buckets).
        out_dir: output folder (records, summary, plot); reused to resume.
        seed: seed of the random control, the soft-metric draws and the bootstrap.
        topk: fraction of attributable tokens for the hard metrics (default 0.20).
        topk_sweep: extra top-k fractions of the hard metrics (e.g. :data:`TOPK_SWEEP`), in a second table.
        metrics: ``"all"`` (default) or ``"hard"``: log-odds, comprehensiveness and sufficiency
            only (the AIEG paper's), without the Soft-NC/NS and π-Soft forwards (2·K + 2·|π|·K per soft map).
        n_steps: path steps of the path methods. n_samples: Bernoulli draws K per soft point. pis: π grid.
        prob_space: ``"labels"`` (None, the default: softmax over the label words / classes) or ``"vocab"``.
        normalise: score normalisation of Soft-NC / NS. data_dir: evaluation data folder.
        soft_maps: soft maps of the soft metrics (list or comma-separated, :data:`~aieg_fast.eval.metrics.SOFT_MAPS`):
            default ``("relu", "minmax")``, the second in columns ending in ``_minmax``.
        ties: order of equal scores in the top-k: ``"random"`` (default; seeded per example by
            (seed, example id), recorded as ``tie_seed``) or ``"first"`` (lower index first).
        target_fn: the F every method explains (:func:`eval_target_fn`; default ``"auto"``: the
            log-probability the metrics score; for BoolQ ``"contrast"``, its dataset's
            :attr:`~aieg_fast.datasets.DatasetSpec.target_fn`). Recorded in ``config.json``.
        template, labels: prompt and label words (single tokens or token ids; index = label).
            Defaults: the dataset's (:attr:`~aieg_fast.datasets.DatasetSpec.template`, ``labels``);
            for a classification head no template (but BoolQ's) and the class indices.
        text_field, label_field, id_field: a user dataset's columns (text, gold label, id);
            ``{name}`` fields of its template other than ``{text}`` are columns too.
        method_options: per-method options, e.g. ``{"aieg": {"ef_mode": "none"}}``.
        device, dtype, device_map: how the model is loaded (:func:`~aieg_fast.load_model`; not
            with an Explainer); under torchrun ``"auto"`` / ``"cuda"`` = ``cuda:<LOCAL_RANK>``.
        distributed: None: data parallel under ``torchrun`` (:mod:`aieg_fast.eval.folder`); False: one process.

    Returns:
        ``{"rows", "summary_md", "computed", "skipped", "out_dir", "plot", "plots", "failed", "failures",
        "chance"}``: examples computed in this call / found in the records; the first π-Soft plot (or None)
        and all; the examples whose input was refused (too many tokens, none attributable), recorded with
        ``"skipped"`` and listed; the accuracy against chance (:func:`~aieg_fast.eval.stats.chance_check`).
        Under torchrun other ranks than 0 return no summary and ``"rank"``.

    Raises:
        ValueError: bad arguments (each names the argument: a typo in ``method_options`` or a method spec
            included), an empty or malformed data file (names the file and line), settings that differ from
            those recorded in ``out_dir`` (the model's, template and labels once it is loaded, the others before)
            or records of other data there (a changed file, ``data_dir`` or ``text_field``), a ``dataset`` the
            model was trained on (:mod:`.trained`); all before ``config.json`` or any record is written. FileNotFoundError: no data file.
    """
    n, max_tokens, seed, start, n_steps, n_samples, internal_batch_size = map(  # a NumPy int as the int it holds
        as_int, (n, max_tokens, seed, start, n_steps, n_samples, internal_batch_size))
    methods, specs = check_methods(methods, reference, CONTROLS)
    topk_sweep, pis, soft_maps = check_run_settings(n, n_steps, max_tokens, start, seed, topk, metrics, topk_sweep, n_samples, pis,
                                                 prob_space, normalise, soft_maps, ties, dict(progress=progress, plot=plot))
    prob_space = prob_space or "labels"  # a label task: the label words / classes
    method_options = check_method_options(method_options, specs, CONTROLS)
    check_placement(device, dtype, device_map)
    check_chunk_settings(internal_batch_size, None)
    check_not_trained_on(model, dataset, data_dir)
    spec, data = load_examples(dataset, data_dir, n, start, text_field=text_field, label_field=label_field,
                               template=template, labels=labels, id_field=id_field)
    target_fn, dataset = eval_target_fn(spec.target_fn if target_fn == "auto" else target_fn, prob_space), _name(dataset, spec)
    _check_label_words(model, spec, labels)
    kw = dict(max_tokens=max_tokens, seed=seed, topk=topk, n_steps=n_steps, n_samples=n_samples, pis=pis, prob_space=prob_space, ties=ties,
              normalise=normalise, method_options=method_options, soft_maps=tuple(soft_maps), target_fn=target_fn, topk_sweep=topk_sweep)
    check_recorded_config(out_dir, settings_config(dataset, metrics, **kw), records=RECORDS_FILE, kind="an evaluation", hints=NONE_MEANS)
    with start_processes(distributed) as procs, made_folder(out_dir, procs=procs) as out:  # refused: no new folder left
        ex = run_explainer(procs, model, device, dtype, device_map, lambda ex: check_models(ex, specs, method_options, CONTROLS))
        template, labels, label_ids = procs.checked(_prompt, ex, spec, template, labels)
        settings = RunSettings(specs=specs, template=template, labels=labels, label_ids=label_ids,
                               internal_batch_size=internal_batch_size, hard_only=metrics == "hard", **kw)
        config = run_config(ex, dataset, settings, metrics)
        computed, skipped = _run_shards(procs, ex, settings, config, out, data, start, methods, progress)
        if not procs.main:  # rank 0 merged the parts and reports
            return dict(NO_SUMMARY, computed=computed, skipped=skipped, out_dir=str(out), rank=procs.rank)
        return dict(summarise_run(out, [r["id"] for r in data], methods, config, settings, reference, metrics, plot),
                    computed=computed, skipped=skipped, out_dir=str(out))


#: the summary part of :func:`evaluate`'s result on the processes other than rank 0
NO_SUMMARY = {"rows": [], "summary_md": "", "plot": None, "plots": [], "failed": 0, "failures": [], "chance": None}


def _run_shards(procs: Dist, ex: "Explainer", s: RunSettings, config: dict, out: Path, data: List[dict], start: int,
                methods: Sequence[str], progress: bool) -> Tuple[int, int]:
    """:func:`~aieg_fast.eval.folder.run_shards` over the examples of ``data`` from ``start`` on; (examples computed by
    all processes, examples found done)."""
    def plan(done):
        _check_same_data(ex, s, data, start, done, out)
        return _todo(data, start, methods, done)

    computed, left = run_shards(procs, config, out, plan,
                                lambda todo, done, path, show: _run_examples(ex, s, todo, done, path, show), progress,
                                method_settings(s.specs, s.method_options, CONTROLS))
    return computed, len(data) - start - left
