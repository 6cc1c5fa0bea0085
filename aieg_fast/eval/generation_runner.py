"""Faithfulness of attributions of generated text, per generated step (open generation).

:func:`evaluate_generation` takes prompts (a list of dicts, or a JSON-lines file of them), fixes
one continuation per prompt (greedy decoding of ``n_new_tokens`` tokens, ReAGent's setting of
10, or the prompt's reference, teacher-forced), attributes it with every method through
:meth:`Explainer.attribute_generation` (one shared forward over the whole sequence where the
method allows; :mod:`aieg_fast.generation`) and scores every generated step with the metrics of
:mod:`aieg_fast.eval.metrics`:

* **Instance = one step.** Step t explains the generated token y_t from its context c_t =
  prompt ⊕ y_<t (:func:`~aieg_fast.eval.context.step_attribution`). The metrics perturb c_t,
  read the next-token distribution at its last position and score p(y_t | ·) over the whole
  vocabulary (``prob_space="vocab"``): log-odds, comprehensiveness and sufficiency at top-k,
  Soft-NC / Soft-NS and π-Soft-NC / NS (Zhao & Aletras 2023; specs/grad_ellm.md §5.2-§5.3),
  with the uniform control and, when listed in the methods, the ``random`` and ``recency``
  controls (:func:`~aieg_fast.eval.metrics.control_attribution`; on running text ``recency``,
  which ranks the tokens just before y_t highest, is a strong content-free baseline of the hard
  metrics: benchmarks/RESULTS_faithfulness.md §5.3). The soft draws are seeded by (seed, example id,
  step), so every method sees the same ones at a step (common random numbers).
* **Which positions are perturbed at step t** (``interpolate_generated``): by default (True)
  the prompt's text tokens *and* the generated prefix y_<t, the whole context, as ReAGent
  (Zhao & Shan 2024, arXiv 2402.00794; its ``benchmark.py`` scores step t on
  ``generated_ids[:target_pos]``) perturbs it; which positions Grad-ELLM perturbs is not known
  (specs/grad_ellm.md §6, question 4). From the second step on, the tokens just before y_t are
  generated ones; a metric that holds them fixed measures only the prompt's share of the
  prediction, and its empty input x_∅ (prompt zeroed, prefix kept) can leave p(y_t) as high as
  the full input does (a degenerate step). The methods then attribute the prefix too
  (``interpolate_generated=True`` of :meth:`~aieg_fast.explainer.Explainer.attribute_generation`),
  so the metrics perturb exactly the positions each method ranked. With False, the prefix is
  held fixed in the attributions and in the metrics, and only the prompt is scored and
  perturbed (what ``attribute_generation`` explains by default). Template and special tokens are
  never perturbed. Deleting positions (comprehensiveness, sufficiency) may remove the last
  context token; the next-token distribution is then read at the last position left.
* **Aggregation.** Each metric is averaged over the steps of an example (the soft ones over its
  non-degenerate steps), then over the examples (specs/grad_ellm.md §5.3 item 6); the bootstrap
  CIs and the paired tests against ``reference`` resample examples, whose steps are not
  independent. The per-step values stay in the records and ``summary_steps.csv``.

Output folder (as :func:`~aieg_fast.eval.runner.evaluate`): ``config.json``; ``records.jsonl``
with one line per (example, method), appended as each is done, so a rerun computes only the
missing (example id, method) pairs (also under torchrun); ``summary.md`` / ``summary.csv``
(means, 95 % bootstrap CIs, paired tests), ``summary_steps.csv`` (per step) and the π-Soft plots.

Record of an example (the lines of one id merged, :mod:`aieg_fast.eval.records`): ``id``,
``index``, ``prompt``, ``reference``, ``teacher_forced``, ``generated_ids``,
``generated_text``, ``n_prompt_tokens``, ``n_generated``, ``steps`` (per step t: ``step``,
``target_id``, ``target``, ``p``, ``p0``, ``degenerate``, ``n_attributable``, ``tie_seed``),
``degenerate`` (every step is), ``methods`` ({spec: the metrics averaged over the steps, and
``steps``: each step's metrics, ``n_degenerate_steps``, ``scores`` [T][L_p + T] with null where
not attributed, ``signal_flags`` (these two not for the ``random`` and ``recency`` controls, whose
scores :func:`~aieg_fast.eval.metrics.control_attribution` draws again from the seed and the
step's id ``"<id>#<t>"``), ``time_attribution_s``, ``time_metrics_s``}) and
``controls`` ({"uniform": the same for the uniform π-Soft control}), and ``notes`` (the cautions
about the continuation, also said on stderr) when there are any.
"""
from __future__ import annotations

