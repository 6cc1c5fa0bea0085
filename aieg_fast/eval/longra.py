"""LongRA, a ground-truth check of attributions (long-range agreement; Vafa et al., *Rationales
for Sequential Predictions*, EMNLP 2021, §6; ReAGent, Zhao & Shan 2024, §4).

Each instance's prompt stops just before a word (the target) whose antecedent, the *relative*
word, sits before a distractor clause that says nothing about it::

    When my flight landed in Greece, I converted my currency and slowly fell asleep. (I had a
    terrifying dream about my grandmother, but that's a story for another time). I was staying
    in the capital,  →  " Athens"

An attribution of the model's " Athens" that follows the model should rank " Greece" high and
put little of its mass on the distractor.

**The filter (per model; the protocol's).** An instance is kept only when (1) the target is one
token after the prompt, (2) the relative word is one token of the prompt (single-token words
only, as Vafa et al. and ReAGent), (3) the model's greedy next token after the prompt is the
target and (4) it still is after the prompt with the distractor clause removed. Other instances
get a record with ``"skipped"`` (the reason) and ``"filter"`` (which test failed), and are
counted in the summary.

**Metrics** (per method and kept instance; :func:`longra_metrics`):

* ``relative_rank``: the relative token's rank among the attributable tokens by score, 1 = top;
  ties count against it (1 + the number of other tokens scoring at least as much), so a flat
  attribution gets the worst rank;
* ``relative_top<k>``: 1 when ``relative_rank ≤ k`` (k in ``ks``, default 1, 3, 5), else 0: the
  share of instances whose relative word is in the top k;
* ``distractor_mass``: Σ |s| over the distractor tokens / Σ |s| over the attributable tokens
  (lower is better; NaN when every score is 0). A flat attribution gets the distractor's share of
  the tokens (``distractor_share``, reported as the ``uniform`` row), a random order a top-k
  rate of k / |attributable|.

:func:`evaluate_longra` runs the methods (and the ``random`` control) on the kept instances and
writes, as :func:`~aieg_fast.eval.evaluate` does, ``records.jsonl`` (resumable), ``config.json``,
``summary.md`` / ``summary.csv`` (mean, 95 % bootstrap CI, paired test against the reference
method) and ``longra_topk.png`` (:mod:`aieg_fast.eval.longra_report`).
"""
from __future__ import annotations

import math
import re
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Union

import torch

from ..core.diagnostics import AttributionWarning
from ..core.validation import as_int, as_ints, check_bools, check_placement
from ..datasets import DATASETS, load_records
from ..models import run_model_settings
from ..runs import check_recorded_config, made_folder, start as start_processes
from .checks import check_method_options, check_n_steps, check_positive_int, check_seed, method_settings
from .longra_report import LONGRA_KS, summarise_longra
from .report import shown_id
from .metrics import CONTROLS, control_attribution
from .records import RECORDS_FILE, append_record, read_records
from .run_checks import check_methods
from .folder import run_shards
from .runner import causal_lm_check, run_explainer
from .stats import REFERENCE_METHOD

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = ["LONGRA_KS", "LONGRA_TARGET_FNS", "longra_spans", "longra_filter", "longra_metrics", "evaluate_longra"]

#: ``target_fn`` choices of :func:`evaluate_longra` (``"auto"`` = ``"logprob"``, the
#: probability of the target the filter checks, over the vocabulary).
LONGRA_TARGET_FNS = ("auto", "logprob", "logit", "prob")


def _word_span(prompt: str, word: str, before: int) -> Optional[tuple]:
    """(start, end) of the first whole-word occurrence of ``word`` in ``prompt[:before]``."""
    m = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", prompt[:before])
    return (m.start(), m.end()) if m else None


def longra_spans(offsets: Sequence, prompt: str, relative: str, distractor: str) -> dict:
    """The token positions of the relative word and of the distractor clause in an encoded prompt.

    Args:
        offsets: the character span ``[start, end]`` (None for special tokens) of each token of
            the prompt, as :meth:`~aieg_fast.explainer.Explainer.encode_with_offsets` gives them.
        prompt: the encoded text. relative: the antecedent word. distractor: the clause.

    Returns:
        ``{"relative": [positions of the tokens overlapping the word's first whole-word
        occurrence before the distractor], "distractor": [positions of the tokens overlapping
        the clause]}``.

    Raises:
        ValueError: the distractor is not in the prompt, or the relative word not before it.
    """
    if distractor not in prompt:
        raise ValueError(f"distractor {distractor!r} is not in the prompt {prompt!r}")
    d0 = prompt.index(distractor)
    span = _word_span(prompt, relative, d0)
    if span is None:
        raise ValueError(f"relative word {relative!r} is not in the prompt before its distractor: {prompt[:d0]!r}")

    def inside(a, b):
        return [k for k, o in enumerate(offsets) if o is not None and o[1] > a and o[0] < b]

    return {"relative": inside(*span), "distractor": inside(d0, d0 + len(distractor))}


