"""Faithfulness evaluation of token attributions: metrics, the ``evaluate`` run and its reports.

* :mod:`.metrics` — the metrics (hard DIG metrics, Soft-NC/NS, π-Soft, controls) and
  :data:`METRICS`; :mod:`.context` — the per-instance context (:func:`prepare`); :mod:`.soft` —
  Soft-NC/NS and π-Soft; :mod:`.scores` — soft maps, score normalisation, retention and top-k;
  :mod:`.forwards` — the batched last-position forwards; :mod:`.checks` — argument checks;
* :mod:`.runner` — :func:`evaluate` over a classification dataset of :mod:`aieg_fast.datasets`
  (or a user's file) and :func:`evaluate_example`; :mod:`.examples` — its examples;
* :mod:`.generation_runner` — :func:`evaluate_generation`, the same for attributions of
  generated text, one instance per generated step;
* :mod:`.longra` — :func:`evaluate_longra`, LongRA's ground-truth check (relative word in the
  top k, attribution mass on the distractor); :mod:`.longra_report` — its summary and plot;
* :mod:`.records` — ``records.jsonl`` (strict JSON, resume); :mod:`.stats` — bootstrap CIs,
  paired tests, summary rows; :mod:`.report` — ``summary.md`` / ``summary.csv`` / top-k tables
  and the π-Soft plot.
"""
from .checks import check_choices, check_pis, check_positive_int, check_topk
from .forwards import last_logits_embeds, last_logits_ids
from .metrics import (
    DEFAULT_PI_GRID,
    DEFAULT_SOFT_MAPS,
    HARD_METRICS,
    METRIC_SETS,
    METRICS,
    NORMALISATIONS,
    PROB_SPACES,
    SOFT_MAPS,
    TIE_RULES,
    MetricContext,
    comprehensiveness,
    control_attribution,
    evaluate_attribution,
    flat_metrics,
    hard_metrics,
    log_odds,
    map_scores,
    metric_base,
    normalise_scores,
    pi_soft,
    pi_soft_nc,
    pi_soft_ns,
    prepare,
    random_attribution,
    recency_attribution,
    retention_probs,
    soft_metrics,
    soft_nc,
    soft_ns,
    soft_key,
    soft_probs,
    sufficiency,
    top_k_positions,
)
from .context import step_attribution
from .generation_runner import DEFAULT_N_NEW_TOKENS, evaluate_generation, load_prompts
from .records import RECORDS_FILE, append_record, json_safe, read_records
from .longra import LONGRA_KS, LONGRA_TARGET_FNS, evaluate_longra, longra_filter, longra_metrics, longra_spans
from .report import chance_lines, fmt, plot_pi_soft, shown_id, topk_lines, write_csv, write_summary
from .runner import CONFIG_FILE, CONTROLS, DEFAULT_METHODS, EVAL_TARGET_FNS, TOPK_SWEEP, RunSettings, eval_target_fn, evaluate, evaluate_example
from .stats import REFERENCE_METHOD, bootstrap_ci, chance_check, mean_ci, paired_test, summarise, summarise_steps, summarise_topk

__all__ = [
    "CONFIG_FILE", "CONTROLS", "LONGRA_KS", "LONGRA_TARGET_FNS", "chance_check", "chance_lines", "shown_id", "evaluate_longra",
    "longra_filter", "longra_metrics", "longra_spans", "DEFAULT_METHODS", "DEFAULT_N_NEW_TOKENS", "DEFAULT_PI_GRID", "EVAL_TARGET_FNS", "eval_target_fn", "DEFAULT_SOFT_MAPS", "HARD_METRICS", "METRICS",
    "METRIC_SETS", "NORMALISATIONS", "PROB_SPACES", "RECORDS_FILE", "REFERENCE_METHOD", "SOFT_MAPS", "TIE_RULES",
    "TOPK_SWEEP", "MetricContext", "RunSettings", "append_record", "bootstrap_ci", "check_choices", "check_pis",
    "check_positive_int", "check_topk", "comprehensiveness", "evaluate", "evaluate_attribution", "evaluate_example",
    "evaluate_generation", "load_prompts", "step_attribution", "summarise_steps",
    "flat_metrics", "fmt", "hard_metrics", "json_safe", "last_logits_embeds", "last_logits_ids", "log_odds",
    "map_scores", "mean_ci", "metric_base", "normalise_scores", "paired_test", "pi_soft",
    "pi_soft_nc", "pi_soft_ns", "plot_pi_soft", "prepare", "random_attribution", "recency_attribution", "control_attribution", "read_records", "retention_probs",
    "soft_key", "soft_metrics", "soft_nc", "soft_ns", "soft_probs", "sufficiency", "summarise", "summarise_topk", "top_k_positions",
    "topk_lines", "write_csv", "write_summary",
]
