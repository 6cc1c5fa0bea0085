"""LongRoPE (Phi-3/3.5-mini 128k, Phi-4-mini): transformers takes the short or long rotary
factors from the largest position of a whole forward, so a text up to the switch length
(``original_max_position_embeddings``) must never share a forward with positions past it: a
padded batch straddling it is refused, compile's padded shape stops at it, generated steps
whose contexts straddle it are refused, and the metric forwards split at it. Before, each of
these explained a short text with the long factors (F was not the model's own logit)."""
from __future__ import annotations

import pytest
import torch

import aieg_fast
from builders import TINY, sentencepiece_like_tokenizer, special_ids

SWITCH = 8
SHORT, LONG = "the movie is good", "the movie is good and the actors are great , the film was bad"


@pytest.fixture(scope="module")
def phi3_longrope():
    from transformers import Phi3Config, Phi3ForCausalLM

    tok = sentencepiece_like_tokenizer()
    n = TINY["hidden_size"] // TINY["num_attention_heads"] // 2
    rope = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * n,
            "long_factor": [4.0 + i for i in range(n)], "original_max_position_embeddings": SWITCH}
    cfg = Phi3Config(**TINY, **special_ids(tok), original_max_position_embeddings=SWITCH, rope_parameters=rope)
    torch.manual_seed(0)
    return aieg_fast.load_model(Phi3ForCausalLM(cfg).eval(), tok)


def _own_logit(ex, ids, target):
    with torch.no_grad():
        return ex.model(torch.tensor([ids])).logits[0, -1, target].item()


def test_the_switch_is_read_from_the_config(phi3_longrope, tiny_llama):
    assert phi3_longrope.adapter.rope_switch == SWITCH and tiny_llama.adapter.rope_switch is None


def test_a_batch_on_both_sides_of_the_switch_is_refused_and_alone_each_is_the_model(phi3_longrope):
    ex = phi3_longrope
    with pytest.raises(ValueError, match=rf"on both sides of {SWITCH} positions, where this model's LongRoPE switches"):
        ex.attribute([SHORT, LONG], method="saliency")
    for text in (SHORT, LONG):
        res = ex.attribute(text, method="integrated_gradients", n_steps=4)
        assert res.info["F_input"] == pytest.approx(_own_logit(ex, res.token_ids, res.target["id"]), abs=1e-4)


def test_generated_steps_across_the_switch_are_refused(phi3_longrope):
    ex = phi3_longrope
    ids, _ = ex.encode("the movie is good and")  # 6 tokens: steps' contexts 6, 7, 8 stay up to the switch
    assert len(ids) == 6
    res = ex.attribute_generation("the movie is good and", generated_text=[10, 11, 12], method="saliency")
    assert res.scores.shape[0] == 3
    with pytest.raises(ValueError, match="contexts of the generated steps .* on both sides of 8 positions"):
        ex.attribute_generation("the movie is good and", generated_text=[10, 11, 12, 13], method="saliency")


def test_compiled_shape_is_not_padded_past_the_switch(phi3_longrope):
    from aieg_fast.core.compiled import compiled_stack

    stack = compiled_stack({}, phi3_longrope.adapter, "aot_eager")
    assert stack.bucket(5) == SWITCH and stack.bucket(9) == 16  # a short text stays short; a long one pads as usual


def test_metric_forwards_split_at_the_switch(phi3_longrope):
    from aieg_fast.eval.forwards import last_logits_ids

    ex = phi3_longrope
    seqs = [ex.encode(t)[0] for t in (SHORT, LONG, "bad")]
    got = last_logits_ids(ex, seqs, 8)
    for row, ids in zip(got, seqs):
        with torch.no_grad():
            torch.testing.assert_close(row, ex.model(torch.tensor([ids])).logits[0, -1].float(), atol=1e-4, rtol=1e-4)