def longra_metrics(scores, attributable: Sequence[bool], relative_pos: int, distractor_pos: Sequence[int],
                   ks: Sequence[int] = LONGRA_KS) -> dict:
    """The ground-truth metrics of one attribution (module docstring).

    Args:
        scores: Tensor[L] (or a list) of token scores. attributable: [L] bool.
        relative_pos: the position of the relative word's token (attributable).
        distractor_pos: the positions of the distractor's tokens.
        ks: the k of ``relative_top<k>``.

    Returns:
        ``{"relative_rank", "relative_top<k>" for k in ks, "distractor_mass"}``; when a score
        of an attributable token is not finite (NaN, ±inf: no order and no mass), every metric
        is NaN and ``non_finite`` is True (the summaries leave such values out).

    Raises:
        ValueError: scores not 1-D, ``relative_pos`` not an int, out of range or not
            attributable, a distractor position out of range, lengths that differ, ``ks`` not
            positive ints.
    """
    s, relative_pos = torch.as_tensor(scores, dtype=torch.float64), as_int(relative_pos)  # a NumPy int as an int
    if s.dim() != 1:
        raise ValueError(f"scores must be 1-D (one score per token), got shape {tuple(s.shape)}")
    e = torch.as_tensor(list(attributable), dtype=torch.bool)
    if s.numel() != e.numel():
        raise ValueError(f"scores has {s.numel()} entries, attributable {e.numel()}")
    if isinstance(relative_pos, bool) or not isinstance(relative_pos, int) or not 0 <= relative_pos < s.numel() \
            or not bool(e[relative_pos]):
        raise ValueError(f"relative_pos must be an attributable position in [0, {s.numel()}), got {relative_pos!r}")
    distractor_pos = as_ints(list(distractor_pos))  # NumPy / 0-d tensor positions as ints (torch indexes with them)
    if any(isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < s.numel() for p in distractor_pos):
        raise ValueError(f"distractor_pos must be positions in [0, {s.numel()}), got {list(distractor_pos)}")
    ks = as_int(ks)  # one k, a list of them, or a 1-D NumPy array
    ks = [ks] if isinstance(ks, int) and not isinstance(ks, bool) else as_ints(list(ks.tolist() if getattr(ks, "ndim", 0) == 1 else ks))
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive ints (the k of relative_top<k>), got {list(ks)}")
    if not bool(torch.isfinite(s[e]).all()):
        return {"relative_rank": math.nan, **{f"relative_top{k}": math.nan for k in ks}, "distractor_mass": math.nan,
                "non_finite": True}
    others = e.clone()
    others[relative_pos] = False
    rank = 1 + int((s[others] >= s[relative_pos]).sum())
    mass = torch.where(e, s.abs(), torch.zeros_like(s))  # a fixed position's score, finite or not, is no mass
    total = float(mass.sum())
    d = torch.zeros_like(e)
    d[list(distractor_pos)] = True
    out = {"relative_rank": rank}
    out.update({f"relative_top{k}": float(rank <= k) for k in ks})
    out["distractor_mass"] = float((mass * d).sum()) / total if total > 0 else float("nan")
    return out


def _without(prompt: str, distractor: str) -> str:
    """The prompt with the distractor clause (and the space before it) removed."""
    return prompt.replace(" " + distractor, "", 1) if " " + distractor in prompt else prompt.replace(distractor, "", 1)


def longra_filter(ex: "Explainer", rec: dict) -> dict:
    """Apply the protocol's filter (module docstring) to one LongRA record.

    Returns:
        ``{"target_id", "relative_pos", "distractor_pos", "n_tokens", "attributable"}`` for a
        kept instance, else ``{"filter": which test failed, "skipped": the reason}``
        (``"target_not_one_token"``, ``"relative_not_one_token"``, ``"input"`` (the prompt is
        refused), ``"wrong_with_distractor"``, ``"wrong_without_distractor"``).
    """
    prompt, cont = rec["prompt"], rec.get("reference") or " " + rec["target"]
    try:
        ids, fixed, full, offsets = ex.encode_with_offsets(prompt)
    except ValueError as err:
        return {"filter": "input", "skipped": str(err)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AttributionWarning)  # a target merging with the prompt: tokenised alone
        try:
            tid = ex.resolve_target(cont, context=full)["id"]
        except ValueError as err:
            return {"filter": "target_not_one_token", "skipped": f"target {cont!r}: {err}"}
    pos = longra_spans(offsets, full, rec["relative"], rec["distractor"])
    if len(pos["relative"]) != 1:
        return {"filter": "relative_not_one_token",
                "skipped": f"relative word {rec['relative']!r} is {len(pos['relative'])} tokens of the prompt"}
    for name, text in (("with", prompt), ("without", _without(prompt, rec["distractor"]))):
        top = ex.predict(text, top_k=1)[0]
        if top[1] != tid:
            return {"filter": f"wrong_{name}_distractor",
                    "skipped": f"the model predicts {top[0]!r}, not {cont!r}, {name} the distractor"}
    return {"target_id": tid, "relative_pos": pos["relative"][0], "distractor_pos": pos["distractor"], "n_tokens": len(ids),
            "attributable": [not f for f in fixed]}