import math
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

from ..core.context import progress_bar
from ..core.diagnostics import AttributionWarning
from ..core.path import check_chunk_settings
from ..core.validation import as_int, check_bools, check_placement, check_positive_int
from ..datasets import DATASETS, is_dataset_file, load_records, template_fields, user_dataset
from ..datasets.user import TEMPLATE_FIELD
from ..generation import continuation_ids
from ..result import Attribution
from ..runs import check_recorded_config, made_folder, start as start_processes
from .checks import check_method_options, method_settings
from .context import prepare, step_attribution
from .metrics import DEFAULT_PI_GRID, DEFAULT_SOFT_MAPS, control_attribution, flat_metrics, pi_soft, score_attribution
from .records import RECORDS_FILE, append_record
from .run_checks import check_methods, check_run_settings
from .folder import run_shards
from .report import shown_id, summarise_run
from .runner import CONTROLS, DEFAULT_METHODS, NO_SUMMARY, NONE_MEANS, RunSettings, causal_lm_check, eval_target_fn, run_config, run_explainer, settings_config
from .stats import REFERENCE_METHOD

if TYPE_CHECKING:
    from ..explainer import Explainer

__all__ = ["DEFAULT_N_NEW_TOKENS", "GENERATION_TARGET_FNS", "GenerationSettings", "evaluate_generation",
           "evaluate_generation_example", "check_prompt_records", "load_prompts", "mean_over_steps", "step_views"]

#: tokens generated per prompt by default: ReAGent's ``--max_new_tokens`` (Zhao & Shan 2024).
DEFAULT_N_NEW_TOKENS = 10
#: ``evaluate_generation``'s ``target_fn`` choices (``"auto"``: log p(y_t), what the metrics score).
GENERATION_TARGET_FNS = ("auto", "logprob", "logit", "prob")


@dataclass(frozen=True)
class GenerationSettings(RunSettings):
    """:class:`~aieg_fast.eval.runner.RunSettings` of a generation run (no labels; p over the
    vocabulary) plus its own: ``n_new_tokens`` (None: the whole reference), ``teacher_forced``
    and ``interpolate_generated`` (see :func:`evaluate_generation`)."""

    n_new_tokens: Optional[int] = DEFAULT_N_NEW_TOKENS
    teacher_forced: bool = False
    interpolate_generated: bool = True


# ============================================================================================
# prompts
# ============================================================================================
def load_prompts(records, data_dir=None, text_field: str = "text", target_field: Optional[str] = None,
                 id_field: Optional[str] = None, limit: Optional[int] = None) -> Tuple[str, List[dict]]:
    """(name, rows) of the prompts to evaluate: a generation dataset of the registry
    (``wikibio``, ``wikitext``, ``tellmewhy``, ``tellmewhy-reagent``;
    :func:`~aieg_fast.datasets.load_records`, from ``data_dir``), a user's file or rows object
    (:func:`~aieg_fast.datasets.user_dataset` with ``text_field`` as the prompt and
    ``target_field`` as the reference), or a list of dicts (``"records"``, as given; with
    ``text_field``, ``target_field`` or ``id_field`` given, read as a user's rows object); a
    user's data is read no further than ``limit`` rows (None: all).

    Raises:
        ValueError: a dataset of another task (names the runner to use), an unknown name, a
            malformed file (names the file, line and field). FileNotFoundError: a missing file
            (for TellMeWhy, why it is not shipped).
    """
    limit = as_int(limit)  # a NumPy or one-element tensor integer as an int
    if isinstance(records, str) and records in DATASETS:
        task = DATASETS[records].task
        if task != "generation":
            runner = {"longra": "evaluate_longra"}.get(task, "evaluate")
            raise ValueError(f"records: dataset {records!r} is a {task} dataset; evaluate_generation scores generation "
                             f"datasets ({', '.join(k for k, d in DATASETS.items() if d.task == 'generation')}): use "
                             f"aieg_fast.eval.{runner}")
        return records, load_records(records, data_dir)
    if isinstance(records, (list, tuple)) and text_field == "text" and target_field is None and id_field is None:
        return "records", list(records)  # given a field, a list is read as rows of a user dataset, below
    if isinstance(records, (str, Path)) and not is_dataset_file(records):
        raise ValueError(f"records must be a generation dataset ({', '.join(k for k, d in DATASETS.items() if d.task == 'generation')}), "
                         f"a .jsonl / .json / .csv / .tsv file or a list of dicts, got {str(records)!r}")
    spec, rows = user_dataset(records, text_field=text_field, target_field=target_field, id_field=id_field, limit=limit)
    return spec.name, rows


