"""The golden cases: what is frozen and how one case is run (shared by generate.py and the test)."""
from __future__ import annotations

import math

import torch

TEXTS = ["the movie is good and the actors are great", "the film was bad"]
TEMPLATE = "Review: {text} Answer:"

# method -> option sets (each a dict of method options)
OPTION_SETS = {
    "integrated_gradients": [{}, {"integration": "gausslegendre"}, {"token_reduction": "l2"}],
    "integrated_decision_gradients": [{}, {"adaptive": False}],
    "aieg": [
        {},
        {"adaptive": False, "ef_mode": "none", "attn_layers": "none", "posnorm": "none"},
        {"attn_layers": "rollout"},
        {"attn_source": "path"},
        {"ef_mode": "autograd"},
        {"stream_ef": False, "ef_sign": "minmax"},
        {"posnorm_stage": "final", "final_norm": "l2", "attn_exclude_first": True},
        {"preset": "v3"},
        {"preset": "v2"},
    ],
    "saliency": [{}, {"token_reduction": "sum_abs"}],
    "input_x_gradient": [{}, {"token_reduction": "l2"}],
    "attention": [{}, {"attn_layers": "all"}, {"attn_layers": "rollout"}, {"attn_heads": "max"}],
    "scaled_attention": [{}, {"reduce": "mean_of_products", "attn_layers": "all"}],
    "grad_ellm": [{}, {"preset": "corrected"}, {"n_layers": "all", "relu": "after_sum"}, {"preset": "paper_v1"}],
    "occlusion": [{}, {"measure": "kl"}, {"granularity": "word"}, {"granularity": "span", "span_width": 2}],
    "heta": [{"n_probes": 2}, {"n_probes": 2, "preset": "official"}, {"components": "gate"}, {"n_probes": 2, "curvature_layers": 1, "window": 3}],
}
MODELS = ("gpt2", "llama", "clf")
#: AIEG's cases name their preset, so each stays the reading it froze when the default changes
AIEG_PIN = {"preset": "v1"}


def _pinned(method: str, kw: dict) -> dict:
    return {**AIEG_PIN, **kw} if method == "aieg" else kw


def _cases():
    cases = {}
    for model in MODELS:
        for method, sets in OPTION_SETS.items():
            for k, opts in enumerate(sets):
                kw = dict(n_steps=8, internal_batch_size=5, **opts)
                cases[f"{model}/{method}/{k}"] = (model, method, _pinned(method, kw))
        # call-level settings, on two methods
        for method in ("integrated_gradients", "aieg"):
            cases[f"{model}/{method}/left_template"] = (model, method, _pinned(method, dict(n_steps=8, internal_batch_size=3, padding_side="left", template=TEMPLATE)))
            cases[f"{model}/{method}/logprob"] = (model, method, _pinned(method, dict(n_steps=8, target_fn="logprob")))
    return cases


def _gen_cases():
    cases = {}
    for model in ("gpt2", "llama"):
        for method in OPTION_SETS:
            cases[f"{model}/{method}"] = (model, method, _pinned(method, dict(n_steps=6, internal_batch_size=4)))
        cases[f"{model}/integrated_gradients/interp"] = (model, "integrated_gradients", dict(n_steps=6, interpolate_generated=True))
        cases[f"{model}/aieg/unshared"] = (model, "aieg", _pinned("aieg", dict(n_steps=6, shared=False)))
    return cases


CASES = _cases()
GEN_CASES = _gen_cases()


def build_models():
    import aieg_fast
    from builders import make_tiny_gpt2, make_tiny_llama

    g, gt = make_tiny_gpt2()
    l, lt = make_tiny_llama()
    c, ct = make_tiny_gpt2(classifier=True)
    return {"gpt2": aieg_fast.load_model(g, gt), "llama": aieg_fast.load_model(l, lt), "clf": aieg_fast.load_model(c, ct)}


def _plain(x):
    if torch.is_tensor(x):
        return _plain(x.tolist())
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _record(r):
    return {
        "scores": _plain(r.scores),
        "target": _plain(r.target),
        "options": _plain(r.options),
        "info": _plain(r.info),
        "backend": _plain(r.backend),
        "tokens": r.tokens,
        "attributable": r.attributable,
    }


def run_case(ex, method, kwargs):
    try:
        res = ex.attribute(TEXTS, method=method, **kwargs)
    except (ValueError, TypeError, RuntimeError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return [_record(r) for r in res]


def run_gen_case(ex, method, kwargs):
    try:
        res = ex.attribute_generation("the movie is", generated_text=" good and great", method=method, **kwargs)
    except (ValueError, TypeError, RuntimeError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return _record(res)