def _instance(ex: "Explainer", rec: dict, kept: dict, methods: Sequence[str], specs: dict, settings: dict) -> dict:
    """The record of one kept instance: each method's scores and metrics."""
    out = {"id": rec["id"], "index": rec["index"], "prompt": rec["prompt"], "category": rec.get("category"), "relative": rec["relative"],
           "target": rec["target"], "target_id": kept["target_id"], "relative_pos": kept["relative_pos"],
           "distractor_pos": kept["distractor_pos"], "n_tokens": kept["n_tokens"],
           "n_attributable": int(sum(kept["attributable"])),
           "distractor_share": len(kept["distractor_pos"]) / max(1, sum(kept["attributable"])), "methods": {}}
    base = None
    for m in methods:
        t0 = time.perf_counter()
        if m in CONTROLS:
            if base is None:
                base = ex.attribute(rec["prompt"], method="attention", target=kept["target_id"])
            a = control_attribution(m, base, settings["seed"], rec["id"])
        else:
            name, opts = specs[m]
            try:
                a = ex.attribute(rec["prompt"], method=name, target=kept["target_id"], n_steps=settings["n_steps"],
                                 target_fn=settings["target_fn"], **{**settings["method_options"].get(name, {}), **opts})
            except (ValueError, TypeError) as err:
                raise type(err)(f"methods: {m!r} on {shown_id(rec['id'])}: {err}") from err
            base = base or a
        r = longra_metrics(a.scores, a.attributable, kept["relative_pos"], kept["distractor_pos"], settings["ks"])
        if r.get("non_finite"):
            print(f"note: {m!r} gave scores that are not finite on {shown_id(rec['id'])}; its metrics there are NaN", file=sys.stderr)
        r.update(time_attribution_s=time.perf_counter() - t0, scores=[float(x) for x in a.scores.tolist()],
                 signal_flags=[f["kind"] for f in a.degenerate])
        out["methods"][m] = r
    return out


def _todo(data, done, methods) -> list:
    """The instances of ``data`` not yet (fully) in the records ``done``: neither filtered out
    nor holding every method."""
    return [r for r in data if "skipped" not in done.get(r["id"], {})
            and any(m not in done.get(r["id"], {}).get("methods", {}) for m in methods)]


def _work(ex, todo, done, methods, specs, settings, rec_path: Path, progress: bool) -> int:
    """Filter and evaluate the instances ``todo`` into ``rec_path``; the count computed."""
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="longra", unit="inst")
    computed = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AttributionWarning)  # recorded as signal_flags
            for rec in todo:
                kept = longra_filter(ex, rec)
                if "skipped" in kept:
                    append_record(rec_path, {"id": rec["id"], "index": rec["index"], "methods": {}, **kept})
                else:
                    missing = [m for m in methods if m not in done.get(rec["id"], {}).get("methods", {})]
                    append_record(rec_path, _instance(ex, rec, kept, missing, specs, settings))
                    computed += 1
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return computed