def check_prompt_records(records, teacher_forced: bool, dataset: str) -> List[dict]:
    """The prompts as ``{"id", "index", "prompt", "reference"}`` dicts, checked before any work.

    ``id`` is the row's ``"id"`` (as a string) or ``"<dataset>:<index>"``; ``reference`` its
    ``"reference"``, else the first of its ``"references"``, else None.

    Raises:
        ValueError: ``records`` empty or not a sequence of dicts; a row without a non-empty
            string ``prompt``; repeated ids; with ``teacher_forced``, a row without a reference
            (each names the row).
    """
    if isinstance(records, (str, bytes, dict)) or not hasattr(records, "__iter__"):
        raise ValueError(f"records must be a list of dicts with a 'prompt', got {type(records).__name__}")
    out, seen = [], {}
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            raise ValueError(f"records[{i}] must be a dict with a 'prompt', got {type(r).__name__}")
        prompt = r.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"records[{i}] needs a non-empty string 'prompt', got {prompt!r}")
        eid = str(r["id"]) if r.get("id") is not None else f"{dataset}:{i}"
        if eid in seen:
            raise ValueError(f"dataset {dataset!r}: records[{i}] repeats the id {eid!r} of records[{seen[eid]}] (rows counted "
                             "from 0; a file's ids come from id_field / --id-field); ids must be unique")
        seen[eid] = i
        refs = r.get("references") or []
        ref = r.get("reference") if r.get("reference") is not None else (refs[0] if refs else None)
        if ref is not None and (not isinstance(ref, str) or not ref.strip()):
            raise ValueError(f"records[{i}] ({shown_id(eid)}): the reference must be a non-empty string, got {ref!r}")
        if teacher_forced and ref is None:
            raise ValueError(f"teacher_forced needs a reference for every prompt; records[{i}] ({shown_id(eid)}) has none (a file's "
                             "reference column is named by target_field / --target-field)")
        out.append({"id": eid, "index": i, "prompt": prompt, "reference": ref})
    if not out:
        raise ValueError("records holds no prompt")
    return out


# ============================================================================================
# one example
# ============================================================================================
def step_views(ex: "Explainer", prompt: str, gen_ids: List[int], template: Optional[str] = None,
               interpolate_generated: bool = True) -> List[Attribution]:
    """Attribution-free views of the T steps of a continuation (zero scores): step t's context
    ids (prompt ⊕ y_<t), the positions the metrics perturb (as :func:`step_attribution` gives
    them for every method) and its target y_t. Score a control or recorded scores on them with
    ``dataclasses.replace(view, scores=...)``.

    Args:
        ex: the explainer. prompt: the prompt text. gen_ids: the T generated (or forced) token ids.
        template, interpolate_generated: the run's (:func:`evaluate_generation`).

    Returns:
        T :class:`~aieg_fast.result.Attribution` objects, ``scores`` zeros of length L_p + t.
    """
    prompt_ids, prompt_fixed = ex.encode(prompt, template)
    fixed = prompt_fixed + [(not interpolate_generated) or (i in ex.special_ids) for i in gen_ids]
    ids = prompt_ids + gen_ids
    tokens = ex.token_texts(ids)
    views = []
    for t, y in enumerate(gen_ids):
        n = len(prompt_ids) + t
        views.append(Attribution(tokens=tokens[:n], token_ids=ids[:n], scores=torch.zeros(n), method="none",
                                 target={"kind": "token", "id": int(y), "text": tokens[n], "step": t},
                                 attributable=[not f for f in fixed[:n]]))
    return views


