"""The compiled path (issue 18, item 2): ``compile=`` runs the path chunks through a
``torch.compile``d decoder stack. Results equal eager ones, padding a length up to its bucket
changes nothing, two lengths of one bucket share one graph, and the result says what ran.

The equality tests use the ``aot_eager`` backend (Dynamo's graph capture and AOTAutograd's
forward/backward split, without inductor's C++ compile, which takes about a minute on a 2-core
CPU); ``test_inductor_equals_eager`` checks the default backend (marked ``compile``).
"""
from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

import aieg_fast
from aieg_fast.core.compiled import LENGTH_BUCKET, bucket_length, chunk_rows
from builders import make_tiny_gpt2, make_tiny_llama

pytestmark = pytest.mark.filterwarnings("ignore::aieg_fast.AttributionWarning")  # 8 steps: IG's completeness flag

IG = "integrated_gradients"
IDG = "integrated_decision_gradients"
SHORT = "the movie is good"                                   # 5 tokens with the LLaMA tokenizer's BOS
LONGER = "the movie is good and the actors"                   # 8: the same bucket of 16
OTHER_BUCKET = "the movie is good and the actors are great , slow and boring . what a wonderful story"  # 20


#: one chunk of 8 path points everywhere, so that the tests share their compiled graphs
STEPS = dict(n_steps=8, internal_batch_size=8)


@pytest.fixture(scope="module")
def llama_pair():
    """(eager, compiled) explainers of one tiny LLaMA; the compiled one keeps its graphs for the module."""
    m, t = make_tiny_llama()
    return aieg_fast.load_model(m, t), aieg_fast.load_model(m, t, compile="aot_eager")


def _close(a, b):
    torch.testing.assert_close(a.scores, b.scores, rtol=1e-4, atol=1e-6)


def test_buckets_and_chunks():
    assert [bucket_length(L, 64) for L in (1, 16, 17, 60)] == [16, 16, 32, 64]
    assert bucket_length(60, 62) == 62 and bucket_length(70, 64) == 70  # never past the positions, never below L
    assert chunk_rows(50, 10) == [(0, 10, 10), (10, 20, 10), (20, 30, 10), (30, 40, 10), (40, 50, 10)]
    assert chunk_rows(21, 8) == [(0, 8, 8), (8, 16, 8), (16, 21, 8)]
    assert chunk_rows(19, 16) == [(0, 16, 16), (16, 19, 4)]  # the rest rounded up to a power of two


@pytest.mark.parametrize("method, opts", [(IG, {}), (IDG, {}), ("aieg", {"attn_layers": "none"})])
def test_compiled_equals_eager(llama_pair, method, opts):
    eager, comp = llama_pair
    kw = dict(method=method, target=" good", **STEPS, **opts)
    a = eager.attribute(SHORT, **kw)
    b = comp.attribute(SHORT, **kw)
    _close(a, b)
    assert b.info["compiled"] is True and b.info["compile_backend"] == "aot_eager"
    assert "compiled" not in a.info  # an eager call's info is as before
    assert b.info["F_input"] == pytest.approx(a.info["F_input"], rel=1e-5)


def test_padded_batch_equals_eager(llama_pair):
    """Rows with an attention mask (a batch of two lengths, left and right padding) and a
    length padded up to its bucket: the same scores as eager."""
    eager, comp = llama_pair
    for side in ("right", "left"):
        kw = dict(method=IG, padding_side=side, **STEPS)
        for a, b in zip(eager.attribute([SHORT, LONGER], **kw), comp.attribute([SHORT, LONGER], **kw)):
            _close(a, b)