def evaluate_longra(
    model=None,
    dataset: str = "longra",
    methods: Union[str, Sequence[str]] = ("aieg", "integrated_gradients", "random"),
    n: int = 20,
    out_dir: Union[str, Path] = "longra_out",
    seed: int = 0,
    *,
    ks: Sequence[int] = LONGRA_KS,
    n_steps: int = 20,
    target_fn: str = "auto",
    reference: str = REFERENCE_METHOD,
    data_dir=None,
    method_options: Optional[Dict[str, dict]] = None,
    progress: bool = True,
    plot: bool = True,
    device=None,
    dtype=None,
    device_map=None,
    distributed: Optional[bool] = None,
) -> dict:
    """Run LongRA's ground-truth check (module docstring) on the first ``n`` instances.

    Args:
        model: an Explainer, a model id / folder, or None (embedded SmolLM2-135M-Instruct).
        dataset: ``"longra"`` (573 instances) or ``"longra-reagent"`` (ReAGent's 519 rows).
        methods: method specs (a list or comma-separated; ``name:option=value`` variants);
            ``random`` (random scores) and ``recency`` (scores rising with the position) are
            controls.
        n: instances looked at (the first n; the filter then keeps some of them).
        out_dir: output folder (records, summary, plot); reused to resume.
        seed: seed of the random control and the bootstrap.
        ks: the k of "relative word in the top k" (positive ints).
        n_steps: path steps of the path methods.
        target_fn: the F explained: ``"auto"`` / ``"logprob"`` (log p(target) over the
            vocabulary), ``"logit"`` or ``"prob"``.
        reference: the method of the paired tests (default ``integrated_gradients``).
        data_dir: evaluation data folder (default: ``$AIEG_FAST_DATA``, else the shipped copy).
        method_options: per-method options, e.g. ``{"aieg": {"ef_mode": "none"}}``.
        progress, plot: a progress bar; write ``longra_topk.png`` (needs matplotlib).
        device, dtype, device_map: how the model is loaded (:func:`~aieg_fast.load_model`; not
            with an Explainer); under torchrun ``"auto"`` / ``"cuda"`` = ``cuda:<LOCAL_RANK>``.
        distributed: None: data parallel under ``torchrun`` (each process filters and evaluates
            its share of the instances, rank 0 merges and reports, as :func:`~aieg_fast.eval.evaluate`);
            False: one process.

    Returns:
        ``{"rows", "summary_md", "computed", "kept", "filtered", "out_dir", "plot"}``: the
        summary rows (method, metric, n, mean, CI, paired p-value), the instances computed in
        this call (by all processes), those the filter kept and the count per failed test. Under
        torchrun other ranks than 0 return no summary (``kept`` and ``filtered`` None) and ``"rank"``.

    Raises:
        ValueError: bad arguments (named), a dataset that is not a LongRA dataset, a malformed
            data file (names the file and line), settings that differ from those recorded in
            ``out_dir``; all before any record is written. FileNotFoundError: missing data file.
    """
    n, n_steps, seed = as_int(n), as_int(n_steps), as_int(seed)  # a NumPy int as the int it holds
    ks = as_ints(ks.tolist() if getattr(ks, "ndim", 0) == 1 else ks)  # np.arange(1, 4) too
    methods, specs = check_methods(methods, reference, CONTROLS)
    check_positive_int("n", n)
    check_n_steps(n_steps)
    seed = check_seed(seed)
    check_bools(dict(progress=progress, plot=plot))  # "no" is truthy
    ks = sorted({check_positive_int("ks", k) for k in ([ks] if isinstance(ks, int) else ks)})
    if not ks:
        raise ValueError("ks must hold at least one positive int")
    if target_fn not in LONGRA_TARGET_FNS:
        raise ValueError(f"target_fn must be one of {list(LONGRA_TARGET_FNS)} for LongRA, got {target_fn!r}")
    if dataset not in DATASETS or DATASETS[dataset].task != "longra":
        raise ValueError(f"dataset must be one of {[k for k, d in DATASETS.items() if d.task == 'longra']}, got {dataset!r}")
    method_options = check_method_options(method_options, specs, CONTROLS)
    check_placement(device, dtype, device_map)
    data = load_records(dataset, data_dir)
    looked_at, data = len(data), data[:n]
    settings = {"dataset": dataset, "task": "longra", "seed": seed, "n_steps": n_steps,
                "target_fn": "logprob" if target_fn == "auto" else target_fn, "ks": ks, "method_options": method_options}
    check_recorded_config(out_dir, settings, records=RECORDS_FILE, kind="an evaluation")  # before the model loads
    with start_processes(distributed) as procs, made_folder(out_dir, procs=procs) as out:  # refused: no new folder left
        if looked_at < n and procs.main:
            print(f"note: {dataset} has {looked_at} instances; looking at {looked_at}, not n = {n}", file=sys.stderr)
        ex = run_explainer(procs, model, device, dtype, device_map, causal_lm_check("LongRA", specs, method_options))
        config = {**run_model_settings(ex), **settings,
                  "filter": "one-token target and relative word; greedy prediction right with and without the distractor"}
        dtype_now = next(ex.model.parameters()).dtype
        if dtype_now != torch.float32:
            config["dtype"] = str(dtype_now).replace("torch.", "")
        computed, _ = run_shards(procs, config, out, lambda done: _todo(data, done, methods),
                                 lambda todo, done, path, show: _work(ex, todo, done, methods, specs, settings, path, show),
                                 progress, method_settings(specs, method_options, CONTROLS))
        if not procs.main:  # rank 0 merged the parts and reports
            return {"rows": [], "summary_md": "", "plot": None, "kept": None, "filtered": None, "computed": computed,
                    "out_dir": str(out), "rank": procs.rank}
        found = read_records(out / RECORDS_FILE)
        records = [found[r["id"]] for r in data if r["id"] in found]
        res = summarise_longra(out, records, methods, config, reference, plot)
        return dict(res, computed=computed, out_dir=str(out))