def mean_over_steps(steps: Sequence[dict]) -> dict:
    """The per-step metric dicts of one method and example averaged over the steps.

    Numbers: the mean of the finite values (NaN when none: every step degenerate); curves
    (lists): the point-wise mean of the curves without NaN; ``topk_sweep``: the same per k;
    ``degenerate``: every step is, with ``n_degenerate_steps`` their count; ``n_non_finite_steps``:
    the steps whose scores were not finite (NaN metrics), when any. ``step`` is dropped.
    """
    def mean(vals):
        vals = [float(v) for v in vals if v is not None and math.isfinite(float(v))]
        return sum(vals) / len(vals) if vals else float("nan")

    out: dict = {}
    n_bad = sum(bool(r.get("non_finite")) for r in steps)
    if n_bad:
        out["n_non_finite_steps"] = n_bad
    for key, first in steps[0].items():
        vals = [r.get(key) for r in steps]
        if key in ("step", "non_finite"):
            continue
        if key == "degenerate":
            out["degenerate"], out["n_degenerate_steps"] = all(vals), sum(bool(v) for v in vals)
        elif key == "topk_sweep":
            out[key] = {k: {m: mean([v[k][m] for v in vals]) for m in first[k]} for k in first}
        elif isinstance(first, list):
            ok = [v for v in vals if all(x is not None and math.isfinite(x) for x in v)]
            out[key] = [mean(col) for col in zip(*ok)] if ok else [float("nan")] * len(first)
        else:
            out[key] = mean(vals)
    return out


def _method_entry(ex: "Explainer", s: GenerationSettings, eid: str, prompt: str, gen_ids: List[int], m: str, views, ctxs) -> dict:
    """One method's record entry: attributed once for all steps, each step scored, averaged."""
    t0 = time.perf_counter()
    if m in CONTROLS:
        steps = [control_attribution(m, v, s.seed, f"{eid}#{t}") for t, v in enumerate(views)]
        gen = None
    else:
        name, opts = s.specs[m]
        try:
            gen = ex.attribute_generation(prompt, generated_text=list(gen_ids), method=name, n_steps=s.n_steps,
                                          internal_batch_size=s.internal_batch_size, template=s.template,
                                          interpolate_generated=s.interpolate_generated, **s.attribute_kwargs(),
                                          **{**s.method_options.get(name, {}), **opts})
        except (ValueError, TypeError) as err:
            raise type(err)(f"methods: {m!r} on {shown_id(eid)}: {err}") from err
        steps = [step_attribution(gen, t) for t in range(len(gen_ids))]
    t_attr = time.perf_counter() - t0
    t0 = time.perf_counter()
    per_step = [dict(score_attribution(ex, s, a, ctx), step=t) for t, (a, ctx) in enumerate(zip(steps, ctxs))]
    bad = [r["step"] for r in per_step if r.get("non_finite")]
    if bad:
        print(f"note: {m!r} gave scores that are not finite on {shown_id(eid)} at step(s) {bad}; its metrics there are NaN", file=sys.stderr)
    entry = dict(mean_over_steps(per_step), steps=per_step, time_attribution_s=t_attr, time_metrics_s=time.perf_counter() - t0)
    if gen is not None:
        entry["scores"] = gen.scores.tolist()
        entry["signal_flags"] = [f["kind"] for f in gen.degenerate]
    return entry