def test_two_lengths_in_one_bucket_do_not_recompile(llama_pair):
    eager, comp = llama_pair
    kw = dict(method=IG, target=" good", **STEPS)
    first = comp.attribute(SHORT, **kw)
    stack = comp.compiled_stacks["aot_eager"]
    graphs, captured = dict(stack.first_runs), counters["stats"]["unique_graphs"]
    assert len(eager.encode(SHORT)[0]) != len(eager.encode(LONGER)[0])
    assert bucket_length(len(eager.encode(LONGER)[0]), 64) == bucket_length(len(eager.encode(SHORT)[0]), 64) == LENGTH_BUCKET
    second = comp.attribute(LONGER, **kw)
    assert stack.first_runs == graphs and counters["stats"]["unique_graphs"] == captured  # no new graph
    assert second.info["compiled"] is True and second.info["compile_seconds"] == 0.0
    _close(second, eager.attribute(LONGER, **kw))
    fewer = dict(kw, n_steps=6)  # 6 points run as 8 rows (the rest of a chunk rounded up to a power of two)
    _close(comp.attribute(LONGER, **fewer), eager.attribute(LONGER, **fewer))
    assert stack.first_runs == graphs and counters["stats"]["unique_graphs"] == captured
    assert first.info["compiled"] is True
    third = comp.attribute(OTHER_BUCKET, **kw)  # another bucket: one more graph, timed
    assert bucket_length(len(eager.encode(OTHER_BUCKET)[0]), 64) == 2 * LENGTH_BUCKET
    assert len(stack.first_runs) == len(graphs) + 1 and counters["stats"]["unique_graphs"] == captured + 1
    assert third.info["compile_seconds"] > 0
    _close(third, eager.attribute(OTHER_BUCKET, **kw))


def test_multi_token_target_and_contrast(llama_pair):
    eager, comp = llama_pair
    for kw in (dict(target=" good and", target_fn="logprob"), dict(target=" good", contrast_target=" the")):
        _close(eager.attribute(SHORT, method=IG, **STEPS, **kw), comp.attribute(SHORT, method=IG, **STEPS, **kw))


def test_gpt2_and_methods_without_a_path(tiny_gpt2):
    """GPT-2 (learned positions: the bucket stays within them); saliency has no path chunks, so
    nothing is compiled and the result says so. ``compile=False`` on the call overrides the
    explainer's default."""
    comp = aieg_fast.load_model(tiny_gpt2.model, tiny_gpt2.tokenizer, compile="aot_eager")
    kw = dict(method=IG, **STEPS)
    _close(tiny_gpt2.attribute(LONGER, **kw), comp.attribute(LONGER, **kw))
    sal = comp.attribute(LONGER, method="saliency")
    assert sal.info["compiled"] is False and sal.info["compile_seconds"] == 0.0
    assert "compiled" not in comp.attribute(LONGER, compile=False, **kw).info


def test_a_dataset_run_with_a_compiling_explainer(llama_pair, tmp_path):
    """``attribute_dataset`` calls ``attribute`` without ``compile``: the explainer's default
    (``load_model(compile=...)``) applies, and the records hold the compiled scores."""
    import json

    from aieg_fast.dataset_attribution import RECORDS_FILE, attribute_dataset

    eager, comp = llama_pair
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": t, "target": " good"}) + "\n" for t in (SHORT, LONGER)), encoding="utf-8")
    attribute_dataset(data, tmp_path / "o", comp, method=IG, batch_size=1, progress=False, **STEPS)
    recs = [json.loads(line) for line in (tmp_path / "o" / RECORDS_FILE).read_text(encoding="utf-8").splitlines()]
    for text, rec in zip((SHORT, LONGER), recs):
        assert rec["info"]["compiled"] is True
        torch.testing.assert_close(torch.tensor(rec["scores"]), eager.attribute(text, method=IG, target=" good", **STEPS).scores,
                                   rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("bad", ["no-such-backend", 1, "True"])
def test_bad_compile_is_refused(tiny_gpt2, bad):
    with pytest.raises(ValueError, match=r"compile must be True, False or a torch.compile backend name .*got"):
        tiny_gpt2.attribute(SHORT, method=IG, compile=bad)
    with pytest.raises(ValueError, match="compile must be"):
        aieg_fast.load_model(tiny_gpt2.model, tiny_gpt2.tokenizer, compile=bad)


@pytest.mark.compile
def test_inductor_equals_eager():
    """The default backend (inductor, a C++ compile of the forward and the backward)."""
    m, t = make_tiny_gpt2()
    eager, comp = aieg_fast.load_model(m, t), aieg_fast.load_model(m, t, compile=True)
    kw = dict(method=IG, **STEPS)
    a, b = eager.attribute(SHORT, **kw), comp.attribute(SHORT, **kw)
    _close(a, b)
    assert b.info["compile_backend"] == "inductor" and b.info["compile_seconds"] > 0
    assert comp.attribute(SHORT, **kw).info["compile_seconds"] == 0.0
