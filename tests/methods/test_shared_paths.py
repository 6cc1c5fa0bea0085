"""Explainer.shared_paths: AIEG variants that differ only after the path reuse one pilot and
gradient pass, and every score is exactly what a separate call gives; variants whose path
differs (EF sign, baseline, steps, target, input) compute their own; nothing outlives the block."""
from __future__ import annotations

import pytest
import torch

TEXT = "the movie is good and the actors are great"

#: the variants of the AIEG study (benchmarks/study19/protocol.json) plus an IG, with whether
#: each one's path is the same as the first AIEG's (so reused inside the block)
VARIANTS = [
    ("aieg", {}, False),
    ("aieg", {"posnorm": "relu_max"}, True),
    ("aieg", {"posnorm": "relu_max", "attn_source": "path"}, True),
    ("aieg", {"posnorm": "relu_max", "attn_layers": "rollout"}, True),
    ("aieg", {"posnorm": "relu_max", "attn_exclude_first": True, "attn_renorm": True}, True),
    ("aieg", {"posnorm": "relu_max", "final_norm": "l2"}, True),
    ("aieg", {"posnorm": "relu_max", "ef_sign": "relu"}, False),
    ("aieg", {"posnorm": "relu_max", "baseline": "zero"}, False),
    ("aieg", {"posnorm": "relu_max", "baseline": "zero", "ef_mode": "completeness", "ef_norm": "none"}, False),
    ("integrated_gradients", {}, False),
]


def _call(ex, method, opts, **kw):
    return ex.attribute(TEXT, method=method, n_steps=kw.pop("n_steps", 8), **{**opts, **kw})


@pytest.mark.parametrize("kw", [{}, {"contrast_target": 5, "target": 9}], ids=["predicted", "contrast"])
def test_shared_scores_equal_separate_calls_and_reuse_only_equal_paths(tiny, kw):
    alone = [_call(tiny, m, o, **kw) for m, o, _ in VARIANTS]
    with tiny.shared_paths():
        shared = [_call(tiny, m, o, **kw) for m, o, _ in VARIANTS]
        assert len(tiny._path_memo) == 4  # four distinct AIEG paths among the nine variants
    assert tiny._path_memo is None
    for (m, o, reused), a, b in zip(VARIANTS, alone, shared):
        assert torch.equal(a.scores, b.scores), (m, o)
        assert a.info.get("alphas") == b.info.get("alphas")
        assert a.backend == b.backend, (o, a.backend, b.backend)  # a reused path reports the ops that made it
        if m == "aieg":
            assert (b.timing["path"] == 0.0) == reused, (o, b.timing)
            assert a.timing["path"] > 0.0


def test_a_different_input_step_count_or_noise_sample_is_not_reused(tiny):
    with tiny.shared_paths():
        a = _call(tiny, "aieg", {})
        other_text = tiny.attribute("a dull and tired film", method="aieg", n_steps=8, posnorm="relu_max")
        more_steps = _call(tiny, "aieg", {"posnorm": "relu_max"}, n_steps=10)
        noisy = _call(tiny, "aieg", {}, n_baseline_samples=2, baseline_noise=0.1, seed=1)
        noisy_v2 = _call(tiny, "aieg", {"posnorm": "relu_max"}, n_baseline_samples=2, baseline_noise=0.1, seed=1)
    assert other_text.timing["path"] > 0 and more_steps.timing["path"] > 0 and a.timing["path"] > 0
    alone = _call(tiny, "aieg", {"posnorm": "relu_max"}, n_baseline_samples=2, baseline_noise=0.1, seed=1)
    assert torch.equal(noisy_v2.scores, alone.scores)
    assert not torch.equal(noisy.scores, a.scores)


def test_weights_changed_between_blocks_are_seen(tiny_llama):
    ex = tiny_llama
    before = _call(ex, "aieg", {})
    w = ex.adapter.embeddings.weight
    saved = w.detach().clone()
    try:
        with ex.shared_paths():
            old_v2 = _call(ex, "aieg", {"posnorm": "relu_max"})
        with torch.no_grad():
            w.mul_(1.5)
        with ex.shared_paths():
            changed = _call(ex, "aieg", {"posnorm": "relu_max"})
        assert changed.timing["path"] > 0  # a new block: nothing kept from the first one
        assert torch.equal(changed.scores, _call(ex, "aieg", {"posnorm": "relu_max"}).scores)
        assert not torch.equal(changed.scores, old_v2.scores)
    finally:
        with torch.no_grad():
            w.copy_(saved)
    assert torch.equal(_call(ex, "aieg", {}).scores, before.scores)


def test_nested_blocks_share_the_outer_memo(tiny_gpt2):
    with tiny_gpt2.shared_paths():
        _call(tiny_gpt2, "aieg", {})
        with tiny_gpt2.shared_paths():
            inner = _call(tiny_gpt2, "aieg", {"posnorm": "relu_max"})
        assert tiny_gpt2._path_memo is not None
    assert inner.timing["path"] == 0.0
    assert tiny_gpt2._path_memo is None


def test_two_callable_objectives_in_one_block_are_not_confused(tiny_gpt2):
    """Objects key by identity and are held by the key: a second lambda made after the first
    is freed cannot take its place (its address may be reused)."""
    def run(col):
        return _call(tiny_gpt2, "aieg", {"posnorm": "relu_max"}, target_fn=lambda z, c=col: z[:, c], target=3)

    alone = [run(c).scores for c in (1, 2)]
    with tiny_gpt2.shared_paths():
        shared = [run(c).scores for c in (1, 2)]
    assert not torch.equal(alone[0], alone[1])
    assert all(torch.equal(a, b) for a, b in zip(alone, shared))


def test_label_set_objectives_share_by_value(tiny_llama):
    """evaluate's default F (log p over the label words) builds a new label set per call: equal
    labels must still share the path, other labels must not."""
    def run(labels, **o):
        return _call(tiny_llama, "aieg", o, target_fn="label_logprob", label_set=labels, target=labels[0])

    with tiny_llama.shared_paths():
        first = run([5, 9])
        same = run([5, 9], posnorm="relu_max")
        other = run([5, 11], posnorm="relu_max")
    assert first.timing["path"] > 0 and same.timing["path"] == 0.0 and other.timing["path"] > 0
    assert torch.equal(same.scores, run([5, 9], posnorm="relu_max").scores)
    assert torch.equal(other.scores, run([5, 11], posnorm="relu_max").scores)