def _continuation(ex: "Explainer", s: GenerationSettings, eid, prompt, forced: Optional[str]) -> Tuple[List[int], List[str]]:
    """The ids one prompt explains (:func:`~aieg_fast.generation.continuation_ids`: greedy, or
    the first ``s.n_new_tokens`` of the reference ``forced``; only those must fit the model) and
    the cautions about a reference, each also said on stderr: the tokeniser merging it with the
    prompt or reading special tokens in it, and a reference that starts a word right after the
    prompt's last character (WikiBio's "Biography:" + "leonard ...": read as one glued word).
    Greedy decoding has none: its cautions (a model in training mode) stay silenced with the
    per-step ones of the run."""
    if forced is None:
        return continuation_ids(ex, prompt, s.n_new_tokens or 1, template=s.template), []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AttributionWarning)
        ids = continuation_ids(ex, prompt, s.n_new_tokens, generated_text=forced, template=s.template)
    notes = []
    for w in caught:
        if issubclass(w.category, AttributionWarning):
            notes.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    end = (s.template or "{text}").rsplit("{text}", 1)[1] or prompt
    if end and not end[-1].isspace() and forced[0].isalnum():
        notes.append(f"the reference follows the prompt with no space ({end[-12:]!r} + {forced[:12]!r}), so the first word "
                     "is read glued to the prompt; start the references with a space where they begin a new word")
    for note in notes:
        print(f"note: {shown_id(eid)}: {note}", file=sys.stderr)
    return ids, notes


def evaluate_generation_example(ex: "Explainer", s: GenerationSettings, row: dict, methods: Sequence[str],
                                done: Optional[dict] = None, need_controls: bool = True) -> Iterator[dict]:
    """The record lines of one prompt, each computed when the iterator reaches it.

    The continuation is the one in ``done`` (a resumed example), else greedy decoding of
    ``s.n_new_tokens`` tokens or the reference's first ``s.n_new_tokens`` tokens
    (:func:`~aieg_fast.generation.continuation_ids`); it and the reference forwards of every
    step are computed by this call, before it returns. The lines: without ``done``, first the
    example and its steps; then one per method of ``methods``; then the ``uniform`` control
    (``need_controls``, not with hard metrics only). Layout: the module documentation.

    Args:
        ex: the explainer. s: the run's settings. row: ``{"id", "index", "prompt",
            "reference"}`` (:func:`check_prompt_records`). methods: the method specs to compute.
        done: the example's record so far (with its ``generated_ids``), or None.

    Raises:
        ValueError: by this call, an input that cannot be explained (more tokens than the
            model's positions, no attributable token); while iterating, a method that refuses
            its options (naming the method and the example).
    """
    eid, prompt = row["id"], row["prompt"]
    notes: List[str] = []
    if done is None:
        gen_ids, notes = _continuation(ex, s, eid, prompt, row["reference"] if s.teacher_forced else None)
    else:
        gen_ids = [int(i) for i in done["generated_ids"]]
    views = step_views(ex, prompt, gen_ids, s.template, s.interpolate_generated)
    ctxs = [prepare(ex, v, prob_space="vocab", seed=s.seed, instance_id=f"{eid}#{t}") for t, v in enumerate(views)]
    head = {"id": eid, "index": row["index"]}
    first = None
    if done is None:
        first = dict(head, prompt=prompt, reference=row["reference"], teacher_forced=s.teacher_forced, generated_ids=gen_ids,
                     generated_text=ex.tokenizer.decode(gen_ids), n_prompt_tokens=len(views[0].token_ids), n_generated=len(gen_ids),
                     steps=[{"step": t, "target_id": v.target["id"], "target": v.target["text"], "p": c.p, "p0": c.p0,
                             "degenerate": c.degenerate, "n_attributable": int(sum(v.attributable)), "tie_seed": c.tie_seed}
                            for t, (v, c) in enumerate(zip(views, ctxs))],
                     degenerate=all(c.degenerate for c in ctxs), methods={}, controls={})
        if notes:
            first["notes"] = notes

    def lines():
        if first is not None:
            yield first
        for m in methods:
            yield dict(head, methods={m: _method_entry(ex, s, eid, prompt, gen_ids, m, views, ctxs)})
        if need_controls and not s.hard_only:
            per_step = [dict(flat_metrics(None, None, pi_soft(ex, v, pis=s.pis, n_samples=s.n_samples, uniform=True, ctx=c)), step=t)
                        for t, (v, c) in enumerate(zip(views, ctxs))]
            yield dict(head, controls={"uniform": dict(mean_over_steps(per_step), steps=per_step)})

    return lines()


