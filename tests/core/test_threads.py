"""Thread safety of a shared Explainer (issue 14): many calls from several threads give the
single-thread results. Before the per-model lock, each call's hooks fired on the other threads'
forwards (exceptions and silently wrong scores) and one call's eager-attention switch or mode
restore landed in the middle of another's."""
from __future__ import annotations

import threading

import pytest
import torch

import aieg_fast
from aieg_fast.core.model_state import model_lock
from builders import make_tiny_gpt2, model_state

TEXTS = ["the movie is good and the actors are great", "the film was bad , slow and boring", "a positive review"]
# methods with hooks (attention capture, q/k/v capture), eager switches and plain gradients
CALLS = [
    ("aieg", dict(n_steps=4)),
    ("grad_ellm", {}),
    ("attention", {}),
    ("scaled_attention", {}),
    ("integrated_gradients", dict(n_steps=4)),
    ("saliency", {}),
]


@pytest.fixture(scope="module")
def shared():
    m, t = make_tiny_gpt2()
    m.config._attn_implementation = "sdpa"  # so that AIEG and attention switch to eager and back
    return aieg_fast.load_model(m, t)


def _jobs():
    return [(text, method, kw) for text in TEXTS for method, kw in CALLS]


def test_shared_explainer_many_threads_equal_single_thread(shared):
    """4 threads × 60 calls on one Explainer (hooks, eager switches, generation): every result
    equals the one-thread result, nothing raises, the model is left as it was."""
    jobs = _jobs()
    expected = {(t, m): shared.attribute(t, method=m, **kw).scores for t, m, kw in jobs}
    gen_expected = shared.attribute_generation("the movie is", max_new_tokens=2, method="grad_ellm").scores
    before = model_state(shared)
    errors, wrong, done = [], [], [0]
    start = threading.Barrier(4)

    def worker(k):
        start.wait()
        try:
            for i in range(60):
                if i % 20 == 19:
                    g = shared.attribute_generation("the movie is", max_new_tokens=2, method="grad_ellm").scores
                    if not torch.allclose(g, gen_expected, atol=1e-6, rtol=1e-5, equal_nan=True):
                        wrong.append(("generation", k, i))
                    continue
                t, m, kw = jobs[(i * 7 + k * 5) % len(jobs)]
                got = shared.attribute(t, method=m, **kw).scores
                if not torch.allclose(got, expected[(t, m)], atol=1e-6, rtol=1e-5):
                    wrong.append((t, m, k, i))
                done[0] += 1
        except Exception as err:  # noqa: BLE001 - every failure is collected and reported
            errors.append(repr(err))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors[:5]
    assert not wrong, wrong[:5]
    assert done[0] == 4 * 57
    assert model_state(shared) == before


def test_lock_is_per_model_and_reentrant(shared):
    """One re-entrant lock per model object: taken twice by one thread, not shared by two models."""
    lock = model_lock(shared.model)
    assert model_lock(shared.model) is lock
    with lock, lock:  # re-entrant: an attribution inside a held lock does not deadlock
        shared.attribute(TEXTS[0], method="saliency")
    other, _ = make_tiny_gpt2(seed=1)
    assert model_lock(other) is not lock


def test_a_waiting_call_does_not_run_while_another_holds_the_model(shared):
    """A second thread's call waits while the model's lock is held (calls are serialised)."""
    lock = model_lock(shared.model)
    finished = threading.Event()

    def call():
        shared.attribute(TEXTS[0], method="saliency")
        finished.set()

    with lock:
        th = threading.Thread(target=call)
        th.start()
        assert not finished.wait(0.3)
    th.join(timeout=30)
    assert finished.is_set()