# ============================================================================================
# the run
# ============================================================================================
def _todo(rows: Sequence[dict], methods: Sequence[str], done: Dict[str, dict], hard_only: bool,
          teacher_forced: bool = False) -> list:
    """(row, missing methods, controls needed) of the prompts with work left.

    Raises:
        ValueError: a record of the folder holds another prompt under the same id, or (teacher
            forced) another reference, the text its steps explain, or has method lines without
            its first line (the continuation they explain).
    """
    todo = []
    for row in rows:
        d = done.get(row["id"])
        if d is not None and "skipped" not in d and "generated_ids" not in d:
            raise ValueError(f"out_dir holds method lines for id {row['id']!r} without its first line (the prompt and the "
                             "generated continuation the methods explain; records.jsonl edited or merged by hand?); "
                             "remove that id's lines or use another out_dir")
        if d is not None and "skipped" not in d and d.get("prompt") != row["prompt"]:
            raise ValueError(f"out_dir holds a record for id {row['id']!r} with another prompt ({d.get('prompt')!r:.60}); "
                             "use another out_dir for other prompts")
        if teacher_forced and d is not None and "skipped" not in d and d.get("reference") != row["reference"]:
            raise ValueError(f"out_dir holds a record for id {row['id']!r} with another reference ({d.get('reference')!r:.60}) "
                             f"than the data gives it now ({row['reference']!r:.60}); teacher forcing explains the reference: "
                             "use another out_dir")
        if d is not None and "skipped" in d:
            continue
        missing = [m for m in methods if m not in (d or {}).get("methods", {})]
        controls = not hard_only and "uniform" not in (d or {}).get("controls", {})
        if missing or controls:
            todo.append((row, missing, controls))
    return todo


def _work(ex: "Explainer", s: GenerationSettings, todo: list, done: Dict[str, dict], path: Path, progress: bool) -> int:
    """Compute the prompts of ``todo``, appending each record line as it is done; the count. A
    prompt whose input is refused gets a record with ``"skipped"`` (the reason); the run goes on."""
    computed = 0
    with progress_bar(progress, "evaluate (generation)", total=len(todo), unit="ex", leave=True) as bar, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", AttributionWarning)  # recorded as signal_flags, counted in the summary
        for row, missing, controls in todo:
            d = done.get(row["id"])
            try:
                lines = evaluate_generation_example(ex, s, row, missing, d if d and "generated_ids" in d else None, controls)
            except ValueError as err:  # the input itself is refused: recorded, the run goes on
                append_record(path, {"id": row["id"], "index": row["index"], "prompt": row["prompt"], "skipped": str(err),
                                     "methods": {}, "controls": {}})
            else:
                for line in lines:
                    append_record(path, line)
                computed += 1
            if bar is not None:
                bar.update(1)
    return computed


def _check_generation_args(n_new_tokens, teacher_forced, target_fn, template, interpolate_generated=True) -> str:
    """Check the generation settings (ValueError naming the argument; the two flags must be
    bools: "no" is truthy); the F explained."""
    check_bools(dict(teacher_forced=teacher_forced, interpolate_generated=interpolate_generated))
    if n_new_tokens is None and not teacher_forced:
        raise ValueError("n_new_tokens must be a positive int for greedy decoding (None = the whole reference, with teacher_forced)")
    if n_new_tokens is not None and (isinstance(n_new_tokens, bool) or not isinstance(n_new_tokens, int) or n_new_tokens < 1):
        raise ValueError(f"n_new_tokens must be a positive int or None, got {n_new_tokens!r}")
    if target_fn not in GENERATION_TARGET_FNS:
        raise ValueError(f"target_fn must be one of {list(GENERATION_TARGET_FNS)} for generated text (no labels), got {target_fn!r}")
    if template is not None and (not isinstance(template, str) or TEMPLATE_FIELD.findall(template).count("text") != 1):
        raise ValueError(f"template must contain '{{text}}' exactly once, got {template!r}")
    others = [f for f in template_fields(template) if f != "text"] if template is not None else []
    if others:  # a prompt is one text: other fields would reach the model as literal braces
        raise ValueError(f"template of a generation run takes {{text}} (the prompt) only, got the field(s) {others} in "
                         f"{template!r}: put that text in the prompt column (or give label_field / --label-field for "
                         "a classification dataset, whose templates take several fields)")
    return eval_target_fn(target_fn, "vocab")


def evaluate_generation(
    model=None,
    records: Union[Sequence[dict], str, Path] = (),
    *,
    methods: Union[str, Sequence[str]] = DEFAULT_METHODS,
    n_new_tokens: Optional[int] = DEFAULT_N_NEW_TOKENS,
    teacher_forced: bool = False,
    interpolate_generated: bool = True,
    metrics: str = "all",
    out_dir: Union[str, Path] = "generation_out",
    dataset: Optional[str] = None,
    data_dir=None,
    text_field: str = "text",
    target_field: Optional[str] = None,
    id_field: Optional[str] = None,
    n: Optional[int] = None,
    seed: int = 0,
    topk: float = 0.20,
    topk_sweep: Optional[Sequence[float]] = None,
    reference: str = REFERENCE_METHOD,
    n_steps: int = 20,
    n_samples: int = 4,
    pis: Sequence[float] = DEFAULT_PI_GRID,
    normalise: str = "minmax",
    soft_maps: Union[str, Sequence[str]] = DEFAULT_SOFT_MAPS,
    ties: str = "random",
    target_fn: str = "auto",
    template: Optional[str] = None,
    internal_batch_size: Optional[int] = None,
    method_options: Optional[Dict[str, dict]] = None,
    progress: bool = True,
    plot: bool = True,
    device=None,
    dtype=None,
    device_map=None,
    distributed: Optional[bool] = None,
) -> dict:
    """Evaluate attribution methods on generated text, one instance per generated step.

    What is explained, perturbed and averaged: the module documentation (ReAGent, Zhao & Shan
    2024; Grad-ELLM's π-Soft, specs/grad_ellm.md §5.3). Arguments shared with
    :func:`~aieg_fast.eval.runner.evaluate` mean the same (``methods``, ``metrics``, ``seed``,
    ``topk``, ``topk_sweep``, ``reference``, ``n_steps``, ``n_samples``, ``pis``, ``normalise``,
    ``soft_maps``, ``ties``, ``internal_batch_size``, ``method_options``, ``progress``,
    ``plot``, ``device``, ``dtype``, ``device_map``, ``distributed``).

    Args:
        model: an :class:`~aieg_fast.explainer.Explainer` (a causal LM), a model id / folder, or
            None (embedded SmolLM2-135M-Instruct).
        records: the prompts: a generation dataset of the registry (``"wikibio"``, ``"wikitext"``,
            ``"tellmewhy"``, ``"tellmewhy-reagent"``; TellMeWhy from ``data_dir``), a file
            (``.jsonl``, ``.json``, ``.csv``, ``.tsv``) or rows object read with ``text_field``
            (the prompt), ``target_field`` (the reference) and ``id_field``
            (:func:`~aieg_fast.datasets.user_dataset`), or a list of dicts with ``"prompt"`` and
            optionally ``"id"``, ``"reference"``, ``"references"`` (:func:`load_prompts`; given
            one of the field arguments, a list is read with them as a rows object).
        n_new_tokens: tokens per continuation (default 10, ReAGent's); with ``teacher_forced``
            the reference is cut to this many tokens (None: all of it). Greedy decoding stops
            early at EOS (which is kept as the last step).
        teacher_forced: explain each prompt's reference instead of the model's greedy output.
        interpolate_generated: perturb (and attribute) the generated prefix y_<t at step t as
            well as the prompt (default True, ReAGent's whole context); False: the prompt only.
        out_dir: output folder, reused to resume (records of (example id, method) pairs done
            are kept; a record with the same id but another prompt is refused).
        dataset: the name recorded in ``config.json`` and the summary's title (default: the
            dataset's or file's name, or ``"records"``); ids of rows without one are
            ``"<dataset>:<index>"``.
        n: evaluate the first n prompts (None: all).
        target_fn: the F every method explains at each step: ``"auto"`` (default) = ``"logprob"``,
            log p(y_t) over the vocabulary (what the metrics score), or ``"logit"`` / ``"prob"``.
        template: a prompt template with ``{text}`` (its tokens are never perturbed).

    Returns:
        As :func:`~aieg_fast.eval.runner.evaluate`: ``{"rows", "summary_md", "computed",
        "skipped", "out_dir", "plot", "plots", "failed", "failures", "chance"}`` (``rows``: one
        per method and metric, over examples; ``failed``: prompts refused, e.g. too long for the
        model; ``chance``: None, there are no labels).

    Raises:
        ValueError: bad arguments (each names the argument), prompts without a ``prompt`` (or
            a reference with ``teacher_forced``), repeated ids, a model that is not a causal LM,
            settings that differ from those recorded in ``out_dir``; all before any record is
            written. FileNotFoundError: a missing data file.
    """
    n, n_new_tokens, seed, n_steps, n_samples, internal_batch_size = map(  # a NumPy int as the int it holds
        as_int, (n, n_new_tokens, seed, n_steps, n_samples, internal_batch_size))
    methods, specs = check_methods(methods, reference, CONTROLS)
    check_positive_int("n", n, optional=True)  # before it limits the reading
    name, raw = load_prompts(records, data_dir, text_field, target_field, id_field, limit=n)
    dataset = dataset or name
    rows = check_prompt_records(raw, teacher_forced, dataset)
    n = len(rows) if n is None else n
    topk_sweep, pis, soft_maps = check_run_settings(n, n_steps, None, 0, seed, topk, metrics, topk_sweep, n_samples, pis, "vocab",
                                                    normalise, soft_maps, ties, dict(progress=progress, plot=plot))
    rows = rows[:n]
    target_fn = _check_generation_args(n_new_tokens, teacher_forced, target_fn, template, interpolate_generated)
    method_options = check_method_options(method_options, specs, CONTROLS)
    check_placement(device, dtype, device_map)
    check_chunk_settings(internal_batch_size, None)
    kw = dict(max_tokens=None, seed=seed, topk=topk, n_steps=n_steps, n_samples=n_samples, pis=pis, prob_space="vocab",
              normalise=normalise, method_options=method_options, soft_maps=tuple(soft_maps), ties=ties, target_fn=target_fn,
              topk_sweep=topk_sweep)  # p over the vocabulary, no labels
    gen = dict(n_new_tokens=n_new_tokens, teacher_forced=bool(teacher_forced), interpolate_generated=bool(interpolate_generated))
    check_recorded_config(out_dir, dict(settings_config(dataset, metrics, **kw), template=template, labels=[], task="generation",
                                        **gen), records=RECORDS_FILE, kind="an evaluation", hints=NONE_MEANS)  # before the model loads
    with start_processes(distributed) as procs, made_folder(out_dir, procs=procs) as out:  # refused: no new folder left
        ex = run_explainer(procs, model, device, dtype, device_map, causal_lm_check("evaluate_generation", specs, method_options))
        s = GenerationSettings(specs=specs, template=template, labels=[], label_ids=[], internal_batch_size=internal_batch_size,
                               hard_only=metrics == "hard", **kw, **gen)
        config = dict(run_config(ex, dataset, s, metrics), task="generation", **gen)
        computed, left = run_shards(procs, config, out, lambda done: _todo(rows, methods, done, s.hard_only, s.teacher_forced),
                                    lambda todo, done, path, show: _work(ex, s, todo, done, path, show), progress,
                                    method_settings(specs, method_options, CONTROLS))
        if not procs.main:
            return dict(NO_SUMMARY, computed=computed, skipped=len(rows) - left, out_dir=str(out), rank=procs.rank)
        return dict(summarise_run(out, [r["id"] for r in rows], methods, config, s, reference, metrics, plot),
                    computed=computed, skipped=len(rows) - left, out_dir=str(out))
